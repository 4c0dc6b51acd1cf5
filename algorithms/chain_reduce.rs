//! `chain_reduce`: `reduce` along the ring of every endpoint (ccl.yaml
//! `topology: ring_1d`) as a chain that ends at the root endpoint (cube
//! `root_cube`, default 0, of rank `dst`): the endpoint just east of the
//! root starts, each next one combines the partial it receives from the
//! west with its own tile and sends it east, and the root combines last,
//! scales an `avg` once and stores the result. Other tiles are left as
//! they were. nccl-tests' busbw factor 1.
//!
//! The tile moves in chunks (ccl.yaml `params.chunk`, default 8 KiB as in
//! `ring_allreduce`'s chain), so the chain pipelines: chunk `c + 1` leaves
//! an endpoint while chunk `c` is combined further on. A tile larger than
//! half the TCM streams through it chunk by chunk (`helpers::tile_reduce`).
//!
//! Cost ([`ChainReduce::model`]): the chain of `n − 1` messages east from
//! the endpoint after the root to the root, `C` chunks of `m` bytes
//! pipelined through it: `Σ_hops (α_h + m/β_h) + (C − 1) · max_h (α_h +
//! m/β_h)` (`cost::pipeline`), `ring_allreduce`'s climb without its
//! descent. The loads, PE_MATH combines and store only add to it.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{
    ChunkDefault, Line, MIN_CHUNK, TreeLinks, hierarchy, tile_chunks, tile_reduce,
};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::{ArgError, CclAlgorithm, Collective, KernelArgs};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

const CHUNKS: ChunkDefault = ChunkDefault::Fixed(MIN_CHUNK);

struct ChainReduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(ChainReduce)
}

impl CclAlgorithm for ChainReduce {
    fn collective(&self) -> Collective {
        Collective::Reduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("chain_reduce", chain_reduce)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    /// The chunks pipelined along the chain that ends at the root.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        let (chunks, piece) = tile_chunks(args, CHUNKS);
        let first = (args.root_endpoint()? + 1) % n;
        let chain = cost::walk(net, first, Dir::E, n - 1, piece)?;
        Ok((n > 1).then(|| cost::pipeline(&chain, chunks)))
    }
}

/// Endpoint `e`'s place in the chain: position 0 is just east of the root
/// endpoint, which is the chain's last position.
fn links(args: &KernelArgs, e: usize) -> Result<TreeLinks, ArgError> {
    let n = args.endpoints();
    let pos = (e + 2 * n - args.root_endpoint()? - 1) % n;
    let line = Line::to_end(pos as u32, n as u32, Dir::W, Dir::E);
    Ok(hierarchy(&[line]))
}

async fn chain_reduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let me = links(&args, args.endpoint(tl.program_id(1)))?;
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    tile_reduce(&tl, &args, &me, chunks).await
}
