//! What the hardware tells `--explain` (ADR-0028): every timed wait of a
//! task labelled with what it is (the component, its resource class, and
//! a breakdown into queueing, service and latency terms), and the
//! components' counters at the start and end of the explained interval.
//!
//! A thread-local recorder, off by default: [`install`] turns it on for
//! one run on this thread and [`finish`] takes what it kept. While off,
//! every hook here is one `Cell<bool>` test ([`recording`]) and the sleeps
//! are plain `sim::sleep_until`s.
//!
//! How a wait is labelled: the code that books a server pushes terms in
//! time order ([`push`], [`push_booking`]) and then sleeps with
//! [`sleep_until`], which turns the terms pushed in the same poll into a
//! label and hands its number to the causal log
//! (`sim::sleep_until_labelled`). Terms are read back from the sleep's end
//! (`crate::explain` walks them): the last term ends at the wake, and a
//! sleep longer than its terms is queueing on its first component.
//!
//! Kept small (ADR-0039): waits with equal terms share one label, a
//! server caches its component id, and recording stops at the end mark.
//!
//! Knows the hardware's servers, their names and classes, and virtual
//! time; nothing of workloads or of how the critical path is walked.

use std::cell::{Cell, RefCell};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use super::server::{Activity, Reservation, SerialServer, ServerStats};
use crate::sim::{self, SimTime, Sleep};

/// A resource class: what kind of thing a piece of time was spent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// A link between SIPs.
    InterSipLink,
    /// A UCIe link between cubes.
    Ucie,
    /// A cube's network on chip (router links, attachments, HBM ports).
    Noc,
    /// PCIe from the host and the management bus.
    Pcie,
    /// An HBM pseudo-channel.
    Hbm,
    /// An SRAM or TCM port, or a TCM access.
    SramTcm,
    /// PE_GEMM or PE_MATH.
    PeMath,
    /// A DMA engine issuing a descriptor.
    DmaIssue,
    /// Kernel launch: host, IO_CPU and M_CPU dispatch.
    Launch,
    /// Waiting for an IPCQ credit (a free slot at the receiver).
    CreditWait,
    /// Waiting for a peer with no recorded cause (a doorbell's landing).
    PeerWait,
    /// Anything not labelled.
    Other,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 12] = [
        Class::InterSipLink,
        Class::Ucie,
        Class::Noc,
        Class::Pcie,
        Class::Hbm,
        Class::SramTcm,
        Class::PeMath,
        Class::DmaIssue,
        Class::Launch,
        Class::CreditWait,
        Class::PeerWait,
        Class::Other,
    ];

    /// Its name in reports (`inter_sip_link`, ...).
    pub fn name(self) -> &'static str {
        self.names().0
    }

    /// The name of its figure: `explain_<name>_ps`.
    pub fn figure(self) -> &'static str {
        self.names().1
    }

    fn names(self) -> (&'static str, &'static str) {
        match self {
            Class::InterSipLink => ("inter_sip_link", "explain_inter_sip_link_ps"),
            Class::Ucie => ("ucie", "explain_ucie_ps"),
            Class::Noc => ("noc", "explain_noc_ps"),
            Class::Pcie => ("pcie", "explain_pcie_ps"),
            Class::Hbm => ("hbm", "explain_hbm_ps"),
            Class::SramTcm => ("sram_tcm", "explain_sram_tcm_ps"),
            Class::PeMath => ("pe_math", "explain_pe_math_ps"),
            Class::DmaIssue => ("dma_issue", "explain_dma_issue_ps"),
            Class::Launch => ("launch", "explain_launch_ps"),
            Class::CreditWait => ("credit_wait", "explain_credit_wait_ps"),
            Class::PeerWait => ("peer_wait", "explain_peer_wait_ps"),
            Class::Other => ("other", "explain_other_ps"),
        }
    }

    /// Whether it is a class of links.
    pub fn is_link(self) -> bool {
        matches!(
            self,
            Class::InterSipLink | Class::Ucie | Class::Noc | Class::Pcie
        )
    }

    /// The class a server of `activity` has unless told otherwise (links
    /// are told theirs by the fabric, from their edge's kind).
    pub fn of_activity(activity: Activity) -> Class {
        match activity {
            Activity::Packet => Class::Noc,
            Activity::PcAccess => Class::Hbm,
            Activity::MemoryAccess => Class::SramTcm,
            Activity::DmaIssue => Class::DmaIssue,
            Activity::Dispatch => Class::Launch,
            Activity::Gemm | Activity::Math => Class::PeMath,
        }
    }
}

