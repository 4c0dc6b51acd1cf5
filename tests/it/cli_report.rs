//! `kernbench report` as a user runs it: shards merge into the whole
//! sweep, identical duplicates are kept once and conflicting ones refused,
//! a pasted nccl-tests output is compared per size, bad inputs exit 2
//! naming the file and line.

use crate::cli_common;

use std::path::{Path, PathBuf};

use cli_common::{TempDir, kernbench, stderr, stdout};
use serde_json::Value;

const SWEEP: [&str; 10] = [
    "sweep",
    "--bench",
    "ccl_allreduce",
    "-b",
    "1K",
    "-e",
    "4K",
    "-f",
    "2",
    "--out",
];

/// Runs `args` in `dir` and expects success.
fn ok(dir: &Path, args: &[&str]) -> String {
    let output = kernbench(dir, args);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    stdout(&output)
}

/// Runs `args` in `dir`, expects exit code 2 and returns the error.
fn usage_error(dir: &Path, args: &[&str]) -> String {
    let output = kernbench(dir, args);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?}: {}",
        stderr(&output)
    );
    let error = stderr(&output);
    assert_eq!(error.lines().count(), 1, "{error}");
    error
}

/// The whole sweep in `W` and its two shards in `S1`, `S2`.
fn sweeps(dir: &Path) {
    ok(dir, &[&SWEEP[..], &["W"]].concat());
    ok(dir, &[&SWEEP[..], &["S1", "--shard", "1/2"]].concat());
    ok(dir, &[&SWEEP[..], &["S2", "--shard", "2/2"]].concat());
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of a results.json without their source index.
fn rows(path: PathBuf) -> Vec<Value> {
    let json: Value = serde_json::from_str(&read(path)).unwrap();
    let mut rows = json["rows"].as_array().unwrap().clone();
    rows.iter_mut().for_each(|row| {
        row.as_object_mut().unwrap().remove("source");
    });
    rows
}

fn reference() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/nccl_all_reduce.txt")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn shards_merge_into_the_rows_of_the_whole_sweep_and_duplicates_are_kept_once() {
    let dir = TempDir::new("report-merge");
    let d = dir.path();
    sweeps(d);
    ok(d, &["report", "S2", "S1", "--out", "M"]);
    assert_eq!(rows(d.join("M/results.json")).len(), 3);
    assert_eq!(
        rows(d.join("M/results.json")),
        rows(d.join("W/results.json"))
    );
    assert_eq!(read(d.join("M/results.csv")), read(d.join("W/results.csv")));
    let html = read(d.join("M/index.html"));
    for shard in ["--shard 1/2", "--shard 2/2"] {
        assert!(html.contains(&format!(
            "ccl_allreduce -b 1K -e 4K -f 2 --out S{} {shard}",
            &shard[8..9]
        )));
    }
    assert_eq!(html.matches("<svg").count(), 2, "latency and busbw inline");
    assert!(html.contains("<td>4096</td>"));
    // The whole sweep and a shard of it overlap with identical rows.
    ok(d, &["report", "W", "S1", "--out", "O"]);
    assert_eq!(
        rows(d.join("O/results.json")),
        rows(d.join("W/results.json"))
    );
}

#[test]
fn conflicting_duplicates_are_refused_naming_the_run_and_folders() {
    let dir = TempDir::new("report-conflict");
    let d = dir.path();
    ok(d, &[&SWEEP[..], &["S1", "--shard", "1/2"]].concat());
    let mut json: Value = serde_json::from_str(&read(d.join("S1/results.json"))).unwrap();
    json["rows"][1]["simulated_ps"] = Value::from(1u64);
    std::fs::create_dir(d.join("C")).unwrap();
    std::fs::write(d.join("C/results.json"), json.to_string()).unwrap();
    let error = usage_error(d, &["report", "S1", "C", "--out", "M"]);
    assert!(error.contains("conflicting results"), "{error}");
    assert!(
        error.contains("`ccl_allreduce size=4096 (data off)`"),
        "{error}"
    );
    assert!(error.contains("S1 and C"), "{error}");
}

