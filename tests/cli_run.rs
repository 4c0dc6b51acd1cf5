//! `kernbench run --bench NAME` as a user runs it: JSON summaries whose
//! checks pass, the same simulated time with data off, byte-identical
//! traces run after run, and usage errors.

mod cli_common;

use std::path::Path;

use cli_common::{TempDir, kernbench, stderr};

use serde_json::Value;

/// Runs a workload with `--json` and returns its summary.
fn summary(dir: &Path, args: &[&str]) -> Value {
    let output = kernbench(dir, &[&["run", "--json"], args].concat());
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

const GEMM: [&str; 4] = ["--bench", "gemm_single_pe", "--shape", "64x128x32"];
const VA: [&str; 2] = ["--bench", "va_offset_verify"];

#[test]
fn gemm_verifies_and_reports_its_figures() {
    let dir = TempDir::new("run-gemm");
    let json = summary(dir.path(), &[&GEMM[..], &["--verify-data"]].concat());
    assert_eq!(json["name"], "gemm_single_pe");
    assert_eq!(json["checks_failed"], 0);
    assert_eq!(json["checks_passed"], 2);
    assert_eq!(json["figures"]["shape"], "64x128x32");
    assert_eq!(json["figures"]["peak_tflops"], 32.768);
    assert!(json["figures"]["achieved_tflops"].as_f64().unwrap() > 0.0);
    assert!(json["simulated_ps"].as_u64().unwrap() > 0);
}

#[test]
fn m_k_n_flags_replace_single_dimensions() {
    let dir = TempDir::new("run-mkn");
    let json = summary(
        dir.path(),
        &["--bench", "gemm_single_pe", "--m", "32", "--n", "16"],
    );
    assert_eq!(json["figures"]["shape"], "32x512x16");
}

#[test]
fn va_offset_verify_checks_every_byte() {
    let dir = TempDir::new("run-va");
    let json = summary(dir.path(), &[&VA[..], &["--verify-data"]].concat());
    assert_eq!(json["checks_failed"], 0);
    assert_eq!(json["checks_passed"], 3);
    let checks: Vec<_> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(
        checks,
        [
            "va_translates_to_shards",
            "y_equals_x_bytewise",
            "oplog_replay"
        ]
    );
}

#[test]
fn data_off_gives_the_same_simulated_time() {
    let dir = TempDir::new("run-data-off");
    for args in [&GEMM[..], &VA[..]] {
        let on = summary(dir.path(), &[args, &["--verify-data"]].concat());
        let off = summary(dir.path(), args);
        assert_eq!(on["simulated_ps"], off["simulated_ps"], "{args:?}");
        assert_eq!(on["figures"], off["figures"], "{args:?}");
        assert_eq!(off["verify_data"], false);
    }
}

#[test]
fn the_same_run_writes_a_byte_identical_trace() {
    let dir = TempDir::new("run-trace");
    let traces = twice(&dir, &VA);
    assert_eq!(traces[0], traces[1]);
    let trace: Value = serde_json::from_slice(&traces[0]).unwrap();
    let text = trace.to_string();
    for track in ["host.rank0", "sip0.cube0.pe0", "sip0.cube0.mcpu.dma"] {
        assert!(text.contains(track), "no {track} track");
    }
}

/// The trace files of two identical runs of `run --verify-data <args>`.
fn twice(dir: &TempDir, args: &[&str]) -> Vec<Vec<u8>> {
    ["a.json", "b.json"]
        .iter()
        .map(|file| {
            let args = [&["--trace", file, "run", "--verify-data"], args].concat();
            let output = kernbench(dir.path(), &args);
            assert!(output.status.success(), "{}", stderr(&output));
            std::fs::read(dir.path().join(file)).unwrap()
        })
        .collect()
}

#[test]
fn the_same_all_reduce_writes_a_byte_identical_trace_with_pe_tracks() {
    let dir = TempDir::new("run-trace-ccl");
    let traces = twice(&dir, &["--bench", "ccl_allreduce"]);
    assert_eq!(traces[0], traces[1]);
    let text = String::from_utf8_lossy(&traces[0]);
    for track in ["sip0.cube0.pe0", "sip1.cube15.pe0"] {
        assert!(text.contains(track), "no {track} track");
    }
    for phase in ["reduce", "broadcast"] {
        let span = format!(r#""name":"{phase}","cat":"kernbench::tl::phase","ph":"X""#);
        assert!(text.contains(&span), "no {phase} phase");
    }
}

#[test]
fn usage_errors_exit_with_code_2() {
    let dir = TempDir::new("run-usage");
    let unknown = kernbench(dir.path(), &["run", "--bench", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    let message = stderr(&unknown);
    assert!(
        message.contains("no workload named `nope` (known: ") && message.contains("gemm_single_pe"),
        "{message}"
    );
    let shape = kernbench(
        dir.path(),
        &["run", "--bench", "va_offset_verify", "--m", "8"],
    );
    assert_eq!(shape.status.code(), Some(2));
    assert!(
        stderr(&shape).contains("--m does not apply to va_offset_verify"),
        "{}",
        stderr(&shape)
    );
    let both = kernbench(
        dir.path(),
        &[
            "run",
            "--bench",
            "gemm_single_pe",
            "--shape",
            "8x8x8",
            "--m",
            "8",
        ],
    );
    assert_eq!(both.status.code(), Some(2), "--shape with --m is refused");
    assert!(stderr(&both).contains("--shape cannot be combined with --m, --k or --n"));
}

/// 2048^3 needs 2MK + 2KN + 6MN = 40 MiB of TCM at once; the PE has 8 MiB,
/// so the run is refused before anything is allocated (a usage error).
#[test]
fn a_shape_past_the_tcm_is_refused_before_running() {
    let dir = TempDir::new("run-fail");
    let output = kernbench(
        dir.path(),
        &[
            "run",
            "--bench",
            "gemm_single_pe",
            "--shape",
            "2048x2048x2048",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.starts_with("error: --shape 2048x2048x2048: A, B and C need 41943040 B of TCM"),
        "{message}"
    );
    assert!(message.contains("8 MiB (pe.tcm.capacity)"), "{message}");
}
