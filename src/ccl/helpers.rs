//! What the algorithms of `algorithms/` share, so that a new one is short
//! (author guide §5):
//!
//! - **tile views**: [`split_tile`] splits a tile into [`TileView`]s
//!   (offsets, not addresses): pipelining chunks, reduce-scatter /
//!   all-gather parts, put pieces; [`chunk_count`] turns a ccl.yaml
//!   `chunk` size into a number of chunks;
//! - **reduce-then-broadcast trees**: an endpoint's [`TreeLinks`] (the
//!   direction of its parent and of its children) built from a binary tree
//!   ([`binary_tree`]) or from lines ([`Line`], [`hierarchy`]: a row of
//!   cubes, then a column, then SIP dimensions), and [`reduce_broadcast`],
//!   which runs any such tree chunk by chunk, pipelined;
//! - **rings**: [`Ring`] reduce-scatter and all-gather steps
//!   ([`ring_step`]);
//! - **one-sided puts** (`p2p_copy`, `p2p_gather`, `p2p_scatter`;
//!   ADR-0019, ADR-0020): [`put_tile`] copies a cube's tile into its
//!   `out_tiles` address in DMA pieces of at most `params.piece`
//!   ([`PIECE_PARAMS`]).
//!
//! Every helper computes each element's sum exactly once, at one endpoint,
//! and moves those bytes to the others, so every endpoint ends with the
//! same bits (floating-point addition is commutative but not associative:
//! two endpoints adding the same values in different orders would differ).

use std::future::Future;

use crate::mem::DType;
use crate::sim::SimDuration;
use crate::tl::{Dir, KernelError, TensorHandle, Tl};

use crate::topology::{GridPos, SipArrangement};

use super::algorithm::{KernelArgs, Unsupported, finish, reduce_received};
use super::collective::{ParamKind, ParamSpec, Params, ReduceOp};
use super::cost::{CostError, Network};
use super::topology::NeighborMap;

/// A view of part of a tile: where it starts as a byte offset from the
/// tile's first element (never an address: add the tile's address to
/// reach memory) and how much it holds. The default is an empty view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TileView {
    /// Byte offset of the first element from the tile's start.
    pub offset: u64,
    /// Elements in the view.
    pub n_elem: u64,
    /// Bytes in the view.
    pub nbytes: u64,
}

/// Splits `n_elem` elements of `dtype` starting `start` bytes into a tile
/// into `parts` consecutive views (pipelining chunks, reduce-scatter
/// parts, put pieces). When `n_elem` does not divide evenly, the first
/// `n_elem % parts` views hold one element more (numpy's `array_split`),
/// so the views always cover the range exactly. None when `parts` is zero.
pub fn split_tile(start: u64, parts: u64, n_elem: u64, dtype: DType) -> Vec<TileView> {
    if parts == 0 {
        return Vec::new();
    }
    let (base, extra) = (n_elem / parts, n_elem % parts);
    let mut offset = start;
    (0..parts)
        .map(|i| {
            let n_elem = base + u64::from(i < extra);
            let view = TileView {
                offset,
                n_elem,
                nbytes: n_elem * dtype.size(),
            };
            offset += view.nbytes;
            view
        })
        .collect()
}

