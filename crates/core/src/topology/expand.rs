//! Compile stage 2: expand the hierarchy into nodes — the host; per SIP its
//! PCIe endpoint, IO_CPU and inter-SIP ports; per cube its routers (placed
//! by the layout), PEs and their TCMs, HBM controller, SRAM, M_CPU,
//! M_CPU.DMA and UCIe ports.
//!
//! Every name comes from `naming`. The result is the node list plus the
//! structural table ([`Structure`]) that finds a node from its coordinates
//! without a name lookup. This stage creates no edges.
//!
//! HBM pseudo-channels are not nodes: the controller picks one by address
//! inside the HBM model, so no route ever ends at a PC; their names
//! (`naming::hbm_pc`) are for traces.

use std::collections::BTreeMap;

use super::grid::GridPos;
use super::layout::CubeLayout;
use super::machine::{Node, NodeId, NodeKind};
use super::machine_grids::{IO_CUBE, MachineGrids};
use super::naming::{self, Side};

/// The node ids of one cube.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CubeNodes {
    /// Routers, row-major.
    pub routers: Vec<NodeId>,
    /// PE `p` at index `p`.
    pub pes: Vec<NodeId>,
    /// The TCM of PE `p` at index `p`.
    pub tcms: Vec<NodeId>,
    pub hbm: NodeId,
    pub sram: NodeId,
    pub mcpu: NodeId,
    pub mcpu_dma: NodeId,
    /// UCIe ports on the sides that have a neighbouring cube.
    pub ucie: BTreeMap<Side, NodeId>,
}

/// The node ids of one SIP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SipNodes {
    pub pcie_ep: NodeId,
    pub io_cpu: NodeId,
    /// Inter-SIP ports on the sides that have a neighbouring SIP.
    pub ports: BTreeMap<Side, NodeId>,
    /// Cube `c` at index `c`.
    pub cubes: Vec<CubeNodes>,
}

/// Node ids by structural coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Structure {
    pub host: NodeId,
    /// SIP `s` at index `s`.
    pub sips: Vec<SipNodes>,
}

/// Where a node sits: its SIP, cube, PE, router position and side.
#[derive(Debug, Clone, Copy, Default)]
struct At {
    sip: Option<u32>,
    cube: Option<u32>,
    pe: Option<u32>,
    router: Option<GridPos>,
    side: Option<Side>,
}

/// The node list being built.
#[derive(Default)]
struct Nodes(Vec<Node>);

impl Nodes {
    fn push(&mut self, name: String, kind: NodeKind, at: At) -> NodeId {
        let id = NodeId::from_index(self.0.len());
        self.0.push(Node {
            name,
            kind,
            sip: at.sip,
            cube: at.cube,
            pe: at.pe,
            router: at.router,
            side: at.side,
        });
        id
    }
}

/// Expands the machine of `grids` with cubes laid out as `layout`
/// and `pes` PEs per cube.
pub(crate) fn expand(
    grids: &MachineGrids,
    layout: &CubeLayout,
    pes: u32,
) -> (Vec<Node>, Structure) {
    let mut nodes = Nodes::default();
    let host = nodes.push(naming::HOST.to_owned(), NodeKind::Host, At::default());
    let sips = (0..grids.sips.cells())
        .map(|sip| expand_sip(&mut nodes, grids, layout, sip, pes))
        .collect();
    (nodes.0, Structure { host, sips })
}

fn expand_sip(
    nodes: &mut Nodes,
    grids: &MachineGrids,
    layout: &CubeLayout,
    sip: u32,
    pes: u32,
) -> SipNodes {
    let on_io_cube = |router| At {
        sip: Some(sip),
        cube: Some(IO_CUBE),
        router: Some(router),
        ..At::default()
    };
    let pcie_ep = nodes.push(
        naming::pcie_ep(sip),
        NodeKind::PcieEp,
        on_io_cube(layout.pcie_ep()),
    );
    let io_cpu = nodes.push(
        naming::io_cpu(sip),
        NodeKind::IoCpu,
        on_io_cube(layout.io_cpu()),
    );
    let ports = grids
        .sip_port_sides(sip)
        .into_iter()
        .map(|side| {
            let at = At {
                sip: Some(sip),
                cube: Some(grids.port_cube(side)),
                router: Some(layout.port(side)),
                side: Some(side),
                ..At::default()
            };
            (
                side,
                nodes.push(naming::sip_port(sip, side), NodeKind::SipPort, at),
            )
        })
        .collect();
    let cubes = (0..grids.cubes.cells())
        .map(|cube| expand_cube(nodes, grids, layout, (sip, cube), pes))
        .collect();
    SipNodes {
        pcie_ep,
        io_cpu,
        ports,
        cubes,
    }
}

fn expand_cube(
    nodes: &mut Nodes,
    grids: &MachineGrids,
    layout: &CubeLayout,
    (sip, cube): (u32, u32),
    pes: u32,
) -> CubeNodes {
    let at = |router: Option<GridPos>| At {
        sip: Some(sip),
        cube: Some(cube),
        router,
        ..At::default()
    };
    let routers = layout
        .grid()
        .positions()
        .map(|pos| {
            let name = naming::router(sip, cube, pos.row, pos.col);
            nodes.push(name, NodeKind::Router, at(Some(pos)))
        })
        .collect();
    let pe_at = |pe| At {
        pe: Some(pe),
        ..at(layout.pe(pe))
    };
    let pe_ids = (0..pes)
        .map(|pe| nodes.push(naming::pe(sip, cube, pe), NodeKind::Pe, pe_at(pe)))
        .collect();
    let tcms = (0..pes)
        .map(|pe| nodes.push(naming::tcm(sip, cube, pe), NodeKind::Tcm, pe_at(pe)))
        .collect();
    let hbm = nodes.push(naming::hbm(sip, cube), NodeKind::Hbm, at(None));
    let sram = nodes.push(
        naming::sram(sip, cube),
        NodeKind::Sram,
        at(Some(layout.sram())),
    );
    let mcpu = nodes.push(
        naming::mcpu(sip, cube),
        NodeKind::Mcpu,
        at(Some(layout.mcpu())),
    );
    let mcpu_dma = nodes.push(
        naming::mcpu_dma(sip, cube),
        NodeKind::McpuDma,
        at(Some(layout.mcpu_dma())),
    );
    let ucie = grids
        .ucie_sides(cube)
        .into_iter()
        .map(|side| {
            let port_at = At {
                side: Some(side),
                ..at(Some(layout.port(side)))
            };
            let name = naming::ucie(sip, cube, side);
            (side, nodes.push(name, NodeKind::UciePort, port_at))
        })
        .collect();
    CubeNodes {
        routers,
        pes: pe_ids,
        tcms,
        hbm,
        sram,
        mcpu,
        mcpu_dma,
        ucie,
    }
}
