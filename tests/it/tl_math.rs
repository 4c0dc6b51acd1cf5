//! PE_MATH through `tl`: elementwise math and reductions cost
//! `⌈E / elements_per_cycle⌉ + MATH_PIPELINE_CYCLES` cycles each, compute
//! the right values, and refuse operands that do not fit; a kernel with
//! loads, a dot, math and stores replays from the op log, with the same
//! times with data off.

use crate::tl_common;

use kernbench::hw::{MATH_PIPELINE_CYCLES, math_formula};
use kernbench::mem::{DType, DataMode};
use kernbench::sim::{self, SimDuration};
use kernbench::tl::{Kernel, KernelError, TensorHandle, Tl};
use kernbench::topology::MemSpace;
use tl_common::*;

const HBM: MemSpace = MemSpace::Hbm { sip: 0, cube: 0 };
const ROWS: usize = 30;
const COLS: usize = 100;
const N: usize = ROWS * COLS;

#[derive(Clone, Copy)]
struct Inputs {
    x: u64,
    y: u64,
    out: u64,
}

fn inputs(device: &kernbench::device::Device) -> Inputs {
    let alloc = |seed: u64| {
        let addr = device.alloc(HBM, (N * 2) as u64).unwrap();
        device
            .write_untimed("host", addr, &f16_bytes(&values(N, seed)))
            .unwrap();
        addr
    };
    Inputs {
        x: alloc(11),
        y: alloc(12),
        out: device.alloc(HBM, 64 << 10).unwrap(),
    }
}

/// Runs one op after another; each op's time and the results stored back
/// to back at `out` (f16 unless said otherwise).
async fn math_kernel(tl: Tl, io: Inputs) -> Result<Vec<SimDuration>, KernelError> {
    let x = tl.load(io.x, &[ROWS, COLS], DType::F16).await?;
    let y = tl.load(io.y, &[ROWS, COLS], DType::F16).await?;
    let mut times = Vec::new();
    let mut results: Vec<TensorHandle> = Vec::new();
    macro_rules! timed {
        ($op:expr) => {{
            let start = sim::now();
            let result = $op.await?;
            times.push(sim::now() - start);
            result
        }};
    }
    results.push(timed!(tl.add(&x, &y)));
    results.push(timed!(tl.sub(&x, &y)));
    results.push(timed!(tl.mul(&x, &y)));
    results.push(timed!(tl.maximum(&x, &y)));
    results.push(timed!(tl.exp(&x)));
    results.push(timed!(tl.relu(&x)));
    results.push(timed!(tl.scale(&x, 0.5)));
    let acc = tl.cast(&x, DType::F32).await?;
    let y32 = tl.cast(&y, DType::F32).await?;
    timed!(tl.add_assign(&acc, &y32));
    results.push(timed!(tl.sum(&acc, 1)));
    results.push(timed!(tl.max(&acc, 0)));
    let mut at = io.out;
    for r in &results {
        tl.store(at, r).await?;
        at += r.bytes();
    }
    Ok(times)
}

#[test]
fn math_ops_take_their_formula_time_and_compute_the_values() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let io = inputs(&device);
    let report = run(&device, Kernel::new("math", math_kernel), ONE, io).unwrap();
    // 3000 elements: ⌈3000 / 1024⌉ = 3 cycles + 4.
    let each = math_formula(spec.pe(), N as u64).unwrap();
    assert_eq!(each.as_ps(), (3 + MATH_PIPELINE_CYCLES) * 1000);
    assert!(report.programs[0].output.iter().all(|&t| t == each));
    assert_eq!(report.programs[0].output.len(), 10);

    let (x, y) = (values(N, 11), values(N, 12));
    let f16 = |v: f32| half::f16::from_f32(v).to_f32();
    let elementwise: [fn(f32, f32) -> f32; 7] = [
        |a, b| a + b,
        |a, b| a - b,
        |a, b| a * b,
        f32::max,
        |a, _| a.exp(),
        |a, _| a.max(0.0),
        |a, _| a * 0.5,
    ];
    let bytes = device
        .read_untimed(io.out, (7 * N * 2 + (ROWS + COLS) * 4) as u64)
        .unwrap();
    for (i, f) in elementwise.iter().enumerate() {
        let got = from_f16(&bytes[i * N * 2..(i + 1) * N * 2]);
        let want: Vec<f32> = x.iter().zip(&y).map(|(&a, &b)| f16(f(a, b))).collect();
        assert_eq!(got, want, "op {i}");
    }
    let reduced = from_f32(&bytes[7 * N * 2..]);
    let sums: Vec<f64> = (0..ROWS)
        .map(|r| {
            (0..COLS)
                .map(|c| f64::from(x[r * COLS + c] + y[r * COLS + c]))
                .sum()
        })
        .collect();
    assert_close(&reduced[..ROWS], &sums, 1e-5);
    let maxima: Vec<f64> = (0..COLS)
        .map(|c| {
            (0..ROWS)
                .map(|r| f64::from(x[r * COLS + c] + y[r * COLS + c]))
                .fold(f64::MIN, f64::max)
        })
        .collect();
    assert_close(&reduced[ROWS..], &maxima, 0.0);
}

