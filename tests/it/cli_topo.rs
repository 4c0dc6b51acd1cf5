//! The `kernbench topo` command as a user runs it: from an empty directory,
//! with only the embedded configuration, and with bad input.

use crate::cli_common;

use cli_common::{TempDir, kernbench, stderr, stdout};

#[test]
fn topo_runs_from_an_empty_directory() {
    let dir = TempDir::new("topo-text");
    let output = kernbench(dir.path(), &["topo"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for part in [
        "SIPs           2 (ring_1d)",
        "cubes per SIP  16 (4x4 mesh)",
        "PEs per cube   8",
        "32 cubes, 256 PEs",
        "HBM per cube",
        "16 GiB",
        "512 GiB",
        "63 GB/s",
        "1.024 TB/s",
        "25.6 GB/s",
        "2 ns",
    ] {
        assert!(text.contains(part), "`{part}` missing from:\n{text}");
    }
}

#[test]
fn topo_json_has_the_counts() {
    let dir = TempDir::new("topo-json");
    let output = kernbench(dir.path(), &["topo", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["sips"], 2);
    assert_eq!(json["sip_topology"], "ring_1d");
    assert_eq!(json["cubes_per_sip"], 16);
    assert_eq!(json["pes_per_cube"], 8);
    assert_eq!(json["total_cubes"], 32);
    assert_eq!(json["total_pes"], 256);
    assert_eq!(json["memories"][0]["size"], "16 GiB");
    assert_eq!(json["links"][0]["bandwidth"], "63 GB/s");
}

#[test]
fn topo_output_is_deterministic() {
    let dir = TempDir::new("topo-twice");
    let first = kernbench(dir.path(), &["topo", "--json"]);
    let second = kernbench(dir.path(), &["topo", "--json"]);
    assert_eq!(first.stdout, second.stdout);
}

#[test]
fn set_changes_the_machine() {
    let dir = TempDir::new("topo-set");
    let args = [
        "--set",
        "system.sips.count=4",
        "--set",
        "system.sips.topology=torus_2d",
        "--set",
        "ccl.defaults.n_elem=16",
        "topo",
        "--json",
    ];
    let output = kernbench(dir.path(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["sip_grid"], "2x2");
    assert_eq!(json["total_pes"], 512);
}

#[test]
fn bad_topology_file_exits_with_the_message() {
    let dir = TempDir::new("topo-bad-file");
    let file = dir.path().join("bad.yaml");
    let text = include_str!("../../configs/topology.yaml").replacen("  pes: 8", "  pes: eight", 1);
    std::fs::write(&file, text).unwrap();
    let output = kernbench(dir.path(), &["--topology", "bad.yaml", "topo"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.starts_with("error: bad.yaml:"),
        "unexpected stderr: {message}"
    );
    assert!(
        message.contains(
            ": cube.pes: expected a positive integer (at most 4294967295), found \"eight\""
        ),
        "{message}"
    );
    assert!(stdout(&output).is_empty());
}

#[test]
fn missing_file_and_bad_set_exit_2_without_panicking() {
    let dir = TempDir::new("topo-missing");
    let missing = kernbench(dir.path(), &["--topology", "nope.yaml", "topo"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).starts_with("error: cannot read nope.yaml"));
    let bad_set = kernbench(dir.path(), &["topo", "--set", "system.sips.colour=red"]);
    assert_eq!(bad_set.status.code(), Some(2));
    let message = stderr(&bad_set);
    assert!(
        message.starts_with("error: --set system.sips.colour=red: system.sips.colour: unknown key"),
        "{message}"
    );
    let bad_ccl = kernbench(
        dir.path(),
        &["topo", "--set", "ccl.defaults.algorithm=nope"],
    );
    assert_eq!(bad_ccl.status.code(), Some(2));
    for output in [missing, bad_set, bad_ccl] {
        assert!(!stderr(&output).contains("panicked"));
    }
}

/// Every config `run --bench ccl_allreduce` refuses at load, `topo` and
/// `probe` refuse too, with exit 2 and the same one-line message.
#[test]
fn topo_refuses_what_run_refuses_with_the_same_message() {
    let dir = TempDir::new("topo-same-as-run");
    let cases: [&[&str]; 7] = [
        &["--set", "system.sips.count=2147483648"],
        &["--set", "cube.sram.capacity=8388608 TiB"],
        &["--set", "cube.pes=5000"],
        &["--set", "ccl.algorithms.intercube_allreduce.module=nope"],
        &["--set", "ccl.defaults.world_size=7"],
        &["--set", "pe.tcm.capacity=16 KiB"],
        &["--set", "ccl.algorithms.intercube_allreduce.root_cube=3"],
    ];
    for sets in cases {
        let outcome = |command: &[&str]| {
            let args: Vec<&str> = sets.iter().chain(command).copied().collect();
            let output = kernbench(dir.path(), &args);
            (output.status.code(), stderr(&output))
        };
        let run = outcome(&["run", "--bench", "ccl_allreduce"]);
        assert_eq!(run.0, Some(2), "{sets:?}: {}", run.1);
        assert_eq!(run.1.lines().count(), 1, "{sets:?}: {}", run.1);
        assert!(run.1.starts_with("error: "), "{sets:?}: {}", run.1);
        assert_eq!(outcome(&["topo"]), run, "{sets:?}");
        assert_eq!(outcome(&["probe"]), run, "{sets:?}");
    }
}

/// A catalogue entry that cannot serve this machine (recursive doubling
/// over 17 × 16 = 272 endpoints needs 9 IPCQ directions; a cube has 8) does
/// not make the configuration invalid: `topo` and the default all-reduce
/// load it, and the entry is refused (exit 2, naming it and its
/// requirement) only when a run selects it.
#[test]
fn an_entry_that_does_not_fit_the_machine_is_refused_only_when_chosen() {
    let dir = TempDir::new("topo-entry-fits-not");
    let sips = ["--set", "system.sips.count=17"];
    let topo = kernbench(dir.path(), &[&sips[..], &["topo"]].concat());
    assert_eq!(topo.status.code(), Some(0), "{}", stderr(&topo));
    let run = |algorithm: &str| {
        let run = ["run", "--bench", "ccl_allreduce", "--algorithm", algorithm];
        kernbench(dir.path(), &[&sips[..], &run].concat())
    };
    let chosen = run("rd_allreduce");
    assert_eq!(chosen.status.code(), Some(2), "{}", stderr(&chosen));
    let message = stderr(&chosen);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(
        message.starts_with("error: ") && message.contains("`rd_allreduce` requires"),
        "{message}"
    );
    assert!(message.contains("272 endpoints"), "{message}");
}

/// `--set` before the subcommand and after it all apply, in order (clap
/// alone would keep only those after it).
#[test]
fn sets_before_and_after_the_subcommand_all_apply() {
    let dir = TempDir::new("topo-sets");
    let args = [
        "--set",
        "system.sips.count=4",
        "topo",
        "--set=system.sips.topology=torus_2d",
        "--set",
        "system.sips.topology=ring_1d",
    ];
    let output = kernbench(dir.path(), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("SIPs           4 (ring_1d)"), "{text}");
}

/// `--fidelity` too: before the subcommand and after it, a list split at
/// commas, every value kept (a sweep runs each).
#[test]
fn fidelities_before_and_after_the_subcommand_all_apply() {
    let dir = TempDir::new("topo-fidelity");
    let args = ["--fidelity", "packet", "sweep", "--bench", "ccl_allreduce"];
    let rest = ["--size", "4K", "--fidelity", "flow"];
    let output = kernbench(dir.path(), &[&args[..], &rest].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for fidelity in ["packet", "flow"] {
        let header = format!("# ccl_allreduce fidelity={fidelity}");
        assert!(text.contains(&header), "runs {fidelity}: {text}");
    }
}
