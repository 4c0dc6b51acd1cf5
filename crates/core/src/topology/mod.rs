//! The machine's shape: topology.yaml → validated [`TopologySpec`] →
//! compiled [`Machine`] graph → routes.
//!
//! - [`TopologySpec`] is the checked description of the machine (SIPs and
//!   their arrangement, cube mesh, cube and PE resources, every link's
//!   bandwidth, latency and packet size); [`TopologySummary`] is its readable
//!   overview for `kernbench topo`.
//! - [`Machine::build`] compiles the spec in named stages (`layout`,
//!   `expand`, `wire`, `index`) into nodes and directed edges, each edge with
//!   its [`LinkParams`]; `naming` owns every node name.
//! - [`PathRouter`] finds deterministic dimension-order routes over
//!   adjacency [`View`]s; [`AddressResolver`] maps addresses to memory nodes.
//! - [`FaultsSpec`] (`faults:`, ADR-0106) is a degraded machine as data:
//!   slow PEs, derated links (fixed into the edges' parameters when the
//!   machine is built), late ranks, and parts down (`outages`, ADR-0115:
//!   routed around for good, waited out for a window).
//! - `views` renders the graph for `kernbench topo --view` (text, DOT, JSON).
//!
//! `docs/topology.md` describes the layout, placement and routing rules.
//! This module knows the machine's vocabulary and structure but nothing of
//! latency models' dynamics, collectives, kernels or torch; it sits just
//! above `sim` and `config`.

pub mod address;
mod adjacency;
mod detour;
mod error;
mod expand;
pub mod faults;
mod grid;
mod index;
mod layout;
mod link;
mod machine;
mod machine_grids;
pub mod naming;
mod outages;
mod plan;
mod resolver;
mod routing;
mod spec;
mod summary;
mod views;
mod wire;

pub use address::{AddressError, AddressMap, MemSpace};
pub use adjacency::View;
pub use error::TopologyError;
pub use faults::{FaultError, FaultsSpec};
pub use grid::GridPos;
pub use layout::{CubeLayout, LayoutError, MAX_ROUTERS, Slot};
pub use link::{LinkCatalog, LinkError, LinkFigures, LinkParams, LinkRole};
pub use machine::{Edge, EdgeId, EdgeKind, Machine, Node, NodeId, NodeKind};
pub use outages::{Outages, Window};
pub use resolver::{AddressResolver, Resolved};
pub use routing::{Path, PathRouter, RouteError};
pub use spec::{
    CubeSpec, DmaSpec, Fidelity, GemmSpec, Grid, HbmError, HbmParams, HbmSpec, HostSpec, IoCpuSpec,
    LinkSpec, MathSpec, McpuSpec, MemorySpec, NocParams, NocSpec, PeParams, PeSpec, RateOverflow,
    Repeats, SimulationSpec, SipArrangement, SipArrangementError, SipSpec, SpecError, SystemSpec,
    TopologySpec, UcieParams, UcieSpec,
};
pub use summary::{ComputeSummary, LinkSummary, MemorySummary, TopologySummary};
pub use views::{Counts, GraphView, Scope, ViewError, ViewLink, ViewNode};
