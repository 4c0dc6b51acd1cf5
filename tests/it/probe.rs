//! `kernbench probe`: every uncontended case of the catalogue agrees with its
//! closed form to the picosecond, on the default machine and on a 1-SIP 2×2
//! machine; contention shows; the invariant checks gate the exit code.

use std::process::Command;
use std::sync::Arc;

use kernbench::config::Override;
use kernbench::probe::{self, REFERENCE_BYTES};
use kernbench::topology::{Machine, TopologySpec};

fn machine(sets: &[&str]) -> Arc<Machine> {
    let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap();
    Arc::new(Machine::build(&spec).unwrap())
}

fn assert_uncontended_cases_exact(machine: &Arc<Machine>) -> probe::ProbeReport {
    let report = probe::run(machine, REFERENCE_BYTES).unwrap();
    let uncontended: Vec<_> = report.cases.iter().filter(|c| !c.contended).collect();
    assert!(
        uncontended.len() >= 8,
        "catalogue too small: {}",
        uncontended.len()
    );
    for case in uncontended {
        assert_eq!(case.actual_ps, case.formula_ps, "case {}", case.name);
    }
    assert!(report.passed, "{report}");
    report
}

#[test]
fn default_machine_catalogue_is_exact_and_passes() {
    let report = assert_uncontended_cases_exact(&machine(&[]));
    for name in [
        "h2d_best",
        "d2h_worst",
        "pe_dma_neighbour",
        "pe_dma_far",
        "pe_dma_other_sip",
    ] {
        assert!(report.case(name).is_some(), "missing case {name}");
    }
    let loads: Vec<u32> = report
        .cases
        .iter()
        .filter(|c| c.name.starts_with("load/"))
        .map(|c| c.load)
        .collect();
    assert_eq!(loads, [1, 2, 4, 6, 8], "a 5-point load sweep");
}

#[test]
fn one_sip_two_by_two_machine_catalogue_is_exact() {
    let report = assert_uncontended_cases_exact(&machine(&[
        "system.sips.count=1",
        "sip.cube_mesh.w=2",
        "sip.cube_mesh.h=2",
    ]));
    assert!(
        report.case("pe_dma_other_sip").is_none(),
        "one SIP has no other SIP"
    );
}

#[test]
fn contention_makes_shared_reads_slower_than_one() {
    let report = probe::run(&machine(&[]), REFERENCE_BYTES).unwrap();
    let one = report.case("load/1").unwrap();
    let eight = report.case("load/8").unwrap();
    assert!(eight.contended && !one.contended);
    assert!(
        eight.actual_ps > 2 * one.actual_ps,
        "8 readers of one HBM barely slowed"
    );
    assert_eq!(
        eight.formula_ps, one.formula_ps,
        "formula is the uncontended flow"
    );
}

#[test]
fn probe_is_deterministic() {
    let m = machine(&[]);
    let a = serde_json::to_string(&probe::run(&m, 4096).unwrap()).unwrap();
    let b = serde_json::to_string(&probe::run(&m, 4096).unwrap()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn cli_probe_json_reports_cases_and_checks() {
    let out = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(["probe", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["passed"], true);
    let first = &json["cases"][0];
    for key in [
        "name",
        "bytes",
        "formula_ps",
        "actual_ps",
        "bandwidth_gbps",
        "bottleneck",
    ] {
        assert!(!first[key].is_null(), "missing {key} in {first}");
    }
    assert!(
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["passed"] != false)
    );
}

#[test]
fn small_sizes_pass_with_the_load_sweep_at_the_reference_size() {
    let report = probe::run(&machine(&[]), 256).unwrap();
    assert!(report.passed, "{report}");
    let load: Vec<u64> = report
        .cases
        .iter()
        .filter(|c| c.name.starts_with("load/"))
        .map(|c| c.bytes)
        .collect();
    assert!(!load.is_empty() && load.iter().all(|&b| b == REFERENCE_BYTES));
}

#[test]
fn sizes_past_the_tcm_are_refused_with_the_largest_valid_one() {
    // The size sweep copies 32 x the size into an 8 MiB TCM: 256 KiB at most.
    let error = probe::run(&machine(&[]), 256 * 1024 + 1).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("largest valid size is 262144 B"),
        "{message}"
    );
    assert!(message.contains("pe.tcm.capacity"), "{message}");
    assert!(probe::run(&machine(&[]), u64::MAX).is_err());
}
