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

use kernbench::ccl::families::OneSidedPut;
use kernbench::ccl::helpers::root_pairs;
use kernbench::ccl::{ArgError, CclAlgorithm, Collective, KernelArgs};

/// Registers the algorithm (ADR-0009): `ccl::families::OneSidedPut`.
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(OneSidedPut {
        name: "p2p_scatter",
        collective: Collective::Scatter,
        pairs: root_to_ranks,
    })
}

/// The root into every other rank: `root_pairs` reversed (any rank's
/// `args`: `root` = the source, `tile.n_elem` = one block, a rank's cube
/// tile).
fn root_to_ranks(args: &KernelArgs) -> Result<Vec<(usize, usize)>, ArgError> {
    let pairs = root_pairs(args)?.into_iter();
    Ok(pairs.map(|(rank, root)| (root, rank)).collect())
}
