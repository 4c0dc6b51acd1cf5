//! `--explain` (ADR-0028): why a measured interval took as long as it did.
//!
//! A run records, when asked ([`install`]), the executor's causal log
//! (`sim::causal`: what made every poll runnable, who set every timer) and
//! the hardware's labels (`hw::explain`: what each timed wait was, split
//! into queueing, service and latency on named components). [`finish`]
//! turns them into an [`Explanation`]:
//!
//! - the **critical path**: from the poll that ended the interval, walk
//!   back: a wake by the task's own timer covers the sleep (its label's
//!   terms, latest first) and continues in the same task where the sleep
//!   was set; a wake by another task's poll continues in that task at the
//!   same instant. Every picosecond of the interval is covered by exactly
//!   one step, so the steps sum to the interval exactly; time no label
//!   explains is an explicit `other`;
//! - the **attribution** of the path by resource class and component;
//! - **utilisation**: every server's bytes, busy time and busy fraction
//!   over the interval (exact, from the servers' calendars), and the
//!   queueing its users saw;
//! - the **model gap** beside an α-β `model_ps` ([`Explanation::add_model`]);
//! - on a degraded machine, each **fault**'s time on the path
//!   ([`Explanation::add_faults`], ADR-0106).
//!
//! Knows the causal log, the hardware's labels and the device; nothing of
//! workloads or of the CLI.

mod faults;
mod path;
mod render;

pub use path::{Elided, OnPath, PATH_LINES, PathKept, PathLine, Step};

use std::collections::BTreeMap;

use crate::device::Device;
use crate::hw::explain::{self as hwx, Class, Recording, Term, TermKind};
use crate::sim::causal::{CausalLog, Cause, Overflow};
use crate::sim::{self, SimTime, Simulation};

/// How many components the attribution and the utilisation list.
pub const TOP: usize = 10;

/// Turns recording on for `simulation` and this thread, its causal log
/// bounded to `budget` bytes, and tells the recorder the device's link
/// classes.
pub fn install(simulation: &mut Simulation, device: &Device, budget: u64) {
    simulation.record_causes_within(budget);
    hwx::install();
    device.fabric().explain_classes();
}

/// Why a run cannot be explained.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExplainError {
    /// The causal log would pass its budget before the interval ends.
    #[error(
        "--explain: this run's causal log needs about {}, more than its budget of {} \
         (a quarter of the host's available memory, or --explain-memory): estimated from its \
         first {}, which held {events} of the run's {total} events (to simulated {at}); \
         explain fewer SIPs, a smaller --size, or --fidelity flow (far fewer events)",
        size_text(*.needed), size_text(*.budget), size_text(*.recorded)
    )]
    OverBudget {
        /// The estimate for the whole run, in bytes: the bytes recorded ×
        /// the run's events / the events they held.
        needed: u64,
        /// The budget, in bytes.
        budget: u64,
        /// The bytes recorded when the log stopped.
        recorded: u64,
        /// When it stopped.
        at: sim::SimDuration,
        /// Events by then.
        events: u64,
        /// The run's events.
        total: u64,
    },
}

impl ExplainError {
    fn over_budget(overflow: Overflow, total: u64) -> ExplainError {
        let events = overflow.events.max(1);
        let needed = u128::from(overflow.used) * u128::from(total.max(events)) / u128::from(events);
        ExplainError::OverBudget {
            needed: u64::try_from(needed).unwrap_or(u64::MAX),
            budget: overflow.budget,
            recorded: overflow.used,
            at: overflow.time.saturating_since(SimTime::ZERO),
            events: overflow.events,
            total,
        }
    }

    /// The same refusal, saying `budget` is the budget: a probe's
    /// refusal told against the run's own budget.
    pub fn against(mut self, budget: u64) -> ExplainError {
        let ExplainError::OverBudget { budget: told, .. } = &mut self;
        *told = budget;
        self
    }

    /// The estimated bytes of the whole run's causal log.
    pub fn needed(&self) -> u64 {
        let ExplainError::OverBudget { needed, .. } = self;
        *needed
    }
}

/// `bytes` to one decimal in the largest of KiB, MiB and GiB that is
/// at least one (KiB below that).
fn size_text(bytes: u64) -> String {
    let (unit, name) = match bytes {
        b if b >= 1 << 30 => (1u64 << 30, "GiB"),
        b if b >= 1 << 20 => (1 << 20, "MiB"),
        _ => (1 << 10, "KiB"),
    };
    format!("{:.1} {name}", bytes as f64 / unit as f64)
}

/// Whether `--explain` records on this thread.
pub fn recording() -> bool {
    hwx::recording()
}

