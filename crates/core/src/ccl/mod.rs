//! Collective communication: ccl.yaml, neighbour tables, endpoints, the
//! algorithm contract and registry.
//!
//! [`CclConfig`] is the validated ccl.yaml: which entry each collective
//! runs, with which buffers, tile size, rank count and builtin neighbour
//! table. [`topology`] builds those tables (ring, mesh, torus, tree, the
//! `global_*` SIP directions) and derives the rings they install; [`helpers`]
//! are what algorithms share (chunks, reduce-then-broadcast trees of lines,
//! ring reduce-scatter / all-gather, grid positions) and [`cost`] the α-β
//! model they state their cost in; [`families`] are algorithms several
//! `algorithms/` files register with their own values.
//! [`WorldShape`] and [`Endpoints`] describe the world a collective runs in
//! and its IPCQ endpoints (seed ADR-0032 D3's intercube tables included).
//! [`CclAlgorithm`] is the contract one file in `algorithms/` implements
//! (seed ADR-0050), with its [`Collective`], [`ReduceOp`],
//! [`Requirements`] and [`Params`]; [`registry`] finds those files by
//! ccl.yaml's `module:` name. [`install`] turns endpoints into an installed
//! `tl::IpcqNetwork`. The mock runtime for algorithm unit tests launches
//! kernels, so it lives above, in `runtime::testing`.
//!
//! This module may use `topology` (e.g. the SIP count as the fallback
//! world size) and `tl` (kernels) but knows nothing of the runtime or torch
//! above it.

mod address;
mod algorithm;
mod collective;
mod config;
pub mod cost;
mod endpoints;
pub mod families;
pub mod helpers;
pub mod install;
pub mod msccl;
pub mod registry;
pub mod topology;

pub use address::{DevAddr, TileOffset};
pub use algorithm::{
    ArgError, CallArgs, CclAlgorithm, ConfigureError, KernelArgs, Root, TileArgs, Unsupported,
    finish, reduce_received, wired_endpoints,
};
pub use collective::{
    Collective, ParamError, ParamKind, ParamSpec, Params, ReduceOp, Requirements,
};
pub use config::{
    Algorithm, AlgorithmEntry, BackpressureMode, BufferKind, CclConfig, CclDefaults, DefaultEntry,
    IpcqSettings, ParamValue, SizeRule,
};
pub use endpoints::{Endpoints, WorldError, WorldShape};
