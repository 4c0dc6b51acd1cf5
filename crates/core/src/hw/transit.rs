//! Transfers over a path of links: packetisation, store-and-forward per
//! packet, packets pipelined across hops.
//!
//! A transfer of `S` bytes with maximum payload `P` is split into
//! `N = max(1, ceil(S / P))` packets: `N - 1` of `P` bytes and a last one of
//! `S - (N - 1)·P` bytes. A zero-byte transfer is one header-only packet
//! (a doorbell or flag write still crosses the wire), so it costs the path
//! latency plus the overhead serialisation.
//!
//! Packet `k` enters hop `h` once it has fully arrived there and the hop is
//! free (FIFO across every user of the hop); it holds the hop for
//! `S_h(size_k)` and reaches hop `h + 1` after a further `L_h`. The source
//! injects one packet at a time: packet `k + 1` asks for the first hop when
//! packet `k` has left it, so flows sharing a first hop interleave packet by
//! packet. Without contention this is the recurrence whose closed form is
//! [`transfer_formula`]; the simulated time equals it to the picosecond.
//!
//! [`transfer`] runs the packets as a small event loop inside the calling
//! task (one timer per packet per hop, no task per packet).
//!
//! [`transfer_flow`] is the flow fidelity (ADR-0012): the same recurrence
//! solved per hop for the whole transfer at once. Because every packet but
//! the last has the same size, three instants per hop carry the pipeline:
//! the first packet's arrival `A`, the last full packet's arrival `F` and
//! the last packet's arrival `Z`. Hop `h` is booked (FIFO, on the same
//! [`SerialServer`](super::server::SerialServer) calendar packets use) for
//! the transfer's whole occupancy `B_h = (N−1)·S_h(P) + S_h(P_last)` from
//! its first packet's arrival `A` on: served from `s` to `E` (`E = s + B_h`
//! unless the service was split around flows booked earlier); then
//! `X = max(F + S_h(P), E − S_h(P_last))` is when the last full packet
//! leaves, `D = max(Z, X) + S_h(P_last)` when the last packet leaves, and
//! the next hop sees `A' = s + S_h(P_first) + L_h`, `F' = X + L_h`,
//! `Z' = D + L_h`. Uncontended (`s = A` everywhere) this is exactly the
//! packet recurrence, so it equals [`transfer_formula`] to the picosecond;
//! under contention a flow queues behind the flows booked before it on
//! each hop. One transfer costs O(hops) arithmetic and one timer.
//!
//! Knows links and sizes; nothing of what the bytes are or why they move.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::num::NonZeroU64;
use std::rc::Rc;

use super::HwError;
use super::explain::{self, TermKind};
use super::flow_share::{HopIn, SharedFlow};
use super::link::{HopParams, Link};
use super::link_table::LinkTable;
use super::server::Reservation;
use crate::sim::{self, SimDuration, SimTime, TimeError};
use crate::topology::EdgeId;
use crate::trace;

/// How a transfer is cut into packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketPlan {
    /// `N = max(1, ceil(bytes / max_payload))`.
    pub packets: u64,
    /// Payload of every packet but the last: the maximum payload `P`.
    pub full: u64,
    /// Payload of the last packet, in `[0, P]` (0 only for a zero-byte
    /// transfer).
    pub last: u64,
}

impl PacketPlan {
    /// The plan for `bytes` with packets of at most `max_payload` bytes.
    pub fn new(bytes: u64, max_payload: NonZeroU64) -> Self {
        let full = max_payload.get();
        let packets = bytes.div_ceil(full).max(1);
        PacketPlan {
            packets,
            full,
            last: bytes - (packets - 1) * full,
        }
    }

    /// Payload of packet `k` (0-based).
    pub fn size(&self, k: u64) -> u64 {
        if k + 1 == self.packets {
            self.last
        } else {
            self.full
        }
    }

    /// Total payload bytes.
    pub fn bytes(&self) -> u64 {
        (self.packets - 1) * self.full + self.last
    }
}