/// What one term of a wait is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TermKind {
    /// Waiting for the component to be free (contention).
    Queue,
    /// Being served: serialisation on a link, an access, an issue, a math
    /// op.
    Service,
    /// Flying: a link's first-flit latency, a memory's fixed latency.
    Latency,
    /// Waiting for something else (a credit, a peer, a fixed delay).
    Wait,
}

impl TermKind {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            TermKind::Queue => "queue",
            TermKind::Service => "service",
            TermKind::Latency => "latency",
            TermKind::Wait => "wait",
        }
    }
}

/// One term: `ps` of `kind` on component `component`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Term {
    /// Index into [`Recording::components`].
    pub component: u32,
    /// What the time was.
    pub kind: TermKind,
    /// How long, in ps.
    pub ps: u64,
}

/// A named thing time is spent on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Its name (a trace track's name).
    pub name: Rc<str>,
    /// Its class.
    pub class: Class,
}

/// A server's counters at the start and end of the explained interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Index into [`Recording::components`].
    pub component: u32,
    /// At the interval's start.
    pub start: ServerStats,
    /// At its end.
    pub end: ServerStats,
}

/// What the recorder kept for one run.
#[derive(Debug, Default, Clone)]
pub struct Recording {
    /// Every component named so far.
    pub components: Vec<Component>,
    /// Every distinct label's terms, one after another.
    pub terms: Vec<Term>,
    /// Label `i` is `terms[labels[i].0 .. labels[i].1]`. Labels are
    /// interned: waits with equal terms share one.
    pub labels: Vec<(u32, u32)>,
    /// Queueing pushed per component since the interval's start, in ps.
    pub queued: Vec<u64>,
    /// The interval's start, once marked.
    pub start: Option<SimTime>,
    /// The interval's end and the causal-log poll that ended it.
    pub end: Option<(SimTime, Option<u32>)>,
    /// The counters over the interval of every server that did anything
    /// in it (after the end mark).
    pub counters: Vec<Counters>,
    /// What the interval is, as the marker said.
    pub interval: String,
    /// Counters at the start, until the end is marked.
    started: Vec<(u32, ServerStats)>,
}

impl Recording {
    /// The terms of label `label` ([`sim::causal::NO_LABEL`]: none).
    pub fn label(&self, label: u32) -> &[Term] {
        match self.labels.get(label as usize) {
            Some(&(from, to)) => &self.terms[from as usize..to as usize],
            None => &[],
        }
    }
}

#[derive(Default)]
struct Recorder {
    kept: Recording,
    /// Component ids by the address of a server's name (the recorder
    /// holds the name, so the address is not reused), once servers no
    /// longer cache ids ([`cache_generation`]).
    by_address: FxHashMap<usize, u32>,
    /// Component ids of names given by a key ([`push_keyed`]).
    by_key: FxHashMap<[u32; 3], u32>,
    /// Component ids of names given as text.
    by_text: FxHashMap<Rc<str>, u32>,
    /// Labels by the hash of their terms (the first of each hash: a
    /// colliding label with other terms is kept apart, not shared).
    by_terms: FxHashMap<u64, u32>,
    /// Terms pushed in the poll `scratch_poll` and not yet slept on.
    scratch: Vec<Term>,
    scratch_poll: Option<u32>,
}

