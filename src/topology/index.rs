//! Compile stage 4: the indexes over the node and edge lists — name → id
//! and, per node, its outgoing edges in edge-id order (so every walk of the
//! graph is deterministic).
//!
//! It knows nothing of what nodes and edges mean.

use std::collections::BTreeMap;

use super::error::TopologyError;
use super::machine::{Edge, EdgeId, Node, NodeId};

/// The indexes of one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Index {
    /// Every name and its node.
    pub names: BTreeMap<String, NodeId>,
    /// `out[n]`: the edges leaving node `n`, in edge-id order.
    pub out: Vec<Vec<EdgeId>>,
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
        let mut names = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if names
                .insert(node.name.clone(), NodeId::from_index(i))
                .is_some()
            {
                return Err(TopologyError::DuplicateName(node.name.clone()));
            }
        }
        let mut out = vec![Vec::new(); nodes.len()];
        for (i, edge) in edges.iter().enumerate() {
            out[edge.from.index()].push(EdgeId::from_index(i));
        }
        Ok(Index { names, out })
    }
}
