//! Multi-packet flows that overlap on a hop, served as packet mode serves
//! their packets (ADR-0056).
//!
//! Flow mode books a flow's whole occupancy on each hop first come, first
//! served (ADR-0012 D3/D4): of two flows arriving at a hop together, the
//! one booked first ends a whole occupancy before the other. Packet mode
//! serves *packets* first come, first served, so the two interleave and
//! end together. Here each hop keeps the multi-packet flows still in
//! service on it (the link keeps them: [`HopFlows`]), each with its arrival profile there (first and last packet,
//! fluid in between: at the source, a flow's packets arrive at the first
//! hop's own pace, as packet mode injects them) and its work. A flow
//! booking a hop where others are still in service works out, as a fluid
//! FIFO queue over their arrival profiles, when each one's last packet
//! leaves: every earlier flow whose last packet now leaves later is
//! *pushed* (its end at that hop and, hop by hop, at its later hops: a flow
//! that reaches its next hop at a reduced rate is not delayed again
//! there), and the booking flow takes the earlier of its FIFO booking's
//! ends and the fluid one. The calendars (`free_at`, idle gaps, busy time)
//! do not change: only who ends when.
//!
//! A pushed flow's landing moves; its waiter ([`Pushed::settle`]) wakes at
//! the landing it was told, finds it moved and sleeps again. A flow can be
//! pushed only by a flow that arrives at a hop before its end there, so a
//! landing reached is final. Uncontended no flow is in service on a hop
//! when another books it: nothing moves, and flow mode stays exact.
//! One-packet flows take none of this (ADR-0012 D5, ADR-0048).
//!
//! Knows links by index and instants; nothing of what the flows carry.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::explain;
use crate::sim::{SimDuration, SimTime};

/// How many of the flows in service on a hop a booking shares it with
/// (the latest booked): a put of hundreds of pieces issued at once must
/// not cost the square of their number at every hop.
const WINDOW: usize = 8;

/// One multi-packet flow as served: its hops and how much later than
/// booked it lands.
pub(crate) struct SharedFlow {
    /// The landing its booking gave (the last packet at the destination).
    landing: Cell<u64>,
    /// How much later than `landing` it lands now (pushes), in ps.
    shift: Cell<u64>,
    /// `--explain`: the component of the hop that pushed it first.
    pushed_at: Cell<Option<u32>>,
    hops: RefCell<Vec<HopShare>>,
}

/// A flow on one hop: its arrival profile, work and service, in ps.
#[derive(Debug, Clone, Copy, Default)]
struct HopShare {
    /// The link it arrives from (`u32::MAX`: its source), and this one.
    from: u32,
    link: u32,
    /// Its first packet has arrived.
    first: u64,
    /// Its last packet has arrived (fluid arrivals from `first`).
    last: u64,
    /// Its occupancy of the hop in all, and its last packet's.
    work: u64,
    tail: u64,
    latency: u64,
    /// Its first packet is served.
    start: u64,
    /// Its last packet leaves.
    end: u64,
}

impl HopShare {
    /// Its work arrived by `t` (linear from `first` to `last`).
    fn arrived_by(&self, t: u64) -> u64 {
        if t <= self.first {
            0
        } else if t >= self.last {
            self.work
        } else {
            // The same quotient in 64 bits when the product fits (a
            // 128-bit division is a library call).
            let (elapsed, span) = (t - self.first, self.last - self.first);
            match self.work.checked_mul(elapsed) {
                Some(product) => product / span,
                None => (u128::from(self.work) * u128::from(elapsed) / u128::from(span)) as u64,
            }
        }
    }
}

/// A flow in service on a hop: the flow, the hop's index in its path
/// and when its last packet leaves there (kept here, so that a booking
/// reads only the list until it finds the flows it shares the hop with).
struct Entry {
    flow: Rc<SharedFlow>,
    hop: u32,
    end: u64,
}

