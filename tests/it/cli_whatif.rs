//! What-if sweeps as a user runs them (ADR-0029): `sweep --vary` over a
//! configuration key, crossed with the workload's axes and `--fidelity`;
//! bad lists refused before anything runs; `report`'s sensitivity table;
//! and the cluster recipe of `docs/sweeps.md`: shards run as separate
//! processes merge into exactly the unsharded results.

use crate::cli_common;

use cli_common::{TempDir, kernbench, stderr, stdout};

const BANDWIDTH: &str = "system.inter_sip.bandwidth";

/// The records of a results.csv, split at commas (no value here holds one).
fn records(csv: &str) -> Vec<Vec<String>> {
    csv.lines()
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

/// The value of `column` in every row of `csv`.
fn column(csv: &str, column: &str) -> Vec<String> {
    let records = records(csv);
    let at = records[0].iter().position(|c| c == column).unwrap();
    records[1..].iter().map(|r| r[at].clone()).collect()
}

#[test]
fn a_varied_key_is_a_column_crossed_with_fidelity_and_sizes() {
    let dir = TempDir::new("whatif-vary");
    let out = dir.path().join("d");
    let vary = format!("{BANDWIDTH}=25 GB/s,400 GB/s");
    let args = [
        "--fidelity",
        "packet,flow",
        "sweep",
        "--bench",
        "ccl_allreduce",
        "--size",
        "1K,4K",
        "--vary",
        &vary,
        "--out",
        out.to_str().unwrap(),
    ];
    let output = kernbench(dir.path(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header = &records(&csv)[0];
    assert_eq!(header[..4], ["workload", BANDWIDTH, "fidelity", "size"]);
    // 2 bandwidths × 2 fidelities × 2 sizes, the varied key outermost.
    let bandwidths = column(&csv, BANDWIDTH);
    assert_eq!(bandwidths.len(), 8, "{csv}");
    assert_eq!(bandwidths[..4], ["25 GB/s"; 4]);
    assert_eq!(bandwidths[4..], ["400 GB/s"; 4]);
    // Slower inter-SIP links serialise the same bytes for longer: every
    // run at 25 GB/s takes longer than its twin at 400 GB/s.
    let times: Vec<u64> = column(&csv, "allreduce_ps")
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
    for i in 0..4 {
        assert!(times[i] > times[i + 4], "{csv}");
    }
    // One curve per combination of the other swept values.
    let latency = std::fs::read_to_string(out.join("latency_vs_size.svg")).unwrap();
    assert!(latency.contains("system.inter_sip.bandwidth=400 GB/s fidelity=flow"));
    // The sweep and the report print the sensitivity table.
    let title = format!("# sensitivity to {BANDWIDTH}: time relative to {BANDWIDTH}=25 GB/s");
    assert!(stdout(&output).contains(&title), "{}", stdout(&output));
    let merged = dir.path().join("r");
    let report = kernbench(dir.path(), &["report", "d", "--out", "r"]);
    assert!(report.status.success(), "{}", stderr(&report));
    let text = stdout(&report);
    let table: Vec<_> = text.lines().skip_while(|l| *l != title).collect();
    // At 1K and 4K per rank the links' bandwidth moves nothing: each line
    // gets its note under the table.
    let (notes, lines): (Vec<&str>, Vec<&str>) = table
        .iter()
        .partition(|l| l.contains("moved the time by under 1 %"));
    assert_eq!((lines.len(), notes.len()), (6, 4), "{text}");
    assert!(table[2].ends_with("ccl_allreduce fidelity=packet size=1K"));
    let html = std::fs::read_to_string(merged.join("index.html")).unwrap();
    assert!(html.contains("<h2>Sensitivity</h2>"));
    assert!(html.contains(&title));
}

#[test]
fn bad_lists_exit_2_naming_the_key_before_any_run() {
    let dir = TempDir::new("whatif-bad");
    for (vary, named) in [
        ("nope.key=1,2", "nope.key"),
        (
            "system.inter_sip.bandwidth=fast",
            "system.inter_sip.bandwidth=fast",
        ),
        (
            "system.inter_sip.bandwidth=100 GB/s,fast",
            "system.inter_sip.bandwidth=fast",
        ),
        ("system.inter_sip.bandwidth=", "system.inter_sip.bandwidth"),
        ("system.inter_sip.bandwidth=,", "system.inter_sip.bandwidth"),
        (
            "ccl.defaults.algorithm=ring_allreduce,nope",
            "ccl.defaults.algorithm=nope",
        ),
    ] {
        let args = [
            "sweep",
            "--bench",
            "ccl_allreduce",
            "--size",
            "1K",
            "--vary",
            vary,
            "--out",
            "o",
        ];
        let output = kernbench(dir.path(), &args);
        assert_eq!(output.status.code(), Some(2), "{vary}: {}", stderr(&output));
        let error = stderr(&output);
        assert_eq!(error.lines().count(), 1, "{vary}: {error}");
        assert!(
            error.starts_with(&format!("error: --vary {named}")),
            "{vary}: {error}"
        );
        assert!(stdout(&output).is_empty(), "{vary}: ran something");
        assert!(!dir.path().join("o").exists(), "{vary}: wrote results");
    }
}

/// docs/sweeps.md's recipe: every shard a separate `kernbench` process
/// (as a Slurm array task or a GNU parallel job would be), then `report`.
#[test]
fn three_shards_merge_into_the_unsharded_results_byte_for_byte() {
    let dir = TempDir::new("whatif-shards");
    let vary = format!("{BANDWIDTH}=50 GB/s,200 GB/s");
    let sweep = [
        "sweep",
        "--bench",
        "ccl_allreduce",
        "--size",
        "1K,2K,4K",
        "--vary",
        &vary,
        "--jobs",
        "1",
    ];
    let run = |extra: &[&str]| {
        let output = kernbench(dir.path(), &[&sweep[..], extra].concat());
        assert!(output.status.success(), "{}", stderr(&output));
    };
    run(&["--out", "whole"]);
    let children: Vec<_> = (1..=3)
        .map(|i| {
            let shard = format!("{i}/3");
            let out = format!("shard{i}");
            std::process::Command::new(env!("CARGO_BIN_EXE_kernbench"))
                .args(sweep)
                .args(["--shard", &shard, "--out", &out])
                .current_dir(dir.path())
                .env_remove("RUST_LOG")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let report = ["report", "shard1", "shard2", "shard3", "--out", "merged"];
    let output = kernbench(dir.path(), &report);
    assert!(output.status.success(), "{}", stderr(&output));
    let read = |d: &str| std::fs::read_to_string(dir.path().join(d).join("results.csv")).unwrap();
    let (whole, merged) = (read("whole"), read("merged"));
    assert_eq!(whole.lines().count(), 7, "{whole}");
    assert_eq!(merged, whole);
    // Each shard holds its third (round robin over the 6 points).
    for i in 1..=3 {
        assert_eq!(read(&format!("shard{i}")).lines().count(), 3);
    }
}
