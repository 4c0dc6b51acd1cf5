//! The evaluation harness: sweeps of a workload over parameter values,
//! run in parallel ([`sweep`]), their rows as CSV and JSON ([`results`]),
//! nccl-tests tables ([`table`]) and SVG figures ([`figures`],
//! [`gemm_figures`]), and reports merging result folders and comparing
//! them with measurements ([`report`], [`reference`](mod@reference)), and the local web
//! UI over all of it ([`web`]); progress lines and wall-time limits of
//! long runs ([`watch`]).
//!
//! A client of `workloads`; nothing of the CLI.

pub mod figures;
pub mod gemm_figures;
pub mod reference;
pub mod report;
pub mod results;
pub mod sweep;
pub mod table;
pub mod watch;
pub mod web;
