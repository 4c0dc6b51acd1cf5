//! ccl.yaml's default algorithms (ADR-0113): which entry a call runs by
//! its size, that each default is not slower than the flat algorithm it
//! replaced on a small torus, and that a default whose IPCQ slots do not
//! fit the machine is refused only by the call that needs it.

use crate::cli_common::{TempDir, kernbench, stderr, stdout};

/// The value of figure `name` in a `run`'s text report.
fn figure(report: &str, name: &str) -> String {
    let line = report
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name));
    let line = line.unwrap_or_else(|| panic!("no figure {name} in:\n{report}"));
    line.split_whitespace().nth(1).unwrap().to_owned()
}

/// Runs `args` (a successful `run`) and returns its report.
fn run(args: &[&str]) -> String {
    let dir = TempDir::new("ccl-defaults");
    let output = kernbench(dir.path(), args);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    stdout(&output)
}

/// The entry a default call of `bench` at `size` on the default machine runs.
fn default_entry(bench: &str, size: &str) -> String {
    figure(
        &run(&["run", "--bench", bench, "--size", size]),
        "algorithm",
    )
}

#[test]
fn the_default_entry_follows_the_call_size() {
    // (bench, size, entry): ccl.yaml's rules, 1 MiB per rank the boundary.
    let cases = [
        ("ccl_allgather", "64K", "intercube_allgather"),
        ("ccl_allgather", "1M", "intercube_allgather"),
        ("ccl_allgather", "2M", "ring_allgather"),
        ("ccl_reducescatter", "1M", "intercube_reducescatter"),
        ("ccl_reducescatter", "2M", "ring_reducescatter"),
        ("ccl_broadcast", "2M", "intercube_broadcast"),
        ("ccl_reduce", "4K", "intercube_reduce"),
        ("ccl_alltoall", "2M", "intercube_alltoall"),
        ("ccl_alltoall", "4M", "ring_alltoall"),
    ];
    for (bench, size, entry) in cases {
        assert_eq!(default_entry(bench, size), entry, "{bench} --size {size}");
    }
}

/// ADR-0113's rule on one row of its table: on 4 SIPs `torus_2d` at
/// 64 KiB per rank, each default simulates no longer than the flat
/// algorithm that was the default before.
#[test]
fn each_default_is_not_slower_than_the_flat_one_it_replaced() {
    let machine = [
        "--fidelity",
        "flow",
        "--set",
        "system.sips.count=4",
        "--set",
        "system.sips.topology=torus_2d",
    ];
    let flat = [
        ("ccl_allgather", "ring_allgather", "allgather_ps"),
        (
            "ccl_reducescatter",
            "ring_reducescatter",
            "reducescatter_ps",
        ),
        ("ccl_broadcast", "chain_broadcast", "broadcast_ps"),
        ("ccl_reduce", "chain_reduce", "reduce_ps"),
        ("ccl_alltoall", "ring_alltoall", "alltoall_ps"),
    ];
    for (bench, old, time) in flat {
        let call = ["run", "--bench", bench, "--size", "64K"];
        let ps = |extra: &[&str]| -> u64 {
            let report = run(&[&machine[..], &call, extra].concat());
            figure(&report, time).parse().unwrap()
        };
        let (default, before) = (ps(&[]), ps(&["--algorithm", old]));
        assert!(
            default <= before,
            "{bench}: default {default} ps, {old} {before} ps"
        );
    }
}

#[test]
fn a_default_whose_slots_do_not_fit_is_refused_only_by_its_call() {
    let small = ["--set", "cube.hbm.capacity=1 MiB", "run", "--bench"];
    // all_reduce runs: the all-gather default's 32 MiB of HBM slots per
    // cube are not needed.
    run(&[&small[..], &["ccl_allreduce", "--size", "4K"]].concat());
    let dir = TempDir::new("ccl-defaults");
    let output = kernbench(
        dir.path(),
        &[&small[..], &["ccl_allgather", "--size", "4K"]].concat(),
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message
            .contains("ccl.yaml entry `intercube_allgather`: IPCQ slots do not fit sip0.cube0.hbm"),
        "{message}"
    );
    // Named, the ring (slots in TCM) runs on the same machine.
    let ring = [
        "ccl_allgather",
        "--size",
        "4K",
        "--algorithm",
        "ring_allgather",
    ];
    run(&[&small[..], &ring].concat());
}