/// The hop where a transfer's packets spent the longest (queueing plus
/// occupancy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bottleneck {
    /// Index of the hop in the path.
    pub hop: usize,
    /// Name of its link.
    pub link: Rc<str>,
    /// Sum over the transfer's packets of (leave − arrive) at that hop.
    pub residency: SimDuration,
}

/// What a finished transfer did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferReport {
    /// When the transfer was started.
    pub start: SimTime,
    /// When its last packet had fully arrived at the destination.
    pub end: SimTime,
    /// Payload bytes.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// The hop that held the packets longest; `None` for an empty path.
    pub bottleneck: Option<Bottleneck>,
}

impl TransferReport {
    /// `end - start`.
    pub fn duration(&self) -> SimDuration {
        self.end.saturating_since(self.start)
    }
}

/// Moves `bytes` over `path` (the links in order, source side first) in
/// packets of at most `max_payload` bytes; returns when the last packet has
/// fully arrived. An empty path takes no time.
///
/// Errors: a time that overflows u64 picoseconds, naming the link.
pub async fn transfer(
    path: &[impl Borrow<Link>],
    bytes: u64,
    max_payload: NonZeroU64,
) -> Result<TransferReport, HwError> {
    let mut flight = Flight::new(path, PacketPlan::new(bytes, max_payload))?;
    while let Some(Reverse(event)) = flight.events.pop() {
        if explain::recording() {
            flight.explain(&event);
        }
        explain::sleep_until(event.at).await;
        flight.handle(event)?;
    }
    Ok(flight.report())
}

/// Moves `bytes` over `path` as one flow (module docs, ADR-0012); returns
/// when the last byte has arrived. Uncontended it takes exactly the time of
/// [`transfer`] and [`transfer_formula`]. An empty path takes no time.
///
/// Errors: a time that overflows u64 picoseconds, naming the link.
pub async fn transfer_flow<'a>(
    path: impl IntoIterator<Item = &'a Link>,
    bytes: u64,
    max_payload: NonZeroU64,
) -> Result<TransferReport, HwError> {
    let report = book_flow(path, bytes, max_payload)?;
    explain::sleep_until(report.end).await;
    Ok(report)
}

/// Books the flow of [`transfer_flow`] starting now and tells when it will
/// have arrived, without waiting for it: a caller whose next stage books
/// nothing sleeps once for both.
pub fn book_flow<'a>(
    path: impl IntoIterator<Item = &'a Link>,
    bytes: u64,
    max_payload: NonZeroU64,
) -> Result<TransferReport, HwError> {
    let plan = PacketPlan::new(bytes, max_payload);
    let hops = path
        .into_iter()
        .map(|link| {
            let times = HopTimes {
                full: link.full_occupancy(plan.full)?,
                tail: link.occupancy(plan.last)?,
                latency: link.params().latency,
                link: u32::MAX,
            };
            Ok((link, times))
        })
        .collect::<Result<Vec<_>, HwError>>()?;
    let start = sim::now();
    let mut slowest = Slowest::default();
    let on_hop = |hop, link, residency| slowest.note(hop, link, residency);
    let end = cross_hops(hops, &plan, start, on_hop, None, None)?;
    Ok(slowest.report(start, end, &plan))
}

/// What a flow needs to know of one hop besides its calendar:
/// `S_h(P)`, `S_h(P_last)` and `L_h` (a `FlowRoute` keeps them beside the
/// path, so a hop touches only its link's calendar).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HopTimes {
    pub full: SimDuration,
    pub tail: SimDuration,
    pub latency: SimDuration,
    /// The link's index in the fabric's table (for sharing, ADR-0056;
    /// `u32::MAX` on a bare path, which shares nothing).
    pub link: u32,
}

