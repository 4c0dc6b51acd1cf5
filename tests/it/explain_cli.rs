//! `--explain` from the command line and the web UI (ADR-0028): `run
//! --explain --json` carries the explanation and its figures, `run
//! --explain --out DIR` writes explain.json and the heat maps, `sweep
//! --explain` and `report` show them (the web run page's heat maps in a
//! browser: tests/it/web_browser.rs).

use crate::cli_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_common::web::heat_colours;

const KERNBENCH: &str = env!("CARGO_BIN_EXE_kernbench");

fn kernbench(args: &[&str]) -> std::process::Output {
    let output = Command::new(KERNBENCH).args(args).output().expect("runs");
    assert!(output.status.success(), "{args:?}: {output:?}");
    output
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn run_explain_json_carries_the_explanation_and_out_writes_the_heat_maps() {
    let out = tmp("explain-run");
    let dir = out.to_str().unwrap();
    let output = kernbench(&[
        "--set",
        "system.sips.count=4",
        "--set",
        "system.sips.topology=torus_2d",
        "--fidelity",
        "flow",
        "run",
        "--bench",
        "ccl_allreduce",
        "--size",
        "64K",
        "--explain",
        "--json",
        "--out",
        dir,
    ]);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let figures = &json["figures"];
    let interval = figures["allreduce_ps"].as_u64().unwrap();
    let classes: u64 = figures
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| name.starts_with("explain_"))
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    assert_eq!(classes, interval);
    let explain = &json["explain"];
    assert_eq!(explain["duration_ps"].as_u64(), Some(interval));
    assert!(
        explain["interval"]
            .as_str()
            .unwrap()
            .starts_with("allreduce_ps: ")
    );
    assert!(!explain["critical_path"].as_array().unwrap().is_empty());
    for usage in explain["busiest"].as_array().unwrap() {
        let f = usage["busy_fraction"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&f), "{usage}");
    }
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("explain.json")).unwrap()).unwrap();
    assert_eq!(&written, explain);
    for svg in ["topology-heat.svg", "cube-heat.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(
            text.starts_with("<svg") && text.contains("share of the critical path"),
            "{svg}"
        );
        assert!(!heat_colours(&text).is_empty(), "{svg}: no coloured link");
    }
    // The text form labels both times.
    let text = kernbench(&[
        "run",
        "--bench",
        "ccl_allreduce",
        "--size",
        "4K",
        "--explain",
    ]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("simulated time") && text.contains("(the whole run"),
        "{text}"
    );
    assert!(
        text.contains("critical path") && text.contains("attribution"),
        "{text}"
    );
    assert!(text.contains("model gap"), "{text}");
}

#[test]
fn sweep_explain_writes_the_class_columns_and_report_shows_the_heat_maps() {
    let out = tmp("explain-sweep");
    let merged = tmp("explain-report");
    let (dir, report) = (out.to_str().unwrap(), merged.to_str().unwrap());
    kernbench(&[
        "--fidelity",
        "flow",
        "sweep",
        "--bench",
        "ccl_allreduce",
        "--size",
        "4K,16K",
        "--explain",
        "--out",
        dir,
    ]);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for column in [
        "explain_noc_ps",
        "explain_ucie_ps",
        "explain_launch_ps",
        "explain_other_ps",
    ] {
        assert!(header.contains(column), "{header}");
    }
    kernbench(&["report", dir, "--out", report]);
    let html = std::fs::read_to_string(merged.join("index.html")).unwrap();
    assert_eq!(html.matches("<h2>Explanations</h2>").count(), 1);
    // Each of the two explained rows once, each with its heat maps.
    assert_eq!(html.matches("<h3>ccl_allreduce").count(), 2, "{html}");
    assert_eq!(html.matches("class=\"heatmap\"").count(), 2, "{html}");
    assert!(!heat_colours(&html).is_empty());

    // Given another machine, the report says so instead of drawing on it.
    let elsewhere = tmp("explain-report-elsewhere");
    let other = elsewhere.to_str().unwrap();
    kernbench(&[
        "--set",
        "system.sips.count=4",
        "report",
        dir,
        "--out",
        other,
    ]);
    let html = std::fs::read_to_string(elsewhere.join("index.html")).unwrap();
    assert!(!html.contains("class=\"heatmap\""), "{html}");
    assert_eq!(
        html.matches("no heat map: the row ran on another machine")
            .count(),
        2,
        "{html}"
    );
}

