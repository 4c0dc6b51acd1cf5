//! `gemm_single_pe`: `C = A × B` on one PE.
//!
//! The host places `A` (`M×K`), `B` (`K×N`) and `C` (`M×N`), all f16, whole
//! in the HBM of cube 0 of its SIP (one shard each), uploads `A` and `B`,
//! and launches one program on PE 0 of cube 0. The kernel loads `A` and `B`
//! into TCM (both in flight on PE_DMA at once), `tl.dot`s them on PE_GEMM
//! (f32 accumulation), casts the product to f16 on PE_MATH and stores it
//! to `C`; the host reads `C` back. Everything must fit in the TCM at once:
//! `2MK + 2KN + 6MN` bytes (8 MiB by default).
//!
//! Figures: the phases' times, `achieved_tflops = 2MKN / program time`
//! (the program on its PE, from its start to its last store), the PE's
//! `peak_tflops` (`2 × rows × cols × clock`) and the roofline of the
//! program (`Roofline::single_pe`): PE_GEMM at its peak (`bound_gemm_ps`)
//! and the `hbm_bytes = 2MK + 2KN + 2MN` it loads and stores over every
//! pseudo-channel of the cube's HBM (`bound_hbm_ps`, `hbm_gbps`); the
//! larger is `roofline_ps`, `roofline_tflops = 2MKN / roofline_ps`. With `--verify-data`, `C`
//! is checked against an f32 `ndarray` product of the same f16 inputs,
//! within f16 rounding: `|C − ref| ≤ 2⁻¹⁰ (|ref| + 1)`. The inputs are
//! multiples of ½ in `[-1, 1]`, so the reference is exact in f32.

use std::num::NonZeroUsize;

use half::f16;
use kernbench::mem::DType;
use kernbench::runtime::launch::launch;
use kernbench::runtime::{DPPolicy, Tensor, Torch};
use kernbench::sim;
use kernbench::tl::{Grid, Kernel, KernelError, Tl};
use kernbench::topology::naming;
use kernbench::workloads::gemm_check::{compare, operand, tflops};
use kernbench::workloads::tiled_gemm::Roofline;
use kernbench::workloads::{
    Check, Definition, Figure, GemmDims, Options, Outcome, Param, WorkloadError,
};
use ndarray::{Array2, Ix2};

/// The workload's (and its kernel's) name.
pub const NAME: &str = "gemm_single_pe";

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "C = A x B (f16) on one PE: achieved vs peak TFLOP/s",
    params: &[
        Param {
            name: "shape",
            value_name: "MxKxN",
            help: "GEMM dimensions (default 512x512x512)",
        },
        Param {
            name: "m",
            value_name: "M",
            help: "GEMM M (rows of A and C); the others keep their defaults",
        },
        Param {
            name: "k",
            value_name: "K",
            help: "GEMM K (columns of A, rows of B)",
        },
        Param {
            name: "n",
            value_name: "N",
            help: "GEMM N (columns of B and C)",
        },
    ],
    host: |torch, options| {
        Box::pin(async move {
            let dims = dims(&options)?;
            run(torch, dims).await
        })
    },
};

/// Dimensions when none are given.
pub const DEFAULT_DIMS: GemmDims = GemmDims {
    m: 512,
    k: 512,
    n: 512,
};

/// The dimensions asked for: `--shape`, or `--m/--k/--n` over the defaults
/// (not both).
fn dims(options: &Options) -> Result<GemmDims, WorkloadError> {
    let single = |name| options.get::<NonZeroUsize>(name);
    let (m, k, n) = (single("m")?, single("k")?, single("n")?);
    match options.get::<GemmDims>("shape")? {
        Some(_) if (m, k, n) != (None, None, None) => Err(WorkloadError::BadOption(
            "--shape cannot be combined with --m, --k or --n".to_owned(),
        )),
        Some(shape) => Ok(shape),
        None => {
            let pick =
                |given: Option<NonZeroUsize>, default| given.map_or(default, NonZeroUsize::get);
            Ok(GemmDims {
                m: pick(m, DEFAULT_DIMS.m),
                k: pick(k, DEFAULT_DIMS.k),
                n: pick(n, DEFAULT_DIMS.n),
            })
        }
    }
}