/// Marks the start of the explained interval: now (from inside a task).
pub fn mark_start(device: &Device) {
    if recording() {
        device.fabric().explain_start(sim::now());
    }
}

/// Marks the end of the explained interval, `what` (e.g. `allreduce_ps:
/// ...`), now, in the running poll (from inside a task).
pub fn mark_end(device: &Device, what: &str) {
    if recording() {
        device
            .fabric()
            .explain_end(sim::now(), sim::current_poll(), what);
    }
}

/// Stops recording and explains the marked interval; without marks, the
/// whole run, ended by the last poll of the task in slot `host` (the
/// workload's host task), with the critical path's lines `kept`. `None` if
/// nothing was recorded; an error when the causal log stopped at its
/// budget before the interval ended.
pub fn finish(
    simulation: &Simulation,
    device: &Device,
    host: u32,
    kept: PathKept,
) -> Result<Option<Explanation>, ExplainError> {
    let Some(log) = simulation.causal_log() else {
        return Ok(None);
    };
    if let Some(overflow) = log.overflow() {
        let _ = hwx::finish();
        return Err(ExplainError::over_budget(
            overflow,
            simulation.stats().events,
        ));
    }
    if !hwx::end_marked() {
        let poll = log.polls.iter().rposition(|p| p.task == host);
        let poll = poll.map(|p| u32::try_from(p).unwrap_or(u32::MAX));
        let what = "the whole run (the workload marks no interval)";
        device.fabric().explain_end(simulation.now(), poll, what);
    }
    let Some(recording) = hwx::finish() else {
        return Ok(None);
    };
    let mut explanation = Explanation::from_recording(&log, &recording, kept);
    let fabric = device.fabric();
    let machine = fabric.machine();
    let link_name = |edge: crate::topology::EdgeId| {
        let e = machine.edge(edge);
        machine.link_name(e.from, e.to)
    };
    let rerouted: Vec<String> = fabric
        .router()
        .rerouted_over()
        .into_iter()
        .map(link_name)
        .collect();
    explanation.add_faults(machine.spec().faults(), &rerouted);
    Ok(Some(explanation))
}

/// Time of a class or a component on the path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Share {
    /// The class's or the component's name.
    pub name: String,
    /// The class (for a component).
    pub class: String,
    /// Time on the critical path, in ps.
    pub ps: u64,
}

/// A server's use over the interval.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Its name (a link's `from->to`).
    pub name: String,
    /// Its class.
    pub class: String,
    /// Payload bytes booked in the interval.
    pub bytes: u64,
    /// Busy time inside the interval, in ps.
    pub busy_ps: u64,
    /// `busy_ps` over the interval, in [0, 1].
    pub busy_fraction: f64,
    /// Time its users queued for it (bookings made in the interval), in ps.
    pub queue_ps: u64,
}

/// The use of one class of links or units.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClassUsage {
    /// The class.
    pub class: String,
    /// Servers of the class that were busy in the interval.
    pub busy_servers: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Their busy time, summed, in ps.
    pub busy_ps: u64,
    /// The highest busy fraction among them.
    pub max_busy_fraction: f64,
    /// Queueing their users saw, summed, in ps.
    pub queue_ps: u64,
}

/// One term of the gap between the simulated time and the α-β model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GapTerm {
    /// What it is, e.g. `noc queueing`.
    pub what: String,
    /// The component that holds most of it, by the term's own measure
    /// (its time on the path, summed per component).
    pub mostly: String,
    /// Its signed share of the gap, in ps: negative for link service and
    /// latency below the model.
    pub ps: i64,
}

/// The simulated time against the α-β model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelGap {
    /// The model's time, in ps.
    pub model_ps: u64,
    /// `interval − model`, in ps: negative when the model is above.
    pub gap_ps: i64,
    /// Link service and latency on the path, the part the model counts.
    pub link_transfer_ps: u64,
    /// The gap's terms, largest magnitude first; they sum to `gap_ps`
    /// exactly.
    pub terms: Vec<GapTerm>,
}

/// The run's time against its physical bound (ADR-0086).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bound {
    /// The figure the bound is for (e.g. `allreduce_ps`).
    pub figure: String,
    /// The figure's time, in ps.
    pub time_ps: u64,
    /// The bound, in ps.
    pub limit_ps: u64,
    /// The bound as a share of the time, in %: how close to the limit.
    pub limit_pct: f64,
    /// The check's sentence: the figure, the bound and what makes it.
    pub detail: String,
}

