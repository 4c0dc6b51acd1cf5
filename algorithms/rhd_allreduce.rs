//! `rhd_allreduce` (Rabenseifner): recursive-halving reduce-scatter, then
//! recursive-doubling all-gather, over every endpoint (PE 0 of each cube
//! of each SIP), with the standard fold for a count that is not a power of
//! two (`helpers::Doubling`).
//!
//! The core of `P` endpoints cuts the tile into `P` parts. Reduce-scatter:
//! at step `k` (`k = log2 P − 1 … 0`) an endpoint splits the parts it is
//! responsible for in two, sends the half its partner `endpoint xor 2^k`
//! keeps and adds the partner's copy of the half it keeps; at the end it
//! owns one piece, summed once. All-gather: the steps in reverse, each
//! endpoint sending everything it owns and storing what it gets, so every
//! endpoint ends with the owners' bytes. Extras fold in and out as in
//! `rd_allreduce`. Wiring: the algorithm's own tables (`neighbors`).
//!
//! Requires at most 256 endpoints (128 for a non-power of two). Any tile of
//! at least one element: with fewer elements than `P` some parts are
//! empty and their exchanges send nothing. A tile larger than
//! [`SEGMENT`] goes through the algorithm one segment at a time, and a
//! message larger than ccl.yaml `params.chunk` (default one IPCQ slot) as
//! several (`helpers::exchange`).
//!
//! Cost ([`RhdAllreduce::model`]): the slowest core endpoint's chain of
//! sends: fold-in and fold-out of the tile `S`, and `S/2, S/4, …, S/P`
//! to its partners on the way down and again on the way up, each `α_k +
//! m/β_k` of that partner's route — about `2 log2 P · α + 2 (P − 1)/P ·
//! S/β`.

use kernbench::ccl::cost::{CostError, Network};
use kernbench::ccl::helpers::{
    ChunkDefault, Doubling, Exchange, Fold, MAX_CHUNK, TileView, exchange, finish_in_place,
    message_bytes, messages, slice, span, split_tile,
};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::topology::NeighborMap;
use kernbench::ccl::{
    CclAlgorithm, Collective, DevAddr, KernelArgs, Params, ReduceOp, Unsupported, WorldShape,
    reduce_received,
};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, TensorHandle, Tl};

struct RhdAllreduce;

/// The largest message when ccl.yaml gives no `params.chunk`: one default
/// IPCQ slot (at most the configured one), so a half, quarter, … of a tile
/// that fits a slot is one message, as before chunking.
const MESSAGE: ChunkDefault = ChunkDefault::Fixed(MAX_CHUNK);

/// The largest segment of the tile run through the algorithm at once (in
/// TCM): a quarter of the default 8 MiB TCM.
const SEGMENT: u64 = 2 << 20;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RhdAllreduce)
}

impl CclAlgorithm for RhdAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("rhd_allreduce", rhd_allreduce)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(MESSAGE)
    }

    /// A segment in TCM and, for `Avg`, the finished copy of the piece it
    /// owns (at most the segment).
    fn tcm_bytes(&self, tile_bytes: u64, _: &Params) -> u64 {
        2 * tile_bytes.min(SEGMENT)
    }

    fn supports(&self, shape: &WorldShape, _: &Params) -> Result<(), Unsupported> {
        Doubling::new(0, shape.endpoints()).map(|_| ())
    }

    fn neighbors(&self, endpoint: usize, n: usize, _: &mut NeighborMap) -> Option<NeighborMap> {
        Doubling::new(endpoint, n).ok().map(|d| d.table())
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let elem = args.dtype.size();
        let tile = args.tile.n_elem as u64;
        // The step with partner distance 2^k moves 2^k parts, each way.
        let step = |d: &Doubling, k: usize| {
            let bytes = tile / d.core as u64 * (1 << k) * elem;
            vec![bytes, bytes]
        };
        Doubling::slowest_chain(net, args.endpoints(), step, tile * elem)
    }
}

async fn rhd_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let fail = |e: Unsupported| KernelError::failed(format!("rhd_allreduce: {e}"));
    let doubling = Doubling::new(args.endpoint(cube), args.endpoints()).map_err(fail)?;
    let (n, dtype) = (args.tile.n_elem as u64, args.dtype);
    let tile = args.tile_addr(cube)?;
    let max_message = message_bytes(&args, MESSAGE);
    let segment = (SEGMENT / dtype.size()).max(1);
    for part in split_tile(n.div_ceil(segment), n, dtype) {
        let addr = tile + part.offset;
        let acc = tl.load(addr, &[part.n_elem as usize], dtype).await?;
        let segment = Segment {
            acc: &acc,
            addr,
            max_message,
        };
        segment.all_reduce(&tl, &args, &doubling).await?;
        tl.free(&acc)?;
    }
    Ok(())
}

