//! Faults as configuration: the optional `faults:` section of
//! topology.yaml (ADR-0106), a degraded machine written as data.
//!
//! Three kinds, each a list (`[{...}, ...]`) or a mapping of named
//! entries (`{name: {...}}`, so that `--set faults.links.NAME.KEY=V` and
//! `sweep --vary` reach one value):
//!
//! - `compute`: a slowdown factor (≥ 1) on a SIP, a cube or a PE (`at:
//!   sip1`, `sip1.cube3`, `sip1.cube3.pe2`), stretching its PEs' GEMM and
//!   math time and their PE_DMA issue time; factors on one PE multiply;
//! - `links`: a bandwidth factor in (0, 1] and an extra first-flit latency
//!   on one direction of a link (`link: "A->B"`, the name `--explain` and
//!   the heat maps show) or both (`"A<->B"`); faults on one edge compose;
//! - `stragglers`: a rank that reaches a named collective (every call, or
//!   its `call`-th) `late` after it is called;
//! - `down`: a link, cube or SIP down for the run or for a window
//!   (`outages`, ADR-0115).
//!
//! Values are checked where they are read (units, ranges); the names
//! against the machine: SIPs, cubes and PEs by count when the spec is
//! checked, link names when the machine is built (`resolve_links`, each
//! edge's derated parameters are then fixed for the run: no per-event
//! check). Every refusal is one [`FaultError`] naming its key.
//!
//! Knows the spec's counts and the compiled machine's names; nothing of
//! time dynamics or collectives beyond their names.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use super::link::LinkParams;
use super::machine::{EdgeId, Machine};
use super::naming;
pub use super::outages::DownFault;
use crate::config::units::{Count, Fraction, Slowdown};
use crate::sim::SimDuration;

/// The collectives a straggler can be late to: those the process group
/// launches as one kernel per rank (`runtime::distributed`).
pub const STRAGGLER_COLLECTIVES: [&str; 6] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
];

/// `faults:` — what is degraded; empty for a healthy machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a faults mapping with compute, links, stragglers and down (each optional)"
)]
pub struct FaultsSpec {
    /// Slow SIPs, cubes and PEs.
    #[serde(default)]
    pub compute: Entries<ComputeFault>,
    /// Degraded links.
    #[serde(default)]
    pub links: Entries<LinkFault>,
    /// Late ranks.
    #[serde(default)]
    pub stragglers: Entries<Straggler>,
    /// Links, cubes and SIPs down, for good or for a window (ADR-0115).
    #[serde(default)]
    pub down: Entries<DownFault>,
}

/// The entries of one fault list, each with its name: its key in a
/// mapping, `[i]` in a list. In the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entries<T>(Vec<(String, T)>);

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries(Vec::new())
    }
}

impl<T> Entries<T> {
    /// Each entry's name and value, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.0.iter().map(|(name, value)| (name.as_str(), value))
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for EntriesVisitor<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of faults, or a mapping of named faults")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Entries<T>, E> {
                Ok(Entries::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entries<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(value) = seq.next_element()? {
                    entries.push((format!("[{}]", entries.len()), value));
                }
                Ok(Entries(entries))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, T>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_any(EntriesVisitor(PhantomData))
    }
}

/// The key path of entry `name` of `faults.{section}`:
/// `faults.links.east`, `faults.links[0]`.
pub fn entry(section: &str, name: &str) -> String {
    let sep = if name.starts_with('[') { "" } else { "." };
    format!("faults.{section}{sep}{name}")
}

/// The key path of `field` of entry `name` of `faults.{section}`.
pub fn key(section: &str, name: &str, field: &str) -> String {
    format!("{}.{field}", entry(section, name))
}

/// A fault that cannot apply to this machine, at its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FaultError {
    /// The key path to blame, e.g. `faults.links.east.link`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// What a compute fault slows: a SIP, a cube or a PE, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    /// `sip{s}`: every PE of the SIP.
    Sip(u32),
    /// `sip{s}.cube{c}`: every PE of the cube.
    Cube(u32, u32),
    /// `sip{s}.cube{c}.pe{p}`.
    Pe(u32, u32, u32),
}