/// How many chunks a tile of `n_elem` elements of `dtype` is cut into so
/// that none exceeds `chunk_bytes` (`None`: one chunk, the whole tile).
/// At least one, at most `n_elem`.
pub fn chunk_count(n_elem: u64, dtype: DType, chunk_bytes: Option<u64>) -> u64 {
    let Some(chunk) = chunk_bytes else {
        return 1;
    };
    let per_chunk = (chunk / dtype.size()).max(1);
    n_elem.div_ceil(per_chunk).clamp(1, n_elem.max(1))
}

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
    let copies = split_tile(0, pieces, n, dtype).into_iter().map(|view| {
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
/// of every rank but `args.root`, each with the same cube of the root, as
/// `(rank's endpoint, root's endpoint)`. The root's own block is a copy
/// inside its cubes, on no link.
pub fn root_pairs(args: &KernelArgs) -> Vec<(usize, usize)> {
    let cubes = args.cubes();
    let ranks = (0..args.tile.n_sips).filter(|&rank| rank != args.root);
    ranks
        .flat_map(|rank| {
            (0..cubes).map(move |cube| (rank * cubes + cube, args.root * cubes + cube))
        })
        .map(|(from, to)| (from as usize, to as usize))
        .collect()
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

/// The chunk position `pos` sends and the chunk it receives at `step` of
/// a ring reduce-scatter over `len` positions (sending east):
/// `send = (pos − step) mod n`, `recv = (pos − step − 1) mod n`.
/// After `n − 1` steps position `p` holds the sum of chunk `(p + 1) mod n`;
/// the all-gather's step `s` is `ring_step(pos + 1, s, n)`.
pub fn ring_step(pos: usize, step: usize, len: usize) -> (usize, usize) {
    let n = len.max(1);
    let send = (pos + n - step % n) % n;
    (send, (send + n - 1) % n)
}

/// Where an endpoint sits in a reduce-then-broadcast tree, as IPCQ
/// directions: partial sums flow from children to parents, the result
/// from parents to children. The root has no parent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeLinks {
    /// Towards the parent; `None` at the root.
    pub parent: Option<Dir>,
    /// Towards each child, in the order their sums are added.
    pub children: Vec<Dir>,
}

/// The binary tree of `wiring: tree_binary` (rooted at endpoint 0, parent
/// `(r − 1) / 2` in direction N, children `2r + 1` (W) and `2r + 2` (E)).
pub fn binary_tree(endpoint: usize, endpoints: usize) -> TreeLinks {
    TreeLinks {
        parent: (endpoint > 0).then_some(Dir::N),
        children: [(Dir::W, 2 * endpoint + 1), (Dir::E, 2 * endpoint + 2)]
            .into_iter()
            .filter(|&(_, child)| child < endpoints)
            .map(|(dir, _)| dir)
            .collect(),
    }
}

/// A position on a line of `len` endpoints whose partial sums flow to
/// `root`: `lo` is the direction of position `pos − 1`, `hi` of `pos + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    /// This endpoint's position, `0..len`.
    pub pos: u32,
    /// Endpoints on the line.
    pub len: u32,
    /// Where the line's sum ends.
    pub root: u32,
    /// Direction of `pos − 1`.
    pub lo: Dir,
    /// Direction of `pos + 1`.
    pub hi: Dir,
}

impl Line {
    /// A line whose sum ends at its last position (a chain towards `hi`).
    pub fn to_end(pos: u32, len: u32, lo: Dir, hi: Dir) -> Line {
        Line {
            pos,
            len,
            root: len.saturating_sub(1),
            lo,
            hi,
        }
    }

    /// A line whose sum ends in its middle (`(len − 1) / 2`): two chains
    /// of half the length, one from each end.
    pub fn to_middle(pos: u32, len: u32, lo: Dir, hi: Dir) -> Line {
        Line {
            root: len.saturating_sub(1) / 2,
            ..Line::to_end(pos, len, lo, hi)
        }
    }

    /// Whether the line's sum ends here.
    pub fn is_root(&self) -> bool {
        self.pos == self.root
    }

    /// Towards the root; `None` at the root.
    pub fn parent(&self) -> Option<Dir> {
        match self.pos.cmp(&self.root) {
            std::cmp::Ordering::Less => Some(self.hi),
            std::cmp::Ordering::Greater => Some(self.lo),
            std::cmp::Ordering::Equal => None,
        }
    }

    /// The neighbours whose partial sums come here: the `lo` one on the
    /// root's low side, the `hi` one on its high side (both at the root).
    pub fn children(&self) -> Vec<Dir> {
        let lo = self.pos > 0 && self.pos <= self.root;
        let hi = self.pos >= self.root && self.pos + 1 < self.len;
        [(lo, self.lo), (hi, self.hi)]
            .into_iter()
            .filter_map(|(has, dir)| has.then_some(dir))
            .collect()
    }
}

/// The tree of a hierarchy of lines, lowest level first (e.g. the cube
/// row, then the column, then the SIP dimensions): an endpoint collects
/// its children on every level where it is the root, up to the first
/// level where it is not, whose root is its parent.
pub fn hierarchy(levels: &[Line]) -> TreeLinks {
    let mut links = TreeLinks::default();
    for line in levels {
        links.children.extend(line.children());
        if let Some(parent) = line.parent() {
            links.parent = Some(parent);
            break;
        }
    }
    links
}

/// All-reduce of this endpoint's `tile` (loaded or streamed: [`Tile`])
/// over the tree `links`, `chunks` (offsets from the tile's start) at a
/// time: each chunk is summed up the tree (`part += child` in
/// `links.children` order) and the root's sum is sent back down and stored
/// at the tile's address + offset on every endpoint (the children in alternating order, chunk by chunk).
/// Partial sums and the result travel concurrently (two
/// tasks of this program on different rings), so chunk `c + 1` climbs
/// while chunk `c` descends: the phases pipeline. Each chunk's climb is a
/// `reduce` phase, its descent a `broadcast` phase on the PE's trace track.
pub async fn reduce_broadcast(
    tl: &Tl,
    args: &KernelArgs,
    links: &TreeLinks,
    tile: Tile,
    chunks: &[TileView],
) -> Result<(), KernelError> {
    let up = reduce_up(tl, args, links, &tile, chunks, AtRoot::Broadcast);
    let down = broadcast_down(tl, links, tile.addr(), args.dtype, chunks);
    futures::try_join!(up, down)?;
    Ok(())
}

/// Where [`reduce_broadcast`] takes a tile's chunks from.
#[derive(Debug, Clone)]
pub enum Tile {
    /// The whole tile, loaded into TCM at once from the tile at `addr`.
    Loaded {
        /// The tile in TCM.
        acc: TensorHandle,
        /// The tile's device address.
        addr: u64,
    },
    /// The tile at this device address, each chunk loaded into TCM when
    /// its turn comes (a tile larger than TCM streams through it).
    Streamed(u64),
}

impl Tile {
    /// The tile's device address (where results are stored).
    pub fn addr(&self) -> u64 {
        match *self {
            Tile::Loaded { addr, .. } | Tile::Streamed(addr) => addr,
        }
    }

    /// `chunk` of the tile in TCM.
    pub async fn chunk(
        &self,
        tl: &Tl,
        chunk: &TileView,
        dtype: DType,
    ) -> Result<TensorHandle, KernelError> {
        match self {
            Tile::Loaded { acc, .. } => slice(tl, acc, chunk),
            Tile::Streamed(addr) => {
                let shape = [chunk.n_elem as usize];
                tl.load(addr + chunk.offset, &shape, dtype).await
            }
        }
    }

    /// Frees what [`Tile::chunk`] loaded.
    pub fn done(&self, tl: &Tl, part: &TensorHandle) -> Result<(), KernelError> {
        match self {
            Tile::Loaded { .. } => Ok(()),
            Tile::Streamed(_) => tl.free(part),
        }
    }
}

/// What the root of [`reduce_up`] does with each finished chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtRoot {
    /// Sends it down the tree and stores it (an all-reduce).
    Broadcast,
    /// Only stores it (a reduce: the other tiles stay as they were).
    Store,
}

