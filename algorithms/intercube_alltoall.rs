//! `intercube_alltoall` (ADR-0112): `all_to_all` in two levels on the
//! intercube tables, through each SIP's *leader* (the south-east cube,
//! `helpers::leader_cube`), with strided copies (`Tl::copy_strided`)
//! doing the transposes plain DMAs cannot. Block `j` of endpoint `e`'s
//! output is block `e` of endpoint `j`'s input, as `ring_alltoall`'s; a
//! block is `b` = `tile.n_elem` elements (the workload pads a count that
//! does not split, the same for both). Only the leader's PE works; the
//! others' programs end at once.
//!
//! With `C` cubes per SIP, the SIPs a `w × h` grid (a ring of `n`: `n × 1`)
//! and `D = C · C · b` elements the data of one SIP for one destination
//! SIP, the leader, in its TCM:
//!
//! 1. **gathers** every cube's input, `[dst SIP][dst cube]`, as
//!    `[dst column][dst row][src cube][dst cube]`: per cube one strided
//!    copy per SIP row (`w` runs of `C · b`), `C · h` in all;
//! 2. **exchanges along the SIP row** (or the ring of SIPs as one line):
//!    the unit for the leader in column `q'` is its `h` runs of `D`,
//!    contiguous; each received unit is placed by one strided copy as
//!    `[dst row][src column]`, which makes the units of the column phase
//!    contiguous; then **along the SIP column** (units of `w` runs),
//!    placed as `[src SIP][src cube][dst cube]`. A line's all-to-all runs
//!    as two streams, one towards each end: a position sends its *bundle*
//!    (its units for every position beyond it) in one message, then each
//!    bundle it receives less the unit it keeps, so every position sends
//!    at most `len − 1` messages a line (`O(SIPs · (w + h))` in all) and
//!    every link carries each unit once;
//! 3. **scatters**: one strided copy per cube of the column `[src
//!    endpoint][this dst cube]` (`SIPs · C` runs of `b`) into its output.
//!
//! The leader's TCM holds the SIP's whole input twice and a bundle per
//! stream twice (about four times the bytes per rank): a tile too large
//! fails with the allocator's error naming the PE, not a panic.
//!
//! Cost ([`IntercubeAlltoall::model`]): a lower bound of the exchange
//! between leaders alone: on every line the position before a stream's
//! end sends `len − 1` messages of at least one unit one after the other,
//! each at least the smaller of the unit's TCM-to-TCM Hockney time and its
//! HBM-to-HBM copy between neighbouring leaders (a message goes from the
//! leader's TCM into an HBM slot). The gather and the scatter inside the
//! SIP only add to it.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{leader_cube, sip_lines};
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{
    CclAlgorithm, Collective, DevAddr, Endpoints, KernelArgs, Params, TileOffset, WorldShape,
};
use kernbench::mem::{DType, Strided};
use kernbench::sim::SimDuration;
use kernbench::tl::{Dir, Kernel, KernelError, TensorHandle, Tl};
use kernbench::topology::SipArrangement;

struct IntercubeAlltoall;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(IntercubeAlltoall)
}

impl CclAlgorithm for IntercubeAlltoall {
    fn collective(&self) -> Collective {
        Collective::AllToAll
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("intercube_alltoall", intercube_alltoall)
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }

    /// Asked per block, it cannot see the rank's bytes the leader holds
    /// (about four times them, see the module docs): one block.
    fn tcm_bytes(&self, tile_bytes: u64, _params: &Params) -> u64 {
        tile_bytes
    }

    /// `Σ_lines (len − 1) · m(unit)` between neighbouring leaders.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        if args.endpoints() < 2 {
            return Ok(None);
        }
        let sip0 = KernelArgs {
            sip_rank: 0,
            ..args.clone()
        };
        let (grid, leader) = (Grid::of(&sip0), leader_cube(args) as usize);
        let run = grid.run_bytes();
        let mut phases = Vec::new();
        for (k, on) in sip_lines(&sip0).into_iter().enumerate() {
            let len = on.line.len;
            if len < 2 {
                continue;
            }
            let (stride, unit) = match k {
                0 => (1, run * u64::from(grid.h)),
                _ => (grid.w as usize, run * u64::from(grid.w)),
            };
            let next = leader + stride * grid.cubes as usize;
            let message = net.message(leader, next, unit)?;
            let copy = net.hbm_copies(&[(leader, next)], unit)?;
            phases.push(cost::repeat(message.min(copy), u64::from(len - 1)));
        }
        Ok(Some(cost::sequence(phases)))
    }
}

