//! The physical lower bound of a collective call on a machine (ADR-0086):
//! no algorithm, however clever, can finish faster, so a simulated time
//! below it is a broken cost, never a result.
//!
//! The bound looks at *cuts*: a SIP (its inter-SIP links) and a cube
//! (its UCIe edges and the inter-SIP ports it carries). For every cut it
//! counts the bytes the collective's semantics force across it in each
//! direction (an all-reduce's SIP must receive one block's worth of the
//! others' contributions and send one of its own; an all-gather's must
//! receive every outside block; ...), whatever the algorithm, and divides
//! them by the cut's effective bandwidth in that direction (line rate ×
//! efficiency, the fastest the links can carry them, all at once). The
//! last byte through a cut has also crossed the cut's cheapest path from
//! a memory outside to a memory inside: its latency is added (an
//! inter-SIP hop: the link and four NoC attachments, memory to router,
//! router to port on both sides; a UCIe hop: the edge, its two bridges
//! and two attachments). The call's bound is the largest over every cut
//! of every participating SIP and cube, and at least the PE roofline of
//! its reductions: `(n − 1)` element combines per reduced element over
//! every PE_MATH of the participants. Host links are not counted: a
//! collective's data stays on the devices.
//!
//! Knows the compiled machine and the collectives' semantics; nothing of
//! algorithms, tensors or the simulation.

use std::fmt;

use crate::ccl::Collective;
use crate::config::units::Bandwidth;
use crate::topology::{EdgeKind, LinkCatalog, Machine};

/// One collective call as the bound sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The collective.
    pub collective: Collective,
    /// Participating ranks (SIPs `0..ranks`, or the job's).
    pub ranks: usize,
    /// A job's SIPs in rank order (`run --jobs`, ADR-0116); `None`: rank
    /// `r` on SIP `r`.
    pub sips: Option<&'a [u32]>,
    /// Cubes per SIP (every cube one endpoint).
    pub cubes: usize,
    /// Bytes of one block (a cube's share of one participant's data).
    pub block_bytes: u64,
    /// Elements of one block.
    pub block_elements: u64,
    /// The root endpoint of a rooted call (`rank × cubes + cube`).
    pub root: usize,
}

/// The bound of one call and what binds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The bound, in ps.
    pub ps: u64,
    /// What binds it, in words (`sip0 receives 1 MiB at 80 GB/s + 520 ns`).
    pub reason: String,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ps ({})", self.ps, self.reason)
    }
}

/// Bytes a cut must receive and send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Crossing {
    into: u64,
    out: u64,
}

/// A cut's links: bandwidth each way (B/s) and the cheapest latency of a
/// path through it (ps), `None` without links.
#[derive(Debug, Clone, Copy, Default)]
struct CutLinks {
    into: u128,
    out: u128,
    latency: Option<u64>,
}

impl CutLinks {
    fn add(&mut self, into: bool, bandwidth: Bandwidth, latency: u64) {
        let rate = u128::from(bandwidth.bytes_per_sec());
        if into {
            self.into += rate;
        } else {
            self.out += rate;
        }
        self.latency = Some(self.latency.map_or(latency, |l| l.min(latency)));
    }
}

/// The bound of `call` on `machine` (see the module docs).
pub fn bound(machine: &Machine, call: &Call) -> Limit {
    let (sips, cubes) = cut_links(machine, call);
    let mut best = Limit {
        ps: 0,
        reason: "no data crosses a link".to_owned(),
    };
    let mut consider = |name: String, links: &CutLinks, crossing: Crossing| {
        if let Some(limit) = cut_limit(&name, links, crossing)
            && limit.ps > best.ps
        {
            best = limit;
        }
    };
    for (rank, links) in sips.iter().enumerate() {
        consider(
            format!("sip{}", call.sip(rank)),
            links,
            sip_crossing(call, rank),
        );
    }
    for (index, links) in cubes.iter().enumerate() {
        let sip = call.sip(index / call.cubes);
        let name = format!("sip{sip}.cube{}", index % call.cubes);
        consider(name, links, cube_crossing(call, index));
    }
    let compute = compute_ps(machine, call);
    if compute > best.ps {
        best = Limit {
            ps: compute,
            reason: "the reductions at every PE_MATH's peak rate".to_owned(),
        };
    }
    best
}

