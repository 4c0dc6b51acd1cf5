//! PE_GEMM through `tl`: the simulated time of `dot`, `dot_acc` and
//! `composite` equals the documented formula to the picosecond, and the
//! values match an f64 reference within f16 tolerance.

use crate::tl_common;

use kernbench::hw::{GemmShape, PipelineJob, gemm_formula, pipeline_formula};
use kernbench::mem::{BinaryFn, DType, DataMode};
use kernbench::sim::{self, SimDuration};
use kernbench::tl::{Epilogue, Kernel, KernelError, Tl};
use kernbench::topology::MemSpace;
use tl_common::*;

const HBM: MemSpace = MemSpace::Hbm { sip: 0, cube: 0 };

#[derive(Clone)]
struct Operands {
    a: u64,
    b: u64,
    /// A `[m, n]` f32 tensor: a bias for the composite.
    bias: u64,
    out: u64,
    dims: [usize; 3],
}

/// HBM operands with deterministic values; `a`, `b` f16, `bias` f32.
fn operands(
    device: &kernbench::device::Device,
    [m, n, k]: [usize; 3],
) -> (Operands, [Vec<f32>; 3]) {
    let (a, b, bias) = (values(m * k, 1), values(k * n, 2), values(m * n, 3));
    let alloc = |bytes: Vec<u8>| {
        let addr = device.alloc(HBM, bytes.len() as u64).unwrap();
        device.write_untimed("host", addr, &bytes).unwrap();
        addr
    };
    let ops = Operands {
        a: alloc(f16_bytes(&a)),
        b: alloc(f16_bytes(&b)),
        bias: alloc(f32_bytes(&bias)),
        out: device.alloc(HBM, (m * n * 4) as u64).unwrap(),
        dims: [m, n, k],
    };
    (ops, [a, b, bias])
}

fn shape([m, n, k]: [usize; 3], accumulate: bool) -> GemmShape {
    GemmShape {
        m: m as u64,
        n: n as u64,
        k: k as u64,
        in_bytes: 2,
        out_bytes: 4,
        accumulate,
    }
}

async fn load_ab(tl: &Tl, o: &Operands) -> Result<[kernbench::tl::TensorHandle; 2], KernelError> {
    let [m, n, k] = o.dims;
    let a = tl.load(o.a, &[m, k], DType::F16).await?;
    let b = tl.load(o.b, &[k, n], DType::F16).await?;
    Ok([a, b])
}

/// Loads `a` and `b`, times `dot`, stores the f32 product.
async fn dot_kernel(tl: Tl, o: Operands) -> Result<SimDuration, KernelError> {
    let [a, b] = load_ab(&tl, &o).await?;
    let start = sim::now();
    let c = tl.dot(&a, &b).await?;
    let took = sim::now() - start;
    tl.store(o.out, &c).await?;
    Ok(took)
}

/// Runs `dot` on `dims` with `sets` overrides; its time, the formula, and
/// the product read back (data on).
fn dot_case(
    sets: &[&str],
    dims: [usize; 3],
    data: DataMode,
) -> (SimDuration, SimDuration, Option<Vec<f32>>) {
    let spec = spec(sets);
    let device = device(&spec, data);
    let (o, _) = operands(&device, dims);
    let out = o.out;
    let report = run(&device, Kernel::new("dot", dot_kernel), ONE, o).unwrap();
    let formula = gemm_formula(spec.pe(), &shape(dims, false)).unwrap();
    let len = (dims[0] * dims[1] * 4) as u64;
    let product = device.read_untimed(out, len).ok().map(|b| from_f32(&b));
    assert!(device.oplog().verify(&device.store()).is_ok());
    (report.programs[0].output, formula, product)
}

