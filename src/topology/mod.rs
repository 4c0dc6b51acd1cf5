//! The machine's shape: topology.yaml → validated [`TopologySpec`].
//!
//! [`TopologySpec`] is the checked description of the machine (SIPs and
//! their arrangement, cube mesh, cube and PE resources, every link's
//! bandwidth, latency and packet size); [`TopologySummary`] is its readable
//! overview for `kernbench topo`. Later layers compile the spec into the
//! node/edge graph, NoC layout and routing.
//!
//! This module knows the machine's vocabulary but nothing of latency
//! models, collectives, kernels or torch; it sits just above `sim` and
//! `config`.

pub mod address;
pub mod naming;
mod spec;

pub use address::{AddressError, AddressMap, MemSpace};
pub use spec::{
    ComputeSummary, CubeSpec, DmaSpec, GemmSpec, Grid, HbmError, HbmParams, HbmSpec, HostSpec,
    IoCpuSpec, LinkSpec, LinkSummary, MathSpec, McpuSpec, MemorySpec, MemorySummary, NocSpec,
    PeSpec, SipLayout, SipLayoutError, SipSpec, SipTopology, SipsParams, SystemSpec, TopologySpec,
    TopologySummary, UcieSpec,
};
