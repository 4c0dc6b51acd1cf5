//! Parts of the machine down (`faults.down`, ADR-0115): a link, a cube or
//! a SIP out of service for the whole run or for a window of simulated
//! time.
//!
//! - **Down for good** (no `until`; then `from` is 0): its edges leave the
//!   routes. `routing` routes around them ([`Outages::is_gone`], the
//!   detour of `detour`), and `Machine::build` refuses a machine they cut
//!   in two, naming the faults and both sides ([`check_connected`]).
//! - **Down for a window** `[from, until)`: the routes stay as they are;
//!   each of its edges' links is held for the window (`hw`), so a
//!   transfer that meets it waits for the repair and one in service when
//!   it fails resumes after it ([`Outages::windows`]).
//!
//! A unit down takes every edge with an end inside it: a cube's routers,
//! PEs, memories and ports and the UCIe links to its neighbours; a SIP's
//! cubes, inter-SIP links and PCIe link.
//!
//! Knows the compiled machine's nodes and edges and the faults' names;
//! nothing of how a held link is served.

use std::collections::VecDeque;

use serde::Deserialize;
use serde::de::{self, Deserializer};

use super::faults::{FaultError, LinkName, Unit, entry, key, link_edges};
use super::machine::{EdgeId, EdgeKind, Machine, Node, NodeId, NodeKind};
use super::naming;
use crate::sim::{SimDuration, SimTime};

/// One entry of `faults.down`: what is down (a `link`, or a unit `at`),
/// from when and until when.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a down fault mapping {link or at, from, until}"
)]
pub struct DownFault {
    /// The link down, `A->B` or `A<->B` (or `at`).
    #[serde(default, deserialize_with = "optional_text")]
    pub link: Option<LinkName>,
    /// The SIP or cube down (or `link`).
    #[serde(default, deserialize_with = "optional_text")]
    pub at: Option<Unit>,
    /// When it goes down (default 0: from the start).
    #[serde(default)]
    pub from: SimDuration,
    /// When it is back; absent: down for the whole run.
    #[serde(default)]
    pub until: Option<SimDuration>,
}

/// Deserializes an optional `T` from its string form.
fn optional_text<'de, D: Deserializer<'de>, T: std::str::FromStr<Err = String>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map(Some).map_err(de::Error::custom)
}

impl DownFault {
    /// What is down, as written.
    pub fn what(&self) -> String {
        match (&self.link, &self.at) {
            (Some(link), _) => link.to_string(),
            (None, Some(unit)) => unit.to_string(),
            (None, None) => String::new(),
        }
    }

    /// When, as a reader would say it: `for the run`, `10 us to 30 us`.
    pub fn when(&self) -> String {
        match self.until {
            None => "for the run".to_owned(),
            Some(until) => format!("from {} to {until}", self.from),
        }
    }

