//! [`FlowRoute`]: a path as flow mode crosses it, its per-hop constants
//! laid out beside the links' addresses.
//!
//! A flow-mode transfer or header reads, at every hop, the hop's occupancy
//! for a full packet, its header occupancy and its latency, and the link's
//! calendar. The constants depend only on the path, so they are computed
//! once per path and kept here, contiguous: crossing a hop then touches the
//! route (read in order) and one cache line of the link, its calendar. On
//! a machine of thousands of links, how many lines a hop touches is what a
//! message costs (docs/perf-log.md). A hop is 48 bytes with
//! its link's address, its tail among them (read in the same stream as
//! the link, ADR-0065): what can be derived at the hop (`S_h(P) / 2`) is
//! not kept (a quarter fewer last-level misses on the
//! yardstick).
//! The links are held by address ([`HeldLinks`]), so a hop does not read
//! the table's per-edge slot (ADR-0058: at 256 SIPs a miss per hop).
//! A one-packet flow that crosses every hop idle is counted on the route
//! (how many, of its remembered size) and added to its links' counters
//! before anyone reads them ([`DeferredCounts`], ADR-0069).
//!
//! Knows links and their parameters; nothing of what moves over them.

use std::cell::Cell;
use std::num::NonZeroU64;
use std::rc::{Rc, Weak};
use std::sync::Arc;

use super::flow_share::{Pushed, SharedFlow};
use super::link_table::{Ahead, HeldLinks};
use super::server::{DeferredCounts, defer_counts};
use super::transit::{HopTimes, Sharing, Slowest, cross_hops};
use super::{HwError, Link, LinkTable, PacketPlan, TransferReport, later_for};
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::Path;
use crate::trace;

/// What `--explain` keeps of a header's crossing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExplainHeader {
    /// Its terms, for the running poll's sleep.
    Terms,
    /// Only its queueing, on the hops' utilisation.
    QueueingOnly,
}

/// How far [`FlowRoute::book_idle_hops`] took a one-packet flow.
enum Crossed {
    /// Over every hop: it lands then.
    Landed(SimTime),
    /// Up to hop `hop`, not idle from `arrives`, when the flow arrives
    /// there: the general booking goes on from there.
    Busy { hop: usize, arrives: SimTime },
}

/// One hop of a [`FlowRoute`], beside its link ([`HeldLinks`]).
#[derive(Debug, Clone)]
struct FlowHop {
    /// The link's index in the fabric's table (its edge's index): what
    /// flows sharing it are kept by (ADR-0056).
    link: u32,
    /// `S_h(P)` for the path's maximum payload `P`.
    full: SimDuration,
    /// `L_h`.
    latency: SimDuration,
    /// `S_h(0) + L_h`: a header's crossing of the hop once it is served.
    header_crossing: SimDuration,
    /// `S_h` of the route's remembered last-packet payload.
    tail: Cell<SimDuration>,
}

// 40 bytes, 48 with its link's address beside it in `HeldLinks`.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<FlowHop>() == 40);

impl FlowHop {
    /// `S_h(P) / 2` (rounded down): what a header waits at a busy hop
    /// (ADR-0022).
    fn half_full(&self) -> SimDuration {
        SimDuration::from_ps(self.full.as_ps() / 2)
    }
}

/// A path's links and their flow-mode constants; see the module docs.
pub(crate) struct FlowRoute {
    /// The path, held so that its address (the fabric's key for this
    /// route) is not reused while the route exists.
    path: Arc<Path>,
    max_payload: NonZeroU64,
    /// The path's links, held by address (ADR-0058), and their constants.
    hops: HeldLinks<FlowHop>,
    /// A header's uncontended crossing, `Σ (S_h(0) + L_h)`: how long an
    /// IPCQ doorbell or credit takes (ADR-0048).
    signal: SimDuration,
    /// The last-packet payload asked for last, whose `S_h` the hops keep
    /// as their tails (a route mostly carries one message size).
    last: Cell<u64>,
    /// `Σ (tail + L_h)`, `None` past u64 picoseconds: a one-packet flow
    /// that leaves early enough to land by then has no sum that
    /// overflows ([`book_idle_hops`](Self::book_idle_hops)).
    idle_span: Cell<Option<u64>>,
    /// One-packet flows of `last` bytes booked on every hop and not yet
    /// counted on the links ([`flush_hops`](Self::flush_hops)).
    unflushed: Cell<u64>,
    /// Whether the route is registered to be flushed ([`defer_counts`]).
    registered: Cell<bool>,
    /// The route itself, to register.
    me: Weak<FlowRoute>,
    /// A header's uncontended crossing as an `--explain` run.
    explain: super::explain::RunMemo,
    /// A flow's uncontended crossing as an `--explain` run, for one size
    /// (ADR-0051).
    flow_explain: super::explain::KeyedRunMemo,
    /// Until when a link of the route is down for a window: until then
    /// its multi-packet flows do not share hops (ADR-0115).
    held_until: SimTime,
}

