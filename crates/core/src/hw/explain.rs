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
//! Kept small (ADR-0039, ADR-0046): waits with equal terms share one
//! label, packed 8 bytes an item; a constant run of terms (a route's
//! uncontended header crossing) is kept once and pushed as one item
//! ([`push_run`]); a server caches its component id; and recording stops
//! at the end mark.
//!
//! Knows the hardware's servers, their names and classes, and virtual
//! time; nothing of workloads or of how the critical path is walked.

use std::cell::{Cell, RefCell};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use super::server::{Activity, Reservation, SerialServer, ServerStats};
use crate::sim::{self, SimDuration, SimTime, Sleep};

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

    /// Whether `name` is the name of a class of links (an explanation
    /// carries its classes by name).
    pub fn names_a_link(name: &str) -> bool {
        Class::ALL.iter().any(|c| c.name() == name && c.is_link())
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
    /// Every kind, in the order of their numbers.
    const ALL: [TermKind; 4] = [
        TermKind::Queue,
        TermKind::Service,
        TermKind::Latency,
        TermKind::Wait,
    ];

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
    /// Where it sorts among equals in a report: a link by its edge index,
    /// then every other component in the order it was first named
    /// (`2^32` + its id), whenever it was named (ADR-0051).
    pub rank: u64,
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
    /// Every distinct label, packed ([`pack`]): label `l` is the word at
    /// `l` (how many words follow) and those words. Labels are interned:
    /// waits with equal items share one.
    words: Vec<u64>,
    /// Every constant run's terms, one after another ([`push_run`]).
    run_terms: Vec<Term>,
    /// Run `i` is `run_terms[runs[i].0 .. runs[i].1]`; `runs[i].2`:
    /// whether it has queueing terms.
    runs: Vec<(u32, u32, bool)>,
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
    /// The terms of label `label` ([`sim::causal::NO_LABEL`]: none), in
    /// the order they were pushed: runs spelled out, and consecutive terms
    /// of one component and kind as one, as if every term had been pushed
    /// on its own.
    pub fn label(&self, label: u32) -> Vec<Term> {
        let mut terms: Vec<Term> = Vec::new();
        let Some(&count) = self.words.get(label as usize) else {
            return terms;
        };
        let from = label as usize + 1;
        let words = &self.words[from..from + count as usize];
        for item in unpack(words) {
            match item {
                Item::Term(term) => merge_into(&mut terms, term),
                Item::Run(run) => {
                    let (from, to, _) = self.runs[run as usize];
                    for &term in &self.run_terms[from as usize..to as usize] {
                        merge_into(&mut terms, term);
                    }
                }
            }
        }
        terms
    }
}

/// Pushes `term` onto `terms`, added to the last one when it is of the
/// same component and kind.
fn merge_into(terms: &mut Vec<Term>, term: Term) {
    match terms.last_mut() {
        Some(last) if last.component == term.component && last.kind == term.kind => {
            last.ps += term.ps;
        }
        _ => terms.push(term),
    }
}

/// What a wait's label holds, in push order: a term, or a constant run
/// of terms ([`push_run`]) by its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Term(Term),
    Run(u32),
}

/// The component field of a word that holds a run (no component has it:
/// [`MAX_COMPONENTS`]).
const RUN_TAG: u32 = u32::MAX;
/// How many components a recording names at most: ids fit in 30 bits.
const MAX_COMPONENTS: u32 = (1 << 30) - 1;
/// The high half of a term's word when its ps does not fit there: the
/// ps follows in the next word.
const LONG_PS: u64 = u32::MAX as u64;

/// Appends `items` to `words`, 8 bytes an item: the low half is the
/// component id shifted by 2 and the kind (or [`RUN_TAG`]), the high half
/// the ps (or the run's id); a ps of `u32::MAX` or more takes a second
/// word. Equal items give equal words, so labels compare as words.
fn pack(items: &[Item], words: &mut Vec<u64>) {
    for item in items {
        match *item {
            Item::Term(Term {
                component,
                kind,
                ps,
            }) => {
                let low = u64::from(component << 2 | kind as u32);
                match u32::try_from(ps) {
                    Ok(small) if small != u32::MAX => words.push(u64::from(small) << 32 | low),
                    _ => words.extend([LONG_PS << 32 | low, ps]),
                }
            }
            Item::Run(run) => words.push(u64::from(run) << 32 | u64::from(RUN_TAG)),
        }
    }
}

