//! Two-level collectives on the intercube tables (ADR-0090): inside each
//! SIP over its cube mesh, then between SIPs over one *leader* cube per
//! SIP (the south-east corner, where `intercube_allreduce`'s SIP sum
//! forms), as `intercube_allgather` and `intercube_reducescatter` do.
//!
//! - [`cube_tree`]: the cube mesh's tree towards the leader (row then
//!   column, each line a chain towards its end), whose edges carry the
//!   intra-SIP phases; [`cube_toward`] names the cube a direction leads to;
//! - [`sip_lines`]: the lines of leaders between SIPs (a ring of SIPs as
//!   one line, a torus or mesh as its row then its column, wrap links
//!   unused), each with the contiguous *unit* of the output every position
//!   owns on it;
//! - [`line_allgather`] and [`line_reduce_scatter`]: one line's
//!   all-gather and reduce-scatter as two streams, one towards each end,
//!   so every link carries at most `len − 1` units one way;
//! - [`tokens_up`], [`spread_down`]: tokens (one-element IPCQ messages)
//!   that say "my subtree's puts have landed", and the pipelined tree
//!   broadcast of a whole tile by one-sided puts along [`cube_tree`].
//!
//! A unit on a line is `unit_runs` *runs* (one SIP's `cubes` consecutive
//! blocks), the unit of position `u` starting at run `origin + u ·
//! unit_runs`: on a SIP row the runs of that row's SIPs, on a column the
//! rows' runs, so every message is one contiguous range whatever the
//! machine (never a block per endpoint: the flat ring's `endpoints²`
//! messages are what this avoids).

use super::*;

/// The leader cube of every SIP: the south-east corner (the last cube),
/// where the chains of [`cube_tree`] meet.
pub fn leader_cube(args: &KernelArgs) -> u32 {
    args.cubes() - 1
}

/// `cube`'s place in the tree of the cube mesh towards [`leader_cube`]:
/// its row (`W` → `E`), then the east column (`N` → `S`).
pub fn cube_tree(args: &KernelArgs, cube: u32) -> TreeLinks {
    let (w, h) = (args.tile.cube_w, args.tile.cube_h);
    let at = GridPos::of(cube, w);
    hierarchy(&[
        Line::to_end(at.col, w, Dir::W, Dir::E),
        Line::to_end(at.row, h, Dir::N, Dir::S),
    ])
}

/// The cube one step from `cube` in the mesh direction `dir` on a mesh
/// `cube_w` wide (`E`: the next column, `S`: the next row); `None` for a
/// direction between SIPs or off the mesh's west or north edge.
pub fn cube_toward(cube: u32, dir: Dir, cube_w: u32) -> Option<u32> {
    match dir {
        Dir::E => Some(cube + 1),
        Dir::W => cube.checked_sub(1),
        Dir::S => Some(cube + cube_w),
        Dir::N => cube.checked_sub(cube_w),
        _ => None,
    }
}

/// `cube`'s place in the tree of a rooted call (`broadcast`, `reduce`)
/// rooted at endpoint `root` (cube `root mod cubes` of SIP `root /
/// cubes`): the lines of `cube_and_sip_lines` (its cube row, its cube
/// column, then the SIP row and column, or the ring of SIPs as one
/// line, wrap links unused) with each line's root where the root's row,
/// column or SIP is.
pub fn rooted_tree(args: &KernelArgs, cube: u32, root: usize) -> TreeLinks {
    let cubes = args.cubes();
    let (root_sip, root_cube) = (root as u32 / cubes, root as u32 % cubes);
    let w = args.tile.cube_w;
    let (at, top) = (GridPos::of(cube, w), GridPos::of(root_cube, w));
    let line = |pos, len, root, lo, hi| Line {
        pos,
        len,
        root,
        lo,
        hi,
    };
    let mut levels = vec![
        line(at.col, w, top.col, Dir::W, Dir::E),
        line(at.row, args.tile.cube_h, top.row, Dir::N, Dir::S),
    ];
    let rank = args.sip_rank;
    match args.sip_arrangement {
        SipArrangement::Ring { .. } => {
            let n = args.tile.n_sips;
            levels.push(line(rank, n, root_sip, Dir::GlobalW, Dir::GlobalE));
        }
        SipArrangement::Torus { w, h } | SipArrangement::Mesh { w, h } => {
            let (sip, top) = (GridPos::of(rank, w), GridPos::of(root_sip, w));
            levels.push(line(sip.col, w, top.col, Dir::GlobalW, Dir::GlobalE));
            levels.push(line(sip.row, h, top.row, Dir::GlobalN, Dir::GlobalS));
        }
    }
    hierarchy(&levels)
}

