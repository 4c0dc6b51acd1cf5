//! [`FlowRoute`]: a path as flow mode crosses it, its per-hop constants
//! laid out beside the link indices.
//!
//! A flow-mode transfer or header reads, at every hop, the hop's occupancy
//! for a full packet, its header occupancy and its latency, and the link's
//! calendar. The constants depend only on the path, so they are computed
//! once per path and kept here, contiguous: crossing a hop then touches the
//! route (read in order) and one cache line of the link, its calendar. On
//! a machine of thousands of links, how many lines a hop touches is what a
//! message costs (docs/performance.md, session 11).
//!
//! Knows links and their parameters; nothing of what moves over them.

use std::cell::RefCell;
use std::num::NonZeroU64;
use std::sync::Arc;

use super::transit::{HopTimes, Slowest, cross_hops};
use super::{HwError, Link, PacketPlan, TransferReport, later_for};
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::Path;

/// One hop of a [`FlowRoute`].
#[derive(Debug, Clone, Copy)]
struct FlowHop {
    /// Index of the link in the fabric's table.
    link: usize,
    /// `S_h(P)` for the path's maximum payload `P`.
    full: SimDuration,
    /// `S_h(0)`: a header-only packet's occupancy.
    header: SimDuration,
    /// `S_h(P) / 2` (rounded down): what a header waits at a busy hop
    /// (ADR-0022).
    half_full: SimDuration,
    /// `L_h`.
    latency: SimDuration,
}

/// A path's links and their flow-mode constants; see the module docs.
pub(crate) struct FlowRoute {
    /// The path, held so that its address (the fabric's key for this
    /// route) is not reused while the route exists.
    path: Arc<Path>,
    max_payload: NonZeroU64,
    hops: Box<[FlowHop]>,
    /// The last-packet payload asked for last, and `S_h` of it per hop (a
    /// route mostly carries one message size).
    tails: RefCell<(u64, Box<[SimDuration]>)>,
}

impl FlowRoute {
    /// The route of `path` over `links` (the fabric's table, indexed by
    /// edge). Errors: an occupancy that overflows, naming the link.
    pub(crate) fn new(path: Arc<Path>, links: &[Link]) -> Result<Self, HwError> {
        let max_payload = NonZeroU64::new(path.max_payload()).unwrap_or(NonZeroU64::MIN);
        let hops = path
            .edges()
            .iter()
            .map(|edge| {
                let link = &links[edge.index()];
                let full = link.full_occupancy(max_payload.get())?;
                Ok(FlowHop {
                    link: edge.index(),
                    full,
                    half_full: SimDuration::from_ps(full.as_ps() / 2),
                    header: link.occupancy(0)?,
                    latency: link.params().latency,
                })
            })
            .collect::<Result<Box<[_]>, HwError>>()?;
        let tails = hops.iter().map(|hop| hop.full).collect();
        Ok(FlowRoute {
            path,
            max_payload,
            hops,
            tails: RefCell::new((max_payload.get(), tails)),
        })
    }

    /// The path this route crosses.
    pub(crate) fn path(&self) -> &Arc<Path> {
        &self.path
    }

    /// Books `bytes` over the route from now ([`book_flow`](super::book_flow)).
    pub(crate) fn book(&self, links: &[Link], bytes: u64) -> Result<TransferReport, HwError> {
        let plan = PacketPlan::new(bytes, self.max_payload);
        let start = sim::now();
        let mut slowest = Slowest::default();
        let end = self.cross(links, &plan, start, |hop, link, residency| {
            slowest.note(hop, link, residency)
        })?;
        Ok(slowest.report(start, end, &plan))
    }

    /// [`book`](Self::book), telling only when the last byte lands.
    pub(crate) fn lands(&self, links: &[Link], bytes: u64) -> Result<SimTime, HwError> {
        let plan = PacketPlan::new(bytes, self.max_payload);
        self.cross(links, &plan, sim::now(), |_, _, _| {})
    }

    fn cross<'a>(
        &self,
        links: &'a [Link],
        plan: &PacketPlan,
        start: SimTime,
        on_hop: impl FnMut(usize, &'a Link, SimDuration),
    ) -> Result<SimTime, HwError> {
        self.remember_tails(links, plan.last)?;
        let tails = self.tails.borrow();
        let hops = self.hops.iter().zip(tails.1.iter()).map(|(hop, &tail)| {
            let times = HopTimes {
                full: hop.full,
                tail,
                latency: hop.latency,
            };
            (&links[hop.link], times)
        });
        cross_hops(hops, plan, start, on_hop)
    }

    /// Makes `tails` hold `S_h(last)` per hop.
    fn remember_tails(&self, links: &[Link], last: u64) -> Result<(), HwError> {
        let mut tails = self.tails.borrow_mut();
        if tails.0 == last {
            return Ok(());
        }
        for (tail, hop) in tails.1.iter_mut().zip(&self.hops) {
            *tail = match last {
                0 => hop.header,
                _ if last == self.max_payload.get() => hop.full,
                _ => links[hop.link].occupancy(last)?,
            };
        }
        tails.0 = last;
        Ok(())
    }

    /// When a header-only packet sent at `start` lands (ADR-0022): at each
    /// hop, half a full packet's occupancy if the link is booked beyond
    /// the header's arrival, then its occupancy and latency.
    pub(crate) fn header_lands(&self, links: &[Link], start: SimTime) -> Result<SimTime, HwError> {
        let mut t = start;
        for hop in self.hops.iter() {
            let link = &links[hop.link];
            if t < link.free_at() {
                t = later_for(t, hop.half_full, || link.name())?;
            }
            t = later_for(t, hop.header, || link.name())?;
            t = later_for(t, hop.latency, || link.name())?;
        }
        Ok(t)
    }
}
