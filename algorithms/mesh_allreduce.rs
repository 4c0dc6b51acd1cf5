//! `mesh_allreduce`: a 2-D all-reduce over the grid of every cube of the
//! machine (PE 0 of each cube of each SIP), rows then columns.
//!
//! The grid is the SIPs' cube meshes side by side as the SIPs are laid
//! out: a ring of `n` SIPs of `w × h` cubes is a `(n·w) × h` grid; a
//! `W × H` torus or mesh of SIPs is a `(W·w) × (H·h)` grid ([`position`]).
//! The algorithm's tables join every cube to its grid neighbours with
//! wrap-around (`E/W` along rows, `N/S` along columns). Then:
//!
//! 1. ring reduce-scatter along the row: endpoint at column `x` owns the
//!    row's sum of piece `x + 1` of its tile;
//! 2. ring reduce-scatter of that piece along the column, then
//! 3. ring all-gather along the column: every endpoint of the column holds
//!    the grid's sum of its piece;
//! 4. ring all-gather along the row.
//!
//! Every sum is formed once and copied (`helpers::Ring`), so every endpoint
//! ends with the same bits. Any tile of at least one element: parts may
//! be empty (their steps send nothing) or larger than an IPCQ slot (sent
//! as several messages, `helpers::exchange`).
//!
//! Cost ([`MeshAllreduce::model`]): an endpoint sends `2 (W − 1)` parts of
//! `S/W` east and `2 (H − 1)` of `S/(W H)` south, one after the other:
//! `2 (W − 1)(α_row + S/(W β_row)) + 2 (H − 1)(α_col + S/(W H β_col))`,
//! the largest over the endpoints.

use kernbench::ccl::cost::{CostError, Network, sequence};
use kernbench::ccl::helpers::{
    ChunkDefault, MAX_CHUNK, Ring, TileSplit, finish_in_place, message_bytes, slice,
};
use kernbench::ccl::topology::{Dir, NeighborMap, TopologyError};
use kernbench::ccl::{CclAlgorithm, Collective, Endpoints, KernelArgs, WorldShape};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};
use kernbench::topology::{GridPos, SipArrangement};

struct MeshAllreduce;

/// The largest message: one default IPCQ slot (at most the configured
/// one); a larger piece goes as several.
const MESSAGE: ChunkDefault = ChunkDefault::Fixed(MAX_CHUNK);

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(MeshAllreduce)
}

impl CclAlgorithm for MeshAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("mesh_allreduce", mesh_allreduce)
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        let mut endpoints = Endpoints::flat(shape)?;
        let layout = Layout::new(
            shape.n_sips,
            shape.sip_arrangement,
            shape.cube_w,
            shape.cube_h,
        );
        endpoints.tables = (0..endpoints.coords.len() as u32)
            .map(|e| layout.table(e))
            .collect();
        Ok(endpoints)
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let layout = Layout::of(args);
        let (w, h) = layout.size();
        let elem = args.dtype.size();
        let row_part = args.tile.n_elem as u64 / u64::from(w);
        let mut worst = SimDuration::ZERO;
        for e in 0..args.endpoints() {
            let mut sends = Vec::new();
            if w > 1 {
                let step = net.message(e, net.peer(e, Dir::E)?, row_part * elem)?;
                sends.extend(std::iter::repeat_n(step, 2 * (w as usize - 1)));
            }
            if h > 1 {
                let bytes = row_part / u64::from(h) * elem;
                let step = net.message(e, net.peer(e, Dir::S)?, bytes)?;
                sends.extend(std::iter::repeat_n(step, 2 * (h as usize - 1)));
            }
            worst = worst.max(sequence(sends));
        }
        Ok(Some(worst))
    }
}

/// How the SIPs' cube meshes form one grid.
struct Layout {
    n_sips: u32,
    /// The SIP grid `(W, H)`; `None` for a ring (SIPs side by side).
    sip_dims: Option<(u32, u32)>,
    cube_w: u32,
    cube_h: u32,
}

