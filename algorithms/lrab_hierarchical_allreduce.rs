//! `lrab_hierarchical_allreduce` (seed ADR-0032): PE 0 of every cube of every SIP,
//! on the intercube tables (`N/S/E/W` in the cube mesh, `global_*` between
//! SIPs).
//!
//! 1. row reduce W → E across the cube mesh (the east column holds row sums);
//! 2. column reduce N → S on the east column (the SE root cube holds the
//!    SIP's sum);
//! 3. on the root cubes, the inter-SIP exchange: a chain reduce and
//!    broadcast along the ring of SIPs (`ring_1d`), or along the SIP row
//!    then the SIP column (`torus_2d`, `mesh_2d_no_wrap`), on the
//!    `global_*` directions;
//! 4. column broadcast S → N on the east column;
//! 5. row broadcast E → W.
//!
//! Every phase is a chain towards the end of its line
//! (`helpers::hierarchical_allreduce` with `Line::to_middle`): the global sum
//! is formed once, at the SE cube of the last SIP, and its bytes are
//! copied to every endpoint, so all hold the same bits. The tile moves in
//! chunks (by default a quarter of the tile within 8–64 KiB:
//! `helpers::ChunkDefault`) so the phases overlap: a chunk is exchanged
//! between SIPs while the next is still being reduced in the mesh.
//!
//! On a single-cube machine (`cube_w = cube_h = 1`) phases 1, 2, 4 and 5
//! have no hops, so only the exchange runs (seed ADR-0050 D7).
//!
//! Cost ([`LrabHierarchicalAllreduce::model`]): the tree's longest climb plus
//! its longest descent, pipelined over the chunks (`ccl::cost::tree`).

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{
    ChunkDefault, Line, hierarchical_allreduce, hierarchical_tree, tile_chunks,
};
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{CclAlgorithm, Collective, Endpoints, KernelArgs, Params, WorldShape};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

/// The chunk when ccl.yaml `params.chunk` gives none.
const CHUNKS: ChunkDefault = ChunkDefault::QuarterTile;

struct LrabHierarchicalAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(LrabHierarchicalAllreduce)
}

impl CclAlgorithm for LrabHierarchicalAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("lrab_hierarchical_allreduce", lrab_hierarchical_allreduce)
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    fn supports(&self, shape: &WorldShape, _: &Params) -> Result<(), String> {
        let middle = (shape.cube_h - 1) / 2 * shape.cube_w + (shape.cube_w - 1) / 2;
        match shape.root_cube {
            Some(root) if root != middle => Err(format!(
                "its root cube is the middle of the cube mesh (root_cube: {middle}), not {root}"
            )),
            _ => Ok(()),
        }
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let tree = hierarchical_tree(args, Line::to_middle);
        let (chunks, piece) = tile_chunks(args, CHUNKS);
        cost::tree(net, &tree, piece, chunks).map(Some)
    }
}

async fn lrab_hierarchical_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    hierarchical_allreduce(&tl, &args, Line::to_middle, chunks).await
}