/// Every endpoint's [`rooted_tree`] (endpoint `e` is cube `e mod cubes`
/// of SIP `e / cubes`), for a cost model.
pub fn rooted_trees(args: &KernelArgs, root: usize) -> Vec<TreeLinks> {
    let cubes = args.cubes();
    (0..args.endpoints() as u32)
        .map(|e| {
            let sip = KernelArgs {
                sip_rank: e / cubes,
                ..args.clone()
            };
            rooted_tree(&sip, e % cubes, root)
        })
        .collect()
}

/// The broadcast of the tile at `tile` from the root of `links` chunk by
/// chunk: each chunk is received from the parent straight into the tile
/// (`recv_into`) and sent on to every child from there, so chunk `c`
/// descends while the parent already sends `c + 1`.
pub async fn tree_broadcast(
    tl: &Tl,
    links: &TreeLinks,
    tile: DevAddr,
    dtype: DType,
    chunks: &[TileView],
) -> Result<(), KernelError> {
    for chunk in chunks {
        let _phase = tl.phase("broadcast");
        let (shape, at) = ([chunk.n_elem as usize], tile + chunk.offset);
        let part = match links.parent {
            Some(parent) => tl.recv_into(parent, &shape, dtype, at).await?,
            None => tl.view(at, &shape, dtype)?,
        };
        for &child in &links.children {
            tl.send(child, &part).await?;
        }
    }
    Ok(())
}

/// One line of leaders and the unit each of its positions owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SipLine {
    /// This SIP's position on the line, its length and directions
    /// (`lo` towards position − 1); the root is unused.
    pub line: Line,
    /// The run where position 0's unit starts.
    pub origin: u64,
    /// Runs per unit.
    pub unit_runs: u64,
}

impl SipLine {
    /// Unit `u`'s view of a tile whose runs are `run_elems` elements.
    pub fn unit(&self, u: u32, run_elems: u64, dtype: DType) -> TileView {
        let n_elem = self.unit_runs * run_elems;
        let start = (self.origin + u64::from(u) * self.unit_runs) * run_elems;
        TileView {
            offset: TileOffset(start * dtype.size()),
            n_elem,
            nbytes: n_elem * dtype.size(),
        }
    }
}

/// The lines of leaders SIP `args.sip_rank` is on, in the order an
/// all-gather spreads over them (a reduce-scatter takes them in reverse):
/// a ring of `n` SIPs is one line of `n` units of one run; a `w × h`
/// torus or mesh is its row (units of one run, from the row's first SIP)
/// then its column (units of the `w` runs of a row).
pub fn sip_lines(args: &KernelArgs) -> Vec<SipLine> {
    let rank = args.sip_rank;
    match args.sip_arrangement {
        SipArrangement::Ring { .. } => vec![SipLine {
            line: Line::to_end(rank, args.tile.n_sips, Dir::GlobalW, Dir::GlobalE),
            origin: 0,
            unit_runs: 1,
        }],
        SipArrangement::Torus { w, h } | SipArrangement::Mesh { w, h } => {
            let at = GridPos::of(rank, w);
            vec![
                SipLine {
                    line: Line::to_end(at.col, w, Dir::GlobalW, Dir::GlobalE),
                    origin: u64::from(at.row * w),
                    unit_runs: 1,
                },
                SipLine {
                    line: Line::to_end(at.row, h, Dir::GlobalN, Dir::GlobalS),
                    origin: 0,
                    unit_runs: u64::from(w),
                },
            ]
        }
    }
}

