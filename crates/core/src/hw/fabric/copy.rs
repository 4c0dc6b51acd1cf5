//! The stages of one DMA copy that flow mode works out when they start,
//! as the device's copy plans ask for them (`device::CopyPlan`, the one
//! place a copy is classified): a copy booked whole
//! ([`Fabric::book_whole`]: read, data, write and doorbell at once), and
//! the stages of a staged copy known at their start
//! ([`Fabric::read_ahead`], [`Fabric::write_then_signal`]). Each entry
//! point asserts what the plan decided instead of asking again.

use super::{Fabric, Route, explain_unbooked, unbooked};
use crate::hw::HwError;
use crate::hw::flow_share::Pushed;
use crate::sim::SimTime;
use crate::topology::{Fidelity, MemSpace};

/// How a header-only packet (an IPCQ doorbell or credit) crosses its
/// route in flow mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderCrossing {
    /// At its route's uncontended crossing, a constant of the route,
    /// with no hop read: the doorbell and the credit of a message of one
    /// packet of the doorbell's route (ADR-0048).
    Constant,
    /// Hop by hop, waiting half a packet where a hop is booked past its
    /// arrival (ADR-0022).
    Hops,
}

/// A copy booked whole: what [`Fabric::book_whole`] crosses. Made only
/// by a plan that found it whole (flow mode, both memories book nothing;
/// with no doorbell the data crosses no link, with one the data is one
/// packet of its route and crosses its doorbell's route constantly).
pub struct WholeCopy<'a> {
    /// The read request's route, initiator to source memory.
    pub request: &'a Route,
    /// The data's route, source memory to destination memory.
    pub data: &'a Route,
    /// The source memory and offset.
    pub src: (MemSpace, u64),
    /// The destination memory and offset.
    pub dst: (MemSpace, u64),
    /// Bytes copied.
    pub len: u64,
    /// The IPCQ doorbell rung once the last byte is written.
    pub doorbell: Option<&'a Route>,
}

/// When a whole copy's stages end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeTimes {
    /// Its last byte written.
    pub written: SimTime,
    /// Its doorbell landed (without one, `written`).
    pub done: SimTime,
}

impl Fabric {
    /// Whether an access to `space` is worked out ahead: flow mode, and
    /// the memory books nothing (a TCM's latency, the host's nothing), so
    /// the access ends at a known instant from its start (ADR-0027).
    pub fn works_ahead(&self, space: MemSpace) -> bool {
        self.fidelity() == Fidelity::Flow && unbooked(space)
    }

    /// How the doorbell and credit of a message of `bytes` over `route`
    /// cross in flow mode: constantly for one packet of the route.
    pub fn message_crossing(&self, route: &Route, bytes: u64) -> HeaderCrossing {
        match self.is_one_packet(route, bytes) {
            true => HeaderCrossing::Constant,
            false => HeaderCrossing::Hops,
        }
    }

    /// Books `copy` whole from `start` (its DMA slot's start): the read
    /// request and read, the data and write, and the doorbell, each from
    /// the end of the one before; nothing left to wait for but the
    /// instants returned (ADR-0048, ADR-0057).
    #[inline(always)]
    pub fn book_whole(&self, copy: &WholeCopy<'_>, start: SimTime) -> Result<WholeTimes, HwError> {
        debug_assert!(self.works_ahead(copy.src.0) && self.works_ahead(copy.dst.0));
        let read = self.read_ahead(copy.request, copy.src, copy.len, start)?;
        let Some(doorbell) = copy.doorbell else {
            let written = self.write_in_place(copy, read)?;
            return Ok(WholeTimes {
                written,
                done: written,
            });
        };
        debug_assert!(self.is_one_packet(copy.data, copy.len));
        debug_assert_eq!(
            self.message_crossing(doorbell, copy.len),
            HeaderCrossing::Constant
        );
        let took = self.access_formula(copy.dst.0, copy.dst.1, copy.len);
        let lands = match copy.len {
            0 => self.header_lands(copy.data, read)?,
            bytes => {
                self.with_flow(copy.data, |flow| flow.book_packet(&self.links, bytes, read))?
            }
        };
        let took = took?;
        explain_unbooked(copy.dst.0, took);
        let written = crate::hw::later(lands, took, "memory access")?;
        let done = self.signal_lands(doorbell, written)?;
        Ok(WholeTimes { written, done })
    }

    /// A whole copy's write when its data crosses no link (within one
    /// TCM): written its memory's access after the read.
    fn write_in_place(&self, copy: &WholeCopy<'_>, read: SimTime) -> Result<SimTime, HwError> {
        debug_assert!(copy.data.path().edges().is_empty());
        let write = self.access_formula(copy.dst.0, copy.dst.1, copy.len)?;
        explain_unbooked(copy.dst.0, write);
        crate::hw::later(read, write, "memory access")
    }

    /// When `len` bytes at `src` have been read, the read request sent
    /// over `request` at `sent`: the request's header crossing, then the
    /// memory's access (the stages
    /// [`send_then_access`](Self::send_then_access) times), for a source
    /// that [`works_ahead`](Self::works_ahead).
    #[inline(always)]
    pub fn read_ahead(
        &self,
        request: &Route,
        (space, offset): (MemSpace, u64),
        len: u64,
        sent: SimTime,
    ) -> Result<SimTime, HwError> {
        debug_assert!(self.works_ahead(space));
        let read = self.access_formula(space, offset, len);
        let lands = self.header_lands(request, sent)?;
        let read = read?;
        explain_unbooked(space, read);
        crate::hw::later(lands, read, "memory access")
    }

    /// A staged copy's data of `bytes` over `data`, leaving at `leaves`,
    /// written to `dst` (which [`works_ahead`](Self::works_ahead)), then
    /// its doorbell sent over `doorbell` hop by hop from there: when the
    /// last byte is written, when the doorbell lands, and what may push
    /// both later (flows booked after it, ADR-0056: the caller sleeps
    /// until the doorbell lands, then [`Pushed::settle`]s). ADR-0024.
    pub fn write_then_signal(
        &self,
        data: &Route,
        (bytes, leaves): (u64, SimTime),
        dst: (MemSpace, u64),
        doorbell: &Route,
    ) -> Result<(SimTime, SimTime, Pushed), HwError> {
        debug_assert!(self.works_ahead(dst.0));
        let took = self.access_formula(dst.0, dst.1, bytes);
        let (lands, pushed) = match bytes {
            0 => (self.header_lands(data, leaves)?, Pushed::default()),
            _ => self.with_flow(data, |flow| flow.book_flow(&self.links, bytes, leaves))?,
        };
        let took = took?;
        explain_unbooked(dst.0, took);
        let written = crate::hw::later(lands, took, "memory access")?;
        let signalled = self.header_lands(doorbell, written)?;
        Ok((written, signalled, pushed))
    }
}
