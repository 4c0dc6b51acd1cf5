//! The compiled machine: every node and every directed edge of the
//! machine, with names, structural coordinates and each hop's link
//! parameters.
//!
//! [`Machine::build`] runs the compile stages in order:
//!
//! 1. `layout` — the cube NoC: router grid, HBM zone, endpoint placement;
//! 2. `expand` — the SIP / cube / PE hierarchy into named nodes;
//! 3. `wire` — the directed edges, two per physical link;
//! 4. `index` — name index and adjacency lists;
//!
//! then gives the edges `faults.links` names their degraded parameters
//! (`faults`, ADR-0106).
//!
//! A `Machine` is immutable and knows nothing of time or traffic: the
//! latency models (`hw`) turn its edges into serial resources, routing
//! (`routing`) turns node pairs into edge sequences.

use std::fmt;

use serde::Serialize;

use super::address::AddressMap;
use super::error::TopologyError;
use super::expand::{CubeNodes, Structure, expand};
use super::faults::{self, FaultError};
use super::grid::GridPos;
use super::index::Index;
use super::layout::CubeLayout;
use super::link::{LinkCatalog, LinkParams, LinkRole, MAX_DERATED};
use super::machine_grids::{IO_CUBE, MachineGrids};
use super::naming::Side;
use super::outages::{Outages, check_connected};
use super::spec::TopologySpec;
use super::wire::{Wiring, wire};

/// A node of one [`Machine`]: an index into [`Machine::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NodeId(u32);

/// A directed edge of one [`Machine`]: an index into [`Machine::edges`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct EdgeId(u32);

macro_rules! id_methods {
    ($id:ident) => {
        impl $id {
            /// The id of the item at `index` (saturating; the build checks
            /// that every index fits).
            pub fn from_index(index: usize) -> Self {
                $id(u32::try_from(index).unwrap_or(u32::MAX))
            }

            /// The index into the machine's list.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_methods!(NodeId);
id_methods!(EdgeId);

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// The host.
    Host,
    /// A SIP's PCIe endpoint.
    PcieEp,
    /// A SIP's IO_CPU.
    IoCpu,
    /// A SIP's port towards a neighbouring SIP.
    SipPort,
    /// A NoC router.
    Router,
    /// A PE.
    Pe,
    /// A PE's TCM.
    Tcm,
    /// A cube's HBM controller (its pseudo-channels are inside it).
    Hbm,
    /// A cube's SRAM.
    Sram,
    /// A cube's M_CPU.
    Mcpu,
    /// A cube's M_CPU.DMA engine.
    McpuDma,
    /// A cube's UCIe port on one side.
    UciePort,
}

impl NodeKind {
    /// The kind's name in views and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            NodeKind::Host => "host",
            NodeKind::PcieEp => "pcie_ep",
            NodeKind::IoCpu => "io_cpu",
            NodeKind::SipPort => "sip_port",
            NodeKind::Router => "router",
            NodeKind::Pe => "pe",
            NodeKind::Tcm => "tcm",
            NodeKind::Hbm => "hbm",
            NodeKind::Sram => "sram",
            NodeKind::Mcpu => "mcpu",
            NodeKind::McpuDma => "mcpu_dma",
            NodeKind::UciePort => "ucie_port",
        }
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One node and where it sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// Its name (see `naming`).
    pub name: String,
    /// What it is.
    pub kind: NodeKind,
    /// Its SIP; `None` only for the host.
    pub sip: Option<u32>,
    /// The cube it sits in, for everything below the SIP level and for the
    /// SIP-level nodes attached to a cube's NoC (PCIe endpoint and IO_CPU:
    /// the IO cube; an inter-SIP port: the cube that carries it).
    pub cube: Option<u32>,
    /// The PE, for a PE and its TCM.
    pub pe: Option<u32>,
    /// A router's own position; for a node attached to one router, that
    /// router's position. `None` for the host and the HBM controller (which
    /// attaches to every router of the HBM zone).
    pub router: Option<GridPos>,
    /// The side of a UCIe or inter-SIP port.
    pub side: Option<Side>,
}

/// What an edge is; adjacency views select edges by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Router to neighbouring router.
    Noc,
    /// A node to the node it hangs on: endpoint or port to its router
    /// (the UCIe bridge included), PE to its TCM.
    Attach,
    /// HBM controller to a router of the HBM zone.
    HbmPort,
    /// UCIe port to the neighbouring cube's port.
    Ucie,
    /// Inter-SIP port to the neighbouring SIP's port.
    InterSip,
    /// Host to a PCIe endpoint.
    Pcie,
    /// The management bus: PCIe endpoint to IO_CPU, IO_CPU to each M_CPU.
    Mgmt,
}

