//! `intercube_reduce` (ADR-0090): `reduce` over the tree of
//! `intercube_broadcast` (`helpers::rooted_tree`: inside every SIP along
//! its cube rows and columns towards the root's cube, then along the SIP
//! column and row, or the ring of SIPs, towards the root rank), its
//! partial sums climbing chunk by chunk (`helpers::tile_reduce`: each
//! endpoint adds its children's chunk to its own in TCM and passes it to
//! its parent); the root finishes each chunk once (`avg` divides by the
//! endpoints) and stores it in its tile. Every other tile is left as it
//! was. A tile of at most half the TCM is loaded whole; a larger one
//! streams through TCM chunk by chunk.
//!
//! Cost ([`IntercubeReduce::model`]): the chunks pipelined up from the
//! farthest leaf, `Σ up + (C − 1) · max up` (`cost::tree_up`).

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{ChunkDefault, rooted_tree, rooted_trees, tile_chunks, tile_reduce};
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{CclAlgorithm, Collective, Endpoints, KernelArgs, WorldShape};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

const CHUNKS: ChunkDefault = ChunkDefault::QuarterTile;

struct IntercubeReduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(IntercubeReduce)
}

impl CclAlgorithm for IntercubeReduce {
    fn collective(&self) -> Collective {
        Collective::Reduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("intercube_reduce", intercube_reduce)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        if args.endpoints() < 2 {
            return Ok(None);
        }
        let (chunks, piece) = tile_chunks(args, CHUNKS);
        let links = rooted_trees(args, args.root_endpoint()?);
        cost::tree_up(net, &links, piece, chunks).map(Some)
    }
}

async fn intercube_reduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let links = rooted_tree(&args, tl.program_id(1), args.root_endpoint()?);
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    tile_reduce(&tl, &args, &links, chunks).await
}