thread_local! {
    static RECORDING: Cell<bool> = const { Cell::new(false) };
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
    /// Which recording is installed: servers cache their component id
    /// for one (0: none; past `u16::MAX`, they no longer cache and ids
    /// are found by the name's address).
    static GENERATION: Cell<u32> = const { Cell::new(0) };
}

/// Whether a recorder is installed on this thread and the explained
/// interval has not ended (cheap).
#[inline]
pub fn recording() -> bool {
    RECORDING.with(Cell::get)
}

/// Installs a fresh recorder on this thread (replacing any).
pub fn install() {
    GENERATION.with(|g| g.set(g.get().saturating_add(1)));
    RECORDER.with(|r| *r.borrow_mut() = Some(Recorder::default()));
    RECORDING.with(|r| r.set(true));
}

/// Removes this thread's recorder and returns what it kept.
pub fn finish() -> Option<Recording> {
    RECORDING.with(|r| r.set(false));
    RECORDER.with(|r| r.borrow_mut().take()).map(|r| r.kept)
}

fn with<T>(f: impl FnOnce(&mut Recorder) -> T) -> Option<T> {
    RECORDER.with(|r| r.borrow_mut().as_mut().map(f))
}

/// Names `server` a component of class `class` now (the fabric, for
/// links: their class comes from their edge's kind, not their activity).
pub fn set_class(server: &SerialServer, class: Class) {
    server_component(server, class);
}

/// The generation servers cache their component id for, while there is
/// one: a thread's first `u16::MAX` recordings (a later one finds ids by
/// address; a generation is never reused, so a cached id is never stale).
fn cache_generation() -> Option<u16> {
    u16::try_from(GENERATION.with(Cell::get)).ok()
}

/// The component id of `server`, named of class `class` on first use.
fn server_component(server: &SerialServer, class: Class) -> Option<u32> {
    if !recording() {
        return None;
    }
    let Some(generation) = cache_generation() else {
        return with(|r| r.by_address(server.name_rc(), class));
    };
    if let Some(id) = server.explain_id(generation) {
        return Some(id);
    }
    let id = with(|r| r.add(server.name_rc().clone(), class))?;
    server.set_explain_id(generation, id);
    Some(id)
}

impl Recorder {
    fn by_address(&mut self, name: &Rc<str>, class: Class) -> u32 {
        let key = Rc::as_ptr(name).cast::<u8>() as usize;
        if let Some(&id) = self.by_address.get(&key) {
            return id;
        }
        let id = self.add(name.clone(), class);
        self.by_address.insert(key, id);
        id
    }

    fn named(&mut self, name: &str, class: Class) -> u32 {
        if let Some(&id) = self.by_text.get(name) {
            return id;
        }
        let name: Rc<str> = name.into();
        let id = self.add(name.clone(), class);
        self.by_text.insert(name, id);
        id
    }

    fn add(&mut self, name: Rc<str>, class: Class) -> u32 {
        let id = u32::try_from(self.kept.components.len()).expect("2^32 components");
        self.kept.components.push(Component { name, class });
        self.kept.queued.push(0);
        id
    }

    fn push(&mut self, term: Term) {
        let poll = sim::current_poll();
        if self.scratch_poll != poll {
            self.scratch.clear();
            self.scratch_poll = poll;
        }
        if term.ps == 0 {
            return;
        }
        if term.kind == TermKind::Queue && self.kept.start.is_some() && self.kept.end.is_none() {
            self.kept.queued[term.component as usize] += term.ps;
        }
        match self.scratch.last_mut() {
            Some(last) if last.component == term.component && last.kind == term.kind => {
                last.ps += term.ps;
            }
            _ => self.scratch.push(term),
        }
    }