/// Issue 40 item 9: an explained run whose causal log would pass its
/// budget is refused, exit 2, with one line giving the estimate and what
/// to do, instead of growing until the host runs out of memory.
#[test]
fn an_explain_past_its_memory_budget_is_refused_with_its_estimate() {
    let out = Command::new(KERNBENCH)
        .args([
            "--set",
            "system.sips.count=4",
            "run",
            "--bench",
            "ccl_alltoall",
        ])
        .args(["--size", "16K", "--explain", "--explain-memory", "64K"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    for part in [
        "needs about",
        "budget of 64.0 KiB",
        "--explain-memory",
        "--fidelity flow",
    ] {
        assert!(errors[0].contains(part), "{part}: {stderr}");
    }
}

/// Issue 40 item 9: a 4-SIP all-reduce of 16 MiB (23.5 M events, a causal
/// log of about 540 MiB) under a 400 MiB budget is refused after a probe
/// of 64 MiB, holding about the plain run's memory (25 MB) plus the
/// probe (162 MB); it used to fill the budget first (560 MB at commit
/// 53a3a5e).
/// (The 9-SIP all-to-all at 64 KiB is no longer a case: since
/// issue 41's size rules it makes 0.8 M events, not 95.6 M.)
#[test]
#[ignore = "seconds in release; run with --release -- --ignored"]
fn an_explain_past_its_budget_is_refused_holding_only_its_probe() {
    let args = "--set system.sips.count=4 run --bench ccl_allreduce --size 16M \
                --explain --explain-memory 400M";
    let args: Vec<&str> = args.split_whitespace().collect();
    let (code, rss) = cli_common::peak_rss_kib(&args);
    assert_eq!(code, Some(2));
    assert!(rss < 250 << 10, "peak {rss} KiB");
}

/// ADR-0122: a 4-SIP all-reduce of 4 MiB (5.9 M events) outgrows the
/// 64 MiB probe; under a 64 MiB budget it is refused with an estimate
/// above it, under 1 GiB it runs again and is explained, its interval the
/// all-reduce's time.
#[test]
#[ignore = "seconds in release; run with --release -- --ignored"]
fn an_explain_past_its_probe_runs_again_within_its_budget() {
    let run = |budget: &str| {
        Command::new(KERNBENCH)
            .args(["--set", "system.sips.count=4", "run", "--bench"])
            .args(["ccl_allreduce", "--size", "4M", "--json", "--explain"])
            .args(["--explain-memory", budget])
            .output()
            .expect("runs")
    };
    let refused = run("64M");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    // Between the 64 MiB probe and 1 GiB: so many MiB.
    let needed: Option<f64> = stderr
        .split("needs about ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("\n").unwrap_or(rest).split_once(" MiB,"))
        .and_then(|(mib, _)| mib.parse().ok());
    assert!(needed.is_some_and(|mib| mib > 64.0), "{stderr}");
    assert!(stderr.contains("budget of 64.0 MiB"), "{stderr}");

    let explained = run("1G");
    assert!(explained.status.success(), "{explained:?}");
    let json: serde_json::Value = serde_json::from_slice(&explained.stdout).unwrap();
    let explain = &json["explain"];
    assert_eq!(
        explain["duration_ps"], json["figures"]["allreduce_ps"],
        "{explain}"
    );
    assert!(!explain["critical_path"].as_array().unwrap().is_empty());
}

/// A budget too small to record anything is refused before the run.
#[test]
fn an_explain_memory_of_zero_is_refused_up_front() {
    let out = Command::new(KERNBENCH)
        .args([
            "run",
            "--bench",
            "ccl_allreduce",
            "--explain",
            "--explain-memory",
            "0",
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--explain-memory: at least 1K"), "{stderr}");
}
