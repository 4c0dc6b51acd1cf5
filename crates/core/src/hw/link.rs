//! [`Link`]: one direction of one physical link or port, and [`HopParams`],
//! the numbers that time it.
//!
//! A packet of `b` payload bytes holds the link for its *occupancy*
//! `transfer_time(b + packet_overhead)` at the effective bandwidth, then
//! needs the link's *latency* (first-flit / pipeline latency) to reach the
//! next hop. The latency does not hold the link: the next packet may start
//! serialising as soon as the previous one has left. Packets are served
//! FIFO across all users of the link ([`SerialServer`]).
//!
//! Knows nothing of paths, packets-per-transfer or routing: [`transit`]
//! drives links; the topology layer decides which links form a path.
//!
//! [`transit`]: super::transit

use std::cell::Cell;
use std::rc::Rc;

use crate::config::units::{Bandwidth, Fraction, Size};
use crate::sim::{SimDuration, SimTime, TimeError};
use crate::topology::LinkSpec;

use super::HwError;
use super::flow_share::HopFlows;
use super::server::{Activity, Reservation, SerialServer, ServerStats};

/// The timing parameters of one hop (one link direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopParams {
    /// Effective bandwidth: raw line rate × efficiency.
    pub bandwidth: Bandwidth,
    /// First-flit latency from this hop to the next; does not occupy the
    /// link.
    pub latency: SimDuration,
    /// Header and framing bytes serialised with every packet.
    pub packet_overhead: u64,
}

impl HopParams {
    /// Parameters of a link with line rate `raw`, of which `efficiency` is
    /// usable (the effective rate is rounded down to a whole B/s, at least
    /// 1 B/s).
    pub fn new(
        raw: Bandwidth,
        efficiency: Fraction,
        latency: SimDuration,
        packet_overhead: Size,
    ) -> Self {
        HopParams {
            bandwidth: efficiency.of(raw),
            latency,
            packet_overhead: packet_overhead.bytes(),
        }
    }

    /// `S(b)`: how long a packet of `payload` bytes holds the link,
    /// `ceil((payload + packet_overhead) × 10^12 / bandwidth)` picoseconds.
    pub fn occupancy(&self, payload: u64) -> Result<SimDuration, TimeError> {
        let wire = payload.checked_add(self.packet_overhead).ok_or_else(|| {
            TimeError::Overflow(format!("{payload} B + {} B overhead", self.packet_overhead))
        })?;
        self.bandwidth.transfer_time(wire)
    }
}

impl From<&LinkSpec> for HopParams {
    fn from(spec: &LinkSpec) -> Self {
        HopParams::new(
            spec.bandwidth,
            spec.efficiency,
            spec.latency,
            spec.packet_overhead,
        )
    }
}

/// One direction of one physical link: a FIFO serial server with counters.
///
/// `repr(C, align(64))` puts the server's calendar, one aligned cache
/// line, first: it is all a flow-mode hop touches (its occupancies and
/// latency come from the route, `hw::flow_route`). The parameters and the
/// remembered occupancies, for packet mode and bare paths, are the link's
/// [`LinkClass`], shared by every link of the fabric with the same
/// parameters, so that a link is two cache lines (ADR-0040).
#[repr(C, align(64))]
pub struct Link {
    server: SerialServer,
    class: Rc<LinkClass>,
    /// Flow mode: the multi-packet flows in service on it (ADR-0056),
    /// filling the second line (ADR-0068).
    flows: HopFlows,
}

// Two cache lines a link, whatever its parameters.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Link>() == 128 && std::mem::align_of::<Link>() == 64);

/// What links with the same [`HopParams`] share: the parameters and the
/// occupancies last asked for (a class sees one or two maximum payloads:
/// those of the paths through its links).
pub struct LinkClass {
    /// `S(0)`, a header-only packet's occupancy (doorbells, credits,
    /// requests), if it fits in u64 picoseconds.
    header: Option<SimDuration>,
    /// The last full-packet payload asked for and its occupancy.
    full: Cell<(u64, SimDuration)>,
    /// The last other payload asked for and its occupancy (a flow's tail,
    /// a one-packet message).
    recent: Cell<(u64, SimDuration)>,
    params: HopParams,
}

impl LinkClass {
    /// The class of links timed by `params`.
    pub fn new(params: HopParams) -> Rc<LinkClass> {
        let unknown = Cell::new((u64::MAX, SimDuration::ZERO));
        Rc::new(LinkClass {
            header: params.occupancy(0).ok(),
            full: unknown.clone(),
            recent: unknown,
            params,
        })
    }

    /// The timing parameters.
    pub fn params(&self) -> &HopParams {
        &self.params
    }
}

/// When a packet occupies a link and when it reaches the next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PacketHop {
    /// The link holds the packet over this span.
    pub occupied: Reservation,
    /// The packet has fully arrived at the next hop.
    pub arrives: SimTime,
}

impl Link {
    /// An idle link named `name` (trace track and error messages), of a
    /// class of its own.
    pub fn new(name: &str, params: HopParams) -> Self {
        Link::of_class(name, LinkClass::new(params))
    }