/// The upward half: combines the children into each chunk of the tile with
/// `args.op`, passes it to the parent, or at the root finishes it
/// ([`finish`]: the mean of `Avg`) and does with the result what `at_root`
/// says.
async fn reduce_up(
    tl: &Tl,
    args: &KernelArgs,
    links: &TreeLinks,
    tile: &Tile,
    chunks: &[TileView],
    at_root: AtRoot,
) -> Result<(), KernelError> {
    for (index, chunk) in chunks.iter().enumerate() {
        let _phase = tl.phase("reduce");
        let part = tile.chunk(tl, chunk, args.dtype).await?;
        for &child in &links.children {
            let received = tl.recv(child, part.shape(), part.dtype()).await?;
            reduce_received(tl, args.op, &part, &received).await?;
            tl.release(&received)?;
        }
        match links.parent {
            Some(parent) => tl.send(parent, &part).await?,
            None => {
                let result = finish(tl, args.op, part.clone(), args.endpoints()).await?;
                let dst = tile.addr() + chunk.offset;
                match at_root {
                    AtRoot::Broadcast => pass_down(tl, links, index, &result, dst).await?,
                    AtRoot::Store => tl.store(dst, &result).await?,
                }
                if result != part {
                    tl.free(&result)?;
                }
            }
        }
        tile.done(tl, &part)?;
    }
    Ok(())
}

/// The downward half below the root: receives each chunk's result from
/// the parent, passes it on and stores it.
async fn broadcast_down(
    tl: &Tl,
    links: &TreeLinks,
    tile: u64,
    dtype: DType,
    chunks: &[TileView],
) -> Result<(), KernelError> {
    let Some(parent) = links.parent else {
        return Ok(());
    };
    for (index, chunk) in chunks.iter().enumerate() {
        let _phase = tl.phase("broadcast");
        let shape = [chunk.n_elem as usize];
        let result = tl.recv(parent, &shape, dtype).await?;
        pass_down(tl, links, index, &result, tile + chunk.offset).await?;
        tl.release(&result)?;
    }
    Ok(())
}

