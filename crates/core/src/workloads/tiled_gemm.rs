//! The tiled GEMM building block (ADR-0014): `C = epilogue(A × B)` on every
//! PE of a grid of cubes, operands of any size in HBM, for the `gemm` and
//! the model workloads.
//!
//! **Problems.** Each cube `c` of the launch grid solves its own
//! [`CubeOperands`] problem `C_c = epilogue(A_c × B_c)`, all of the same
//! dimensions; how a workload splits its GEMM into cube problems (row bands
//! of `A`, column bands of `B`, slices of `K`) is its placement.
//!
//! **Layout.** Operands are stored tile-major (a "blocked" layout, like a
//! TPU's tiled HBM layout): `A_c` as `mb × kb` tiles of `mt × kt`
//! elements, `B_c` as `kb × nb` tiles of `kt × nt`, `C_c` as `mb × nb`
//! tiles of `mt × nt`, each tile row-major and contiguous, tiles in
//! row-major order, edge tiles zero-padded to full size ([`pack`],
//! [`unpack`]). So every tile a PE needs is one contiguous PE_DMA copy.
//!
//! **Kernel** ([`kernel`]): PE `p` of cube `c` computes output tiles
//! `p, p + P, p + 2P, …` of `C_c` (row-major, `P` PEs per cube). For each
//! it runs a K-loop over `kb` steps: step `s` multiplies A tile `(i, s)` by
//! B tile `(s, j)` on PE_GEMM while PE_DMA loads the next step's two tiles
//! (double buffering; the next output tile's first step is prefetched
//! too). The first step `dot`s into an f32 accumulator, the middle ones
//! `dot_acc`, and the last is a `composite` whose epilogue on PE_MATH adds
//! the accumulator, applies the activation and casts to the output type;
//! the tile is then stored while the next step's loads run.
//!
//! [`Tiling::choose`] picks the tile sizes; [`Roofline`] gives the lower
//! bounds of a launch per resource from the same plan.

use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use ndarray::{Array2, ArrayView2};

use super::gemm_check::tflops;
use super::{Figure, WorkloadError};
use crate::device::Device;
use crate::hw::{GemmShape, gemm_formula};
use crate::mem::DType;
use crate::runtime::launch::{LaunchError, LaunchReport, launch};
use crate::runtime::{DPPolicy, Split, Tensor, Torch};
use crate::sim::SimDuration;
use crate::tl::{Epilogue, Grid, Kernel, KernelError, TensorHandle, Tl};
use crate::topology::{MemSpace, PeSpec, TopologySpec};

/// Largest `mt`, `nt` and `kt` [`Tiling::choose`] starts from.
pub const MAX_TILE: [usize; 3] = [512, 512, 1024];

/// Smallest `kt` [`Tiling::choose`] shrinks to before shrinking `mt`/`nt`.
const MIN_KT: usize = 128;

/// The tile sizes of a tiled GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiling {
    /// Rows of an A and C tile.
    pub mt: usize,
    /// Columns of an A tile, rows of a B tile.
    pub kt: usize,
    /// Columns of a B and C tile.
    pub nt: usize,
}

impl fmt::Display for Tiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.mt, self.kt, self.nt)
    }
}

/// Tiles along M, K and N of one cube problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileGrid {
    /// Tile rows of A and C.
    pub mb: usize,
    /// Tile columns of A, tile rows of B (K-loop steps).
    pub kb: usize,
    /// Tile columns of B and C.
    pub nb: usize,
}

/// One cube problem's dimensions and element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    /// Rows of `A_c` and `C_c`.
    pub m: usize,
    /// Columns of `A_c`, rows of `B_c`.
    pub k: usize,
    /// Columns of `B_c` and `C_c`.
    pub n: usize,
    /// Input element type (`f16` or `bf16`; accumulation is `f32`).
    pub dtype: DType,
    /// Output element type.
    pub out: DType,
}

