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

use crate::config::units::Bandwidth;
use crate::hw::Fabric;
use crate::sim::SimDuration;
use crate::tl::{Dir, PeCoord};
use crate::topology::RouteError;

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
    /// No route between two endpoints.
    #[error("cost model: {0}")]
    Route(#[from] RouteError),
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

    fn tcm(&self, endpoint: usize) -> Result<crate::topology::NodeId, CostError> {
        let pe = *self
            .endpoints
            .coords
            .get(endpoint)
            .ok_or(CostError::NoEndpoint(endpoint))?;
        self.fabric
            .machine()
            .tcm(pe.sip, pe.cube, pe.pe)
            .ok_or(CostError::NoTcm(pe))
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
    let slowest = up.slowest.max(down.slowest);
    let extra = slowest.as_ps().saturating_mul(chunks.saturating_sub(1));
    Ok(plus(
        plus(up.total, down.total),
        SimDuration::from_ps(extra),
    ))
}

/// Dependent messages: their summed and their largest cost (what
/// [`pipeline`] needs of them).
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    total: SimDuration,
    slowest: SimDuration,
}

impl Span {
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
    fn a_pipeline_pays_the_slowest_hop_once_per_extra_piece() {
        assert_eq!(pipeline(&[ps(3), ps(5), ps(2)], 1), ps(10));
        assert_eq!(pipeline(&[ps(3), ps(5), ps(2)], 4), ps(25));
        assert_eq!(pipeline(&[], 4), ps(0));
        assert_eq!(sequence([ps(1), ps(2)]), ps(3));
    }
}
