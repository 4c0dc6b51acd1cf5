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

use kernbench::ccl::families::OneSidedPut;
use kernbench::ccl::helpers::root_pairs;
use kernbench::ccl::{CclAlgorithm, Collective};

/// Registers the algorithm (ADR-0009): `ccl::families::OneSidedPut`,
/// every rank into the root (any rank's `args`: `root` = the destination,
/// `tile.n_elem` = one block, a rank's cube tile).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(OneSidedPut {
        name: "p2p_gather",
        collective: Collective::Gather,
        pairs: root_pairs,
    })
}
