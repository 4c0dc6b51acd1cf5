//! Algorithm families: one [`CclAlgorithm`] that several files of
//! `algorithms/` register with different parameters, so the logic they
//! share is written once. Each file stays a registered name of its own
//! (ADR-0009: the file stem is the ccl.yaml `module:`), its
//! `algorithm()` returning the family with its values:
//!
//! - [`HierarchicalAllreduce`]: the chunked all-reduce over the cube mesh
//!   and the SIPs (seed ADR-0032's phases; `helpers::hierarchical_allreduce`),
//!   differing in where each line's root is (`intercube_allreduce`,
//!   `lrab_hierarchical_allreduce`);
//! - [`OneSidedPut`]: the put of every cube's tile into its `out_tiles`
//!   address (`helpers::put_tile`; ADR-0019, ADR-0020), differing in the
//!   collective it serves and the endpoint pairs of its cost model
//!   (`p2p_copy`, `p2p_gather`, `p2p_scatter`).
//!
//! Knows the algorithm contract and the helpers; nothing of which file
//! uses which values.

use crate::sim::SimDuration;
use crate::tl::{Kernel, Tl};

use super::algorithm::{ArgError, CclAlgorithm, KernelArgs, Unsupported};

/// `(from, to)` endpoint pairs.
pub type Pairs = Vec<(usize, usize)>;
use super::collective::{Collective, ParamSpec, Params};
use super::cost::{self, CostError, Network};
use super::endpoints::{Endpoints, WorldShape};
use super::helpers::{
    ChunkDefault, LineRoot, PIECE_PARAMS, hierarchical_allreduce, hierarchical_tree, put_tile,
    puts_model, tile_chunks,
};
use super::topology::TopologyError;

/// A hierarchical all-reduce on the intercube tables: the tree of
/// `helpers::cube_and_sip_lines` with each line's root where `line` puts
/// it, run chunk by chunk (a quarter of the tile within 8–64 KiB unless
/// ccl.yaml `params.chunk` says otherwise) so the phases overlap.
#[derive(Debug, Clone, Copy)]
pub struct HierarchicalAllreduce {
    /// The kernel's name: the algorithm's file stem.
    pub name: &'static str,
    /// How every line (cube row, cube column, SIP dimensions) picks its
    /// root: `Line::to_end` or `Line::to_middle`.
    pub line: LineRoot,
    /// The cube of the mesh where the SIP's sum forms, for the world's
    /// shape; ccl.yaml `root_cube` must be unset or this cube.
    pub root_cube: fn(&WorldShape) -> u32,
    /// Where that cube is, for the error naming it ("the middle").
    pub root_place: &'static str,
}

/// The chunk when ccl.yaml `params.chunk` gives none.
const HIERARCHICAL_CHUNKS: ChunkDefault = ChunkDefault::QuarterTile;

impl CclAlgorithm for HierarchicalAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        let line = self.line;
        Kernel::new(self.name, move |tl: Tl, args: KernelArgs| async move {
            let (chunks, _) = tile_chunks(&args, HIERARCHICAL_CHUNKS);
            hierarchical_allreduce(&tl, &args, line, chunks).await
        })
    }

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(HIERARCHICAL_CHUNKS)
    }

    fn supports(&self, shape: &WorldShape, _: &Params) -> Result<(), Unsupported> {
        let own = (self.root_cube)(shape);
        match shape.root_cube {
            Some(asked) if asked != own => Err(Unsupported::RootCube {
                place: self.root_place,
                own,
                asked,
            }),
            _ => Ok(()),
        }
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }

    /// The tree's longest climb plus its longest descent, pipelined over
    /// the chunks (`cost::tree`).
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let tree = hierarchical_tree(args, self.line);
        let (chunks, piece) = tile_chunks(args, HIERARCHICAL_CHUNKS);
        cost::tree(net, &tree, piece, chunks).map(Some)
    }
}

/// A one-sided put: PE 0 of every cube copies its tile from its HBM into
/// its `out_tiles` address with PE_DMA (`helpers::put_tile`, pieces of at
/// most ccl.yaml `params.piece`), over the fabric route, with no TCM
/// staging and no IPCQ ring.
#[derive(Debug, Clone, Copy)]
pub struct OneSidedPut {
    /// The kernel's name: the algorithm's file stem.
    pub name: &'static str,
    /// The `torch.distributed` call it serves.
    pub collective: Collective,
    /// The `(from, to)` endpoint pairs of every copy the call makes, for
    /// its cost model (`helpers::puts_model`), from any launch's `args`.
    pub pairs: fn(&KernelArgs) -> Result<Pairs, ArgError>,
}

impl CclAlgorithm for OneSidedPut {
    fn collective(&self) -> Collective {
        self.collective
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new(self.name, put_tile)
    }

    fn params(&self) -> &'static [ParamSpec] {
        PIECE_PARAMS
    }

    /// Nothing passes through TCM.
    fn tcm_bytes(&self, _tile_bytes: u64, _params: &Params) -> u64 {
        0
    }

    /// Every copy runs at once: the busiest shared link's bound
    /// ([`Network::hbm_copies`]); none without pairs.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        puts_model(args, net, &(self.pairs)(args)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::helpers::Line;
    use crate::ccl::topology::Builtin;
    use crate::topology::SipArrangement;

    fn shape(cube_w: u32, cube_h: u32, root_cube: Option<u32>) -> WorldShape {
        WorldShape {
            n_sips: 2,
            cube_w,
            cube_h,
            sip_arrangement: SipArrangement::Ring { n: 2 },
            builtin: Builtin::None,
            root_cube,
        }
    }

    fn first_cube(_: &WorldShape) -> u32 {
        0
    }

    const FAMILY: HierarchicalAllreduce = HierarchicalAllreduce {
        name: "first",
        line: Line::to_end,
        root_cube: first_cube,
        root_place: "the first cube",
    };

    #[test]
    fn a_hierarchical_allreduce_accepts_only_its_own_root_cube() {
        assert_eq!(
            FAMILY.supports(&shape(3, 2, None), &Params::default()),
            Ok(())
        );
        assert_eq!(
            FAMILY.supports(&shape(3, 2, Some(0)), &Params::default()),
            Ok(())
        );
        let refused = FAMILY
            .supports(&shape(3, 2, Some(4)), &Params::default())
            .unwrap_err();
        assert_eq!(
            refused,
            Unsupported::RootCube {
                place: "the first cube",
                own: 0,
                asked: 4
            }
        );
        assert_eq!(
            refused.to_string(),
            "its root cube is the first cube of the cube mesh (root_cube: 0), not 4"
        );
        assert_eq!(FAMILY.kernel().name(), "first");
        assert_eq!(FAMILY.chunking(), Some(ChunkDefault::QuarterTile));
    }

    #[test]
    fn a_one_sided_put_serves_its_collective_without_tcm() {
        let put = OneSidedPut {
            name: "put",
            collective: Collective::Gather,
            pairs: |_| Ok(Vec::new()),
        };
        assert_eq!(put.collective(), Collective::Gather);
        assert_eq!(put.kernel().name(), "put");
        assert_eq!(put.tcm_bytes(1 << 20, &Params::default()), 0);
        let names: Vec<_> = put.params().iter().map(|p| p.name).collect();
        assert_eq!(names, ["piece"]);
    }
}
