//! The evaluation harness: sweeps of a workload over parameter values,
//! run in parallel ([`sweep`]), their rows as CSV and JSON ([`results`]),
//! what-if configuration variants ([`vary`]) and their
//! sensitivity tables ([`sensitivity`]),
//! nccl-tests tables ([`table`]) and SVG figures ([`figures`],
//! [`gemm_figures`], with readable [`ticks`], and
//! the stacked bars of [`attribution`]), and reports merging result folders and comparing
//! them with measurements ([`report`], [`reference`](mod@reference)), and the local web
//! UI over all of it ([`web`]); a long run's progress line on a terminal
//! ([`progress`]), progress lines off a terminal and wall-time limits of
//! long runs ([`watch`]); fitting configuration quantities to a measured
//! log ([`calibrate`]); the jobs file of `run --jobs` and its summary
//! ([`jobs`]).
//!
//! A client of `workloads`; nothing of the CLI.

pub mod attribution;
pub mod calibrate;
pub mod figures;
pub mod gemm_figures;
pub mod heat;
pub mod jobs;
pub mod progress;
pub mod reference;
pub mod report;
pub mod results;
pub mod sensitivity;
pub mod sweep;
pub mod table;
pub mod ticks;
pub mod vary;
pub mod watch;
pub mod web;
pub mod whatif;