/// Books a flow of `plan` starting at `start` (now) over `hops`; tells
/// `on_hop` each hop's index, link and the flow's residency there, and
/// returns when the last byte arrives. While `--explain` records, also
/// pushes the flow's critical path through the hops as terms; `memo`
/// (the route's, if any) keeps its uncontended crossing as one run.
///
/// With `sharing` (a fabric's route), a flow of several packets is served
/// on each hop as packet mode serves packets among the flows still in
/// service there ([`flow_share`](super::flow_share), ADR-0056).
/// Out of line: inlined in a one-packet flow's idle pass
/// (`FlowRoute::book_flow`), it made that pass dearer (ADR-0068).
#[inline(never)]
pub(crate) fn cross_hops<'a>(
    hops: impl IntoIterator<Item = (&'a Link, HopTimes)>,
    plan: &PacketPlan,
    start: SimTime,
    on_hop: impl FnMut(usize, &'a Link, SimDuration),
    memo: Option<&explain::KeyedRunMemo>,
    sharing: Option<&Sharing<'_>>,
) -> Result<SimTime, HwError> {
    if explain::recording() {
        return cross_hops_explained(hops, plan, start, on_hop, memo, sharing);
    }
    let mut hops = hops.into_iter().enumerate();
    cross_front(&mut hops, plan, start, on_hop, |_, _, _, _| {}, sharing)
}

/// A multi-packet flow's sharing of its hops (ADR-0056): the fabric's
/// links (each holds the flows in service on it) and the flow's own
/// record there.
pub(crate) struct Sharing<'s> {
    pub links: &'s LinkTable,
    pub flow: Rc<SharedFlow>,
}

