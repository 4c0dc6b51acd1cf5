//! The IPCQ calls of [`Tl`]: `send`, `send_raw`, `recv`, `recv_into`,
//! `recv_any`, `recv_async` / `wait`, `release` (see the `ipcq` module
//! docs for timing and the slot-release rule), and `recv_held`, a
//! receive whose slot its caller releases by ticket (ADR-0070).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures::FutureExt;

use crate::device::{BookedCopy, CopyJob, CopyRequest, CopyStart};
use crate::hw::explain;
use crate::mem::DType;
use crate::sim::{self, SimDuration};
use crate::tl::handle::checked_bytes;
use crate::tl::{Address, KernelError, PeCoord, Shape, TensorHandle, Tl};
use crate::topology::MemSpace;

use super::ring::{FirstLook, Message, Ring};
use super::{Backpressure, Dir, IpcqError, IpcqNetwork, Mismatch, ns_one_decimal};
use crate::tl::context::Program;

/// The keyword form of a send (`tl.send(dir, src_addr=..., nbytes=...,
/// shape=..., dtype=..., space=...)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendArgs {
    /// Where the message starts.
    pub src_addr: u64,
    /// Its size; must be `shape × dtype`.
    pub nbytes: u64,
    /// Its shape.
    pub shape: Shape,
    /// Its element type.
    pub dtype: DType,
    /// The memory `src_addr` is in (checked).
    pub space: MemSpace,
}

/// Where a send stands after its first look ([`Tl::send_step`]).
enum SendStep<'a> {
    /// A slot claimed: book the copy ([`Tl::fill_slot`]).
    Claimed(SendSlot<'a>),
    /// No credit free now: wait for one.
    NoCredit(&'a Rc<Ring>),
    /// A message of several segments: the whole send.
    Segments(Pin<Box<dyn Future<Output = Result<(), KernelError>> + 'a>>),
}

/// A send's claimed slot.
struct SendSlot<'a> {
    ring: &'a Rc<Ring>,
    seq: u64,
}

/// A send's copy ([`Tl::fill_slot`]).
enum Booking<'a> {
    /// Booked whole: sleep until it is done, then [`Tl::send_landed`].
    Whole(BookedSend<'a>),
    /// The rest of the copy (or of a message of several segments).
    Staged(Pin<Box<dyn Future<Output = Result<(), KernelError>> + 'a>>),
}

/// A send's copy booked whole, done at a known instant.
struct BookedSend<'a> {
    slot: SendSlot<'a>,
    copy: BookedCopy,
}

/// A slot a receive holds ([`Tl::recv_held`]) until
/// [`Tl::release_held_slot`]: released by its ring and ticket, with no
/// search by address (ADR-0070).
#[derive(Clone, Copy)]
pub(crate) struct HeldSlot<'a> {
    ring: &'a Rc<Ring>,
    ticket: u64,
}

/// A receive in flight ([`Tl::recv_async`]); await it or pass it to
/// [`Tl::wait`].
#[must_use = "a receive does nothing unless waited for"]
pub struct RecvFuture(Pin<Box<dyn Future<Output = Result<TensorHandle, KernelError>>>>);

impl Future for RecvFuture {
    type Output = Result<TensorHandle, KernelError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// A program's attachment to a network: its PE's rings (looked up once,
/// not in the network's map at every call) and the slots it holds.
pub(crate) struct IpcqPort {
    network: Rc<IpcqNetwork>,
    sends: Vec<(Dir, Rc<Ring>)>,
    receives: Vec<(Dir, Rc<Ring>)>,
    held: RefCell<Vec<(Rc<Ring>, u64)>>,
    /// The network's `strict_validation`, read at every message.
    strict: bool,
}

impl IpcqPort {
    pub(crate) fn new(network: Rc<IpcqNetwork>, pe: PeCoord) -> Self {
        let endpoint = network.endpoint_of(pe);
        let rings = |side: fn(&super::ring::Endpoint) -> &BTreeMap<Dir, Rc<Ring>>| {
            let rings = endpoint.map(side).into_iter().flatten();
            rings.map(|(&dir, ring)| (dir, ring.clone())).collect()
        };
        IpcqPort {
            sends: rings(|e| &e.sends),
            receives: rings(|e| &e.receives),
            strict: network.params().strict_validation,
            network,
            held: RefCell::new(Vec::new()),
        }
    }
}

impl Tl {
    /// The IPCQ network this program was launched with.
    pub fn ipcq(&self) -> Option<&Rc<IpcqNetwork>> {
        self.program.ipcq.as_ref().map(|port| &port.network)
    }