/// Why the interval took its time; see the module docs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Explanation {
    /// What the interval is.
    pub interval: String,
    /// Its start, in ps of simulated time.
    pub start_ps: u64,
    /// Its end.
    pub end_ps: u64,
    /// `end − start`: what the attribution sums to.
    pub duration_ps: u64,
    /// The critical path's lines, earliest first (ADR-0117): consecutive
    /// steps of one component and kind merged, repeated patterns folded;
    /// the first and last [`PATH_LINES`]` / 2` unless the whole path was
    /// asked for (`--explain-path whole`).
    pub critical_path: Vec<PathLine>,
    /// The lines left out after the first half of `critical_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_path_elided: Option<Elided>,
    /// Steps before merging.
    pub critical_path_steps: u64,
    /// The path's time by resource class (every class, in order).
    pub by_class: Vec<Share>,
    /// Every component on the path with its time by kind, most first.
    pub on_path: Vec<OnPath>,
    /// Use by class of server.
    pub utilisation: Vec<ClassUsage>,
    /// The [`TOP`] busiest servers (links and units).
    pub busiest: Vec<Usage>,
    /// Every link busy in the interval (the heat map's colours).
    pub links: Vec<Usage>,
    /// Beside `model_ps`, when the run has one.
    pub model_gap: Option<ModelGap>,
    /// Each fault of a degraded machine with the path's time on what it
    /// degrades (ADR-0106); empty, and not written, for a healthy one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Share>,
    /// The physical bound beside the time, when the run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// Under `run --jobs`, the links this job shares with others, with
    /// the path's time on each (most first; ADR-0116); empty, and not
    /// written, otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_links: Vec<Share>,
}

/// The component of time no label explains.
const OTHER: u32 = u32::MAX;

/// A raw step: component (or [`OTHER`]), kind, start, duration.
type RawStep = (u32, TermKind, u64, u64);

impl Explanation {
    /// The explanation of what `log` and `recording` hold (the interval
    /// the recording marks), with the path's lines `kept`.
    pub fn from_recording(log: &CausalLog, recording: &Recording, kept: PathKept) -> Explanation {
        let start = recording.start.unwrap_or(SimTime::ZERO);
        let (end, end_poll) = recording.end.unwrap_or((start, None));
        let raw = walk(log, recording, end_poll, start, end);
        let name = |c: u32| match c {
            OTHER => "unexplained".to_owned(),
            c => recording.components[c as usize].name.to_string(),
        };
        let class = |c: u32| match c {
            OTHER => Class::Other,
            c => recording.components[c as usize].class,
        };
        let rank = |c: u32| match c {
            OTHER => u64::MAX,
            c => recording.components[c as usize].rank,
        };
        let namer = path::Namer {
            name: &name,
            class: &class,
            rank: &rank,
        };
        let mut by_class: BTreeMap<Class, u64> = Class::ALL.iter().map(|&c| (c, 0)).collect();
        for &(c, _, _, d) in &raw {
            *by_class.entry(class(c)).or_default() += d;
        }
        let (critical_path, critical_path_elided) = path::lines(&raw, &namer, kept);
        let duration = end.saturating_since(start).as_ps();
        let (utilisation, busiest, links) = usage(recording, duration);
        Explanation {
            interval: recording.interval.clone(),
            start_ps: start.as_ps(),
            end_ps: end.as_ps(),
            duration_ps: duration,
            critical_path,
            critical_path_elided,
            critical_path_steps: raw.len() as u64,
            by_class: by_class
                .into_iter()
                .map(|(c, ps)| Share {
                    name: c.name().to_owned(),
                    class: c.name().to_owned(),
                    ps,
                })
                .collect(),
            on_path: path::on_path(&raw, &namer),
            utilisation,
            busiest,
            links,
            model_gap: None,
            faults: Vec::new(),
            bound: None,
            shared_links: Vec::new(),
        }
    }

    /// The path's time on component `name` (a link's `from->to`), in ps.
    pub fn path_ps(&self, name: &str) -> u64 {
        self.on_path
            .iter()
            .find(|c| c.name == name)
            .map_or(0, |c| c.ps)
    }

    /// The [`TOP`] components with the most time on the path.
    pub fn top_components(&self) -> &[OnPath] {
        &self.on_path[..self.on_path.len().min(TOP)]
    }

    /// Adds each fault of `faults` with the path's time on what it
    /// degrades (nothing for a healthy machine); `rerouted` names the links
    /// the routes took around parts down for good (ADR-0115).
    pub fn add_faults(&mut self, faults: &crate::topology::FaultsSpec, rerouted: &[String]) {
        self.faults = faults::shares(&self.on_path, faults, rerouted);
    }

