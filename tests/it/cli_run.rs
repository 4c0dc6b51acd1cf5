//! `kernbench run --bench NAME` as a user runs it: JSON summaries whose
//! checks pass, the same simulated time with data off, byte-identical
//! traces run after run, and usage errors.

use crate::cli_common;

use std::collections::BTreeMap;
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

/// `--trace` into a folder not made yet makes it, as `--out` does (the
/// docs' `--trace tour/ar.json` before anything made `tour/`).
#[test]
fn a_trace_file_gets_its_folder() {
    let dir = TempDir::new("run-trace-folder");
    let args = [&["--trace", "new/deeper/t.json", "run"][..], &GEMM[..]].concat();
    let out = kernbench(dir.path(), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let trace = std::fs::read_to_string(dir.path().join("new/deeper/t.json")).unwrap();
    serde_json::from_str::<Value>(&trace).expect("the trace is JSON");
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
fn the_same_all_reduce_writes_a_byte_identical_trace_grouped_by_sip_with_phases() {
    let dir = TempDir::new("run-trace-ccl");
    let traces = twice(&dir, &["--bench", "ccl_allreduce"]);
    assert_eq!(traces[0], traces[1]);
    let trace: Value = serde_json::from_slice(&traces[0]).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let processes = named(events, "process_name");
    for process in ["host", "sip0", "sip1"] {
        assert!(processes.contains_key(process), "no process {process}");
    }
    let threads = named(events, "thread_name");
    for (track, (pid, _)) in &threads {
        if let Some((sip, _)) = track.split_once('.').filter(|(p, _)| p.starts_with("sip")) {
            assert_eq!(*pid, processes[sip].0, "{track} is not in {sip}'s process");
        }
    }
    // Every endpoint (PE 0 of each of the 2 x 16 cubes) reduces on its own
    // track, chunk by chunk; below the root of the reduction tree it also
    // receives the broadcast.
    let phases_on = |track: &str| -> Vec<&str> {
        let (pid, tid) = &threads[track];
        let on_track = events
            .iter()
            .filter(|e| e["pid"] == *pid && e["tid"] == *tid);
        let phases = on_track.filter(|e| e["cat"] == "kernbench::tl::phase");
        phases.map(|e| e["name"].as_str().unwrap()).collect()
    };
    let mut broadcasts = 0;
    for sip in 0..2 {
        for cube in 0..16 {
            let track = format!("sip{sip}.cube{cube}.pe0");
            let phases = phases_on(&track);
            assert!(phases.contains(&"reduce"), "{track}: {phases:?}");
            assert!(
                phases.iter().all(|p| ["reduce", "broadcast"].contains(p)),
                "{track}: {phases:?}"
            );
            broadcasts += usize::from(phases.contains(&"broadcast"));
        }
    }
    assert_eq!(
        broadcasts,
        2 * 16 - 1,
        "all but the root receive the result"
    );
}

/// `(pid, tid)` of the processes or threads a trace names with metadata
/// events called `what`, by name.
fn named(events: &[Value], what: &str) -> BTreeMap<String, (Value, Value)> {
    let named = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == what);
    named
        .map(|e| {
            let name = e["args"]["name"].as_str().unwrap().to_owned();
            (name, (e["pid"].clone(), e["tid"].clone()))
        })
        .collect()
}

#[test]
fn a_trace_window_and_filter_keep_only_what_was_asked() {
    let dir = TempDir::new("run-trace-window");
    let args = [
        "--trace",
        "t.json",
        "--trace-window",
        "20us..30us",
        "--trace-filter",
        "sip1.*,!*->*",
        "run",
        "--bench",
        "ccl_allreduce",
    ];
    let output = kernbench(dir.path(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let trace: Value = serde_json::from_slice(&std::fs::read(dir.path().join("t.json")).unwrap())
        .expect("the trace is valid JSON");
    let events = trace["traceEvents"].as_array().unwrap();
    let processes = named(events, "process_name");
    assert_eq!(processes.keys().collect::<Vec<_>>(), ["sip1"]);
    for track in named(events, "thread_name").keys() {
        assert!(
            track.starts_with("sip1.") && !track.contains("->"),
            "{track}"
        );
    }
    let timed: Vec<&Value> = events.iter().filter(|e| e["ph"] != "M").collect();
    assert!(!timed.is_empty());
    for event in timed {
        let start = event["args"]["start_ps"].as_u64().unwrap();
        let end = start + event["args"]["dur_ps"].as_u64().unwrap_or(0);
        assert!(start <= 30_000_000 && end >= 20_000_000, "{event}");
    }
    assert!(trace["otherData"]["filtered_out"].as_u64().unwrap() > 0);
    assert_eq!(trace["otherData"]["window"], "20 us..30 us");
}

#[test]
fn bad_trace_options_are_usage_errors() {
    let dir = TempDir::new("run-trace-usage");
    let cases = [
        (
            &["--trace", "t.json", "--trace-window", "10us"][..],
            "expected START..END",
        ),
        (
            &["--trace", "t.json", "--trace-filter", "a,,b"][..],
            "empty pattern",
        ),
        (&["--trace-window", "..10us"][..], "--trace <FILE>"),
    ];
    for (flags, message) in cases {
        let args = [flags, &["run", "--bench", "gemm_single_pe"]].concat();
        let output = kernbench(dir.path(), &args);
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        assert!(stderr(&output).contains(message), "{}", stderr(&output));
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
    let algorithm = kernbench(
        dir.path(),
        &["run", "--bench", "ccl_allreduce", "--algorithm", "nope"],
    );
    assert_eq!(algorithm.status.code(), Some(2));
    let message = stderr(&algorithm);
    assert!(
        message.contains("ccl.yaml has no algorithm `nope` (known: ")
            && message.contains("ring_rsag_allreduce"),
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

/// The README's main job prints nccl-tests' table with a units row under
/// the header, and says that its flow fidelity is its own default.
#[test]
fn the_main_job_table_has_units_and_names_its_fidelity_default() {
    let output = std::process::Command::new(crate::cli_common::main_job())
        .args(["-b", "256", "-e", "1K"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with("flow fidelity (this job's default; `kernbench` defaults to packet)")
    );
    let units: Vec<&str> = lines[2]
        .trim_start_matches('#')
        .split_whitespace()
        .collect();
    assert_eq!(units, ["(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)"]);
    // 256 B to 1 KiB by the default factor 4, none wrong.
    let sizes: Vec<&str> = lines[3..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(sizes, ["256", "1024"]);
    assert!(lines[3..].iter().all(|l| l.ends_with(" 0")), "{text}");
}