    /// Sends `src` to the peer in `dir`: waits for a free slot, copies it
    /// with PE_DMA into the peer's slot, rings the doorbell; returns when
    /// the doorbell has landed. A handle's address, memory and size were
    /// checked when it was made: they are not checked again.
    ///
    /// A message the device books whole (in flow mode, one packet from a
    /// TCM into a TCM slot: `Device::start_copy`) is booked at once and
    /// the send sleeps once (ADR-0048, ADR-0057, ADR-0060); any other
    /// awaits the rest of the device's copy, and one larger than a slot
    /// goes as several segments, each boxed so that this future stays
    /// small.
    pub async fn send(&self, dir: Dir, src: &TensorHandle) -> Result<(), KernelError> {
        let booking = match self.send_step(dir, src)? {
            SendStep::Claimed(slot) => self.fill_slot(slot, src)?,
            SendStep::NoCredit(ring) => {
                let slot = self.claim(ring, FirstLook::Skip).await?;
                self.fill_slot(slot, src)?
            }
            SendStep::Segments(rest) => Booking::Staged(rest),
        };
        match booking {
            Booking::Whole(booked) => {
                explain::sleep_until(booked.copy.done).await;
                self.send_landed(booked)
            }
            Booking::Staged(rest) => rest.await,
        }
    }

