//! Collective communication: ccl.yaml and, later, the algorithm registry,
//! IPCQ installation and neighbour topologies.
//!
//! For now it holds [`CclConfig`], the validated ccl.yaml: which algorithm
//! `all_reduce` runs, with which buffers, tile size and rank count.
//!
//! This module may use `topology` (e.g. the SIP count as the fallback
//! world size) but knows nothing of the runtime or torch above it.

mod config;

pub use config::{
    Algorithm, AlgorithmEntry, BufferKind, CclConfig, CclDefaults, NeighborTopology, ParamValue,
};
