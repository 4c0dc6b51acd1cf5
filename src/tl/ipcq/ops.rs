//! The IPCQ calls of [`Tl`]: `send`, `send_raw`, `recv`, `recv_into`,
//! `recv_any`, `recv_async` / `wait`, `release` (see the `ipcq` module
//! docs for timing and the slot-release rule).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::hw::explain;
use crate::mem::DType;
use crate::sim::{self, SimDuration};
use crate::tl::handle::checked_bytes;
use crate::tl::{Address, KernelError, PeCoord, Shape, TensorHandle, Tl};
use crate::topology::MemSpace;

use super::ring::{Message, Ring};
use super::{Backpressure, Dir, IpcqError, IpcqNetwork, Mismatch, ns_one_decimal};

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
    /// the doorbell has landed.
    pub async fn send(&self, dir: Dir, src: &TensorHandle) -> Result<(), KernelError> {
        let args = SendArgs {
            src_addr: src.addr(),
            nbytes: src.bytes(),
            shape: Shape::from_slice(src.shape()),
            dtype: src.dtype(),
            space: src.space(),
        };
        self.send_raw(dir, args).await
    }

    /// [`send`](Self::send) in keyword form. A message larger than a slot
    /// travels as slot-sized segments, in order: each waits for its credit,
    /// and the segments whose credits are in hand copy concurrently (up to
    /// the DMA engine's `max_outstanding`); the send returns when the last
    /// doorbell has landed.
    pub async fn send_raw(&self, dir: Dir, args: SendArgs) -> Result<(), KernelError> {
        let ring = self.ring(dir, "send")?;
        self.check_send(&args)?;
        let segments = Message::segments(args.nbytes, ring.slot_bytes);
        if segments == 1 {
            return self.send_one(&ring, &args).await;
        }
        let mut in_flight = Vec::new();
        for segment in 0..segments {
            let seq = self.claim(&ring).await?;
            let offset = segment * ring.slot_bytes;
            let len = (args.nbytes - offset).min(ring.slot_bytes);
            tracing::debug!(
                target: "kernbench::ccl",
                "[ccl t={} send] {} dir={} nbytes={} seq={}",
                ns_one_decimal(sim::now()), self.program.coord, dir, len, seq
            );
            ring.set_message(seq, message(&args, segment, segments));
            ring.set_unit(
                seq,
                self.program
                    .device
                    .fabric()
                    .is_one_packet(&ring.doorbell, len),
            );
            let copy = self.copy_segment(ring.clone(), seq, args.src_addr + offset, len);
            in_flight.push(sim::spawn("ipcq segment", copy));
        }
        for copy in in_flight {
            copy.await
                .map_err(|e| KernelError::failed(format!("send segment: {e}")))??;
        }
        Ok(())
    }

    /// A message of one segment. In flow mode, one packet from a TCM into
    /// a TCM slot is booked whole at once and the send sleeps once, with
    /// no future between it and the booking (ADR-0048, ADR-0057); any
    /// other message goes through [`copy_segment`](Self::copy_segment).
    async fn send_one(&self, ring: &Rc<Ring>, args: &SendArgs) -> Result<(), KernelError> {
        let seq = match ring.try_claim() {
            Some(claimed) => claimed?,
            None => self.claim(ring).await?,
        };
        let len = args.nbytes;
        tracing::debug!(
            target: "kernbench::ccl",
            "[ccl t={} send] {} dir={} nbytes={} seq={}",
            ns_one_decimal(sim::now()), self.program.coord, ring.spec.send_dir, len, seq
        );
        ring.set_message(seq, message(args, 0, 1));
        let p = &self.program;
        ring.set_unit(seq, p.device.fabric().is_one_packet(&ring.doorbell, len));
        let copy = (args.src_addr, ring.slot(seq), len);
        let signal = (Some(&ring.doorbell), &ring.copy_routes);
        let booked = p.device.copy_now(&p.dma, p.node, copy, signal)?;
        let Some(booked) = booked else {
            return self.copy_segment(ring.clone(), seq, copy.0, len).await;
        };
        explain::sleep_until(booked.done).await;
        booked.finish(&p.device)?;
        ring.doorbell_landed(seq);
        Ok(())
    }

    /// Copies `len` bytes from `src` into slot `seq` of `ring` with this
    /// PE's PE_DMA and rings the doorbell.
    fn copy_segment(
        &self,
        ring: Rc<Ring>,
        seq: u64,
        src: u64,
        len: u64,
    ) -> impl Future<Output = Result<(), KernelError>> + 'static {
        let p = &self.program;
        let (device, dma, node) = (p.device.clone(), p.dma.clone(), p.node);
        async move {
            let copy = (src, ring.slot(seq), len);
            device
                .dma_copy_then_signal(&dma, node, copy, &ring.doorbell)
                .await?;
            ring.doorbell_landed(seq);
            Ok(())
        }
    }

    /// Claims a slot, waiting for a credit as the backpressure mode says.
    async fn claim(&self, ring: &Rc<Ring>) -> Result<u64, KernelError> {
        let params = *self.network("send")?.params();
        let blocked = sim::now();
        let seq = ring.claim().await?;
        let waited = sim::now().saturating_since(blocked);
        if params.backpressure == Backpressure::Poll && waited > SimDuration::ZERO {
            let period = params.poll_interval.as_ps().max(1);
            let ticks = waited.as_ps().div_ceil(period);
            sim::sleep(SimDuration::from_ps(ticks * period - waited.as_ps())).await;
        }
        Ok(seq)
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
    pub async fn recv(
        &self,
        dir: Dir,
        shape: &[usize],
        dtype: DType,
    ) -> Result<TensorHandle, KernelError> {
        // As `recv_async(..).await`, without boxing the future.
        let (ring, ticket) = self.next_ticket(dir)?;
        self.take_slot(&ring, ticket, shape, dtype).await
    }

    /// Starts a receive from `dir`: its slot is the next one of the ring,
    /// in call order, whenever it is waited for.
    pub fn recv_async(&self, dir: Dir, shape: &[usize], dtype: DType) -> RecvFuture {
        let ticket = self.next_ticket(dir);
        let (tl, shape) = (self.clone(), Shape::from_slice(shape));
        RecvFuture(Box::pin(async move {
            let (ring, ticket) = ticket?;
            tl.take_slot(&ring, ticket, &shape, dtype).await
        }))
    }

    /// The ring of `dir` and the next receive's ticket on it (releasing
    /// the slots this program holds there).
    fn next_ticket(&self, dir: Dir) -> Result<(Rc<Ring>, u64), KernelError> {
        let ring = self.ring(dir, "receive")?;
        self.release_held(|r| Rc::ptr_eq(r, &ring));
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
        self.release_held(|r| Rc::ptr_eq(r, &ring));
        let segments = Message::segments(dst.bytes(), ring.slot_bytes);
        let first = ring.tickets(segments);
        let p = &self.program;
        for segment in 0..segments {
            let ticket = first + segment;
            let sent = ring.delivered(ticket).await;
            self.check_strict(&ring, &sent, shape, dtype)?;
            check_segment(&ring, &sent, segment, segments)?;
            let offset = segment * ring.slot_bytes;
            let len = (dst.bytes() - offset).min(ring.slot_bytes);
            self.log_recv(&ring, len);
            let copy =
                p.device
                    .dma_copy(&p.dma, p.node, ring.slot(ticket), dst.addr() + offset, len);
            copy.await?;
            ring.release(p.device.fabric(), ticket);
        }
        Ok(dst)
    }

    /// Releases a slot from `recv` early (its credit goes back to the
    /// sender).
    pub fn release(&self, slot: &TensorHandle) -> Result<(), KernelError> {
        let port = self.port("release")?;
        let index = port.held.borrow().iter().position(|(ring, ticket)| {
            ring.spec.space == slot.space() && ring.slot(*ticket) == slot.addr()
        });
        let Some(index) = index else {
            let (addr, pe) = (slot.addr(), self.program.coord);
            return Err(IpcqError::NotHeld { addr, pe }.into());
        };
        let (ring, ticket) = port.held.borrow_mut().remove(index);
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
        let sent = match ring.try_delivered(ticket) {
            Some(sent) => sent,
            None => ring.delivered(ticket).await,
        };
        self.port("recv")?
            .held
            .borrow_mut()
            .push((ring.clone(), ticket));
        let bytes = checked_bytes("recv", shape, dtype)?;
        fits("recv", ring, bytes.max(sent.nbytes))?;
        self.check_strict(ring, &sent, shape, dtype)?;
        self.log_recv(ring, sent.nbytes);
        TensorHandle::new("recv", (ring.slot(ticket), ring.spec.space), shape, dtype)
    }

    fn log_recv(&self, ring: &Ring, nbytes: u64) {
        tracing::debug!(
            target: "kernbench::ccl",
            "[ccl t={} recv] {} dir={} nbytes={}",
            ns_one_decimal(sim::now()), self.program.coord, ring.spec.label, nbytes
        );
    }

    fn check_strict(
        &self,
        ring: &Ring,
        sent: &Message,
        shape: &[usize],
        dtype: DType,
    ) -> Result<(), KernelError> {
        let strict = self.network("recv")?.params().strict_validation;
        if !strict || (sent.shape[..] == *shape && sent.dtype == dtype) {
            return Ok(());
        }
        let s = &ring.spec;
        Err(IpcqError::Mismatch(Box::new(Mismatch {
            sender: s.sender,
            send_dir: s.send_dir,
            sent_shape: sent.shape.to_vec(),
            sent_dtype: sent.dtype,
            receiver: s.receiver,
            label: s.label,
            recv_shape: shape.to_vec(),
            recv_dtype: dtype,
        }))
        .into())
    }

    fn release_held(&self, which: impl Fn(&Rc<Ring>) -> bool) {
        let Some(port) = &self.program.ipcq else {
            return;
        };
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
    fn ring(&self, dir: Dir, side: &'static str) -> Result<Rc<Ring>, IpcqError> {
        let port = self.port(side)?;
        let rings = if side == "send" {
            &port.sends
        } else {
            &port.receives
        };
        let ring = rings.iter().find(|(d, _)| *d == dir);
        let ring = ring.map(|(_, ring)| ring.clone());
        ring.ok_or_else(|| invalid(&port.network, self.program.coord, side, dir))
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

fn message(args: &SendArgs, segment: u64, segments: u64) -> Message {
    Message {
        shape: args.shape.clone(),
        dtype: args.dtype,
        nbytes: args.nbytes,
        segment,
        segments,
    }
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