impl EdgeKind {
    /// Every kind, in order.
    pub const ALL: [EdgeKind; 7] = [
        EdgeKind::Noc,
        EdgeKind::Attach,
        EdgeKind::HbmPort,
        EdgeKind::Ucie,
        EdgeKind::InterSip,
        EdgeKind::Pcie,
        EdgeKind::Mgmt,
    ];

    /// The kind's name in views and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            EdgeKind::Noc => "noc",
            EdgeKind::Attach => "attach",
            EdgeKind::HbmPort => "hbm_port",
            EdgeKind::Ucie => "ucie",
            EdgeKind::InterSip => "inter_sip",
            EdgeKind::Pcie => "pcie",
            EdgeKind::Mgmt => "mgmt",
        }
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One direction of a physical link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Where packets enter.
    pub from: NodeId,
    /// Where they leave.
    pub to: NodeId,
    /// What the link is.
    pub kind: EdgeKind,
    /// Which of the machine's link parameters time it
    /// ([`Machine::link_params`]).
    pub role: LinkRole,
    /// The other direction of the same link.
    pub reverse: EdgeId,
}

/// The compiled machine graph.
#[derive(Debug, Clone)]
pub struct Machine {
    spec: TopologySpec,
    grids: MachineGrids,
    layout: CubeLayout,
    address_map: AddressMap,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    links: LinkCatalog,
    structure: Structure,
    index: Index,
    outages: Outages,
}

impl Machine {
    /// Compiles `spec` into the machine graph.
    pub fn build(spec: &TopologySpec) -> Result<Machine, TopologyError> {
        let address_map = AddressMap::new(spec)?;
        let links = LinkCatalog::new(spec)?;
        let layout = CubeLayout::new(spec.cube())?;
        let grids = MachineGrids::new(spec);
        let (mut nodes, structure) = expand(&grids, &layout, spec.cube().pes.get());
        let mut edges = wire(&Wiring {
            grids: &grids,
            layout: &layout,
            structure: &structure,
        });
        // Grown by pushes: give back the spare capacity (a quarter of the
        // edges' bytes at 1,024 SIPs).
        nodes.shrink_to_fit();
        edges.shrink_to_fit();
        let index = Index::build(&nodes, &edges)?;
        let mut machine = Machine {
            spec: spec.clone(),
            grids,
            layout,
            address_map,
            nodes,
            edges,
            links,
            structure,
            index,
            outages: Outages::default(),
        };
        machine.derate_links()?;
        machine.outages = Outages::resolve(&machine)?;
        check_connected(&machine, &machine.outages)?;
        Ok(machine)
    }

    /// Gives every edge a link fault names its degraded parameters, once
    /// (ADR-0106): an edge whose parameters do not change keeps its role,
    /// so a fault of factor 1 and no extra latency changes nothing.
    fn derate_links(&mut self) -> Result<(), TopologyError> {
        if self.spec.faults().links.is_empty() {
            return Ok(());
        }
        for (edge, params) in faults::resolve_links(self)? {
            if params == *self.link_params(self.edge(edge)) {
                continue;
            }
            let role = self.links.derated_role(params).ok_or_else(|| FaultError {
                key: "faults.links".to_owned(),
                message: format!(
                    "more than {MAX_DERATED} distinct degraded link parameters: merge faults \
                     that give links the same factor and latency"
                ),
            })?;
            self.edges[edge.index()].role = role;
        }
        Ok(())
    }

