//! The evaluation harness: sweeps of a workload over parameter values,
//! run in parallel ([`sweep`]), their rows as CSV and JSON ([`results`]),
//! nccl-tests tables ([`table`]) and SVG figures ([`figures`],
//! [`gemm_figures`]).
//!
//! A client of `workloads`; nothing of the CLI.

pub mod figures;
pub mod gemm_figures;
pub mod results;
pub mod sweep;
pub mod table;