    /// Checks entry `name` against a machine of `sips` SIPs of `cubes`
    /// cubes of `pes` PEs: one of `link` and `at`, a SIP or cube in the
    /// machine, a window that ends after it starts, and a start of 0 for a
    /// fault without an end.
    pub(super) fn check(
        &self,
        name: &str,
        sips: u32,
        cubes: u64,
        pes: u32,
    ) -> Result<(), FaultError> {
        let error = |field: &str, message: String| FaultError {
            key: key("down", name, field),
            message,
        };
        match (&self.link, &self.at) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(FaultError {
                    key: entry("down", name),
                    message: "name what is down with one of `link: A<->B` (a link) and `at: \
                              sip1` or `at: sip1.cube3` (a SIP or a cube)"
                        .to_owned(),
                });
            }
            (None, Some(Unit::Pe(..))) => {
                return Err(error(
                    "at",
                    "a PE cannot be down alone: take its cube down (sip1.cube3), or slow it \
                     with faults.compute"
                        .to_owned(),
                ));
            }
            (None, Some(unit)) => {
                if let Some(why) = unit.outside(sips, cubes, pes) {
                    return Err(error("at", why));
                }
            }
            (Some(_), None) => {}
        }
        match self.until {
            Some(until) if until <= self.from => Err(error(
                "until",
                format!(
                    "{until} is not after from ({}): a window ends after it starts",
                    self.from
                ),
            )),
            None if self.from > SimDuration::ZERO => Err(error(
                "from",
                format!(
                    "a fault without `until` is down for the whole run, from 0, not from {}: \
                     routes are fixed for a run, so a part that fails later needs an `until` \
                     (a window the traffic waits out, ADR-0115)",
                    self.from
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// A span of simulated time a link is down: `[start, end)`.
pub type Window = (SimTime, SimTime);

/// What `faults.down` takes out of a machine, resolved to its edges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outages {
    /// The edges down for good, sorted.
    gone: Vec<EdgeId>,
    /// The edges down for windows, sorted by edge, each with its windows
    /// in time order, overlapping ones merged.
    windows: Vec<(EdgeId, Vec<Window>)>,
    /// Each fault down for good, as errors name it: `faults.down.x
    /// (sip0.inter_sip.e<->sip1.inter_sip.w)`.
    gone_faults: Vec<String>,
    /// The key of the last fault down for good (a cut is blamed on it).
    last_gone: String,
}

impl Outages {
    /// The outages of `machine`'s spec, every link name checked against it.
    pub(super) fn resolve(machine: &Machine) -> Result<Outages, FaultError> {
        let mut outages = Outages::default();
        let mut held: Vec<(EdgeId, Window)> = Vec::new();
        for (name, fault) in machine.spec().faults().down.iter() {
            let edges = match (&fault.link, fault.at) {
                (Some(link), _) => link_edges(machine, key("down", name, "link"), link)?,
                (None, Some(unit)) => unit_edges(machine, unit),
                (None, None) => Vec::new(),
            };
            match fault.until {
                None => {
                    outages.gone.extend(edges);
                    let what = fault.what();
                    outages.last_gone = entry("down", name);
                    outages
                        .gone_faults
                        .push(format!("{} ({what})", entry("down", name)));
                }
                Some(until) => {
                    let window = (at(fault.from), at(until));
                    held.extend(edges.into_iter().map(|edge| (edge, window)));
                }
            }
        }
        outages.gone.sort_unstable();
        outages.gone.dedup();
        outages.windows = merged(held);
        Ok(outages)
    }

    /// Whether nothing is down.
    pub fn is_empty(&self) -> bool {
        self.gone.is_empty() && self.windows.is_empty()
    }

    /// Whether some edge is down for a window.
    pub fn has_windows(&self) -> bool {
        !self.windows.is_empty()
    }

    /// Whether some edge is down for good.
    pub fn has_gone(&self) -> bool {
        !self.gone.is_empty()
    }

    /// Whether `edge` is down for the whole run.
    pub fn is_gone(&self, edge: EdgeId) -> bool {
        self.gone.binary_search(&edge).is_ok()
    }

    /// The windows `edge` is down for, in time order (none: never).
    pub fn windows(&self, edge: EdgeId) -> &[Window] {
        match self.windows.binary_search_by_key(&edge, |(e, _)| *e) {
            Ok(i) => &self.windows[i].1,
            Err(_) => &[],
        }
    }

    /// The faults down for good, as errors name them.
    pub fn gone_faults(&self) -> &[String] {
        &self.gone_faults
    }
}

/// The instant `d` after the start.
fn at(d: SimDuration) -> SimTime {
    SimTime::from_ps(d.as_ps())
}

/// The windows of each edge, sorted by edge and time, overlaps merged.
fn merged(mut held: Vec<(EdgeId, Window)>) -> Vec<(EdgeId, Vec<Window>)> {
    held.sort_unstable();
    let mut out: Vec<(EdgeId, Vec<Window>)> = Vec::new();
    for (edge, (start, end)) in held {
        match out.last_mut() {
            Some((last, windows)) if *last == edge => match windows.last_mut() {
                Some(prev) if start <= prev.1 => prev.1 = prev.1.max(end),
                _ => windows.push((start, end)),
            },
            _ => out.push((edge, vec![(start, end)])),
        }
    }
    out
}

/// Whether `node` is inside `unit` (a SIP or a cube).
fn inside(unit: Unit, node: &Node) -> bool {
    match unit {
        Unit::Sip(s) => node.sip == Some(s),
        Unit::Cube(s, c) => node.sip == Some(s) && node.cube == Some(c),
        Unit::Pe(s, c, p) => node.sip == Some(s) && node.cube == Some(c) && node.pe == Some(p),
    }
}

/// Every edge with an end inside `unit`, in edge order.
fn unit_edges(machine: &Machine, unit: Unit) -> Vec<EdgeId> {
    let nodes = machine.nodes();
    machine
        .edges()
        .iter()
        .enumerate()
        .filter(|(_, e)| inside(unit, &nodes[e.from.index()]) || inside(unit, &nodes[e.to.index()]))
        .map(|(i, _)| EdgeId::from_index(i))
        .collect()
}

/// Whether a connectivity walk may use `edge`: up, and not the host's
/// PCIe links (the host joins SIPs for commands, never for data between
/// them).
fn walkable(machine: &Machine, outages: &Outages, edge: EdgeId) -> bool {
    machine.edge(edge).kind != EdgeKind::Pcie && !outages.is_gone(edge)
}

/// Refuses a machine whose parts down for good leave two live nodes with
/// no way between them, naming the faults and the two sides. A node is
/// live when some edge of it is up; the host is left out.
pub(super) fn check_connected(machine: &Machine, outages: &Outages) -> Result<(), FaultError> {
    if !outages.has_gone() {
        return Ok(());
    }
    let live = |id: NodeId| {
        machine.node(id).kind != NodeKind::Host
            && machine
                .out_edges(id)
                .iter()
                .any(|&e| walkable(machine, outages, e))
    };
    let count = machine.nodes().len();
    let Some(start) = (0..count).map(NodeId::from_index).find(|&n| live(n)) else {
        return Ok(());
    };
    let mut reached = vec![false; count];
    reached[start.index()] = true;
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &e in machine.out_edges(node) {
            let to = machine.edge(e).to;
            if walkable(machine, outages, e) && !reached[to.index()] {
                reached[to.index()] = true;
                queue.push_back(to);
            }
        }
    }
    let cut = (0..count)
        .map(NodeId::from_index)
        .any(|n| live(n) && !reached[n.index()]);
    if !cut {
        return Ok(());
    }
    let [this, other] = sides(machine, &reached, &live);
    Err(FaultError {
        key: outages.last_gone.clone(),
        message: format!(
            "{} cut the machine in two: {this} cannot reach {other} (every route between \
             them is down; take fewer parts down, or give them an `until`)",
            outages.gone_faults.join(" and ")
        ),
    })
}

/// The two sides of a cut, each named by its SIPs (and, where a SIP is
/// split, its cubes), at most eight names a side.
fn sides(machine: &Machine, reached: &[bool], live: &dyn Fn(NodeId) -> bool) -> [String; 2] {
    // Per cube of each SIP: whether it has live nodes reached, unreached.
    let cubes = machine.cubes_per_sip() as usize;
    let mut seen = vec![[false; 2]; machine.sip_count() as usize * cubes];
    for (i, node) in machine.nodes().iter().enumerate() {
        if let (Some(sip), Some(cube)) = (node.sip, node.cube) {
            if live(NodeId::from_index(i)) {
                seen[sip as usize * cubes + cube as usize][usize::from(!reached[i])] = true;
            }
        }
    }
    let mut names = [Vec::new(), Vec::new()];
    for sip in 0..machine.sip_count() {
        let of = &seen[sip as usize * cubes..(sip as usize + 1) * cubes];
        for (side, list) in names.iter_mut().enumerate() {
            let whole = of.iter().all(|c| !c[1 - side]) && of.iter().any(|c| c[side]);
            if whole {
                list.push(naming::sip(sip));
                continue;
            }
            for (cube, c) in of.iter().enumerate() {
                if c[side] {
                    list.push(naming::cube(sip, cube as u32));
                }
            }
        }
    }
    names.map(|list| listed(&list))
}

/// `a, b, c`, or the first eight and how many more.
fn listed(names: &[String]) -> String {
    match names.len() {
        0..=8 => names.join(", "),
        n => format!("{} and {} more", names[..8].join(", "), n - 8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(sets: &[&str]) -> Result<Machine, String> {
        let overrides: Vec<crate::config::Override> = sets
            .iter()
            .map(|s| crate::config::Override::parse(s).unwrap())
            .collect();
        let source = super::super::TopologySpec::default_source();
        let spec =
            super::super::TopologySpec::load(&source, &overrides).map_err(|e| e.to_string())?;
        Machine::build(&spec).map_err(|e| e.to_string())
    }

    const RING4: [&str; 2] = ["system.sips.count=4", "system.sips.topology=ring_1d"];

    #[test]
    fn windows_merge_per_edge_in_time_order() {
        let (e, f) = (EdgeId::from_index(3), EdgeId::from_index(1));
        let t = SimTime::from_ps;
        let got = merged(vec![
            (e, (t(50), t(60))),
            (e, (t(10), t(30))),
            (e, (t(20), t(40))),
            (f, (t(5), t(6))),
        ]);
        assert_eq!(
            got,
            [
                (f, vec![(t(5), t(6))]),
                (e, vec![(t(10), t(40)), (t(50), t(60))])
            ]
        );
    }

    #[test]
    fn a_sip_down_takes_every_edge_touching_it_and_a_cut_ring_is_refused() {
        let mut sets = RING4.to_vec();
        sets.push("faults.down.s.at=sip2");
        let m = machine(&sets).unwrap();
        let outages = m.outages();
        for (i, edge) in m.edges().iter().enumerate() {
            let touches = [edge.from, edge.to]
                .iter()
                .any(|&n| m.node(n).sip == Some(2));
            assert_eq!(outages.is_gone(EdgeId::from_index(i)), touches);
        }
        let mut cut = RING4.to_vec();
        cut.extend([
            "faults.down.a.link=sip0.inter_sip.e<->sip1.inter_sip.w",
            "faults.down.b.link=sip2.inter_sip.e<->sip3.inter_sip.w",
        ]);
        let error = machine(&cut).unwrap_err();
        assert!(
            error.contains("faults.down.a (sip0.inter_sip.e<->sip1.inter_sip.w) and faults.down.b"),
            "{error}"
        );
        assert!(
            error.contains("sip0, sip3 cannot reach sip1, sip2"),
            "{error}"
        );
    }
}
