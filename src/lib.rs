//! kernbench: a deterministic discrete-event simulator of the AHBM machine.
//!
//! This crate is the front end: the `kernbench` CLI (`src/main.rs`) and
//! the two layers it adds on top of [`kernbench_core`], the simulator
//! (ADR-0120):
//!
//! - [`harness`]: what the CLI runs: sweeps and their results, reports,
//!   figures, what-if variations and the `kernbench web` server.
//! - [`probe`]: `kernbench probe`, traffic patterns on the device checked
//!   against their closed forms.
//!
//! Below them, re-exported under the same names so that `kernbench::sim`
//! is the core's `sim`: [`workloads`], [`chakra`], [`runtime`], [`tl`],
//! [`ccl`], [`device`], [`mem`], [`hw`], [`topology`], [`config`],
//! [`explain`], [`trace`], [`sim`] and [`allocator`]; the core's crate
//! documentation gives their layering.
//!
//! `docs/ARCHITECTURE.md` gives one paragraph per module with what it owns
//! and what it must not know.

// `unsafe` only where a module allows it, each named in docs/ARCHITECTURE.md
// ("Unsafe code") and listed in tests/it/tidy.rs.
#![deny(unsafe_code)]

pub use kernbench_core::{
    allocator, ccl, chakra, config, device, explain, hw, mem, runtime, sim, tl, topology, trace,
    workloads,
};

pub mod harness;
pub mod probe;

/// The README's code examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
