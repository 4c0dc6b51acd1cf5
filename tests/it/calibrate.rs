//! `kernbench calibrate` (ADR-0085): a log written from a machine whose
//! inter-SIP bandwidth and latency `calibrate` is not told is fitted back
//! to them; a real nccl-tests log is read; a log of another collective,
//! a key that is not a quantity and a log with fewer sizes than keys are
//! refused at once with one line; the output is deterministic; the
//! overlay it writes gives, through `--set @FILE`, the fitted times.
//!
//! `cargo test` recovers two keys on 2 SIPs over 4 KiB - 1 MiB;
//! `recovers_bandwidth_and_latency_on_eight_sips` is the acceptance run
//! (8 SIPs, 4 KiB - 64 MiB ×4, < 120 s), ignored there and run in release
//! mode by `.ci/run`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn kernbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("kernbench-calibrate-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The nccl-tests log of `ccl_allreduce` run with `sets` at `sizes`:
/// each size's simulated time written as nccl-tests prints it (float,
/// sum, 2 decimals of µs, in place beside it), with NCCL INFO chatter.
fn synthetic_log(dir: &Path, sets: &[&str], sizes: &[u64]) -> PathBuf {
    let mut log = String::from(
        "# Collective test starting: all_reduce_perf\n\
         # nThread 1 nGpus 1 minBytes 4096 maxBytes 67108864 step: 4(factor) warmup iters: 5 iters: 20\n\
         node01:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
         #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n",
    );
    for &size in sizes {
        let mut args: Vec<String> = sets
            .iter()
            .flat_map(|s| ["--set".to_owned(), s.to_string()])
            .collect();
        let size_text = size.to_string();
        args.extend(
            [
                "run",
                "--bench",
                "ccl_allreduce",
                "--dtype",
                "f32",
                "--json",
                "--size",
                &size_text,
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = kernbench(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let us = json["figures"]["allreduce_ps"].as_u64().unwrap() as f64 / 1e6;
        log += &format!(
            "{size:>12} {:>13} {:>9} {:>7} {:>7} {us:>8.2} {:>7.2} {:>7.2} {:>6} {us:>8.2} {:>7.2} {:>7.2} {:>6}\n",
            size / 4,
            "float",
            "sum",
            -1,
            0.0,
            0.0,
            0,
            0.0,
            0.0,
            0
        );
        log += "node01:1:1 [0] NCCL INFO Channel 00/32 :    0   1\n";
    }
    log += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : N/A\n";
    let path = dir.join("nccl.txt");
    std::fs::write(&path, log).unwrap();
    path
}

/// The fitted value of `key` in `calibrate`'s output, in base units.
fn fitted(stdout: &str, key: &str, parse: fn(&str) -> f64) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in {stdout}"));
    // key, configured (number unit), fitted (number unit), two errors.
    let words: Vec<&str> = line.split_whitespace().collect();
    parse(&format!("{} {}", words[3], words[4]))
}

fn bandwidth(text: &str) -> f64 {
    text.parse::<kernbench::config::units::Bandwidth>()
        .unwrap()
        .bytes_per_sec() as f64
}

fn duration(text: &str) -> f64 {
    kernbench::config::units::parse_duration(text)
        .unwrap()
        .as_ps() as f64
}

/// Fits bandwidth and latency on `machine` to a log written with
/// `truth` and checks them within 2 % and 5 %, and every size from 64 KiB
/// within 2 % of the log.
fn recovers(machine: &[&str], sizes: &[u64], name: &str) -> Duration {
    let dir = scratch(name);
    let truth = [
        "system.inter_sip.bandwidth=37 GB/s",
        "system.inter_sip.latency=1300 ns",
    ];
    let mut written: Vec<&str> = machine.to_vec();
    written.extend(truth);
    let log = synthetic_log(&dir, &written, sizes);
    let overlay = dir.join("fitted.yaml");
    let mut args: Vec<String> = machine
        .iter()
        .flat_map(|s| ["--set".to_owned(), s.to_string()])
        .collect();
    args.extend(
        [
            "calibrate",
            "--bench",
            "ccl_allreduce",
            "--reference",
            log.to_str().unwrap(),
            "--fit",
            "system.inter_sip.bandwidth,system.inter_sip.latency",
            "--out",
            overlay.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let out = kernbench(&args);
    let wall = started.elapsed();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let bw = fitted(&stdout, "system.inter_sip.bandwidth", bandwidth);
    let latency = fitted(&stdout, "system.inter_sip.latency", duration);
    assert!((bw / 37e9 - 1.0).abs() < 0.02, "bandwidth {bw}\n{stdout}");
    assert!(
        (latency / 1.3e6 - 1.0).abs() < 0.05,
        "latency {latency}\n{stdout}"
    );
    for line in stdout.lines().skip_while(|l| !l.starts_with("# ")).skip(1) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (size, after): (u64, f64) = (words[0].parse().unwrap(), words[5].parse().unwrap());
        if size >= 64 << 10 {
            assert!(after.abs() < 2.0, "{size} B: {after} %\n{stdout}");
        }
    }
    assert!(
        std::fs::read_to_string(&overlay)
            .unwrap()
            .contains("inter_sip:")
    );
    wall
}

#[test]
fn recovers_bandwidth_and_latency_on_two_sips() {
    let sizes: Vec<u64> = (0..5).map(|i| 4096 << (2 * i)).collect();
    recovers(
        &["system.sips.count=2", "simulation.fidelity=flow"],
        &sizes,
        "two",
    );
}

/// The acceptance run: 8 SIPs, 4 KiB to 64 MiB in ×4 steps, < 120 s.
#[test]
#[ignore = "release-mode acceptance run: cargo test --release --test it -- --ignored calibrate::"]
fn recovers_bandwidth_and_latency_on_eight_sips() {
    let sizes: Vec<u64> = (0..8).map(|i| 4096 << (2 * i)).collect();
    let wall = recovers(
        &["system.sips.count=8", "simulation.fidelity=flow"],
        &sizes,
        "eight",
    );
    // The issue's < 120 s is a speed goal, measured and recorded in
    // docs/performance.md, not asserted: a test does not time itself.
    eprintln!("calibrate on 8 SIPs, 8 sizes: {:.1} s", wall.as_secs_f64());
}

/// A log as nccl-tests and NCCL print it: a float all_reduce header,
/// NCCL INFO lines, and `N/A` where a column has no value.
const REAL_LOG: &str = "\
# nThread 1 nGpus 8 minBytes 65536 maxBytes 1048576 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41237 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3
node01:41237:41237 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node01:41237:41237 [0] NCCL INFO cudaDriverVersion 12020
# Collective test starting: all_reduce_perf
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
       65536         16384     float     sum      -1    40.11    1.63    2.86    N/A    39.80    1.65    2.88    N/A
node01:41237:41240 [0] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7
      262144         65536     float     sum      -1    52.70    4.97    8.71    N/A    52.10    5.03    8.81    N/A
     1048576        262144     float     sum      -1    96.40   10.88   19.04    N/A    95.90   10.93   19.13    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 10.20
";

#[test]
fn a_real_log_is_read_and_fitted() {
    let dir = scratch("real");
    let log = dir.join("h100.txt");
    std::fs::write(&log, REAL_LOG).unwrap();
    let out = kernbench(&[
        "--fidelity",
        "flow",
        "calibrate",
        "--bench",
        "ccl_allreduce",
        "--reference",
        log.to_str().unwrap(),
        "--fit",
        "system.inter_sip.bandwidth=1 GB/s..1 TB/s",
        "--max-evaluations",
        "6",
        "--jobs",
        "2",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    // The log's float became --dtype f32 and its three sizes the table.
    for size in ["65536", "262144", "1048576"] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(size)),
            "{stdout}"
        );
    }
    assert!(stdout.contains("over 3 size(s)"), "{stdout}");
    assert!(
        text(&out.stderr).contains("calibrate: evaluation 1:"),
        "{}",
        text(&out.stderr)
    );
}

/// Runs `calibrate` with `args` after the log and checks it is refused
/// in under a second with one `error:` line containing every `want`.
fn refused(log: &str, args: &[&str], want: &[&str]) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch(&format!("refused-{n}"));
    let path = dir.join("log.txt");
    std::fs::write(&path, log).unwrap();
    let mut all = vec!["calibrate", "--reference", path.to_str().unwrap()];
    all.extend(args);
    let started = Instant::now();
    let out = kernbench(&all);
    let wall = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    for w in want {
        assert!(stderr.contains(w), "{w} not in {stderr}");
    }
    // Refused before any simulation (the < 1 s goal; not asserted).
    eprintln!("refused in {:.3} s", wall.as_secs_f64());
}

const GATHER_LOG: &str = "\
# Collective test starting: all_gather_perf
        4096          1024     float    none      -1    20.00    0.20    0.18      0    19.00    0.21    0.19      0
";

#[test]
fn an_all_gather_log_against_all_reduce_is_refused_naming_both() {
    let fit = [
        "--bench",
        "ccl_allreduce",
        "--fit",
        "system.inter_sip.bandwidth",
    ];
    refused(GATHER_LOG, &fit, &["ccl_allgather", "ccl_allreduce"]);
}

#[test]
fn bad_keys_dtypes_and_too_few_sizes_are_refused_at_once() {
    let bench = ["--bench", "ccl_allreduce"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        bench.iter().copied().chain(extra.iter().copied()).collect()
    };
    refused(
        REAL_LOG,
        &with(&["--fit", "system.sips.count"]),
        &["--fit system.sips.count", "not a quantity"],
    );
    refused(
        REAL_LOG,
        &with(&["--fit", "system.inter_sip.efficiency"]),
        &["system.inter_sip.efficiency"],
    );
    refused(
        REAL_LOG,
        &with(&["--fit", "system.inter_sip.colour"]),
        &["system.inter_sip.colour", "no value"],
    );
    refused(
        REAL_LOG,
        &with(&["--fit", "system.inter_sip.latency=2 us..1 us"]),
        &["system.inter_sip.latency", "LOW < HIGH"],
    );
    refused(
        REAL_LOG,
        &with(&["--dtype", "f16", "--fit", "system.inter_sip.bandwidth"]),
        &["f32", "--dtype"],
    );
    let keys = "system.inter_sip.bandwidth,system.inter_sip.latency,pe.clock,cube.sram.latency";
    refused(
        REAL_LOG,
        &with(&["--fit", keys]),
        &["3 size(s)", "4 key(s)"],
    );
    refused(
        REAL_LOG,
        &["--bench", "gemm", "--fit", "pe.clock"],
        &["--bench gemm"],
    );
}

#[test]
fn the_same_log_gives_the_same_output_whatever_the_threads() {
    let dir = scratch("determinism");
    let log = dir.join("log.txt");
    std::fs::write(&log, REAL_LOG).unwrap();
    let run = |jobs: &str| {
        let out = kernbench(&[
            "--fidelity",
            "flow",
            "calibrate",
            "--bench",
            "ccl_allreduce",
            "--reference",
            log.to_str().unwrap(),
            "--fit",
            "system.inter_sip.latency",
            "--max-evaluations",
            "5",
            "--jobs",
            jobs,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert_eq!(run("1"), run("2"));
}

#[test]
fn the_overlay_applied_with_set_file_gives_the_fitted_time() {
    let dir = scratch("overlay");
    let overlay = dir.join("fitted.yaml");
    std::fs::write(
        &overlay,
        "# a calibrate overlay\nsystem:\n  inter_sip:\n    bandwidth: \"37 GB/s\"\n    latency: \"1.3 us\"\n",
    )
    .unwrap();
    let time = |sets: &[&str]| {
        let mut args: Vec<&str> = sets.iter().flat_map(|s| ["--set", *s]).collect();
        args.extend(["run", "--bench", "ccl_allreduce", "--size", "64K", "--json"]);
        let out = kernbench(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["figures"]["allreduce_ps"].as_u64().unwrap()
    };
    let at = format!("@{}", overlay.display());
    let explicit = time(&[
        "system.inter_sip.bandwidth=37 GB/s",
        "system.inter_sip.latency=1.3 us",
    ]);
    assert_eq!(time(&[&at]), explicit);
    assert_ne!(time(&[]), explicit);
}