impl Layout {
    fn new(n_sips: u32, sips: SipArrangement, cube_w: u32, cube_h: u32) -> Layout {
        let sip_dims = match sips {
            SipArrangement::Ring { .. } => None,
            SipArrangement::Torus { w, h } | SipArrangement::Mesh { w, h } => Some((w, h)),
        };
        Layout {
            n_sips,
            sip_dims,
            cube_w,
            cube_h,
        }
    }

    fn of(args: &KernelArgs) -> Layout {
        let t = &args.tile;
        Layout::new(t.n_sips, args.sip_arrangement, t.cube_w, t.cube_h)
    }

    /// The grid's width and height.
    fn size(&self) -> (u32, u32) {
        let (sw, sh) = self.sip_dims.unwrap_or((self.n_sips, 1));
        (sw * self.cube_w, sh * self.cube_h)
    }

    /// Endpoint `e`'s place on the grid.
    fn position(&self, e: u32) -> GridPos {
        let cubes = self.cube_w * self.cube_h;
        let (sip, cube) = (e / cubes, e % cubes);
        let (sw, _) = self.sip_dims.unwrap_or((self.n_sips, 1));
        GridPos {
            row: sip / sw * self.cube_h + cube / self.cube_w,
            col: sip % sw * self.cube_w + cube % self.cube_w,
        }
    }

    /// The endpoint at grid position `(row, col)`.
    fn endpoint(&self, row: u32, col: u32) -> usize {
        let (sw, _) = self.sip_dims.unwrap_or((self.n_sips, 1));
        let sip = row / self.cube_h * sw + col / self.cube_w;
        let cube = row % self.cube_h * self.cube_w + col % self.cube_w;
        (sip * self.cube_w * self.cube_h + cube) as usize
    }

    /// Endpoint `e`'s neighbours with wrap-around; none along a dimension
    /// of length 1.
    fn table(&self, e: u32) -> NeighborMap {
        let GridPos { row, col } = self.position(e);
        let (w, h) = self.size();
        let mut table = NeighborMap::new();
        if w > 1 {
            table.insert(Dir::E, self.endpoint(row, (col + 1) % w));
            table.insert(Dir::W, self.endpoint(row, (col + w - 1) % w));
        }
        if h > 1 {
            table.insert(Dir::S, self.endpoint((row + 1) % h, col));
            table.insert(Dir::N, self.endpoint((row + h - 1) % h, col));
        }
        table
    }
}

async fn mesh_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let layout = Layout::of(&args);
    let p = layout.position(args.endpoint(cube) as u32);
    let n = args.tile.n_elem;
    let (w, h) = layout.size();
    let (w, h) = (w as usize, h as usize);
    let (max_message, op) = (message_bytes(&args, MESSAGE), args.op()?);
    let tile = args.tile_addr(cube)?;
    let acc = tl.load(tile, &[n], args.dtype).await?;
    let row = Ring {
        pos: p.col as usize,
        len: w,
        send: Dir::E,
        recv: Dir::W,
        max_message,
    };
    let column = Ring {
        pos: p.row as usize,
        len: h,
        send: Dir::S,
        recv: Dir::N,
        max_message,
    };
    let row_parts = TileSplit::new(w as u64, n as u64, args.dtype);
    row.reduce_scatter(&tl, op, &acc, row_parts).await?;
    let mine = row.owned(row_parts);
    let column_parts = mine.split_lazily(h as u64, args.dtype);
    column.reduce_scatter(&tl, op, &acc, column_parts).await?;
    let owned = column.owned(column_parts);
    if owned.n_elem > 0 {
        finish_in_place(&tl, &args, &slice(&tl, &acc, &owned)?).await?;
    }
    column.all_gather(&tl, &acc, column_parts).await?;
    row.all_gather(&tl, &acc, row_parts).await?;
    tl.store(tile, &acc).await
}
