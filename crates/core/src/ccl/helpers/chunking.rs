//! Pipelining: how an algorithm cuts its tile into chunks
//! ([`ChunkDefault`], ccl.yaml `params.chunk` through [`CHUNK_PARAMS`] and
//! [`check_chunk`]), the chunk count and message size of a call
//! ([`tile_chunks`], [`message_bytes`]) and the TCM a streamed tile needs
//! ([`streamed_tcm_bytes`]).

use super::*;

/// The chunk of a pipelined algorithm when ccl.yaml `params.chunk` gives
/// none.
///
/// A chunk costs its bytes plus a per-message overhead (credit, doorbell,
/// first-flit latencies), and a pipeline of `D` dependent hops over `C`
/// chunks takes about `(D + C − 1)` chunk times: shallow trees want a few
/// large chunks, long chains many small ones. Measured on 16 SIPs (flow,
/// docs/performance.md): `intercube_allreduce` at 16 MiB per rank takes
/// 872 µs with 8 KiB chunks and 322 µs with 64 KiB ones, while the
/// 256-endpoint `ring_allreduce` at 1 MiB is fastest with 8 KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkDefault {
    /// A quarter of the tile, at least [`MIN_CHUNK`] and at most
    /// [`MAX_CHUNK`] (one default IPCQ slot): for trees of a few dozen
    /// hops.
    QuarterTile,
    /// Always this many bytes: for chains of hundreds of hops.
    Fixed(u64),
}

/// The smallest default chunk: below it a chunk's per-message overhead
/// outweighs its bytes on the cube mesh.
pub const MIN_CHUNK: u64 = 8 * 1024;

/// The largest default chunk: one default IPCQ slot (`ipcq.slot_size`).
pub const MAX_CHUNK: u64 = 64 * 1024;

impl ChunkDefault {
    /// The chunk bytes for a tile of `tile_bytes` (a multiple of 4 B, a
    /// whole number of elements of every dtype).
    pub fn bytes(self, tile_bytes: u64) -> u64 {
        match self {
            ChunkDefault::QuarterTile => (tile_bytes / 4).clamp(MIN_CHUNK, MAX_CHUNK) / 4 * 4,
            ChunkDefault::Fixed(bytes) => bytes,
        }
    }
}

/// The ccl.yaml `params` of a pipelined algorithm: `chunk`, the largest
/// chunk a tile is cut into (a size; the default is the algorithm's
/// [`ChunkDefault`]).
pub const CHUNK_PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "chunk",
    kind: ParamKind::Size,
}];

/// Refuses a `params.chunk` that is not a whole number of elements of
/// every dtype (a multiple of 4 B, the f32 element; f16 and bf16 take
/// 2 B). Zero is refused by the params check itself.
pub fn check_chunk(params: &Params) -> Result<(), Unsupported> {
    match params.size("chunk") {
        Some(chunk) if chunk % DType::F32.size() != 0 => {
            Err(Unsupported::ChunkNotElements { chunk })
        }
        _ => Ok(()),
    }
}

/// How a pipelined algorithm cuts `args`' tile: the number of chunks of
/// at most `params.chunk` bytes (by default `default`'s, at most one IPCQ
/// slot: a chunk is received whole), and the smallest
/// chunk's bytes (what a cost model charges per chunk, a lower bound).
pub fn tile_chunks(args: &KernelArgs, default: ChunkDefault) -> (u64, u64) {
    let (n, dtype) = (args.tile.n_elem as u64, args.dtype);
    let chunks = chunk_count(n, dtype, Some(message_bytes(args, default)));
    (chunks, n / chunks * dtype.size())
}

/// The largest message of `args`' algorithm: ccl.yaml `params.chunk` if
/// set (refused at load when larger than a slot), else `default`'s for the
/// tile, at most one IPCQ slot.
pub fn message_bytes(args: &KernelArgs, default: ChunkDefault) -> u64 {
    let tile = args.tile.n_elem as u64 * args.dtype.size();
    (args.params.size("chunk")).unwrap_or_else(|| default.bytes(tile).min(args.slot_bytes / 4 * 4))
}

/// The TCM a [`tile_reduce_broadcast`] endpoint needs at least for a tile
/// of `tile_bytes` cut as `params.chunk` or `default` says: the chunk being
/// reduced and, for `Avg` at the root, its finished copy (a tile of at most
/// half the TCM is loaded whole, and fits).
pub fn streamed_tcm_bytes(tile_bytes: u64, params: &Params, default: ChunkDefault) -> u64 {
    let chunk = params
        .size("chunk")
        .unwrap_or_else(|| default.bytes(tile_bytes));
    2 * chunk.min(tile_bytes)
}