/// The steps of one stream at `pos` of a line of `len`: `(unit sent,
/// unit received)`. Towards `hi` (`up`) position `p` sends its own unit
/// then each one it received from `lo`, which sends `p − 1`, `p − 2`, …,
/// 0; towards `lo` the mirror. The last position of a stream only
/// receives, the first only sends.
fn gather_steps(pos: u32, len: u32, up: bool) -> Vec<(Option<u32>, Option<u32>)> {
    if up {
        let last = pos + 1 == len;
        (0..=pos)
            .map(|i| ((!last).then_some(pos - i), (i < pos).then(|| pos - i - 1)))
            .collect()
    } else {
        let span = len - pos;
        (0..span)
            .map(|i| {
                (
                    (pos > 0).then_some(pos + i),
                    (i + 1 < span).then_some(pos + i + 1),
                )
            })
            .collect()
    }
}

/// The all-gather of `on`'s units in the tile at `base` (device memory,
/// runs of `run_elems` elements): every position ends with every unit,
/// copies only. Two streams run at once, one towards each end of the
/// line; each sends a unit from the tile while it receives the next into
/// its place (`recv_into`, segment by segment: a unit of any size passes).
pub async fn line_allgather(
    tl: &Tl,
    on: &SipLine,
    base: DevAddr,
    run_elems: u64,
    dtype: DType,
) -> Result<(), KernelError> {
    let line = on.line;
    let stream = |up: bool| {
        let (send, recv) = if up {
            (line.hi, line.lo)
        } else {
            (line.lo, line.hi)
        };
        async move {
            for (out, into) in gather_steps(line.pos, line.len, up) {
                let view = |u: u32| on.unit(u, run_elems, dtype);
                let shape = [on.unit(0, run_elems, dtype).n_elem as usize];
                let sending = async {
                    let Some(u) = out else { return Ok(()) };
                    let unit = tl.view(base + view(u).offset, &shape, dtype)?;
                    tl.send(send, &unit).await
                };
                let receiving = async {
                    let Some(u) = into else { return Ok(()) };
                    tl.recv_into(recv, &shape, dtype, base + view(u).offset)
                        .await
                        .map(|_| ())
                };
                futures::try_join!(sending, receiving)?;
            }
            Ok::<(), KernelError>(())
        }
    };
    futures::try_join!(stream(true), stream(false))?;
    Ok(())
}

/// One stream of [`line_reduce_scatter`]: position `p` receives from
/// `recv` the partials of its own unit and of every unit beyond it
/// (towards the stream's end), adds its own part of each of the others
/// into `acc` and sends them on, the send of one overlapping the receipt
/// of the next. Returns the partial of its own unit (`None` at the
/// stream's first position).
async fn reduce_stream(
    tl: &Tl,
    op: ReduceOp,
    acc: &TensorHandle,
    units: &[TileView],
    dirs: (Option<Dir>, Option<Dir>),
) -> Result<Option<TensorHandle>, KernelError> {
    let (send, recv) = dirs;
    let mut own = None;
    let mut pending: Option<TensorHandle> = None;
    for (i, unit) in units.iter().enumerate() {
        let sending = async {
            match (&pending, send) {
                (Some(part), Some(dir)) => tl.send(dir, part).await,
                _ => Ok(()),
            }
        };
        let receiving = async {
            let Some(dir) = recv else { return Ok(None) };
            let into = tl.alloc(&[unit.n_elem as usize], acc.dtype())?;
            tl.recv_into(dir, into.shape(), into.dtype(), &into).await?;
            Ok(Some(into))
        };
        let (_, got) = futures::try_join!(sending, receiving)?;
        let part = slice(tl, acc, unit)?;
        match (i, got) {
            (0, got) => own = got,
            (_, Some(got)) => {
                reduce_received(tl, op, &part, &got).await?;
                tl.free(&got)?;
            }
            (_, None) => {}
        }
        pending = (i > 0 && send.is_some()).then_some(part);
    }
    if let (Some(part), Some(dir)) = (pending, send) {
        tl.send(dir, &part).await?;
    }
    Ok(own)
}

