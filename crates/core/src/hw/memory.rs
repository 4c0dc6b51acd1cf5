//! [`MemoryPort`]: an on-chip memory (a cube's SRAM, a PE's TCM) seen
//! through its single access port.
//!
//! An access of `b` bytes holds the port for `transfer_time(b)` at the
//! memory's bandwidth, FIFO behind earlier accesses, and completes
//! `latency` after its occupancy ends (the latency is pipelined: it holds
//! nothing, so back-to-back accesses stream at the full bandwidth).
//! Uncontended: [`memory_formula`]. A zero-byte access costs the latency.
//!
//! Knows sizes only; nothing of addresses, allocations or the bytes stored.

use super::explain;
use super::server::{AccessReport, Activity, SerialServer, ServerStats};
use super::{HwError, later};
use crate::config::units::Bandwidth;
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::MemorySpec;

/// An SRAM or TCM access port.
pub struct MemoryPort {
    bandwidth: Bandwidth,
    latency: SimDuration,
    port: SerialServer,
}

impl MemoryPort {
    /// An idle port of memory `name` (its trace track) with `spec`'s
    /// bandwidth and latency.
    pub fn new(name: &str, spec: &MemorySpec) -> Self {
        MemoryPort {
            bandwidth: spec.bandwidth,
            latency: spec.latency,
            port: SerialServer::new(name, Activity::MemoryAccess),
        }
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        self.port.name()
    }

    /// Its port.
    pub fn server(&self) -> &SerialServer {
        &self.port
    }

    /// Reads or writes `bytes`; returns when done.
    pub async fn access(&self, bytes: u64) -> Result<AccessReport, HwError> {
        let start = sim::now();
        let occupancy = self
            .bandwidth
            .transfer_time(bytes)
            .map_err(HwError::time(self.name()))?;
        let held = self.port.reserve(occupancy, bytes)?;
        let end = later(held.end, self.latency, self.name())?;
        if explain::recording() {
            explain::push_booking(&self.port, start, held);
            explain::push_server(&self.port, explain::TermKind::Latency, self.latency.as_ps());
        }
        explain::sleep_until(end).await;
        Ok(AccessReport { start, end, bytes })
    }

    /// Accesses, bytes and busy time as of `now`.
    pub fn stats(&self, now: SimTime) -> ServerStats {
        self.port.stats(now)
    }
}

/// The uncontended time of [`MemoryPort::access`]:
/// `latency + ceil(bytes × 10^12 / bandwidth)` picoseconds.
pub fn memory_formula(spec: &MemorySpec, bytes: u64) -> Result<SimDuration, HwError> {
    let time = HwError::time("memory formula");
    let occupancy = spec.bandwidth.transfer_time(bytes).map_err(&time)?;
    spec.latency.checked_add(occupancy).map_err(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcm() -> MemorySpec {
        MemorySpec {
            capacity: "8 MiB".parse().unwrap(),
            bandwidth: "1 TB/s".parse().unwrap(),
            latency: SimDuration::from_ns(2),
        }
    }

    #[test]
    fn formula_is_latency_plus_serialisation() {
        assert_eq!(memory_formula(&tcm(), 4096).unwrap().as_ps(), 2_000 + 4_096);
        assert_eq!(memory_formula(&tcm(), 0).unwrap().as_ps(), 2_000);
    }
}
