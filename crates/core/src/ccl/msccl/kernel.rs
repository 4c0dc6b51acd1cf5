//! The PE programs that run an MSCCL [`Program`] (ADR-0035).
//!
//! The SIP's tiles are reduced over a ring of its cubes first
//! (reduce-scatter, PE 0 of each cube, `E`/`W`), so that cube `c` owns the
//! SIP's sum of share `(c + 1) mod cubes` of the tile; every cube then runs
//! the MSCCL gpu program on its share, exchanging with the same cube of
//! the peer ranks, and the results are all-gathered round the cubes. The
//! program runs on PE 0 itself when its connections leave the cube ring
//! its directions ([`Placement::Beside`]), else on PE 1 of the cube
//! ([`Placement::Apart`]), to which PE 0 hands the share (`N`) and which
//! hands the result back.
//!
//! The gpu program runs over the share piece by piece ([`GpuRun`]): a
//! piece is `nchunks` chunks of at most [`message_cap`] over the largest
//! step `cnt`, so every message fits one IPCQ slot; its input is the piece
//! itself when it is whole chunks of the share, else a copy padded to whole
//! chunks (never copied back); output (unless in place) and scratch are
//! TCM buffers of one piece. A piece's thread blocks run concurrently,
//! each step in order after the step it depends on, and a tb's sends and
//! receives go over the IPCQ direction of its (peer, channel) connection
//! ([`super::wiring`]). `Avg` divides the share once, after its pieces.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::ccl::helpers::{MAX_CHUNK, Ring, TileSplit, finish_in_place, slice};
use crate::ccl::{KernelArgs, ReduceOp, reduce_received};
use crate::sim::Event;
use crate::tl::{Dir, KernelError, TensorHandle, Tl};

use super::program::{Buffer, Gpu, Program, Span, Step, StepKind, ThreadBlock};
use super::wiring::Links;

/// Where a cube's gpu program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On PE 0, beside the cube ring.
    Beside,
    /// On PE 1; PE 0 hands it the share and takes the result back.
    Apart,
}

/// PE 1's direction to PE 0 of its cube (PE 0 uses the opposite, `N`).
pub const TO_CUBE_RING: Dir = Dir::S;

/// One program of the kernel (see the module docs).
pub async fn run(
    tl: Tl,
    args: KernelArgs,
    program: Rc<Program>,
    links: Rc<Vec<Links>>,
    placement: Placement,
) -> Result<(), KernelError> {
    let rank = args.sip_rank as usize;
    let (tl, args, program) = (&tl, &args, &*program);
    let gpu = program.gpu(rank);
    let links = &links[rank];
    match (placement, tl.program_id(0)) {
        (Placement::Beside, _) => {
            cube_ring(tl, args, |share| async move {
                let run = GpuRun::new(tl, args, program, links, share.elements() as usize)?;
                run.share(gpu, &share).await
            })
            .await
        }
        (Placement::Apart, 0) => {
            cube_ring(tl, args, |share| async move {
                tl.send(TO_CUBE_RING.opposite(), &share).await?;
                let back = tl.recv_into(
                    TO_CUBE_RING.opposite(),
                    share.shape(),
                    share.dtype(),
                    share.addr(),
                );
                back.await.map(drop)
            })
            .await
        }
        (Placement::Apart, _) => {
            let elements = owned_elements(tl, args);
            if elements == 0 {
                return Ok(());
            }
            let share = tl.alloc(&[elements], args.dtype)?;
            tl.recv_into(TO_CUBE_RING, share.shape(), args.dtype, share.addr())
                .await?;
            let run = GpuRun::new(tl, args, program, links, elements)?;
            run.share(gpu, &share).await?;
            tl.send(TO_CUBE_RING, &share).await
        }
    }
}

/// The elements of this cube's share of the tile (0 when the tile has
/// fewer elements than the SIP has cubes).
fn owned_elements(tl: &Tl, args: &KernelArgs) -> usize {
    let ring = cube_ring_of(tl, args);
    let parts = TileSplit::new(ring.len as u64, args.tile.n_elem as u64, args.dtype);
    ring.owned(parts).n_elem as usize
}

/// The largest message a step of the program sends: one IPCQ slot, at most
/// [`MAX_CHUNK`] (so that the TCM a program needs is known from the tile
/// alone, `Msccl::tcm_bytes`).
pub fn message_cap(slot_bytes: u64) -> u64 {
    slot_bytes.min(MAX_CHUNK) / 4 * 4
}