/// The reduce-scatter of `on`'s units of `acc` (in TCM, runs of
/// `run_elems` elements): afterwards this position's unit of `acc` holds
/// the combination (`op`, unfinished: an `Avg` is still a sum) of every
/// position's. Partials flow in two streams, one towards each end: unit
/// `u`'s from the positions below it climb to `u`, those above it descend
/// to `u`, and `u` adds the low one, then the high one, to its own.
pub async fn line_reduce_scatter(
    tl: &Tl,
    on: &SipLine,
    op: ReduceOp,
    acc: &TensorHandle,
    run_elems: u64,
) -> Result<(), KernelError> {
    let (line, dtype) = (on.line, acc.dtype());
    let (pos, len) = (line.pos, line.len);
    let unit = |u: u32| on.unit(u, run_elems, dtype);
    let up: Vec<_> = (pos..len).map(unit).collect();
    let down: Vec<_> = (0..=pos).rev().map(unit).collect();
    let up_dirs = (
        (pos + 1 < len).then_some(line.hi),
        (pos > 0).then_some(line.lo),
    );
    let down_dirs = (
        (pos > 0).then_some(line.lo),
        (pos + 1 < len).then_some(line.hi),
    );
    let (low, high) = futures::try_join!(
        reduce_stream(tl, op, acc, &up, up_dirs),
        reduce_stream(tl, op, acc, &down, down_dirs)
    )?;
    let own = slice(tl, acc, &unit(pos))?;
    for part in [low, high].into_iter().flatten() {
        reduce_received(tl, op, &own, &part).await?;
        tl.free(&part)?;
    }
    Ok(())
}

/// Sends a token (a one-element message) in `dir`.
pub async fn send_token(tl: &Tl, dir: Dir, dtype: DType) -> Result<(), KernelError> {
    let token = tl.alloc(&[1], dtype)?;
    tl.send(dir, &token).await?;
    tl.free(&token)
}

/// Receives a token from `dir`.
pub async fn recv_token(tl: &Tl, dir: Dir, dtype: DType) -> Result<(), KernelError> {
    let token = tl.recv(dir, &[1], dtype).await?;
    tl.release(&token)
}

/// Waits for a token from every child of `links`, then sends one to its
/// parent: at the root, every endpoint of the tree has passed this point.
pub async fn tokens_up(tl: &Tl, links: &TreeLinks, dtype: DType) -> Result<(), KernelError> {
    for &child in &links.children {
        recv_token(tl, child, dtype).await?;
    }
    match links.parent {
        Some(parent) => send_token(tl, parent, dtype).await,
        None => Ok(()),
    }
}

/// The pieces [`spread_down`] cuts a tile of `bytes` into: one per
/// 64 KiB, at most [`SPREAD_PIECES`].
pub fn spread_pieces(bytes: u64) -> u64 {
    (bytes / MAX_CHUNK).clamp(1, SPREAD_PIECES)
}

/// The most pieces [`spread_down`] pipelines a tile in: enough to overlap
/// the few levels of a cube-mesh tree, few enough that a 1 GiB tile on
/// 16,384 endpoints stays a few hundred thousand puts.
pub const SPREAD_PIECES: u64 = 8;

