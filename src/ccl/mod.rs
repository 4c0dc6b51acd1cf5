//! Collective communication: ccl.yaml, neighbour tables and, later, the
//! algorithm registry and IPCQ.
//!
//! [`CclConfig`] is the validated ccl.yaml: which algorithm `all_reduce`
//! runs, with which buffers, tile size, rank count and builtin neighbour
//! table. [`topology`] builds those tables (ring, mesh, torus, tree, the
//! `global_*` SIP directions) and derives the rings they install; [`helpers`]
//! are the author guide's `chunked`, `ring_step` and `tree_step`.
//!
//! This module may use `topology` (e.g. the SIP count as the fallback
//! world size) but knows nothing of the runtime or torch above it.

mod config;
pub mod helpers;
pub mod topology;

pub use config::{Algorithm, AlgorithmEntry, BufferKind, CclConfig, CclDefaults, ParamValue};
