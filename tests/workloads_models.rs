//! The model workloads: the tiled GEMM matches its reference at odd sizes
//! in both input types, stays within peak and above its roofline, and
//! times the same without data.

use std::sync::Arc;

use kernbench::config::Override;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, Options, Report, Value};

fn machine(sips: u32) -> Arc<Machine> {
    let set = [Override::parse(&format!("system.sips.count={sips}")).unwrap()];
    let spec = TopologySpec::load(&TopologySpec::default_source(), &set).unwrap();
    Arc::new(Machine::build(&spec).unwrap())
}

fn number(report: &Report, name: &str) -> f64 {
    match report
        .figures
        .iter()
        .find(|f| f.name == name)
        .map(|f| &f.value)
    {
        Some(Value::Int(n)) => *n as f64,
        Some(Value::Real(x)) => *x,
        other => panic!("{name}: {other:?}"),
    }
}

fn text<'r>(report: &'r Report, name: &str) -> &'r str {
    match report
        .figures
        .iter()
        .find(|f| f.name == name)
        .map(|f| &f.value)
    {
        Some(Value::Text(t)) => t,
        other => panic!("{name}: {other:?}"),
    }
}

fn gemm(options: &Options) -> Report {
    workloads::find("gemm")
        .unwrap()
        .run(machine(1), options)
        .unwrap()
}

#[test]
fn tiled_gemm_of_odd_sizes_matches_in_both_types_and_respects_its_bounds() {
    for dtype in ["f16", "bf16"] {
        let options = Options {
            verify_data: true,
            ..Options::default()
        }
        .with("shape", "40x300x70")
        .with("dtype", dtype);
        let report = gemm(&options);
        assert_eq!(report.checks_failed, 0, "{report}");
        assert!(
            report
                .checks
                .iter()
                .any(|c| c.name == "c_matches_reference")
        );
        assert_eq!(text(&report, "dtype"), dtype);
        assert!(number(&report, "achieved_tflops") <= number(&report, "peak_tflops"));
        assert!(number(&report, "kernel_ps") >= number(&report, "roofline_ps"));
        let binding = text(&report, "roofline_binding");
        let bound = number(&report, &format!("bound_{binding}_ps"));
        assert_eq!(bound, number(&report, "roofline_ps"), "{report}");
    }
}

#[test]
fn timing_only_gemm_takes_the_same_simulated_time() {
    let on = Options {
        verify_data: true,
        ..Options::default()
    }
    .with("shape", "96x64x48");
    let off = Options {
        verify_data: false,
        ..on.clone()
    };
    let (on, off) = (gemm(&on), gemm(&off));
    assert!(off.checks.is_empty());
    assert_eq!(on.simulated_ps, off.simulated_ps);
    assert_eq!(number(&on, "kernel_ps"), number(&off, "kernel_ps"));
}

#[test]
fn gemm_refuses_f32_inputs_as_a_usage_error() {
    let options = Options::default().with("dtype", "f32");
    let error = workloads::find("gemm")
        .unwrap()
        .run(machine(1), &options)
        .unwrap_err();
    assert!(error.is_usage());
    assert!(
        error
            .to_string()
            .starts_with("--dtype f32: expected f16 or bf16"),
        "{error}"
    );
}