impl Tiling {
    /// Tiles for `problem` on cubes of `pes` PEs with `tcm` bytes each:
    /// start from `mt = min(m, 512)`, `nt` small enough that every PE gets
    /// an output tile (at most 512) and `kt = min(k, 1024)`, then halve
    /// `kt` (down to 128) and then the larger of `mt`, `nt` until
    /// [`tcm_bytes`](Self::tcm_bytes) fits.
    pub fn choose(problem: &Problem, pes: usize, tcm: u64) -> Result<Tiling, WorkloadError> {
        let [max_m, max_n, max_k] = MAX_TILE;
        let mt = problem.m.min(max_m);
        let column_parts = pes.div_ceil(problem.m.div_ceil(mt)).max(1);
        let nt = problem.n.div_ceil(column_parts).min(max_n);
        let mut tiling = Tiling {
            mt,
            kt: problem.k.min(max_k),
            nt,
        };
        while tiling.tcm_bytes(problem) > tcm {
            if tiling.kt > MIN_KT {
                tiling.kt /= 2;
            } else if tiling.mt.max(tiling.nt) > 1 {
                let larger = if tiling.mt >= tiling.nt {
                    &mut tiling.mt
                } else {
                    &mut tiling.nt
                };
                *larger = larger.div_ceil(2);
            } else {
                return Err(WorkloadError::BadOption(format!(
                    "a 1x1 GEMM tile does not fit a PE's TCM of {tcm} B"
                )));
            }
        }
        Ok(tiling)
    }

    /// TCM one PE needs at most: two buffers of an A and a B tile, the f32
    /// accumulator and the composite's f32 output.
    pub fn tcm_bytes(&self, problem: &Problem) -> u64 {
        let (mt, kt, nt) = (self.mt as u64, self.kt as u64, self.nt as u64);
        let inputs = 2 * (mt * kt + kt * nt) * problem.dtype.size();
        inputs + 2 * mt * nt * DType::F32.size()
    }

    /// The tile grid of `problem`.
    pub fn grid(&self, problem: &Problem) -> TileGrid {
        TileGrid {
            mb: problem.m.div_ceil(self.mt),
            kb: problem.k.div_ceil(self.kt),
            nb: problem.n.div_ceil(self.nt),
        }
    }

    /// Elements of the blocked `A_c`, `B_c` and `C_c` of `problem`.
    pub fn blocked_elements(&self, problem: &Problem) -> [usize; 3] {
        let g = self.grid(problem);
        [
            g.mb * g.kb * self.mt * self.kt,
            g.kb * g.nb * self.kt * self.nt,
            g.mb * g.nb * self.mt * self.nt,
        ]
    }
}

/// `matrix` in the blocked layout of `(rows, cols)` tiles: tiles in
/// row-major order, each row-major, edge tiles zero-padded.
pub fn pack<T: Copy + Default>(matrix: ArrayView2<'_, T>, (rows, cols): (usize, usize)) -> Vec<T> {
    let (m, n) = matrix.dim();
    let (tr, tc) = (m.div_ceil(rows), n.div_ceil(cols));
    let mut out = Vec::with_capacity(tr * tc * rows * cols);
    for (i, j) in (0..tr).flat_map(|i| (0..tc).map(move |j| (i, j))) {
        for r in 0..rows {
            for c in 0..cols {
                let (row, col) = (i * rows + r, j * cols + c);
                out.push(matrix.get((row, col)).copied().unwrap_or_default());
            }
        }
    }
    out
}

/// The `m × n` matrix whose blocked layout of `(rows, cols)` tiles is
/// `blocked` (padding dropped); the inverse of [`pack`].
pub fn unpack<T: Copy>(
    blocked: &[T],
    (m, n): (usize, usize),
    (rows, cols): (usize, usize),
) -> Array2<T> {
    let tc = n.div_ceil(cols);
    Array2::from_shape_fn((m, n), |(row, col)| {
        let tile = (row / rows) * tc + col / cols;
        blocked[tile * rows * cols + (row % rows) * cols + col % cols]
    })
}

/// The activation of a tiled GEMM's epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// None: `C = A × B`.
    Identity,
    /// `C = GeLU(A × B)` (erf form).
    Gelu,
}

/// Where one cube's operands are: device addresses of the blocked `A_c`,
/// `B_c` and `C_c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CubeOperands {
    /// First byte of `A_c`.
    pub a: u64,
    /// First byte of `B_c`.
    pub b: u64,
    /// First byte of `C_c`.
    pub c: u64,
}

/// The kernel's arguments.
#[derive(Debug, Clone)]
pub struct TiledGemm {
    /// Cube `c`'s operands at index `c`.
    pub cubes: Rc<[CubeOperands]>,
    /// Every cube's problem.
    pub problem: Problem,
    /// The tiles.
    pub tiling: Tiling,
    /// Applied after the accumulation, before the cast.
    pub activation: Activation,
}