    /// A send's first step: its ring, and a slot claimed if a credit is
    /// free; a message of several segments is the whole send, boxed.
    #[inline]
    fn send_step<'a>(&'a self, dir: Dir, src: &TensorHandle) -> Result<SendStep<'a>, KernelError> {
        let ring = self.ring(dir, "send")?;
        let len = src.bytes();
        let segments = Message::segments(len, ring.slot_bytes);
        if segments > 1 {
            let message = self.message(src.shape(), src.dtype(), len);
            let rest = self.send_segments(ring.clone(), src.addr(), message, segments);
            return Ok(SendStep::Segments(Box::pin(rest)));
        }
        Ok(match ring.try_claim() {
            Some(claimed) => SendStep::Claimed(SendSlot {
                ring,
                seq: claimed?,
            }),
            None => SendStep::NoCredit(ring),
        })
    }

    /// Puts `src` in the claimed slot and starts its copy: booked whole
    /// if the device books it so, else the rest of the copy, boxed.
    #[inline]
    fn fill_slot<'a>(
        &'a self,
        slot: SendSlot<'a>,
        src: &TensorHandle,
    ) -> Result<Booking<'a>, KernelError> {
        let message = self.message(src.shape(), src.dtype(), src.bytes());
        Ok(
            match self.start_slot_copy(slot.ring, slot.seq, src.addr(), message)? {
                CopyStart::Booked(copy) => Booking::Whole(BookedSend { slot, copy }),
                CopyStart::Pending(rest) => {
                    let (ring, seq) = (slot.ring, slot.seq);
                    Booking::Staged(Box::pin(async move {
                        rest.run().await?;
                        ring.doorbell_landed(seq);
                        Ok(())
                    }))
                }
            },
        )
    }

    /// A whole booked send at its end: the copy finished, the doorbell
    /// landed.
    #[inline]
    fn send_landed(&self, booked: BookedSend<'_>) -> Result<(), KernelError> {
        let BookedSend { slot, copy } = booked;
        copy.finish(&self.program.device)?;
        slot.ring.doorbell_landed(slot.seq);
        Ok(())
    }

    /// [`send`](Self::send) in keyword form: its size and memory are
    /// checked, then it is sent as a handle on `src_addr`.
    pub async fn send_raw(&self, dir: Dir, args: SendArgs) -> Result<(), KernelError> {
        self.ring(dir, "send")?;
        self.check_send(&args)?;
        let src = (args.src_addr, args.space);
        self.send(dir, &TensorHandle::checked(src, &args.shape, args.dtype))
            .await
    }

    /// What the slots of a message say of it. Its shape is kept only
    /// under strict validation, the one check that reads it.
    fn message(&self, shape: &[usize], dtype: DType, nbytes: u64) -> Message {
        let strict = self.program.ipcq.as_ref().is_some_and(|port| port.strict);
        Message {
            shape: strict.then(|| shape.into()),
            dtype,
            nbytes,
            segment: 0,
            segments: 1,
        }
    }

    /// Puts the one-segment `message` from `src` in slot `seq` and starts
    /// its copy into the slot, its doorbell rung once written
    /// (`Device::start_copy`).
    #[inline(always)]
    fn start_slot_copy<'a>(
        &'a self,
        ring: &'a Ring,
        seq: u64,
        src: u64,
        message: Message,
    ) -> Result<CopyStart<'a>, KernelError> {
        let len = message.nbytes;
        self.log_send(ring, len, seq);
        let p = &self.program;
        let crossing = p.device.fabric().message_crossing(&ring.doorbell, len);
        let dst = ring.put(seq, message, crossing);
        Ok(p.device
            .start_copy(slot_copy(p, ring, CopyJob::contiguous(src, dst, len)))?)
    }

    /// A message of `segments` slot-sized segments, each claimed in turn
    /// and copied by its own task.
    async fn send_segments(
        &self,
        ring: Rc<Ring>,
        src: u64,
        message: Message,
        segments: u64,
    ) -> Result<(), KernelError> {
        let mut in_flight = Vec::new();
        for segment in 0..segments {
            let seq = self.claim(&ring, FirstLook::Try).await?.seq;
            let offset = segment * ring.slot_bytes;
            let len = (message.nbytes - offset).min(ring.slot_bytes);
            self.log_send(&ring, len, seq);
            let part = Message {
                segment,
                segments,
                ..message.clone()
            };
            let crossing = self
                .program
                .device
                .fabric()
                .message_crossing(&ring.doorbell, len);
            let dst = ring.put(seq, part, crossing);
            let copy = self.copy_segment(
                ring.clone(),
                seq,
                CopyJob::contiguous(src + offset, dst, len),
            );
            in_flight.push(sim::spawn("ipcq segment", copy));
        }
        for copy in in_flight {
            copy.await
                .map_err(|e| KernelError::failed(format!("send segment: {e}")))??;
        }
        Ok(())
    }

    fn log_send(&self, ring: &Ring, len: u64, seq: u64) {
        tracing::debug!(
            target: "kernbench::ccl",
            "[ccl t={} send] {} dir={} nbytes={} seq={}",
            ns_one_decimal(sim::now()), self.program.coord, ring.spec.send_dir, len, seq
        );
    }

    /// Copies `job` into slot `seq` of `ring` with this PE's PE_DMA and
    /// rings the doorbell.
    fn copy_segment(
        &self,
        ring: Rc<Ring>,
        seq: u64,
        job: CopyJob,
    ) -> impl Future<Output = Result<(), KernelError>> + 'static {
        let p = self.program.clone();
        async move {
            p.device.copy(slot_copy(&p, &ring, job)).await?;
            ring.doorbell_landed(seq);
            Ok(())
        }
    }

    /// Claims a slot, waiting for a credit as the backpressure mode says
    /// (`first`: as `Ring::claim`'s).
    async fn claim<'a>(
        &self,
        ring: &'a Rc<Ring>,
        first: FirstLook,
    ) -> Result<SendSlot<'a>, KernelError> {
        let params = *self.network("send")?.params();
        let blocked = sim::now();
        let seq = ring.claim(first).await?;
        let waited = sim::now().saturating_since(blocked);
        if params.backpressure == Backpressure::Poll && waited > SimDuration::ZERO {
            let period = params.poll_interval.as_ps().max(1);
            let ticks = waited.as_ps().div_ceil(period);
            sim::sleep(SimDuration::from_ps(ticks * period - waited.as_ps())).await;
        }
        Ok(SendSlot { ring, seq })
    }

    fn check_send(&self, args: &SendArgs) -> Result<(), KernelError> {
        let bytes = checked_bytes("send", &args.shape, args.dtype)?;
        if bytes != args.nbytes {
            let reason = format!(
                "nbytes {} is not shape {:?} of {:?} ({bytes} B)",
                args.nbytes, args.shape, args.dtype
            );
            return Err(KernelError::Operands { op: "send", reason });
        }
        let space = self.space_of(args.src_addr)?;
        if space != args.space {
            let reason = format!(
                "src_addr {:#018x} is in {space}, not {}",
                args.src_addr, args.space
            );
            return Err(KernelError::Operands { op: "send", reason });
        }
        Ok(())
    }

    /// Receives from `dir` (`return_slot`: the handle is the slot; see the
    /// module docs for when it is released).
    pub fn recv<'a>(
        &'a self,
        dir: Dir,
        shape: &'a [usize],
        dtype: DType,
    ) -> impl Future<Output = Result<TensorHandle, KernelError>> + 'a {
        let held = self.recv_held(dir, shape, dtype);
        held.map(|received| Ok(received?.0))
    }

    /// [`recv`](Self::recv), and the slot it holds, for a caller that
    /// releases it itself ([`release_held_slot`](Self::release_held_slot)).
    /// As `recv_async(..).await`, without boxing the future; a message
    /// that has landed is taken with no wait at all.
    pub(crate) async fn recv_held<'a>(
        &'a self,
        dir: Dir,
        shape: &[usize],
        dtype: DType,
    ) -> Result<(TensorHandle, HeldSlot<'a>), KernelError> {
        let (ring, ticket) = self.next_ticket(dir)?;
        let sent = match ring.try_delivered(ticket) {
            Some(sent) => sent,
            None => ring.delivered(ticket).await,
        };
        let handle = self.hold_slot(ring, ticket, sent, shape, dtype)?;
        Ok((handle, HeldSlot { ring, ticket }))
    }

    /// Starts a receive from `dir`: its slot is the next one of the ring,
    /// in call order, whenever it is waited for.
    pub fn recv_async(&self, dir: Dir, shape: &[usize], dtype: DType) -> RecvFuture {
        let ticket = self.next_ticket(dir).map(|(ring, t)| (ring.clone(), t));
        let (tl, shape) = (self.clone(), Shape::from_slice(shape));
        RecvFuture(Box::pin(async move {
            let (ring, ticket) = ticket?;
            tl.take_slot(&ring, ticket, &shape, dtype).await
        }))
    }

    /// The ring of `dir` and the next receive's ticket on it (releasing
    /// the slots this program holds there).
    fn next_ticket(&self, dir: Dir) -> Result<(&Rc<Ring>, u64), KernelError> {
        let ring = self.ring(dir, "receive")?;
        self.release_held(|r| Rc::ptr_eq(r, ring));
        let ticket = ring.ticket();
        Ok((ring, ticket))
    }

    /// Waits for a receive started with [`recv_async`](Self::recv_async).
    pub async fn wait(&self, receive: RecvFuture) -> Result<TensorHandle, KernelError> {
        receive.await
    }

    /// Receives from whichever installed direction has a message first,
    /// looking round-robin (releases every slot this program holds).
    pub async fn recv_any(
        &self,
        shape: &[usize],
        dtype: DType,
    ) -> Result<(Dir, TensorHandle), KernelError> {
        let network = self.network("recv_any")?;
        let coord = self.program.coord;
        let endpoint = network
            .endpoint_of(coord)
            .filter(|e| !e.receives.is_empty());
        let Some(endpoint) = endpoint else {
            return Err(IpcqError::NoReceiveRings { pe: coord }.into());
        };
        self.release_held(|_| true);
        let (ring, ticket) = endpoint.any().await;
        let handle = self.take_slot(&ring, ticket, shape, dtype).await?;
        Ok((ring.spec.label, handle))
    }

    /// Receives from `dir` into `dst` (`copy_to_dst`: PE_DMA slot → `dst`,
    /// then the slot is released); the handle is at `dst`. A message larger
    /// than a slot arrives as segments, each copied out and released in
    /// turn, so the sender refills the ring while this PE drains it.
    pub async fn recv_into(
        &self,
        dir: Dir,
        shape: &[usize],
        dtype: DType,
        dst: impl Address,
    ) -> Result<TensorHandle, KernelError> {
        let dst = self.view(dst.address(), shape, dtype)?;
        let ring = self.ring(dir, "receive")?;
        self.release_held(|r| Rc::ptr_eq(r, ring));
        let segments = Message::segments(dst.bytes(), ring.slot_bytes);
        let first = ring.tickets(segments);
        let p = &self.program;
        for segment in 0..segments {
            let ticket = first + segment;
            let sent = ring.delivered(ticket).await;
            self.check_strict(ring, &sent, shape, dtype)?;
            check_segment(ring, &sent, segment, segments)?;
            let offset = segment * ring.slot_bytes;
            let len = (dst.bytes() - offset).min(ring.slot_bytes);
            self.log_recv(ring, len);
            let (src, dst) = (ring.slot(ticket), dst.addr() + offset);
            let copy = p
                .device
                .dma_copy(&p.dma, p.node, CopyJob::contiguous(src, dst, len));
            copy.await?;
            ring.release(p.device.fabric(), ticket);
        }
        Ok(dst)
    }

    /// Releases a slot from `recv` early (its credit goes back to the
    /// sender).
    pub fn release(&self, slot: &TensorHandle) -> Result<(), KernelError> {
        self.release_slot((slot.addr(), slot.space()))
    }

    /// [`release`](Self::release) of the slot at `addr` in `space` (for
    /// a caller that gave the handle away).
    pub(crate) fn release_slot(&self, (addr, space): (u64, MemSpace)) -> Result<(), KernelError> {
        let is = |(ring, ticket): &(Rc<Ring>, u64)| {
            ring.spec.space == space && ring.slot(*ticket) == addr
        };
        self.release_where(is, addr)
    }

    /// Releases the slot a [`recv_held`](Self::recv_held) holds, found by
    /// its ring and ticket: the slot `release_slot` finds by address (held
    /// slots are distinct), with no address computed.
    #[inline]
    pub(crate) fn release_held_slot(&self, slot: HeldSlot<'_>) -> Result<(), KernelError> {
        let HeldSlot { ring, ticket } = slot;
        let is = |(r, t): &(Rc<Ring>, u64)| *t == ticket && Rc::ptr_eq(r, ring);
        self.release_where(is, ring.slot(ticket))
    }

    /// Releases the last held slot that `is`, or errors naming `addr`.
    #[inline]
    fn release_where(
        &self,
        is: impl Fn(&(Rc<Ring>, u64)) -> bool,
        addr: u64,
    ) -> Result<(), KernelError> {
        let port = self.port("release")?;
        let entry = {
            let mut held = port.held.borrow_mut();
            // Usually the last held: popped, with no search or shift.
            match held.last().is_some_and(&is) {
                true => held.pop(),
                false => held.iter().rposition(is).map(|index| held.remove(index)),
            }
        };
        let Some((ring, ticket)) = entry else {
            let pe = self.program.coord;
            return Err(IpcqError::NotHeld { addr, pe }.into());
        };
        ring.release(self.program.device.fabric(), ticket);
        Ok(())
    }

    /// Releases every slot this program holds (its end).
    pub(crate) fn release_slots(&self) {
        self.release_held(|_| true);
    }

    /// Waits for `ticket`, checks it, holds it; the handle on its slot.
    async fn take_slot(
        &self,
        ring: &Rc<Ring>,
        ticket: u64,
        shape: &[usize],
        dtype: DType,
    ) -> Result<TensorHandle, KernelError> {
        let sent = ring.delivered(ticket).await;
        self.hold_slot(ring, ticket, sent, shape, dtype)
    }

    /// Holds `ticket`, whose message `sent` has landed, and checks it;
    /// the handle on its slot.
    fn hold_slot(
        &self,
        ring: &Rc<Ring>,
        ticket: u64,
        sent: Message,
        shape: &[usize],
        dtype: DType,
    ) -> Result<TensorHandle, KernelError> {
        self.port("recv")?
            .held
            .borrow_mut()
            .push((ring.clone(), ticket));
        let bytes = checked_bytes("recv", shape, dtype)?;
        fits("recv", ring, bytes.max(sent.nbytes))?;
        self.check_strict(ring, &sent, shape, dtype)?;
        self.log_recv(ring, sent.nbytes);
        let slot = (ring.slot(ticket), ring.spec.space);
        Ok(TensorHandle::checked(slot, shape, dtype))
    }

    fn log_recv(&self, ring: &Ring, nbytes: u64) {
        tracing::debug!(
            target: "kernbench::ccl",
            "[ccl t={} recv] {} dir={} nbytes={}",
            ns_one_decimal(sim::now()), self.program.coord, ring.spec.label, nbytes
        );
    }

    #[inline]
    fn check_strict(
        &self,
        ring: &Ring,
        sent: &Message,
        shape: &[usize],
        dtype: DType,
    ) -> Result<(), KernelError> {
        let strict = self.port("recv")?.strict;
        if !strict || (sent.shape.as_deref() == Some(shape) && sent.dtype == dtype) {
            return Ok(());
        }
        Err(mismatch(ring, sent, shape, dtype))
    }

    fn release_held(&self, which: impl Fn(&Rc<Ring>) -> bool) {
        let Some(port) = &self.program.ipcq else {
            return;
        };
        if port.held.borrow().is_empty() {
            return;
        }
        let fabric = self.program.device.fabric();
        let mut release = Vec::new();
        port.held.borrow_mut().retain(|(ring, ticket)| {
            let keep = !which(ring);
            if !keep {
                release.push((ring.clone(), *ticket));
            }
            keep
        });
        for (ring, ticket) in release {
            ring.release(fabric, ticket);
        }
    }

    fn port(&self, op: &'static str) -> Result<&IpcqPort, IpcqError> {
        let pe = self.program.coord;
        // A match, not `ok_or`: the error is built (and dropped) only
        // when there is no network.
        match &self.program.ipcq {
            Some(port) => Ok(port),
            None => Err(IpcqError::NoNetwork { op, pe }),
        }
    }

    fn network(&self, op: &'static str) -> Result<&IpcqNetwork, IpcqError> {
        Ok(&self.port(op)?.network)
    }

    /// This PE's ring in `dir`: its send ring (`side` = `send`) or its
    /// receive ring labelled `dir`.
    #[inline]
    fn ring(&self, dir: Dir, side: &'static str) -> Result<&Rc<Ring>, IpcqError> {
        let port = self.port(side)?;
        let rings = if side == "send" {
            &port.sends
        } else {
            &port.receives
        };
        match rings.iter().find(|(d, _)| *d == dir) {
            Some((_, ring)) => Ok(ring),
            None => Err(invalid(&port.network, self.program.coord, side, dir)),
        }
    }
}

