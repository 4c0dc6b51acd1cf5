//! [`HbmController`]: one cube's HBM stack behind its controller, with one
//! FIFO serial server per pseudo-channel (PC).
//!
//! Address interleave picks the PC: byte `a` of the stack lives on
//! `pc = (a / interleave) % pseudo_channels`. A request for `[offset,
//! offset + len)` is cut at interleave boundaries; each piece is rounded out
//! to the bursts it touches (an unaligned piece reads whole bursts), and the
//! pieces of one PC are added into that PC's share of the request.
//!
//! Timing of a request arriving at `t`:
//!
//! 1. it crosses the controller and PHY: `controller_latency`, a pipeline
//!    delay that holds nothing;
//! 2. each touched PC serves its share for `transfer_time(share)` at
//!    `pc_bandwidth`, FIFO behind earlier requests: **only this data
//!    transfer occupies the PC**;
//! 3. the DRAM access latency `access_latency` is pipelined (banks overlap
//!    their row and column accesses with other requests' data transfers),
//!    so it is added after the PC's occupancy and holds nothing;
//! 4. the request completes when its last PC is done.
//!
//! Whether the access latency is counted before or after the occupancy
//! changes no completion time (it is the same for every request of a PC,
//! so it only shifts that PC's timeline); after is one timer cheaper.
//! Uncontended, see [`hbm_formula`]. A zero-byte request is command-only:
//! it touches no PC and completes after the controller latency. Reads and
//! writes cost the same. Any bandwidth limit in front of the controller
//! (its NoC port) is a [`Link`](super::Link) on the path, not modelled here.
//!
//! Knows addresses within the stack only as offsets; nothing of the device
//! address map, of allocations or of the bytes stored.

use super::explain;
use super::server::{AccessReport, Activity, SerialServer, ServerStats};
use super::{HwError, later};
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::HbmSpec;

/// An HBM stack's controller and pseudo-channels.
pub struct HbmController {
    name: String,
    spec: HbmSpec,
    pcs: Vec<SerialServer>,
}

impl HbmController {
    /// An idle controller named `name`; pseudo-channel `k` is named
    /// `pc_name(k)` (its trace track).
    pub fn new(name: &str, spec: &HbmSpec, pc_name: impl Fn(u32) -> String) -> Self {
        let pcs = (0..spec.pseudo_channels.get())
            .map(|k| SerialServer::new(&pc_name(k), Activity::PcAccess))
            .collect();
        HbmController {
            name: name.to_owned(),
            spec: *spec,
            pcs,
        }
    }

