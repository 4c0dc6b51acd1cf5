//! Compile stage 4: the indexes over the node and edge lists — name → id
//! and, per node, its outgoing edges in edge-id order (so every walk of the
//! graph is deterministic).
//!
//! Both are flat arrays (ADR-0040): the node ids sorted by name (a name is
//! found by binary search over the nodes' own names, never copied) and the
//! outgoing edges of every node in one list, node after node, with where
//! each node's run starts. The name order is sorted on the first lookup by
//! name, not at build (ADR-0062): a run that finds nodes by coordinates
//! never asks for it, and the sort cost a set-up more than the rest of the
//! index. The build checks that no name repeats with a hash set instead.
//!
//! It knows nothing of what nodes and edges mean.

use std::sync::OnceLock;

use rustc_hash::FxHashSet;

use super::error::TopologyError;
use super::machine::{Edge, EdgeId, Node, NodeId};

/// The indexes of one machine.
#[derive(Debug, Clone)]
pub(crate) struct Index {
    /// Every node, in name order (sorted when first asked for).
    by_name: OnceLock<Vec<NodeId>>,
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
        check_unique(nodes)?;
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
            by_name: OnceLock::new(),
            starts,
            out,
        })
    }

    /// The node called `name` among `nodes` (the list indexed).
    pub fn find(&self, nodes: &[Node], name: &str) -> Option<NodeId> {
        let by_name = self.by_name(nodes);
        let at = by_name
            .binary_search_by(|id| nodes[id.index()].name.as_str().cmp(name))
            .ok()?;
        Some(by_name[at])
    }

    /// Every node of `nodes` (the list indexed), in name order.
    pub fn by_name(&self, nodes: &[Node]) -> &[NodeId] {
        self.by_name.get_or_init(|| {
            let mut by_name: Vec<NodeId> = (0..nodes.len()).map(NodeId::from_index).collect();
            by_name.sort_unstable_by(|&a, &b| nodes[a.index()].name.cmp(&nodes[b.index()].name));
            by_name
        })
    }

    /// The edges leaving `node`, in edge-id order.
    pub fn out(&self, node: NodeId) -> &[EdgeId] {
        let (from, to) = (self.starts[node.index()], self.starts[node.index() + 1]);
        &self.out[from as usize..to as usize]
    }
}

/// Fails on the first node (in id order) whose name an earlier node has.
fn check_unique(nodes: &[Node]) -> Result<(), TopologyError> {
    let mut seen = FxHashSet::with_capacity_and_hasher(nodes.len(), Default::default());
    match nodes.iter().find(|node| !seen.insert(node.name.as_str())) {
        Some(node) => Err(TopologyError::DuplicateName(node.name.clone())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::machine::NodeKind;

    fn node(name: &str) -> Node {
        Node {
            name: name.to_owned(),
            kind: NodeKind::Router,
            sip: None,
            cube: None,
            pe: None,
            router: None,
            side: None,
        }
    }

    #[test]
    fn a_repeated_name_is_refused() {
        let nodes = [node("b"), node("a"), node("b")];
        let error = Index::build(&nodes, &[]).err();
        assert_eq!(error, Some(TopologyError::DuplicateName("b".to_owned())));
    }

    #[test]
    fn names_are_found_in_order() {
        let nodes = [node("b"), node("a"), node("c")];
        let index = Index::build(&nodes, &[]).unwrap();
        let order: Vec<usize> = index.by_name(&nodes).iter().map(|id| id.index()).collect();
        assert_eq!(order, [1, 0, 2]);
        assert_eq!(index.find(&nodes, "c").map(NodeId::index), Some(2));
        assert_eq!(index.find(&nodes, "d"), None);
    }
}