/// The multi-packet flows still in service on one link: a field of the
/// link itself (filling its second cache line), so that a booking finds
/// the list without a lookup, and its entries without a box between
/// (ADR-0068: at 256 SIPs each was a miss a hop); allocated when the link
/// first carries a multi-packet flow.
#[derive(Default)]
pub(crate) struct HopFlows(Cell<Vec<Entry>>);

impl HopFlows {
    /// Runs `f` on the list (the allocation is kept for the next flow).
    fn with<R>(&self, f: impl FnOnce(&mut Vec<Entry>) -> R) -> R {
        let mut list = self.0.take();
        let out = f(&mut list);
        self.0.set(list);
        out
    }

    /// Asks for the list's first entries ahead of a booking here: reading
    /// where they are is the link's line, asking for them a hint, so the
    /// misses of a route's hops overlap (ADR-0068).
    #[inline(always)]
    pub(crate) fn prefetch(&self) {
        let list = self.0.take();
        if list.capacity() > 0 {
            crate::sim::prefetch(list.as_ptr());
        }
        self.0.set(list);
    }
}

/// A flow's landing that flows booked after it may move ([`Pushed::settle`]).
/// Empty for a flow that nothing can push (one packet, a header).
#[derive(Default)]
pub struct Pushed(Option<Rc<SharedFlow>>);

impl Pushed {
    /// How much later than booked the flow lands, as known now.
    pub fn shift(&self) -> SimDuration {
        SimDuration::from_ps(self.0.as_ref().map_or(0, |f| f.shift.get()))
    }

    /// Called at `due` (the instant the caller slept until for the
    /// booked landing and what follows it): sleeps again while the
    /// flow's landing has moved, and returns how much later it landed.
    pub async fn settle(&self, due: SimTime) -> SimDuration {
        let Some(flow) = &self.0 else {
            return SimDuration::ZERO;
        };
        let mut slept = 0;
        loop {
            let shift = flow.shift.get();
            if shift <= slept {
                return SimDuration::from_ps(slept);
            }
            if let Some(component) = flow.pushed_at.get() {
                explain::push(component, explain::TermKind::Queue, shift - slept);
            }
            slept = shift;
            explain::sleep_until(due + SimDuration::from_ps(slept)).await;
        }
    }
}

/// What [`SharedFlow::share`] is told of a flow's hop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HopIn {
    /// The hop's index in the flow's path and its link's index.
    pub hop: usize,
    pub link: u32,
    /// When its first and last packets arrive.
    pub first: SimTime,
    pub last: SimTime,
    /// Its occupancy in all and its last packet's.
    pub work: SimDuration,
    pub tail: SimDuration,
    pub latency: SimDuration,
    /// Its FIFO booking: first packet served, last packet leaves.
    pub start: SimTime,
    pub end: SimTime,
}

/// What sharing makes of a hop: when the flow's first packet is served
/// and its last leaves (each at most what its booking gave).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HopOut {
    pub start: SimTime,
    pub end: SimTime,
}

impl SharedFlow {
    /// A new multi-packet flow of `hops` hops, not yet on any.
    pub(crate) fn begin(hops: usize) -> Rc<SharedFlow> {
        Rc::new(SharedFlow {
            landing: Cell::new(0),
            shift: Cell::new(0),
            pushed_at: Cell::new(None),
            hops: RefCell::new(Vec::with_capacity(hops)),
        })
    }

