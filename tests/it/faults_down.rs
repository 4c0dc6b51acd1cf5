//! Parts down (`faults.down`, ADR-0115): a link down for the run is routed
//! around (data verified, no faster than healthy, the physical bound over
//! the links left, `--explain` names the links it was rerouted over); two links down that cut a ring are one
//! error at load naming both faults and both sides; a link down for a
//! window during the call costs at most the window and one packet; bad
//! specs are one line naming the key.
//!
//! The runs at 4 and 16 MiB are ignored under `cargo test` and run in
//! release (`cargo test --release --test it -- --ignored faults_down::`).

use serde_json::Value;

use crate::cli_common::{TempDir, kernbench, stderr, stdout};

const LINK_DOWN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/configs/examples/link-down.yaml"
);
const PARTITION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/configs/examples/partition.yaml"
);
const RING4: [&str; 4] = [
    "--set",
    "system.sips.count=4",
    "--set",
    "system.sips.topology=ring_1d",
];

/// `kernbench ARGS --json`: it must succeed with every check passed; its
/// report.
fn report(dir: &TempDir, args: &[&str]) -> (Value, String) {
    let output = kernbench(dir, &[args, &["--json"]].concat());
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    let text = stdout(&output);
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["checks_failed"], 0, "{args:?}: {text}");
    (json, text)
}

/// Figure `name` of a report, in ps.
fn ps(json: &Value, name: &str) -> u64 {
    json["figures"][name].as_u64().unwrap()
}

#[test]
#[ignore = "16 SIPs, 4 MiB: run in release (cargo test --release --test it -- --ignored faults_down::)"]
fn a_link_down_for_the_run_is_routed_around_and_explained() {
    let dir = TempDir::new("down-routed");
    let run = [
        "run",
        "--bench",
        "ccl_allreduce",
        "--size",
        "4M",
        "--verify-data",
    ];
    let torus = [
        "--set",
        "system.sips.count=16",
        "--set",
        "system.sips.topology=torus_2d",
    ];
    let (healthy, _) = report(&dir, &[&torus[..], &run].concat());
    let down = [&["--topology", LINK_DOWN][..], &run].concat();
    let (faulted, text) = report(&dir, &down);
    assert!(ps(&faulted, "allreduce_ps") >= ps(&healthy, "allreduce_ps"));
    // sip0 receives over three links, not four: a tighter bound.
    assert!(ps(&faulted, "limit_ps") > ps(&healthy, "limit_ps"));
    assert_eq!(report(&dir, &down).1, text, "two runs byte-identical");
    let output = kernbench(&dir, &[&down[..], &["--explain"]].concat());
    let out = stdout(&output);
    let named = "faults.down.sip0_sip1: sip0.inter_sip.e<->sip1.inter_sip.w down for the run, \
                 rerouted over ";
    let line = out.lines().find(|l| l.contains(named)).unwrap_or_default();
    let over = line.split("rerouted over ").nth(1).unwrap_or_default();
    assert!(
        over.contains("inter_sip") && !over.contains("sip0.inter_sip.e->sip1.inter_sip.w"),
        "explain names the links the routes took instead: {out}"
    );
}

