//! The critical path's two kept forms (ADR-0117): every component's time
//! on it, by kind ([`OnPath`], exact and complete), and its lines
//! ([`PathLine`]: consecutive steps of one component and kind merged,
//! repeated patterns folded), of which only the first and last
//! [`PATH_LINES`]` / 2` are kept unless the whole path is asked for.
//!
//! Works on the walk's raw steps (component numbers); names are made only
//! for what is kept, so a path of millions of steps costs a few lines of
//! strings, not millions.

use std::collections::BTreeMap;

use super::RawStep;
use crate::hw::explain::{Class, TermKind};

/// Lines of the critical path kept (and printed) before the middle is
/// elided.
pub const PATH_LINES: usize = 24;

/// Which of the critical path's lines an explanation keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PathKept {
    /// The first and last [`PATH_LINES`]` / 2`, and a count of the rest.
    #[default]
    Ends,
    /// Every line (`--explain-path whole`).
    Whole,
}

/// Longest run of steps a repeated pattern may have.
const PERIOD: usize = 6;

/// One step of the critical path, or several equal ones merged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// The component's name.
    pub component: String,
    /// Its resource class.
    pub class: String,
    /// What the time was: `queue`, `service`, `latency` or `wait`.
    pub kind: String,
    /// When the (first) step starts, in ps.
    pub start_ps: u64,
    /// How long (all merged steps), in ps.
    pub duration_ps: u64,
    /// How many consecutive steps of this component and kind were merged.
    pub count: u64,
}

/// A line of the critical path: one step, or `times` repetitions of a
/// pattern of steps of the same classes and kinds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PathLine {
    /// When it starts, in ps.
    pub start_ps: u64,
    /// Its time, all repetitions, in ps.
    pub duration_ps: u64,
    /// How many times the pattern repeats (1: a single step).
    pub times: u64,
    /// The pattern's steps as its first repetition has them.
    pub steps: Vec<Step>,
}

/// The lines left out between the kept first and last ones.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Elided {
    /// How many lines.
    pub lines: u64,
    /// Their time, in ps.
    pub ps: u64,
}

/// A component's time on the critical path, by kind; the kinds sum to
/// `ps`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OnPath {
    /// The component's name (a link's `from->to`).
    pub name: String,
    /// Its resource class.
    pub class: String,
    /// Its whole time on the path, in ps.
    pub ps: u64,
    /// Of which queueing for it.
    pub queue_ps: u64,
    /// Of which its service.
    pub service_ps: u64,
    /// Of which its latency.
    pub latency_ps: u64,
    /// Of which waits on it (credits, peers, fixed delays).
    pub wait_ps: u64,
}

impl OnPath {
    /// Its time of kind `kind`, in ps.
    pub fn kind_ps(&self, kind: TermKind) -> u64 {
        match kind {
            TermKind::Queue => self.queue_ps,
            TermKind::Service => self.service_ps,
            TermKind::Latency => self.latency_ps,
            TermKind::Wait => self.wait_ps,
        }
    }
}

/// A merged step before it is named: component, kind, start, duration,
/// count.
type Merged = (u32, TermKind, u64, u64, u64);

/// Names the walk's components.
pub(super) struct Namer<'a> {
    /// A component's name.
    pub name: &'a dyn Fn(u32) -> String,
    /// A component's class.
    pub class: &'a dyn Fn(u32) -> Class,
    /// A component's place among equals (links by edge).
    pub rank: &'a dyn Fn(u32) -> u64,
}

/// Every component on `raw` with its time by kind, most first (equals by
/// rank).
pub(super) fn on_path(raw: &[RawStep], namer: &Namer<'_>) -> Vec<OnPath> {
    let mut by: BTreeMap<u32, [u64; 4]> = BTreeMap::new();
    for &(c, kind, _, d) in raw {
        by.entry(c).or_default()[kind as usize] += d;
    }
    let mut all: Vec<(u32, [u64; 4])> = by.into_iter().collect();
    let total = |k: &[u64; 4]| k.iter().sum::<u64>();
    all.sort_by(|a, b| {
        total(&b.1)
            .cmp(&total(&a.1))
            .then_with(|| (namer.rank)(a.0).cmp(&(namer.rank)(b.0)))
    });
    all.into_iter()
        .map(|(c, kinds)| OnPath {
            name: (namer.name)(c),
            class: (namer.class)(c).name().to_owned(),
            ps: total(&kinds),
            queue_ps: kinds[TermKind::Queue as usize],
            service_ps: kinds[TermKind::Service as usize],
            latency_ps: kinds[TermKind::Latency as usize],
            wait_ps: kinds[TermKind::Wait as usize],
        })
        .collect()
}