impl FlowRoute {
    /// The route of `path` over `links` (the fabric's table, indexed by
    /// edge). Errors: an occupancy that overflows, naming the link.
    pub(crate) fn new(path: Arc<Path>, links: &LinkTable) -> Result<Rc<Self>, HwError> {
        let max_payload = NonZeroU64::new(path.max_payload()).unwrap_or(NonZeroU64::MIN);
        let held_until = links.held_until(path.edges());
        let hops = HeldLinks::try_new(links, path.edges(), |edge, link| {
            let full = link.full_occupancy(max_payload.get())?;
            let (header, latency) = (link.occupancy(0)?, link.params().latency);
            let header_crossing = header
                .checked_add(latency)
                .map_err(HwError::time(link.name()))?;
            Ok::<_, HwError>(FlowHop {
                link: edge.index() as u32,
                full,
                latency,
                header_crossing,
                tail: Cell::new(full),
            })
        })?;
        let signal = hops
            .iter()
            .try_fold(SimDuration::ZERO, |sum, (link, hop)| {
                sum.checked_add(hop.header_crossing)
                    .map_err(HwError::time(link.name()))
            })?;
        let route = Rc::new_cyclic(|me| FlowRoute {
            path,
            max_payload,
            hops,
            signal,
            last: Cell::new(max_payload.get()),
            idle_span: Cell::new(None),
            unflushed: Cell::new(0),
            registered: Cell::new(false),
            me: me.clone(),
            explain: Default::default(),
            flow_explain: Default::default(),
            held_until,
        });
        route.idle_span.set(route.tails_span());
        Ok(route)
    }

    /// The path this route crosses.
    pub(crate) fn path(&self) -> &Arc<Path> {
        &self.path
    }

    /// Whether the route crosses the links of `links` (it was made over
    /// that table): a route is used only with its own fabric's links.
    pub(crate) fn is_over(&self, links: &LinkTable) -> bool {
        self.hops.are_of(links)
    }

    /// Books `bytes` over the route from now ([`book_flow`](super::book_flow)),
    /// and what may push its landing later (ADR-0056).
    pub(crate) fn book(
        &self,
        links: &LinkTable,
        bytes: u64,
    ) -> Result<(TransferReport, Pushed), HwError> {
        let plan = PacketPlan::new(bytes, self.max_payload);
        self.hops.prefetch(Ahead::for_packets(plan.packets));
        let start = sim::now();
        let mut slowest = Slowest::default();
        let (end, pushed) = self.cross(links, &plan, (0, start), |hop, link, residency| {
            slowest.note(hop, link, residency)
        })?;
        Ok((slowest.report(start, end, &plan), pushed))
    }

    /// [`book`](Self::book), telling only when the last byte of a flow
    /// that leaves at `start` (now or later) lands: booked now, from its
    /// arrival at each hop (ADR-0048), by the general booking.
    pub(crate) fn book_flow(
        &self,
        links: &LinkTable,
        bytes: u64,
        start: SimTime,
    ) -> Result<(SimTime, Pushed), HwError> {
        let plan = PacketPlan::new(bytes, self.max_payload);
        self.hops.prefetch(Ahead::for_packets(plan.packets));
        self.cross(links, &plan, (0, start), |_, _, _| {})
    }