/// The SIPs as a grid (`w × h`; a ring of `n` is `n × 1`), the cubes and
/// the element type: the layout of the leader's buffers.
#[derive(Clone, Copy)]
struct Grid {
    w: u32,
    h: u32,
    cubes: u32,
    /// Elements per block.
    block: u64,
    dtype: DType,
}

impl Grid {
    fn of(args: &KernelArgs) -> Grid {
        let (w, h) = match args.sip_arrangement {
            SipArrangement::Ring { .. } => (args.tile.n_sips, 1),
            SipArrangement::Torus { w, h } | SipArrangement::Mesh { w, h } => (w, h),
        };
        Grid {
            w,
            h,
            cubes: args.cubes(),
            block: args.tile.n_elem as u64,
            dtype: args.dtype,
        }
    }

    /// Bytes of `elems` elements.
    fn bytes(&self, elems: u64) -> u64 {
        elems * self.dtype.size()
    }

    /// Bytes of one block.
    fn block_bytes(&self) -> u64 {
        self.bytes(self.block)
    }

    /// Bytes of `D`: one SIP's data for one destination SIP.
    fn run_bytes(&self) -> u64 {
        self.block_bytes() * u64::from(self.cubes) * u64::from(self.cubes)
    }

    /// Elements of the SIP's whole input (`SIPs · D`).
    fn sip_elems(&self) -> usize {
        let sips = u64::from(self.w) * u64::from(self.h);
        (sips * self.run_bytes() / self.dtype.size()) as usize
    }
}

/// One phase of the exchange: a line, the bytes of its unit, and how a
/// received unit is placed (`rows` runs of `run` bytes, `origin · step`
/// bytes into the output, rows `stride` apart there).
#[derive(Clone, Copy)]
struct Phase {
    pos: u32,
    len: u32,
    lo: Dir,
    hi: Dir,
    unit: u64,
    place: Strided,
    step: u64,
    dtype: DType,
}

async fn intercube_alltoall(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    if cube != leader_cube(&args) {
        return Ok(());
    }
    let grid = Grid::of(&args);
    let staged = tl.alloc(&[grid.sip_elems()], grid.dtype)?;
    gather(&tl, &args, &grid, DevAddr::of(&staged)).await?;
    let mut current = staged;
    for phase in phases(&args, &grid) {
        let placed = tl.alloc(&[grid.sip_elems()], grid.dtype)?;
        line_alltoall(&tl, &phase, &current, &placed).await?;
        tl.free(&current)?;
        current = placed;
    }
    scatter(&tl, &args, &grid, DevAddr::of(&current)).await?;
    tl.free(&current)
}

/// Every cube's input into `staged` as `[dst column][dst row][src
/// cube][dst cube]`: per cube and SIP row, the row's `w` runs of `C`
/// blocks, `h · D` apart in `staged`; all at once.
async fn gather(tl: &Tl, args: &KernelArgs, g: &Grid, staged: DevAddr) -> Result<(), KernelError> {
    let (cube_run, d) = (g.block_bytes() * u64::from(g.cubes), g.run_bytes());
    let mut copies = Vec::new();
    for c in 0..g.cubes {
        let input = args.tile_addr(c)?;
        for row in 0..u64::from(g.h) {
            let layout = Strided {
                rows: u64::from(g.w),
                run: cube_run,
                src_stride: cube_run,
                dst_stride: u64::from(g.h) * d,
            };
            let src = input + TileOffset(row * u64::from(g.w) * cube_run);
            let dst = staged + TileOffset(row * d + u64::from(c) * cube_run);
            copies.push(tl.copy_strided(src, dst, layout));
        }
    }
    futures::future::try_join_all(copies).await?;
    Ok(())
}

/// The column of each cube, `[src endpoint][that dst cube]`, out of
/// `placed` (`[src SIP][src cube][dst cube]`) into its output; all at
/// once.
async fn scatter(tl: &Tl, args: &KernelArgs, g: &Grid, placed: DevAddr) -> Result<(), KernelError> {
    let block = g.block_bytes();
    let layout = Strided {
        rows: args.endpoints() as u64,
        run: block,
        src_stride: block * u64::from(g.cubes),
        dst_stride: block,
    };
    let copies = (0..g.cubes).map(|c| {
        let out = args.out_addr(c);
        let src = placed + TileOffset(u64::from(c) * block);
        async move { tl.copy_strided(src, out?, layout).await }
    });
    futures::future::try_join_all(copies).await?;
    Ok(())
}