    fn take_label(&mut self) -> u32 {
        if self.scratch_poll != sim::current_poll() || self.scratch.is_empty() {
            self.scratch.clear();
            return sim::causal::NO_LABEL;
        }
        let hash = {
            let mut hasher = rustc_hash::FxHasher::default();
            self.scratch.hash(&mut hasher);
            hasher.finish()
        };
        if let Some(&label) = self.by_terms.get(&hash)
            && self.kept.label(label) == self.scratch.as_slice()
        {
            self.scratch.clear();
            return label;
        }
        let from = u32::try_from(self.kept.terms.len()).expect("2^32 terms");
        self.kept.terms.append(&mut self.scratch);
        let to = u32::try_from(self.kept.terms.len()).expect("2^32 terms");
        let label = u32::try_from(self.kept.labels.len()).expect("2^32 labels");
        self.kept.labels.push((from, to));
        self.by_terms.entry(hash).or_insert(label);
        label
    }
}

/// The component id of `server` (named on first use; the server caches
/// it, so a booking finds it without a lookup).
pub fn component(server: &SerialServer) -> Option<u32> {
    server_component(server, Class::of_activity(server.activity()))
}

/// The component id of a thing named `name` with no server (the host, a
/// TCM's fixed latency, an IPCQ ring).
pub fn named(name: &str, class: Class) -> Option<u32> {
    if !recording() {
        return None;
    }
    with(|r| r.named(name, class))
}

/// Pushes a term of the wait the running poll is about to sleep on.
pub fn push(component: u32, kind: TermKind, ps: u64) {
    if !recording() {
        return;
    }
    with(|r| {
        r.push(Term {
            component,
            kind,
            ps,
        })
    });
}

/// Pushes a booking of `server` asked for at `arrives` and served over
/// `booked`: queueing until its start, service until its end.
pub fn push_booking(server: &SerialServer, arrives: SimTime, booked: Reservation) {
    if let Some(id) = component(server) {
        let queue = booked.start.saturating_since(arrives).as_ps();
        push(id, TermKind::Queue, queue);
        let service = booked.end.saturating_since(booked.start).as_ps();
        push(id, TermKind::Service, service);
    }
}

/// Pushes `ps` of `kind` on `server`.
pub fn push_server(server: &SerialServer, kind: TermKind, ps: u64) {
    if let Some(id) = component(server) {
        push(id, kind, ps);
    }
}

/// Pushes `ps` of `kind` on the thing named `name` of class `class`.
pub fn push_named(name: &str, class: Class, kind: TermKind, ps: u64) {
    if let Some(id) = named(name, class) {
        push(id, kind, ps);
    }
}

/// [`push_named`] for a thing whose name `name` makes from `key` (e.g.
/// a TCM's from its SIP, cube and PE): the name is made only the first
/// time the key is seen in a recording.
pub fn push_keyed(
    key: [u32; 3],
    name: impl FnOnce() -> String,
    class: Class,
    kind: TermKind,
    ps: u64,
) {
    if !recording() {
        return;
    }
    let id = with(|r| match r.by_key.get(&key) {
        Some(&id) => id,
        None => {
            let id = r.named(&name(), class);
            r.by_key.insert(key, id);
            id
        }
    });
    if let Some(id) = id {
        push(id, kind, ps);
    }
}

/// `sim::sleep_until(t)`, labelled with the terms pushed in this poll
/// when recording. Takes exactly the same time either way.
#[inline]
pub fn sleep_until(t: SimTime) -> Sleep {
    if !recording() {
        return sim::sleep_until(t);
    }
    let label = with(Recorder::take_label).unwrap_or(sim::causal::NO_LABEL);
    sim::sleep_until_labelled(t, label)
}

/// Drops the terms pushed in this poll (a booking whose wait is not slept
/// on here).
pub fn discard() {
    with(|r| r.scratch.clear());
}

/// Marks the start of the explained interval at `now` (a later mark
/// replaces an earlier one) and snapshots the counters of `servers`.
pub fn mark_start<'a>(now: SimTime, servers: impl IntoIterator<Item = &'a SerialServer>) {
    if !recording() {
        return;
    }
    let snapshot: Vec<(u32, ServerStats)> = servers
        .into_iter()
        .filter_map(|s| Some((component(s)?, s.stats(now))))
        .collect();
    with(|r| {
        r.kept.start = Some(now);
        r.kept.started = snapshot;
        r.kept.queued.iter_mut().for_each(|q| *q = 0);
    });
}

