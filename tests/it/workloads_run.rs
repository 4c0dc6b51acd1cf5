//! The named workloads through the library: their checks pass with data
//! on, data off changes no simulated time, the GEMM's launch takes exactly
//! its dispatch formula around its program, and misuse is an error.

use std::sync::Arc;

use kernbench::device::Device;
use kernbench::mem::DataMode;
use kernbench::runtime::launch::dispatch_cost;
use kernbench::sim::SimDuration;
use kernbench::tl::Grid;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, GemmDims, Options, Report, Value, WorkloadError};

fn machine() -> Arc<Machine> {
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    Arc::new(Machine::build(&spec).unwrap())
}

fn run(name: &str, verify_data: bool, shape: Option<GemmDims>) -> Result<Report, WorkloadError> {
    let mut options = Options {
        verify_data,
        ..Options::default()
    };
    if let Some(shape) = shape {
        options = options.with("shape", shape);
    }
    workloads::find(name)?.run(machine(), &options)
}

fn figure(report: &Report, name: &str) -> Value {
    let found = report.figures.iter().find(|f| f.name == name);
    found
        .unwrap_or_else(|| panic!("no figure {name}"))
        .value
        .clone()
}

fn ps(report: &Report, name: &str) -> SimDuration {
    match figure(report, name) {
        Value::Int(ps) => SimDuration::from_ps(ps),
        other => panic!("{name} is {other:?}"),
    }
}

const SMALL: GemmDims = GemmDims {
    m: 64,
    k: 128,
    n: 32,
};

#[test]
fn gemm_checks_pass_and_data_off_times_the_same() {
    let on = run("gemm_single_pe", true, Some(SMALL)).unwrap();
    let names: Vec<_> = on
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.passed))
        .collect();
    assert_eq!(
        names,
        [("c_matches_reference", true), ("oplog_replay", true)]
    );
    assert_eq!((on.checks_passed, on.checks_failed), (2, 0));
    let off = run("gemm_single_pe", false, Some(SMALL)).unwrap();
    assert_eq!(off.simulated_ps, on.simulated_ps);
    assert_eq!(off.figures, on.figures);
    assert!(off.checks.is_empty());
}

#[test]
fn gemm_launch_is_its_dispatch_formula_around_the_program() {
    let report = run("gemm_single_pe", false, Some(SMALL)).unwrap();
    let device = Device::from_machine(machine(), DataMode::Off).unwrap();
    let cost = dispatch_cost(&device, 0, Grid { pes: 1, cubes: 1 }).unwrap();
    let program = ps(&report, "program_ps");
    assert_eq!(
        ps(&report, "launch_ps"),
        cost.launch_time(&[program]).unwrap()
    );
    let (Value::Real(achieved), Value::Real(peak)) = (
        figure(&report, "achieved_tflops"),
        figure(&report, "peak_tflops"),
    ) else {
        panic!("TFLOP/s figures are reals");
    };
    assert_eq!(peak, 2.0 * 128.0 * 128.0 * 1e9 / 1e12);
    let flops = 2.0 * 64.0 * 128.0 * 32.0;
    assert_eq!(achieved, flops / program.as_secs_f64() / 1e12);
    assert!(achieved < peak);
    let total = ps(&report, "h2d_ps") + ps(&report, "launch_ps") + ps(&report, "d2h_ps");
    assert_eq!(total.as_ps(), report.simulated_ps);
}

#[test]
fn gemm_single_pe_roofline_is_its_closed_form_and_bounds_the_program() {
    let report = run("gemm_single_pe", false, Some(SMALL)).unwrap();
    // 2 * 64 * 128 * 32 FLOP at 2 * 128 * 128 MAC/cycle * 1 GHz: 16 ns.
    assert_eq!(ps(&report, "bound_gemm_ps"), SimDuration::from_ps(16_000));
    // 2 B * (64*128 + 128*32 + 64*32) = 28672 B over 32 pseudo-channels of
    // 25.6 GB/s: 896 B each, 35 ns.
    assert_eq!(figure(&report, "hbm_bytes"), Value::Int(28_672));
    assert_eq!(ps(&report, "bound_hbm_ps"), SimDuration::from_ps(35_000));
    assert_eq!(figure(&report, "hbm_gbps"), Value::Real(819.2));
    assert_eq!(
        figure(&report, "roofline_binding"),
        Value::Text("hbm".into())
    );
    assert_eq!(ps(&report, "roofline_ps"), SimDuration::from_ps(35_000));
    assert!(ps(&report, "program_ps") >= ps(&report, "roofline_ps"));
}

#[test]
fn va_offset_verify_copies_every_byte_and_data_off_times_the_same() {
    let on = run("va_offset_verify", true, None).unwrap();
    assert_eq!(on.checks_failed, 0, "{on}");
    let names: Vec<_> = on.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "va_translates_to_shards",
            "y_equals_x_bytewise",
            "oplog_replay"
        ]
    );
    for crossing in ["windows_crossing_pages", "windows_crossing_cubes"] {
        assert!(
            matches!(figure(&on, crossing), Value::Int(n) if n > 0),
            "{crossing}"
        );
    }
    let off = run("va_offset_verify", false, None).unwrap();
    assert_eq!(off.simulated_ps, on.simulated_ps);
    assert_eq!(off.figures, on.figures);
    assert_eq!(off.checks.len(), 1);
}

#[test]
fn a_gemm_larger_than_the_tcm_is_refused_naming_the_key() {
    let huge = GemmDims {
        m: 2048,
        k: 2048,
        n: 2048,
    };
    let error = run("gemm_single_pe", false, Some(huge))
        .unwrap_err()
        .to_string();
    // 2MK + 2KN + 6MN = 10 x 2048^2 B = 40 MiB > the 8 MiB TCM.
    assert!(error.contains("need 41943040 B of TCM"), "{error}");
    assert!(error.contains("(pe.tcm.capacity)"), "{error}");
}

#[test]
fn misuse_is_reported() {
    let unknown = run("nope", false, None).unwrap_err().to_string();
    assert!(
        unknown.starts_with("no workload named `nope` (known: ccl_allgather, ccl_allreduce, "),
        "{unknown}"
    );
    let shape = run("va_offset_verify", false, Some(SMALL))
        .unwrap_err()
        .to_string();
    assert_eq!(
        shape,
        "--shape does not apply to va_offset_verify (it takes: no parameters)"
    );
    assert_eq!("64x128x32".parse::<GemmDims>().unwrap(), SMALL);
    for bad in ["64x0x3", "64x128", "axbxc", "1x2x3x4"] {
        assert!(bad.parse::<GemmDims>().is_err(), "{bad}");
    }
}