/// Sends chunk `index`'s `result` to every child and stores it at `dst`.
/// The children are served in `links.children` order for even chunks and
/// in reverse for odd ones, so no child (no side of a line) always waits
/// behind another.
async fn pass_down(
    tl: &Tl,
    links: &TreeLinks,
    index: usize,
    result: &TensorHandle,
    dst: u64,
) -> Result<(), KernelError> {
    let mut children = links.children.clone();
    if index % 2 == 1 {
        children.reverse();
    }
    for child in children {
        tl.send(child, result).await?;
    }
    tl.store(dst, result).await
}

/// The part of `acc` that `view` (offsets into the tile) covers.
pub fn slice(tl: &Tl, acc: &TensorHandle, view: &TileView) -> Result<TensorHandle, KernelError> {
    tl.view(
        acc.addr() + view.offset,
        &[view.n_elem as usize],
        acc.dtype(),
    )
}

/// A position on a ring of `len` endpoints that sends in `send` and
/// receives in `recv` (e.g. `E` and `W`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// This endpoint's position, `0..len`.
    pub pos: usize,
    /// Endpoints on the ring.
    pub len: usize,
    /// Towards `pos + 1`.
    pub send: Dir,
    /// The ring from `pos − 1`.
    pub recv: Dir,
    /// The largest message in bytes (e.g. [`KernelArgs::slot_bytes`]): a
    /// part larger than this goes as several ([`exchange`]).
    pub max_message: u64,
}

impl Ring {
    /// The `len − 1` reduce-scatter steps over `parts` (one per position,
    /// offsets into `acc`): afterwards part `(pos + 1) mod len` of `acc`
    /// holds its sum over the ring.
    pub async fn reduce_scatter(
        &self,
        tl: &Tl,
        op: ReduceOp,
        acc: &TensorHandle,
        parts: &[TileView],
    ) -> Result<(), KernelError> {
        self.steps(tl, acc, parts, self.pos, |part, received| async move {
            reduce_received(tl, op, &part, &received).await
        })
        .await
    }

    /// The part of `parts` this position owns after
    /// [`reduce_scatter`](Self::reduce_scatter).
    pub fn owned<'p>(&self, parts: &'p [TileView]) -> &'p TileView {
        &parts[(self.pos + 1) % self.len.max(1)]
    }

    /// The `len − 1` all-gather steps after [`reduce_scatter`](Self::reduce_scatter):
    /// every part's sum is copied round the ring, so every position's
    /// `acc` ends with the same bytes.
    pub async fn all_gather(
        &self,
        tl: &Tl,
        acc: &TensorHandle,
        parts: &[TileView],
    ) -> Result<(), KernelError> {
        self.steps(tl, acc, parts, self.pos + 1, |part, received| async move {
            tl.store(&part, &received).await
        })
        .await
    }

    /// `len − 1` steps of "send part `ring_step(at).0`, receive part
    /// `ring_step(at).1` and `merge` it".
    async fn steps<F, Fut>(
        &self,
        tl: &Tl,
        acc: &TensorHandle,
        parts: &[TileView],
        at: usize,
        merge: F,
    ) -> Result<(), KernelError>
    where
        F: Fn(TensorHandle, TensorHandle) -> Fut,
        Fut: Future<Output = Result<(), KernelError>>,
    {
        let how = Exchange {
            send: self.send,
            recv: self.recv,
            max_message: self.max_message,
        };
        for step in 0..self.len.saturating_sub(1) {
            let (send, recv) = ring_step(at, step, self.len);
            exchange(tl, acc, how, parts[send], parts[recv], &merge).await?;
        }
        Ok(())
    }
}

/// Where an [`exchange`] sends and receives, and its largest message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// The direction the outgoing part goes.
    pub send: Dir,
    /// The direction the incoming part comes from.
    pub recv: Dir,
    /// The largest message in bytes (at most one IPCQ slot).
    pub max_message: u64,
}

