//! Compile stage 3: wire the nodes with edges. Every physical link becomes
//! two directed edges, one per direction (each a separate serial resource
//! for the latency model), created together so that edge `2k + 1` is the
//! reverse of edge `2k`.
//!
//! What joins what, and which [`LinkCatalog`] entry it takes:
//!
//! | kind | joins | parameters |
//! |---|---|---|
//! | `Pcie` | host ↔ each SIP's PCIe endpoint | `host_link` |
//! | `Mgmt` | PCIe endpoint ↔ IO_CPU, IO_CPU ↔ every M_CPU of its SIP | NoC attach |
//! | `Attach` | PCIe endpoint, IO_CPU ↔ their IO-cube routers | NoC attach |
//! | `Attach` | inter-SIP port ↔ its router | NoC attach |
//! | `Noc` | neighbouring routers | NoC hop |
//! | `Attach` | PE, SRAM, M_CPU, M_CPU.DMA ↔ their routers | NoC attach |
//! | `Attach` | PE ↔ its TCM | TCM port |
//! | `HbmPort` | HBM controller ↔ every router of the HBM zone | NoC attach |
//! | `Attach` | UCIe port ↔ its router (the bridge) | UCIe bridge |
//! | `Ucie` | UCIe port ↔ the neighbouring cube's facing port | UCIe edge |
//! | `InterSip` | inter-SIP port ↔ the neighbouring SIP's facing port | `inter_sip` |
//!
//! This stage knows ids, kinds and parameters; it decides no placement.

use super::expand::{CubeNodes, SipNodes, Structure};
use super::grid::GridPos;
use super::layout::CubeLayout;
use super::link::LinkRole;
use super::machine::{Edge, EdgeId, EdgeKind, NodeId};
use super::machine_grids::{IO_CUBE, MachineGrids};

/// The edge list being built.
struct Edges {
    edges: Vec<Edge>,
}

impl Edges {
    /// Adds `a → b` and `b → a`.
    fn link(&mut self, a: NodeId, b: NodeId, kind: EdgeKind, role: LinkRole) {
        let forward = EdgeId::from_index(self.edges.len());
        let backward = EdgeId::from_index(self.edges.len() + 1);
        for (from, to, reverse) in [(a, b, backward), (b, a, forward)] {
            self.edges.push(Edge {
                from,
                to,
                kind,
                role,
                reverse,
            });
        }
    }
}

/// The inputs every wiring step reads.
pub(crate) struct Wiring<'a> {
    pub grids: &'a MachineGrids,
    pub layout: &'a CubeLayout,
    pub structure: &'a Structure,
}

/// All edges of the machine.
pub(crate) fn wire(wiring: &Wiring<'_>) -> Vec<Edge> {
    let mut edges = Edges { edges: Vec::new() };
    let structure = wiring.structure;
    for sip in &structure.sips {
        wire_sip_level(&mut edges, wiring, structure.host, sip);
        for cube in &sip.cubes {
            wire_cube(&mut edges, wiring.layout, cube);
        }
        wire_ucie(&mut edges, wiring.grids, sip);
    }
    wire_inter_sip(&mut edges, wiring);
    edges.edges
}

/// The router of `cube` at `pos`.
fn router(cube: &CubeNodes, layout: &CubeLayout, pos: GridPos) -> NodeId {
    let index = layout.grid().index(pos);
    cube.routers[index as usize]
}

fn wire_sip_level(edges: &mut Edges, wiring: &Wiring<'_>, host: NodeId, sip: &SipNodes) {
    let layout = wiring.layout;
    edges.link(host, sip.pcie_ep, EdgeKind::Pcie, LinkRole::Pcie);
    edges.link(sip.pcie_ep, sip.io_cpu, EdgeKind::Mgmt, LinkRole::NocAttach);
    for cube in &sip.cubes {
        edges.link(sip.io_cpu, cube.mcpu, EdgeKind::Mgmt, LinkRole::NocAttach);
    }
    let io_cube = &sip.cubes[IO_CUBE as usize];
    for (node, pos) in [
        (sip.pcie_ep, layout.pcie_ep()),
        (sip.io_cpu, layout.io_cpu()),
    ] {
        let at = router(io_cube, layout, pos);
        edges.link(node, at, EdgeKind::Attach, LinkRole::NocAttach);
    }
    for (&side, &port) in &sip.ports {
        let cube = &sip.cubes[wiring.grids.port_cube(side) as usize];
        let at = router(cube, layout, layout.port(side));
        edges.link(port, at, EdgeKind::Attach, LinkRole::NocAttach);
    }
}

fn wire_cube(edges: &mut Edges, layout: &CubeLayout, cube: &CubeNodes) {
    let grid = layout.grid();
    for (pos, side) in grid.links() {
        if let Some(next) = grid.neighbour(pos, side) {
            let (a, b) = (router(cube, layout, pos), router(cube, layout, next));
            edges.link(a, b, EdgeKind::Noc, LinkRole::NocHop);
        }
    }
    for (pe, (&node, &tcm)) in cube.pes.iter().zip(&cube.tcms).enumerate() {
        let pos = layout.pe(u32::try_from(pe).unwrap_or(u32::MAX));
        if let Some(pos) = pos {
            edges.link(
                node,
                router(cube, layout, pos),
                EdgeKind::Attach,
                LinkRole::NocAttach,
            );
        }
        edges.link(node, tcm, EdgeKind::Attach, LinkRole::TcmPort);
    }
    for pos in layout.hbm_ports() {
        let at = router(cube, layout, pos);
        edges.link(cube.hbm, at, EdgeKind::HbmPort, LinkRole::NocAttach);
    }
    for (node, pos) in [
        (cube.sram, layout.sram()),
        (cube.mcpu, layout.mcpu()),
        (cube.mcpu_dma, layout.mcpu_dma()),
    ] {
        edges.link(
            node,
            router(cube, layout, pos),
            EdgeKind::Attach,
            LinkRole::NocAttach,
        );
    }
    for (&side, &port) in &cube.ucie {
        let at = router(cube, layout, layout.port(side));
        edges.link(port, at, EdgeKind::Attach, LinkRole::UcieBridge);
    }
}

fn wire_ucie(edges: &mut Edges, grids: &MachineGrids, sip: &SipNodes) {
    let mesh = grids.cubes;
    for (pos, side) in mesh.links() {
        let Some(next) = mesh.neighbour(pos, side) else {
            continue;
        };
        let here = &sip.cubes[mesh.index(pos) as usize];
        let there = &sip.cubes[mesh.index(next) as usize];
        if let (Some(&a), Some(&b)) = (here.ucie.get(&side), there.ucie.get(&side.opposite())) {
            edges.link(a, b, EdgeKind::Ucie, LinkRole::Ucie);
        }
    }
}

fn wire_inter_sip(edges: &mut Edges, wiring: &Wiring<'_>) {
    let grid = wiring.grids.sips;
    let sips = &wiring.structure.sips;
    for (pos, side) in grid.links() {
        let Some(next) = grid.neighbour(pos, side) else {
            continue;
        };
        let here = &sips[grid.index(pos) as usize];
        let there = &sips[grid.index(next) as usize];
        if let (Some(&a), Some(&b)) = (here.ports.get(&side), there.ports.get(&side.opposite())) {
            edges.link(a, b, EdgeKind::InterSip, LinkRole::InterSip);
        }
    }
}
