//! kernbench: a deterministic discrete-event simulator of the AHBM machine.

pub mod runtime;
pub mod sim;
pub mod trace;
