//! kernbench: a deterministic discrete-event simulator of the AHBM machine.

pub mod sim;
pub mod trace;