/// The ring over the SIP's cubes: this cube's position in it.
fn cube_ring_of(tl: &Tl, args: &KernelArgs) -> Ring {
    Ring {
        pos: tl.program_id(1) as usize,
        len: args.cubes() as usize,
        send: Dir::E,
        recv: Dir::W,
        max_message: args.slot_bytes / 4 * 4,
    }
}

/// PE 0: loads the tile, reduce-scatters it over the cubes, lets `reduce`
/// turn the owned share into the result of all ranks (not called for an
/// empty share: a tile of fewer elements than cubes), all-gathers the
/// shares over the cubes and stores the tile.
async fn cube_ring<F, Fut>(tl: &Tl, args: &KernelArgs, reduce: F) -> Result<(), KernelError>
where
    F: FnOnce(TensorHandle) -> Fut,
    Fut: Future<Output = Result<(), KernelError>>,
{
    let (n, dtype) = (args.tile.n_elem, args.dtype);
    let tile = args.tile_addr(tl.program_id(1))?;
    let acc = tl.load(tile, &[n], dtype).await?;
    let ring = cube_ring_of(tl, args);
    let parts = TileSplit::new(ring.len as u64, n as u64, dtype);
    ring.reduce_scatter(tl, args.op()?, &acc, parts).await?;
    let owned = ring.owned(parts);
    if owned.n_elem > 0 {
        reduce(slice(tl, &acc, &owned)?).await?;
    }
    ring.all_gather(tl, &acc, parts).await?;
    tl.store(tile, &acc).await
}

/// One gpu program's runs over a share, piece by piece: a piece is
/// `nchunks` chunks small enough that a step's `cnt` chunks are at most
/// [`message_cap`], so every message fits one IPCQ slot and no ring waits
/// on a send larger than its slots (the share's pieces are independent:
/// an all-reduce is elementwise).
struct GpuRun<'a> {
    tl: &'a Tl,
    args: &'a KernelArgs,
    links: &'a Links,
    nchunks: usize,
    inplace: bool,
    /// Elements per chunk of a whole piece.
    chunk: usize,
    /// A piece's input when it is not whole chunks of the share (the
    /// last, padded), its output unless in place, and its scratch.
    padded: TensorHandle,
    output: Option<TensorHandle>,
    scratch: Option<TensorHandle>,
}

/// One piece's buffers and chunk.
struct Piece {
    input: TensorHandle,
    output: TensorHandle,
    chunk: usize,
}

impl<'a> GpuRun<'a> {
    /// The piece buffers for a share of `share` elements.
    fn new(
        tl: &'a Tl,
        args: &'a KernelArgs,
        program: &Program,
        links: &'a Links,
        share: usize,
    ) -> Result<Self, KernelError> {
        let per_message = (message_cap(args.slot_bytes) / args.dtype.size()) as usize;
        let by_message = (per_message / program.max_cnt()).max(1);
        let chunk = share.div_ceil(program.nchunks).min(by_message);
        let gpu = program.gpu(args.sip_rank as usize);
        let buffer = |chunks: usize| tl.alloc(&[chunks * chunk], args.dtype);
        Ok(GpuRun {
            tl,
            args,
            links,
            nchunks: program.nchunks,
            inplace: program.inplace,
            chunk,
            padded: buffer(program.nchunks)?,
            output: (!program.inplace)
                .then(|| buffer(program.nchunks))
                .transpose()?,
            scratch: (gpu.scratch_chunks > 0)
                .then(|| buffer(gpu.scratch_chunks))
                .transpose()?,
        })
    }

    /// Runs `gpu` on every piece of `share` in turn, the results back in
    /// `share`, finished (`Avg` divided) once.
    async fn share(&self, gpu: &Gpu, share: &TensorHandle) -> Result<(), KernelError> {
        let (tl, dtype) = (self.tl, self.args.dtype);
        let piece = self.chunk * self.nchunks;
        let elements = share.elements() as usize;
        for start in (0..elements).step_by(piece) {
            let len = piece.min(elements - start);
            let part = tl.view(share.addr() + start as u64 * dtype.size(), &[len], dtype)?;
            let piece = self.piece(&part).await?;
            self.program(gpu, &piece).await?;
            let out = tl.view(piece.output.addr(), &[len], dtype)?;
            if out.addr() != part.addr() {
                tl.store(&part, &out).await?;
            }
        }
        finish_in_place(tl, self.args, share).await
    }