/// The kernel (see the module docs).
pub fn kernel() -> Kernel<TiledGemm, ()> {
    Kernel::new("tiled_gemm", tiled_gemm)
}

/// Launches the kernel on `cubes` cubes of `sip`, every PE of each.
pub async fn launch_tiled(
    device: &Rc<Device>,
    sip: u32,
    args: TiledGemm,
) -> Result<LaunchReport<()>, LaunchError> {
    let pes = device.fabric().machine().pes_per_cube();
    let grid = Grid {
        pes,
        cubes: args.cubes.len() as u32,
    };
    launch(device, &kernel(), sip, grid, args).await
}

/// One step of a PE's work: output tile `(i, j)`, K step `s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    i: usize,
    j: usize,
    s: usize,
}

/// The steps of PE `pe` of `pes`, in order.
fn steps(grid: TileGrid, pe: usize, pes: usize) -> Vec<Step> {
    let tiles = (pe..grid.mb * grid.nb).step_by(pes.max(1));
    tiles
        .flat_map(|t| (0..grid.kb).map(move |s| (t, s)))
        .map(|(t, s)| Step {
            i: t / grid.nb,
            j: t % grid.nb,
            s,
        })
        .collect()
}

impl TiledGemm {
    fn grid(&self) -> TileGrid {
        self.tiling.grid(&self.problem)
    }

    /// Device addresses of the A and B tiles of `step` and of its C tile.
    fn addresses(&self, cube: &CubeOperands, step: Step) -> [u64; 3] {
        let (g, t) = (self.grid(), self.tiling);
        let size = |dtype: DType, elems: usize| elems as u64 * dtype.size();
        let dtype = self.problem.dtype;
        [
            cube.a + size(dtype, (step.i * g.kb + step.s) * t.mt * t.kt),
            cube.b + size(dtype, (step.s * g.nb + step.j) * t.kt * t.nt),
            cube.c + size(self.problem.out, (step.i * g.nb + step.j) * t.mt * t.nt),
        ]
    }

    /// The epilogue of a tile's last step.
    fn epilogue(&self, acc: Option<&TensorHandle>) -> Vec<Epilogue> {
        let add = acc.map(|acc| Epilogue::Binary(crate::mem::BinaryFn::Add, acc.clone()));
        let activation = match self.activation {
            Activation::Identity => None,
            Activation::Gelu => Some(Epilogue::Gelu),
        };
        add.into_iter()
            .chain(activation)
            .chain([Epilogue::Cast(self.problem.out)])
            .collect()
    }
}

/// Loads the A and B tiles of `step` into new scratch.
async fn load_step(
    tl: Tl,
    args: Rc<TiledGemm>,
    cube: CubeOperands,
    step: Step,
) -> Result<[TensorHandle; 2], KernelError> {
    let [a, b, _] = args.addresses(&cube, step);
    let t = args.tiling;
    let dtype = args.problem.dtype;
    let (a, b) = futures::try_join!(
        tl.load(a, &[t.mt, t.kt], dtype),
        tl.load(b, &[t.kt, t.nt], dtype)
    )?;
    Ok([a, b])
}

async fn tiled_gemm(tl: Tl, args: TiledGemm) -> Result<(), KernelError> {
    let cube = args.cubes[tl.program_id(1) as usize];
    let plan = steps(
        args.grid(),
        tl.program_id(0) as usize,
        tl.num_programs(0) as usize,
    );
    let args = Rc::new(args);
    let Some(&first) = plan.first() else {
        return Ok(());
    };
    let mut operands = load_step(tl.clone(), args.clone(), cube, first).await?;
    let mut acc = None;
    for (index, &step) in plan.iter().enumerate() {
        let prefetch = plan
            .get(index + 1)
            .map(|&next| load_step(tl.clone(), args.clone(), cube, next));
        let compute = compute_step(&tl, &args, cube, step, &operands, &mut acc);
        let (next, ()) = futures::try_join!(
            async {
                match prefetch {
                    Some(load) => load.await.map(Some),
                    None => Ok(None),
                }
            },
            compute
        )?;
        for handle in &operands {
            tl.free(handle)?;
        }
        if let Some(next) = next {
            operands = next;
        }
    }
    Ok(())
}