/// [`cross_hops`]' booking: tells `crossed` each hop's link, the flow's
/// front when it arrived there (`A`, `F`, `Z`), its booking and times.
fn cross_front<'a>(
    hops: &mut impl Iterator<Item = (usize, (&'a Link, HopTimes))>,
    plan: &PacketPlan,
    start: SimTime,
    mut on_hop: impl FnMut(usize, &'a Link, SimDuration),
    mut crossed: impl FnMut(&'a Link, (SimTime, SimTime, SimTime), Reservation, HopTimes),
    sharing: Option<&Sharing<'_>>,
) -> Result<SimTime, HwError> {
    let mut front = FlowFront::at(start);
    if plan.packets == 1 && !trace::is_recording() {
        // A one-packet flow, while every hop so far was idle when it
        // arrived, is one instant: booked from its arrival for `S_h`
        // (`SerialServer::try_reserve_idle`), on to the next hop after
        // `L_h` — what the general case books and times there. From the
        // first hop where that does not hold, the general case. `now` does
        // not change while the flow books.
        let (now, mut arrives) = (sim::now(), start);
        loop {
            let Some((index, (link, times))) = hops.next() else {
                return Ok(arrives);
            };
            let server = link.server();
            let Some(end) = server.try_reserve_idle(arrives, times.tail, plan.last, now) else {
                front = FlowFront::at(arrives);
                let (residency, booked) = front.cross(link, plan, times)?;
                on_hop(index, link, residency);
                crossed(link, (arrives, arrives, arrives), booked, times);
                break;
            };
            let booked = Reservation {
                start: arrives,
                end,
            };
            on_hop(index, link, booked.end.saturating_since(booked.start));
            crossed(link, (arrives, arrives, arrives), booked, times);
            arrives = super::later_for(booked.end, times.latency, || link.name())?;
        }
    }
    let now = sim::now();
    for (index, (link, times)) in hops {
        let before = (front.first, front.last_full, front.last);
        let (residency, booked) = match sharing {
            Some(sharing) if plan.packets > 1 => {
                front.cross_shared(link, plan, times, |front, work, booked| {
                    let hop = HopIn {
                        hop: index,
                        link: times.link,
                        first: front.first,
                        last: front.last,
                        work,
                        tail: times.tail,
                        latency: times.latency,
                        start: booked.start,
                        end: booked.end,
                    };
                    let component = |_| explain::component(link.server());
                    let lists = |index| {
                        sharing
                            .links
                            .get(EdgeId::from_index(index as usize))
                            .flows()
                    };
                    let out = sharing
                        .flow
                        .share((hop, link.flows()), lists, now, component);
                    Reservation {
                        start: out.start,
                        end: out.end,
                    }
                })?
            }
            _ => front.cross(link, plan, times)?,
        };
        on_hop(index, link, residency);
        crossed(link, before, booked, times);
    }
    Ok(front.last)
}

/// [`cross_hops`] while `--explain` records: books as it does, then pushes
/// the flow's critical path through the hops as terms
/// ([`FlowHop::critical_path`]). Uncontended (every hop served the flow
/// from its first packet's arrival, in one piece) the terms are a function
/// of the route and the size: with the route's `memo`, one run (ADR-0051).
fn cross_hops_explained<'a>(
    hops: impl IntoIterator<Item = (&'a Link, HopTimes)>,
    plan: &PacketPlan,
    start: SimTime,
    on_hop: impl FnMut(usize, &'a Link, SimDuration),
    memo: Option<&explain::KeyedRunMemo>,
    sharing: Option<&Sharing<'_>>,
) -> Result<SimTime, HwError> {
    let mut crossed = Vec::new();
    let mut hops = hops.into_iter().enumerate();
    let end = cross_front(
        &mut hops,
        plan,
        start,
        on_hop,
        |link, before, booked, times| {
            crossed.push((link, FlowHop::new(before, booked, times, plan)));
        },
        sharing,
    )?;
    let terms = || {
        let mut terms = Vec::new();
        let mut trace = Traced::Last;
        for (link, hop) in crossed.iter().rev() {
            let component = explain::component(link.server()).unwrap_or(0);
            trace = hop.critical_path(trace, |kind, ps| {
                terms.push(explain::Term {
                    component,
                    kind,
                    ps,
                })
            });
        }
        terms.reverse();
        terms
    };
    match memo {
        Some(memo) if crossed.iter().all(|(_, hop)| hop.uncontended()) => {
            explain::push_keyed_run(memo, plan.bytes(), terms)
        }
        _ => explain::push_terms(terms()),
    }
    Ok(end)
}

/// Which of a hop's outputs the critical path reaches it by: the first
/// packet's arrival `A'`, the last full one's `F'` or the last one's `Z'`.
#[derive(Clone, Copy)]
enum Traced {
    First,
    LastFull,
    Last,
}

/// One hop of a flow as booked: its inputs `A`, `F`, `Z`, its booking
/// `[s, E)` and its times (module docs).
struct FlowHop {
    first: SimTime,
    last_full: SimTime,
    last: SimTime,
    booked: Reservation,
    times: HopTimes,
    packets: u64,
}

impl FlowHop {
    fn new(
        (first, last_full, last): (SimTime, SimTime, SimTime),
        booked: Reservation,
        times: HopTimes,
        plan: &PacketPlan,
    ) -> Self {
        FlowHop {
            first,
            last_full,
            last,
            booked,
            times,
            packets: plan.packets,
        }
    }

    /// Whether the hop served the flow from its first packet's arrival in
    /// one piece, as it would alone.
    fn uncontended(&self) -> bool {
        let busy = self.times.full.as_ps().saturating_mul(self.packets - 1);
        let busy = busy.saturating_add(self.times.tail.as_ps());
        self.booked.start == self.first
            && self.booked.end.saturating_since(self.booked.start).as_ps() == busy
    }

    /// Walks back from output `traced` of this hop to the input it came
    /// from, telling `term` each piece (latest first): the recurrence of
    /// [`FlowFront::cross`] read backwards, so the pieces of every hop of
    /// a flow add up exactly to its duration, and uncontended they are the
    /// terms of [`transfer_formula`] (latencies, then the serialisations
    /// of the longest path through the packet × hop grid).
    fn critical_path(&self, traced: Traced, mut term: impl FnMut(TermKind, u64)) -> Traced {
        let ps = |d: SimDuration| d.as_ps();
        let HopTimes {
            full,
            tail,
            latency,
            ..
        } = self.times;
        let span = self.booked.end.saturating_since(self.booked.start);
        let less = |a: SimDuration, b: SimDuration| {
            SimDuration::from_ps(a.as_ps().saturating_sub(b.as_ps()))
        };
        let served = self.booked.start + less(span, tail);
        let last_full_leaves = if self.packets == 1 {
            served
        } else {
            (self.last_full + full).max(served)
        };
        term(TermKind::Latency, ps(latency));
        match traced {
            Traced::First => {
                let first_size = if self.packets == 1 { tail } else { full };
                term(TermKind::Service, ps(first_size));
                return self.to_start(&mut term);
            }
            Traced::Last => {
                term(TermKind::Service, ps(tail));
                if self.last >= last_full_leaves {
                    return Traced::Last;
                }
            }
            Traced::LastFull => {}
        }
        if self.packets > 1 && self.last_full + full >= served {
            term(TermKind::Service, ps(full));
            return Traced::LastFull;
        }
        // The bulk of the flow: its own service, and the time the hop
        // served flows booked before it in the gaps it was split over.
        let busy = full.as_ps() * (self.packets - 1) + tail.as_ps();
        let own = busy.saturating_sub(tail.as_ps());
        let between = ps(less(span, tail)).saturating_sub(own);
        term(TermKind::Service, own.min(ps(less(span, tail))));
        term(TermKind::Queue, between);
        self.to_start(&mut term)
    }

    /// From the booking's start back to the first packet's arrival: the
    /// queueing before the hop was free.
    fn to_start(&self, term: &mut impl FnMut(TermKind, u64)) -> Traced {
        term(
            TermKind::Queue,
            self.booked.start.saturating_since(self.first).as_ps(),
        );
        Traced::First
    }
}

/// The hop where a flow spent the longest so far (the last of equals).
#[derive(Default)]
pub(crate) struct Slowest<'a>(Option<(usize, &'a Link, SimDuration)>);

impl<'a> Slowest<'a> {
    pub(crate) fn note(&mut self, hop: usize, link: &'a Link, residency: SimDuration) {
        if self.0.is_none_or(|(_, _, most)| residency >= most) {
            self.0 = Some((hop, link, residency));
        }
    }

    /// The report of a flow of `plan` from `start` to `end`. The slowest
    /// link's name is fetched here, once (a name is a separate
    /// allocation: touching it at every hop costs a cache miss per hop).
    pub(crate) fn report(self, start: SimTime, end: SimTime, plan: &PacketPlan) -> TransferReport {
        let bottleneck = self.0.map(|(hop, link, residency)| Bottleneck {
            hop,
            link: link.server().shared_name(),
            residency,
        });
        TransferReport {
            start,
            end,
            bytes: plan.bytes(),
            packets: plan.packets,
            bottleneck,
        }
    }
}

/// Where a flow's packets are when they reach the next hop: the first
/// packet, the last full one and the last one (module docs: `A`, `F`, `Z`).
struct FlowFront {
    first: SimTime,
    last_full: SimTime,
    last: SimTime,
}

impl FlowFront {
    fn at(start: SimTime) -> Self {
        FlowFront {
            first: start,
            last_full: start,
            last: start,
        }
    }

    /// Books `link` for the flow and moves the front past it; returns the
    /// flow's residency there (queueing before its first packet plus its
    /// occupancy), the measure [`Bottleneck`] compares, and the booking.
    fn cross(
        &mut self,
        link: &Link,
        plan: &PacketPlan,
        times: HopTimes,
    ) -> Result<(SimDuration, Reservation), HwError> {
        self.cross_shared(link, plan, times, |_, _, booked| booked)
    }

    /// [`cross`](Self::cross), `share` told the flow's front at the hop
    /// (before it), its whole occupancy, when its FIFO booking serves its
    /// first packet and when its last packet leaves, and giving back when
    /// they do once flows overlapping it there are served as packets are
    /// (ADR-0056; never later; the booking itself, returned, is unchanged).
    fn cross_shared(
        &mut self,
        link: &Link,
        plan: &PacketPlan,
        HopTimes {
            full,
            tail,
            latency,
            ..
        }: HopTimes,
        share: impl FnOnce(&FlowFront, SimDuration, Reservation) -> Reservation,
    ) -> Result<(SimDuration, Reservation), HwError> {
        let after = |t: SimTime, d: SimDuration| super::later_for(t, d, || link.name());
        // `S_h(P)`: what a full packet holds the hop for. A flow of one
        // packet has none of its own, but waits for one (ADR-0012 D5).
        let (first_size, booked, busy) = if plan.packets == 1 {
            let wait = SimDuration::from_ps(full.as_ps() / 2);
            let booked = link.book_packet(self.first, tail, plan.bytes(), wait)?;
            (tail, booked, tail)
        } else {
            let busy = full
                .checked_mul(plan.packets - 1)
                .and_then(|fulls| fulls.checked_add(tail))
                .map_err(HwError::time(link.name()))?;
            let booked = link.book(self.first, busy, plan.bytes(), plan.packets)?;
            (full, booked, busy)
        };
        // The hop's service ends at `booked.end` (later than `start + busy`
        // when it was split around earlier bookings); the last packet's
        // share is its end.
        let span = booked.end.saturating_since(booked.start).as_ps();
        let served = booked.start + SimDuration::from_ps(span.saturating_sub(tail.as_ps()));
        let mut last_full_leaves = if plan.packets == 1 {
            served
        } else {
            after(self.last_full, full)?.max(served)
        };
        let mut last_leaves = after(self.last.max(last_full_leaves), tail)?;
        let mut first_served = booked.start;
        let mut effective = booked;
        if plan.packets > 1 {
            let shared = share(
                self,
                busy,
                Reservation {
                    start: booked.start,
                    end: last_leaves,
                },
            );
            first_served = shared.start.min(first_served);
            effective.start = first_served;
            if shared.end < last_leaves {
                effective.end = shared.end;
                last_leaves = shared.end;
                let less = shared.end.as_ps().saturating_sub(tail.as_ps());
                last_full_leaves = last_full_leaves
                    .min(SimTime::from_ps(less))
                    .max(after(first_served, first_size)?);
            }
        }
        let first_leaves = after(first_served, first_size)?;
        let residency = booked.end.saturating_since(self.first);
        *self = FlowFront {
            first: after(first_leaves, latency)?,
            last_full: after(last_full_leaves, latency)?,
            last: after(last_leaves, latency)?,
        };
        Ok((residency, effective))
    }
}

/// The uncontended time of [`transfer`] over hops `hops`:
///
/// - `N = 1`: `Σ_h (L_h + S_h(P_last))`;
/// - `N ≥ 2`: `Σ_h L_h + max_c [ Σ_{h≤c} S_h(P) + (N−2)·max_{h≤c} S_h(P)
///   + Σ_{h≥c} S_h(P_last) ]`,
///
/// with `S_h(x)` = [`HopParams::occupancy`]. (The max over `c` is the
/// longest monotone path through the packet × hop grid of a flow shop: the
/// full packets cross hops `1..=c`, the extra `N − 2` of them wait behind
/// the slowest hop among those, and the last packet crosses `c..=H`.)
pub fn transfer_formula(
    hops: &[HopParams],
    bytes: u64,
    max_payload: NonZeroU64,
) -> Result<SimDuration, HwError> {
    let plan = PacketPlan::new(bytes, max_payload);
    let error = HwError::time("transfer formula");
    let (mut latency, mut full, mut last) = (0u128, Vec::new(), Vec::new());
    for hop in hops {
        let occupancy = |x| hop.occupancy(x).map(|d| u128::from(d.as_ps()));
        latency += u128::from(hop.latency.as_ps());
        full.push(occupancy(plan.full).map_err(&error)?);
        last.push(occupancy(plan.last).map_err(&error)?);
    }
    let serialisation = if plan.packets == 1 {
        last.iter().sum()
    } else {
        pipelined(&full, &last, u128::from(plan.packets - 2))
    };
    u64::try_from(latency.saturating_add(serialisation))
        .map(SimDuration::from_ps)
        .map_err(|_| {
            error(TimeError::Overflow(format!(
                "{bytes} B over {} hops",
                hops.len()
            )))
        })
}

/// `max_c [ Σ_{h≤c} full_h + extra·max_{h≤c} full_h + Σ_{h≥c} last_h ]`.
fn pipelined(full: &[u128], last: &[u128], extra: u128) -> u128 {
    let mut after: u128 = last.iter().sum();
    let (mut before, mut slowest, mut best) = (0u128, 0u128, 0u128);
    for (f, l) in full.iter().zip(last) {
        before += f;
        slowest = slowest.max(*f);
        best = best.max(
            before
                .saturating_add(extra.saturating_mul(slowest))
                .saturating_add(after),
        );
        after -= l;
    }
    best
}

/// "Packet `packet` has fully arrived at hop `hop` at `at`"; `hop ==
/// path.len()` is the destination. Ordered by time, then by creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Arrival {
    at: SimTime,
    seq: u64,
    packet: u64,
    hop: usize,
    /// What made it: the hop before (`usize::MAX`: none, the first
    /// packet's start), when the packet asked for it and when that hop
    /// served it (for `--explain`).
    via: usize,
    asked: SimTime,
    served: (SimTime, SimTime),
}

/// The packets of one transfer still moving.
struct Flight<'a, L> {
    path: &'a [L],
    plan: PacketPlan,
    /// `(S_h(P), S_h(P_last))` per hop.
    occupancy: Vec<(SimDuration, SimDuration)>,
    /// Per hop, Σ (leave − arrive) over packets, in ps.
    residency: Vec<u64>,
    events: BinaryHeap<Reverse<Arrival>>,
    seq: u64,
    start: SimTime,
}