/// The links of every participating SIP and cube (`sip × cubes + cube`).
fn cut_links(machine: &Machine, call: &Call) -> (Vec<CutLinks>, Vec<CutLinks>) {
    let catalog = LinkCatalog::new(machine.spec()).ok();
    let lat = |l: &crate::topology::LinkParams| l.latency.as_ps();
    let (attach, bridge) = catalog
        .as_ref()
        .map_or((0, 0), |c| (lat(&c.noc_attach), lat(&c.ucie_bridge)));
    let mut sips = vec![CutLinks::default(); call.ranks];
    let mut cubes = vec![CutLinks::default(); call.ranks * call.cubes];
    let outages = machine.outages();
    for (id, edge) in machine.edges().iter().enumerate() {
        // A link down for the run carries nothing (ADR-0115).
        if outages.is_gone(crate::topology::EdgeId::from_index(id)) {
            continue;
        }
        let extra = match edge.kind {
            EdgeKind::InterSip => 4 * attach,
            EdgeKind::Ucie => 2 * attach + 2 * bridge,
            _ => continue,
        };
        let params = machine.link_params(edge);
        let (bandwidth, latency) = (params.effective_bandwidth(), lat(params) + extra);
        let (from, to) = (machine.node(edge.from), machine.node(edge.to));
        let at = |node: &crate::topology::Node| {
            let rank = call.rank_of(node.sip?)?;
            Some((rank, node.cube.map(|c| c as usize)?))
        };
        for (node, into) in [(from, false), (to, true)] {
            let Some((sip, cube)) = at(node) else {
                continue;
            };
            if edge.kind == EdgeKind::InterSip {
                sips[sip].add(into, bandwidth, latency);
            }
            if let Some(links) = cubes.get_mut(sip * call.cubes + cube) {
                links.add(into, bandwidth, latency);
            }
        }
    }
    (sips, cubes)
}

impl Call<'_> {
    /// The SIP of rank `rank`.
    fn sip(&self, rank: usize) -> usize {
        self.sips.map_or(rank, |sips| sips[rank] as usize)
    }

    /// The rank on SIP `sip`, if it takes part.
    fn rank_of(&self, sip: u32) -> Option<usize> {
        match self.sips {
            None => Some(sip as usize).filter(|&r| r < self.ranks),
            Some(sips) => sips.iter().position(|&s| s == sip),
        }
    }
}

