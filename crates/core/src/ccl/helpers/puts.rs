//! One-sided puts (`p2p_copy`, `p2p_gather`, `p2p_scatter`; ADR-0019,
//! ADR-0020): [`put_tile`] copies a cube's tile into its `out_tiles`
//! address in DMA pieces of at most `params.piece` ([`PIECE_PARAMS`]);
//! [`root_pairs`] and [`puts_model`] are their cost model's.

use super::*;

/// The default piece of a one-sided put, one default IPCQ slot: small
/// enough to keep the PE_DMA's slots busy, large enough to keep the issue
/// overhead small.
pub const PUT_PIECE: u64 = MAX_CHUNK;

/// The ccl.yaml `params` of a one-sided put: `piece`, the largest DMA a
/// tile is cut into (a DMA, not an IPCQ message: unlike `chunk`, not
/// bounded by `ipcq.slot_size`).
pub const PIECE_PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "piece",
    kind: ParamKind::Size,
}];

/// The one-sided put (ADR-0019 D2): the program of cube `program_id(1)`
/// copies its tile (`args.tiles`) from HBM straight into its `out_tiles`
/// address with PE_DMA, in pieces of at most `params.piece` bytes
/// ([`PUT_PIECE`] by default) issued together, so the engine keeps
/// `max_outstanding` of them in flight and one piece's read, transit and
/// write overlap the next's. It returns when the last byte has landed.
pub async fn put_tile(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (from, to) = (args.tile_addr(cube)?, args.out_addr(cube)?);
    let (n, dtype) = (args.tile.n_elem as u64, args.dtype);
    let piece = args.params.size("piece").unwrap_or(PUT_PIECE);
    let pieces = chunk_count(n, dtype, Some(piece));
    let copies = split_tile(pieces, n, dtype).into_iter().map(|view| {
        let tl = tl.clone();
        async move {
            let piece = tl.view(from + view.offset, &[view.n_elem as usize], dtype)?;
            tl.store(to + view.offset, &piece).await
        }
    });
    futures::future::try_join_all(copies).await?;
    Ok(())
}

/// The endpoint pairs of a rooted put (`gather`, `scatter`): every cube
/// of every rank but the root, each with the same cube of the root, as
/// `(rank's endpoint, root's endpoint)`. The root's own block is a copy
/// inside its cubes, on no link.
pub fn root_pairs(args: &KernelArgs) -> Result<Vec<(usize, usize)>, ArgError> {
    let (cubes, root) = (args.cubes(), args.root()?.rank);
    let ranks = (0..args.tile.n_sips).filter(|&rank| rank != root);
    Ok(ranks
        .flat_map(|rank| (0..cubes).map(move |cube| (rank * cubes + cube, root * cubes + cube)))
        .map(|(from, to)| (from as usize, to as usize))
        .collect())
}

/// The α-β bound of putting `args`' tile along every pair of endpoints
/// at once: the busiest shared link's ([`Network::hbm_copies`]); none
/// without pairs (a copy inside one HBM crosses no link).
pub fn puts_model(
    args: &KernelArgs,
    net: &Network,
    pairs: &[(usize, usize)],
) -> Result<Option<SimDuration>, CostError> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let bytes = args.tile.n_elem as u64 * args.dtype.size();
    Ok(Some(net.hbm_copies(pairs, bytes)?))
}