/// `part` cut into messages of at most `max_message` bytes (at least one
/// element each, a whole number of elements; uneven as [`split_tile`] cuts):
/// none for an empty part.
pub fn messages(part: TileView, max_message: u64, dtype: DType) -> Vec<TileView> {
    if part.n_elem == 0 {
        return Vec::new();
    }
    let count = chunk_count(part.n_elem, dtype, Some(max_message));
    split_tile(part.offset, count, part.n_elem, dtype)
}

/// Sends `out` (an offset view of `acc`) in `how.send` and receives a
/// part of `into`'s size from `how.recv`, each as [`messages`] of at most
/// `how.max_message` bytes, interleaved: message `i` out, then message `i`
/// in, `merge`d (`merge(destination, received)`) into its place in `into`
/// and released. Two partners exchanging with each other, or a ring all
/// sending at once, thus never wait on a full ring, and a part larger than
/// an IPCQ slot passes in several. An empty part sends (receives) nothing:
/// both ends cut the same part the same way.
pub async fn exchange<F, Fut>(
    tl: &Tl,
    acc: &TensorHandle,
    how: Exchange,
    out: TileView,
    into: TileView,
    merge: F,
) -> Result<(), KernelError>
where
    F: Fn(TensorHandle, TensorHandle) -> Fut,
    Fut: Future<Output = Result<(), KernelError>>,
{
    let dtype = acc.dtype();
    let (outs, ins) = (
        messages(out, how.max_message, dtype),
        messages(into, how.max_message, dtype),
    );
    for i in 0..outs.len().max(ins.len()) {
        if let Some(message) = outs.get(i) {
            tl.send(how.send, &slice(tl, acc, message)?).await?;
        }
        if let Some(message) = ins.get(i) {
            let part = slice(tl, acc, message)?;
            let received = tl.recv(how.recv, part.shape(), part.dtype()).await?;
            merge(part, received.clone()).await?;
            tl.release(&received)?;
        }
    }
    Ok(())
}

/// The largest message of `args`' algorithm: ccl.yaml `params.chunk` if
/// set (refused at load when larger than a slot), else `default`'s for the
/// tile, at most one IPCQ slot.
pub fn message_bytes(args: &KernelArgs, default: ChunkDefault) -> u64 {
    let tile = args.tile.n_elem as u64 * args.dtype.size();
    (args.params.size("chunk")).unwrap_or_else(|| default.bytes(tile).min(args.slot_bytes / 4 * 4))
}

/// How a line picks its root: [`Line::to_end`] or [`Line::to_middle`].
pub type LineRoot = fn(u32, u32, Dir, Dir) -> Line;

/// The lines of a hierarchical all-reduce (seed ADR-0032) for `cube` of
/// SIP `args.sip_rank`, lowest first: its row of the cube mesh (`W`/`E`),
/// its column (`N`/`S`), then the SIPs over `global_*` (a ring of SIPs as
/// one line, a torus or mesh as its row then its column; wrap links are
/// not used), each summing towards the root `line` picks. With
/// [`hierarchy`], the tree of [`reduce_broadcast`] on the intercube tables.
pub fn cube_and_sip_lines(args: &KernelArgs, cube: u32, line: LineRoot) -> Vec<Line> {
    let (cube_w, cube_h) = (args.tile.cube_w, args.tile.cube_h);
    let cubes = GridPos::of(cube, cube_w);
    let mut lines = vec![
        line(cubes.col, cube_w, Dir::W, Dir::E),
        line(cubes.row, cube_h, Dir::N, Dir::S),
    ];
    let rank = args.sip_rank;
    match args.sip_arrangement {
        SipArrangement::Ring { .. } => {
            lines.push(line(rank, args.tile.n_sips, Dir::GlobalW, Dir::GlobalE));
        }
        SipArrangement::Torus { w, h } | SipArrangement::Mesh { w, h } => {
            let sips = GridPos::of(rank, w);
            lines.push(line(sips.col, w, Dir::GlobalW, Dir::GlobalE));
            lines.push(line(sips.row, h, Dir::GlobalN, Dir::GlobalS));
        }
    }
    lines
}

/// The hierarchical all-reduce of this program's tile (seed ADR-0032's
/// phases, generalised): the tree of [`cube_and_sip_lines`] with roots
/// where `line` puts them, run by [`reduce_broadcast`] in `chunks` chunks
/// of the tile.
pub async fn hierarchical_allreduce(
    tl: &Tl,
    args: &KernelArgs,
    line: LineRoot,
    chunks: u64,
) -> Result<(), KernelError> {
    let links = hierarchy(&cube_and_sip_lines(args, tl.program_id(1), line));
    tile_reduce_broadcast(tl, args, &links, chunks).await
}