/// One segment of the tile, loaded into TCM at `acc`, from and back to
/// device address `addr`; messages of at most `max_message` bytes.
struct Segment<'a> {
    acc: &'a TensorHandle,
    addr: DevAddr,
    max_message: u64,
}

impl Segment<'_> {
    /// The whole segment as a chunk of itself.
    fn whole(&self) -> TileView {
        let n_elem = self.acc.shape().iter().product::<usize>() as u64;
        TileView::whole(n_elem, self.acc.dtype())
    }

    /// [`exchange`] with the partner in `dir`.
    async fn exchange<F, Fut>(
        &self,
        tl: &Tl,
        dir: Dir,
        (out, into): (TileView, TileView),
        merge: F,
    ) -> Result<(), KernelError>
    where
        F: Fn(TensorHandle, TensorHandle) -> Fut,
        Fut: std::future::Future<Output = Result<(), KernelError>>,
    {
        let how = Exchange {
            send: dir,
            recv: dir,
            max_message: self.max_message,
        };
        exchange(tl, self.acc, how, out, into, merge).await
    }

    /// Fold in, reduce-scatter, finish, all-gather, fold out, store.
    async fn all_reduce(
        &self,
        tl: &Tl,
        args: &KernelArgs,
        doubling: &Doubling,
    ) -> Result<(), KernelError> {
        let (op, whole, none) = (args.op()?, self.whole(), TileView::default());
        let reduce = |part: TensorHandle, received: TensorHandle| async move {
            reduce_received(tl, op, &part, &received).await
        };
        match doubling.fold() {
            Fold::Extra(dir) => return self.as_extra(tl, dir).await,
            Fold::Host(dir) => self.exchange(tl, dir, (none, whole), reduce).await?,
            Fold::None => {}
        }
        let parts = whole.split(doubling.core as u64, args.dtype);
        let owned = self.reduce_scatter(tl, op, doubling, &parts).await?;
        let mine = span(&parts, owned.clone());
        if mine.n_elem > 0 {
            finish_in_place(tl, args, &slice(tl, self.acc, &mine)?).await?;
        }
        self.all_gather(tl, doubling, &parts, owned).await?;
        if let Fold::Host(dir) = doubling.fold() {
            let store = |_: TensorHandle, _: TensorHandle| async { Ok(()) };
            self.exchange(tl, dir, (whole, none), store).await?;
        }
        tl.store(self.addr, self.acc).await
    }

    /// An extra's part: its segment to the host, the result back, each
    /// message stored straight from its slot.
    async fn as_extra(&self, tl: &Tl, dir: Dir) -> Result<(), KernelError> {
        let none = |_: TensorHandle, _: TensorHandle| async { Ok(()) };
        self.exchange(tl, dir, (self.whole(), TileView::default()), none)
            .await?;
        let dtype = self.acc.dtype();
        for message in messages(self.whole(), self.max_message, dtype) {
            let result = tl.recv(dir, &[message.n_elem as usize], dtype).await?;
            tl.store(self.addr + message.offset, &result).await?;
            tl.release(&result)?;
        }
        Ok(())
    }

    /// Recursive halving; returns the range of parts this endpoint owns.
    async fn reduce_scatter(
        &self,
        tl: &Tl,
        op: ReduceOp,
        d: &Doubling,
        parts: &[TileView],
    ) -> Result<std::ops::Range<usize>, KernelError> {
        let mut range = 0..parts.len();
        for k in (0..d.steps).rev() {
            let (partner, dir) = d.partner(k);
            let mid = (range.start + range.end) / 2;
            let (keep, give) = if d.endpoint < partner {
                (range.start..mid, mid..range.end)
            } else {
                (mid..range.end, range.start..mid)
            };
            let parts = (span(parts, give), span(parts, keep.clone()));
            let reduce = |part: TensorHandle, received: TensorHandle| async move {
                reduce_received(tl, op, &part, &received).await
            };
            self.exchange(tl, dir, parts, reduce).await?;
            range = keep;
        }
        Ok(range)
    }

    /// Recursive doubling of the owned parts back to the whole segment.
    async fn all_gather(
        &self,
        tl: &Tl,
        d: &Doubling,
        parts: &[TileView],
        mut owned: std::ops::Range<usize>,
    ) -> Result<(), KernelError> {
        for k in 0..d.steps {
            let (partner, dir) = d.partner(k);
            let len = owned.len();
            let theirs = if d.endpoint < partner {
                owned.end..owned.end + len
            } else {
                owned.start - len..owned.start
            };
            let parts = (span(parts, owned.clone()), span(parts, theirs.clone()));
            let store = |slot: TensorHandle, received: TensorHandle| async move {
                tl.store(&slot, &received).await
            };
            self.exchange(tl, dir, parts, store).await?;
            owned = owned.start.min(theirs.start)..owned.end.max(theirs.end);
        }
        Ok(())
    }
}
