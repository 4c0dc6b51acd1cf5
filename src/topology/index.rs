//! Compile stage 4: the indexes over the node and edge lists — name → id
//! and, per node, its outgoing edges in edge-id order (so every walk of the
//! graph is deterministic).
//!
//! Both are flat arrays (ADR-0040): the node ids sorted by name (a name is
//! found by binary search over the nodes' own names, never copied) and the
//! outgoing edges of every node in one list, node after node, with where
//! each node's run starts.
//!
//! It knows nothing of what nodes and edges mean.

use super::error::TopologyError;
use super::machine::{Edge, EdgeId, Node, NodeId};

/// The indexes of one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Index {
    /// Every node, in name order.
    by_name: Vec<NodeId>,
    /// `out[starts[n]..starts[n + 1]]`: the edges leaving node `n`, in
    /// edge-id order.
    starts: Vec<u32>,
    out: Vec<EdgeId>,
}

impl Index {
    /// Indexes `nodes` and `edges`; fails if either list is too long for
    /// 32-bit ids or a name repeats.
    pub fn build(nodes: &[Node], edges: &[Edge]) -> Result<Index, TopologyError> {
        for (what, count) in [("nodes", nodes.len()), ("edges", edges.len())] {
            if u32::try_from(count).is_err() {
                return Err(TopologyError::TooLarge { what, count });
            }
        }
        let mut by_name: Vec<NodeId> = (0..nodes.len()).map(NodeId::from_index).collect();
        by_name.sort_unstable_by(|&a, &b| nodes[a.index()].name.cmp(&nodes[b.index()].name));
        if let Some(pair) = by_name
            .windows(2)
            .find(|pair| nodes[pair[0].index()].name == nodes[pair[1].index()].name)
        {
            return Err(TopologyError::DuplicateName(
                nodes[pair[0].index()].name.clone(),
            ));
        }
        let mut starts = vec![0_u32; nodes.len() + 1];
        for edge in edges {
            starts[edge.from.index() + 1] += 1;
        }
        for n in 0..nodes.len() {
            starts[n + 1] += starts[n];
        }
        let mut filled = starts.clone();
        let mut out = vec![EdgeId::from_index(0); edges.len()];
        for (i, edge) in edges.iter().enumerate() {
            let slot = &mut filled[edge.from.index()];
            out[*slot as usize] = EdgeId::from_index(i);
            *slot += 1;
        }
        Ok(Index {
            by_name,
            starts,
            out,
        })
    }

    /// The node called `name` among `nodes` (the list indexed).
    pub fn find(&self, nodes: &[Node], name: &str) -> Option<NodeId> {
        let at = self
            .by_name
            .binary_search_by(|id| nodes[id.index()].name.as_str().cmp(name))
            .ok()?;
        Some(self.by_name[at])
    }

    /// Every node, in name order.
    pub fn by_name(&self) -> &[NodeId] {
        &self.by_name
    }

    /// The edges leaving `node`, in edge-id order.
    pub fn out(&self, node: NodeId) -> &[EdgeId] {
        let (from, to) = (self.starts[node.index()], self.starts[node.index() + 1]);
        &self.out[from as usize..to as usize]
    }
}