/// One K step of an output tile: the accumulation, or on the last step the
/// composite with its epilogue and the store.
async fn compute_step(
    tl: &Tl,
    args: &TiledGemm,
    cube: CubeOperands,
    step: Step,
    [a, b]: &[TensorHandle; 2],
    acc: &mut Option<TensorHandle>,
) -> Result<(), KernelError> {
    let last = step.s + 1 == args.grid().kb;
    if !last {
        match acc {
            None => *acc = Some(tl.dot(a, b).await?),
            Some(acc) => tl.dot_acc(acc, a, b).await?,
        }
        return Ok(());
    }
    let sum = acc.take();
    let tile = tl
        .composite(a, b, &args.epilogue(sum.as_ref()))?
        .wait()
        .await?;
    if let Some(sum) = sum {
        tl.free(&sum)?;
    }
    let [_, _, c] = args.addresses(&cube, step);
    tl.store(c, &tile).await?;
    tl.free(&tile)
}

/// A blocked operand on cubes `0..cubes` of the caller's SIP: a
/// `[cubes, elements]` tensor, one row per cube (`DPPolicy(cube=row_wise,
/// pe=replicate, num_cubes=cubes, num_pes=1)`), or with `replicated` one
/// `[elements]` row every cube holds a copy of (`cube=replicate`).
pub fn blocked_tensor(
    torch: &Torch,
    name: &str,
    (cubes, elements): (u32, usize),
    dtype: DType,
    replicated: bool,
) -> Result<Tensor, WorkloadError> {
    let (split, shape) = match replicated {
        true => (Split::Replicate, vec![elements]),
        false => (Split::RowWise, vec![cubes as usize, elements]),
    };
    let policy = DPPolicy::new(split, Split::Replicate, cubes, 1);
    Ok(torch.empty(&shape, dtype, &policy)?.named(name))
}

/// The device address of `tensor`'s shard on each cube, in cube order.
pub fn cube_addresses(tensor: &Tensor) -> Result<Vec<u64>, WorkloadError> {
    Ok(tensor.shards()?.iter().map(|s| s.addr).collect())
}

/// Each cube's operands, from blocked tensors with one shard per cube.
pub fn operands(a: &Tensor, b: &Tensor, c: &Tensor) -> Result<Rc<[CubeOperands]>, WorkloadError> {
    let [a, b, c] = [a, b, c].map(cube_addresses);
    Ok((a?.into_iter().zip(b?).zip(c?))
        .map(|((a, b), c)| CubeOperands { a, b, c })
        .collect())
}

/// A resource whose bound a [`Roofline`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// PE_GEMM arrays: the busiest PE's array occupancy.
    Gemm,
    /// TCM ports: the busiest PE's GEMM operand and result traffic.
    Tcm,
    /// HBM: the busiest cube's bytes over its pseudo-channels.
    Hbm,
    /// NoC and UCIe links: the busiest link's bytes over its bandwidth.
    Noc,
}

impl Resource {
    /// Its name in figures.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Gemm => "gemm",
            Resource::Tcm => "tcm",
            Resource::Hbm => "hbm",
            Resource::Noc => "noc",
        }
    }

    /// The figure its bound is reported as.
    pub fn bound_figure(self) -> &'static str {
        match self {
            Resource::Gemm => "bound_gemm_ps",
            Resource::Tcm => "bound_tcm_ps",
            Resource::Hbm => "bound_hbm_ps",
            Resource::Noc => "bound_noc_ps",
        }
    }
}

/// Lower bounds of a tiled GEMM launch: no schedule finishes before the
/// busiest unit of any resource has done its share (ADR-0014).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roofline {
    /// Each resource's bound.
    pub bounds: BTreeMap<Resource, SimDuration>,
    /// Bytes read from and written to HBM, all cubes together (the
    /// arithmetic intensity's denominator).
    pub hbm_bytes: u64,
    /// The HBM bandwidth of the cubes used, in B/s (the roofline's slope).
    pub hbm_bytes_per_sec: u64,
}