/// [`reduce_broadcast`] of this program's tile (cube `program_id(1)`'s)
/// over `links`, in `chunks` chunks; every endpoint's tile ends holding the
/// result. A tile of at most half the TCM is loaded at once; a larger one
/// streams through TCM chunk by chunk ([`Tile`]).
pub async fn tile_reduce_broadcast(
    tl: &Tl,
    args: &KernelArgs,
    links: &TreeLinks,
    chunks: u64,
) -> Result<(), KernelError> {
    let (tile, chunks) = own_tile(tl, args, chunks).await?;
    reduce_broadcast(tl, args, links, tile, &chunks).await
}

/// The `reduce` half of [`tile_reduce_broadcast`]: the tree's root ends
/// holding the result in its tile; every other tile is left as it was.
/// Streams a tile larger than half the TCM as that does.
pub async fn tile_reduce(
    tl: &Tl,
    args: &KernelArgs,
    links: &TreeLinks,
    chunks: u64,
) -> Result<(), KernelError> {
    let (tile, chunks) = own_tile(tl, args, chunks).await?;
    reduce_up(tl, args, links, &tile, &chunks, AtRoot::Store).await
}

/// This program's tile (loaded whole when it fits in half the TCM,
/// streamed otherwise) and its `chunks` chunks.
pub async fn own_tile(
    tl: &Tl,
    args: &KernelArgs,
    chunks: u64,
) -> Result<(Tile, Vec<TileView>), KernelError> {
    let addr = args.tile_addr(tl.program_id(1))?;
    let n = args.tile.n_elem;
    let tile = if n as u64 * args.dtype.size() <= tl.tcm_capacity() / 2 {
        let acc = tl.load(addr, &[n], args.dtype).await?;
        Tile::Loaded { acc, addr }
    } else {
        Tile::Streamed(addr)
    };
    Ok((tile, split_tile(0, chunks, n as u64, args.dtype)))
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

/// Finishes the reduction of `part` in place ([`finish`]: `Avg` divides
/// by the `args.endpoints()` contributions; the other ops leave it).
pub async fn finish_in_place(
    tl: &Tl,
    args: &KernelArgs,
    part: &TensorHandle,
) -> Result<(), KernelError> {
    let result = finish(tl, args.op, part.clone(), args.endpoints()).await?;
    if &result != part {
        tl.store(part, &result).await?;
        tl.free(&result)?;
    }
    Ok(())
}

/// Every endpoint's [`TreeLinks`] in [`hierarchical_allreduce`] (endpoint
/// `e` is cube `e mod cubes` of SIP `e / cubes`), for its cost model.
pub fn hierarchical_tree(args: &KernelArgs, line: LineRoot) -> Vec<TreeLinks> {
    let cubes = args.cubes();
    (0..args.endpoints() as u32)
        .map(|e| {
            let sip = KernelArgs {
                sip_rank: e / cubes,
                ..args.clone()
            };
            hierarchy(&cube_and_sip_lines(&sip, e % cubes, line))
        })
        .collect()
}

/// The one view covering `parts[range]` (consecutive parts of one
/// tile, as [`split_tile`] makes them).
pub fn span(parts: &[TileView], range: std::ops::Range<usize>) -> TileView {
    let part = &parts[range];
    let n_elem = part.iter().map(|c| c.n_elem).sum();
    TileView {
        offset: part.first().map_or(0, |c| c.offset),
        n_elem,
        nbytes: part.iter().map(|c| c.nbytes).sum(),
    }
}

/// The IPCQ directions recursive doubling uses, one per step (and one for
/// the fold): the eight a table can hold.
pub const DOUBLING_DIRS: [Dir; 8] = Dir::ALL;

/// An endpoint's partners in recursive doubling / halving over `n`
/// endpoints, with the standard fold for non-powers of two: the largest
/// power of two `P ≤ n` endpoints form the core; endpoint `P + i` (an
/// *extra*) first sends its tile to core endpoint `i` (its *host*), which
/// adds it, runs the `log2 P` core steps with partners `endpoint xor 2^k`, and
/// at the end sends the result back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubling {
    /// This endpoint.
    pub endpoint: usize,
    /// Endpoints in all.
    pub n: usize,
    /// The core size `P`.
    pub core: usize,
    /// Core steps, `log2 P`.
    pub steps: usize,
}

