//! `gemm`: `C = A × B` on one SIP, tiled across every PE of every cube
//! (`kernbench::workloads::tiled_gemm`, ADR-0014).
//!
//! Placement: the rows of `A` and `C` are split into bands of
//! `⌈M / cubes⌉` rows, one per cube (`DPPolicy(cube=row_wise,
//! pe=replicate)` of the blocked bands); `B` is replicated to every cube
//! (`cube=replicate`), so every PE reads and writes only its own cube's
//! HBM. Inputs are f16 or bf16 (`--dtype`), accumulation f32, `C` has the
//! input type.
//!
//! The host uploads the blocked operands (with `--verify-data` the values;
//! a timing-only run makes the same copies without values and builds no
//! host arrays), launches the kernel on every PE and reads `C` back.
//! Figures: the tiling, the kernel's time (`kernel_ps`, launch to
//! completion), `achieved_tflops = 2MKN / kernel time`, the SIP's
//! `peak_tflops` (every PE's array), each resource's roofline bound
//! (`bound_*_ps`), the binding one and `roofline_tflops = 2MKN / bound`.
//! With `--verify-data`, `C` is checked against an f32 `ndarray` product
//! of the same inputs within the output type's rounding.

use half::{bf16, f16};
use kernbench::runtime::{Tensor, Torch};
use kernbench::sim::SimDuration;
use kernbench::workloads::gemm_check::{Input, InputType, compare, operand, tflops};
use kernbench::workloads::tiled_gemm::{
    Activation, Problem, Roofline, TiledGemm, Tiling, blocked_tensor, launch_tiled, operands, pack,
    unpack,
};
use kernbench::workloads::{Check, Definition, Figure, GemmDims, Outcome, Param, WorkloadError};
use ndarray::{Array1, Array2, ArrayD, s};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "C = A x B on one SIP tiled over every PE: achieved vs peak and roofline",
    params: &[
        Param {
            name: "dtype",
            value_name: "TYPE",
            help: "Element type: f16 or bf16 for GEMMs (default f16), f32 accumulation",
        },
        Param {
            name: "shape",
            value_name: "MxKxN",
            help: "GEMM dimensions; megatron_mlp reads TOKENSxHIDDENxFFN (defaults: gemm 1024x1024x1024, gemm_single_pe 512x512x512, megatron_mlp 64x256x1024)",
        },
    ],
    host: |torch, options| {
        Box::pin(async move {
            let dims = options.get::<GemmDims>("shape")?.unwrap_or(DEFAULT_DIMS);
            match options.get::<InputType>("dtype")?.unwrap_or_default() {
                InputType::F16 => run::<f16>(torch, dims).await,
                InputType::Bf16 => run::<bf16>(torch, dims).await,
            }
        })
    },
};

/// Dimensions when none are given.
pub const DEFAULT_DIMS: GemmDims = GemmDims {
    m: 1024,
    k: 1024,
    n: 1024,
};

/// How `gemm` splits `M × K × N` over the cubes of a SIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Cubes used (at most one per row of `A`).
    pub cubes: u32,
    /// Rows per cube band (the last band may be partly padding).
    pub band: usize,
    /// One cube's problem.
    pub problem: Problem,
    /// Its tiles.
    pub tiling: Tiling,
}

impl Plan {
    /// The plan for `dims` of `T` on `cubes` cubes of `pes` PEs with `tcm`
    /// bytes of TCM each.
    pub fn new<T: Input>(
        dims: GemmDims,
        (cubes, pes): (u32, u32),
        tcm: u64,
    ) -> Result<Plan, WorkloadError> {
        let cubes = cubes.min(u32::try_from(dims.m).unwrap_or(u32::MAX));
        let band = dims.m.div_ceil(cubes as usize);
        let problem = Problem {
            m: band,
            k: dims.k,
            n: dims.n,
            dtype: T::DTYPE,
            out: T::DTYPE,
        };
        let tiling = Tiling::choose(&problem, pes as usize, tcm)?;
        Ok(Plan {
            cubes,
            band,
            problem,
            tiling,
        })
    }

    /// The rows of `A` and `C` cube `cube`'s band holds.
    fn rows(&self, cube: usize, m: usize) -> std::ops::Range<usize> {
        (cube * self.band).min(m)..((cube + 1) * self.band).min(m)
    }
}

/// The device tensors of a run.
struct Operands {
    a: Tensor,
    b: Tensor,
    c: Tensor,
}