impl Roofline {
    /// The bounds of launching `args` on `sip` of `device`.
    pub fn of(device: &Device, sip: u32, args: &TiledGemm) -> Result<Roofline, WorkloadError> {
        let machine = device.fabric().machine();
        let spec = machine.spec();
        let pes = machine.pes_per_cube() as usize;
        let mut busiest = [SimDuration::ZERO; 2];
        let mut traffic = Traffic::default();
        for (cube, operands) in (0..).zip(args.cubes.iter()) {
            for pe in 0..pes {
                let plan = steps(args.grid(), pe, pes);
                let [gemm, tcm] = pe_bounds(spec.pe(), args, &plan)?;
                busiest = [busiest[0].max(gemm), busiest[1].max(tcm)];
                let tcm_space = MemSpace::Tcm {
                    sip,
                    cube,
                    pe: pe as u32,
                };
                traffic.add_pe(device, args, operands, &plan, tcm_space)?;
            }
        }
        let bounds = BTreeMap::from([
            (Resource::Gemm, busiest[0]),
            (Resource::Tcm, busiest[1]),
            (Resource::Hbm, traffic.hbm_bound(spec)?),
            (Resource::Noc, traffic.noc_bound(device)?),
        ]);
        Ok(Roofline {
            bounds,
            hbm_bytes: traffic.hbm_bytes(),
            hbm_bytes_per_sec: hbm_bytes_per_sec(spec) * args.cubes.len() as u64,
        })
    }

    /// The bounds of a GEMM of `flops` on one PE whose operands and result
    /// move `hbm_bytes` to and from one cube's HBM: PE_GEMM at its peak
    /// ([`compute_bound`]) and those bytes over every pseudo-channel.
    pub fn single_pe(
        spec: &TopologySpec,
        flops: u64,
        hbm_bytes: u64,
    ) -> Result<Roofline, WorkloadError> {
        let bounds = BTreeMap::from([
            (Resource::Gemm, compute_bound(spec.pe(), flops)?),
            (Resource::Hbm, hbm_bound(spec, hbm_bytes)?),
        ]);
        Ok(Roofline {
            bounds,
            hbm_bytes,
            hbm_bytes_per_sec: hbm_bytes_per_sec(spec),
        })
    }

    /// The figures of the roofline of a GEMM of `flops`: each bound
    /// (`bound_*_ps`), the binding resource, `roofline_ps`,
    /// `roofline_tflops`, and what the harness's roofline chart plots them
    /// against: `hbm_bytes` and `hbm_gbps`.
    pub fn figures(&self, flops: u64) -> Vec<Figure> {
        let (binding, bound) = self.binding();
        let mut figures: Vec<_> = self
            .bounds
            .iter()
            .map(|(resource, time)| Figure::time(resource.bound_figure(), *time))
            .collect();
        figures.extend([
            Figure::text("roofline_binding", binding.name()),
            Figure::time("roofline_ps", bound),
            Figure::real("roofline_tflops", tflops(flops, bound)),
            Figure::int("hbm_bytes", self.hbm_bytes),
            Figure::real("hbm_gbps", self.hbm_bytes_per_sec as f64 / 1e9),
        ]);
        figures
    }

    /// The largest bound and its resource.
    pub fn binding(&self) -> (Resource, SimDuration) {
        self.bounds
            .iter()
            .map(|(&r, &d)| (r, d))
            .max_by_key(|&(r, d)| (d, std::cmp::Reverse(r)))
            .unwrap_or((Resource::Gemm, SimDuration::ZERO))
    }
}

/// `bytes` to or from one cube's HBM spread evenly over its
/// pseudo-channels: no HBM serves them sooner.
pub fn hbm_bound(spec: &TopologySpec, bytes: u64) -> Result<SimDuration, WorkloadError> {
    let hbm = &spec.cube().hbm;
    let per_channel = bytes.div_ceil(u64::from(hbm.pseudo_channels.get()));
    hbm.pc_bandwidth.transfer_time(per_channel).map_err(hw_time)
}

/// One cube's HBM bandwidth: its pseudo-channels together, in B/s.
pub fn hbm_bytes_per_sec(spec: &TopologySpec) -> u64 {
    let hbm = &spec.cube().hbm;
    hbm.pc_bandwidth.bytes_per_sec() * u64::from(hbm.pseudo_channels.get())
}