/// Whether the end of the interval is marked.
pub fn end_marked() -> bool {
    with(|r| r.kept.end.is_some()).unwrap_or(false)
}

/// Marks the end of the explained interval at `now`, reached in causal-log
/// poll `poll` (the first mark counts), names it `what`, and takes the
/// counters of the servers snapshotted at the start. Then stops recording
/// (here and in the running simulation's causal log): the walk starts at
/// `poll` and only goes to earlier ones, so nothing later can be on the
/// critical path (ADR-0039).
pub fn mark_end<'a>(
    now: SimTime,
    poll: Option<u32>,
    what: &str,
    servers: impl IntoIterator<Item = &'a SerialServer>,
) {
    if !recording() || end_marked() {
        return;
    }
    let Some(started) = with(|r| std::mem::take(&mut r.kept.started)) else {
        return;
    };
    let counters = active_counters(&started, servers, now);
    with(|r| {
        r.kept.start.get_or_insert(SimTime::ZERO);
        r.kept.end = Some((now, poll));
        r.kept.interval = what.to_owned();
        r.kept.counters = counters;
    });
    RECORDING.with(|r| r.set(false));
    sim::stop_recording_causes();
}

/// The counters of the servers snapshotted at the start (`started`) and
/// among `servers` now that did anything in between (bytes, busy time or
/// queueing), in the order of the start's snapshot.
fn active_counters<'a>(
    started: &[(u32, ServerStats)],
    servers: impl IntoIterator<Item = &'a SerialServer>,
    now: SimTime,
) -> Vec<Counters> {
    let queued = with(|r| r.kept.queued.clone()).unwrap_or_default();
    let mut position = vec![u32::MAX; queued.len()];
    for (index, &(component, _)) in started.iter().enumerate() {
        position[component as usize] = u32::try_from(index).unwrap_or(u32::MAX);
    }
    let mut counters: Vec<(u32, Counters)> = servers
        .into_iter()
        .filter_map(|server| {
            let component = component(server)?;
            let &at = position.get(component as usize)?;
            let &(_, start) = started.get(at as usize)?;
            let end = server.stats(now);
            let active = end.busy != start.busy
                || end.bytes != start.bytes
                || queued.get(component as usize).is_some_and(|&q| q > 0);
            active.then_some((
                at,
                Counters {
                    component,
                    start,
                    end,
                },
            ))
        })
        .collect();
    counters.sort_by_key(|&(at, _)| at);
    counters.dedup_by_key(|&mut (at, _)| at);
    counters.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids of two servers, asked twice each, in one recording.
    fn ids(a: &SerialServer, b: &SerialServer) -> [Option<u32>; 4] {
        [component(a), component(b), component(a), component(b)]
    }

    /// A server keeps one id per recording; a new recording numbers its
    /// components afresh, also once servers no longer cache ids.
    #[test]
    fn a_server_is_one_component_per_recording() {
        let a = SerialServer::new("a", Activity::Packet);
        let b = SerialServer::new("b", Activity::PcAccess);
        assert_eq!(component(&a), None, "not recording");
        for generation in [None, Some(u32::from(u16::MAX) - 1)] {
            if let Some(g) = generation {
                GENERATION.with(|c| c.set(g));
            }
            install();
            assert_eq!(ids(&a, &b), [Some(0), Some(1), Some(0), Some(1)]);
            install();
            assert_eq!(ids(&b, &a), [Some(0), Some(1), Some(0), Some(1)]);
        }
        assert_eq!(cache_generation(), None);
        install();
        set_class(&b, Class::Ucie);
        assert_eq!(ids(&a, &b), [Some(1), Some(0), Some(1), Some(0)]);
        let kept = finish().unwrap();
        let classes: Vec<Class> = kept.components.iter().map(|c| c.class).collect();
        assert_eq!(classes, [Class::Ucie, Class::Noc]);
        assert_eq!(component(&a), None, "finished");
    }
}