    /// `flow` books hop `hop` at `now`: pushes the flows still in service
    /// there (module docs) and tells when its own first packet is served
    /// and its last leaves. `component` names a link for `--explain`.
    /// `here` is the hop's link's list; `lists` finds another link's by
    /// its index (the pushed flows' later hops).
    pub(crate) fn share<'l>(
        self: &Rc<Self>,
        (hop, here): (HopIn, &HopFlows),
        lists: impl Fn(u32) -> &'l HopFlows,
        now: SimTime,
        component: impl Fn(u32) -> Option<u32>,
    ) -> HopOut {
        let flow = self;
        let ps = |t: SimTime| t.as_ps();
        let from = match hop.hop {
            0 => u32::MAX,
            _ => flow.hops.borrow().last().map_or(u32::MAX, |h| h.link),
        };
        let mut me = HopShare {
            from,
            link: hop.link,
            first: ps(hop.first),
            last: ps(hop.last),
            work: hop.work.as_ps(),
            tail: hop.tail.as_ps(),
            latency: hop.latency.as_ps(),
            start: ps(hop.start),
            end: ps(hop.end),
        };
        if hop.hop == 0 {
            // At the source the packets are injected one at a time, each
            // when the one before has left the first hop (module docs).
            me.last = me.last.max(me.first + me.work.saturating_sub(me.tail));
        }
        let moved = here.with(|list| flow.share_list(list, hop, &mut me, now, component));
        // The pushed flows' later hops: their entries there end later too.
        // A flow booked those hops about when it booked this one, so its
        // entries are searched for from the latest booked back.
        for later in moved {
            lists(later.link).with(|entries| {
                let entry = entries.iter_mut().rev().find(|e| later.is(e));
                if let Some(entry) = entry {
                    entry.end = later.end;
                }
            });
        }
        HopOut {
            start: SimTime::from_ps(me.start),
            end: SimTime::from_ps(me.end),
        }
    }

    /// [`share`](Self::share) on the hop's `list`: pushes the flows in
    /// service, settles `me` and joins the list; tells the pushed flows'
    /// later hops whose end moved.
    fn share_list(
        self: &Rc<Self>,
        list: &mut Vec<Entry>,
        hop: HopIn,
        me: &mut HopShare,
        now: SimTime,
        component: impl Fn(u32) -> Option<u32>,
    ) -> Vec<MovedEnd> {
        let flow = self;
        list.retain(|entry| entry.end > now.as_ps());
        // The latest booked of them, at most `WINDOW` (`WINDOW`'s docs),
        // oldest first, the booking flow last.
        let mut picked = [0usize; WINDOW];
        let mut n = 0;
        for (i, entry) in list.iter().enumerate().rev() {
            if entry.end > me.first {
                picked[n] = i;
                n += 1;
                if n == WINDOW {
                    break;
                }
            }
        }
        picked[..n].reverse();
        let mut moved = Vec::new();
        if n > 0 {
            let mut all = [HopShare::default(); WINDOW + 1];
            for (slot, &i) in all.iter_mut().zip(&picked[..n]) {
                *slot = list[i].flow.hops.borrow()[list[i].hop as usize];
            }
            all[n] = *me;
            let all = &all[..=n];
            let fifo = Fluid::new(all);
            // The hop serves the set's work by the latest end booked: the
            // flow whose last packet arrives last leaves then (FIFO).
            let busy_until = all.iter().map(|f| f.end).max().unwrap_or(me.end);
            let latest = all
                .iter()
                .enumerate()
                .max_by_key(|&(i, f)| (f.last, i))
                .map_or(n, |(i, _)| i);
            for (k, (&i, other)) in picked[..n].iter().zip(all).enumerate() {
                let mut end = fifo
                    .departs(other.last, other.from)
                    .max(other.last + other.tail);
                if k == latest {
                    end = end.max(busy_until);
                }
                if end > other.end {
                    let entry = &mut list[i];
                    entry.end = end;
                    let at = entry.hop as usize;
                    entry.flow.push(at, end, || component(hop.link), &mut moved);
                }
            }
            let start = fifo.departs(me.first, me.from);
            let mut end = fifo.departs(me.last, me.from).max(me.last + me.tail);
            if latest == n {
                end = end.max(busy_until);
            }
            me.start = me.start.min(start.max(me.first));
            me.end = me.end.min(end).max(me.start + me.tail);
        }
        let at = flow.hops.borrow().len() as u32;
        flow.hops.borrow_mut().push(*me);
        list.push(Entry {
            flow: flow.clone(),
            hop: at,
            end: me.end,
        });
        moved
    }

    /// Its booking is done: it lands at `landing`.
    pub(crate) fn finish(self: Rc<Self>, landing: SimTime) -> Pushed {
        self.landing.set(landing.as_ps());
        Pushed(Some(self))
    }

    /// Its last packet leaves hop `at` at `end` now (later than it did):
    /// carried to its later hops, and to its landing.
    /// Tells `moved` each later hop whose end moved.
    fn push(
        &self,
        at: usize,
        end: u64,
        component: impl FnOnce() -> Option<u32>,
        moved: &mut Vec<MovedEnd>,
    ) {
        if self.pushed_at.get().is_none() && explain::recording() {
            self.pushed_at.set(component());
        }
        let mut hops = self.hops.borrow_mut();
        hops[at].end = end;
        let mut prev = hops[at];
        for (hop, next) in hops.iter_mut().enumerate().skip(at + 1) {
            let arrives = prev.end + prev.latency;
            if arrives <= next.last {
                return;
            }
            next.last = arrives;
            let end = next.end.max(arrives + next.tail);
            if end == next.end {
                return;
            }
            next.end = end;
            moved.push(MovedEnd {
                link: next.link,
                flow: self,
                hop: hop as u32,
                end,
            });
            prev = *next;
        }
        let landing = prev.end + prev.latency;
        let shift = landing.saturating_sub(self.landing.get());
        self.shift.set(self.shift.get().max(shift));
    }
}

