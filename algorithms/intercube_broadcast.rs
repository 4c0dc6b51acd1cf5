//! `intercube_broadcast` (ADR-0090): `broadcast` over a tree of lines on
//! the intercube tables, rooted at the root endpoint (cube `root_cube`,
//! default 0, of rank `src`): the root's plane first, along the SIP row
//! and then every SIP column (or the ring of SIPs as one line; wrap links
//! unused), each line branching both ways from the root's position; then
//! inside every SIP from that cube along its cube row and every cube
//! column (`helpers::rooted_tree`). Every endpoint ends with the root's
//! bytes.
//!
//! The tile moves in chunks (a quarter of the tile within 8–64 KiB, or
//! ccl.yaml `params.chunk`), received straight into the tile and sent on
//! from there (`helpers::tree_broadcast`): no TCM, and the tree's depth
//! (the lines' half-lengths, not the endpoint count) is what a chunk
//! crosses. `chain_broadcast` sends every chunk `endpoints − 1` hops in a
//! row.
//!
//! Cost ([`IntercubeBroadcast::model`]): the chunks pipelined down to the
//! farthest leaf, `Σ down + (C − 1) · max down` (`cost::tree_down`).

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{
    ChunkDefault, rooted_tree, rooted_trees, split_tile, tile_chunks, tree_broadcast,
};
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{CclAlgorithm, Collective, Endpoints, KernelArgs, Params, WorldShape};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

const CHUNKS: ChunkDefault = ChunkDefault::QuarterTile;

struct IntercubeBroadcast;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(IntercubeBroadcast)
}

impl CclAlgorithm for IntercubeBroadcast {
    fn collective(&self) -> Collective {
        Collective::Broadcast
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("intercube_broadcast", intercube_broadcast)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }

    /// Chunks go from slot to tile and tile to slot: no TCM.
    fn tcm_bytes(&self, _tile_bytes: u64, _params: &Params) -> u64 {
        0
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        if args.endpoints() < 2 {
            return Ok(None);
        }
        let (chunks, piece) = tile_chunks(args, CHUNKS);
        let links = rooted_trees(args, args.root_endpoint()?);
        cost::tree_down(net, &links, piece, chunks).map(Some)
    }
}

async fn intercube_broadcast(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let links = rooted_tree(&args, cube, args.root_endpoint()?);
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    let views = split_tile(chunks, args.tile.n_elem as u64, args.dtype);
    tree_broadcast(&tl, &links, args.tile_addr(cube)?, args.dtype, &views).await
}