impl Unit {
    /// Whether PE `pe` of cube `cube` of SIP `sip` is inside.
    pub fn holds(self, sip: u32, cube: u32, pe: u32) -> bool {
        match self {
            Unit::Sip(s) => s == sip,
            Unit::Cube(s, c) => (s, c) == (sip, cube),
            Unit::Pe(s, c, p) => (s, c, p) == (sip, cube, pe),
        }
    }

    /// Why the unit is not in a machine of `sips` SIPs of `cubes` cubes
    /// of `pes` PEs, if it is not.
    pub(super) fn outside(self, sips: u32, cubes: u64, pes: u32) -> Option<String> {
        let (sip, cube, pe) = match self {
            Unit::Sip(s) => (s, None, None),
            Unit::Cube(s, c) => (s, Some(c), None),
            Unit::Pe(s, c, p) => (s, Some(c), Some(p)),
        };
        if sip >= sips {
            return Some(format!(
                "{self}: there is no SIP {sip} (system.sips.count is {sips}: sip0 to sip{})",
                sips - 1
            ));
        }
        if let Some(cube) = cube.filter(|&c| u64::from(c) >= cubes) {
            return Some(format!(
                "{self}: there is no cube {cube} (a SIP has {cubes} cubes: cube0 to cube{})",
                cubes - 1
            ));
        }
        pe.filter(|&p| p >= pes).map(|p| {
            format!(
                "{self}: there is no PE {p} (cube.pes is {pes}: pe0 to pe{})",
                pes - 1
            )
        })
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Unit::Sip(s) => f.write_str(&naming::sip(s)),
            Unit::Cube(s, c) => f.write_str(&naming::cube(s, c)),
            Unit::Pe(s, c, p) => f.write_str(&naming::pe(s, c, p)),
        }
    }
}

/// `text` after `prefix`, as a decimal index (no sign, no leading `+`).
fn index_after(text: &str, prefix: &str) -> Option<u32> {
    let digits = text.strip_prefix(prefix)?;
    let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    plain.then(|| digits.parse().ok()).flatten()
}

impl FromStr for Unit {
    type Err = String;
    fn from_str(text: &str) -> Result<Unit, String> {
        let parts: Vec<&str> = text.trim().split('.').collect();
        let sip = parts.first().and_then(|p| index_after(p, "sip"));
        let cube = parts.get(1).and_then(|p| index_after(p, "cube"));
        let pe = parts.get(2).and_then(|p| index_after(p, "pe"));
        match (parts.len(), sip, cube, pe) {
            (1, Some(s), _, _) => Ok(Unit::Sip(s)),
            (2, Some(s), Some(c), _) => Ok(Unit::Cube(s, c)),
            (3, Some(s), Some(c), Some(p)) => Ok(Unit::Pe(s, c, p)),
            _ => Err(format!(
                "`{text}` is not a SIP, cube or PE name: write e.g. sip1, sip1.cube3 or \
                 sip1.cube3.pe2"
            )),
        }
    }
}

/// Deserializes a `T` from its string form through `FromStr<Err = String>`.
pub(super) fn from_text<'de, D: Deserializer<'de>, T: FromStr<Err = String>>(
    deserializer: D,
) -> Result<T, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(de::Error::custom)
}

/// One entry of `faults.compute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a compute fault mapping {at, slowdown}"
)]
pub struct ComputeFault {
    /// The SIP, cube or PE slowed.
    #[serde(deserialize_with = "from_text")]
    pub at: Unit,
    /// How many times longer its PEs' compute and DMA issue take.
    pub slowdown: Slowdown,
}

/// A link named as `--explain` names it: one direction `A->B`, or both
/// directions of the physical link, `A<->B`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkName {
    /// The node packets enter at (for `<->`, the first named).
    pub from: String,
    /// The node they leave at.
    pub to: String,
    /// Whether both directions are meant.
    pub both: bool,
}