/// A pushed flow's later hop whose end moved: the hop's link, the flow
/// and the hop's index in its path (its entry in the link's list), and
/// the new end.
struct MovedEnd {
    link: u32,
    flow: *const SharedFlow,
    hop: u32,
    end: u64,
}

impl MovedEnd {
    /// `entry` is this hop's entry.
    fn is(&self, entry: &Entry) -> bool {
        entry.hop == self.hop && Rc::as_ptr(&entry.flow) == self.flow
    }
}

/// A FIFO fluid queue over flows' arrival profiles: when the work that
/// arrived by an instant has been served.
struct Fluid<'a> {
    flows: &'a [HopShare],
    /// The earliest service start among them: from then on the hop is
    /// taken to serve their work.
    from: u64,
    /// The work arrived by each flow's first arrival.
    by_first: [u64; WINDOW + 1],
}

impl<'a> Fluid<'a> {
    fn new(flows: &'a [HopShare]) -> Self {
        let from = flows.iter().map(|f| f.start).min().unwrap_or(0);
        let mut fluid = Fluid {
            flows,
            from,
            by_first: [0; WINDOW + 1],
        };
        for (by, flow) in fluid.by_first.iter_mut().zip(flows) {
            *by = flows.iter().map(|f| f.arrived_by(flow.first)).sum();
        }
        fluid
    }

    fn arrived(&self, t: u64) -> u64 {
        self.flows.iter().map(|f| f.arrived_by(t)).sum()
    }

    /// When the work arrived by `t` has been served: the latest of `t`,
    /// `from` plus all of it, and each later first arrival `a` plus the
    /// work arrived in `(a, t]` (the queue's busy periods start there).
    fn departs(&self, t: u64, via: u32) -> u64 {
        let by_t = self.arrived(t);
        let mut departs = t.max(self.from + by_t);
        for (flow, &by_a) in self.flows.iter().zip(&self.by_first) {
            let a = flow.first;
            if a > self.from && a <= t && (flow.from != via || via == u32::MAX) {
                departs = departs.max(a + by_t - by_a);
            }
        }
        departs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ps: u64) -> SimTime {
        SimTime::from_ps(ps)
    }