#[test]
fn links_that_cut_a_ring_are_one_error_naming_both_faults_and_sides() {
    let dir = TempDir::new("down-partition");
    let output = kernbench(
        &dir,
        &["run", "--bench", "ccl_allreduce", "--topology", PARTITION],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for says in [
        ": faults.down.sip2_sip3: ",
        "faults.down.sip0_sip1 (sip0.inter_sip.e<->sip1.inter_sip.w) and faults.down.sip2_sip3",
        "sip0, sip3 cannot reach sip1, sip2",
    ] {
        assert!(err.contains(says), "says `{says}`: {err}");
    }
}

/// A link down for 20 µs from 50 µs into the call (placed by the healthy
/// run's `call_start_ps`), both directions, in each fidelity: the call
/// completes with its data verified and grows by more than nothing (the
/// link carries traffic then) and by at most the window plus one full
/// packet's occupancy of the link (ADR-0115's bound: the packet in service
/// when it fails resumes after the repair, so less than one is resent).
#[test]
#[ignore = "16 MiB: run in release (cargo test --release --test it -- --ignored faults_down::)"]
fn a_window_costs_at_most_itself_and_one_packet() {
    let dir = TempDir::new("down-window");
    // The default inter-SIP link: 256 B packets, no overhead, at 100 GB/s
    // × 0.8 efficiency (configs/topology.yaml): 3,200 ps a packet.
    let packet_ps = 256 * 1_000_000_000_000 / (100_000_000_000 * 8 / 10);
    let window_ps: u64 = 20_000_000;
    for fidelity in ["packet", "flow"] {
        let base = [
            &RING4[..],
            &["--fidelity", fidelity, "run", "--bench", "ccl_allreduce"],
            &[
                "--algorithm",
                "ring_allreduce",
                "--size",
                "16M",
                "--verify-data",
            ],
        ]
        .concat();
        let (healthy, _) = report(&dir, &base);
        let from = ps(&healthy, "call_start_ps") + 50_000_000;
        let sets = [
            "faults.down.w.link=sip0.inter_sip.e<->sip1.inter_sip.w".to_owned(),
            format!("faults.down.w.from={from} ps"),
            format!("faults.down.w.until={} ps", from + window_ps),
        ];
        let mut args: Vec<&str> = Vec::new();
        for set in &sets {
            args.extend(["--set", set]);
        }
        args.extend(&base);
        let (faulted, _) = report(&dir, &args);
        let grown = ps(&faulted, "allreduce_ps") - ps(&healthy, "allreduce_ps");
        assert!(
            grown > 0 && grown <= window_ps + packet_ps,
            "{fidelity}: grew {grown} ps"
        );
    }
}

#[test]
fn bad_down_specs_are_refused_naming_the_key() {
    let dir = TempDir::new("down-bad");
    let check = |sets: &[&str], key: &str, says: &str| {
        let mut args = vec!["topo"];
        for set in sets {
            args.extend(["--set", set]);
        }
        let output = kernbench(&dir, &args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{sets:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{sets:?}: one line: {err}"
        );
        assert!(
            err.contains(&format!(": {key}: ")),
            "{sets:?}: names {key}: {err}"
        );
        assert!(err.contains(says), "{sets:?}: says `{says}`: {err}");
    };
    let link = "faults.down.x.link=sip0.inter_sip.e<->sip1.inter_sip.w";
    check(
        &["faults.down.x.from=10 us"],
        "faults.down.x",
        "name what is down",
    );
    check(
        &[link, "faults.down.x.from=10 us"],
        "faults.down.x.from",
        "without `until`",
    );
    let backwards = [
        link,
        "faults.down.x.from=30 us",
        "faults.down.x.until=10 us",
    ];
    check(&backwards, "faults.down.x.until", "is not after from");
    check(
        &["faults.down.x.at=sip1.cube0.pe0"],
        "faults.down.x.at",
        "a PE cannot be down",
    );
    check(
        &["faults.down.x.at=sip9"],
        "faults.down.x.at",
        "there is no SIP 9",
    );
    let unknown = "faults.down.x.link=sip9.inter_sip.e->sip1.inter_sip.w";
    check(
        &[unknown],
        "faults.down.x.link",
        "no node `sip9.inter_sip.e`",
    );
    check(
        &[link, "faults.down.x.at=sip1"],
        "faults.down.x",
        "one of `link",
    );
}

/// The machine drawing marks a link down with a red dashed halo, once per
/// physical link (both directions are one line): link-down.yaml's one, a
/// window's as well; a healthy machine has none.
#[test]
fn the_drawing_marks_links_down() {
    use kernbench::config::{ConfigSource, Overrides};
    use kernbench::harness::web::topology_svg;
    use kernbench::topology::{Machine, TopologySpec};
    let machine = |source: ConfigSource, sets: &[&str]| {
        let overrides = Overrides::parse(sets).unwrap();
        Machine::build(&TopologySpec::load(&source, &overrides.topology).unwrap()).unwrap()
    };
    let downs = |m: &Machine| topology_svg(m).matches("class=\"down\"").count();
    assert_eq!(downs(&machine(TopologySpec::default_source(), &[])), 0);
    assert_eq!(
        downs(&machine(ConfigSource::File(LINK_DOWN.into()), &[])),
        1
    );
    let window = [
        "faults.down.w.link=sip0.inter_sip.e->sip1.inter_sip.w",
        "faults.down.w.from=1 us",
        "faults.down.w.until=2 us",
    ];
    assert_eq!(downs(&machine(TopologySpec::default_source(), &window)), 1);
}
