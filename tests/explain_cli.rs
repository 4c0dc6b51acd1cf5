//! `--explain` from the command line and the web UI (ADR-0028): `run
//! --explain --json` carries the explanation and its figures, `run
//! --explain --out DIR` writes explain.json and the heat maps, `sweep
//! --explain` and `report` show them, and the web run page with `explain`
//! renders the heat maps in headless Chromium (screenshot under
//! `target/explain-heat.png`; skipped, with the reason printed, where no
//! Chromium is installed).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// The colours of the heat map's links (`stroke` of lines inside `heat`
/// groups and NoC links), idle grey left out.
fn heat_colours(svg: &str) -> Vec<&str> {
    svg.split("stroke=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|c| c.starts_with('#') && c.len() == 7 && *c != "#cccccc" && *c != "#ccc")
        .collect()
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
            text.starts_with("<svg") && text.contains("link busy fraction"),
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

/// The server, killed when the test ends.
struct WebServer(Child);

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Runs headless Chromium on `url` with `args`, at most 90 s. Its output
/// goes to files, not pipes: a page larger than a pipe's buffer would
/// block Chromium on its write while this waits for it to exit.
fn browse(chromium: &Path, args: &[&str], url: &str) -> std::process::Output {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let profile = dir.join("explain-chromium");
    let (out_path, err_path) = (
        dir.join("explain-chromium.out"),
        dir.join("explain-chromium.err"),
    );
    let mut child = Command::new(chromium)
        .args(["--headless", "--disable-gpu", "--no-sandbox"])
        .args(["--disable-background-networking", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(std::fs::File::create(&out_path).expect("a file for stdout"))
        .stderr(std::fs::File::create(&err_path).expect("a file for stderr"))
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("chromium runs") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish on {url}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: std::fs::read(&out_path).expect("chromium's stdout"),
        stderr: std::fs::read(&err_path).expect("chromium's stderr"),
    }
}

#[test]
fn the_web_run_page_draws_the_heat_maps_in_a_browser() {
    let Some(chromium) = chromium() else {
        println!("skipped: no chromium on PATH (.ci/run installs the Debian package)");
        return;
    };
    let mut child = Command::new(KERNBENCH)
        .args([
            "--set",
            "system.sips.count=4",
            "--set",
            "system.sips.topology=torus_2d",
        ])
        .args(["web", "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("kernbench starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let _server = WebServer(child);
    let run = format!("{url}run?bench=ccl_allreduce&size=256K&fidelity=flow&explain=1");
    let output = browse(&chromium, &["--dump-dom"], &run);
    assert!(output.status.success(), "{output:?}");
    let page = String::from_utf8_lossy(&output.stdout);
    assert_eq!(page.matches("<h2>Explanations</h2>").count(), 1, "{page}");
    assert_eq!(page.matches("<h3>ccl_allreduce").count(), 1, "{page}");
    assert!(page.contains("class=\"heatmap\"") && page.contains("link busy fraction"));
    assert!(!heat_colours(&page).is_empty(), "no coloured link");
    // The screenshot is of the heat maps alone (the page above them is
    // long): target/explain-heat.png, to look at.
    let start = page.find("<figure class=\"heatmap\"").unwrap();
    let end = start + page[start..].find("</figure>").unwrap() + "</figure>".len();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let figure = target.join("explain-heat.html");
    let html = format!(
        "<!DOCTYPE html><html><body>{}</body></html>",
        &page[start..end]
    );
    std::fs::write(&figure, html).unwrap();
    let shot = target.join("explain-heat.png");
    let _ = std::fs::remove_file(&shot);
    let arg = format!("--screenshot={}", shot.display());
    let url = format!("file://{}", figure.display());
    let output = browse(
        &chromium,
        &[&arg, "--window-size=900,1500", "--hide-scrollbars"],
        &url,
    );
    assert!(output.status.success(), "{output:?}");
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG"));
}