/// `flops` on one PE's GEMM array at its peak (`2 × rows × cols` per
/// cycle): every tile of `rows × cols` outputs takes at least `K` cycles.
pub fn compute_bound(pe: &PeSpec, flops: u64) -> Result<SimDuration, WorkloadError> {
    let per_cycle = 2 * pe.gemm.macs_per_cycle();
    pe.clock.cycles(flops.div_ceil(per_cycle)).map_err(hw_time)
}

/// PE_GEMM occupancy and TCM traffic time of one PE's `plan`.
fn pe_bounds(
    pe: &PeSpec,
    args: &TiledGemm,
    plan: &[Step],
) -> Result<[SimDuration; 2], WorkloadError> {
    let t = args.tiling;
    let fill = pe
        .clock
        .cycles(u64::from(pe.gemm.rows.get()) + u64::from(pe.gemm.cols.get()) - 2)
        .map_err(hw_time)?;
    let (mut gemm, mut bytes) = (SimDuration::ZERO, 0u64);
    for step in plan {
        let shape = GemmShape {
            m: t.mt as u64,
            n: t.nt as u64,
            k: t.kt as u64,
            in_bytes: args.problem.dtype.size(),
            out_bytes: DType::F32.size(),
            accumulate: step.s > 0 && step.s + 1 < args.grid().kb,
        };
        let time = gemm_formula(pe, &shape).map_err(|e| WorkloadError::BadOption(e.to_string()))?;
        gemm += SimDuration::from_ps(time.as_ps().saturating_sub(fill.as_ps()));
        bytes += array_traffic(pe, &shape);
    }
    let tcm = pe.tcm.bandwidth.transfer_time(bytes).map_err(hw_time)?;
    Ok([gemm, tcm])
}

/// TCM bytes PE_GEMM moves for `shape` (`hw::pe`'s per-tile roofline
/// summed): every array tile reads its A rows and B columns over `k` and
/// writes (and with accumulation reads) its f32 results.
fn array_traffic(pe: &PeSpec, shape: &GemmShape) -> u64 {
    let (r, c) = (u64::from(pe.gemm.rows.get()), u64::from(pe.gemm.cols.get()));
    let (row_tiles, col_tiles) = (shape.m.div_ceil(r), shape.n.div_ceil(c));
    let operands = (shape.m * col_tiles + shape.n * row_tiles) * shape.k * shape.in_bytes;
    let passes = 1 + u64::from(shape.accumulate);
    operands + shape.m * shape.n * shape.out_bytes * passes
}

fn hw_time(error: impl fmt::Display) -> WorkloadError {
    WorkloadError::BadOption(format!("roofline: {error}"))
}

/// Bytes the launch's DMAs move, by memory and by route.
#[derive(Default)]
struct Traffic {
    /// Bytes read or written per memory.
    memory: BTreeMap<MemSpace, u64>,
    /// Bytes per (source, destination) memory pair.
    routes: BTreeMap<(MemSpace, MemSpace), u64>,
}

impl Traffic {
    fn add(&mut self, from: MemSpace, to: MemSpace, bytes: u64) {
        for space in [from, to] {
            *self.memory.entry(space).or_default() += bytes;
        }
        *self.routes.entry((from, to)).or_default() += bytes;
    }

    /// The loads and stores of one PE's `plan`.
    fn add_pe(
        &mut self,
        device: &Device,
        args: &TiledGemm,
        cube: &CubeOperands,
        plan: &[Step],
        tcm: MemSpace,
    ) -> Result<(), WorkloadError> {
        let map = device.fabric().machine().address_map();
        let space = |addr| {
            map.decode(addr)
                .map(|(space, _)| space)
                .map_err(|e| WorkloadError::BadOption(e.to_string()))
        };
        let (t, dtype) = (args.tiling, args.problem.dtype);
        let tile = |rows: usize, cols: usize, dtype: DType| (rows * cols) as u64 * dtype.size();
        for &step in plan {
            let [a, b, c] = args.addresses(cube, step);
            self.add(space(a)?, tcm, tile(t.mt, t.kt, dtype));
            self.add(space(b)?, tcm, tile(t.kt, t.nt, dtype));
            if step.s + 1 == args.grid().kb {
                self.add(tcm, space(c)?, tile(t.mt, t.nt, args.problem.out));
            }
        }
        Ok(())
    }