impl FromStr for LinkName {
    type Err = String;
    fn from_str(text: &str) -> Result<LinkName, String> {
        let (parts, both) = match text.split_once("<->") {
            Some(parts) => (Some(parts), true),
            None => (text.split_once("->"), false),
        };
        let named = |name: &str| !name.trim().is_empty() && !name.contains("->");
        match parts {
            Some((from, to)) if named(from) && named(to) => Ok(LinkName {
                from: from.trim().to_owned(),
                to: to.trim().to_owned(),
                both,
            }),
            _ => Err(format!(
                "`{text}` is not a link name: write FROM->TO for one direction or FROM<->TO \
                 for both, e.g. sip0.inter_sip.e->sip1.inter_sip.w (the names --explain shows)"
            )),
        }
    }
}

impl fmt::Display for LinkName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arrow = if self.both { "<->" } else { "->" };
        write!(f, "{}{arrow}{}", self.from, self.to)
    }
}

/// Full bandwidth: a factor of 1.
fn whole() -> Fraction {
    Fraction::ONE
}

/// One entry of `faults.links`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a link fault mapping {link, bandwidth_factor, extra_latency}"
)]
pub struct LinkFault {
    /// The link, `A->B` or `A<->B`.
    #[serde(deserialize_with = "from_text")]
    pub link: LinkName,
    /// The share of its line rate left (default 1).
    #[serde(default = "whole")]
    pub bandwidth_factor: Fraction,
    /// Time added to its first-flit latency (default 0).
    #[serde(default)]
    pub extra_latency: SimDuration,
}

impl LinkFault {
    /// `params` with this fault applied; `None` when the latency would
    /// overflow 64-bit picoseconds.
    pub fn derate(&self, params: &LinkParams) -> Option<LinkParams> {
        Some(LinkParams {
            bandwidth: self.bandwidth_factor.of(params.bandwidth),
            latency: params.latency.checked_add(self.extra_latency).ok()?,
            ..*params
        })
    }
}

/// The name of a collective a straggler is late to
/// ([`STRAGGLER_COLLECTIVES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CollectiveName(&'static str);

impl CollectiveName {
    /// The name, e.g. `all_reduce`.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl FromStr for CollectiveName {
    type Err = String;
    fn from_str(text: &str) -> Result<CollectiveName, String> {
        STRAGGLER_COLLECTIVES
            .iter()
            .find(|&&name| name == text.trim())
            .map(|&name| CollectiveName(name))
            .ok_or_else(|| {
                format!(
                    "`{text}` is not a collective a rank can be late to: one of {}",
                    STRAGGLER_COLLECTIVES.join(", ")
                )
            })
    }
}

/// One entry of `faults.stragglers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a straggler mapping {rank, collective, call, late}"
)]
pub struct Straggler {
    /// The late rank (= its SIP).
    pub rank: u32,
    /// The collective it is late to.
    #[serde(deserialize_with = "from_text")]
    pub collective: CollectiveName,
    /// Which call, counting from 1 per rank and collective; every call
    /// when absent.
    #[serde(default)]
    pub call: Option<Count>,
    /// How late it starts the collective.
    pub late: SimDuration,
}

impl FaultsSpec {
    /// Whether nothing is degraded.
    pub fn is_empty(&self) -> bool {
        self.compute.is_empty()
            && self.links.is_empty()
            && self.stragglers.is_empty()
            && self.down.is_empty()
    }