/// The items [`pack`] packed into `words`.
fn unpack(words: &[u64]) -> impl Iterator<Item = Item> + '_ {
    let mut words = words.iter();
    std::iter::from_fn(move || {
        let &word = words.next()?;
        let (low, high) = (word as u32, word >> 32);
        if low == RUN_TAG {
            return Some(Item::Run(high as u32));
        }
        let ps = match high {
            LONG_PS => *words.next()?,
            small => small,
        };
        let kind = TermKind::ALL[(low & 3) as usize];
        Some(Item::Term(Term {
            component: low >> 2,
            kind,
            ps,
        }))
    })
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
    /// Labels by the hash of their words (the first of each hash: a
    /// colliding label with other words is kept apart, not shared).
    by_words: FxHashMap<u64, u32>,
    /// Items pushed in the poll `scratch_poll` and not yet slept on.
    scratch: Vec<Item>,
    scratch_poll: Option<u32>,
    /// The scratch packed, while a label is taken.
    packed: Vec<u64>,
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

/// Names `server`, the link of edge `edge`, a component of class `class`
/// now (the link table, when it makes a link while recording: a link's
/// class comes from its edge's kind, not its activity).
pub fn set_link(server: &SerialServer, class: Class, edge: usize) {
    if let Some(id) = server_component(server, class) {
        with(|r| r.kept.components[id as usize].rank = edge as u64);
    }
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
        let id = u32::try_from(self.kept.components.len())
            .ok()
            .filter(|&id| id < MAX_COMPONENTS)
            .expect("more than 2^30 components in one --explain recording");
        let rank = (1 << 32) + u64::from(id);
        self.kept.components.push(Component { name, class, rank });
        self.kept.queued.push(0);
        id
    }

    /// Whether queueing pushed now counts: inside the interval.
    fn in_interval(&self) -> bool {
        self.kept.start.is_some() && self.kept.end.is_none()
    }

    /// Makes the scratch the running poll's (dropping what an earlier
    /// poll pushed and did not sleep on).
    fn own_scratch(&mut self) {
        let poll = sim::current_poll();
        if self.scratch_poll != poll {
            self.scratch.clear();
            self.scratch_poll = poll;
        }
    }

    /// Pushes a term (the scratch is the running poll's).
    fn push(&mut self, term: Term) {
        if term.ps == 0 {
            return;
        }
        if term.kind == TermKind::Queue && self.in_interval() {
            self.kept.queued[term.component as usize] += term.ps;
        }
        if let Some(Item::Term(last)) = self.scratch.last_mut()
            && last.component == term.component
            && last.kind == term.kind
        {
            last.ps += term.ps;
            return;
        }
        self.scratch.push(Item::Term(term));
    }

    /// A new run of `terms` (zeros dropped, consecutive terms of one
    /// component and kind as one).
    fn add_run(&mut self, terms: impl IntoIterator<Item = Term>) -> u32 {
        let kept = &mut self.kept;
        let from = kept.run_terms.len();
        let mut queue = false;
        for term in terms.into_iter().filter(|t| t.ps > 0) {
            queue |= term.kind == TermKind::Queue;
            match kept.run_terms[from..].last_mut() {
                Some(last) if last.component == term.component && last.kind == term.kind => {
                    last.ps += term.ps;
                }
                _ => kept.run_terms.push(term),
            }
        }
        let index = |n: usize| u32::try_from(n).expect("2^32 run terms");
        let run = index(kept.runs.len());
        kept.runs
            .push((index(from), index(kept.run_terms.len()), queue));
        run
    }

    /// Pushes run `run` (the scratch is the running poll's).
    fn push_run(&mut self, run: u32) {
        let (from, to, queue) = self.kept.runs[run as usize];
        if queue && self.in_interval() {
            let kept = &mut self.kept;
            for term in &kept.run_terms[from as usize..to as usize] {
                if term.kind == TermKind::Queue {
                    kept.queued[term.component as usize] += term.ps;
                }
            }
        }
        if from < to {
            self.scratch.push(Item::Run(run));
        }
    }

    /// The label of the items pushed in this poll (interned), and an
    /// empty scratch.
    fn take_label(&mut self) -> u32 {
        if self.scratch_poll != sim::current_poll() || self.scratch.is_empty() {
            self.scratch.clear();
            return sim::causal::NO_LABEL;
        }
        self.packed.clear();
        pack(&self.scratch, &mut self.packed);
        self.scratch.clear();
        let hash = {
            let mut hasher = rustc_hash::FxHasher::default();
            self.packed.hash(&mut hasher);
            hasher.finish()
        };
        let words = &self.kept.words;
        if let Some(&label) = self.by_words.get(&hash) {
            let from = label as usize + 1;
            let count = words[label as usize] as usize;
            if words.get(from..from + count) == Some(self.packed.as_slice()) {
                return label;
            }
        }
        let label = u32::try_from(words.len())
            .ok()
            .filter(|&l| l != sim::causal::NO_LABEL)
            .expect("2^32 label words in one --explain recording");
        self.kept.words.push(self.packed.len() as u64);
        self.kept.words.extend_from_slice(&self.packed);
        self.by_words.entry(hash).or_insert(label);
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
    if ps == 0 || !recording() {
        return;
    }
    with(|r| {
        r.own_scratch();
        r.push(Term {
            component,
            kind,
            ps,
        })
    });
}