/// The copy of `job` into a slot of `ring` by `p`'s PE_DMA, through the
/// ring's memo of its last copy, its doorbell rung once written.
fn slot_copy<'a>(p: &'a Program, ring: &'a Ring, job: CopyJob) -> CopyRequest<'a> {
    CopyRequest {
        memo: Some(&ring.copy_routes),
        doorbell: Some(&ring.doorbell),
        ..CopyRequest::plain(&p.dma, p.node, job)
    }
}

/// The error for `pe` using `dir` on its `side`, naming what it has.
fn invalid(network: &IpcqNetwork, pe: PeCoord, side: &'static str, dir: Dir) -> IpcqError {
    let installed = match side {
        "send" => network.send_dirs(pe),
        _ => network.recv_dirs(pe),
    };
    IpcqError::InvalidDirection {
        pe,
        side,
        dir,
        installed,
    }
}

fn fits(op: &'static str, ring: &Ring, nbytes: u64) -> Result<(), KernelError> {
    if nbytes <= ring.slot_bytes {
        return Ok(());
    }
    let (slot_bytes, ring) = (ring.slot_bytes, ring.name());
    Err(IpcqError::TooLarge {
        op,
        nbytes,
        slot_bytes,
        ring,
    }
    .into())
}

/// A segmented receive must meet the segments of one message, in order
/// (without strict validation, sizes are not otherwise compared).
fn check_segment(
    ring: &Ring,
    sent: &Message,
    segment: u64,
    segments: u64,
) -> Result<(), KernelError> {
    if (sent.segment, sent.segments) == (segment, segments) {
        return Ok(());
    }
    Err(IpcqError::Segments {
        ring: ring.name(),
        sent_bytes: sent.nbytes,
        sent: (sent.segment, sent.segments),
        expected: (segment, segments),
    }
    .into())
}

/// Strict validation's error: both sides of `ring`'s message.
#[cold]
fn mismatch(ring: &Ring, sent: &Message, shape: &[usize], dtype: DType) -> KernelError {
    let s = &ring.spec;
    IpcqError::Mismatch(Box::new(Mismatch {
        sender: s.sender,
        send_dir: s.send_dir,
        sent_shape: sent.shape.as_deref().unwrap_or_default().to_vec(),
        sent_dtype: sent.dtype,
        receiver: s.receiver,
        label: s.label,
        recv_shape: shape.to_vec(),
        recv_dtype: dtype,
    }))
    .into()
}