    /// Host bytes a command that builds the machine for `spec` peaks at,
    /// estimated from its counts before anything is built: about 1200 B
    /// per PE and 27 KiB per cube (the graph, its routers, attachments,
    /// edges and index entries, and the collectives' wiring `check_config`
    /// resolves on it). Measured as the peak RSS of `topo` on a release
    /// build (ADR-0045 D4): 19.2 GB at 254 SIPs of 16 × 16 cubes of 240
    /// PEs (this gives 20.5 GB), 1.30 GB at 16 such SIPs (1.29 GB), 1.73 GB
    /// at 254 SIPs of 1-PE cubes (1.88 GB). A lower bound of what a debug
    /// build takes.
    pub fn estimated_bytes(spec: &TopologySpec) -> u128 {
        let cubes = u128::from(spec.system().sips.count()) * u128::from(spec.cubes_per_sip());
        let pes = cubes * u128::from(spec.cube().pes.get());
        pes * 1200 + cubes * (27 << 10)
    }

    /// The parameters of `edge`'s link (in its direction).
    pub fn link_params(&self, edge: &Edge) -> &LinkParams {
        self.links.params(edge.role)
    }

    /// Whether either direction of `edge`'s link is degraded
    /// (`faults.links`, ADR-0106).
    pub fn is_degraded(&self, edge: EdgeId) -> bool {
        let one = self.edge(edge);
        [one, self.edge(one.reverse)]
            .iter()
            .any(|e| matches!(e.role, LinkRole::Derated(_)))
    }

    /// What `faults.down` takes out of it (ADR-0115); empty when healthy.
    pub fn outages(&self) -> &Outages {
        &self.outages
    }