    /// When one packet of `bytes` (at most the route's payload: a copy
    /// booked whole, which its plan found to be one packet) leaving at
    /// `start` lands, booked now. It first crosses the hops that are idle
    /// from its arrival on in one plain pass
    /// ([`book_idle_hops`](Self::book_idle_hops)); from the first that is not, the
    /// general booking. Never pushed: a packet is served whole.
    #[inline(always)]
    pub(crate) fn book_packet(
        &self,
        links: &LinkTable,
        bytes: u64,
        start: SimTime,
    ) -> Result<SimTime, HwError> {
        debug_assert!(bytes <= self.max_payload.get());
        let mut from = (0, start);
        self.hops.prefetch(Ahead::Calendars);
        if !trace::is_recording() && !super::explain::recording() {
            self.remember_tails(bytes)?;
            match self.book_idle_hops(start)? {
                Crossed::Landed(lands) => {
                    self.defer_count();
                    return Ok(lands);
                }
                Crossed::Busy { hop, arrives } => {
                    self.count_hops(hop);
                    from = (hop, arrives);
                }
            }
        }
        let plan = PacketPlan::new(bytes, self.max_payload);
        Ok(self.cross(links, &plan, from, |_, _, _| {})?.0)
    }

    /// Counts a one-packet flow of `last` bytes that crossed every hop
    /// idle, to be added to the links' counters later (ADR-0069).
    #[inline(always)]
    fn defer_count(&self) {
        self.unflushed.set(self.unflushed.get() + 1);
        if !self.registered.replace(true) {
            defer_counts(self.me.clone());
        }
    }

    /// Counts a one-packet flow of `last` bytes booked idle on the first
    /// `hops` hops (the general booking counts the rest).
    #[inline(never)]
    fn count_hops(&self, hops: usize) {
        for (link, hop) in self.hops.iter().take(hops) {
            link.server().count(hop.tail.get(), self.last.get(), 1);
        }
    }

    /// Adds the one-packet flows counted on the route
    /// ([`defer_count`](Self::defer_count)) to its links' counters: what
    /// counting each at its booking adds up to.
    fn flush_hops(&self) {
        let flows = self.unflushed.replace(0);
        if flows == 0 {
            return;
        }
        let bytes = self.last.get().saturating_mul(flows);
        for (link, hop) in self.hops.iter() {
            let busy = SimDuration::from_ps(hop.tail.get().as_ps() * flows);
            link.server().count(busy, bytes, flows);
        }
    }

    /// A one-packet flow of `last` bytes (its tails remembered) leaving at
    /// `start`, over the hops idle from its arrival on: each booked from
    /// its arrival for `S_h` and left after `L_h`
    /// ([`SerialServer::try_reserve_idle`](super::SerialServer::try_reserve_idle)),
    /// what the general booking books and times there, up to the first
    /// hop that is not idle (nothing booked there). Nothing is counted:
    /// the caller counts the hops booked. While nothing is
    /// traced or explained (the caller checks); `now` does not change
    /// while the flow books. Every instant it adds up is at most
    /// `start + Σ (tail + L_h)`: when that fits in u64 picoseconds (all
    /// but never), the sums are plain; else each is checked, an overflow
    /// named as the general booking names it (ADR-0065).
    fn book_idle_hops(&self, start: SimTime) -> Result<Crossed, HwError> {
        debug_assert!(!trace::is_recording() && !super::explain::recording());
        let fits = |span| start.as_ps().checked_add(span).is_some();
        match self.idle_span.get().is_some_and(fits) {
            true => self.cross_idle(start, |at, d| {
                Some(SimTime::from_ps(at.as_ps() + d.as_ps()))
            }),
            false => self.cross_idle(start, |at, d| at.checked_add(d).ok()),
        }
    }

    /// [`book_idle_hops`](Self::book_idle_hops) with `add` for its sums (`None`:
    /// an overflow).
    #[inline(always)]
    fn cross_idle(
        &self,
        start: SimTime,
        add: impl Fn(SimTime, SimDuration) -> Option<SimTime>,
    ) -> Result<Crossed, HwError> {
        let now = sim::now();
        let mut arrives = start;
        let mut hops = self.hops.iter();
        // The hop's index is told by how many are left (no count kept).
        while let Some((link, times)) = hops.next() {
            let (server, tail) = (link.server(), times.tail.get());
            let end = match server.is_idle_from(arrives, now) {
                true => add(arrives, tail),
                false => None,
            };
            let Some(end) = end else {
                let hop = self.hops.len() - hops.len() - 1;
                return Ok(Crossed::Busy { hop, arrives });
            };
            server.book_idle((arrives, end), now);
            arrives = match add(end, times.latency) {
                Some(at) => at,
                None => later_for(end, times.latency, || link.name())?,
            };
        }
        Ok(Crossed::Landed(arrives))
    }

