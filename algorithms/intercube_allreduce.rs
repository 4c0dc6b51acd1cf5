//! `intercube_allreduce` (seed ADR-0032): PE 0 of every cube of every SIP,
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
//! (`helpers::hierarchical_allreduce` with `Line::to_end`): the global sum
//! is formed once, at the SE cube of the last SIP, and its bytes are
//! copied to every endpoint, so all hold the same bits. The tile moves in
//! chunks (by default a quarter of the tile within 8–64 KiB:
//! `helpers::ChunkDefault`) so the phases overlap: a chunk is exchanged
//! between SIPs while the next is still being reduced in the mesh.
//!
//! On a single-cube machine (`cube_w = cube_h = 1`) phases 1, 2, 4 and 5
//! have no hops, so only the exchange runs (seed ADR-0050 D7).
//!
//! The algorithm is `ccl::families::HierarchicalAllreduce` with these
//! roots (shared with `lrab_hierarchical_allreduce`). Cost: the tree's
//! longest climb plus its longest descent, pipelined over the chunks
//! (`ccl::cost::tree`).

use kernbench::ccl::families::HierarchicalAllreduce;
use kernbench::ccl::helpers::Line;
use kernbench::ccl::{CclAlgorithm, WorldShape};

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(HierarchicalAllreduce {
        name: "intercube_allreduce",
        line: Line::to_end,
        root_cube: south_east,
        root_place: "the south-east corner",
    })
}

/// The last cube of the mesh, where every line towards its end meets.
fn south_east(shape: &WorldShape) -> u32 {
    shape.cubes() - 1
}
