//! One DMA copy, classified once: [`Device::start_copy`] plans it
//! ([`CopyPlan`]: booked whole, or staged) in one function, books a whole
//! copy at once when its engine has a free slot ([`CopyStart::Booked`]),
//! and hands anything else back as the rest of the copy to await
//! ([`CopyStart::Pending`]). The fabric's entry points for each kind
//! (`Fabric::book_whole`, `Fabric::read_ahead`,
//! `Fabric::write_then_signal`) assert what the plan decided instead of
//! asking again (ADR-0074).

use std::future::Future;
use std::rc::Rc;

use super::{CopyTiming, Device, DeviceError, GRANULE, RouteMemo, RoutePair};
use crate::hw::{DmaEngine, DmaSlot, HeaderCrossing, Route, WholeCopy, WholeTimes, explain};
use crate::mem::{Op, OpId, Strided, StridedError};
use crate::sim;
use crate::topology::{MemSpace, NodeId};

/// What one DMA copy moves: from `src` to `dst`, in the layout `shape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyJob {
    /// The first byte read.
    pub src: u64,
    /// The first byte written.
    pub dst: u64,
    /// How the bytes lie on each side.
    pub shape: CopyShape,
}

/// How a [`CopyJob`]'s bytes lie on its two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyShape {
    /// One run of this many bytes on each side.
    Contiguous(u64),
    /// Runs at a stride on each side (ADR-0112): one job, timed as a
    /// contiguous copy of [`CopyJob::timed_len`] bytes over the same
    /// route.
    Strided(Strided),
}

impl CopyJob {
    /// `len` contiguous bytes from `src` to `dst`.
    pub fn contiguous(src: u64, dst: u64, len: u64) -> CopyJob {
        let shape = CopyShape::Contiguous(len);
        CopyJob { src, dst, shape }
    }

    /// The runs of `layout` from `src` to `dst` (ADR-0112).
    pub fn strided(src: u64, dst: u64, layout: Strided) -> CopyJob {
        let shape = CopyShape::Strided(layout);
        CopyJob { src, dst, shape }
    }

    /// Bytes copied.
    #[inline(always)]
    pub fn len(&self) -> u64 {
        match self.shape {
            CopyShape::Contiguous(len) => len,
            CopyShape::Strided(layout) => layout.bytes(),
        }
    }

    /// Whether it copies no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes its timing charges (ADR-0112): a contiguous copy's own;
    /// a strided copy's `rows × run` when both sides are contiguous, else
    /// each run rounded up to whole [`GRANULE`] lines (a memory reads and
    /// writes whole lines, so a run of 4 B in every 64 costs a line).
    #[inline(always)]
    pub fn timed_len(&self) -> u64 {
        match self.shape {
            CopyShape::Contiguous(len) => len,
            CopyShape::Strided(layout) if layout.is_contiguous() => layout.bytes(),
            CopyShape::Strided(layout) => {
                let lines = layout.run.div_ceil(GRANULE).saturating_mul(GRANULE);
                layout.rows.saturating_mul(lines)
            }
        }
    }

    /// The op that applies it to memory.
    #[inline(always)]
    fn op(&self) -> Op {
        let (src, dst) = (self.src, self.dst);
        match self.shape {
            CopyShape::Contiguous(len) => Op::Copy { src, dst, len },
            CopyShape::Strided(layout) => Op::StridedCopy { src, dst, layout },
        }
    }
}

/// One copy as its caller asks for it: what moves, on which engine, for
/// which node (where its read request starts), and what rides with it.
#[derive(Clone, Copy)]
pub struct CopyRequest<'a> {
    /// The DMA engine that issues it.
    pub engine: &'a DmaEngine,
    /// Where its read request starts.
    pub initiator: NodeId,
    /// What it moves.
    pub job: CopyJob,
    /// The caller's memo of its last copy's routes and regions, for a
    /// caller that copies between the same memories again and again (an
    /// IPCQ ring, a kernel's loads and stores: ADR-0057, ADR-0064).
    pub memo: Option<&'a RouteMemo>,
    /// A header-only write over this route once the last byte is
    /// written: an IPCQ doorbell (ADR-0024).
    pub doorbell: Option<&'a Route>,
}