    /// Books a flow of `plan` over the route from hop `from.0` on, where
    /// it arrives at `from.1` (`on_hop` is told hop indices from there); a
    /// flow of several packets shares its hops with the others in service
    /// there (ADR-0056).
    fn cross<'a>(
        &'a self,
        links: &LinkTable,
        plan: &PacketPlan,
        (from, start): (usize, SimTime),
        on_hop: impl FnMut(usize, &'a Link, SimDuration),
    ) -> Result<(SimTime, Pushed), HwError> {
        debug_assert!(self.is_over(links));
        self.remember_tails(plan.last)?;
        let hops = self.hops.iter().skip(from).map(|(link, hop)| {
            let times = HopTimes {
                full: hop.full,
                tail: hop.tail.get(),
                latency: hop.latency,
                link: hop.link,
            };
            (link, times)
        });
        let shares = plan.packets > 1 && sim::now() >= self.held_until;
        let sharing = shares.then(|| Sharing {
            links,
            flow: SharedFlow::begin(self.hops.len()),
        });
        let memo = Some(&self.flow_explain);
        let end = cross_hops(hops, plan, start, on_hop, memo, sharing.as_ref())?;
        let pushed = match sharing {
            Some(sharing) => sharing.flow.finish(end),
            None => Pushed::default(),
        };
        Ok((end, pushed))
    }

    /// Makes the hops' tails `S_h(last)` (mostly they are already).
    #[inline(always)]
    fn remember_tails(&self, last: u64) -> Result<(), HwError> {
        if self.last.get() == last {
            return Ok(());
        }
        self.recompute_tails(last)
    }

    /// [`remember_tails`](Self::remember_tails) for a new size.
    #[inline(never)]
    fn recompute_tails(&self, last: u64) -> Result<(), HwError> {
        // The flows counted on the route are of the old size.
        self.flush_hops();
        // Unknown while the tails change (and if an occupancy fails).
        self.idle_span.set(None);
        for (link, hop) in self.hops.iter() {
            hop.tail.set(match last {
                0 => link.occupancy(0)?,
                _ if last == self.max_payload.get() => hop.full,
                _ => link.occupancy(last)?,
            });
        }
        self.last.set(last);
        self.idle_span.set(self.tails_span());
        Ok(())
    }

    /// `Σ (tail + L_h)` over the hops, `None` past u64 picoseconds.
    fn tails_span(&self) -> Option<u64> {
        self.hops.iter().try_fold(0u64, |sum, (_, hop)| {
            sum.checked_add(hop.tail.get().as_ps())?
                .checked_add(hop.latency.as_ps())
        })
    }

    /// When an IPCQ doorbell or credit sent at `start` lands (ADR-0048):
    /// its uncontended crossing, no hop read. While `--explain` records,
    /// each hop's service and latency are its terms.
    pub(crate) fn signal_lands(&self, start: SimTime) -> Result<SimTime, HwError> {
        if super::explain::recording() {
            // The uncontended header crossing's terms, as one run (ADR-0046).
            self.explain_header(None);
        }
        self.signal_crossing(start)
    }

    /// [`signal_lands`](Self::signal_lands) with nothing pushed for
    /// `--explain`.
    pub(crate) fn signal_crossing(&self, start: SimTime) -> Result<SimTime, HwError> {
        later_for(start, self.signal, || "an IPCQ doorbell or credit")
    }

    /// When a header-only packet sent at `start` lands (ADR-0022): at each
    /// hop, half a full packet's occupancy if the link is booked beyond
    /// the header's arrival, then its occupancy and latency. While
    /// `--explain` records, its terms are pushed for the running poll's
    /// sleep.
    pub(crate) fn header_lands(
        &self,
        links: &LinkTable,
        start: SimTime,
    ) -> Result<SimTime, HwError> {
        debug_assert!(self.is_over(links));
        match super::explain::recording() {
            false => self.cross_header(start, |_, _, _| {}),
            true => self.header_crossing_explained(start, ExplainHeader::Terms),
        }
    }