#[test]
fn operands_that_do_not_fit_are_errors_not_panics() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let io = inputs(&device);
    let kernel = Kernel::new("misfits", |tl: Tl, io: Inputs| async move {
        let x = tl.load(io.x, &[ROWS, COLS], DType::F16).await?;
        let flat = tl.load(io.y, &[N], DType::F16).await?;
        let in_hbm = tl.view(io.x, &[ROWS, COLS], DType::F16)?;
        Ok(vec![
            tl.add(&x, &flat).await.unwrap_err().to_string(),
            tl.relu(&in_hbm).await.unwrap_err().to_string(),
            tl.sum(&x, 2).await.unwrap_err().to_string(),
            tl.dot(&x, &x).await.unwrap_err().to_string(),
            tl.alloc(&[0, 4], DType::F32).unwrap_err().to_string(),
        ])
    });
    let errors = run(&device, kernel, ONE, io)
        .unwrap()
        .programs
        .remove(0)
        .output;
    assert_eq!(
        errors[0],
        "add: operands differ: [30, 100] F16 and [3000] F16"
    );
    assert!(
        errors[1].starts_with("relu: the operand at 0x"),
        "{}",
        errors[1]
    );
    assert!(errors[1].ends_with("is in sip0.cube0.hbm, not in the TCM of sip0.cube0.pe0"));
    assert_eq!(errors[2], "reduce_sum: axis 2 of a 2-D tensor");
    assert_eq!(
        errors[3],
        "dot: cannot multiply [30, 100] F16 by [30, 100] F16"
    );
    assert_eq!(errors[4], "alloc: shape [0, 4] has no elements");
}

#[derive(Clone, Copy)]
struct Pipeline {
    a: u64,
    b: u64,
    out: u64,
}

/// Loads, a dot, math on the product, stores: everything the op log
/// must replay.
async fn pipeline_kernel(tl: Tl, p: Pipeline) -> Result<(), KernelError> {
    let a = tl.load(p.a, &[32, 64], DType::F16).await?;
    let b = tl.load(p.b, &[64, 48], DType::F16).await?;
    let c = tl.dot(&a, &b).await?;
    let scaled = tl.scale(&c, 0.25).await?;
    let activated = tl.relu(&scaled).await?;
    tl.add_assign(&activated, &c).await?;
    let row_max = tl.max(&activated, 1).await?;
    let half = tl.cast(&activated, DType::F16).await?;
    tl.store(p.out, &half).await?;
    tl.store(p.out + half.bytes(), &row_max).await
}

fn pipeline_case(data: DataMode) -> (Vec<(String, u64, Option<u64>)>, bool) {
    let spec = spec(&[]);
    let device = device(&spec, data);
    let alloc = |bytes: Vec<u8>| {
        let addr = device.alloc(HBM, bytes.len() as u64).unwrap();
        device.write_untimed("host", addr, &bytes).unwrap();
        addr
    };
    let p = Pipeline {
        a: alloc(f16_bytes(&values(32 * 64, 21))),
        b: alloc(f16_bytes(&values(64 * 48, 22))),
        out: device.alloc(HBM, 8192).unwrap(),
    };
    run(&device, Kernel::new("pipeline", pipeline_kernel), ONE, p).unwrap();
    let log = device.oplog();
    let records = log
        .records()
        .iter()
        .map(|r| {
            (
                r.name().to_owned(),
                r.start().as_ps(),
                r.end().map(|e| e.as_ps()),
            )
        })
        .collect();
    (records, log.verify(&device.store()).is_ok())
}

#[test]
fn a_kernel_replays_from_the_op_log_and_times_do_not_depend_on_data() {
    let (on, verified) = pipeline_case(DataMode::On);
    assert!(verified, "replay reproduces memory");
    let names: Vec<&str> = on.iter().map(|(n, _, _)| n.as_str()).collect();
    for op in ["copy", "gemm", "scale", "relu", "add", "reduce_max", "cast"] {
        assert!(names.contains(&op), "{op} missing from {names:?}");
    }
    let mut unit_ops = on
        .iter()
        .filter(|(n, _, _)| !["map", "unmap", "host_write"].contains(&n.as_str()));
    assert!(
        unit_ops.all(|(_, _, end)| end.is_some()),
        "every op completed"
    );
    let (off, verified) = pipeline_case(DataMode::Off);
    assert!(verified);
    assert_eq!(off, on, "same ops at the same times with data off");
}
