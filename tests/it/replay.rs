//! `simulation.repeats: replay` (ADR-0107): a step's repeated collectives
//! take their first call's times. Exact where every call's members arrive
//! together and run alone; a generated step with tensor, data and pipeline
//! parallelism stays within 3 % of simulating every call; deterministic.

use std::path::Path;
use std::sync::Arc;

use kernbench::chakra::generate::{self, step};
use kernbench::chakra::{self, CommType};
use kernbench::config::Override;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, Options, Report};

use crate::cli_common::{TempDir, kernbench, stderr, stdout};

fn machine(sips: usize, repeats: &str) -> Arc<Machine> {
    let sets = [
        format!("system.sips.count={sips}"),
        "simulation.fidelity=flow".to_owned(),
        format!("simulation.repeats={repeats}"),
    ];
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &sets).unwrap();
    Arc::new(Machine::build(&spec).unwrap())
}

fn figures(report: &Report) -> serde_json::Value {
    serde_json::to_value(report).unwrap()["figures"].clone()
}

fn figure(report: &Report, name: &str) -> u64 {
    let figures = figures(report);
    figures[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no integer figure {name} in {figures}"))
}

fn run_chakra(prefix: &Path, sips: usize, repeats: &str) -> Report {
    let mut options = Options::default().with("et", prefix.to_str().unwrap());
    options.verify_data = false;
    workloads::find("chakra")
        .unwrap()
        .run(machine(sips, repeats), &options)
        .unwrap()
}

/// `calls` all-reduces of `bytes` on every one of `ranks` ranks, each after
/// a world barrier (which releases every rank at one instant, so each
/// call's members arrive together).
fn barrier_chain(prefix: &Path, ranks: usize, calls: u64, bytes: u64) {
    let rank = || {
        let mut nodes = Vec::new();
        for k in 0..calls {
            let deps = |id: u64| if id == 0 { vec![] } else { vec![id - 1] };
            let (barrier, call) = (2 * k, 2 * k + 1);
            let b = generate::collective_node(
                (barrier, "b"),
                CommType::Barrier,
                0,
                None,
                deps(barrier),
            );
            let c = generate::collective_node(
                (call, "ar"),
                CommType::AllReduce,
                bytes,
                None,
                deps(call),
            );
            nodes.extend([b, c]);
        }
        generate::trace(nodes)
    };
    let traces: Vec<_> = (0..ranks).map(|_| rank()).collect();
    chakra::write(prefix, &traces, &Default::default()).unwrap();
}

#[test]
fn calls_whose_members_arrive_together_and_run_alone_replay_to_the_picosecond() {
    let dir = TempDir::new("replay-exact");
    let prefix = dir.path().join("c");
    barrier_chain(&prefix, 4, 5, 256 << 10);
    let simulated = run_chakra(&prefix, 4, "simulate");
    let replayed = run_chakra(&prefix, 4, "replay");
    assert_eq!(figure(&replayed, "collectives_simulated"), 1);
    assert_eq!(figure(&replayed, "collectives_replayed"), 4);
    for name in ["et_ps", "comm_ps", "allreduce_ps", "rank3_ps"] {
        assert_eq!(figure(&replayed, name), figure(&simulated, name), "{name}");
    }
    assert!(
        figure(&replayed, "sim_events") * 2 < figure(&simulated, "sim_events"),
        "four of five calls send nothing"
    );
    assert!(figures(&simulated).get("collectives_replayed").is_none());
}

/// A 1F1B step of GPT-3 125M (tp 2, dp 2, pp 2, four micro-batches) on 8
/// SIPs: the tensor-parallel all-reduces of one layer repeat across
/// layers and micro-batches; the data-parallel ones overlap them.
fn small_step(prefix: &Path) {
    let s = step::Step {
        tp: 2,
        dp: 2,
        pp: 2,
        layers: 2,
        micro_batches: 4,
        seq: 128,
        ..step::Step::new(step::model("gpt3-125m").unwrap())
    };
    let (traces, groups) = s.generate().unwrap();
    chakra::write(prefix, &traces, &groups).unwrap();
}

#[test]
fn a_generated_step_replays_within_3_percent_and_deterministically() {
    let dir = TempDir::new("replay-step");
    let prefix = dir.path().join("s");
    small_step(&prefix);
    let simulated = figure(&run_chakra(&prefix, 8, "simulate"), "et_ps");
    let first = run_chakra(&prefix, 8, "replay");
    let again = run_chakra(&prefix, 8, "replay");
    assert_eq!(figures(&first), figures(&again), "byte-identical reruns");
    let (replayed, count) = (
        figure(&first, "et_ps"),
        figure(&first, "collectives_replayed"),
    );
    assert!(count > figure(&first, "collectives_simulated"), "{count}");
    let error = (replayed as f64 / simulated as f64 - 1.0) * 100.0;
    println!("step: simulate {simulated} ps, replay {replayed} ps ({error:+.2} %)");
    assert!(error.abs() <= 3.0, "{error:+.2} %");
}

#[test]
fn a_bad_repeats_value_is_refused_naming_the_key() {
    let set = Override::parse("simulation.repeats=sometimes").unwrap();
    let error = TopologySpec::load(&TopologySpec::default_source(), &[set])
        .unwrap_err()
        .to_string();
    assert!(error.contains("simulation.repeats"), "{error}");
    assert!(error.contains("`sometimes`"), "{error}");
    assert!(error.contains("`simulate`, `replay`"), "{error}");
}

/// `--explain` on a replayed step names, on its critical path, the
/// collectives it went through by their group and the sends by their
/// pair (ADR-0114), where every replayed call used to be one name.
#[test]
fn explain_on_a_replayed_step_names_groups_and_pairs() {
    let dir = TempDir::new("replay-explain");
    let prefix = dir.path().join("s");
    small_step(&prefix);
    let output = kernbench(
        dir.path(),
        &[
            "--set",
            "system.sips.count=8",
            "--fidelity",
            "flow",
            "--set",
            "simulation.repeats=replay",
            "run",
            "--bench",
            "chakra",
            "--et",
            prefix.to_str().unwrap(),
            "--explain",
        ],
    );
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    let path = &text[text
        .find("top components on the critical path")
        .expect("explained")..];
    assert!(path.contains("trace replayed all_reduce of tp"), "{path}");
    assert!(path.contains("trace replayed send "), "{path}");
}
