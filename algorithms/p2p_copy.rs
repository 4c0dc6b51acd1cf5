//! `p2p_copy`: `send` / `recv` between two ranks as a one-sided put
//! (ADR-0019). The process group matches a `send(tensor, dst)` with the
//! receiver's posted `recv(tensor, src)` and launches this kernel on the
//! sender's SIP only, with the receiver's tile addresses as the output
//! tiles: PE 0 of every cube copies its cube's tile, from its HBM, straight
//! into the same cube's tile on the receiving SIP with PE_DMA (no TCM
//! staging, no receiver program, no IPCQ ring: ccl.yaml `topology: none`).
//! The copy takes the fabric's route between the two HBMs, over as many
//! inter-SIP hops as dimension-order routing crosses, so non-neighbour
//! ranks need no wiring.
//!
//! The tile goes in pieces of at most `params.piece` bytes (default
//! 64 KiB), issued together (`ccl::helpers::put_tile`): the PE_DMA engine
//! keeps `max_outstanding` of them in flight, so one piece's read, transit
//! and write overlap the next's. The kernel ends when the last byte has
//! landed. (A piece is a DMA, not an IPCQ message: unlike the other
//! algorithms' `chunk`, it is not bounded by `ipcq.slot_size`.)
//!
//! `model` (`ccl::families::OneSidedPut`): every cube's copy runs at once and all of them cross the
//! sender's inter-SIP port, so the bound is the busiest link's
//! ([`Network::hbm_copies`]): one cube alone gives its route's Hockney
//! time `α + bytes / β`.

use kernbench::ccl::families::OneSidedPut;
use kernbench::ccl::{ArgError, CclAlgorithm, Collective, KernelArgs};

/// Registers the algorithm (ADR-0009): `ccl::families::OneSidedPut`.
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(OneSidedPut {
        name: "p2p_copy",
        collective: Collective::SendRecv,
        pairs: cube_to_cube,
    })
}

/// Every cube of the sender with the same cube of the receiver; `args`
/// are the sender's: its rank and `peer` = the receiver.
fn cube_to_cube(args: &KernelArgs) -> Result<Vec<(usize, usize)>, ArgError> {
    let (cubes, peer) = (args.cubes(), args.peer()?);
    Ok((0..cubes)
        .map(|cube| (args.endpoint(cube), (peer * cubes + cube) as usize))
        .collect())
}