fn check_dot(sets: &[&str], dims: [usize; 3], expected_ps: u64) {
    let (took, formula, product) = dot_case(sets, dims, DataMode::On);
    assert_eq!(formula.as_ps(), expected_ps, "formula of {dims:?}");
    assert_eq!(took, formula, "simulated time of {dims:?}");
    let [m, n, k] = dims;
    let want = matmul(&values(m * k, 1), &values(k * n, 2), dims);
    assert_close(&product.unwrap(), &want, 1e-3);
    let (off, _, none) = dot_case(sets, dims, DataMode::Off);
    assert_eq!(off, took, "data off gives the same time");
    assert!(none.is_none());
}

#[test]
fn dot_64_cube_is_one_compute_bound_tile_plus_fill() {
    // 64 cycles of K beat 32 KiB of TCM traffic (32.768 ns); fill 254.
    check_dot(&[], [64, 64, 64], 64_000 + 254_000);
}

#[test]
fn dot_128_by_256_by_64_is_two_traffic_bound_tiles() {
    // Each 128 x 128 tile moves (128 + 128) x 64 x 2 B of operands and
    // 128 x 128 x 4 B of output: 98 304 B at 1 TB/s > 64 cycles.
    check_dot(&[], [128, 256, 64], 2 * 98_304 + 254_000);
}

#[test]
fn dot_of_a_shape_off_the_tile_grid() {
    // One partial tile: 50 cycles beat (100 + 70) x 50 x 2 + 100 x 70 x 4
    // = 45 000 B (45 ns).
    check_dot(&[], [100, 70, 50], 50_000 + 254_000);
    // On a 32 x 32 array: 4 x 3 tiles, each 50 cycles; fill 62.
    let small = ["pe.gemm.rows=32", "pe.gemm.cols=32"];
    check_dot(&small, [100, 70, 50], 12 * 50_000 + 62_000);
}

#[test]
fn a_slow_tcm_makes_the_gemm_traffic_bound() {
    // 32 768 B at 100 GB/s: 327.68 ns instead of 64 cycles.
    check_dot(
        &["pe.tcm.bandwidth=100 GB/s"],
        [64, 64, 64],
        327_680 + 254_000,
    );
}

/// `acc = 0; acc += a × b` twice.
async fn dot_acc_kernel(tl: Tl, o: Operands) -> Result<SimDuration, KernelError> {
    let [a, b] = load_ab(&tl, &o).await?;
    let acc = tl.alloc(&[o.dims[0], o.dims[1]], DType::F32)?;
    let start = sim::now();
    tl.dot_acc(&acc, &a, &b).await?;
    let took = sim::now() - start;
    tl.dot_acc(&acc, &a, &b).await?;
    tl.store(o.out, &acc).await?;
    Ok(took)
}

#[test]
fn dot_acc_accumulates_and_pays_for_reading_the_accumulator() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let dims = [128, 128, 32];
    let (o, [a, b, _]) = operands(&device, dims);
    let out = o.out;
    let report = run(&device, Kernel::new("dot_acc", dot_acc_kernel), ONE, o).unwrap();
    let formula = gemm_formula(spec.pe(), &shape(dims, true)).unwrap();
    // (128 + 128) x 32 x 2 + 2 x 128 x 128 x 4 = 147 456 B > 32 cycles.
    assert_eq!(formula.as_ps(), 147_456 + 254_000);
    assert_eq!(report.programs[0].output, formula);
    let twice: Vec<f64> = matmul(&a, &b, dims).iter().map(|v| 2.0 * v).collect();
    let got = from_f32(&device.read_untimed(out, 128 * 128 * 4).unwrap());
    assert_close(&got, &twice, 1e-3);
}