impl<'a, L: Borrow<Link>> Flight<'a, L> {
    fn new(path: &'a [L], plan: PacketPlan) -> Result<Self, HwError> {
        let occupancy = path
            .iter()
            .map(|link| {
                let link = link.borrow();
                let s = |b| {
                    link.params()
                        .occupancy(b)
                        .map_err(HwError::time(link.name()))
                };
                Ok((s(plan.full)?, s(plan.last)?))
            })
            .collect::<Result<_, HwError>>()?;
        let start = sim::now();
        let mut flight = Flight {
            path,
            plan,
            occupancy,
            residency: vec![0; path.len()],
            events: BinaryHeap::new(),
            seq: 0,
            start,
        };
        if !path.is_empty() {
            flight.push(start, 0, 0, (usize::MAX, start, (start, start)));
        }
        Ok(flight)
    }

    fn push(
        &mut self,
        at: SimTime,
        packet: u64,
        hop: usize,
        (via, asked, served): (usize, SimTime, (SimTime, SimTime)),
    ) {
        let seq = self.seq;
        self.seq += 1;
        self.events.push(Reverse(Arrival {
            at,
            seq,
            packet,
            hop,
            via,
            asked,
            served,
        }));
    }

    /// Pushes the terms of the wait for `event`: the packet's queueing,
    /// service and flight on the hop that made it (the sleep before it
    /// keeps the latest of them).
    fn explain(&self, event: &Arrival) {
        let Some(link) = self.path.get(event.via).map(L::borrow) else {
            return;
        };
        let Some(component) = explain::component(link.server()) else {
            return;
        };
        let (start, end) = event.served;
        let terms = [
            (TermKind::Queue, start.saturating_since(event.asked)),
            (TermKind::Service, end.saturating_since(start)),
            (TermKind::Latency, event.at.saturating_since(end)),
        ];
        for (kind, d) in terms {
            explain::push(component, kind, d.as_ps());
        }
    }