    /// The spec the machine was built from.
    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }

    /// The NoC layout every cube shares.
    pub fn layout(&self) -> &CubeLayout {
        &self.layout
    }

    /// The address map of the machine's memories.
    pub fn address_map(&self) -> &AddressMap {
        &self.address_map
    }

    /// Every node; [`NodeId::index`] indexes it.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Every directed edge; [`EdgeId::index`] indexes it.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The name of the link from `from` to `to` as explanations, faults
    /// and traces write it: `FROM->TO`, the nodes' names.
    pub fn link_name(&self, from: NodeId, to: NodeId) -> String {
        [&*self.node(from).name, "->", &*self.node(to).name].concat()
    }

    /// The node `id` (an id of this machine).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The edge `id` (an id of this machine).
    pub fn edge(&self, id: EdgeId) -> &Edge {
        &self.edges[id.index()]
    }

    /// The node called `name`.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.index.find(&self.nodes, name)
    }

    /// Every node, in name order.
    pub fn by_name(&self) -> &[NodeId] {
        self.index.by_name(&self.nodes)
    }

    /// The edges leaving `node`, in edge-id order.
    pub fn out_edges(&self, node: NodeId) -> &[EdgeId] {
        self.index.out(node)
    }

    /// The edge from `from` to `to`, if they are joined.
    pub fn edge_between(&self, from: NodeId, to: NodeId) -> Option<EdgeId> {
        self.out_edges(from)
            .iter()
            .copied()
            .find(|&e| self.edge(e).to == to)
    }

    /// Number of SIPs.
    pub fn sip_count(&self) -> u32 {
        self.grids.sips.cells()
    }

    /// Cubes in one SIP.
    pub fn cubes_per_sip(&self) -> u32 {
        self.grids.cubes.cells()
    }

    /// Where SIP `sip` sits in the SIP grid (row 0 for a ring).
    pub fn sip_pos(&self, sip: u32) -> GridPos {
        self.grids.sips.pos(sip)
    }

    /// The SIP grid's width and height.
    pub fn sip_grid(&self) -> (u32, u32) {
        let sips = self.grids.sips;
        (sips.width(), sips.height())
    }

    /// Where cube `cube` sits in its SIP's cube mesh.
    pub fn cube_pos(&self, cube: u32) -> GridPos {
        self.grids.cubes.pos(cube)
    }

    /// The cube mesh's width and height.
    pub fn cube_grid(&self) -> (u32, u32) {
        let cubes = self.grids.cubes;
        (cubes.width(), cubes.height())
    }

    /// PEs in one cube.
    pub fn pes_per_cube(&self) -> u32 {
        self.spec.cube().pes.get()
    }

    /// The cube whose NoC carries each SIP's PCIe endpoint and IO_CPU.
    pub fn io_cube(&self) -> u32 {
        IO_CUBE
    }

    /// The cube carrying a SIP's inter-SIP port on `side`.
    pub fn sip_port_cube(&self, side: Side) -> u32 {
        self.grids.port_cube(side)
    }

    /// The host.
    pub fn host(&self) -> NodeId {
        self.structure.host
    }

    /// SIP `sip`'s PCIe endpoint.
    pub fn pcie_ep(&self, sip: u32) -> Option<NodeId> {
        self.structure.sips.get(sip as usize).map(|s| s.pcie_ep)
    }

    /// SIP `sip`'s IO_CPU.
    pub fn io_cpu(&self, sip: u32) -> Option<NodeId> {
        self.structure.sips.get(sip as usize).map(|s| s.io_cpu)
    }

    /// SIP `sip`'s inter-SIP port on `side`, if it has a neighbour there.
    pub fn sip_port(&self, sip: u32, side: Side) -> Option<NodeId> {
        let ports = &self.structure.sips.get(sip as usize)?.ports;
        ports.get(&side).copied()
    }

    /// The router at `pos` of cube `cube` of SIP `sip`.
    pub fn router(&self, sip: u32, cube: u32, pos: GridPos) -> Option<NodeId> {
        let grid = self.layout.grid();
        if pos.row >= grid.height() || pos.col >= grid.width() {
            return None;
        }
        let routers = &self.cube_nodes(sip, cube)?.routers;
        routers.get(grid.index(pos) as usize).copied()
    }

    /// The routers of cube `cube` of SIP `sip`, row-major.
    pub(crate) fn routers(&self, sip: u32, cube: u32) -> Option<&[NodeId]> {
        Some(&self.cube_nodes(sip, cube)?.routers)
    }

    /// PE `pe` of cube `cube` of SIP `sip`.
    pub fn pe(&self, sip: u32, cube: u32, pe: u32) -> Option<NodeId> {
        self.cube_nodes(sip, cube)?.pes.get(pe as usize).copied()
    }

    /// The TCM of PE `pe` of cube `cube` of SIP `sip`.
    pub fn tcm(&self, sip: u32, cube: u32, pe: u32) -> Option<NodeId> {
        self.cube_nodes(sip, cube)?.tcms.get(pe as usize).copied()
    }

    /// The HBM controller of a cube.
    pub fn hbm(&self, sip: u32, cube: u32) -> Option<NodeId> {
        self.cube_nodes(sip, cube).map(|c| c.hbm)
    }

    /// The SRAM of a cube.
    pub fn sram(&self, sip: u32, cube: u32) -> Option<NodeId> {
        self.cube_nodes(sip, cube).map(|c| c.sram)
    }

    /// The M_CPU of a cube.
    pub fn mcpu(&self, sip: u32, cube: u32) -> Option<NodeId> {
        self.cube_nodes(sip, cube).map(|c| c.mcpu)
    }

    /// The M_CPU.DMA engine of a cube.
    pub fn mcpu_dma(&self, sip: u32, cube: u32) -> Option<NodeId> {
        self.cube_nodes(sip, cube).map(|c| c.mcpu_dma)
    }

    /// The UCIe port of a cube on `side`, if a cube lies beyond.
    pub fn ucie_port(&self, sip: u32, cube: u32, side: Side) -> Option<NodeId> {
        self.cube_nodes(sip, cube)?.ucie.get(&side).copied()
    }

    /// The grids of the upper levels (for routing and views).
    pub(crate) fn grids(&self) -> &MachineGrids {
        &self.grids
    }

    fn cube_nodes(&self, sip: u32, cube: u32) -> Option<&CubeNodes> {
        self.structure
            .sips
            .get(sip as usize)?
            .cubes
            .get(cube as usize)
    }
}
