//! `ring_allreduce` (author guide §2): the teaching ring over every
//! endpoint (PE 0 of each cube of each SIP), `ring_1d` wiring.
//!
//! The tile is cut into chunks (ccl.yaml `params.chunk`, default 8 KiB: a
//! chain of hundreds of hops gains from many pieces); each chunk's partial
//! sum travels east along the ring from endpoint 0 to the last endpoint, `acc += received` at every
//! stop, and the last endpoint's sum travels back west to endpoint 0,
//! stored at every stop. Each element is summed once, in one order, so
//! every endpoint ends with the same bits; chunk `c + 1` climbs while
//! chunk `c` comes back (the helper runs both directions at once).
//!
//! Cost ([`RingAllreduce::model`]): a chain of `2 (n − 1)` messages of one
//! chunk, pipelined over `C` chunks: `Σ_hops (α_h + m/β_h) + (C − 1) ·
//! max_h (α_h + m/β_h)`.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{
    ChunkDefault, Line, MIN_CHUNK, TreeLinks, hierarchy, tile_chunks, tile_reduce_broadcast,
};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

/// The chunk when ccl.yaml `params.chunk` gives none.
const CHUNKS: ChunkDefault = ChunkDefault::Fixed(MIN_CHUNK);

struct RingAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingAllreduce)
}

impl CclAlgorithm for RingAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_allreduce", ring_allreduce)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    /// The chain of [`links`] from endpoint 0 to the end and back.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        let tree: Vec<TreeLinks> = (0..n).map(|e| links(e, n)).collect();
        let (chunks, piece) = tile_chunks(args, CHUNKS);
        cost::tree(net, &tree, piece, chunks).map(Some)
    }
}

/// Endpoint `e`'s place on the line `0 → n − 1` (sum at the end).
fn links(e: usize, n: usize) -> TreeLinks {
    hierarchy(&[Line::to_end(e as u32, n as u32, Dir::W, Dir::E)])
}

async fn ring_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let me = links(args.endpoint(tl.program_id(1)), args.endpoints());
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    tile_reduce_broadcast(&tl, &args, &me, chunks).await
}