    /// Checks every SIP, cube, PE and rank against a machine of `sips`
    /// SIPs of `cubes` cubes of `pes` PEs, and that the slowdowns
    /// multiply and the lateness adds up without overflow. Link names need the built machine
    /// (`resolve_links`).
    pub fn check(&self, sips: u32, cubes: u64, pes: u32) -> Result<(), FaultError> {
        let mut product = Slowdown::NONE;
        for (name, fault) in self.compute.iter() {
            let at = |message| FaultError {
                key: key("compute", name, "at"),
                message,
            };
            if let Some(why) = fault.at.outside(sips, cubes, pes) {
                return Err(at(why));
            }
            product = product.then(fault.slowdown).ok_or_else(|| FaultError {
                key: key("compute", name, "slowdown"),
                message: "the slowdowns together exceed 18446744 (64-bit parts per million)"
                    .to_owned(),
            })?;
        }
        let mut late = SimDuration::ZERO;
        for (name, straggler) in self.stragglers.iter() {
            late = late.checked_add(straggler.late).map_err(|_| FaultError {
                key: key("stragglers", name, "late"),
                message: "the stragglers' lateness together overflows 64-bit picoseconds"
                    .to_owned(),
            })?;
            if straggler.rank >= sips {
                return Err(FaultError {
                    key: key("stragglers", name, "rank"),
                    message: format!(
                        "there is no rank {} (rank = SIP; system.sips.count is {sips}: ranks 0 \
                         to {})",
                        straggler.rank,
                        sips - 1
                    ),
                });
            }
        }
        for (name, fault) in self.down.iter() {
            fault.check(name, sips, cubes, pes)?;
        }
        Ok(())
    }

    /// The slowdown of PE `pe` of cube `cube` of SIP `sip`: every compute
    /// fault holding it, multiplied (checked not to overflow at load).
    pub fn pe_slowdown(&self, sip: u32, cube: u32, pe: u32) -> Slowdown {
        self.compute
            .iter()
            .filter(|(_, fault)| fault.at.holds(sip, cube, pe))
            .fold(Slowdown::NONE, |total, (_, fault)| {
                total.then(fault.slowdown).unwrap_or(total)
            })
    }

    /// How late `rank` starts its `call`-th (from 1) `collective`: the sum
    /// of the stragglers that match.
    pub fn lateness(&self, rank: u32, collective: &str, call: u32) -> SimDuration {
        self.stragglers
            .iter()
            .filter(|(_, s)| s.rank == rank && s.collective.name() == collective)
            .filter(|(_, s)| s.call.is_none_or(|c| c.get() == call))
            .fold(SimDuration::ZERO, |total, (_, s)| {
                total.checked_add(s.late).unwrap_or(total)
            })
    }
}

/// Every edge a link fault of `machine`'s spec names, with that fault's
/// derated parameters over the edge's (faults on one edge applied in
/// order), in the order named; an unknown node, two nodes no link joins
/// or a latency beyond 64-bit picoseconds is a [`FaultError`] at its key.
pub(crate) fn resolve_links(machine: &Machine) -> Result<Vec<(EdgeId, LinkParams)>, FaultError> {
    let mut derated: Vec<(EdgeId, LinkParams)> = Vec::new();
    for (name, fault) in machine.spec().faults().links.iter() {
        for edge in link_edges(machine, key("links", name, "link"), &fault.link)? {
            let at = derated.iter().position(|&(e, _)| e == edge);
            let base = match at {
                Some(i) => derated[i].1,
                None => *machine.link_params(machine.edge(edge)),
            };
            let params = fault.derate(&base).ok_or_else(|| FaultError {
                key: key("links", name, "extra_latency"),
                message: format!(
                    "{} plus the link's {} overflows 64-bit picoseconds",
                    fault.extra_latency, base.latency
                ),
            })?;
            match at {
                Some(i) => derated[i].1 = params,
                None => derated.push((edge, params)),
            }
        }
    }
    Ok(derated)
}