/// The bound one cut sets, `None` when nothing must cross it.
fn cut_limit(name: &str, links: &CutLinks, crossing: Crossing) -> Option<Limit> {
    let one_way = |bytes: u64, rate: u128, verb: &str| {
        if bytes == 0 {
            return None;
        }
        // No link this way but bytes to move: no bound from this cut (the
        // machine could not run the call at all).
        let rate = (rate > 0).then_some(rate)?;
        let ps = u128::from(bytes) * 1_000_000_000_000 / rate;
        let ps = u64::try_from(ps).unwrap_or(u64::MAX);
        let latency = links.latency.unwrap_or(0);
        let bandwidth = u64::try_from(rate)
            .ok()
            .and_then(Bandwidth::from_bytes_per_sec);
        let rate = bandwidth.map_or_else(|| format!("{rate} B/s"), |b| b.to_string());
        Some(Limit {
            ps: ps.saturating_add(latency),
            reason: format!(
                "{name} {verb} {bytes} B over its links at {rate}, plus {} of latency",
                crate::sim::SimDuration::from_ps(latency)
            ),
        })
    };
    let into = one_way(crossing.into, links.into, "receives");
    let out = one_way(crossing.out, links.out, "sends");
    match (into, out) {
        (Some(a), Some(b)) => Some(if b.ps > a.ps { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// What crosses SIP `sip`'s links (see the module docs).
fn sip_crossing(call: &Call, sip: usize) -> Crossing {
    let (r, c, b) = (call.ranks as u64, call.cubes as u64, call.block_bytes);
    if r < 2 {
        return Crossing::default();
    }
    let n = r * c;
    let root = sip == call.root / call.cubes;
    let (into, out) = match call.collective {
        Collective::AllReduce => (b, b),
        Collective::AllGather => ((n - c) * b, c * b),
        Collective::ReduceScatter => (c * b, (n - c) * b),
        Collective::AllToAll => (c * (n - c) * b, c * (n - c) * b),
        Collective::Broadcast if root => (0, b),
        Collective::Broadcast => (b, 0),
        Collective::Reduce if root => (b, 0),
        Collective::Reduce => (0, b),
        Collective::SendRecv => (c * b, c * b),
        Collective::Gather if root => ((r - 1) * c * b, 0),
        Collective::Gather => (0, c * b),
        Collective::Scatter if root => (0, (r - 1) * c * b),
        Collective::Scatter => (c * b, 0),
        Collective::Custom => (0, 0),
    };
    Crossing { into, out }
}

/// What crosses the links of cube `index` (`sip × cubes + cube`).
fn cube_crossing(call: &Call, index: usize) -> Crossing {
    let n = (call.ranks * call.cubes) as u64;
    let (r, b) = (call.ranks as u64, call.block_bytes);
    if n < 2 {
        return Crossing::default();
    }
    let root = index == call.root;
    // Gather and scatter move cube `c`'s tile of every rank to (from)
    // cube `c` of the root rank.
    let root_rank_cube = index / call.cubes == call.root / call.cubes;
    let (into, out) = match call.collective {
        Collective::AllReduce => (b, b),
        Collective::AllGather => ((n - 1) * b, b),
        Collective::ReduceScatter => (b, (n - 1) * b),
        Collective::AllToAll => ((n - 1) * b, (n - 1) * b),
        Collective::Broadcast if root => (0, b),
        Collective::Broadcast => (b, 0),
        Collective::Reduce if root => (b, 0),
        Collective::Reduce => (0, b),
        Collective::SendRecv if r >= 2 => (b, b),
        Collective::Gather if r >= 2 && root_rank_cube => ((r - 1) * b, 0),
        Collective::Gather if r >= 2 => (0, b),
        Collective::Scatter if r >= 2 && root_rank_cube => (0, (r - 1) * b),
        Collective::Scatter if r >= 2 => (b, 0),
        _ => (0, 0),
    };
    Crossing { into, out }
}

/// The reductions' time at every participating PE_MATH's peak: `(n − 1)`
/// combines of every reduced element (`n` of them for reduce-scatter's
/// `n` blocks), in ps.
fn compute_ps(machine: &Machine, call: &Call) -> u64 {
    let n = (call.ranks * call.cubes) as u128;
    let elements = u128::from(call.block_elements);
    let combines = match call.collective {
        Collective::AllReduce | Collective::Reduce => n.saturating_sub(1) * elements,
        Collective::ReduceScatter => n.saturating_sub(1) * n * elements,
        _ => 0,
    };
    let pe = machine.spec().pe();
    let rate = n
        * u128::from(machine.pes_per_cube())
        * u128::from(pe.math.elements_per_cycle.get())
        * u128::from(pe.clock.hz());
    if rate == 0 {
        return 0;
    }
    u64::try_from(combines * 1_000_000_000_000 / rate).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySpec;

    fn machine(sets: &[&str]) -> Machine {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let overrides = crate::config::Overrides::parse(&sets).unwrap();
        let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology);
        Machine::build(&spec.unwrap()).unwrap()
    }

    fn call(collective: Collective, ranks: usize, cubes: usize, block: u64) -> Call<'static> {
        Call {
            collective,
            ranks,
            sips: None,
            cubes,
            block_bytes: block,
            block_elements: block / 2,
            root: 0,
        }
    }

    #[test]
    fn two_sips_all_reduce_is_one_block_over_the_one_inter_sip_link() {
        // 2 SIPs on a ring: one link each way, 100 GB/s × 0.8; latency
        // 500 ns + 4 NoC attachments of 5 cycles at 1 GHz.
        let m = machine(&[]);
        let block = 1 << 20;
        let got = bound(&m, &call(Collective::AllReduce, 2, 16, block));
        let want = block * 1_000_000_000_000 / 80_000_000_000 + 500_000 + 4 * 5_000;
        assert_eq!(got.ps, want, "{got}");
        assert!(got.reason.starts_with("sip"), "{got}");
    }

    #[test]
    fn a_job_s_cuts_are_its_own_sips() {
        // On a ring of 8 every SIP has two links each way: a job on SIPs 5
        // and 6 has the bound of SIPs 0 and 1, found at its own SIPs.
        let m = machine(&["system.sips.count=8"]);
        let block = 4096;
        let world = bound(&m, &call(Collective::AllGather, 2, 16, block));
        let job = Call {
            sips: Some(&[5, 6]),
            ..call(Collective::AllGather, 2, 16, block)
        };
        let got = bound(&m, &job);
        assert_eq!(got.ps, world.ps, "{got}");
        assert!(
            got.reason.starts_with("sip5") || got.reason.starts_with("sip6"),
            "{got}"
        );
    }

    #[test]
    fn an_all_gather_on_a_ring_of_eight_receives_every_outside_block_over_two_links() {
        let m = machine(&["system.sips.count=8"]);
        let block = 4096;
        let got = bound(&m, &call(Collective::AllGather, 8, 16, block));
        let into = (8 * 16 - 16) * block;
        let want = into * 1_000_000_000_000 / 160_000_000_000 + 520_000;
        assert_eq!(got.ps, want, "{got}");
    }

    #[test]
    fn one_sip_is_bound_by_its_cubes_ucie_edges() {
        // A corner cube of the 4x4 mesh has two UCIe edges of 4 x 256 GB/s
        // x 0.92; latency 2 ns + 2 bridges of 5 ns + 2 attachments of 5 ns.
        let m = machine(&["system.sips.count=1"]);
        let block = 1 << 20;
        let got = bound(&m, &call(Collective::AllReduce, 1, 16, block));
        let rate = 2 * 942_080_000_000u64;
        let want = block * 1_000_000_000_000 / rate + 2_000 + 20_000;
        assert_eq!(got.ps, want, "{got}");
        assert!(got.reason.contains("cube0"), "{got}");
    }

    #[test]
    fn a_rooted_call_binds_at_its_root_and_one_rank_alone_has_no_bound_but_compute() {
        let m = machine(&[]);
        let block = 1 << 16;
        let gather = bound(&m, &call(Collective::Gather, 2, 16, block));
        assert!(gather.reason.starts_with("sip0 receives"), "{gather}");
        let copy = bound(&m, &call(Collective::AllGather, 1, 1, block));
        assert_eq!(copy.ps, 0, "{copy}");
    }
}
