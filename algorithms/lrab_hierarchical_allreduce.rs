//! `lrab_hierarchical_allreduce` (ADR-0015): `intercube_allreduce`'s five
//! phases on the intercube tables (row reduce, column reduce, the inter-SIP
//! exchange on the `global_*` directions, column broadcast, row broadcast),
//! with every line's root in its middle instead of at its end
//! (`helpers::hierarchical_allreduce` with `Line::to_middle`): each line's
//! two halves reduce towards the middle from both sides, so a line of `n`
//! cubes or SIPs takes about `n/2` hops instead of `n − 1`. The SIP's sum
//! forms at the middle cube of the mesh, the global sum once at the middle
//! SIP's, and its bytes are copied to every endpoint, so all hold the same
//! bits. Chunked as `intercube_allreduce` (a quarter of the tile within
//! 8–64 KiB by default) so the phases overlap.
//!
//! The algorithm is `ccl::families::HierarchicalAllreduce` with these
//! roots. Cost: the tree's longest climb plus its longest descent,
//! pipelined over the chunks (`ccl::cost::tree`).

use kernbench::ccl::families::HierarchicalAllreduce;
use kernbench::ccl::helpers::Line;
use kernbench::ccl::{CclAlgorithm, WorldShape};

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(HierarchicalAllreduce {
        name: "lrab_hierarchical_allreduce",
        line: Line::to_middle,
        root_cube: middle,
        root_place: "the middle",
    })
}

/// The middle cube of the mesh (rounding towards the north-west), where
/// the middle of its row and of its column meet.
fn middle(shape: &WorldShape) -> u32 {
    (shape.cube_h - 1) / 2 * shape.cube_w + (shape.cube_w - 1) / 2
}
