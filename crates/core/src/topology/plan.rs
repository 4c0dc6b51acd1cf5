//! The structural route between two nodes, as a node sequence.
//!
//! Routes are computed hierarchically, never by searching the graph, so
//! dimension order holds at every level by construction:
//!
//! 1. **Host.** A route to or from the host goes through the PCIe endpoint
//!    of the other end's SIP.
//! 2. **Management bus** (views that allow `mgmt` only). Between two
//!    members of one SIP's bus (PCIe endpoint, IO_CPU, the M_CPUs) the route
//!    is the bus: direct to or from the IO_CPU, else through it.
//! 3. **Fabric.** Otherwise: climb from the source to its router (TCM → PE
//!    → router; the HBM controller leaves by the zone router nearest the
//!    next waypoint), cross SIPs in dimension order on the SIP grid (X then
//!    Y; on a ring the shorter way, ties east or south), inside each SIP
//!    cross cubes in X-then-Y order over UCIe, inside each cube go X then Y
//!    over routers, and descend to the destination.
//!
//! Which edge kinds a view allows is checked by `routing` on the result.
//! This module knows the machine's structure; it knows nothing of time.

use std::collections::BTreeMap;

use smallvec::{SmallVec, smallvec};

use super::adjacency::View;
use super::grid::GridPos;
use super::machine::{EdgeKind, Machine, NodeId, NodeKind};

/// Where a node's climb ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    /// One router.
    Router(GridPos),
    /// Any router of the HBM zone (the HBM controller).
    HbmZone,
}

/// A node's way down to its router: the nodes from it up to (not
/// including) the router, and the router it reaches, in its SIP and cube.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    chain: SmallVec<[NodeId; 2]>,
    sip: u32,
    cube: u32,
    anchor: Anchor,
}

/// A place inside a cube: SIP, cube and anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    sip: u32,
    cube: u32,
    anchor: Anchor,
}

/// Room for the nodes of most routes while one is built, so that it is
/// not moved as it grows (`routing` keeps it trimmed).
const ROUTE_CAPACITY: usize = 64;

/// The node sequence from `from` to `to` (`[from]` when they are equal),
/// or `None` when the machine lacks a port the route needs.
pub(crate) fn plan(machine: &Machine, from: NodeId, to: NodeId, view: View) -> Option<Vec<NodeId>> {
    let host = machine.host();
    if from == to {
        return Some(vec![from]);
    }
    if from == host {
        let pcie = machine.pcie_ep(machine.node(to).sip?)?;
        let mut nodes = vec![host];
        nodes.extend(plan_device(machine, pcie, to, view)?);
        return Some(nodes);
    }
    if to == host {
        let pcie = machine.pcie_ep(machine.node(from).sip?)?;
        let mut nodes = plan_device(machine, from, pcie, view)?;
        nodes.push(host);
        return Some(nodes);
    }
    plan_device(machine, from, to, view)
}

/// A route between two nodes of SIPs.
fn plan_device(machine: &Machine, from: NodeId, to: NodeId, view: View) -> Option<Vec<NodeId>> {
    if from == to {
        return Some(vec![from]);
    }
    if view.allows(EdgeKind::Mgmt) {
        if let Some(route) = bus_route(machine, from, to) {
            return Some(route);
        }
    }
    fabric_route(machine, from, to).map(remove_loops)
}

/// The management-bus route between two bus members of one SIP.
fn bus_route(machine: &Machine, from: NodeId, to: NodeId) -> Option<Vec<NodeId>> {
    let on_bus = |id: NodeId| {
        let node = machine.node(id);
        matches!(
            node.kind,
            NodeKind::PcieEp | NodeKind::IoCpu | NodeKind::Mcpu
        )
        .then_some(node.sip)?
    };
    let sip = on_bus(from)?;
    if on_bus(to)? != sip {
        return None;
    }
    let hub = machine.io_cpu(sip)?;
    if from == hub || to == hub {
        Some(vec![from, to])
    } else {
        Some(vec![from, hub, to])
    }
}