    fn d(ps: u64) -> SimDuration {
        SimDuration::from_ps(ps)
    }

    /// The lists of links 0 to 7, as a fabric's links hold them.
    struct Lists([HopFlows; 8]);

    impl Lists {
        fn new() -> Self {
            Lists(Default::default())
        }

        fn share(&self, flow: &Rc<SharedFlow>, hop: HopIn, now: SimTime) -> HopOut {
            let here = &self.0[hop.link as usize];
            flow.share((hop, here), |link| &self.0[link as usize], now, |_| None)
        }
    }

    /// A hop `hop` of link `link` (not a source hop, so arrivals are as
    /// given): packets arriving over `[first, last]`, `work` ps in all
    /// (the last packet `tail`), booked `[start, end)`, latency 10 ps.
    fn hop(link: u32, hop: usize, (first, last): (u64, u64), (start, end): (u64, u64)) -> HopIn {
        HopIn {
            hop,
            link,
            first: t(first),
            last: t(last),
            work: d(1_000),
            tail: d(100),
            latency: d(10),
            start: t(start),
            end: t(end),
        }
    }

    /// Two flows of 1,000 ps of work whose packets arrive at one hop
    /// over the same span `[0, 900]`: packet by packet FIFO they
    /// alternate and both leave when the hop has served both, at 2,000.
    /// FIFO booking ended the first at 1,000: it is pushed by 1,000 and
    /// lands that much later; the second keeps its end.
    #[test]
    fn two_flows_arriving_together_end_together() {
        let lists = Lists::new();
        let first = SharedFlow::begin(1);
        let out = lists.share(&first, hop(7, 1, (0, 900), (0, 1_000)), t(0));
        assert_eq!(
            out,
            HopOut {
                start: t(0),
                end: t(1_000)
            },
            "alone: as booked"
        );
        let first = first.finish(t(1_010));
        let second = SharedFlow::begin(1);
        let out = lists.share(&second, hop(7, 1, (0, 900), (1_000, 2_000)), t(0));
        // Its first packet is served once the work that arrived before
        // it has been (none): at 0, not after the whole first flow.
        assert_eq!(
            out,
            HopOut {
                start: t(0),
                end: t(2_000)
            }
        );
        assert_eq!(first.shift(), d(1_000));
        assert_eq!(second.finish(t(2_010)).shift(), d(0));
    }

    /// A flow that arrives once the other has left shares nothing, and
    /// a flow pushed at one hop is pushed at the next only as far as its
    /// last packet now arrives there later: a hop with room absorbs it.
    #[test]
    fn a_push_carries_to_later_hops_until_one_absorbs_it() {
        let lists = Lists::new();
        let early = SharedFlow::begin(3);
        lists.share(&early, hop(1, 1, (0, 900), (0, 1_000)), t(0));
        // Hop 2 (a slower link): ends at 3,000, later than its last packet
        // (1,010) plus its tail needs; hop 3 after it.
        lists.share(&early, hop(2, 2, (10, 1_010), (10, 3_000)), t(0));
        lists.share(&early, hop(3, 3, (20, 3_010), (20, 3_110)), t(0));
        let early = early.finish(t(3_120));
        let late = SharedFlow::begin(1);
        lists.share(&late, hop(1, 1, (0, 900), (1_000, 2_000)), t(0));
        // Pushed to 2,000 on link 1: its last packet reaches link 2 at
        // 2,010, which still ends at 3,000 (2,010 + 100 is earlier):
        // absorbed, the landing does not move.
        assert_eq!(early.shift(), d(0));
        let again = SharedFlow::begin(1);
        // Arriving after every flow there has left: nothing shared.
        let out = lists.share(&again, hop(1, 1, (5_000, 5_900), (5_000, 6_000)), t(4_000));
        assert_eq!(
            out,
            HopOut {
                start: t(5_000),
                end: t(6_000)
            }
        );
    }
}