/// The phases of this SIP: its row then its column (units `h · D` placed
/// as `[dst row][src column]`, then `w · D` placed as `[src row][src
/// column]`), or the ring of SIPs as one line (units `D`, placed by
/// source SIP).
fn phases(args: &KernelArgs, g: &Grid) -> Vec<Phase> {
    let d = g.run_bytes();
    let (w, h) = (u64::from(g.w), u64::from(g.h));
    let shapes = [(h, d, w * d, d), (1, w * d, w * d, w * d)];
    sip_lines(args)
        .into_iter()
        .zip(shapes)
        .map(|(on, (rows, run, stride, step))| Phase {
            pos: on.line.pos,
            len: on.line.len,
            lo: on.line.lo,
            hi: on.line.hi,
            unit: rows * run,
            place: Strided {
                rows,
                run,
                src_stride: run,
                dst_stride: stride,
            },
            step,
            dtype: g.dtype,
        })
        .collect()
}

/// The all-to-all of `phase`'s line: `send` holds this position's unit
/// for every position in order; afterwards `placed` holds every
/// position's unit for this one, placed by origin. Two streams, one
/// towards each end; the own unit is placed meanwhile.
async fn line_alltoall(
    tl: &Tl,
    phase: &Phase,
    send: &TensorHandle,
    placed: &TensorHandle,
) -> Result<(), KernelError> {
    let (send, placed) = (DevAddr::of(send), DevAddr::of(placed));
    let mine = send + TileOffset(u64::from(phase.pos) * phase.unit);
    let own = place(tl, phase, phase.pos, mine, placed);
    futures::try_join!(
        own,
        stream(tl, phase, true, send, placed),
        stream(tl, phase, false, send, placed)
    )?;
    Ok(())
}

/// Places the unit of `origin` at `unit` into `placed`.
async fn place(
    tl: &Tl,
    phase: &Phase,
    origin: u32,
    unit: DevAddr,
    placed: DevAddr,
) -> Result<(), KernelError> {
    let dst = placed + TileOffset(u64::from(origin) * phase.step);
    tl.copy_strided(unit, dst, phase.place).await
}

/// One stream of [`line_alltoall`] (`up`: towards position `len − 1`).
/// Position `p` first sends its bundle (its units for the positions
/// beyond it, in order); then, for each origin before it, nearest first,
/// receives that origin's bundle for `p` and beyond into scratch, places
/// the unit for `p` and sends the rest on while it receives the next.
async fn stream(
    tl: &Tl,
    phase: &Phase,
    up: bool,
    send: DevAddr,
    placed: DevAddr,
) -> Result<(), KernelError> {
    let (p, len, unit) = (phase.pos, phase.len, phase.unit);
    let (to, from) = if up {
        (phase.hi, phase.lo)
    } else {
        (phase.lo, phase.hi)
    };
    let forwards = if up { p + 1 < len } else { p > 0 };
    let origins: Vec<u32> = match up {
        true => (0..p).rev().collect(),
        false => (p + 1..len).collect(),
    };
    // A bundle received holds units `p..len` (up) or `0..=p` (down).
    let (units_in, kept) = match up {
        true => (u64::from(len - p), 0),
        false => (u64::from(p + 1), u64::from(p)),
    };
    let first_sent = if up { u64::from(p + 1) } else { 0 };
    let dtype = phase.dtype;
    let elems = |units: u64| (units * unit / dtype.size()) as usize;
    let own = send + TileOffset(first_sent * unit);
    let mut pending = match forwards {
        true => Some(tl.view(own, &[elems(units_in - 1)], dtype)?),
        false => None,
    };
    let mut held: Option<TensorHandle> = None;
    for origin in origins {
        let into = tl.alloc(&[elems(units_in)], dtype)?;
        let sending = async {
            match &pending {
                Some(bundle) => tl.send(to, bundle).await,
                None => Ok(()),
            }
        };
        let shape = [elems(units_in)];
        let receiving = tl.recv_into(from, &shape, dtype, &into);
        futures::try_join!(sending, receiving)?;
        if let Some(done) = held.take() {
            tl.free(&done)?;
        }
        let at = DevAddr::of(&into);
        place(tl, phase, origin, at + TileOffset(kept * unit), placed).await?;
        let rest = if up { at + TileOffset(unit) } else { at };
        pending = match forwards {
            true => Some(tl.view(rest, &[elems(units_in - 1)], dtype)?),
            false => None,
        };
        held = Some(into);
    }
    if let Some(bundle) = &pending {
        tl.send(to, bundle).await?;
    }
    if let Some(done) = held {
        tl.free(&done)?;
    }
    Ok(())
}