impl<'a> CopyRequest<'a> {
    /// A copy with no memo and no doorbell.
    pub fn plain(engine: &'a DmaEngine, initiator: NodeId, job: CopyJob) -> Self {
        CopyRequest {
            engine,
            initiator,
            job,
            memo: None,
            doorbell: None,
        }
    }
}

/// A copy as [`Device::start_copy`] left it.
#[must_use = "a started copy is finished or awaited"]
pub enum CopyStart<'a> {
    /// Booked whole now: sleep until [`BookedCopy::done`], then
    /// [`BookedCopy::finish`].
    Booked(BookedCopy),
    /// The rest of the copy, to await ([`PendingCopy::run`]): a staged
    /// copy, or a whole one whose engine had no free slot.
    Pending(PendingCopy<'a>),
}

/// A copy booked whole: it holds its DMA slot until
/// [`finish`](Self::finish)ed at [`done`](Self::done).
#[must_use = "a booked copy holds its DMA slot until finished"]
pub struct BookedCopy {
    slot: DmaSlot,
    id: OpId,
    times: WholeTimes,
    /// When the copy is done: its last byte written, or its doorbell
    /// landed.
    pub done: sim::SimTime,
}

impl BookedCopy {
    /// Marks the copy's op complete at its last byte's write and frees
    /// its DMA slot (call it at [`done`](Self::done)); its stages' times.
    pub fn finish(self, device: &Device) -> Result<CopyTiming, DeviceError> {
        let written = self.times.written;
        device.oplog.borrow_mut().complete(self.id, written)?;
        Ok(CopyTiming {
            requested: self.slot.requested,
            started: self.slot.started,
            end: written,
        })
    }
}

/// The rest of a copy that was not booked at its start.
#[must_use = "a pending copy does nothing unless run"]
pub struct PendingCopy<'a> {
    device: &'a Device,
    request: CopyRequest<'a>,
    plan: CopyPlan<'a>,
}

/// How one copy is carried out, decided once
/// ([`Device::plan_copy`]).
enum CopyPlan<'a> {
    /// Flow mode, and neither memory books anything (a TCM, the host);
    /// with no doorbell its data crosses no link, with one its data is
    /// one packet of its route and its doorbell crosses constantly
    /// ([`HeaderCrossing::Constant`]): every stage's end is known at its
    /// issue, and it is booked at once (ADR-0048, ADR-0057).
    Whole {
        path: CopyPath,
        doorbell: Option<&'a Route>,
    },
    /// Stage by stage.
    Staged {
        path: CopyPath,
        read: Read,
        write: Write<'a>,
    },
}

/// How a staged copy's read request and read are timed.
#[derive(Clone, Copy)]
enum Read {
    /// Worked out at the slot's start, one sleep for both: the source
    /// books nothing in flow mode (ADR-0027).
    Ahead,
    /// Sent and accessed, each awaited.
    Awaited,
}