async fn run<T: Input>(torch: Torch, dims: GemmDims) -> Result<Outcome, WorkloadError> {
    let machine = torch.device().fabric().machine().clone();
    let spec = machine.spec();
    let shape = (machine.cubes_per_sip(), machine.pes_per_cube());
    let plan = Plan::new::<T>(dims, shape, spec.pe().tcm.capacity.get().bytes())?;
    let [a_len, b_len, c_len] = plan.tiling.blocked_elements(&plan.problem);
    let tensors = Operands {
        a: blocked_tensor(&torch, "A", (plan.cubes, a_len), T::DTYPE, false)?,
        b: blocked_tensor(&torch, "B", (plan.cubes, b_len), T::DTYPE, true)?,
        c: blocked_tensor(&torch, "C", (plan.cubes, c_len), T::DTYPE, false)?,
    };
    let inputs = upload::<T>(&torch, &tensors, dims, &plan).await?;
    let args = TiledGemm {
        cubes: operands(&tensors.a, &tensors.b, &tensors.c)?,
        problem: plan.problem,
        tiling: plan.tiling,
        activation: Activation::Identity,
    };
    let sip = tensors.a.shards()?[0].spec.sip;
    let roofline = Roofline::of(torch.device(), sip, &args)?;
    let report = launch_tiled(torch.device(), sip, args).await?;
    let result = tensors.c.to_ndarray::<T>().await?;
    for tensor in [&tensors.a, &tensors.b, &tensors.c] {
        tensor.free()?;
    }
    let peak = spec.pe().peak_flops() * u64::from(shape.0) * u64::from(shape.1);
    let mut figures = vec![Figure::text("dtype", T::DTYPE.name())];
    figures.extend(gemm_figures(
        dims,
        &plan,
        report.end - report.start,
        peak,
        &roofline,
    ));
    let checks: Vec<Check> = match (inputs, result) {
        (Some((a, b)), Some(c)) => vec![compare(&a, &b, unblock(&c, dims, &plan).view())],
        _ => Vec::new(),
    };
    Ok(Outcome { checks, figures })
}

/// Uploads `A` and `B` blocked; with data on builds them and returns them,
/// timing-only makes the same copies without values.
async fn upload<T: Input>(
    torch: &Torch,
    operands: &Operands,
    dims: GemmDims,
    plan: &Plan,
) -> Result<Option<(Array2<T>, Array2<T>)>, WorkloadError> {
    if torch.data_mode() == kernbench::mem::DataMode::Off {
        operands.a.copy_timing_only().await?;
        operands.b.copy_timing_only().await?;
        return Ok(None);
    }
    let (a, b) = (
        operand::<T>(dims.m, dims.k, 1),
        operand::<T>(dims.k, dims.n, 2),
    );
    let t = plan.tiling;
    let bands: Vec<T> = (0..plan.cubes as usize)
        .flat_map(|cube| {
            let rows = plan.rows(cube, dims.m);
            let mut band = Array2::default((plan.band, dims.k));
            band.slice_mut(s![..rows.len(), ..])
                .assign(&a.slice(s![rows, ..]));
            pack(band.view(), (t.mt, t.kt))
        })
        .collect();
    let per_cube = bands.len() / plan.cubes as usize;
    let a_blocked = Array2::from_shape_vec((plan.cubes as usize, per_cube), bands)
        .expect("every band packs to the same length");
    operands.a.copy_from(&a_blocked).await?;
    let b_blocked = Array1::from(pack(b.view(), (t.kt, t.nt)));
    operands.b.copy_from(&b_blocked).await?;
    Ok(Some((a, b)))
}

/// `C` from the blocked bands read back.
fn unblock<T: Input>(blocked: &ArrayD<T>, dims: GemmDims, plan: &Plan) -> Array2<T> {
    let t = plan.tiling;
    let mut c = Array2::default((dims.m, dims.n));
    for (cube, row) in blocked.outer_iter().enumerate() {
        let values: Vec<T> = row.iter().copied().collect();
        let band = unpack(&values, (plan.band, dims.n), (t.mt, t.nt));
        let rows = plan.rows(cube, dims.m);
        let len = rows.len();
        c.slice_mut(s![rows, ..]).assign(&band.slice(s![..len, ..]));
    }
    c
}

/// The figures of the tiling, the kernel time and the roofline.
fn gemm_figures(
    dims: GemmDims,
    plan: &Plan,
    kernel: SimDuration,
    peak: u64,
    roofline: &Roofline,
) -> Vec<Figure> {
    let flops = 2 * (dims.m as u64) * (dims.k as u64) * (dims.n as u64);
    let mut figures = vec![
        Figure::text("shape", dims.to_string()),
        Figure::int("cubes", u64::from(plan.cubes)),
        Figure::text("tile", plan.tiling.to_string()),
        Figure::int("flops", flops),
        Figure::time("kernel_ps", kernel),
        Figure::real("achieved_tflops", tflops(flops, kernel)),
        Figure::real("peak_tflops", peak as f64 / 1e12),
    ];
    figures.extend(roofline.figures(flops));
    figures
}
