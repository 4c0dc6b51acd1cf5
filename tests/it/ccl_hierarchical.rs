//! The two-level collectives of ADR-0090 (`intercube_*` beside
//! `intercube_allreduce`) through their `ccl_*` workloads with
//! `--verify-data`: the workload fills every rank's input with distinct
//! values and checks every endpoint's result against the f64 reference
//! (exact for the copies; within the dtype's rounding bound for the
//! reductions). Each run also checks that the algorithm states an α-β
//! model and that it is not above the simulated time (a lower bound,
//! `ccl::cost`).
//!
//! `cargo test` runs a quick subset (2 × 2-cube SIPs, 1 to 4 SIPs on each
//! SIP topology, one odd count, f32 and f16 with 64 B slots so that
//! messages go as several segments); `hierarchical_matrix` (release mode,
//! `.ci/run`) runs every algorithm on 1 to 9 SIPs of 16 cubes × ring_1d,
//! torus_2d and mesh_2d_no_wrap × f16, bf16 and f32 at odd counts.

use std::sync::Arc;

use kernbench::ccl::CclConfig;
use kernbench::config::Overrides;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, Value};

/// The two-level algorithms and the workload that runs each.
const ALGORITHMS: [(&str, &str, &str); 3] = [
    ("ccl_allgather", "intercube_allgather", "allgather_ps"),
    (
        "ccl_reducescatter",
        "intercube_reducescatter",
        "reducescatter_ps",
    ),
    ("ccl_alltoall", "intercube_alltoall", "alltoall_ps"),
];

/// The SIP topologies, by their `system.sips.topology` name.
const TOPOLOGIES: [&str; 3] = ["ring_1d", "torus_2d", "mesh_2d_no_wrap"];

/// The `--set` arguments of `sips` SIPs on `topology`: a 2-D grid `w × h`
/// with `h` the largest divisor of `sips` not above its square root
/// (5 SIPs: 5 × 1; 6: 3 × 2; 9: 3 × 3).
fn machine(sips: u32, topology: &str) -> Vec<String> {
    let mut sets = vec![
        format!("system.sips.count={sips}"),
        format!("system.sips.topology={topology}"),
    ];
    if topology != "ring_1d" {
        let h = (1..=sips).filter(|h| sips % h == 0 && h * h <= sips).max();
        let h = h.unwrap_or(1);
        sets.push(format!("system.sips.w={}", sips / h));
        sets.push(format!("system.sips.h={h}"));
    }
    sets
}

/// Runs `bench` with `algorithm` on `count` `dtype` elements per rank on
/// the machine `sets` with `--verify-data`: every check passes, the count
/// reported is the one asked for, and the model is present and at most the
/// simulated time `time` (on more than one endpoint).
fn run(sets: &[String], (bench, algorithm, time): (&str, &str, &str), dtype: &str, count: u64) {
    let overrides = Overrides::parse(sets).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology).unwrap();
    let ccl = CclConfig::load(&CclConfig::default_source(), &overrides.ccl).unwrap();
    let elem = if dtype == "f32" { 4 } else { 2 };
    let options = workloads::Options {
        ccl: Some(ccl),
        verify_data: true,
        ..workloads::Options::default()
    }
    .with("algorithm", algorithm)
    .with("dtype", dtype)
    .with("size", count * elem);
    let machine = Arc::new(Machine::build(&spec).unwrap());
    let what = format!("{bench} {algorithm} {dtype} {count} per rank on {sets:?}");
    let report = workloads::find(bench)
        .unwrap()
        .run(machine, &options)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(report.checks_passed > 0, "{what}: nothing checked");
    assert_eq!(report.checks_failed, 0, "{what}: {:?}", report.checks);
    let figure = |name: &str| {
        let found = report.figures.iter().find(|f| f.name == name);
        found.map(|f| f.value.clone())
    };
    assert_eq!(figure("count"), Some(Value::Int(count)), "{what}");
    let Some(Value::Int(endpoints)) = figure("endpoints") else {
        panic!("{what}: no endpoints")
    };
    let Some(Value::Int(simulated)) = figure(time) else {
        panic!("{what}: no {time}")
    };
    match figure("model_ps") {
        Some(Value::Int(model)) => assert!(model <= simulated, "{what}: {model} > {simulated}"),
        other => assert!(endpoints < 2, "{what}: model {other:?}"),
    }
}

/// 2 × 2-cube SIPs with 64 B IPCQ slots: every message of more than 16
/// f32 elements goes as several segments.
fn small(sips: u32, topology: &str) -> Vec<String> {
    let mut sets = machine(sips, topology);
    sets.extend(
        [
            "sip.cube_mesh.w=2",
            "sip.cube_mesh.h=2",
            "ccl.defaults.ipcq.slot_size=64 B",
        ]
        .map(String::from),
    );
    sets
}

#[test]
fn every_two_level_collective_verifies_on_small_machines() {
    for algorithm in ALGORITHMS {
        for topology in TOPOLOGIES {
            for sips in [1, 2, 4] {
                run(&small(sips, topology), algorithm, "f32", 1000);
            }
        }
        run(&small(3, "ring_1d"), algorithm, "f16", 7);
        run(&small(6, "torus_2d"), algorithm, "bf16", 37);
        if matches!(algorithm.0, "ccl_broadcast" | "ccl_reduce") {
            // A root cube inside the mesh: the lines branch both ways.
            let mut sets = small(4, "mesh_2d_no_wrap");
            sets.push(format!("ccl.algorithms.{}.root_cube=2", algorithm.1));
            run(&sets, algorithm, "f32", 1000);
        }
    }
}

/// Issue 41's acceptance matrix (release mode, `.ci/run`): 1 to 9 SIPs of
/// 16 cubes on every SIP topology, f16, bf16 and f32, at an odd count
/// (blocks padded) and at one element per endpoint and a half.
#[test]
#[ignore = "release-mode matrix, run by .ci/run"]
fn hierarchical_matrix() {
    for algorithm in ALGORITHMS {
        for topology in TOPOLOGIES {
            for sips in 1..=9 {
                let sets = machine(sips, topology);
                for dtype in ["f16", "bf16", "f32"] {
                    for count in [4097, u64::from(sips) * 24] {
                        run(&sets, algorithm, dtype, count);
                    }
                }
            }
            println!("{:28} {topology}: 1 to 9 SIPs pass", algorithm.1);
        }
    }
}
