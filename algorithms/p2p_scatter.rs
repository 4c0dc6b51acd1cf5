//! `p2p_scatter`: `scatter(tensor, scatter_list, src)` composed of
//! one-sided puts (ADR-0020). Every cube tile of the root's `scatter_list`
//! holds one block per rank; for each rank `r`, once `r` has posted its
//! tensor, the process group launches this kernel on the root's SIP with
//! `tiles` = block `r` and `out_tiles` = rank `r`'s tiles: PE 0 of every
//! cube copies the block from its HBM into the same cube's tile of rank
//! `r` with PE_DMA (`ccl::helpers::put_tile`, pieces of at most
//! `params.piece`, default 64 KiB), over the fabric route, no IPCQ ring
//! (`topology: none`). The launches for all ranks run at once, so they
//! share the root's PE_DMA engines, dispatch and ports; the root's own
//! block is one of them, a copy inside each cube's HBM.
//!
//! `model`: every copy runs at once and all of them leave the root's SIP,
//! so the bound is the busiest link's over all of them
//! ([`Network::hbm_copies`], `ccl::helpers::root_pairs` reversed); none
//! with a world of one rank.

use kernbench::ccl::cost::{CostError, Network};
use kernbench::ccl::helpers::{PIECE_PARAMS, put_tile, puts_model, root_pairs};
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, ParamSpec, Params};
use kernbench::sim::SimDuration;
use kernbench::tl::Kernel;

struct P2pScatter;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(P2pScatter)
}

impl CclAlgorithm for P2pScatter {
    fn collective(&self) -> Collective {
        Collective::Scatter
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("p2p_scatter", put_tile)
    }

    fn params(&self) -> &'static [ParamSpec] {
        PIECE_PARAMS
    }

    /// Nothing passes through TCM.
    fn tcm_bytes(&self, _tile_bytes: u64, _params: &Params) -> u64 {
        0
    }

    /// Any rank's `args`: `root` = the source, `tile.n_elem` = one block
    /// (a rank's cube tile).
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let pairs: Vec<_> = root_pairs(args)
            .into_iter()
            .map(|(r, root)| (root, r))
            .collect();
        puts_model(args, net, &pairs)
    }
}
