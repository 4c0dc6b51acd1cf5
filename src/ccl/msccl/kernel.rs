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
//! The gpu's input (and output, scratch) buffers are `nchunks` (`s_chunks`)
//! chunks of `⌈share / nchunks⌉` elements in TCM (the share itself when it
//! divides evenly; else a copy whose last chunk is padded with zeros, never
//! copied back); its thread blocks run concurrently, each step in order
//! after the step it depends on, and a tb's sends and receives go over
//! the IPCQ direction of its (peer, channel) connection
//! ([`super::wiring`]). A step moves `cnt` chunks (a message of up to one
//! IPCQ slot is combined in its slot; a larger one is received into
//! scratch first). `Avg` divides the gpu's output share once.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::ccl::helpers::{Ring, TileSplit, finish_in_place, slice};
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
    let cubes = args.cubes() as usize;
    if args.tile.n_elem < cubes {
        return Err(KernelError::failed(format!(
            "msccl: a tile of {} elements cannot be cut into {cubes} cube shares",
            args.tile.n_elem
        )));
    }
    let rank = args.sip_rank as usize;
    let (tl, args, program) = (&tl, &args, &*program);
    let gpu = program.gpu(rank);
    let links = &links[rank];
    match (placement, tl.program_id(0)) {
        (Placement::Beside, _) => {
            cube_ring(tl, args, |share| async move {
                let run = GpuRun::new(tl, args, program, links, Some(&share))?;
                if run.input.addr() != share.addr() {
                    tl.store(&run.input, &share).await?;
                }
                let out = run.program(gpu).await?;
                if out.addr() != share.addr() {
                    tl.store(&share, &out).await?;
                }
                Ok(())
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
            let run = GpuRun::new(tl, args, program, links, None)?;
            let input = tl.view(run.input.addr(), &[run.share], args.dtype)?;
            tl.recv_into(TO_CUBE_RING, input.shape(), args.dtype, input.addr())
                .await?;
            let out = run.program(gpu).await?;
            tl.send(TO_CUBE_RING, &out).await
        }
    }
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
/// turn the owned share into the result of all ranks, all-gathers the
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
    reduce(slice(tl, &acc, &ring.owned(parts))?).await?;
    ring.all_gather(tl, &acc, parts).await?;
    tl.store(tile, &acc).await
}

/// One gpu program's run on its share.
struct GpuRun<'a> {
    tl: &'a Tl,
    args: &'a KernelArgs,
    links: &'a Links,
    /// Elements of this cube's share.
    share: usize,
    /// Elements per chunk.
    chunk: usize,
    input: TensorHandle,
    output: TensorHandle,
    scratch: Option<TensorHandle>,
}

impl<'a> GpuRun<'a> {
    /// The buffers: the input is `share` itself when its chunks are whole.
    fn new(
        tl: &'a Tl,
        args: &'a KernelArgs,
        program: &Program,
        links: &'a Links,
        share: Option<&TensorHandle>,
    ) -> Result<Self, KernelError> {
        let ring = cube_ring_of(tl, args);
        let parts = TileSplit::new(ring.len as u64, args.tile.n_elem as u64, args.dtype);
        let share_len = ring.owned(parts).n_elem as usize;
        let chunk = share_len.div_ceil(program.nchunks);
        let gpu = program.gpu(args.sip_rank as usize);
        let buffer = |chunks: usize| tl.alloc(&[chunks * chunk], args.dtype);
        let input = match share {
            Some(share) if chunk * program.nchunks == share_len => share.clone(),
            _ => buffer(program.nchunks)?,
        };
        let output = match program.inplace {
            true => input.clone(),
            false => buffer(program.nchunks)?,
        };
        let scratch = match gpu.scratch_chunks {
            0 => None,
            n => Some(buffer(n)?),
        };
        Ok(GpuRun {
            tl,
            args,
            links,
            share: share_len,
            chunk,
            input,
            output,
            scratch,
        })
    }

    /// Runs every tb of `gpu` on the input; the output's share, finished.
    async fn program(&self, gpu: &Gpu) -> Result<TensorHandle, KernelError> {
        let done = Done::new(self.args.sip_rank, gpu);
        let tbs = gpu.tbs.iter().enumerate();
        let runs = tbs.map(|(id, tb)| self.thread_block(id, tb, &done));
        futures::future::try_join_all(runs).await?;
        let out = self
            .tl
            .view(self.output.addr(), &[self.share], self.args.dtype)?;
        finish_in_place(self.tl, self.args, &out).await?;
        Ok(out)
    }

    async fn thread_block(
        &self,
        id: usize,
        tb: &ThreadBlock,
        done: &Done,
    ) -> Result<(), KernelError> {
        let send = tb.send.map(|p| self.links[&(p, tb.chan)]);
        let recv = tb.recv.map(|p| self.links[&(p, tb.chan)]);
        for (index, step) in tb.steps.iter().enumerate() {
            if let Some(dep) = step.dep
                && let Some(event) = done.events.get(&dep)
            {
                event.wait().await;
            }
            self.step(step, send, recv).await?;
            if let Some(event) = done.events.get(&(id, index)) {
                event.set();
            }
        }
        Ok(())
    }

    /// `cnt` chunks of a buffer from `span.off`.
    fn span(&self, span: Span, cnt: usize) -> Result<TensorHandle, KernelError> {
        let base = match span.buffer {
            Buffer::Input => &self.input,
            Buffer::Output => &self.output,
            Buffer::Scratch => self.scratch.as_ref().ok_or_else(|| {
                KernelError::failed("msccl: a step uses scratch but s_chunks is 0")
            })?,
        };
        let dtype = self.args.dtype;
        let addr = base.addr() + (span.off * self.chunk) as u64 * dtype.size();
        self.tl.view(addr, &[cnt * self.chunk], dtype)
    }

    async fn step(
        &self,
        step: &Step,
        send: Option<Dir>,
        recv: Option<Dir>,
    ) -> Result<(), KernelError> {
        let tl = self.tl;
        let kind = step.kind;
        let src = match kind.reads_src() {
            true => Some(self.span(step.src, step.cnt)?),
            false => None,
        };
        let dst = match kind.writes_dst() {
            true => Some(self.span(step.dst, step.cnt)?),
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
