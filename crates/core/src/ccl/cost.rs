//! The α-β (Hockney) cost of collective algorithms on the configured
//! machine: what each algorithm's `model` hook builds its estimate from.
//!
//! A message of `m` bytes from endpoint `i` to endpoint `j` costs
//! `α + m / β` ([`Hockney`]): `α` is the sum of the link latencies on the
//! route between their PEs' TCMs, `β` the smallest effective bandwidth
//! (line rate × efficiency) on it. An algorithm's model adds these along
//! its critical path ([`pipeline`] for chunks flowing through a chain of
//! messages).
//!
//! The model is a lower bound of the simulation, never above it: the
//! simulated send also pays the PE_DMA issue, the memory accesses at both
//! ends, per-packet overheads, store-and-forward of the first packet at
//! every hop and the doorbell; the kernel pays its launch, the tile's load
//! and store and the PE_MATH adds; and contention only adds waiting.
//! (`docs/algorithm-author-guide.md` §5 lists which of these an
//! uncontended case differs by.)
//!
//! Knows routes and link parameters (through `hw::Fabric`); nothing of
//! kernels or time dynamics.

use std::collections::BTreeMap;

use crate::config::units::Bandwidth;
use crate::hw::Fabric;
use crate::sim::SimDuration;
use crate::tl::{Dir, PeCoord};
use crate::topology::{EdgeId, NodeId, RouteError};

use super::endpoints::Endpoints;
use super::helpers::TreeLinks;

/// The α-β parameters of one route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hockney {
    /// Start-up cost: the sum of the route's link latencies.
    pub alpha: SimDuration,
    /// The route's bottleneck: its smallest effective bandwidth.
    pub beta: Bandwidth,
}

impl Hockney {
    /// `α + bytes / β` (rounded up to the picosecond).
    pub fn time(&self, bytes: u64) -> SimDuration {
        let serialisation = self.beta.transfer_time(bytes).unwrap_or(SimDuration::MAX);
        plus(self.alpha, serialisation)
    }
}

/// Why a cost could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// An endpoint index outside the collective.
    #[error("cost model: no endpoint {0}")]
    NoEndpoint(usize),
    /// A message from an endpoint to itself (it crosses no link).
    #[error("cost model: endpoint {0} sends to itself")]
    ToItself(usize),
    /// A direction missing from an endpoint's table.
    #[error("cost model: endpoint {endpoint} has no neighbour in direction {dir}")]
    NoNeighbour {
        /// The endpoint.
        endpoint: usize,
        /// The direction.
        dir: Dir,
    },
    /// A tree whose parents do not lead to a root.
    #[error("cost model: the parents of endpoint {0} do not lead to a root")]
    NoRoot(usize),
    /// A PE with no TCM node.
    #[error("cost model: no TCM for {0:?}")]
    NoTcm(PeCoord),
    /// A cube with no HBM node.
    #[error("cost model: no HBM for the cube of {0:?}")]
    NoHbm(PeCoord),
    /// No route between two endpoints.
    #[error("cost model: {0}")]
    Route(#[from] RouteError),
    /// An argument the collective does not have.
    #[error("cost model: {0}")]
    Args(#[from] super::ArgError),
}

/// The collective's endpoints on one machine: their neighbour tables and
/// the routes between them.
pub struct Network<'a> {
    fabric: &'a Fabric,
    endpoints: &'a Endpoints,
}