    /// An idle link named `name` of `class` (shared with the links of the
    /// same parameters).
    pub fn of_class(name: &str, class: Rc<LinkClass>) -> Self {
        Link {
            server: SerialServer::new(name, Activity::Packet),
            class,
            flows: HopFlows::default(),
        }
    }

    /// The multi-packet flows in service on it (flow mode, ADR-0056).
    pub(crate) fn flows(&self) -> &HopFlows {
        &self.flows
    }

    /// `S(payload)` of this link ([`HopParams::occupancy`]) for a packet's
    /// payload; errors name the link.
    pub fn occupancy(&self, payload: u64) -> Result<SimDuration, HwError> {
        if let (0, Some(header)) = (payload, self.class.header) {
            return Ok(header);
        }
        self.remembered(&self.class.recent, payload)
    }

    /// [`occupancy`](Self::occupancy) of a path's maximum payload, the size
    /// of a flow's full packets (remembered apart from the other sizes, so
    /// that flows of one packet, which ask for both, hit both).
    pub fn full_occupancy(&self, max_payload: u64) -> Result<SimDuration, HwError> {
        self.remembered(&self.class.full, max_payload)
    }

    fn remembered(
        &self,
        memo: &Cell<(u64, SimDuration)>,
        payload: u64,
    ) -> Result<SimDuration, HwError> {
        let (last, occupancy) = memo.get();
        if last == payload {
            return Ok(occupancy);
        }
        let occupancy = self
            .class
            .params
            .occupancy(payload)
            .map_err(HwError::time(self.name()))?;
        memo.set((payload, occupancy));
        Ok(occupancy)
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        self.server.name()
    }

    /// The timing parameters.
    pub fn params(&self) -> &HopParams {
        &self.class.params
    }

    /// Packets (`jobs`), payload bytes and busy time as of `now`.
    pub fn stats(&self, now: SimTime) -> ServerStats {
        self.server.stats(now)
    }

    /// Busy time over elapsed time at `now`, in [0, 1].
    pub fn utilisation(&self, now: SimTime) -> f64 {
        self.stats(now).utilisation()
    }

    pub fn server(&self) -> &SerialServer {
        &self.server
    }

    /// Books the link for a whole flow of `packets` packets whose first
    /// arrives at `arrives`: `busy` of occupancy for `payload` bytes (see
    /// [`SerialServer::reserve_batch`]).
    #[inline]
    pub(crate) fn book(
        &self,
        arrives: SimTime,
        busy: SimDuration,
        payload: u64,
        packets: u64,
    ) -> Result<Reservation, HwError> {
        self.server.reserve_batch(arrives, busy, payload, packets)
    }

    /// The end of the link's last booking ([`SerialServer::free_at`]): a
    /// header arriving before it finds the link busy (ADR-0022).
    pub(crate) fn free_at(&self) -> SimTime {
        self.server.free_at()
    }

    /// Books the link for a flow of one packet arriving at `arrives`
    /// ([`SerialServer::reserve_between`]).
    #[inline]
    pub(crate) fn book_packet(
        &self,
        arrives: SimTime,
        busy: SimDuration,
        payload: u64,
        wait: SimDuration,
    ) -> Result<Reservation, HwError> {
        self.server.reserve_between(arrives, busy, payload, wait)
    }

    /// A packet of `payload` bytes that has fully arrived at this link now,
    /// with occupancy `occupancy` (precomputed by the caller).
    pub(crate) fn carry(&self, payload: u64, occupancy: SimDuration) -> Result<PacketHop, HwError> {
        let occupied = self.server.reserve(occupancy, payload)?;
        let arrives = super::later(occupied.end, self.class.params.latency, self.name())?;
        Ok(PacketHop { occupied, arrives })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bandwidth(text: &str) -> Bandwidth {
        text.parse().unwrap()
    }

    #[test]
    fn occupancy_includes_overhead_and_rounds_up() {
        let pcie = HopParams::new(
            bandwidth("63 GB/s"),
            "1".parse().unwrap(),
            SimDuration::from_ns(500),
            Size::from_bytes(24),
        );
        // (256 + 24) B at 63 GB/s = 4444.44.. ps, rounded up.
        assert_eq!(pcie.occupancy(256).unwrap().as_ps(), 4445);
        assert_eq!(pcie.occupancy(0).unwrap().as_ps(), 381);
    }

    #[test]
    fn efficiency_scales_the_line_rate() {
        let noc = HopParams::new(
            bandwidth("64 GB/s"),
            "0.9".parse().unwrap(),
            SimDuration::from_ns(9),
            Size::from_bytes(0),
        );
        assert_eq!(noc.bandwidth.bytes_per_sec(), 57_600_000_000);
        assert_eq!(noc.occupancy(8192).unwrap().as_ps(), 142_223);
    }

    #[test]
    fn overflowing_sizes_are_errors() {
        let slow = HopParams::new(
            bandwidth("1 B/s"),
            "1".parse().unwrap(),
            SimDuration::ZERO,
            Size::from_bytes(1),
        );
        assert!(slow.occupancy(u64::MAX).is_err());
        assert!(slow.occupancy(1 << 40).is_err());
    }
}