/// The operands and product fit the PE's TCM at once (`2MK + 2KN + 6MN`
/// bytes, see the module docs), checked before anything is allocated.
fn check_fits_tcm(torch: &Torch, dims: GemmDims) -> Result<(), WorkloadError> {
    let GemmDims { m, k, n } = dims;
    let (m, k, n) = (m as u128, k as u128, n as u128);
    let needed = 2 * m * k + 2 * k * n + 6 * m * n;
    let capacity = torch.device().fabric().machine().spec().pe().tcm.capacity;
    if needed > u128::from(capacity.get().bytes()) {
        return Err(WorkloadError::BadOption(format!(
            "--shape {}x{}x{}: A, B and C need {needed} B of TCM at once (2MK + 2KN + 6MN), \
             but a PE's TCM holds {capacity} (pe.tcm.capacity): lower --shape or raise \
             pe.tcm.capacity",
            dims.m, dims.k, dims.n
        )));
    }
    Ok(())
}

/// The kernel's arguments: device addresses of the operands.
#[derive(Debug, Clone, Copy)]
struct GemmArgs {
    a: u64,
    b: u64,
    c: u64,
    dims: GemmDims,
}

/// The PE program: load, dot, cast, store.
async fn gemm(tl: Tl, args: GemmArgs) -> Result<(), KernelError> {
    let GemmDims { m, k, n } = args.dims;
    let (a_shape, b_shape) = ([m, k], [k, n]);
    let (a, b) = futures::try_join!(
        tl.load(args.a, &a_shape, DType::F16),
        tl.load(args.b, &b_shape, DType::F16)
    )?;
    let product = tl.dot(&a, &b).await?;
    let c = tl.cast(&product, DType::F16).await?;
    tl.store(args.c, &c).await
}

async fn run(torch: Torch, dims: GemmDims) -> Result<Outcome, WorkloadError> {
    check_fits_tcm(&torch, dims)?;
    let GemmDims { m, k, n } = dims;
    let (a_host, b_host) = (operand::<f16>(m, k, 1), operand::<f16>(k, n, 2));
    let start = sim::now();
    let a = upload(&torch, "A", &a_host).await?;
    let b = upload(&torch, "B", &b_host).await?;
    let c = torch
        .zeros(&[m, n], DType::F16, &DPPolicy::single())?
        .named("C");
    let uploaded = sim::now();
    let args = GemmArgs {
        a: address(&a)?,
        b: address(&b)?,
        c: address(&c)?,
        dims,
    };
    let sip = a.shards()?[0].spec.sip;
    let kernel = Kernel::new(NAME, gemm);
    let report = launch(
        torch.device(),
        &kernel,
        sip,
        Grid { pes: 1, cubes: 1 },
        args,
    )
    .await?;
    let launched = sim::now();
    let result = c.to_ndarray::<f16>().await?;
    let read = sim::now() - launched;
    for tensor in [&a, &b, &c] {
        tensor.free()?;
    }
    let program = report
        .programs
        .iter()
        .map(|p| p.end - p.start)
        .max()
        .unwrap_or_default();
    let spec = torch.device().fabric().machine().spec();
    let flops = 2 * (m * k * n) as u64;
    let hbm_bytes = DType::F16.size() * (m * k + k * n + m * n) as u64;
    let roofline = Roofline::single_pe(spec, flops, hbm_bytes)?;
    let mut figures = vec![
        Figure::text("shape", dims.to_string()),
        Figure::text("dtype", "f16"),
        Figure::text("pe", naming::pe(sip, 0, 0)),
        Figure::time("h2d_ps", uploaded - start),
        Figure::time("launch_ps", report.end - report.start),
        Figure::time("program_ps", program),
        Figure::time("d2h_ps", read),
        Figure::int("flops", flops),
        Figure::real("achieved_tflops", tflops(flops, program)),
        Figure::real("peak_tflops", spec.pe().peak_flops() as f64 / 1e12),
    ];
    figures.extend(roofline.figures(flops));
    let checks = match result.map(|c| c.into_dimensionality::<Ix2>()) {
        Some(Ok(c)) => vec![compare(&a_host, &b_host, c.view())],
        Some(Err(error)) => vec![Check::new("c_matches_reference", false, error.to_string())],
        None => Vec::new(),
    };
    Ok(Outcome { checks, figures })
}

/// A single-shard tensor named `name` holding `array`, on cube 0.
async fn upload(torch: &Torch, name: &str, array: &Array2<f16>) -> Result<Tensor, WorkloadError> {
    let tensor = torch
        .empty(array.shape(), DType::F16, &DPPolicy::single())?
        .named(name);
    tensor.copy_from(array).await?;
    Ok(tensor)
}

/// The device address of a single-shard tensor.
fn address(tensor: &Tensor) -> Result<u64, WorkloadError> {
    Ok(tensor.shards()?[0].addr)
}