/// How an endpoint takes part in the fold of [`Doubling`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// A core endpoint without an extra.
    None,
    /// A core endpoint that adds its extra's tile (in the direction).
    Host(Dir),
    /// An endpoint outside the core (its host in the direction).
    Extra(Dir),
}

impl Doubling {
    /// `endpoint`'s place among `n` endpoints, or what it requires: at most
    /// 2^8 endpoints (and 2^7 for a non-power of two): one IPCQ direction
    /// per step and one for the fold.
    pub fn new(endpoint: usize, n: usize) -> Result<Doubling, Unsupported> {
        let n = n.max(1);
        let core: usize = 1 << n.ilog2();
        let steps = core.trailing_zeros() as usize;
        let dirs = steps + usize::from(core < n);
        if dirs > DOUBLING_DIRS.len() {
            return Err(Unsupported::DoublingDirections {
                endpoints: n,
                dirs,
                available: DOUBLING_DIRS.len(),
            });
        }
        Ok(Doubling {
            endpoint,
            n,
            core,
            steps,
        })
    }

    /// The partner and direction of core step `k`.
    pub fn partner(&self, k: usize) -> (usize, Dir) {
        (self.endpoint ^ (1 << k), DOUBLING_DIRS[k])
    }

    /// This endpoint's part in the fold.
    pub fn fold(&self) -> Fold {
        let dir = DOUBLING_DIRS[self.steps.min(DOUBLING_DIRS.len() - 1)];
        if self.endpoint >= self.core {
            Fold::Extra(dir)
        } else if self.endpoint + self.core < self.n {
            Fold::Host(dir)
        } else {
            Fold::None
        }
    }

    /// The fold partner, if any.
    pub fn fold_peer(&self) -> Option<usize> {
        match self.fold() {
            Fold::Extra(_) => Some(self.endpoint - self.core),
            Fold::Host(_) => Some(self.endpoint + self.core),
            Fold::None => None,
        }
    }

    /// The neighbour table: one direction per core step, one for the fold.
    pub fn table(&self) -> NeighborMap {
        let mut table = NeighborMap::new();
        if self.endpoint < self.core {
            table.extend((0..self.steps).map(|k| {
                let (peer, dir) = self.partner(k);
                (dir, peer)
            }));
        }
        if let (Some(peer), Fold::Host(dir) | Fold::Extra(dir)) = (self.fold_peer(), self.fold()) {
            table.insert(dir, peer);
        }
        table
    }