/// The fabric route: climb, cross SIPs and cubes, descend.
fn fabric_route(machine: &Machine, from: NodeId, to: NodeId) -> Option<Vec<NodeId>> {
    let source = mount(machine, from)?;
    let target = mount(machine, to)?;
    if let Some(i) = target.chain.iter().position(|&n| n == from) {
        return Some(target.chain[..=i].iter().rev().copied().collect());
    }
    if let Some(i) = source.chain.iter().position(|&n| n == to) {
        return Some(source.chain[..=i].to_vec());
    }
    let mut nodes = Vec::with_capacity(ROUTE_CAPACITY);
    nodes.extend(&source.chain);
    let mut at = Place {
        sip: source.sip,
        cube: source.cube,
        anchor: source.anchor,
    };
    for (exit, entry) in crossings(machine, &source, &target)? {
        let exit_pos = machine.node(exit).router?;
        routers(machine, at, Anchor::Router(exit_pos), &mut nodes)?;
        nodes.extend([exit, entry]);
        let entry_node = machine.node(entry);
        at = Place {
            sip: entry_node.sip?,
            cube: entry_node.cube?,
            anchor: Anchor::Router(entry_node.router?),
        };
    }
    routers(machine, at, target.anchor, &mut nodes)?;
    nodes.extend(target.chain.iter().rev());
    Some(nodes)
}

/// How `id` hangs on its cube's NoC.
fn mount(machine: &Machine, id: NodeId) -> Option<Mount> {
    let node = machine.node(id);
    let (sip, cube) = (node.sip?, node.cube?);
    let (chain, anchor) = match node.kind {
        NodeKind::Host => return None,
        NodeKind::Router => (smallvec![], Anchor::Router(node.router?)),
        NodeKind::Hbm => (smallvec![id], Anchor::HbmZone),
        NodeKind::Tcm => {
            let pe = machine.pe(sip, cube, node.pe?)?;
            (smallvec![id, pe], Anchor::Router(node.router?))
        }
        _ => (smallvec![id], Anchor::Router(node.router?)),
    };
    Some(Mount {
        chain,
        sip,
        cube,
        anchor,
    })
}

/// The port pairs a route crosses, in order: inter-SIP ports in dimension
/// order on the SIP grid, and inside each SIP the UCIe ports from the cube
/// where it enters to the cube where it leaves.
fn crossings(machine: &Machine, source: &Mount, target: &Mount) -> Option<Vec<(NodeId, NodeId)>> {
    let sips = machine.grids().sips;
    let mut list = Vec::new();
    let (mut sip, mut cube) = (source.sip, source.cube);
    for side in sips.route(sips.pos(sip), sips.pos(target.sip)) {
        cube_crossings(machine, sip, (cube, machine.sip_port_cube(side)), &mut list)?;
        let next = sips.index(sips.neighbour(sips.pos(sip), side)?);
        list.push((
            machine.sip_port(sip, side)?,
            machine.sip_port(next, side.opposite())?,
        ));
        sip = next;
        cube = machine.sip_port_cube(side.opposite());
    }
    cube_crossings(machine, sip, (cube, target.cube), &mut list)?;
    Some(list)
}

/// Appends to `list` the UCIe port pairs from cube `from` to cube `to`
/// of SIP `sip`.
fn cube_crossings(
    machine: &Machine,
    sip: u32,
    (from, to): (u32, u32),
    list: &mut Vec<(NodeId, NodeId)>,
) -> Option<()> {
    let cubes = machine.grids().cubes;
    let (mut pos, end) = (cubes.pos(from), cubes.pos(to));
    while let Some(side) = cubes.first_step(pos, end) {
        let Some(next) = cubes.neighbour(pos, side) else {
            break;
        };
        list.push((
            machine.ucie_port(sip, cubes.index(pos), side)?,
            machine.ucie_port(sip, cubes.index(next), side.opposite())?,
        ));
        pos = next;
    }
    Some(())
}