    /// [`header_lands`](Self::header_lands) of a flow-mode credit, which
    /// no sleep of the poll that sends it covers (ADR-0051): while
    /// `--explain` records, its queueing is only counted on the hops'
    /// utilisation.
    pub(crate) fn credit_header_lands(
        &self,
        links: &LinkTable,
        start: SimTime,
    ) -> Result<SimTime, HwError> {
        debug_assert!(self.is_over(links));
        match super::explain::recording() {
            false => self.cross_header(start, |_, _, _| {}),
            true => self.header_crossing_explained(start, ExplainHeader::QueueingOnly),
        }
    }

    /// A header's crossing while `--explain` records (out of line:
    /// seldom), its terms pushed or its queueing counted as `explain`
    /// says.
    #[inline(never)]
    fn header_crossing_explained(
        &self,
        start: SimTime,
        explain: ExplainHeader,
    ) -> Result<SimTime, HwError> {
        // The hops where the header waited, if any.
        let mut waited: Option<Vec<bool>> = None;
        let t = self.cross_header(start, |index, link, hop| match explain {
            ExplainHeader::Terms => {
                waited.get_or_insert_with(|| vec![false; self.hops.len()])[index] = true
            }
            ExplainHeader::QueueingOnly => {
                super::explain::count_queue(link.server(), hop.half_full().as_ps())
            }
        })?;
        if explain == ExplainHeader::Terms {
            self.explain_header(waited.as_deref());
        }
        Ok(t)
    }

    /// A header's crossing from `start` (ADR-0022): at each hop, half a
    /// full packet's occupancy if the link is booked beyond the header's
    /// arrival (told to `waited`), then its occupancy and latency.
    #[inline(always)]
    fn cross_header(
        &self,
        start: SimTime,
        mut waited: impl FnMut(usize, &Link, &FlowHop),
    ) -> Result<SimTime, HwError> {
        let mut t = start;
        for (index, (link, hop)) in self.hops.iter().enumerate() {
            if t < link.free_at() {
                t = later_for(t, hop.half_full(), || link.name())?;
                waited(index, link, hop);
            }
            t = later_for(t, hop.header_crossing, || link.name())?;
        }
        Ok(t)
    }

    /// Pushes a header's crossing for `--explain`: at each hop, half a
    /// full packet's queueing where it `waited`, its service and latency.
    /// Uncontended (`None`) it is a constant of the route, pushed as one
    /// run (ADR-0046).
    fn explain_header(&self, waited: Option<&[bool]>) {
        use super::explain::{Term, TermKind, component, push_run, push_terms};
        let terms = |waited: Option<&[bool]>| {
            let mut terms = Vec::with_capacity(3 * self.hops.len());
            for (index, (link, hop)) in self.hops.iter().enumerate() {
                let Some(id) = component(link.server()) else {
                    continue;
                };
                let term = |kind, ps| Term {
                    component: id,
                    kind,
                    ps,
                };
                if waited.is_some_and(|w| w[index]) {
                    terms.push(term(TermKind::Queue, hop.half_full().as_ps()));
                }
                let service = hop.header_crossing.as_ps() - hop.latency.as_ps();
                terms.push(term(TermKind::Service, service));
                terms.push(term(TermKind::Latency, hop.latency.as_ps()));
            }
            terms
        };
        match waited {
            None => push_run(&self.explain, || terms(None)),
            Some(_) => push_terms(terms(waited)),
        }
    }
}

impl DeferredCounts for FlowRoute {
    fn flush(&self) {
        self.registered.set(false);
        self.flush_hops();
    }
}