/// [`push`] of each of `terms` in turn (one look at the recorder).
pub fn push_terms(terms: impl IntoIterator<Item = Term>) {
    if !recording() {
        return;
    }
    with(|r| {
        r.own_scratch();
        terms.into_iter().for_each(|term| r.push(term));
    });
}

/// Where the owner of a constant run of terms (a route's uncontended
/// crossing) keeps its id in the recording ([`push_run`]); 8 bytes.
#[derive(Debug, Default)]
pub struct RunMemo {
    /// The recording `id` belongs to (0: none).
    generation: Cell<u16>,
    id: Cell<u32>,
}

/// Pushes the terms `make` gives, which are the same at every call with
/// this `memo` in a recording (a route's uncontended crossing): made and
/// kept once, then pushed as one item (ADR-0046). The label reads as if
/// each term had been pushed with [`push`].
pub fn push_run(memo: &RunMemo, make: impl FnOnce() -> Vec<Term>) {
    if !recording() {
        return;
    }
    let Some(generation) = cache_generation() else {
        return push_terms(make());
    };
    let run = if memo.generation.get() == generation {
        memo.id.get()
    } else {
        let terms = make();
        let Some(run) = with(|r| r.add_run(terms)) else {
            return;
        };
        memo.generation.set(generation);
        memo.id.set(run);
        run
    };
    with(|r| {
        r.own_scratch();
        r.push_run(run);
    });
}

/// A [`RunMemo`] for one of many keys (a route's flows, by size): the
/// first key pushed in a recording gets the run; the others are pushed
/// term by term. One run per owner and recording, however many keys.
#[derive(Debug, Default)]
pub struct KeyedRunMemo {
    memo: RunMemo,
    /// The key the run is of, while `memo` holds one.
    key: Cell<u64>,
}

