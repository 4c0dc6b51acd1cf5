//! The simulation core: a deterministic single-threaded executor with a
//! virtual clock, and the primitives hardware models are built from.
//!
//! This module knows nothing of hardware, topology or torch.

mod time;

pub use time::{PS_PER_MS, PS_PER_NS, PS_PER_S, PS_PER_US, SimDuration, SimTime, TimeError};

/// The current virtual time, or `None` outside a running simulation.
pub fn try_now() -> Option<SimTime> {
    None
}
