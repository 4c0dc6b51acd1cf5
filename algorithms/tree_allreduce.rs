//! `tree_allreduce`: a binary tree over every endpoint (PE 0 of each cube
//! of each SIP; `tree_binary` wiring: parent `(e − 1) / 2` in direction
//! N, children `2e + 1` (W) and `2e + 2` (E)).
//!
//! The tile moves in chunks (by default a quarter of the tile within
//! 8–64 KiB: `helpers::ChunkDefault`). Each chunk is summed up the tree — an endpoint adds its children's partial sums to
//! its own and passes the result to its parent — and endpoint 0's total is
//! sent back down and stored at every endpoint. The total is formed once,
//! so every endpoint ends with the same bits; while chunk `c` descends,
//! chunk `c + 1` climbs (`helpers::reduce_broadcast`).
//!
//! Cost ([`TreeAllreduce::model`]): the longest climb (leaf → root) and
//! the longest descent, `⌈log2(n + 1)⌉ − 1` messages each, as one chain
//! pipelined over the chunks: `Σ_hops (α_h + m/β_h) + (C − 1) · max_h
//! (α_h + m/β_h)` (`ccl::cost::tree`).

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{ChunkDefault, binary_tree, tile_chunks, tile_reduce_broadcast};
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

/// The chunk when ccl.yaml `params.chunk` gives none.
const CHUNKS: ChunkDefault = ChunkDefault::QuarterTile;

struct TreeAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(TreeAllreduce)
}

impl CclAlgorithm for TreeAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("tree_allreduce", tree_allreduce)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        let tree: Vec<_> = (0..n).map(|e| binary_tree(e, n)).collect();
        let (chunks, piece) = tile_chunks(args, CHUNKS);
        cost::tree(net, &tree, piece, chunks).map(Some)
    }
}

async fn tree_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let me = binary_tree(args.endpoint(tl.program_id(1)), args.endpoints());
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    tile_reduce_broadcast(&tl, &args, &me, chunks).await
}
