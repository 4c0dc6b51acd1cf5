//! `rhd_allreduce` (Rabenseifner): recursive-halving reduce-scatter, then
//! recursive-doubling all-gather, over every endpoint (PE 0 of each cube
//! of each SIP), with the standard fold for a count that is not a power of
//! two (`helpers::Doubling`).
//!
//! The core of `P` endpoints cuts the tile into `P` pieces. Reduce-scatter:
//! at step `k` (`k = log2 P − 1 … 0`) an endpoint splits the pieces it is
//! responsible for in two, sends the half its partner `rank xor 2^k`
//! keeps and adds the partner's copy of the half it keeps; at the end it
//! owns one piece, summed once. All-gather: the steps in reverse, each
//! endpoint sending everything it owns and storing what it gets, so every
//! endpoint ends with the owners' bytes. Extras fold in and out as in
//! `rd_allreduce`. Wiring: the algorithm's own tables (`neighbors`).
//!
//! Requires at most 256 endpoints (128 for a non-power of two) and a tile
//! of at least `P` elements (one per piece).
//!
//! Cost ([`RhdAllreduce::model`]): the slowest core endpoint's chain of
//! sends: fold-in and fold-out of the tile `S`, and `S/2, S/4, …, S/P`
//! to its partners on the way down and again on the way up, each `α_k +
//! m/β_k` of that partner's route — about `2 log2 P · α + 2 (P − 1)/P ·
//! S/β`.

use kernbench::ccl::cost::{CostError, Network, sequence};
use kernbench::ccl::helpers::{Chunk, Doubling, Fold, chunked, finish_in_place, piece, span};
use kernbench::ccl::topology::NeighborMap;
use kernbench::ccl::{
    CclAlgorithm, Collective, KernelArgs, Params, ReduceOp, WorldShape, reduce_received,
};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, TensorHandle, Tl};

struct RhdAllreduce;

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

    fn supports(&self, shape: &WorldShape, _: &Params) -> Result<(), String> {
        Doubling::new(0, shape.endpoints()).map(|_| ())
    }

    fn neighbors(&self, rank: usize, n: usize, _: &mut NeighborMap) -> Option<NeighborMap> {
        Doubling::new(rank, n).ok().map(|d| d.table())
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        let elem = args.dtype.size();
        let tile = args.tile.n_elem as u64;
        let mut worst = SimDuration::ZERO;
        for rank in 0..n {
            let Ok(d) = Doubling::new(rank, n) else {
                return Ok(None);
            };
            if d.rank >= d.core {
                continue;
            }
            let mut sends = Vec::new();
            for k in 0..d.steps {
                // The step with partner distance 2^k moves 2^k pieces.
                let bytes = tile / d.core as u64 * (1 << k) * elem;
                let message = net.message(rank, d.partner(k).0, bytes)?;
                sends.extend([message, message]);
            }
            if let Some(extra) = d.fold_peer() {
                sends.push(net.message(extra, rank, tile * elem)?);
                sends.push(net.message(rank, extra, tile * elem)?);
            }
            worst = worst.max(sequence(sends));
        }
        Ok(Some(worst))
    }
}

async fn rhd_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let fail = |e: String| KernelError::failed(format!("rhd_allreduce: {e}"));
    let doubling = Doubling::new(args.endpoint(cube), args.endpoints()).map_err(fail)?;
    let n = args.tile.n_elem;
    if n < doubling.core {
        return Err(fail(format!(
            "a tile of {n} elements cannot be cut into {} pieces (one per core endpoint)",
            doubling.core
        )));
    }
    let tile = args.tile_addr(cube)?;
    let shape = [n];
    let acc = tl.load(tile, &shape, args.dtype).await?;
    match doubling.fold() {
        Fold::Extra(dir) => {
            tl.send(dir, &acc).await?;
            let result = tl.recv(dir, &shape, args.dtype).await?;
            return tl.store(tile, &result).await;
        }
        Fold::Host(dir) => {
            let extra = tl.recv(dir, &shape, args.dtype).await?;
            reduce_received(&tl, args.op, &acc, &extra).await?;
            tl.release(&extra)?;
        }
        Fold::None => {}
    }
    let pieces = chunked(0, doubling.core as u64, n as u64, args.dtype);
    let owned = reduce_scatter(&tl, args.op, &doubling, &acc, &pieces).await?;
    let mine = piece(&tl, &acc, &span(&pieces, owned.clone()))?;
    finish_in_place(&tl, &args, &mine).await?;
    all_gather(&tl, &doubling, &acc, &pieces, owned).await?;
    if let Fold::Host(dir) = doubling.fold() {
        tl.send(dir, &acc).await?;
    }
    tl.store(tile, &acc).await
}

/// Recursive halving; returns the range of pieces this endpoint owns.
async fn reduce_scatter(
    tl: &Tl,
    op: ReduceOp,
    d: &Doubling,
    acc: &TensorHandle,
    pieces: &[Chunk],
) -> Result<std::ops::Range<usize>, KernelError> {
    let mut range = 0..pieces.len();
    for k in (0..d.steps).rev() {
        let (partner, dir) = d.partner(k);
        let mid = (range.start + range.end) / 2;
        let (keep, give) = if d.rank < partner {
            (range.start..mid, mid..range.end)
        } else {
            (mid..range.end, range.start..mid)
        };
        tl.send(dir, &piece(tl, acc, &span(pieces, give))?).await?;
        let kept = piece(tl, acc, &span(pieces, keep.clone()))?;
        let received = tl.recv(dir, kept.shape(), kept.dtype()).await?;
        reduce_received(tl, op, &kept, &received).await?;
        tl.release(&received)?;
        range = keep;
    }
    Ok(range)
}

/// Recursive doubling of the owned pieces back to the whole tile.
async fn all_gather(
    tl: &Tl,
    d: &Doubling,
    acc: &TensorHandle,
    pieces: &[Chunk],
    mut owned: std::ops::Range<usize>,
) -> Result<(), KernelError> {
    for k in 0..d.steps {
        let (partner, dir) = d.partner(k);
        let len = owned.len();
        let theirs = if d.rank < partner {
            owned.end..owned.end + len
        } else {
            owned.start - len..owned.start
        };
        tl.send(dir, &piece(tl, acc, &span(pieces, owned.clone()))?)
            .await?;
        let slot = piece(tl, acc, &span(pieces, theirs.clone()))?;
        let received = tl.recv(dir, slot.shape(), slot.dtype()).await?;
        tl.store(&slot, &received).await?;
        tl.release(&received)?;
        owned = owned.start.min(theirs.start)..owned.end.max(theirs.end);
    }
    Ok(())
}
