//! Routing (seed ADR-0051): [`PathRouter`] turns a pair of nodes into a
//! [`Path`], the ordered edges a transfer crosses — what the latency model
//! turns into a sequence of serial hops.
//!
//! Routes are structural and deterministic (see `plan`): dimension order
//! on the router grid, the cube mesh and the SIP grid; one that crosses a
//! part down for good takes the quickest way left instead (`detour`,
//! ADR-0115). Each route is asked
//! for in an adjacency [`View`]; a route that needs an edge kind the view
//! excludes is a [`RouteError::NoRoute`] naming both ends and the view.
//! Each `(from, to, view)` is computed once and cached; later calls return
//! the same `Arc<Path>`.
//!
//! This module knows the machine graph; it knows nothing of time, traffic
//! or contention.

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::address::{AddressError, MemSpace};
use super::adjacency::View;
use super::detour::detour;
use super::machine::{EdgeId, EdgeKind, Machine, NodeId};
use super::plan::plan;
use super::resolver::AddressResolver;
use crate::sim::SimDuration;

/// A route that cannot be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// No node has this name (or id).
    #[error("no node named {0}")]
    UnknownNode(String),
    /// The route would use an edge the view excludes.
    #[error("no route from {from} to {to} in the {view} view: {reason}")]
    NoRoute {
        /// The source's name.
        from: String,
        /// The destination's name.
        to: String,
        /// The adjacency view asked for.
        view: View,
        /// Which hop is missing or excluded.
        reason: String,
    },
    /// The address is not on this machine.
    #[error(transparent)]
    Address(#[from] AddressError),
}

/// A route: the nodes visited and the directed edges between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    nodes: Vec<NodeId>,
    edges: Vec<EdgeId>,
    /// The smallest `max_payload` of the path's links (bytes; 0 for an
    /// empty path).
    max_payload: u64,
}

impl Path {
    /// The largest packet payload every link of the path takes: a transfer
    /// is packetised once, at its source (0 for an empty path).
    pub fn max_payload(&self) -> u64 {
        self.max_payload
    }

    /// Where the route starts.
    pub fn from(&self) -> NodeId {
        self.nodes[0]
    }

    /// Where it ends.
    pub fn to(&self) -> NodeId {
        self.nodes[self.nodes.len() - 1]
    }

    /// Every node, from the source to the destination.
    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// Every edge, in order; empty when source and destination are one node.
    pub fn edges(&self) -> &[EdgeId] {
        &self.edges
    }

    /// Number of hops.
    pub fn hops(&self) -> usize {
        self.edges.len()
    }

    /// Hops of `kind`.
    pub fn hops_of(&self, machine: &Machine, kind: EdgeKind) -> usize {
        self.edges
            .iter()
            .filter(|&&e| machine.edge(e).kind == kind)
            .count()
    }

    /// The sum of the hops' first-flit latencies (saturating).
    pub fn latency(&self, machine: &Machine) -> SimDuration {
        let ps = self
            .edges
            .iter()
            .map(|&e| machine.link_params(machine.edge(e)).latency.as_ps())
            .fold(0_u64, u64::saturating_add);
        SimDuration::from_ps(ps)
    }
}

/// Finds and caches routes over one machine.
#[derive(Debug)]
pub struct PathRouter {
    machine: Arc<Machine>,
    resolver: AddressResolver,
    /// Looked up by every transfer: a hash map (nothing iterates it, so its
    /// order is never observable), with a fast hash for small integer keys.
    cache: RefCell<FxHashMap<(NodeId, NodeId, View), Arc<Path>>>,
    /// The edges detours around parts down for good use that the planned
    /// routes did not (ADR-0115), for `--explain`.
    rerouted: RefCell<BTreeSet<EdgeId>>,
}

impl PathRouter {
    /// A router over `machine`.
    pub fn new(machine: Arc<Machine>) -> PathRouter {
        PathRouter {
            resolver: AddressResolver::new(Arc::clone(&machine)),
            machine,
            cache: RefCell::new(FxHashMap::default()),
            rerouted: RefCell::default(),
        }
    }

    /// The machine routed over.
    pub fn machine(&self) -> &Arc<Machine> {
        &self.machine
    }

    /// The edges that routes found so far took around parts down for good
    /// and their planned routes did not take, in edge order (ADR-0115).
    pub fn rerouted_over(&self) -> Vec<EdgeId> {
        self.rerouted.borrow().iter().copied().collect()
    }

    /// The address resolver of the same machine.
    pub fn resolver(&self) -> &AddressResolver {
        &self.resolver
    }

    /// The data route (no management bus) from `from` to `to`.
    pub fn find_path(&self, from: NodeId, to: NodeId) -> Result<Arc<Path>, RouteError> {
        self.find_path_in(from, to, View::Data)
    }

