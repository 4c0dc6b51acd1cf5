//! `ccl_allreduce` end to end: ring_allreduce and intercube_allreduce give
//! the global sum of seeded random f16 data, bitwise the same on every
//! endpoint, for every SIP topology (and a single-cube, single-SIP
//! machine), through the library and through `kernbench run --bench
//! ccl_allreduce --verify-data --json`; the same run twice gives identical
//! simulated times; sizes that cannot work are refused before anything is
//! allocated.

use std::process::Command;
use std::sync::Arc;

use kernbench::ccl::CclConfig;
use kernbench::config::Overrides;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, Options, Report, Value};

/// The machines of the matrix, as `--set` arguments.
const MACHINES: [&[&str]; 5] = [
    &[],
    &["system.sips.count=4", "system.sips.topology=torus_2d"],
    &[
        "system.sips.count=6",
        "system.sips.topology=torus_2d",
        "system.sips.w=3",
        "system.sips.h=2",
    ],
    &[
        "system.sips.count=4",
        "system.sips.topology=mesh_2d_no_wrap",
    ],
    &[
        "system.sips.count=1",
        "sip.cube_mesh.w=1",
        "sip.cube_mesh.h=1",
    ],
];

const ALGORITHMS: [&str; 2] = ["ring_allreduce", "intercube_allreduce"];

fn run(set: &[&str], algorithm: &str, verify_data: bool) -> Report {
    let overrides = Overrides::parse(set).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology).unwrap();
    let machine = Arc::new(Machine::build(&spec).unwrap());
    let options = Options {
        verify_data,
        ccl: Some(CclConfig::load(&CclConfig::default_source(), &[]).unwrap()),
        ..Options::default()
    }
    .with("algorithm", algorithm);
    workloads::find("ccl_allreduce")
        .unwrap()
        .run(machine, &options)
        .unwrap()
}

fn figure(report: &Report, name: &str) -> Value {
    let figure = report.figures.iter().find(|f| f.name == name);
    figure.unwrap_or_else(|| panic!("no {name}")).value.clone()
}

#[test]
fn every_algorithm_sums_on_every_machine() {
    for set in MACHINES {
        let sips = set
            .iter()
            .find_map(|s| s.strip_prefix("system.sips.count="))
            .map_or(2, |n| n.parse().unwrap());
        for algorithm in ALGORITHMS {
            let report = run(set, algorithm, true);
            let what = format!("{algorithm} on {set:?}");
            assert_eq!(report.checks_failed, 0, "{what}: {:?}", report.checks);
            // values, bitwise_identical, within_physical_limit, oplog_replay.
            assert_eq!(report.checks_passed, 4, "{what}");
            assert_eq!(figure(&report, "ranks"), Value::Int(sips as u64), "{what}");
        }
    }
}

#[test]
fn same_run_twice_gives_identical_times_with_and_without_data() {
    for algorithm in ALGORITHMS {
        let first = run(MACHINES[1], algorithm, true);
        let second = run(MACHINES[1], algorithm, true);
        let timing_only = run(MACHINES[1], algorithm, false);
        assert_eq!(first.simulated_ps, second.simulated_ps);
        assert_eq!(first.figures, second.figures);
        assert_eq!(first.simulated_ps, timing_only.simulated_ps);
    }
}