    /// Adds those of `links` (each a link's name, `from->to`, and who else
    /// uses it) the critical path crosses, with the path's time on each:
    /// most first, ties in the order given.
    pub fn add_shared_links(&mut self, links: &[(String, String)]) {
        let mut shares: Vec<Share> = links
            .iter()
            .map(|(link, with)| Share {
                name: format!("{link} (also {with})"),
                class: "link".to_owned(),
                ps: self.path_ps(link),
            })
            .collect();
        shares.retain(|s| s.ps > 0);
        shares.sort_by_key(|s| std::cmp::Reverse(s.ps));
        self.shared_links = shares;
    }

    /// The path's time in class `class`, in ps.
    pub fn class_ps(&self, class: Class) -> u64 {
        self.by_class
            .iter()
            .find(|s| s.class == class.name())
            .map_or(0, |s| s.ps)
    }

    /// The `explain_<class>_ps` figures: one per class, summing exactly to
    /// the interval.
    pub fn figures(&self) -> Vec<(&'static str, u64)> {
        Class::ALL
            .iter()
            .map(|&c| (c.figure(), self.class_ps(c)))
            .collect()
    }

    /// Adds the model gap beside an α-β `model_ps` (any algorithm's): the
    /// path's classes the model does not count (everything but link
    /// service and latency), link queueing, and link service and latency
    /// against the model (negative when below it). The terms sum to
    /// `interval − model` exactly.
    pub fn add_model(&mut self, model_ps: u64) {
        let mut link_transfer: (u64, BTreeMap<String, u64>) = (0, BTreeMap::new());
        let mut terms: BTreeMap<String, (u64, BTreeMap<String, u64>)> = BTreeMap::new();
        for component in &self.on_path {
            let (queue, rest) = (component.queue_ps, component.ps - component.queue_ps);
            let class = &component.class;
            let (queued, served) = if Class::names_a_link(class) {
                (format!("{class} queueing (contention)"), None)
            } else {
                (format!("{class} queueing"), Some(class.clone()))
            };
            for (what, ps) in [(Some(queued), queue), (served, rest)] {
                if ps == 0 {
                    continue;
                }
                let entry = match what {
                    Some(what) => terms.entry(what).or_default(),
                    None => &mut link_transfer,
                };
                entry.0 += ps;
                *entry.1.entry(component.name.clone()).or_default() += ps;
            }
        }
        let signed = |ps: u64| i64::try_from(ps).unwrap_or(i64::MAX);
        let mut terms: Vec<GapTerm> = terms
            .into_iter()
            .map(|(what, (ps, by))| GapTerm {
                what,
                mostly: mostly(by),
                ps: signed(ps),
            })
            .collect();
        let (link_ps, by_link) = link_transfer;
        let above = link_ps >= model_ps;
        terms.push(GapTerm {
            what: format!(
                "link service and latency {} the model",
                if above { "above" } else { "below" }
            ),
            mostly: mostly(by_link),
            ps: signed(link_ps) - signed(model_ps),
        });
        terms.retain(|t| t.ps != 0);
        terms.sort_by(|a, b| {
            (b.ps.unsigned_abs().cmp(&a.ps.unsigned_abs())).then(a.what.cmp(&b.what))
        });
        self.model_gap = Some(ModelGap {
            model_ps,
            gap_ps: signed(self.duration_ps) - signed(model_ps),
            link_transfer_ps: link_ps,
            terms,
        });
    }

    /// Adds the physical bound `limit_ps` of the figure `figure` whose
    /// time is `time_ps` (ADR-0086), with the check's `detail`; shown
    /// beside the interval.
    pub fn add_bound(&mut self, figure: &str, time_ps: u64, limit_ps: u64, detail: &str) {
        self.bound = Some(Bound {
            figure: figure.to_owned(),
            detail: detail.to_owned(),
            time_ps,
            limit_ps,
            limit_pct: if time_ps == 0 {
                0.0
            } else {
                limit_ps as f64 * 100.0 / time_ps as f64
            },
        });
    }
}

/// `part` as a percentage of `whole` (0 of nothing).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The key with the largest value (the first of equals).
fn mostly(by: BTreeMap<String, u64>) -> String {
    let mut best: Option<(String, u64)> = None;
    for (name, ps) in by {
        if best.as_ref().is_none_or(|(_, most)| ps > *most) {
            best = Some((name, ps));
        }
    }
    best.map(|(n, _)| n).unwrap_or_default()
}

