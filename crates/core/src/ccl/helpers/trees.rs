//! Reduce-then-broadcast trees: an endpoint's [`TreeLinks`] (the
//! direction of its parent and of its children) built from a binary tree
//! ([`binary_tree`]) or from lines ([`Line`], [`hierarchy`]: a row of
//! cubes, then a column, then SIP dimensions), and [`reduce_broadcast`],
//! which runs any such tree chunk by chunk, pipelined; the hierarchical
//! all-reduce built on them ([`hierarchical_allreduce`]).

use super::*;

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

/// What the root of [`reduce_up`] does with each finished chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtRoot {
    /// Sends it down the tree and stores it (an all-reduce).
    Broadcast,
    /// Only stores it (a reduce: the other tiles stay as they were).
    Store,
}

/// The upward half: combines the children into each chunk of the tile with
/// `args.op()`, passes it to the parent, or at the root finishes it
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
    let op = args.op()?;
    for (index, chunk) in chunks.iter().enumerate() {
        let _phase = tl.phase("reduce");
        let part = tile.chunk(tl, chunk, args.dtype).await?;
        for &child in &links.children {
            let received = tl.recv(child, part.shape(), part.dtype()).await?;
            reduce_received(tl, op, &part, &received).await?;
            tl.release(&received)?;
        }
        match links.parent {
            Some(parent) => tl.send(parent, &part).await?,
            None => {
                let result = finish(tl, op, part.clone(), args.endpoints()).await?;
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
    tile: DevAddr,
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
    dst: DevAddr,
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

#[cfg(test)]
mod tests {
    use super::*;

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