/// The path's lines `kept` and what was left out between them.
pub(super) fn lines(
    raw: &[RawStep],
    namer: &Namer<'_>,
    kept: PathKept,
) -> (Vec<PathLine>, Option<Elided>) {
    let merged = merge(raw);
    let folded = fold(&merged, namer.class);
    let line = |&(at, period, times): &(usize, usize, usize)| PathLine {
        start_ps: merged[at].2,
        duration_ps: merged[at..at + period * times].iter().map(|m| m.3).sum(),
        times: times as u64,
        steps: merged[at..at + period]
            .iter()
            .map(|&(c, k, s, d, n)| Step {
                component: (namer.name)(c),
                class: (namer.class)(c).name().to_owned(),
                kind: k.name().to_owned(),
                start_ps: s,
                duration_ps: d,
                count: n,
            })
            .collect(),
    };
    if kept == PathKept::Whole || folded.len() <= PATH_LINES {
        return (folded.iter().map(line).collect(), None);
    }
    let half = PATH_LINES / 2;
    let hidden = &folded[half..folded.len() - half];
    let ps = hidden
        .iter()
        .map(|&(at, period, times)| -> u64 {
            merged[at..at + period * times].iter().map(|m| m.3).sum()
        })
        .sum();
    let ends = folded[..half].iter().chain(&folded[folded.len() - half..]);
    let elided = Elided {
        lines: hidden.len() as u64,
        ps,
    };
    (ends.map(line).collect(), Some(elided))
}

/// Consecutive steps of one component and kind as one.
fn merge(raw: &[RawStep]) -> Vec<Merged> {
    let mut merged: Vec<Merged> = Vec::new();
    for &(c, k, s, d) in raw {
        match merged.last_mut() {
            Some(last) if last.0 == c && last.1 == k => {
                last.3 += d;
                last.4 += 1;
            }
            _ => merged.push((c, k, s, d, 1)),
        }
    }
    merged
}

/// The lines of `path` as `(first step, period, times)`: consecutive
/// repetitions of a pattern of (class, kind) of up to [`PERIOD`] steps
/// folded, the longest cover first.
fn fold(path: &[Merged], class: &dyn Fn(u32) -> Class) -> Vec<(usize, usize, usize)> {
    let key = |m: &Merged| (class(m.0), m.1);
    let mut lines = Vec::new();
    let mut i = 0;
    while i < path.len() {
        let mut best = (1, 1);
        for period in 1..=PERIOD.min(path.len() - i) {
            let mut times = 1;
            while i + (times + 1) * period <= path.len()
                && (0..period).all(|k| key(&path[i + k]) == key(&path[i + times * period + k]))
            {
                times += 1;
            }
            if times > 1 && times * period > best.0 * best.1 {
                best = (period, times);
            }
        }
        let (period, times) = best;
        lines.push((i, period, times));
        i += period * times;
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namer_check(raw: &[RawStep], kept: PathKept) -> (Vec<PathLine>, Option<Elided>) {
        let name = |c: u32| format!("c{c}");
        let class = |c: u32| if c % 2 == 0 { Class::Noc } else { Class::Hbm };
        let rank = |c: u32| u64::from(c);
        let namer = Namer {
            name: &name,
            class: &class,
            rank: &rank,
        };
        lines(raw, &namer, kept)
    }

    /// `n` alternating NoC/HBM steps of 10 ps, then one of each other
    /// pattern: 2 lines folded per block.
    fn raw(blocks: usize) -> Vec<RawStep> {
        let mut raw = Vec::new();
        let mut t = 0;
        for b in 0..blocks {
            let kind = if b % 2 == 0 {
                TermKind::Service
            } else {
                TermKind::Latency
            };
            for _ in 0..3 {
                for c in [0, 1] {
                    raw.push((c, kind, t, 10));
                    t += 10;
                }
            }
        }
        raw
    }

    #[test]
    fn repeated_patterns_fold_into_one_line_each() {
        let (lines, elided) = namer_check(&raw(3), PathKept::Ends);
        assert_eq!(elided, None);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].times, 3);
        assert_eq!(lines[0].duration_ps, 60);
        assert_eq!(lines[1].start_ps, 60);
        assert_eq!(lines[1].steps[0].kind, "latency");
    }

    #[test]
    fn a_long_path_keeps_its_ends_and_counts_the_middle() {
        let blocks = PATH_LINES * 3;
        let (lines, elided) = namer_check(&raw(blocks), PathKept::Ends);
        assert_eq!(lines.len(), PATH_LINES);
        let elided = elided.expect("elided");
        assert_eq!(elided.lines, (blocks - PATH_LINES) as u64);
        let kept: u64 = lines.iter().map(|l| l.duration_ps).sum();
        assert_eq!(kept + elided.ps, blocks as u64 * 60, "nothing lost");
        assert_eq!(lines.last().unwrap().start_ps, (blocks as u64 - 1) * 60);
        let (whole, none) = namer_check(&raw(blocks), PathKept::Whole);
        assert_eq!((whole.len(), none), (blocks, None));
    }

    #[test]
    fn on_path_sums_each_component_by_kind_most_first() {
        let name = |c: u32| format!("c{c}");
        let class = |_| Class::Noc;
        let rank = |c: u32| u64::from(c);
        let namer = Namer {
            name: &name,
            class: &class,
            rank: &rank,
        };
        let raw = [
            (1, TermKind::Queue, 0, 5),
            (0, TermKind::Service, 5, 7),
            (1, TermKind::Service, 12, 4),
        ];
        let on = on_path(&raw, &namer);
        assert_eq!(on[0].name, "c1");
        assert_eq!((on[0].ps, on[0].queue_ps, on[0].service_ps), (9, 5, 4));
        assert_eq!((on[1].name.as_str(), on[1].ps), ("c0", 7));
    }
}