/// The critical path from poll `end_poll` at `end` back to `start`,
/// earliest first; its durations sum to `end − start`.
fn walk(
    log: &CausalLog,
    recording: &Recording,
    end_poll: Option<u32>,
    start: SimTime,
    end: SimTime,
) -> Vec<RawStep> {
    let mut steps: Vec<RawStep> = Vec::new();
    let mut at = end;
    let mut poll = end_poll;
    while at > start {
        let Some(p) = poll.and_then(|p| log.polls.get(p as usize)) else {
            break;
        };
        if p.time < at {
            // A cause earlier than the wake it caused cannot happen; kept
            // explicit rather than lost.
            steps.push((
                OTHER,
                TermKind::Wait,
                p.time.max(start).as_ps(),
                at.saturating_since(p.time.max(start)).as_ps(),
            ));
            at = p.time.max(start);
            continue;
        }
        match p.cause() {
            Cause::Timer(sleep) => {
                let record = log.sleeps[sleep as usize];
                let from = log.sleep_start(sleep).max(start);
                cover(&recording.label(record.label), from, at, &mut steps);
                at = from;
                poll = Some(record.poll);
            }
            Cause::Poll(q) => poll = Some(q),
            Cause::External => break,
        }
    }
    if at > start {
        steps.push((
            OTHER,
            TermKind::Wait,
            start.as_ps(),
            at.saturating_since(start).as_ps(),
        ));
    }
    steps.reverse();
    steps
}

/// Pushes (latest first) the steps covering `[from, to)` of a sleep with
/// `terms`: the last term ends at `to`; what the terms do not reach is
/// queueing on the first term's component (or unexplained).
fn cover(terms: &[Term], from: SimTime, to: SimTime, steps: &mut Vec<RawStep>) {
    let (from, mut to) = (from.as_ps(), to.as_ps());
    for term in terms.iter().rev() {
        if to <= from {
            return;
        }
        let d = term.ps.min(to - from);
        steps.push((term.component, term.kind, to - d, d));
        to -= d;
    }
    if to > from {
        let (component, kind) = match terms.first() {
            Some(t) => (t.component, TermKind::Queue),
            None => (OTHER, TermKind::Wait),
        };
        steps.push((component, kind, from, to - from));
    }
}

/// Utilisation by class, the busiest servers and every busy link.
fn usage(recording: &Recording, duration: u64) -> (Vec<ClassUsage>, Vec<Usage>, Vec<Usage>) {
    let mut all: Vec<Usage> = recording
        .counters
        .iter()
        .filter_map(|c| {
            let component = &recording.components[c.component as usize];
            let busy = c.end.busy.as_ps().saturating_sub(c.start.busy.as_ps());
            let bytes = c.end.bytes.saturating_sub(c.start.bytes);
            let queue = recording.queued[c.component as usize];
            (busy > 0 || bytes > 0 || queue > 0).then(|| Usage {
                name: component.name.to_string(),
                class: component.class.name().to_owned(),
                bytes,
                busy_ps: busy,
                busy_fraction: if duration == 0 {
                    0.0
                } else {
                    (busy as f64 / duration as f64).min(1.0)
                },
                queue_ps: queue,
            })
        })
        .collect();
    let classes = Class::ALL
        .iter()
        .filter_map(|class| {
            let members: Vec<&Usage> = all.iter().filter(|u| u.class == class.name()).collect();
            (!members.is_empty()).then(|| ClassUsage {
                class: class.name().to_owned(),
                busy_servers: members.iter().filter(|u| u.busy_ps > 0).count() as u64,
                bytes: members.iter().map(|u| u.bytes).sum(),
                busy_ps: members.iter().map(|u| u.busy_ps).sum(),
                max_busy_fraction: members.iter().map(|u| u.busy_fraction).fold(0.0, f64::max),
                queue_ps: members.iter().map(|u| u.queue_ps).sum(),
            })
        })
        .collect();
    let links: Vec<Usage> = all
        .iter()
        .filter(|u| Class::names_a_link(&u.class))
        .cloned()
        .collect();
    all.sort_by(|a, b| b.busy_ps.cmp(&a.busy_ps).then(a.name.cmp(&b.name)));
    all.truncate(TOP);
    (classes, all, links)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget of 1 KiB reads as 1.0 KiB, not 0.0 MiB.
    #[test]
    fn sizes_read_in_the_largest_unit_that_is_at_least_one() {
        for (bytes, text) in [
            (0, "0.0 KiB"),
            (1 << 10, "1.0 KiB"),
            (64 << 10, "64.0 KiB"),
            ((1 << 20) - 1, "1024.0 KiB"),
            (1 << 20, "1.0 MiB"),
            (538 << 20, "538.0 MiB"),
            (5 << 29, "2.5 GiB"),
        ] {
            assert_eq!(size_text(bytes), text, "{bytes}");
        }
    }
}