/// The edges `link` names: one, or both directions; a refusal is at
/// `at`, the key that named it.
pub(super) fn link_edges(
    machine: &Machine,
    at: String,
    link: &LinkName,
) -> Result<Vec<EdgeId>, FaultError> {
    let error = |message| FaultError {
        key: at.clone(),
        message,
    };
    let node = |node: &str| {
        machine.find(node).ok_or_else(|| {
            error(format!(
                "{link}: there is no node `{node}` (nodes are named as `kernbench topo --view` \
                 and --explain show them, e.g. sip0.inter_sip.e, sip0.cube1.ucie.w, \
                 sip0.cube0.r0c1, sip0.pcie_ep, host)"
            ))
        })
    };
    let (from, to) = (node(&link.from)?, node(&link.to)?);
    let edge = machine.edge_between(from, to).ok_or_else(|| {
        error(format!(
            "{link}: no link joins {} and {} (a link fault names two neighbouring nodes)",
            link.from, link.to
        ))
    })?;
    Ok(match link.both {
        true => vec![edge, machine.edge(edge).reverse],
        false => vec![edge],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_link_names_parse_or_say_how_to_write_them() {
        assert_eq!("sip1".parse::<Unit>(), Ok(Unit::Sip(1)));
        assert_eq!("sip1.cube3".parse::<Unit>(), Ok(Unit::Cube(1, 3)));
        assert_eq!("sip1.cube3.pe2".parse::<Unit>(), Ok(Unit::Pe(1, 3, 2)));
        for bad in [
            "",
            "sip",
            "sip-1",
            "sip1.pe2",
            "sip1.cube3.pe2.tcm",
            "cube1",
        ] {
            assert!(bad.parse::<Unit>().is_err(), "{bad}");
        }
        let both: LinkName = "a <-> b".parse().unwrap();
        assert_eq!(
            (both.from.as_str(), both.to.as_str(), both.both),
            ("a", "b", true)
        );
        assert_eq!(both.to_string(), "a<->b");
        let one: LinkName = "sip0.pcie_ep->host".parse().unwrap();
        assert!(!one.both);
        for bad in ["a", "->b", "a->", "a->b->c"] {
            assert!(bad.parse::<LinkName>().is_err(), "{bad}");
        }
        assert!("all_reduce".parse::<CollectiveName>().is_ok());
        assert!("allreduce".parse::<CollectiveName>().is_err());
    }

    #[test]
    fn keys_follow_lists_and_mappings() {
        assert_eq!(key("links", "[0]", "link"), "faults.links[0].link");
        assert_eq!(key("links", "east", "link"), "faults.links.east.link");
    }

    fn machine(sets: &[&str]) -> Machine {
        let overrides: Vec<crate::config::Override> = sets
            .iter()
            .map(|s| crate::config::Override::parse(s).unwrap())
            .collect();
        let source = super::super::TopologySpec::default_source();
        let spec = super::super::TopologySpec::load(&source, &overrides).unwrap();
        Machine::build(&spec).unwrap()
    }

    #[test]
    fn a_link_fault_derates_its_edges_once_and_factor_one_changes_nothing() {
        let healthy = machine(&[]);
        let name = "faults.links.e.link=sip0.inter_sip.e<->sip1.inter_sip.w";
        let slow = machine(&[name, "faults.links.e.bandwidth_factor=0.5"]);
        let (a, b) = (
            slow.find("sip0.inter_sip.e").unwrap(),
            slow.find("sip1.inter_sip.w").unwrap(),
        );
        let edge = slow.edge_between(a, b).unwrap();
        for e in [edge, slow.edge(edge).reverse] {
            let (was, now) = (
                healthy.link_params(healthy.edge(e)),
                slow.link_params(slow.edge(e)),
            );
            assert_eq!(
                now.bandwidth.bytes_per_sec() * 2,
                was.bandwidth.bytes_per_sec()
            );
            assert_eq!((now.latency, now.efficiency), (was.latency, was.efficiency));
        }
        let whole = machine(&[name, "faults.links.e.bandwidth_factor=1"]);
        let roles = |m: &Machine| m.edges().iter().map(|e| e.role).collect::<Vec<_>>();
        assert_eq!(roles(&whole), roles(&healthy));
        assert_ne!(roles(&slow), roles(&healthy));
    }

    #[test]
    fn units_hold_their_pes() {
        assert!(Unit::Sip(1).holds(1, 5, 7));
        assert!(!Unit::Cube(1, 4).holds(1, 5, 7));
        assert!(Unit::Pe(1, 5, 7).holds(1, 5, 7));
        assert!(Unit::Cube(1, 16).outside(2, 16, 8).is_some());
        assert!(Unit::Pe(1, 15, 7).outside(2, 16, 8).is_none());
    }
}
