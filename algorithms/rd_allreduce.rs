//! `rd_allreduce`: recursive doubling over every endpoint (PE 0 of each
//! cube of each SIP), with the standard fold for a count that is not a
//! power of two (`helpers::Doubling`).
//!
//! The largest power of two `P ≤ n` endpoints form the core. Extra
//! endpoint `P + i` sends its tile to core endpoint `i`, which adds it.
//! Then `log2 P` steps: at step `k` every core endpoint exchanges its
//! whole partial sum with endpoint `e xor 2^k` (`e` its own index) and adds what it gets.
//! Both partners compute `a + b` and `b + a`, the same bits (addition is
//! commutative), so after the last step every core endpoint holds the
//! same total; hosts send it back to their extras. Wiring: the
//! algorithm's own tables (ccl.yaml `topology: none` plus the
//! `neighbors` hook), one direction per step.
//!
//! Requires at most 256 endpoints (128 for a non-power of two): one IPCQ
//! direction per step. Chunked: the tile goes through all of this chunk by
//! chunk, each at most ccl.yaml `params.chunk` (default one IPCQ slot, so
//! a tile that fits a slot is one chunk); a tile larger than half the TCM
//! streams through it chunk by chunk (`helpers::own_tile`).
//!
//! Cost ([`RdAllreduce::model`]): the slowest endpoint's chain of sends per
//! chunk, `[α + C/β]_fold-in + Σ_k (α_k + C/β_k) + [α + C/β]_fold-out`,
//! times the chunks, with `C` the smallest chunk and the α, β of each
//! partner's route.

use kernbench::ccl::cost::{CostError, Network};
use kernbench::ccl::helpers::{
    ChunkDefault, Doubling, Fold, MAX_CHUNK, finish_in_place, own_tile, tile_chunks,
};
use kernbench::ccl::topology::NeighborMap;
use kernbench::ccl::{
    CclAlgorithm, Collective, DevAddr, KernelArgs, Params, Unsupported, WorldShape, reduce_received,
};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, TensorHandle, Tl};

struct RdAllreduce;

/// The chunk when ccl.yaml gives none: one default IPCQ slot (at most the
/// configured one), so a tile that fits a slot is one chunk.
const CHUNKS: ChunkDefault = ChunkDefault::Fixed(MAX_CHUNK);

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RdAllreduce)
}

impl CclAlgorithm for RdAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("rd_allreduce", rd_allreduce)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    fn supports(&self, shape: &WorldShape, _: &Params) -> Result<(), Unsupported> {
        Doubling::new(0, shape.endpoints()).map(|_| ())
    }

    fn neighbors(&self, endpoint: usize, n: usize, _: &mut NeighborMap) -> Option<NeighborMap> {
        Doubling::new(endpoint, n).ok().map(|d| d.table())
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let (chunks, bytes) = tile_chunks(args, CHUNKS);
        let chunk = Doubling::slowest_chain(net, args.endpoints(), |_, _| vec![bytes], bytes)?;
        Ok(chunk.map(|chunk| SimDuration::from_ps(chunk.as_ps() * chunks)))
    }
}

async fn rd_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let doubling = Doubling::new(args.endpoint(cube), args.endpoints())
        .map_err(|e| KernelError::failed(format!("rd_allreduce: {e}")))?;
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    let (tile, pieces) = own_tile(&tl, &args, chunks).await?;
    for chunk in &pieces {
        let part = tile.chunk(&tl, chunk, args.dtype).await?;
        all_reduce_chunk(&tl, &args, &doubling, &part, tile.addr() + chunk.offset).await?;
        tile.done(&tl, &part)?;
    }
    Ok(())
}

/// The whole algorithm on one chunk `part` (in TCM, at most a slot),
/// whose result is stored at `dst`.
async fn all_reduce_chunk(
    tl: &Tl,
    args: &KernelArgs,
    doubling: &Doubling,
    part: &TensorHandle,
    dst: DevAddr,
) -> Result<(), KernelError> {
    match doubling.fold() {
        Fold::Extra(dir) => {
            tl.send(dir, part).await?;
            let result = tl.recv(dir, part.shape(), args.dtype).await?;
            tl.store(dst, &result).await?;
            return tl.release(&result);
        }
        Fold::Host(dir) => {
            let extra = tl.recv(dir, part.shape(), args.dtype).await?;
            reduce_received(tl, args.op()?, part, &extra).await?;
            tl.release(&extra)?;
        }
        Fold::None => {}
    }
    for k in 0..doubling.steps {
        let (_, dir) = doubling.partner(k);
        tl.send(dir, part).await?;
        let received = tl.recv(dir, part.shape(), args.dtype).await?;
        reduce_received(tl, args.op()?, part, &received).await?;
        tl.release(&received)?;
    }
    finish_in_place(tl, args, part).await?;
    if let Fold::Host(dir) = doubling.fold() {
        tl.send(dir, part).await?;
    }
    tl.store(dst, part).await
}