/// Composite with a bias, relu and a cast to f16; a store of `a` runs on
/// PE_DMA meanwhile. Returns (submission, after submit, store end, wait end).
async fn composite_kernel(tl: Tl, o: Operands) -> Result<[SimDuration; 3], KernelError> {
    let [m, n, _] = o.dims;
    let [a, b] = load_ab(&tl, &o).await?;
    let bias = tl.load(o.bias, &[m, n], DType::F32).await?;
    let epilogue = [
        Epilogue::Binary(BinaryFn::Add, bias),
        Epilogue::Relu,
        Epilogue::Cast(DType::F16),
    ];
    let submitted = sim::now();
    let token = tl.composite(&a, &b, &epilogue)?;
    let returned = sim::now() - submitted;
    tl.store(o.a, &a).await?;
    let stored = sim::now() - submitted;
    let c = token.wait().await?;
    let done = sim::now() - submitted;
    assert_eq!(c.dtype(), DType::F16);
    tl.store(o.out, &c).await?;
    Ok([returned, stored, done])
}

#[test]
fn composite_runs_its_epilogue_on_pe_math_and_overlaps_the_kernel() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let dims = [64, 64, 64];
    let (o, [a, b, bias]) = operands(&device, dims);
    let out = o.out;
    let report = run(&device, Kernel::new("composite", composite_kernel), ONE, o).unwrap();
    let [returned, stored, done] = report.programs[0].output;
    let job = PipelineJob {
        gemm: shape(dims, false),
        epilogue_steps: 3,
    };
    let formula = pipeline_formula(spec.pe(), &job).unwrap();
    // 64 cycles, fill 254, then 3 steps x (4096 / 1024 + 4) cycles.
    assert_eq!(formula.as_ps(), (64 + 254 + 24) * 1000);
    assert_eq!(returned, SimDuration::ZERO, "composite does not block");
    assert!(stored < formula, "the store ran while the pipeline worked");
    assert_eq!(done, formula);
    let want: Vec<f64> = matmul(&a, &b, dims)
        .iter()
        .zip(&bias)
        .map(|(c, &bias)| (c + f64::from(bias)).max(0.0))
        .collect();
    let got = from_f16(&device.read_untimed(out, 64 * 64 * 2).unwrap());
    assert_close(&got, &want, 2e-3);
    assert!(device.oplog().verify(&device.store()).is_ok());
}

/// Submits a composite and never waits: the kernel's end waits for it.
async fn unwaited_kernel(tl: Tl, o: Operands) -> Result<SimDuration, KernelError> {
    let [a, b] = load_ab(&tl, &o).await?;
    let submitted = sim::now();
    let _ = tl.composite(&a, &b, &[Epilogue::Relu])?;
    Ok(submitted - kernbench::sim::SimTime::ZERO)
}

#[test]
fn composite_tiles_flow_from_gemm_to_math_and_the_kernel_end_drains_them() {
    let sets = ["pe.gemm.rows=32", "pe.gemm.cols=32"];
    let spec = spec(&sets);
    let device = device(&spec, DataMode::On);
    let dims = [128, 64, 64];
    let (o, _) = operands(&device, dims);
    let report = run(&device, Kernel::new("unwaited", unwaited_kernel), ONE, o).unwrap();
    let job = PipelineJob {
        gemm: shape(dims, false),
        epilogue_steps: 1,
    };
    let formula = pipeline_formula(spec.pe(), &job).unwrap();
    // 8 tiles of 64 cycles back to back; fill 62; the last tile's relu
    // (1024 / 1024 + 4 cycles) is all that is left of the epilogue.
    assert_eq!(formula.as_ps(), (8 * 64 + 62 + 5) * 1000);
    let program = &report.programs[0];
    let submitted = kernbench::sim::SimTime::ZERO + program.output;
    assert_eq!(program.end, submitted + formula);
    let gemm = device.fabric().pe_gemm(0, 0, 0);
    let math = device.fabric().pe_math(0, 0, 0);
    assert_eq!(gemm.stats(program.end).jobs, 8, "one GEMM job per tile");
    assert_eq!(math.stats(program.end).jobs, 8, "one epilogue job per tile");
    assert_eq!(gemm.name(), "sip0.cube0.pe0.gemm");
    assert_eq!(math.name(), "sip0.cube0.pe0.math");
}
