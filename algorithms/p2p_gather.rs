//! `p2p_gather`: `gather(tensor, gather_list, dst)` composed of one-sided
//! puts (ADR-0020). Every cube tile of the root's `gather_list` holds one
//! block per rank; the process group launches this kernel on every rank's
//! SIP (the root's included) once the root has posted its list, with
//! `out_tiles` = the addresses of that rank's block: PE 0 of every cube
//! copies its tile from its HBM into the same cube's block on the root with
//! PE_DMA (`ccl::helpers::put_tile`, pieces of at most `params.piece`,
//! default 64 KiB), over the fabric route, no IPCQ ring (`topology:
//! none`). The root's own block is the same kernel on its own SIP: a copy
//! inside each cube's HBM, timed like the others.
//!
//! `model`: every rank's copies run at once and all of them enter the
//! root's SIP, so the bound is the busiest link's over all of them
//! ([`Network::hbm_copies`], `ccl::helpers::root_pairs`); none with a
//! world of one rank (the only copy is the root's, on no link).

use kernbench::ccl::cost::{CostError, Network};
use kernbench::ccl::helpers::{PIECE_PARAMS, put_tile, puts_model, root_pairs};
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, ParamSpec, Params};
use kernbench::sim::SimDuration;
use kernbench::tl::Kernel;

struct P2pGather;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(P2pGather)
}

impl CclAlgorithm for P2pGather {
    fn collective(&self) -> Collective {
        Collective::Gather
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("p2p_gather", put_tile)
    }

    fn params(&self) -> &'static [ParamSpec] {
        PIECE_PARAMS
    }

    /// Nothing passes through TCM.
    fn tcm_bytes(&self, _tile_bytes: u64, _params: &Params) -> u64 {
        0
    }

    /// Any rank's `args`: `root` = the destination, `tile.n_elem` = one
    /// block (a rank's cube tile).
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        puts_model(args, net, &root_pairs(args))
    }
}
