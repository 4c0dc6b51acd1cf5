//! Tile views and the tile an endpoint owns: [`TileView`]s (a
//! [`TileOffset`], never a [`DevAddr`]) made by [`split_tile`],
//! [`TileView::split`] and [`TileSplit`], [`chunk_count`], [`span`],
//! [`messages`] and [`slice`]; this program's [`Tile`], loaded whole or
//! streamed ([`own_tile`]); [`finish_in_place`].

use super::*;

/// A view of part of a tile: where it starts as a byte offset from the
/// tile's first element (never an address: add the tile's address to
/// reach memory) and how much it holds. The default is an empty view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TileView {
    /// Byte offset of the first element from the tile's start.
    pub offset: TileOffset,
    /// Elements in the view.
    pub n_elem: u64,
    /// Bytes in the view.
    pub nbytes: u64,
}

/// Splits a tile of `n_elem` elements of `dtype` into `parts`
/// consecutive views (pipelining chunks, reduce-scatter parts, put
/// pieces): [`TileView::split`] of the whole tile.
pub fn split_tile(parts: u64, n_elem: u64, dtype: DType) -> Vec<TileView> {
    TileView::whole(n_elem, dtype).split(parts, dtype)
}

/// A view cut into parts as [`TileView::split`] cuts it, each part made
/// when asked for: a ring of `n` endpoints cuts its tile into `n` parts
/// on every endpoint, and a list of them each would hold `n²` views in
/// all (400 MB at 4,096 endpoints). No division per part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileSplit {
    whole: TileView,
    count: u64,
    /// Elements in every part, and how many first parts hold one more.
    base: u64,
    extra: u64,
    elem_bytes: u64,
}

impl TileSplit {
    /// A tile of `n_elem` elements of `dtype` cut into `count` parts
    /// ([`split_tile`]'s views).
    pub fn new(count: u64, n_elem: u64, dtype: DType) -> TileSplit {
        TileView::whole(n_elem, dtype).split_lazily(count, dtype)
    }

    /// How many parts.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// No parts (cut into zero).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Part `i` (`i < len()`): what `split` gives at `i`.
    pub fn part(&self, i: usize) -> TileView {
        let i = i as u64;
        debug_assert!(i < self.count, "part {i} of {}", self.count);
        let n_elem = self.base + u64::from(i < self.extra);
        let before = i * self.base + i.min(self.extra);
        TileView {
            offset: self.whole.offset + TileOffset(before * self.elem_bytes),
            n_elem,
            nbytes: n_elem * self.elem_bytes,
        }
    }
}

impl TileView {
    /// The whole tile of `n_elem` elements of `dtype`.
    pub fn whole(n_elem: u64, dtype: DType) -> TileView {
        TileView {
            offset: TileOffset::ZERO,
            n_elem,
            nbytes: n_elem * dtype.size(),
        }
    }

    /// This view cut into `parts` consecutive views of elements of
    /// `dtype`. When its elements do not divide evenly, the first
    /// `n_elem % parts` views hold one element more (numpy's
    /// `array_split`), so the views always cover it exactly. None when
    /// `parts` is zero.
    pub fn split(&self, parts: u64, dtype: DType) -> Vec<TileView> {
        (0..parts).map(|i| self.part(parts, i, dtype)).collect()
    }

    /// [`split`](Self::split) with each part made when asked for.
    pub fn split_lazily(&self, parts: u64, dtype: DType) -> TileSplit {
        let (base, extra) = match parts {
            0 => (0, 0),
            _ => (self.n_elem / parts, self.n_elem % parts),
        };
        TileSplit {
            whole: *self,
            count: parts,
            base,
            extra,
            elem_bytes: dtype.size(),
        }
    }

    /// View `i` of [`split`](Self::split)`(parts, dtype)`, made alone
    /// (`i < parts`): the first `n_elem % parts` views hold one element
    /// more.
    pub fn part(&self, parts: u64, i: u64, dtype: DType) -> TileView {
        if parts == 1 {
            // The usual message: the whole view, with no division.
            let nbytes = self.n_elem * dtype.size();
            return TileView { nbytes, ..*self };
        }
        let (base, extra) = (self.n_elem / parts, self.n_elem % parts);
        let n_elem = base + u64::from(i < extra);
        let before = i * base + i.min(extra);
        TileView {
            offset: self.offset + TileOffset(before * dtype.size()),
            n_elem,
            nbytes: n_elem * dtype.size(),
        }
    }
}

/// How many chunks a tile of `n_elem` elements of `dtype` is cut into so
/// that none exceeds `chunk_bytes` (`None`: one chunk, the whole tile).
/// At least one, at most `n_elem`.
pub fn chunk_count(n_elem: u64, dtype: DType, chunk_bytes: Option<u64>) -> u64 {
    let Some(chunk) = chunk_bytes else {
        return 1;
    };
    if n_elem.saturating_mul(dtype.size()) <= chunk {
        // The usual message: one chunk, with no division.
        return 1;
    }
    let per_chunk = (chunk / dtype.size()).max(1);
    n_elem.div_ceil(per_chunk).clamp(1, n_elem.max(1))
}

/// Where [`reduce_broadcast`] takes a tile's chunks from.
#[derive(Debug, Clone)]
pub enum Tile {
    /// The whole tile, loaded into TCM at once from the tile at `addr`.
    Loaded {
        /// The tile in TCM.
        acc: TensorHandle,
        /// The tile's device address.
        addr: DevAddr,
    },
    /// The tile at this device address, each chunk loaded into TCM when
    /// its turn comes (a tile larger than TCM streams through it).
    Streamed(DevAddr),
}