    /// The route from `from` to `to` in `view`.
    pub fn find_path_in(
        &self,
        from: NodeId,
        to: NodeId,
        view: View,
    ) -> Result<Arc<Path>, RouteError> {
        self.check(from)?;
        self.check(to)?;
        if let Some(path) = self.cache.borrow().get(&(from, to, view)) {
            return Ok(Arc::clone(path));
        }
        let path = Arc::new(self.route(from, to, view)?);
        self.cache
            .borrow_mut()
            .insert((from, to, view), Arc::clone(&path));
        Ok(path)
    }

    /// The data route and its length in hops.
    pub fn find_path_with_distance(
        &self,
        from: NodeId,
        to: NodeId,
    ) -> Result<(Arc<Path>, usize), RouteError> {
        let path = self.find_path(from, to)?;
        let hops = path.hops();
        Ok((path, hops))
    }

    /// The route of a copy an M_CPU.DMA engine drives, from its source
    /// `from` to its destination `to`: the data fabric of one SIP and the
    /// host link, never an inter-SIP link.
    pub fn find_mcpu_dma_path(&self, from: NodeId, to: NodeId) -> Result<Arc<Path>, RouteError> {
        self.find_path_in(from, to, View::McpuDma)
    }

    /// The data route from `from` to the memory that holds `addr`, and
    /// that memory.
    pub fn find_memory_path(
        &self,
        from: NodeId,
        addr: u64,
    ) -> Result<(Arc<Path>, MemSpace), RouteError> {
        let target = self.resolver.resolve(addr)?;
        Ok((self.find_path(from, target.node)?, target.space))
    }

    /// The data route between two nodes given by name.
    pub fn find_node_path(&self, from: &str, to: &str) -> Result<Arc<Path>, RouteError> {
        let id = |name: &str| {
            self.machine
                .find(name)
                .ok_or_else(|| RouteError::UnknownNode(name.to_owned()))
        };
        self.find_path(id(from)?, id(to)?)
    }

    /// Errors unless `id` is a node of this machine.
    fn check(&self, id: NodeId) -> Result<(), RouteError> {
        if id.index() < self.machine.nodes().len() {
            Ok(())
        } else {
            Err(RouteError::UnknownNode(format!("#{id}")))
        }
    }

    /// Plans the route and turns it into edges, checking each against `view`.
    fn route(&self, from: NodeId, to: NodeId, view: View) -> Result<Path, RouteError> {
        let machine = &*self.machine;
        let no_route = |reason: String| self.no_route((from, to), view, reason);
        let nodes = plan(machine, from, to, view)
            .ok_or_else(|| no_route("the machine has no port on the way".to_owned()))?;
        let planned = self.path_of(nodes, view)?;
        let outages = machine.outages();
        if !outages.has_gone() || !planned.edges.iter().any(|&e| outages.is_gone(e)) {
            return Ok(planned);
        }
        let nodes = detour(machine, from, to, view).ok_or_else(|| {
            let faults = outages.gone_faults();
            let verb = if faults.len() == 1 { "leaves" } else { "leave" };
            no_route(format!(
                "{} {verb} no way between them",
                faults.join(" and ")
            ))
        })?;
        let path = self.path_of(nodes, view)?;
        let mut rerouted = self.rerouted.borrow_mut();
        rerouted.extend(path.edges.iter().filter(|e| !planned.edges.contains(e)));
        Ok(path)
    }

    /// The route from `from` to `to` in `view` that cannot be, and why.
    fn no_route(&self, (from, to): (NodeId, NodeId), view: View, reason: String) -> RouteError {
        RouteError::NoRoute {
            from: self.machine.node(from).name.clone(),
            to: self.machine.node(to).name.clone(),
            view,
            reason,
        }
    }

    /// The path through `nodes` (a planned route: at least one node),
    /// each hop checked against `view`.
    fn path_of(&self, mut nodes: Vec<NodeId>, view: View) -> Result<Path, RouteError> {
        let machine = &*self.machine;
        let ends = (nodes[0], nodes[nodes.len() - 1]);
        let no_route = |reason: String| self.no_route(ends, view, reason);
        nodes.shrink_to_fit();
        let mut edges = Vec::with_capacity(nodes.len() - 1);
        let mut max_payload = u64::MAX;
        for pair in nodes.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let hop = || format!("{} -> {}", machine.node(a).name, machine.node(b).name);
            let id = machine
                .edge_between(a, b)
                .ok_or_else(|| no_route(format!("no edge {}", hop())))?;
            let edge = machine.edge(id);
            if !view.allows(edge.kind) {
                let kind = edge.kind;
                return Err(no_route(format!(
                    "the route needs the {kind} hop {}",
                    hop()
                )));
            }
            let payload = machine.link_params(edge).max_payload.get().bytes();
            max_payload = max_payload.min(payload);
            edges.push(id);
        }
        if edges.is_empty() {
            max_payload = 0;
        }
        Ok(Path {
            nodes,
            edges,
            max_payload,
        })
    }
}