impl<'a> Network<'a> {
    /// The (wired) `endpoints` of `fabric`'s machine.
    pub fn new(fabric: &'a Fabric, endpoints: &'a Endpoints) -> Network<'a> {
        Network { fabric, endpoints }
    }

    /// Endpoints in the collective.
    pub fn endpoints(&self) -> usize {
        self.endpoints.coords.len()
    }

    /// The endpoint `endpoint`'s table names in `dir`.
    pub fn peer(&self, endpoint: usize, dir: Dir) -> Result<usize, CostError> {
        let table = self.endpoints.tables.get(endpoint);
        let peer = table.and_then(|t| t.get(&dir)).copied();
        peer.ok_or(CostError::NoNeighbour { endpoint, dir })
    }

    /// The α-β parameters of the route from endpoint `from` to `to`.
    pub fn hockney(&self, from: usize, to: usize) -> Result<Hockney, CostError> {
        let (a, b) = (self.tcm(from)?, self.tcm(to)?);
        let path = self.fabric.router().find_path(a, b)?;
        let hops = self.fabric.path_hops(&path);
        let alpha = sequence(hops.iter().map(|h| h.latency));
        let beta = hops.iter().map(|h| h.bandwidth).min();
        Ok(Hockney {
            alpha,
            beta: beta.ok_or(CostError::ToItself(from))?,
        })
    }

    /// `α + bytes / β` from endpoint `from` to `to`.
    pub fn message(&self, from: usize, to: usize, bytes: u64) -> Result<SimDuration, CostError> {
        Ok(self.hockney(from, to)?.time(bytes))
    }

    /// Concurrent copies of `bytes` each, from the HBM of the cube of each
    /// pair's first endpoint to that of its second, over shared links: the
    /// time the busiest link needs at least. A link `l` carrying `k` of the
    /// routes cannot deliver their last byte before the earliest first byte
    /// reaches it (the smallest sum of link latencies before `l` on those
    /// routes), plus `k · bytes / β_l`, plus the smallest sum of latencies
    /// from `l` on; the bound is the largest over links. One route alone
    /// gives its Hockney time `α + bytes / β`.
    pub fn hbm_copies(
        &self,
        pairs: &[(usize, usize)],
        bytes: u64,
    ) -> Result<SimDuration, CostError> {
        let mut links: BTreeMap<EdgeId, SharedLink> = BTreeMap::new();
        for &(from, to) in pairs {
            let path = self
                .fabric
                .router()
                .find_path(self.hbm(from)?, self.hbm(to)?)?;
            let hops = self.fabric.path_hops(&path);
            let total = sequence(hops.iter().map(|h| h.latency));
            let mut before = SimDuration::ZERO;
            for (&edge, hop) in path.edges().iter().zip(&hops) {
                let after = SimDuration::from_ps(total.as_ps() - before.as_ps());
                links
                    .entry(edge)
                    .or_insert_with(|| SharedLink::new(hop.bandwidth))
                    .add(before, after);
                before = plus(before, hop.latency);
            }
        }
        let busiest = links.values().map(|link| link.time(bytes)).max();
        busiest.ok_or(CostError::ToItself(pairs.first().map_or(0, |p| p.0)))
    }

    fn hbm(&self, endpoint: usize) -> Result<NodeId, CostError> {
        let pe = self.coord(endpoint)?;
        self.fabric
            .machine()
            .hbm(pe.sip, pe.cube)
            .ok_or(CostError::NoHbm(pe))
    }

    fn coord(&self, endpoint: usize) -> Result<PeCoord, CostError> {
        let pe = self.endpoints.coords.get(endpoint);
        pe.copied().ok_or(CostError::NoEndpoint(endpoint))
    }

    fn tcm(&self, endpoint: usize) -> Result<NodeId, CostError> {
        let pe = self.coord(endpoint)?;
        self.fabric
            .machine()
            .tcm(pe.sip, pe.cube, pe.pe)
            .ok_or(CostError::NoTcm(pe))
    }
}

/// The routes of [`Network::hbm_copies`] crossing one link.
struct SharedLink {
    bandwidth: Bandwidth,
    routes: u64,
    before: SimDuration,
    after: SimDuration,
}

impl SharedLink {
    fn new(bandwidth: Bandwidth) -> SharedLink {
        SharedLink {
            bandwidth,
            routes: 0,
            before: SimDuration::MAX,
            after: SimDuration::MAX,
        }
    }

    /// One more route, with `before` of latency up to the link and `after`
    /// from it on.
    fn add(&mut self, before: SimDuration, after: SimDuration) {
        self.routes += 1;
        self.before = self.before.min(before);
        self.after = self.after.min(after);
    }

    /// The earliest its routes' `bytes` each can all have crossed it and
    /// arrived.
    fn time(&self, bytes: u64) -> SimDuration {
        let load = self.routes.saturating_mul(bytes);
        let serialisation = self
            .bandwidth
            .transfer_time(load)
            .unwrap_or(SimDuration::MAX);
        sequence([self.before, serialisation, self.after])
    }
}

/// `chunks` pieces flowing through a chain of dependent messages whose
/// per-piece costs are `hops` (each hop sends its pieces one after the
/// other, a piece moves on once it has arrived): the first piece crosses
/// every hop, and the others follow it through the slowest,
/// `Σ hops + (chunks − 1) · max hops`. No hops cost nothing.
pub fn pipeline(hops: &[SimDuration], chunks: u64) -> SimDuration {
    let slowest = hops.iter().copied().max().unwrap_or(SimDuration::ZERO);
    let extra = slowest.as_ps().saturating_mul(chunks.saturating_sub(1));
    plus(sequence(hops.iter().copied()), SimDuration::from_ps(extra))
}

/// The messages of `bytes` along the walk that starts at endpoint `from`
/// and takes `hops` steps to the neighbour in direction `dir`, in order
/// (a chain's, or with `hops` = endpoints a whole ring's).
pub fn walk(
    net: &Network,
    from: usize,
    dir: Dir,
    hops: usize,
    bytes: u64,
) -> Result<Vec<SimDuration>, CostError> {
    let mut at = from;
    let mut messages = Vec::with_capacity(hops);
    for _ in 0..hops {
        let next = net.peer(at, dir)?;
        messages.push(net.message(at, next, bytes)?);
        at = next;
    }
    Ok(messages)
}

