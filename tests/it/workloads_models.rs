//! The model workloads: the tiled GEMM matches its reference at odd sizes
//! in both input types, stays within peak and above its roofline, and
//! times the same without data; the Megatron MLP gives the exact result
//! with and without overlap, and overlap hides communication.

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
    refused(
        "gemm",
        Options::default().with("dtype", "f32"),
        "--dtype f32: expected f16 or bf16",
    );
}

/// Runs `name` on two SIPs and expects a usage error containing `why`.
fn refused(name: &str, options: Options, why: &str) {
    let error = workloads::find(name)
        .unwrap()
        .run(machine(2), &options)
        .unwrap_err();
    assert!(error.is_usage(), "{error}");
    assert!(error.to_string().contains(why), "{error}");
}

fn megatron_mlp(sips: u32, options: &Options) -> Report {
    workloads::find("megatron_mlp")
        .unwrap()
        .run(machine(sips), options)
        .unwrap()
}

#[test]
fn overlap_hides_communication_with_identical_results_on_four_sips() {
    let run = |overlap: &str| {
        let options = Options {
            verify_data: true,
            ..Options::default()
        }
        .with("shape", "32x64x256")
        .with("overlap", overlap);
        let report = megatron_mlp(4, &options);
        // Every rank's Y equals the exact integer reference, so both
        // schedules give identical values.
        let exact = report
            .checks
            .iter()
            .filter(|c| c.name.ends_with("_y_matches_reference") && c.passed)
            .count();
        assert_eq!(exact, 4, "{report}");
        assert_eq!(report.checks_failed, 0, "{report}");
        report
    };
    let (off, on) = (run("off"), run("on"));
    let json = |r: &Report| serde_json::to_string(r).unwrap();
    assert_eq!(json(&on), json(&run("on")), "a rerun is bit-identical");
    let exposed = |r: &Report| number(r, "exposed_comm_ps");
    // Blocking: every all-reduce is exposed, nothing else is.
    assert_eq!(exposed(&off), number(&off, "comm_ps"));
    assert!(
        exposed(&on) < exposed(&off),
        "on {} off {}",
        exposed(&on),
        exposed(&off)
    );
    assert!(number(&on, "layer_ps") < number(&off, "layer_ps"));
    assert_eq!(number(&on, "flops"), number(&off, "flops"));
}

#[test]
fn chunks_is_a_deprecated_alias_of_micro_batches() {
    let timing = |flag: &str| {
        let options = Options::default()
            .with("shape", "32x64x256")
            .with(flag, "4");
        let report = megatron_mlp(2, &options);
        (report.simulated_ps, number(&report, "comm_ps"))
    };
    let (layer, comm) = timing("micro-batches");
    assert_eq!(timing("chunks"), (layer, comm));
    // Four all-reduces, not two: the flag took effect under either name.
    let (_, two) = {
        let options = Options::default().with("shape", "32x64x256");
        let report = megatron_mlp(2, &options);
        (report.simulated_ps, number(&report, "comm_ps"))
    };
    assert_ne!(comm, two);
}

#[test]
fn megatron_flags_are_checked() {
    refused(
        "megatron_mlp",
        Options::default().with("overlap", "yes"),
        "--overlap yes: expected on or off",
    );
    refused(
        "megatron_mlp",
        Options::default()
            .with("shape", "30x64x256")
            .with("micro-batches", "4"),
        "--micro-batches 4: must divide the 30 tokens",
    );
    refused(
        "megatron_mlp",
        Options::default()
            .with("micro-batches", "2")
            .with("chunks", "2"),
        "--chunks is the deprecated name of --micro-batches",
    );
    // 16 FFN features: 8 per SIP, fewer than the 16 cubes to split over.
    refused(
        "megatron_mlp",
        Options::default().with("shape", "32x64x16"),
        "tensor parallelism: ",
    );
    refused(
        "gpt3_qkv",
        Options::default().with("model", "gpt5"),
        "--model gpt5: expected one of small",
    );
}

#[test]
fn gpt3_qkv_checks_pass_with_compute_and_communication_figures() {
    let options = Options {
        verify_data: true,
        ..Options::default()
    }
    .with("seq", "8");
    let report = workloads::find("gpt3_qkv")
        .unwrap()
        .run(machine(2), &options)
        .unwrap();
    assert_eq!(report.checks_failed, 0, "{report}");
    assert_eq!(text(&report, "dims"), "tokens=8 hidden=768 inner=2304");
    for figure in ["compute_ps", "comm_ps", "exposed_comm_ps"] {
        assert!(number(&report, figure) > 0.0, "{figure}: {report}");
    }
}