#[test]
fn a_pasted_nccl_tests_output_is_compared_per_size() {
    let dir = TempDir::new("report-reference");
    let d = dir.path();
    ok(d, &[&SWEEP[..], &["W"]].concat());
    let printed = ok(
        d,
        &["report", "W", "--reference", &reference(), "--out", "R"],
    );
    let whole: Value = serde_json::from_str(&read(d.join("W/results.json"))).unwrap();
    // The sample's out-of-place times for 1K, 2K, 4K (8K was not swept).
    for (row, measured) in [18.41, 18.77, 19.12].into_iter().enumerate() {
        let simulated = whole["rows"][row]["figures"]["allreduce_ps"]
            .as_u64()
            .unwrap();
        let error = (simulated as f64 / 1e6 - measured) / measured * 100.0;
        let bytes = 1024 << row;
        let line = format!(
            "{bytes:>10} {measured:>13.3} {:>14.3} {error:>+9.2}",
            simulated as f64 / 1e6
        );
        assert!(printed.contains(&line), "{line}\n{printed}");
        let merged = rows(d.join("R/results.json"));
        assert_eq!(merged[row]["figures"]["error_pct"].as_f64(), Some(error));
        assert_eq!(
            merged[row]["figures"]["measured_us"].as_f64(),
            Some(measured)
        );
    }
    assert!(!printed.contains("  8192 "), "{printed}");
    let svg = read(d.join("R/measured_vs_simulated.svg"));
    assert!(svg.contains("measured (out of place)") && svg.contains("<polyline"));
    assert!(
        read(d.join("R/results.csv"))
            .lines()
            .next()
            .unwrap()
            .ends_with("measured_us,error_pct")
    );
    assert_eq!(read(d.join("R/index.html")).matches("<svg").count(), 3);
}

#[test]
fn bad_inputs_exit_2_naming_the_file_and_line() {
    let dir = TempDir::new("report-bad");
    let d = dir.path();
    ok(d, &[&SWEEP[..], &["W"]].concat());
    let error = usage_error(d, &["report", "nope", "--out", "M"]);
    assert!(error.contains("nope/results.json"), "{error}");
    std::fs::create_dir(d.join("J")).unwrap();
    std::fs::write(d.join("J/results.json"), "{\"rows\": 3}").unwrap();
    let error = usage_error(d, &["report", "J", "--out", "M"]);
    assert!(
        error.contains("J/results.json") && error.contains("line 1"),
        "{error}"
    );
    let pasted = read(PathBuf::from(reference())) + "NCCL WARN Cuda failure 'out of memory'\n";
    std::fs::write(d.join("bad.txt"), pasted).unwrap();
    let error = usage_error(d, &["report", "W", "--reference", "bad.txt", "--out", "M"]);
    assert!(error.contains("bad.txt:24:"), "{error}");
    std::fs::write(d.join("bad.csv"), "bytes,time\n1024,3\n").unwrap();
    let error = usage_error(d, &["report", "W", "--reference", "bad.csv", "--out", "M"]);
    assert!(
        error.contains("bad.csv:1:") && error.contains("`size`"),
        "{error}"
    );
    let error = usage_error(
        d,
        &["report", "W", "--reference", "missing.txt", "--out", "M"],
    );
    assert!(error.contains("missing.txt"), "{error}");
}

/// An output folder that already holds files is refused before anything
/// runs, naming it, its files and `--force`; with `--force` the command
/// writes into it (issue 42 item 5).
#[test]
fn a_folder_holding_files_needs_force() {
    let dir = TempDir::new("report-force");
    let sweep = |extra: &[&str]| {
        let mut args = vec!["--fidelity", "flow", "sweep", "--bench", "ccl_allreduce"];
        args.extend(["--size", "1K", "--out", "D"]);
        args.extend(extra);
        kernbench(dir.path(), &args)
    };
    assert!(sweep(&[]).status.success());
    let refused = sweep(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let line = stderr(&refused);
    assert_eq!(line.lines().count(), 1, "{line}");
    for what in ["D", "results.csv", "--force"] {
        assert!(line.contains(what), "{what}: {line}");
    }
    assert!(stdout(&refused).is_empty(), "nothing ran");
    let forced = sweep(&["--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    ok(dir.path(), &["report", "D", "--out", "R"]);
    let again = kernbench(dir.path(), &["report", "D", "--out", "R"]);
    assert_eq!(again.status.code(), Some(2));
}