impl Tile {
    /// The tile's device address (where results are stored).
    pub fn addr(&self) -> DevAddr {
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
                tl.load(*addr + chunk.offset, &shape, dtype).await
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

/// The part of `acc` that `view` (offsets into the tile) covers. A part
/// within `acc` is in its memory, which is not decoded again; any other
/// is a [`Tl::view`]. Inlined: a ring calls it per message, and
/// whether the compiler inlines it on its own moves with the codegen
/// units' partition (perf-log.md, 2026-12-04).
#[inline]
pub fn slice(tl: &Tl, acc: &TensorHandle, view: &TileView) -> Result<TensorHandle, KernelError> {
    let (addr, n_elem) = (DevAddr::of(acc) + view.offset, view.n_elem as usize);
    match acc.within(addr.0, n_elem) {
        Some(part) => Ok(part),
        None => tl.view(addr, &[n_elem], acc.dtype()),
    }
}

/// `part` cut into messages of at most `max_message` bytes (at least one
/// element each, a whole number of elements; uneven as [`split_tile`] cuts):
/// none for an empty part.
pub fn messages(part: TileView, max_message: u64, dtype: DType) -> Vec<TileView> {
    let count = message_count(part, max_message, dtype);
    part.split(count, dtype)
}

/// How many [`messages`] `part` is cut into (none for an empty part).
pub fn message_count(part: TileView, max_message: u64, dtype: DType) -> u64 {
    match part.n_elem {
        0 => 0,
        n_elem => chunk_count(n_elem, dtype, Some(max_message)),
    }
}

/// This program's tile (loaded whole when it fits in half the TCM and
/// the TCM has room for it now, streamed otherwise) and its `chunks`
/// chunks.
///
/// "Room now": collectives of different process groups may run at once
/// on one PE (ADR-0034 D1, a Chakra step's TP and DP all-reduces), so
/// another kernel's scratch and another network's IPCQ slots may hold
/// part of the TCM. A whole-tile load whose scratch cannot be allocated
/// (it fails at the call, before any time passes) streams instead, as a
/// tile larger than half the TCM does; alone on its PE nothing changes
/// (ADR-0098).
pub async fn own_tile(
    tl: &Tl,
    args: &KernelArgs,
    chunks: u64,
) -> Result<(Tile, Vec<TileView>), KernelError> {
    let addr = args.tile_addr(tl.program_id(1))?;
    let n = args.tile.n_elem;
    let tile = if n as u64 * args.dtype.size() <= tl.tcm_capacity() / 2 {
        match tl.load(addr, &[n], args.dtype).await {
            Ok(acc) => Tile::Loaded { acc, addr },
            Err(KernelError::Device(crate::device::DeviceError::Alloc(_))) => Tile::Streamed(addr),
            Err(error) => return Err(error),
        }
    } else {
        Tile::Streamed(addr)
    };
    Ok((tile, split_tile(chunks, n as u64, args.dtype)))
}

/// Finishes the reduction of `part` in place ([`finish`]: `Avg` divides
/// by the `args.endpoints()` contributions; the other ops leave it).
pub async fn finish_in_place(
    tl: &Tl,
    args: &KernelArgs,
    part: &TensorHandle,
) -> Result<(), KernelError> {
    let result = finish(tl, args.op()?, part.clone(), args.endpoints()).await?;
    if &result != part {
        tl.store(part, &result).await?;
        tl.free(&result)?;
    }
    Ok(())
}

/// The one view covering `parts[range]` (consecutive parts of one
/// tile, as [`split_tile`] makes them).
pub fn span(parts: &[TileView], range: std::ops::Range<usize>) -> TileView {
    let part = &parts[range];
    let n_elem = part.iter().map(|c| c.n_elem).sum();
    TileView {
        offset: part.first().map_or(TileOffset::ZERO, |c| c.offset),
        n_elem,
        nbytes: part.iter().map(|c| c.nbytes).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_tile_consecutively() {
        let part = TileView {
            offset: TileOffset(0x1000),
            n_elem: 64,
            nbytes: 128,
        };
        let chunks = part.split(4, DType::F16);
        assert_eq!(chunks.len(), 4);
        assert_eq!(
            chunks[1],
            TileView {
                offset: TileOffset(0x1020),
                n_elem: 16,
                nbytes: 32
            }
        );
        let uneven = split_tile(3, 10, DType::F32);
        let sizes: Vec<u64> = uneven.iter().map(|c| c.n_elem).collect();
        assert_eq!(sizes, [4, 3, 3]);
        assert_eq!(uneven[2].offset, TileOffset(28));
        assert_eq!(span(&uneven, 1..3).offset, TileOffset(16));
        assert!(split_tile(0, 10, DType::F32).is_empty());
        assert!(TileSplit::new(0, 10, DType::F32).is_empty());
    }

    #[test]
    fn a_part_made_alone_follows_the_one_before_it() {
        // Part i starts where part i - 1 ends, and the parts end where
        // the view does: no part is computed from the others. A lazy
        // split makes the same parts.
        for n_elem in 0..40 {
            let whole = TileView {
                offset: TileOffset(0x40),
                n_elem,
                nbytes: n_elem * 2,
            };
            for parts in 1..9 {
                let (mut next, lazy) = (whole.offset, whole.split_lazily(parts, DType::F16));
                assert_eq!(lazy.len(), parts as usize);
                for i in 0..parts {
                    let part = whole.part(parts, i, DType::F16);
                    assert_eq!(lazy.part(i as usize), part, "{n_elem} / {parts}, part {i}");
                    assert_eq!(part.offset, next, "{n_elem} / {parts}, part {i}");
                    assert!(part.n_elem.abs_diff(n_elem / parts) <= 1);
                    next = next + TileOffset(part.nbytes);
                }
                assert_eq!(next, whole.offset + TileOffset(whole.nbytes));
            }
        }
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
}