/// [`push_run`] of the terms `make` gives, which are the same at every
/// call with this `memo` and `key` in a recording (ADR-0051): a run for
/// the memo's key, the terms one by one for another.
pub fn push_keyed_run(memo: &KeyedRunMemo, key: u64, make: impl FnOnce() -> Vec<Term>) {
    if !recording() {
        return;
    }
    let held = cache_generation().is_some_and(|g| memo.memo.generation.get() == g);
    if held && memo.key.get() != key {
        return push_terms(make());
    }
    memo.key.set(key);
    push_run(&memo.memo, make);
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

/// Counts `ps` of queueing on `server` in its utilisation (inside the
/// interval) without labelling any wait with it: a header that no sleep
/// of the running poll covers (a flow-mode credit, ADR-0051).
pub fn count_queue(server: &SerialServer, ps: u64) {
    if ps == 0 {
        return;
    }
    if let Some(id) = component(server) {
        with(|r| {
            if r.in_interval() {
                r.kept.queued[id as usize] += ps;
            }
        });
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
/// counters of `servers` (those snapshotted at the start, and those made
/// since, from zero). Then stops recording
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

/// The counters of `servers` (every server made so far, in the fabric's
/// order) that did anything since the start (bytes, busy time or
/// queueing), in that order: from their snapshot at the start
/// (`started`), or from zero for a server made after it (made idle, with
/// nothing booked: ADR-0051) or when no start was marked (the interval is
/// the whole run).
fn active_counters<'a>(
    started: &[(u32, ServerStats)],
    servers: impl IntoIterator<Item = &'a SerialServer>,
    now: SimTime,
) -> Vec<Counters> {
    let (queued, start) = with(|r| (r.kept.queued.clone(), r.kept.start)).unwrap_or_default();
    // No start marked: the interval is the whole run, every server counts
    // from zero.
    let start = start.unwrap_or(SimTime::ZERO);
    let fresh = ServerStats {
        jobs: 0,
        bytes: 0,
        busy: SimDuration::ZERO,
        elapsed: start.saturating_since(SimTime::ZERO),
    };
    // Per component: its snapshot's position, `UNSEEN` if it has none,
    // `LISTED` once its counters are taken (a server listed twice counts
    // once).
    const UNSEEN: u32 = u32::MAX;
    const LISTED: u32 = u32::MAX - 1;
    let mut position = vec![UNSEEN; queued.len()];
    for (index, &(component, _)) in started.iter().enumerate() {
        position[component as usize] = u32::try_from(index).unwrap_or(UNSEEN);
    }
    let mut counters = Vec::new();
    for server in servers {
        let Some(component) = component(server) else {
            continue;
        };
        if position.len() <= component as usize {
            position.resize(component as usize + 1, UNSEEN);
        }
        let start = match position[component as usize] {
            LISTED => continue,
            UNSEEN => fresh,
            at => started[at as usize].1,
        };
        position[component as usize] = LISTED;
        let end = server.stats(now);
        let active = end.busy != start.busy
            || end.bytes != start.bytes
            || queued.get(component as usize).is_some_and(|&q| q > 0);
        if active {
            counters.push(Counters {
                component,
                start,
                end,
            });
        }
    }
    counters
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
        set_link(&b, Class::Ucie, 9);
        assert_eq!(ids(&a, &b), [Some(1), Some(0), Some(1), Some(0)]);
        let kept = finish().unwrap();
        let classes: Vec<Class> = kept.components.iter().map(|c| c.class).collect();
        assert_eq!(classes, [Class::Ucie, Class::Noc]);
        let ranks: Vec<u64> = kept.components.iter().map(|c| c.rank).collect();
        assert_eq!(
            ranks,
            [9, (1 << 32) + 1],
            "a link by its edge, the rest by id"
        );
        assert_eq!(component(&a), None, "finished");
    }

    fn term(component: u32, kind: TermKind, ps: u64) -> Term {
        Term {
            component,
            kind,
            ps,
        }
    }

    /// Packing is exact: every item reads back, ps of any size included.
    #[test]
    fn packed_items_read_back() {
        let items = [
            Item::Term(term(0, TermKind::Queue, 1)),
            Item::Term(term(
                MAX_COMPONENTS - 1,
                TermKind::Wait,
                u64::from(u32::MAX) - 1,
            )),
            Item::Term(term(7, TermKind::Latency, u64::from(u32::MAX))),
            Item::Run(u32::MAX - 1),
            Item::Term(term(3, TermKind::Service, u64::MAX)),
        ];
        let mut words = Vec::new();
        pack(&items, &mut words);
        assert_eq!(words.len(), items.len() + 2, "two long ps take a word more");
        assert_eq!(unpack(&words).collect::<Vec<_>>(), items);
    }

    fn label() -> u32 {
        with(Recorder::take_label).unwrap()
    }

    /// A run reads as its terms pushed one by one (zeros dropped, merged
    /// with its neighbours), is made once per recording, counts its
    /// queueing at every push, and equal waits share a label.
    #[test]
    fn a_run_reads_as_its_terms_pushed_one_by_one() {
        install();
        let ids: Vec<u32> = ["a", "b", "c"]
            .iter()
            .map(|n| named(n, Class::Noc).unwrap())
            .collect();
        mark_start(SimTime::ZERO, []);
        let run = [
            term(ids[0], TermKind::Service, 7),
            term(ids[1], TermKind::Latency, 0),
            term(ids[1], TermKind::Latency, 3),
            term(ids[2], TermKind::Queue, 4),
        ];
        let (memo, made) = (RunMemo::default(), Cell::new(0));
        let with_run = || {
            push(ids[0], TermKind::Service, 5);
            push_run(&memo, || {
                made.set(made.get() + 1);
                run.to_vec()
            });
            push(ids[2], TermKind::Queue, 1);
            label()
        };
        let first = with_run();
        push(ids[0], TermKind::Service, 5);
        push_terms(run);
        push(ids[2], TermKind::Queue, 1);
        let loose = label();
        let again = with_run();
        let kept = finish().unwrap();
        let expected = [
            term(ids[0], TermKind::Service, 12),
            term(ids[1], TermKind::Latency, 3),
            term(ids[2], TermKind::Queue, 5),
        ];
        assert_eq!(kept.label(first), expected);
        assert_eq!(kept.label(loose), expected);
        assert_eq!(again, first, "equal waits share a label");
        assert_ne!(loose, first, "other items: another label, the same terms");
        assert_eq!(made.get(), 1, "made once");
        assert_eq!(kept.queued[ids[2] as usize], 15);
        assert!(kept.label(sim::causal::NO_LABEL).is_empty());
    }
}
