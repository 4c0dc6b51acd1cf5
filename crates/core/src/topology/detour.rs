//! The way around parts down for good (`faults.down`, ADR-0115): when a
//! structural route (`plan`) crosses an edge that is down, the route is
//! the quickest one left instead — the least total first-flit latency over
//! the edges up that the view allows, ties broken by node id, so the
//! detour is deterministic.
//!
//! The host is never crossed: it ends a route or starts one, as in `plan`.
//!
//! Knows the machine graph and its outages; nothing of traffic or time
//! beyond each link's latency.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::adjacency::View;
use super::machine::{EdgeId, Machine, NodeId};

/// The quickest route from `from` to `to` in `view` over edges up, as
/// nodes; `None` when the outages leave none.
pub(super) fn detour(
    machine: &Machine,
    from: NodeId,
    to: NodeId,
    view: View,
) -> Option<Vec<NodeId>> {
    let outages = machine.outages();
    let host = machine.host();
    // Each node reached: its distance and the edge it was reached by.
    let mut best: FxHashMap<NodeId, (u64, Option<EdgeId>)> = FxHashMap::default();
    let mut queue = BinaryHeap::from([Reverse((0_u64, from))]);
    best.insert(from, (0, None));
    while let Some(Reverse((distance, node))) = queue.pop() {
        if node == to {
            return Some(walk_back(machine, &best, to));
        }
        if best.get(&node).is_some_and(|&(d, _)| d < distance) || (node == host && node != from) {
            continue;
        }
        for &edge in machine.out_edges(node) {
            let e = machine.edge(edge);
            if !view.allows(e.kind) || outages.is_gone(edge) {
                continue;
            }
            let step = machine.link_params(e).latency.as_ps().saturating_add(1);
            let through = distance.saturating_add(step);
            if best.get(&e.to).is_none_or(|&(d, _)| through < d) {
                best.insert(e.to, (through, Some(edge)));
                queue.push(Reverse((through, e.to)));
            }
        }
    }
    None
}

/// The nodes from the search's start to `to`, by the edges that reached
/// them.
fn walk_back(
    machine: &Machine,
    best: &FxHashMap<NodeId, (u64, Option<EdgeId>)>,
    to: NodeId,
) -> Vec<NodeId> {
    let mut nodes = vec![to];
    let mut at = to;
    while let Some(&(_, Some(edge))) = best.get(&at) {
        at = machine.edge(edge).from;
        nodes.push(at);
    }
    nodes.reverse();
    nodes
}