    /// Packet `event.packet` asks for hop `event.hop` now.
    fn handle(&mut self, event: Arrival) -> Result<(), HwError> {
        let Some(link) = self.path.get(event.hop).map(L::borrow) else {
            return Ok(()); // delivered
        };
        let last = event.packet + 1 == self.plan.packets;
        let (full, tail) = self.occupancy[event.hop];
        let occupancy = if last { tail } else { full };
        let hop = link.carry(self.plan.size(event.packet), occupancy)?;
        let held = hop.occupied.end.saturating_since(event.at).as_ps();
        self.residency[event.hop] = self.residency[event.hop].saturating_add(held);
        let made = (event.hop, event.at, (hop.occupied.start, hop.occupied.end));
        self.push(hop.arrives, event.packet, event.hop + 1, made);
        if event.hop == 0 && !last {
            self.push(hop.occupied.end, event.packet + 1, 0, made);
        }
        Ok(())
    }

    fn report(self) -> TransferReport {
        let bottleneck = self
            .residency
            .iter()
            .enumerate()
            .rev()
            .max_by_key(|(_, ps)| **ps)
            .map(|(hop, ps)| Bottleneck {
                hop,
                link: self.path[hop].borrow().server().shared_name(),
                residency: SimDuration::from_ps(*ps),
            });
        TransferReport {
            start: self.start,
            end: sim::now(),
            bytes: self.plan.bytes(),
            packets: self.plan.packets,
            bottleneck,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::units::{Bandwidth, Fraction, Size};
    use crate::sim::Simulation;

    fn payload(p: u64) -> NonZeroU64 {
        NonZeroU64::new(p).unwrap()
    }

    fn hop(bytes_per_ns: u64, latency_ns: u64) -> HopParams {
        HopParams::new(
            Bandwidth::from_bytes_per_sec(bytes_per_ns * 1_000_000_000).unwrap(),
            Fraction::from_ppm(1_000_000).unwrap(),
            SimDuration::from_ns(latency_ns),
            Size::from_bytes(0),
        )
    }

    #[test]
    fn plans_split_into_full_packets_and_a_tail() {
        let plan = |s, p| {
            let plan = PacketPlan::new(s, payload(p));
            (plan.packets, plan.full, plan.last)
        };
        assert_eq!(plan(0, 256), (1, 256, 0));
        assert_eq!(plan(1, 256), (1, 256, 1));
        assert_eq!(plan(256, 256), (1, 256, 256));
        assert_eq!(plan(257, 256), (2, 256, 1));
        assert_eq!(plan(1024, 256), (4, 256, 256));
        assert_eq!(PacketPlan::new(1000, payload(256)).bytes(), 1000);
    }

    #[test]
    fn formula_single_packet_is_latency_plus_serialisation_per_hop() {
        let hops = [hop(1, 10), hop(2, 20)];
        // 100 B: 100 ns + 50 ns of serialisation, 30 ns of latency.
        let t = transfer_formula(&hops, 100, payload(256)).unwrap();
        assert_eq!(t, SimDuration::from_ns(180));
    }

    #[test]
    fn formula_pipelines_behind_the_slowest_hop() {
        // Fast, slow, fast: 4 packets of 100 B; slow hop is 100 ns/packet.
        let hops = [hop(10, 1), hop(1, 1), hop(10, 1)];
        let t = transfer_formula(&hops, 400, payload(100)).unwrap();
        // 3 ns latency + 10 (hop 0) + 4 × 100 (hop 1) + 10 (hop 2).
        assert_eq!(t, SimDuration::from_ns(423));
    }

    #[test]
    fn empty_path_takes_no_time() {
        assert_eq!(
            transfer_formula(&[], 4096, payload(256)).unwrap(),
            SimDuration::ZERO
        );
        let mut simulation = Simulation::new();
        let done = simulation.spawn("t", async {
            transfer(&[] as &[&Link], 4096, payload(256)).await
        });
        simulation.run().unwrap();
        let report = done.output().unwrap().unwrap();
        assert_eq!(
            (report.duration(), report.bottleneck),
            (SimDuration::ZERO, None)
        );
    }

    #[test]
    fn report_names_the_slowest_hop() {
        let path: Vec<_> = [("a", hop(10, 1)), ("b", hop(1, 1)), ("c", hop(10, 1))]
            .into_iter()
            .map(|(name, params)| Rc::new(Link::new(name, params)))
            .collect();
        let mut simulation = Simulation::new();
        let done = simulation.spawn("t", async move { transfer(&path, 400, payload(100)).await });
        simulation.run().unwrap();
        let report = done.output().unwrap().unwrap();
        assert_eq!(report.duration(), SimDuration::from_ns(423));
        let bottleneck = report.bottleneck.unwrap();
        assert_eq!((bottleneck.hop, &*bottleneck.link), (1, "b"));
    }
}