/// The messages of `bytes` around the whole ring of `net`'s endpoints, east
/// from endpoint 0 (one per endpoint); none for a ring of one endpoint,
/// which sends nothing.
pub fn ring(net: &Network, bytes: u64) -> Result<Vec<SimDuration>, CostError> {
    match net.endpoints() {
        0 | 1 => Ok(Vec::new()),
        n => walk(net, 0, Dir::E, n, bytes),
    }
}

/// A ring's `messages` (one per endpoint, [`walk`] around it) where every
/// block crosses `n − 1` of them one after another (ring all-gather,
/// reduce-scatter): the longest such path, all but the cheapest message.
/// `None` for fewer than two endpoints (nothing crosses a link).
pub fn ring_rounds(messages: &[SimDuration]) -> Option<SimDuration> {
    let cheapest = messages.iter().copied().min()?;
    (messages.len() > 1).then(|| {
        let total = sequence(messages.iter().copied());
        SimDuration::from_ps(total.as_ps() - cheapest.as_ps())
    })
}

/// `count` dependent repetitions of `step`, saturating.
pub fn repeat(step: SimDuration, count: u64) -> SimDuration {
    SimDuration::from_ps(step.as_ps().saturating_mul(count))
}

/// A reduce-then-broadcast tree ([`super::helpers::reduce_broadcast`]) of
/// `links` (by endpoint) moving `chunks` pieces of `piece_bytes`: the
/// pieces climb from the leaf farthest from the root and descend to the
/// farthest leaf, one [`pipeline`] (the root sends a piece down only once
/// every child's part has arrived). Each tree edge is costed once: O(n)
/// messages for n endpoints, however deep the tree.
pub fn tree(
    net: &Network,
    links: &[TreeLinks],
    piece_bytes: u64,
    chunks: u64,
) -> Result<SimDuration, CostError> {
    let (up, down) = tree_spans(net, links, piece_bytes)?;
    let slowest = up.slowest.max(down.slowest);
    let extra = slowest.as_ps().saturating_mul(chunks.saturating_sub(1));
    Ok(plus(
        plus(up.total, down.total),
        SimDuration::from_ps(extra),
    ))
}

/// The climb alone of [`tree`] (a reduce to the root,
/// [`super::helpers::tile_reduce`]): the pieces climb from the leaf
/// farthest from the root, pipelined through its slowest edge,
/// `Σ up + (chunks − 1) · max up`.
pub fn tree_up(
    net: &Network,
    links: &[TreeLinks],
    piece_bytes: u64,
    chunks: u64,
) -> Result<SimDuration, CostError> {
    let (up, _) = tree_spans(net, links, piece_bytes)?;
    Ok(up.pipelined(chunks))
}

/// The descent alone of [`tree`] (a broadcast from the root): the pieces
/// descend to the farthest leaf, `Σ down + (chunks − 1) · max down`.
pub fn tree_down(
    net: &Network,
    links: &[TreeLinks],
    piece_bytes: u64,
    chunks: u64,
) -> Result<SimDuration, CostError> {
    let (_, down) = tree_spans(net, links, piece_bytes)?;
    Ok(down.pipelined(chunks))
}

/// The longest climb and the longest descent of a tree's leaves.
fn tree_spans(
    net: &Network,
    links: &[TreeLinks],
    piece_bytes: u64,
) -> Result<(Span, Span), CostError> {
    let mut routes = vec![None; links.len()];
    let (mut up, mut down) = (Span::default(), Span::default());
    for leaf in 0..links.len() {
        let route = route_to_root(net, links, leaf, piece_bytes, &mut routes)?;
        if route.up.total > up.total {
            up = route.up;
        }
        if route.down.total > down.total {
            down = route.down;
        }
    }
    Ok((up, down))
}

/// Dependent messages: their summed and their largest cost (what
/// [`pipeline`] needs of them).
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    total: SimDuration,
    slowest: SimDuration,
}

impl Span {
    /// `chunks` pieces through these messages: `total + (chunks − 1) · slowest`.
    fn pipelined(self, chunks: u64) -> SimDuration {
        let extra = self
            .slowest
            .as_ps()
            .saturating_mul(chunks.saturating_sub(1));
        plus(self.total, SimDuration::from_ps(extra))
    }

    fn then(self, step: SimDuration) -> Span {
        Span {
            total: plus(self.total, step),
            slowest: self.slowest.max(step),
        }
    }
}

/// An endpoint's messages up to the root of its tree and down from it.
#[derive(Debug, Clone, Copy, Default)]
struct Route {
    up: Span,
    down: Span,
}