/// Appends to `nodes` the routers from `at` to `to` inside `at`'s cube, X
/// then Y, both ends included. An HBM-zone end becomes the zone router
/// nearest the other end.
fn routers(machine: &Machine, at: Place, to: Anchor, nodes: &mut Vec<NodeId>) -> Option<()> {
    let layout = machine.layout();
    let (start, end) = match (at.anchor, to) {
        (Anchor::Router(a), Anchor::Router(b)) => (a, b),
        (Anchor::HbmZone, Anchor::Router(b)) => (layout.nearest_hbm_port(b), b),
        (Anchor::Router(a), Anchor::HbmZone) => (a, layout.nearest_hbm_port(a)),
        (Anchor::HbmZone, Anchor::HbmZone) => {
            let port = layout.hbm_ports().next()?;
            (port, port)
        }
    };
    let grid = layout.grid();
    let cube = machine.routers(at.sip, at.cube)?;
    let router = |pos: GridPos| {
        let inside = pos.row < grid.height() && pos.col < grid.width();
        inside.then(|| cube.get(grid.index(pos) as usize).copied())?
    };
    let mut pos = start;
    nodes.push(router(pos)?);
    while let Some(side) = grid.first_step(pos, end) {
        let Some(next) = grid.neighbour(pos, side) else {
            break;
        };
        pos = next;
        nodes.push(router(pos)?);
    }
    Some(())
}

/// Cuts every loop out of a walk (a route that starts or ends at a port
/// would otherwise step to the port's router and straight back). Most
/// walks have none: a sorted copy of the nodes shows it with no map.
fn remove_loops(nodes: Vec<NodeId>) -> Vec<NodeId> {
    let mut sorted: SmallVec<[NodeId; ROUTE_CAPACITY]> = SmallVec::from_slice(&nodes);
    sorted.sort_unstable();
    if sorted.windows(2).all(|pair| pair[0] != pair[1]) {
        return nodes;
    }
    let mut walk: Vec<NodeId> = Vec::with_capacity(nodes.len());
    let mut seen: BTreeMap<NodeId, usize> = BTreeMap::new();
    for node in nodes {
        if let Some(&i) = seen.get(&node) {
            for dropped in walk.drain(i + 1..) {
                seen.remove(&dropped);
            }
        } else {
            seen.insert(node, walk.len());
            walk.push(node);
        }
    }
    walk
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySpec;
    use crate::topology::naming::Side;

    fn machine() -> Machine {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        Machine::build(&spec).unwrap()
    }

    #[test]
    fn loops_are_cut() {
        let n = |i: usize| NodeId::from_index(i);
        let walk = remove_loops(vec![n(1), n(2), n(3), n(2), n(4)]);
        assert_eq!(walk, [n(1), n(2), n(4)]);
    }

    #[test]
    fn cube_crossings_go_east_then_south() {
        let machine = machine();
        let mut list = Vec::new();
        cube_crossings(&machine, 0, (0, 15), &mut list).unwrap();
        let sides: Vec<Side> = list
            .iter()
            .filter_map(|&(exit, _)| machine.node(exit).side)
            .collect();
        assert_eq!(
            sides,
            [Side::E, Side::E, Side::E, Side::S, Side::S, Side::S]
        );
    }

    #[test]
    fn pe_to_its_own_tcm_is_one_hop() {
        let machine = machine();
        let (pe, tcm) = (machine.pe(0, 0, 3).unwrap(), machine.tcm(0, 0, 3).unwrap());
        assert_eq!(plan(&machine, pe, tcm, View::Data).unwrap(), [pe, tcm]);
        assert_eq!(plan(&machine, tcm, pe, View::Data).unwrap(), [tcm, pe]);
    }
}