/// How a staged copy's data, write and doorbell are timed.
#[derive(Clone, Copy)]
enum Write<'a> {
    /// Flow mode, into a memory that books nothing, with a doorbell: the
    /// write and the doorbell worked out when the data leaves, one sleep
    /// for both (ADR-0024).
    AheadThenSignal(&'a Route),
    /// Sent and written, each awaited; then the doorbell, if any, sent
    /// once the DMA slot is free.
    Awaited { doorbell: Option<&'a Route> },
}

/// The routes and memories of one copy.
pub(super) struct CopyPath {
    pub(super) routes: Rc<RoutePair>,
    pub(super) src: (MemSpace, u64),
    pub(super) dst: (MemSpace, u64),
}

impl Device {
    /// Copies `job` with DMA `engine`, on behalf of node `initiator`
    /// (where the read request starts). See the module docs for the
    /// stages.
    pub fn dma_copy<'a>(
        &'a self,
        engine: &'a DmaEngine,
        initiator: NodeId,
        job: CopyJob,
    ) -> impl Future<Output = Result<CopyTiming, DeviceError>> + 'a {
        self.copy(CopyRequest::plain(engine, initiator, job))
    }

    /// `request` to its end: booked whole and slept for, or run stage by
    /// stage. With a doorbell it returns when the doorbell has landed.
    pub async fn copy(&self, request: CopyRequest<'_>) -> Result<CopyTiming, DeviceError> {
        match self.start_copy(request)? {
            CopyStart::Booked(booked) => {
                explain::sleep_until(booked.done).await;
                booked.finish(self)
            }
            CopyStart::Pending(rest) => rest.run().await,
        }
    }

    /// Plans `request` and, when it is booked whole and its engine has a
    /// free slot, books it now with no future of its own: issue, read,
    /// data, write and doorbell (ADR-0048, ADR-0057). Anything else comes
    /// back to await, with nothing booked or applied.
    #[inline(always)]
    pub fn start_copy<'a>(
        &'a self,
        request: CopyRequest<'a>,
    ) -> Result<CopyStart<'a>, DeviceError> {
        let plan = self.plan_copy(&request)?;
        if let CopyPlan::Whole { path, doorbell } = &plan
            && let Some(slot) = request.engine.start_now()?
        {
            let booked = self.book_whole(&request, (path, *doorbell), slot)?;
            return Ok(CopyStart::Booked(booked));
        }
        Ok(CopyStart::Pending(PendingCopy {
            device: self,
            request,
            plan,
        }))
    }

    /// The one place a copy is classified (see [`CopyPlan`]).
    #[inline(always)]
    fn plan_copy<'a>(&self, request: &CopyRequest<'a>) -> Result<CopyPlan<'a>, DeviceError> {
        let CopyJob { src, dst, shape } = request.job;
        let path = match request.memo {
            Some(memo) => self.plan_remembered(request.initiator, src, dst, memo)?,
            None => self.plan(request.initiator, src, dst)?,
        };
        if let CopyShape::Strided(layout) = shape {
            self.check_strided(&path, (src, dst), &layout)?;
        }
        let len = request.job.timed_len();
        let f = &self.fabric;
        let (read_ahead, write_ahead) = (f.works_ahead(path.src.0), f.works_ahead(path.dst.0));
        let doorbell = request.doorbell;
        let whole = read_ahead
            && write_ahead
            && match doorbell {
                None => path.routes.data.path().edges().is_empty(),
                Some(doorbell) => {
                    f.message_crossing(doorbell, len) == HeaderCrossing::Constant
                        && f.is_one_packet(&path.routes.data, len)
                }
            };
        if whole {
            return Ok(CopyPlan::Whole { path, doorbell });
        }
        let read = if read_ahead {
            Read::Ahead
        } else {
            Read::Awaited
        };
        let write = match doorbell {
            Some(doorbell) if write_ahead => Write::AheadThenSignal(doorbell),
            _ => Write::Awaited { doorbell },
        };
        Ok(CopyPlan::Staged { path, read, write })
    }

    /// A whole copy's op applied and its stages booked from `slot`'s
    /// start.
    #[inline(always)]
    fn book_whole(
        &self,
        request: &CopyRequest<'_>,
        (path, doorbell): (&CopyPath, Option<&Route>),
        slot: DmaSlot,
    ) -> Result<BookedCopy, DeviceError> {
        let id = self.apply_copy(request)?;
        let whole = WholeCopy {
            request: &path.routes.request,
            data: &path.routes.data,
            src: path.src,
            dst: path.dst,
            len: request.job.timed_len(),
            doorbell,
        };
        let times = self.fabric.book_whole(&whole, slot.started)?;
        Ok(BookedCopy {
            slot,
            id,
            done: times.done,
            times,
        })
    }

    /// Errors unless `layout` is a shape [`Strided::check`] accepts whose
    /// runs on each side lie in the memory `path` found that side's first
    /// byte in (one route serves every run).
    #[inline(never)]
    fn check_strided(
        &self,
        path: &CopyPath,
        (src, dst): (u64, u64),
        layout: &Strided,
    ) -> Result<(), DeviceError> {
        layout.check(src, dst)?;
        let map = self.fabric.machine().address_map();
        let sides = [
            ("src", src, layout.src_span(), path.src),
            ("dst", dst, layout.dst_span(), path.dst),
        ];
        for (arg, addr, span, (space, offset)) in sides {
            if span > map.capacity(space) - offset {
                return Err(StridedError::LeavesMemory { arg, addr, span }.into());
            }
        }
        Ok(())
    }

    /// Applies and logs `request`'s copy now, by its engine.
    #[inline(always)]
    fn apply_copy(&self, request: &CopyRequest<'_>) -> Result<OpId, DeviceError> {
        let copy = request.job.op();
        match request.memo {
            Some(memo) => self.apply_remembered(request.engine.name(), copy, &memo.regions),
            None => self.apply(request.engine.name(), copy),
        }
    }

    /// Issues a copy on `engine` and takes a slot. When its read works
    /// ahead and a slot is free, both happen now and the caller works out
    /// the read from here, one sleep for issue, request and read
    /// (ADR-0027); otherwise as `engine.run(job)` does, without moving a
    /// job future into it.
    async fn take_slot(&self, engine: &DmaEngine, read: Read) -> Result<DmaSlot, DeviceError> {
        if let Read::Ahead = read
            && let Some(slot) = engine.start_now()?
        {
            return Ok(slot);
        }
        Ok(engine.start().await?)
    }

    /// A staged copy's stages from its slot on: the read, then the data,
    /// write and doorbell as `write` says. Values worked out before an
    /// `await` are bound in statements of their own: a temporary whose
    /// scope spans the `await` is kept in the future, which every caller
    /// then carries and moves.
    async fn run_stages(
        &self,
        request: CopyRequest<'_>,
        (path, read, write): (CopyPath, Read, Write<'_>),
        slot: DmaSlot,
    ) -> Result<CopyTiming, DeviceError> {
        let (f, routes, len) = (&self.fabric, &path.routes, request.job.timed_len());
        let id = self.apply_copy(&request)?;
        let timing = |end| CopyTiming {
            requested: slot.requested,
            started: slot.started,
            end,
        };
        match read {
            Read::Ahead => {
                let read = f.read_ahead(&routes.request, path.src, len, slot.started)?;
                explain::sleep_until(read).await;
            }
            Read::Awaited => {
                f.send_then_access(&routes.request, 0, path.src, len)
                    .await?
            }
        }
        let doorbell = match write {
            Write::AheadThenSignal(doorbell) => {
                let data = (len, sim::now());
                let ahead = f.write_then_signal(&routes.data, data, path.dst, doorbell);
                let (written, signalled, pushed) = ahead?;
                explain::sleep_until(signalled).await;
                // Flows booked after this one may have pushed its landing
                // (ADR-0056): the write and the doorbell move with it.
                let written = written + pushed.settle(signalled).await;
                self.oplog.borrow_mut().complete(id, written)?;
                return Ok(timing(written));
            }
            Write::Awaited { doorbell } => doorbell,
        };
        f.send_then_access(&routes.data, len, path.dst, len).await?;
        self.complete(id)?;
        let copied = timing(sim::now());
        drop(slot);
        if let Some(doorbell) = doorbell {
            // Boxed, as in `Fabric::send_then_access`: packet mode only.
            let signalled = Box::pin(f.send(doorbell, 0));
            signalled.await?;
        }
        Ok(copied)
    }
}

impl PendingCopy<'_> {
    /// The rest of the copy: a slot awaited, then booked whole and slept
    /// for, or run stage by stage.
    pub async fn run(self) -> Result<CopyTiming, DeviceError> {
        let PendingCopy {
            device,
            request,
            plan,
        } = self;
        match plan {
            CopyPlan::Whole { path, doorbell } => {
                let slot = device.take_slot(request.engine, Read::Ahead).await?;
                let booked = device.book_whole(&request, (&path, doorbell), slot)?;
                explain::sleep_until(booked.done).await;
                booked.finish(device)
            }
            CopyPlan::Staged { path, read, write } => {
                let slot = device.take_slot(request.engine, read).await?;
                device.run_stages(request, (path, read, write), slot).await
            }
        }
    }
}