impl Drop for FlowRoute {
    /// Its links outlive it (a route holds them, not the reverse): the
    /// flows it counted are added to them.
    fn drop(&mut self) {
        self.flush_hops();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Fabric;
    use crate::sim::Simulation;
    use crate::topology::TopologySpec;

    /// A fabric and routes over it.
    type Routed = (Rc<Fabric>, Vec<Rc<FlowRoute>>);

    /// A PE of SIP 0: (cube, PE).
    type Pe = (u32, u32);

    /// Twin flow-mode fabrics of the default machine and the routes of
    /// `pairs` (PE coordinates) on each.
    fn twins(pairs: &[(Pe, Pe)]) -> [Routed; 2] {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[])
            .unwrap()
            .with_fidelity(crate::topology::Fidelity::Flow);
        [(); 2].map(|()| {
            let fabric = Rc::new(Fabric::from_spec(&spec).unwrap());
            let pe = |(cube, pe)| fabric.machine().pe(0, cube, pe).unwrap();
            let routes = pairs
                .iter()
                .map(|&(from, to)| {
                    let path = fabric.router().find_path(pe(from), pe(to)).unwrap();
                    FlowRoute::new(path, fabric.links()).unwrap()
                })
                .collect();
            (fabric, routes)
        })
    }

    /// ADR-0051: while `--explain` records, an uncontended flow's terms
    /// are its closed form's (sum: `send_formula`), the same label at
    /// every crossing of its size (one run per route); another size, and
    /// a flow that queued, are labelled term by term and still sum to
    /// their time.
    #[test]
    fn an_uncontended_flow_is_one_label_per_route_and_size_and_sums_to_its_time() {
        use crate::hw::explain;
        let [(fabric, routes), _] = twins(&[((0, 0), (5, 0))]);
        let route = routes[0].clone();
        let mut simulation = Simulation::new();
        simulation.record_causes();
        explain::install();
        let f = fabric.clone();
        // (wait before in ps, bytes, whether a long flow is booked first)
        let flows = [
            (0, 16, false),
            (1_000_000_000, 16, false),
            (1_000_000_000, 4096, false),
            (1_000_000_000, 4096, false),
            (1_000_000_000, 16, true),
            (1_000_000_000, 16, false),
        ];
        let run = simulation.spawn("flows", async move {
            let mut took = Vec::new();
            for (wait, bytes, contended) in flows {
                sim::sleep(SimDuration::from_ps(wait)).await;
                if contended {
                    route.book_flow(f.links(), 64 << 10, sim::now()).unwrap();
                    explain::discard();
                }
                let start = sim::now();
                let (lands, _) = route.book_flow(f.links(), bytes, sim::now()).unwrap();
                explain::sleep_until(lands).await;
                took.push(lands.saturating_since(start).as_ps());
            }
            took
        });
        simulation.run().unwrap();
        let took = run.output().unwrap();
        let kept = explain::finish().unwrap();
        let log = simulation.causal_log().unwrap();
        let labelled: Vec<u32> = log.sleeps.iter().map(|s| s.label).collect();
        let labelled: Vec<u32> = labelled
            .into_iter()
            .filter(|&l| l != crate::sim::causal::NO_LABEL)
            .collect();
        assert_eq!(labelled.len(), flows.len());
        let path = fabric.router().find_path(
            fabric.machine().pe(0, 0, 0).unwrap(),
            fabric.machine().pe(0, 5, 0).unwrap(),
        );
        let formula = |bytes| {
            fabric
                .send_formula(&path.clone().unwrap(), bytes)
                .unwrap()
                .as_ps()
        };
        for (i, (&label, (_, bytes, contended))) in labelled.iter().zip(flows).enumerate() {
            let terms = kept.label(label);
            assert_eq!(terms.iter().map(|t| t.ps).sum::<u64>(), took[i], "flow {i}");
            let queued = terms.iter().any(|t| t.kind == explain::TermKind::Queue);
            assert_eq!(queued, contended, "flow {i}: {terms:?}");
            if !contended {
                assert_eq!(took[i], formula(bytes), "flow {i}");
            }
        }
        let [a, b, c, d, e, f] = labelled[..] else {
            unreachable!()
        };
        assert!(a == b && b == f, "one size, uncontended: one label");
        assert!(c == d && c != a, "another size: its own label, also shared");
        assert!(e != a);
    }