#[test]
fn the_cli_runs_it_as_json() {
    for algorithm in ALGORITHMS {
        let output = Command::new(env!("CARGO_BIN_EXE_kernbench"))
            .args([
                "--set",
                "system.sips.count=4",
                "--set",
                "system.sips.topology=torus_2d",
            ])
            .args(["run", "--bench", "ccl_allreduce", "--verify-data", "--json"])
            .args(["--algorithm", algorithm, "--size", "4096"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(json["checks_failed"], 0);
        assert_eq!(json["checks_passed"], 4);
    }
}

#[test]
fn a_size_that_does_not_split_into_tiles_is_padded_and_half_an_element_refused() {
    // 50 f16 elements on 16 cubes: blocks of 4, 14 elements of padding
    // (ADR-0045 D1); 101 B is no whole number of f16 elements.
    let output = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(["run", "--bench", "ccl_allreduce", "--size", "100"])
        .args(["--verify-data", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["checks_failed"], 0);
    assert_eq!(json["figures"]["count"], 50);
    assert_eq!(json["figures"]["padding_per_rank"], 14);
    let output = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(["run", "--bench", "ccl_allreduce", "--size", "101"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--size 101: must be a positive whole number of f16 elements"),
        "{stderr}"
    );
}

#[test]
fn a_size_beyond_device_memory_is_refused_before_allocation() {
    // 256 MiB per rank: 16 MiB per cube tile, which fits a cube's 16 GiB
    // of HBM but not the 8 MiB TCM ring_rsag_allreduce loads a tile into.
    let output = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(["run", "--bench", "ccl_allreduce", "--verify-data"])
        .args(["--algorithm", "ring_rsag_allreduce", "--size", "268435456"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim(),
        "error: --size 268435456: a block (in the algorithm's TCM buffers, with any IPCQ slots \
         there) would take 17301504 B, but a PE's TCM holds 8 MiB (pe.tcm.capacity): lower the size or raise \
         pe.tcm.capacity"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(["--set", "cube.hbm.capacity=1 MiB"])
        .args(["run", "--bench", "ccl_allreduce", "--size", "32M"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "--size 33554432: each cube's tiles would take 2097152 B, but a cube's HBM holds \
             1 MiB (cube.hbm.capacity)"
        ),
        "{stderr}"
    );
}

/// Runs the default ccl_allreduce case with ccl.yaml overrides.
fn run_with_ccl(ccl_sets: &[&str], algorithm: &str) -> Result<Report, String> {
    let overrides = Overrides::parse(ccl_sets).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    let options = Options {
        verify_data: true,
        ccl: Some(CclConfig::load(&CclConfig::default_source(), &overrides.ccl).unwrap()),
        ..Options::default()
    }
    .with("algorithm", algorithm);
    workloads::find("ccl_allreduce")
        .unwrap()
        .run(Arc::new(Machine::build(&spec).unwrap()), &options)
        .map_err(|e| e.to_string())
}

#[test]
fn ccl_yaml_ipcq_settings_reach_the_rings() {
    // Two slots are enough for the guide's ring; sleep and poll agree when
    // nobody waits for a credit.
    let sleep = run_with_ccl(&["ccl.defaults.ipcq.slots=2"], "ring_allreduce").unwrap();
    let poll = run_with_ccl(
        &[
            "ccl.defaults.ipcq.slots=2",
            "ccl.defaults.ipcq.backpressure=poll",
        ],
        "ring_allreduce",
    )
    .unwrap();
    assert_eq!(sleep.checks_failed, 0);
    assert_eq!(sleep.simulated_ps, poll.simulated_ps);
    // The ring releases each slot once it has added or passed it on, so
    // one slot per ring is enough (the chunks then move in lockstep).
    let one = run_with_ccl(
        &["ccl.algorithms.ring_allreduce.ipcq.slots=1"],
        "ring_allreduce",
    )
    .unwrap();
    assert_eq!(one.checks_failed, 0, "{:?}", one.checks);
    assert!(one.simulated_ps >= sleep.simulated_ps);
}

/// The tree algorithms stream a tile through TCM chunk by chunk (chunks of
/// at most one slot), so a tile four times the TCM is reduced correctly
/// (data checked), where an algorithm that loads the whole tile is
/// refused.
#[test]
fn tree_algorithms_stream_tiles_larger_than_the_tcm() {
    let run = |algorithm: &str| {
        Command::new(env!("CARGO_BIN_EXE_kernbench"))
            .args(["--fidelity", "flow", "--set", "pe.tcm.capacity=256 KiB"])
            .args(["--set", "ccl.defaults.ipcq.slot_size=16 KiB"])
            .args(["--set", "ccl.defaults.ipcq.slots=2"])
            .args(["run", "--bench", "ccl_allreduce", "--verify-data"])
            .args(["--algorithm", algorithm, "--size", "16M"])
            .output()
            .unwrap()
    };
    for algorithm in ["intercube_allreduce", "tree_allreduce"] {
        let output = run(algorithm);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{algorithm}: {stdout}");
        assert!(stdout.contains("checks: 4 passed, 0 failed"), "{stdout}");
    }
    let refused = run("ring_rsag_allreduce");
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn a_chunk_larger_than_a_slot_is_refused_at_load() {
    let output = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args([
            "--set",
            "ccl.algorithms.intercube_allreduce.params.chunk=128 KiB",
        ])
        .args(["run", "--bench", "ccl_allreduce"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("params.chunk 131072 B is larger than ipcq.slot_size 65536 B"),
        "{stderr}"
    );
}