    /// The buffers of the piece `part`: itself as input when it is whole
    /// chunks, else a copy padded to whole ones.
    async fn piece(&self, part: &TensorHandle) -> Result<Piece, KernelError> {
        let elements = part.elements() as usize;
        let chunk = elements.div_ceil(self.nchunks);
        let input = if chunk * self.nchunks == elements {
            part.clone()
        } else {
            let padded = self
                .tl
                .view(self.padded.addr(), &[elements], part.dtype())?;
            self.tl.store(&padded, part).await?;
            self.padded.clone()
        };
        let output = match (&self.output, self.inplace) {
            (Some(output), false) => output.clone(),
            _ => input.clone(),
        };
        Ok(Piece {
            input,
            output,
            chunk,
        })
    }

    /// Runs every tb of `gpu` on `piece`.
    async fn program(&self, gpu: &Gpu, piece: &Piece) -> Result<(), KernelError> {
        let done = Done::new(self.args.sip_rank, gpu);
        let tbs = gpu.tbs.iter().enumerate();
        let runs = tbs.map(|(id, tb)| self.thread_block(id, tb, &done, piece));
        futures::future::try_join_all(runs).await?;
        Ok(())
    }

    async fn thread_block(
        &self,
        id: usize,
        tb: &ThreadBlock,
        done: &Done,
        piece: &Piece,
    ) -> Result<(), KernelError> {
        let send = tb.send.map(|p| self.links[&(p, tb.chan)]);
        let recv = tb.recv.map(|p| self.links[&(p, tb.chan)]);
        for (index, step) in tb.steps.iter().enumerate() {
            if let Some(dep) = step.dep
                && let Some(event) = done.events.get(&dep)
            {
                event.wait().await;
            }
            self.step(step, piece, (send, recv)).await?;
            if let Some(event) = done.events.get(&(id, index)) {
                event.set();
            }
        }
        Ok(())
    }

    /// `cnt` chunks of one of `piece`'s buffers from `span.off`.
    fn span(&self, piece: &Piece, span: Span, cnt: usize) -> Result<TensorHandle, KernelError> {
        let base = match span.buffer {
            Buffer::Input => &piece.input,
            Buffer::Output => &piece.output,
            Buffer::Scratch => self.scratch.as_ref().ok_or_else(|| {
                KernelError::failed("msccl: a step uses scratch but s_chunks is 0")
            })?,
        };
        let dtype = self.args.dtype;
        let addr = base.addr() + (span.off * piece.chunk) as u64 * dtype.size();
        self.tl.view(addr, &[cnt * piece.chunk], dtype)
    }

    async fn step(
        &self,
        step: &Step,
        piece: &Piece,
        (send, recv): (Option<Dir>, Option<Dir>),
    ) -> Result<(), KernelError> {
        let tl = self.tl;
        let kind = step.kind;
        let src = match kind.reads_src() {
            true => Some(self.span(piece, step.src, step.cnt)?),
            false => None,
        };
        let dst = match kind.writes_dst() {
            true => Some(self.span(piece, step.dst, step.cnt)?),
            false => None,
        };
        // The parse checked that a sending (receiving) step's tb has a peer.
        let send_dir = || send.ok_or_else(|| KernelError::failed("msccl: no send peer"));
        let recv_dir = || recv.ok_or_else(|| KernelError::failed("msccl: no recv peer"));
        let op = || self.args.op();
        match (kind, src, dst) {
            (StepKind::Nop, ..) => Ok(()),
            (StepKind::Send, Some(src), _) => tl.send(send_dir()?, &src).await,
            (StepKind::Recv, _, Some(dst)) => self.recv_into(recv_dir()?, &dst).await,
            (StepKind::RecvCopySend, _, Some(dst)) => {
                self.recv_into(recv_dir()?, &dst).await?;
                tl.send(send_dir()?, &dst).await
            }
            (StepKind::RecvReduceSend, Some(src), _) => {
                let received = self.receive(recv_dir()?, &src).await?;
                let sum = combined(tl, op()?, &src, received.handle()).await?;
                received.done(tl)?;
                tl.send(send_dir()?, &sum).await?;
                tl.free(&sum)
            }
            (StepKind::RecvReduceCopy, Some(src), Some(dst)) => {
                self.reduce_copy(recv_dir()?, &src, &dst).await
            }
            (StepKind::RecvReduceCopySend, Some(src), Some(dst)) => {
                self.reduce_copy(recv_dir()?, &src, &dst).await?;
                tl.send(send_dir()?, &dst).await
            }
            (StepKind::Copy, Some(src), Some(dst)) if src.addr() == dst.addr() => Ok(()),
            (StepKind::Copy, Some(src), Some(dst)) => tl.store(&dst, &src).await,
            (StepKind::Reduce, Some(src), Some(dst)) => {
                tl.apply_assign(op()?.binary(), &dst, &src).await
            }
            _ => unreachable!("every step kind has the buffers it reads and writes"),
        }
    }