    /// The name given at creation.
    /// Its pseudo-channels.
    pub fn servers(&self) -> impl Iterator<Item = &SerialServer> {
        self.pcs.iter()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes each PC serves for `[offset, offset + len)`; see [`pc_shares`].
    pub fn pc_shares(&self, offset: u64, len: u64) -> Result<Vec<u64>, HwError> {
        shares(&self.spec, offset, len, &self.name)
    }

    /// Reads or writes `[offset, offset + len)` of the stack; returns when
    /// the last byte is done. Errors: an access outside the capacity, a time
    /// that overflows.
    pub async fn access(&self, offset: u64, len: u64) -> Result<AccessReport, HwError> {
        let start = sim::now();
        let shares = self.pc_shares(offset, len)?;
        let decoded = later(start, self.spec.controller_latency, &self.name)?;
        if explain::recording() {
            let ps = self.spec.controller_latency.as_ps();
            explain::push_named(
                &self.name,
                explain::Class::Hbm,
                explain::TermKind::Latency,
                ps,
            );
        }
        explain::sleep_until(decoded).await;
        let mut served = None;
        let mut last: Option<(&SerialServer, super::server::Reservation)> = None;
        for (pc, &bytes) in self.pcs.iter().zip(&shares).filter(|(_, b)| **b > 0) {
            let occupancy = self
                .spec
                .pc_bandwidth
                .transfer_time(bytes)
                .map_err(HwError::time(pc.name()))?;
            let booked = pc.reserve(occupancy, bytes)?;
            if last.is_none_or(|(_, held)| booked.end >= held.end) {
                last = Some((pc, booked));
            }
            served = served.max(Some(booked.end));
        }
        if explain::recording()
            && let Some((pc, booked)) = last
        {
            explain::push_booking(pc, decoded, booked);
            let ps = self.spec.access_latency.as_ps();
            explain::push_server(pc, explain::TermKind::Latency, ps);
        }
        let end = match served {
            Some(at) => later(at, self.spec.access_latency, &self.name)?,
            None => sim::now(),
        };
        explain::sleep_until(end).await;
        Ok(AccessReport {
            start,
            end,
            bytes: shares.iter().sum(),
        })
    }

    /// Counters of every pseudo-channel as of `now`, in PC order.
    pub fn pc_stats(&self, now: SimTime) -> Vec<ServerStats> {
        self.pcs.iter().map(|pc| pc.stats(now)).collect()
    }
}

/// Bytes each pseudo-channel serves for `[offset, offset + len)`: the
/// interleave pieces of that PC, each rounded out to whole bursts. Index =
/// PC. Errors if the range does not lie inside the capacity.
pub fn pc_shares(spec: &HbmSpec, offset: u64, len: u64) -> Result<Vec<u64>, HwError> {
    shares(spec, offset, len, "hbm")
}

/// The uncontended time of [`HbmController::access`]:
/// `controller_latency + access_latency + max_k transfer_time(share_k)` at
/// `pc_bandwidth` (each PC's time rounded up to a whole picosecond), or
/// `controller_latency` alone for a zero-byte request.
pub fn hbm_formula(spec: &HbmSpec, offset: u64, len: u64) -> Result<SimDuration, HwError> {
    let time = HwError::time("hbm formula");
    let mut slowest = None;
    for bytes in pc_shares(spec, offset, len)?.into_iter().filter(|b| *b > 0) {
        let occupancy = spec.pc_bandwidth.transfer_time(bytes).map_err(&time)?;
        slowest = slowest.max(Some(occupancy));
    }
    let Some(slowest) = slowest else {
        return Ok(spec.controller_latency);
    };
    spec.controller_latency
        .checked_add(spec.access_latency)
        .and_then(|t| t.checked_add(slowest))
        .map_err(time)
}

fn shares(spec: &HbmSpec, offset: u64, len: u64, name: &str) -> Result<Vec<u64>, HwError> {
    let capacity = spec.capacity.get().bytes();
    let end = offset
        .checked_add(len)
        .filter(|end| *end <= capacity)
        .ok_or_else(|| HwError::OutOfRange {
            component: name.to_owned(),
            offset,
            len,
            capacity,
        })?;
    let pcs = u64::from(spec.pseudo_channels.get());
    let mut share = vec![0u64; pcs as usize];
    if len == 0 {
        return Ok(share);
    }
    let interleave = spec.interleave.get().bytes();
    let burst = spec.burst.get().bytes();
    let pc = |granule: u64| (granule % pcs) as usize;
    let rounded = |from: u64, to: u64| (to.div_ceil(burst) - from / burst) * burst;
    let (first, last) = (offset / interleave, (end - 1) / interleave);
    if first == last {
        share[pc(first)] += rounded(offset, end);
        return Ok(share);
    }
    share[pc(first)] += rounded(offset, (first + 1) * interleave);
    share[pc(last)] += rounded(last * interleave, end);
    let whole = last - first - 1;
    for i in 0..pcs {
        let granules = whole / pcs + u64::from(i < whole % pcs);
        share[pc(first + 1 + i)] += granules * interleave;
    }
    Ok(share)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{HbmParams, TopologySpec};

    /// 4 PCs × 64 B interleave, 32 B bursts, 1 KiB: small enough to check
    /// by hand.
    fn small() -> HbmSpec {
        let params = *TopologySpec::load(&TopologySpec::default_source(), &[])
            .unwrap()
            .cube()
            .hbm;
        HbmSpec::new(HbmParams {
            capacity: "1 KiB".parse().unwrap(),
            pseudo_channels: crate::config::units::Count::new(4).unwrap(),
            interleave: "64 B".parse().unwrap(),
            ..params
        })
        .unwrap()
    }

    #[test]
    fn aligned_granules_go_round_robin() {
        let spec = small();
        assert_eq!(pc_shares(&spec, 0, 64).unwrap(), vec![64, 0, 0, 0]);
        assert_eq!(pc_shares(&spec, 64, 128).unwrap(), vec![0, 64, 64, 0]);
        assert_eq!(pc_shares(&spec, 0, 640).unwrap(), vec![192, 192, 128, 128]);
    }

    #[test]
    fn unaligned_pieces_round_out_to_bursts() {
        let spec = small();
        // [10, 20): one burst of PC 0.
        assert_eq!(pc_shares(&spec, 10, 10).unwrap(), vec![32, 0, 0, 0]);
        // [40, 200): PC0 burst 32..64, PC1 64..128, PC2 128..192, PC3 192..224.
        assert_eq!(pc_shares(&spec, 40, 160).unwrap(), vec![32, 64, 64, 32]);
        // Wraps past all PCs: [250, 600).
        assert_eq!(pc_shares(&spec, 250, 350).unwrap(), vec![128, 96, 64, 96]);
    }

    #[test]
    fn out_of_range_is_an_error_not_a_panic() {
        let spec = small();
        assert!(pc_shares(&spec, 1024, 0).is_ok());
        let error = pc_shares(&spec, 1000, 100).unwrap_err();
        assert!(matches!(error, HwError::OutOfRange { capacity: 1024, .. }));
        assert!(pc_shares(&spec, u64::MAX, 2).is_err());
    }

    #[test]
    fn formula_takes_the_slowest_pc() {
        let spec = small();
        // Default: 20 ns controller, 30 ns access, 25.6 GB/s per PC.
        let one_burst = hbm_formula(&spec, 0, 32).unwrap();
        assert_eq!(one_burst.as_ps(), 50_000 + 1_250);
        let two_granules_one_pc = hbm_formula(&spec, 0, 320).unwrap();
        assert_eq!(two_granules_one_pc.as_ps(), 50_000 + 5_000);
        assert_eq!(hbm_formula(&spec, 5, 0).unwrap().as_ps(), 20_000);
    }
}