/// The [`Route`] of `leaf`, from the routes of its ancestors in `routes`
/// (filled in on the way: each edge is costed once).
fn route_to_root(
    net: &Network,
    links: &[TreeLinks],
    leaf: usize,
    bytes: u64,
    routes: &mut [Option<Route>],
) -> Result<Route, CostError> {
    let mut climb = Vec::new();
    let mut at = leaf;
    let mut reached = loop {
        let known = routes.get(at).ok_or(CostError::NoEndpoint(at))?;
        if let Some(route) = known {
            break *route;
        }
        let Some(dir) = links.get(at).ok_or(CostError::NoEndpoint(at))?.parent else {
            routes[at] = Some(Route::default());
            break Route::default();
        };
        if climb.len() > links.len() {
            return Err(CostError::NoRoot(leaf));
        }
        let parent = net.peer(at, dir)?;
        climb.push((at, parent));
        at = parent;
    };
    for &(child, parent) in climb.iter().rev() {
        reached = Route {
            up: reached.up.then(net.message(child, parent, bytes)?),
            down: reached.down.then(net.message(parent, child, bytes)?),
        };
        routes[child] = Some(reached);
    }
    Ok(reached)
}

/// The sum of `steps` (dependent steps, one after another).
pub fn sequence(steps: impl IntoIterator<Item = SimDuration>) -> SimDuration {
    steps.into_iter().fold(SimDuration::ZERO, plus)
}

/// `a + b`, saturating (a model never fails on overflow).
fn plus(a: SimDuration, b: SimDuration) -> SimDuration {
    SimDuration::from_ps(a.as_ps().saturating_add(b.as_ps()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ps(n: u64) -> SimDuration {
        SimDuration::from_ps(n)
    }

    #[test]
    fn hockney_is_latency_plus_bytes_over_bandwidth() {
        let link = Hockney {
            alpha: ps(500_000),
            beta: Bandwidth::from_bytes_per_sec(100_000_000_000).unwrap(),
        };
        // 1000 B at 100 GB/s = 10 ns.
        assert_eq!(link.time(1000), ps(510_000));
        assert_eq!(link.time(0), ps(500_000));
    }

    #[test]
    fn concurrent_copies_share_the_links_they_cross() {
        use crate::config::Override;
        use crate::topology::TopologySpec;
        let sets = ["sip.cube_mesh.w=2", "sip.cube_mesh.h=1"];
        let overrides: Vec<_> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap();
        let fabric = Fabric::from_spec(&spec).unwrap();
        let pe0 = |sip, cube| PeCoord { sip, cube, pe: 0 };
        let endpoints = Endpoints {
            coords: vec![pe0(0, 0), pe0(0, 1), pe0(1, 0), pe0(1, 1)],
            tables: vec![Default::default(); 4],
        };
        let net = Network::new(&fabric, &endpoints);
        let bytes = 1 << 20;
        // One copy alone: its route's α + bytes / β.
        let (m, router) = (fabric.machine(), fabric.router());
        let path = router
            .find_path(m.hbm(0, 0).unwrap(), m.hbm(1, 0).unwrap())
            .unwrap();
        let hops = fabric.path_hops(&path);
        let route = Hockney {
            alpha: sequence(hops.iter().map(|h| h.latency)),
            beta: hops.iter().map(|h| h.bandwidth).min().unwrap(),
        };
        let one = net.hbm_copies(&[(0, 2)], bytes).unwrap();
        assert_eq!(one, route.time(bytes));
        // Both cubes of SIP 0 leave through its one inter-SIP port: the
        // shared link carries twice the bytes.
        let two = net.hbm_copies(&[(0, 2), (1, 3)], bytes).unwrap();
        let shared = route.beta.transfer_time(2 * bytes).unwrap();
        assert!(two > one && two >= shared, "{two:?} vs {one:?}, {shared:?}");
        assert!(matches!(
            net.hbm_copies(&[(0, 9)], bytes),
            Err(CostError::NoEndpoint(9))
        ));
    }

    #[test]
    fn a_ring_round_skips_the_cheapest_message_and_repeat_multiplies() {
        assert_eq!(ring_rounds(&[ps(3), ps(5), ps(2)]), Some(ps(8)));
        assert_eq!(ring_rounds(&[ps(3)]), None);
        assert_eq!(ring_rounds(&[]), None);
        assert_eq!(repeat(ps(7), 3), ps(21));
        assert_eq!(repeat(ps(u64::MAX), 2), ps(u64::MAX));
    }

    #[test]
    fn a_pipeline_pays_the_slowest_hop_once_per_extra_piece() {
        assert_eq!(pipeline(&[ps(3), ps(5), ps(2)], 1), ps(10));
        assert_eq!(pipeline(&[ps(3), ps(5), ps(2)], 4), ps(25));
        assert_eq!(pipeline(&[], 4), ps(0));
        assert_eq!(sequence([ps(1), ps(2)]), ps(3));
    }
}