    /// A one-packet flow by [`FlowRoute::book_packet`], any other by the
    /// general [`FlowRoute::book_flow`].
    fn one_packet_or_general(route: &FlowRoute, links: &LinkTable, bytes: u64) -> SimTime {
        match bytes <= route.max_payload.get() {
            true => route.book_packet(links, bytes, sim::now()).unwrap(),
            false => route.book_flow(links, bytes, sim::now()).unwrap().0,
        }
    }

    /// `book_packet` gives every one-packet flow the time `book` gives it
    /// and leaves every
    /// link's statistics the same after each flow (the counts a route
    /// keeps added when they are read, ADR-0069), one-packet flows
    /// (carried as one instant while their hops are idle, then in
    /// general) mixed with long ones on routes that share links.
    #[test]
    fn packet_lands_times_and_books_as_the_general_booking() {
        let pairs = [((0, 0), (5, 0)), ((1, 0), (5, 0)), ((4, 1), (6, 0))];
        // (wait before, route, bytes): one-packet flows onto idle links,
        // onto links a long flow holds, and into the gaps it leaves.
        let flows = [
            (0, 0, 16),
            (0, 1, 64 << 10),
            (0, 0, 16),
            (1_000, 2, 256),
            (0, 0, 0),
            (20_000, 1, 16),
            (0, 2, 32 << 10),
            (5_000_000, 0, 4096),
            (0, 1, 16),
        ];
        let [(fabric_a, routes_a), (fabric_b, routes_b)] = twins(&pairs);
        let mut simulation = Simulation::new();
        let (fa, fb) = (fabric_a.clone(), fabric_b.clone());
        let run = simulation.spawn("flows", async move {
            let mut times = Vec::new();
            for (wait, route, bytes) in flows {
                sim::sleep(SimDuration::from_ps(wait)).await;
                let fast = one_packet_or_general(&routes_a[route], fa.links(), bytes);
                let general = routes_b[route].book(fb.links(), bytes).unwrap().0.end;
                times.push((fast, general));
                // The counts kept on a route are added before any read.
                for (a, b) in fa.links().all().zip(fb.links().all()) {
                    assert_eq!(a.stats(sim::now()), b.stats(sim::now()), "{}", a.name());
                }
            }
            times
        });
        simulation.run().unwrap();
        for (i, (fast, general)) in run.output().unwrap().into_iter().enumerate() {
            assert_eq!(fast, general, "flow {i}");
        }
        let end = SimTime::from_ps(u64::MAX / 2);
        for (a, b) in fabric_a.links().all().zip(fabric_b.links().all()) {
            assert_eq!(a.stats(end), b.stats(end), "{}", a.name());
            assert_eq!(a.free_at(), b.free_at(), "{}", a.name());
        }
    }

    /// ADR-0069: the one-packet flows a route counts on itself reach its
    /// links' counters when the route books another size, and when it is
    /// dropped unread, as each booking's own count would.
    #[test]
    fn a_routes_kept_counts_reach_its_links_on_a_new_size_and_when_dropped() {
        let [(fabric_a, routes_a), (fabric_b, routes_b)] = twins(&[((0, 0), (5, 0))]);
        let mut simulation = Simulation::new();
        let (fa, fb) = (fabric_a.clone(), fabric_b.clone());
        let [route_a, route_b] = [&routes_a, &routes_b].map(|r| r[0].clone());
        drop((routes_a, routes_b));
        simulation.spawn("flows", async move {
            for bytes in [16, 16, 64, 64, 64, 16] {
                // Long enough for the flow before to have landed: every
                // hop idle.
                sim::sleep(SimDuration::from_us(10)).await;
                route_a.book_packet(fa.links(), bytes, sim::now()).unwrap();
                route_b.book(fb.links(), bytes).unwrap();
            }
            // Dropped with flows of 16 bytes counted, never read.
            assert!(route_a.unflushed.get() > 0);
        });
        simulation.run().unwrap();
        drop(simulation);
        let end = SimTime::from_ps(u64::MAX / 2);
        let jobs = |f: &Fabric| f.links().all().map(|l| l.stats(end).jobs).sum::<u64>();
        assert!(jobs(&fabric_a) > 0);
        for (a, b) in fabric_a.links().all().zip(fabric_b.links().all()) {
            assert_eq!(a.stats(end), b.stats(end), "{}", a.name());
        }
    }
}