    /// The α-β time of a doubling algorithm over `n` endpoints (a lower
    /// bound of its simulated time): the slowest core endpoint's chain of
    /// sends, one after another, each `α + bytes/β` of its route: at core
    /// step `k` one message to the partner of each size `step(d, k)` lists
    /// (`d` the endpoint's place), then, at a host, the extra's fold-in and
    /// the fold-out, `fold_bytes` each. `None` when `n` endpoints cannot
    /// double ([`Doubling::new`]).
    pub fn slowest_chain(
        net: &Network,
        n: usize,
        step: impl Fn(&Doubling, usize) -> Vec<u64>,
        fold_bytes: u64,
    ) -> Result<Option<SimDuration>, CostError> {
        let mut worst = SimDuration::ZERO;
        for endpoint in 0..n {
            let Ok(d) = Doubling::new(endpoint, n) else {
                return Ok(None);
            };
            if d.endpoint >= d.core {
                continue;
            }
            let mut sends = Vec::new();
            for k in 0..d.steps {
                for bytes in step(&d, k) {
                    sends.push(net.message(endpoint, d.partner(k).0, bytes)?);
                }
            }
            if let Some(extra) = d.fold_peer() {
                sends.push(net.message(extra, endpoint, fold_bytes)?);
                sends.push(net.message(endpoint, extra, fold_bytes)?);
            }
            worst = worst.max(super::cost::sequence(sends));
        }
        Ok(Some(worst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_tile_consecutively() {
        let chunks = split_tile(0x1000, 4, 64, DType::F16);
        assert_eq!(chunks.len(), 4);
        assert_eq!(
            chunks[1],
            TileView {
                offset: 0x1020,
                n_elem: 16,
                nbytes: 32
            }
        );
        let uneven = split_tile(0, 3, 10, DType::F32);
        let sizes: Vec<u64> = uneven.iter().map(|c| c.n_elem).collect();
        assert_eq!(sizes, [4, 3, 3]);
        assert_eq!(uneven[2].offset, 28);
        assert!(split_tile(0, 0, 10, DType::F32).is_empty());
    }

    #[test]
    fn chunk_count_keeps_every_piece_within_the_chunk_size() {
        assert_eq!(chunk_count(1000, DType::F16, None), 1);
        // 4 KiB of f16 = 2048 elements: 6144 elements need 3 chunks.
        assert_eq!(chunk_count(6144, DType::F16, Some(4096)), 3);
        assert_eq!(chunk_count(6145, DType::F16, Some(4096)), 4);
        // A chunk larger than the tile is the whole tile; never more
        // chunks than elements.
        assert_eq!(chunk_count(10, DType::F32, Some(1 << 20)), 1);
        assert_eq!(chunk_count(3, DType::F32, Some(1)), 3);
    }

    #[test]
    fn ring_steps_visit_every_chunk_once_and_chain() {
        let n = 5;
        for rank in 0..n {
            let sent: Vec<usize> = (0..n - 1).map(|s| ring_step(rank, s, n).0).collect();
            let mut unique = sent.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), n - 1, "rank {rank} resends a chunk");
            for step in 0..n - 1 {
                // What rank receives at `step` is what its west neighbour sent.
                let west = (rank + n - 1) % n;
                assert_eq!(ring_step(rank, step, n).1, ring_step(west, step, n).0);
            }
            // The last part received is the one the rank ends owning.
            assert_eq!(ring_step(rank, n - 2, n).1, (rank + 1) % n);
        }
    }

    #[test]
    fn binary_tree_links_parents_and_children() {
        let root = binary_tree(0, 5);
        assert_eq!(root.parent, None);
        assert_eq!(root.children, [Dir::W, Dir::E]);
        assert_eq!(binary_tree(1, 5).children, [Dir::W, Dir::E]);
        let leaf = binary_tree(2, 5);
        assert_eq!((leaf.parent, leaf.children), (Some(Dir::N), vec![]));
    }

    #[test]
    fn lines_flow_to_their_root_from_both_sides() {
        let end: Vec<_> = (0..4).map(|p| Line::to_end(p, 4, Dir::W, Dir::E)).collect();
        assert_eq!(end[0].children(), []);
        assert_eq!(end[0].parent(), Some(Dir::E));
        assert_eq!(end[3].children(), [Dir::W]);
        assert_eq!(end[3].parent(), None);
        let middle: Vec<_> = (0..5)
            .map(|p| Line::to_middle(p, 5, Dir::W, Dir::E))
            .collect();
        assert_eq!(middle[2].children(), [Dir::W, Dir::E]);
        assert_eq!(middle[1].parent(), Some(Dir::E));
        assert_eq!(middle[3].parent(), Some(Dir::W));
        assert_eq!(middle[4].children(), []);
        // A line of one is its own root with no children.
        let alone = Line::to_end(0, 1, Dir::W, Dir::E);
        assert!(alone.is_root() && alone.children().is_empty());
    }

    #[test]
    fn a_hierarchy_climbs_while_it_is_the_root() {
        let row = |x| Line::to_end(x, 4, Dir::W, Dir::E);
        let col = |y| Line::to_end(y, 4, Dir::N, Dir::S);
        // Not at the row's end: a leaf of the row.
        assert_eq!(
            hierarchy(&[row(1), col(3)]),
            TreeLinks {
                parent: Some(Dir::E),
                children: vec![Dir::W]
            }
        );
        // The row's end in the middle of the column.
        assert_eq!(
            hierarchy(&[row(3), col(2)]),
            TreeLinks {
                parent: Some(Dir::S),
                children: vec![Dir::W, Dir::N]
            }
        );
        // The root of everything.
        let root = hierarchy(&[row(3), col(3)]);
        assert_eq!(root.parent, None);
        assert_eq!(root.children, [Dir::W, Dir::N]);
    }

    #[test]
    fn lines_through_a_grid_position() {
        // Index 6 of a 4 × 2 grid: row 1, column 2.
        let p = GridPos::of(6, 4);
        let row = Line::to_end(p.col, 4, Dir::W, Dir::E);
        assert_eq!((row.pos, row.len, row.root), (2, 4, 3));
        let col = Line::to_middle(p.row, 2, Dir::N, Dir::S);
        assert_eq!((col.pos, col.len, col.root), (1, 2, 0));
    }
}