/// The broadcast of the tile at `src` (this cube's `n_elem` elements)
/// from the root of `links` (a [`cube_tree`] of this SIP's cubes) into
/// every cube's tile at the same place of `tiles` (by cube), piece by
/// piece: an endpoint waits for its parent's token of a piece, puts the
/// piece into each child's tile (PE_DMA, HBM to HBM, at once) and, once
/// they have landed, sends each child a token of it.
pub async fn spread_down(
    tl: &Tl,
    args: &KernelArgs,
    links: &TreeLinks,
    tiles: &[DevAddr],
    n_elem: u64,
) -> Result<(), KernelError> {
    let (cube, dtype) = (tl.program_id(1), args.dtype);
    let src = tiles[cube as usize];
    let pieces = split_tile(spread_pieces(n_elem * dtype.size()), n_elem, dtype);
    let children: Vec<(Dir, DevAddr)> = links
        .children
        .iter()
        .map(|&dir| {
            let child = cube_toward(cube, dir, args.tile.cube_w);
            let tile = child.and_then(|c| tiles.get(c as usize).copied());
            tile.map(|t| (dir, t))
                .ok_or_else(|| KernelError::failed(format!("no cube {dir} of cube {cube}")))
        })
        .collect::<Result<_, _>>()?;
    for piece in pieces {
        if let Some(parent) = links.parent {
            recv_token(tl, parent, dtype).await?;
        }
        let shape = [piece.n_elem as usize];
        let view = tl.view(src + piece.offset, &shape, dtype)?;
        let puts = children
            .iter()
            .map(|&(_, tile)| tl.store(tile + piece.offset, &view));
        futures::future::try_join_all(puts).await?;
        for &(dir, _) in &children {
            send_token(tl, dir, dtype).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every unit a stream's position receives is one the position before
    /// it (towards the stream's start) sends, in the same order, and every
    /// position ends with every unit.
    #[test]
    fn gather_streams_deliver_every_unit_once() {
        for len in 1..7u32 {
            for up in [true, false] {
                let steps: Vec<_> = (0..len).map(|p| gather_steps(p, len, up)).collect();
                for pos in 0..len {
                    let got: Vec<u32> = steps[pos as usize].iter().filter_map(|s| s.1).collect();
                    let from = if up {
                        pos.checked_sub(1)
                    } else {
                        Some(pos + 1)
                    };
                    let sent: Vec<u32> = match from.filter(|&f| f < len) {
                        Some(f) => steps[f as usize].iter().filter_map(|s| s.0).collect(),
                        None => vec![],
                    };
                    assert_eq!(got, sent, "len {len} pos {pos} up {up}");
                    let expect: Vec<u32> = if up {
                        (0..pos).rev().collect()
                    } else {
                        (pos + 1..len).collect()
                    };
                    assert_eq!(got, expect, "len {len} pos {pos} up {up}");
                }
            }
        }
    }

    #[test]
    fn the_cube_tree_meets_at_the_south_east_corner() {
        // 3 × 2: the corner (cube 5) collects its row (W) and column (N).
        let a = KernelArgs {
            t_ptr: 0,
            tiles: std::rc::Rc::from([0u64; 6]),
            tile: crate::ccl::TileArgs {
                n_elem: 1,
                cube_w: 3,
                cube_h: 2,
                n_sips: 1,
            },
            dtype: DType::F32,
            call: crate::ccl::CallArgs::Custom,
            sip_rank: 0,
            sip_arrangement: SipArrangement::Ring { n: 1 },
            params: std::rc::Rc::new(Params::default()),
            slot_bytes: 64,
        };
        assert_eq!(leader_cube(&a), 5);
        let root = cube_tree(&a, 5);
        assert_eq!((root.parent, root.children), (None, vec![Dir::W, Dir::N]));
        assert_eq!(cube_tree(&a, 2).parent, Some(Dir::S));
        assert_eq!(cube_tree(&a, 0).parent, Some(Dir::E));
        assert_eq!(cube_toward(5, Dir::W, 3), Some(4));
        assert_eq!(cube_toward(5, Dir::N, 3), Some(2));
        assert_eq!(cube_toward(0, Dir::N, 3), None);
        assert_eq!(cube_toward(0, Dir::GlobalE, 3), None);
    }

    #[test]
    fn sip_units_are_contiguous_runs() {
        let row = SipLine {
            line: Line::to_end(1, 4, Dir::GlobalW, Dir::GlobalE),
            origin: 8,
            unit_runs: 1,
        };
        // Run 8 + 2 of 16 f16 elements: element 160, byte 320.
        let u = row.unit(2, 16, DType::F16);
        assert_eq!((u.offset, u.n_elem, u.nbytes), (TileOffset(320), 16, 32));
        let col = SipLine {
            origin: 0,
            unit_runs: 4,
            ..row
        };
        let u = col.unit(3, 16, DType::F32);
        assert_eq!((u.offset, u.n_elem), (TileOffset(3 * 4 * 16 * 4), 64));
    }
}