    /// The bytes of each HBM.
    fn hbm(&self) -> impl Iterator<Item = u64> + '_ {
        self.memory
            .iter()
            .filter(|(space, _)| matches!(space, MemSpace::Hbm { .. }))
            .map(|(_, &bytes)| bytes)
    }

    /// Every HBM's bytes together.
    fn hbm_bytes(&self) -> u64 {
        self.hbm().sum()
    }

    /// The busiest HBM's bytes over its pseudo-channels' bandwidth.
    fn hbm_bound(&self, spec: &TopologySpec) -> Result<SimDuration, WorkloadError> {
        hbm_bound(spec, self.hbm().max().unwrap_or(0))
    }

    /// The busiest link's bytes over its effective bandwidth.
    fn noc_bound(&self, device: &Device) -> Result<SimDuration, WorkloadError> {
        let fabric = device.fabric();
        let router = fabric.router();
        let mut links: BTreeMap<String, (u64, crate::config::units::Bandwidth)> = BTreeMap::new();
        let route_error = |e: &dyn fmt::Display| WorkloadError::BadOption(format!("roofline: {e}"));
        for (&(from, to), &bytes) in &self.routes {
            let node = |space| {
                router
                    .resolver()
                    .memory_node(space)
                    .map_err(|e| route_error(&e))
            };
            let path = router
                .find_path(node(from)?, node(to)?)
                .map_err(|e| route_error(&e))?;
            for link in fabric.path_links(&path) {
                let entry = links
                    .entry(link.name().to_owned())
                    .or_insert((0, link.params().bandwidth));
                entry.0 += bytes;
            }
        }
        links
            .values()
            .map(|&(bytes, bandwidth)| bandwidth.transfer_time(bytes).map_err(hw_time))
            .try_fold(SimDuration::ZERO, |max, time| Ok(max.max(time?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn problem(m: usize, k: usize, n: usize) -> Problem {
        Problem {
            m,
            k,
            n,
            dtype: DType::F16,
            out: DType::F16,
        }
    }

    #[test]
    fn pack_then_unpack_is_the_identity_and_pads_with_zeros() {
        let matrix = Array2::from_shape_fn((3, 5), |(r, c)| (r * 10 + c) as i32);
        let blocked = pack(matrix.view(), (2, 2));
        // 2 x 3 tiles of 2 x 2; tile (0, 2) is columns 4..6 of rows 0..2.
        assert_eq!(blocked.len(), 6 * 4);
        assert_eq!(&blocked[8..12], &[4, 0, 14, 0]);
        assert_eq!(&blocked[20..24], &[24, 0, 0, 0]);
        assert_eq!(unpack(&blocked, (3, 5), (2, 2)), matrix);
    }

    #[test]
    fn every_pe_gets_a_tile_and_steps_cover_k() {
        let p = problem(64, 2048, 512);
        let t = Tiling::choose(&p, 8, 8 << 20).unwrap();
        assert_eq!((t.mt, t.kt, t.nt), (64, 1024, 64));
        let g = t.grid(&p);
        assert_eq!((g.mb, g.kb, g.nb), (1, 2, 8));
        let all: Vec<Step> = (0..8).flat_map(|pe| steps(g, pe, 8)).collect();
        assert_eq!(all.len(), g.mb * g.nb * g.kb);
        assert_eq!(
            steps(g, 3, 8),
            [Step { i: 0, j: 3, s: 0 }, Step { i: 0, j: 3, s: 1 }]
        );
    }

    #[test]
    fn tiles_shrink_k_first_to_fit_the_tcm() {
        let p = problem(4096, 8192, 8192);
        let big = Tiling::choose(&p, 8, 8 << 20).unwrap();
        assert_eq!((big.mt, big.kt, big.nt), (512, 1024, 512));
        // 2 x (512 x 1024 + 1024 x 512) x 2 B + 2 x 512 x 512 x 4 B = 6 MiB.
        assert_eq!(big.tcm_bytes(&p), 6 << 20);
        // kt = 512 needs 4 MiB, kt = 256 needs 1 + 2 MiB.
        let small = Tiling::choose(&p, 8, 3 << 20).unwrap();
        assert_eq!((small.mt, small.kt, small.nt), (512, 256, 512));
        assert_eq!(small.tcm_bytes(&p), 3 << 20);
        let tiny = Tiling::choose(&p, 8, 300 << 10).unwrap();
        assert_eq!((tiny.mt, tiny.kt, tiny.nt), (128, 128, 128));
    }
}