    /// `dst = src ∘ received`.
    async fn reduce_copy(
        &self,
        dir: Dir,
        src: &TensorHandle,
        dst: &TensorHandle,
    ) -> Result<(), KernelError> {
        let received = self.receive(dir, dst).await?;
        if src.addr() != dst.addr() {
            self.tl.store(dst, src).await?;
        }
        reduce_received(self.tl, self.args.op()?, dst, received.handle()).await?;
        received.done(self.tl)
    }

    async fn recv_into(&self, dir: Dir, dst: &TensorHandle) -> Result<(), KernelError> {
        let tl = self.tl;
        tl.recv_into(dir, dst.shape(), dst.dtype(), dst.addr())
            .await
            .map(drop)
    }

    /// The next message of `dir`, `like`'s shape (the parse matched every
    /// send's size with its receive's): its slot when it fits one, else a
    /// scratch copy.
    async fn receive(&self, dir: Dir, like: &TensorHandle) -> Result<Received, KernelError> {
        let tl = self.tl;
        let (shape, dtype) = (like.shape(), like.dtype());
        if like.bytes() <= self.args.slot_bytes {
            return Ok(Received::Slot(tl.recv(dir, shape, dtype).await?));
        }
        let copy = tl.alloc(shape, dtype)?;
        tl.recv_into(dir, shape, dtype, copy.addr()).await?;
        Ok(Received::Copy(copy))
    }
}

/// A received message: its slot, or a scratch copy of a larger one.
enum Received {
    Slot(TensorHandle),
    Copy(TensorHandle),
}

impl Received {
    fn handle(&self) -> &TensorHandle {
        match self {
            Received::Slot(h) | Received::Copy(h) => h,
        }
    }

    /// Gives the slot back (its credit to the sender) or frees the copy.
    fn done(&self, tl: &Tl) -> Result<(), KernelError> {
        match self {
            Received::Slot(h) => tl.release(h),
            Received::Copy(h) => tl.free(h),
        }
    }
}

/// `a ∘ b` in new scratch (`b` loaded into TCM first if its slot is not
/// in TCM).
async fn combined(
    tl: &Tl,
    op: ReduceOp,
    a: &TensorHandle,
    b: &TensorHandle,
) -> Result<TensorHandle, KernelError> {
    if b.space() != tl.tcm() {
        let local = tl.load(b, b.shape(), b.dtype()).await?;
        let out = combined_in_tcm(tl, op, a, &local).await?;
        tl.free(&local)?;
        return Ok(out);
    }
    combined_in_tcm(tl, op, a, b).await
}

async fn combined_in_tcm(
    tl: &Tl,
    op: ReduceOp,
    a: &TensorHandle,
    b: &TensorHandle,
) -> Result<TensorHandle, KernelError> {
    match op {
        ReduceOp::Sum | ReduceOp::Avg => tl.add(a, b).await,
        ReduceOp::Product => tl.mul(a, b).await,
        ReduceOp::Min => tl.minimum(a, b).await,
        ReduceOp::Max => tl.maximum(a, b).await,
    }
}

/// The completion events of the steps other tbs wait for.
struct Done {
    events: BTreeMap<(usize, usize), Event>,
}

impl Done {
    fn new(rank: u32, gpu: &Gpu) -> Done {
        let deps = gpu
            .tbs
            .iter()
            .flat_map(|tb| tb.steps.iter().filter_map(|s| s.dep));
        let events = deps
            .map(|(tb, step)| {
                let name = format!("msccl gpu {rank} tb {tb} step {step}");
                ((tb, step), Event::new(&name))
            })
            .collect();
        Done { events }
    }
}
