//! Collective communication: ccl.yaml, neighbour tables, the algorithm
//! contract and registry.
//!
//! [`CclConfig`] is the validated ccl.yaml: which algorithm `all_reduce`
//! runs, with which buffers, tile size, rank count and builtin neighbour
//! table. [`topology`] builds those tables (ring, mesh, torus, tree, the
//! `global_*` SIP directions) and derives the rings they install; [`helpers`]
//! are what algorithms share (chunks, reduce-then-broadcast trees of lines,
//! ring reduce-scatter / all-gather, grid positions) and [`cost`] the α-β
//! model they state their cost in.
//! [`CclAlgorithm`] is the contract one file in `algorithms/` implements
//! (seed ADR-0050) and [`registry`] finds those files by ccl.yaml's
//! `module:` name. [`install`] turns tables and a rank → PE map into an
//! installed `tl::IpcqNetwork` (and builds ADR-0032 D3's intercube tables).
//! The mock runtime for algorithm unit tests launches kernels, so it lives
//! above, in `runtime::testing`.
//!
//! This module may use `topology` (e.g. the SIP count as the fallback
//! world size) and `tl` (kernels) but knows nothing of the runtime or torch
//! above it.

mod algorithm;
mod config;
pub mod cost;
pub mod helpers;
pub mod install;
pub mod registry;
pub mod topology;

pub use algorithm::{
    CclAlgorithm, Endpoints, KernelArgs, SIP_TOPO_MESH, SIP_TOPO_RING, SIP_TOPO_TORUS,
    TOPO_NAME_TO_KIND, TileArgs, WorldShape, add_received, wired_endpoints,
};
pub use config::{
    Algorithm, AlgorithmEntry, BackpressureMode, BufferKind, CclConfig, CclDefaults, IpcqSettings,
    ParamValue,
};
