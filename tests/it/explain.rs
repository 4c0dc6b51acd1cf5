//! `--explain` (ADR-0028): the critical path's attribution sums exactly to
//! the measured interval on every all-reduce algorithm of the catalogue
//! and on the other collectives, in both fidelities; explaining changes no
//! simulated time; on one uncontended transfer the path is exactly the
//! closed form's terms; on one saturated link the busy fraction is 1.

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::rc::Rc;
use std::sync::Arc;

use kernbench::config::Overrides;
use kernbench::config::units::{Bandwidth, Fraction, Size};
use kernbench::explain::{Explanation, PathKept};
use kernbench::hw::explain as hwx;
use kernbench::hw::{HopParams, Link, transfer, transfer_flow, transfer_formula};
use kernbench::sim::{self, SimDuration, SimTime, Simulation};
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, Options, Report, Value};

use crate::catalogue_common;
use catalogue_common::allreduce_algorithms;

fn machine(sets: &[&str]) -> Arc<Machine> {
    let overrides = Overrides::parse(sets).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology).unwrap();
    Arc::new(Machine::build(&spec).unwrap())
}

fn int(report: &Report, name: &str) -> u64 {
    match report.figures.iter().find(|f| f.name == name) {
        Some(f) => match f.value {
            Value::Int(n) => n,
            ref other => panic!("{name} = {other:?}"),
        },
        None => panic!("{}: no figure {name}", report.name),
    }
}

/// Runs `bench` with `params` twice, plain and explained; checks the
/// explained run's times equal the plain one's, its `explain_*_ps` sum
/// exactly to `figure`, its busy fractions are in [0, 1]; returns it.
fn explained(machine: &Arc<Machine>, bench: &str, params: &[(&str, &str)], figure: &str) -> Report {
    let workload = workloads::find(bench).unwrap();
    let mut options = Options::default();
    for (name, value) in params {
        options = options.with(name, value);
    }
    let plain = workload.run(machine.clone(), &options).unwrap();
    options.explain = true;
    let report = workload.run(machine.clone(), &options).unwrap();
    let what = format!("{bench} {params:?}");
    assert_eq!(
        plain.simulated_ps, report.simulated_ps,
        "{what}: explaining changed the run"
    );
    assert_eq!(
        int(&plain, figure),
        int(&report, figure),
        "{what}: {figure}"
    );
    let explanation = report.explain.as_ref().expect("explained");
    let classes: u64 = report
        .figures
        .iter()
        .filter(|f| f.name.starts_with("explain_"))
        .map(|f| match f.value {
            Value::Int(n) => n,
            _ => panic!("{}", f.name),
        })
        .sum();
    assert_eq!(
        classes,
        int(&report, figure),
        "{what}: attribution vs {figure}"
    );
    assert_eq!(explanation.duration_ps, int(&report, figure), "{what}");
    let lines: u64 = explanation
        .critical_path
        .iter()
        .map(|l| l.duration_ps)
        .sum();
    let elided = explanation
        .critical_path_elided
        .as_ref()
        .map_or(0, |e| e.ps);
    assert_eq!(lines + elided, explanation.duration_ps, "{what}: path");
    let components: u64 = explanation.on_path.iter().map(|c| c.ps).sum();
    assert_eq!(components, explanation.duration_ps, "{what}: on_path");
    assert!(
        explanation.interval.starts_with(figure),
        "{}",
        explanation.interval
    );
    if let Some(gap) = &explanation.model_gap {
        let terms: i64 = gap.terms.iter().map(|t| t.ps).sum();
        assert_eq!(terms, gap.gap_ps, "{what}: the gap's terms sum to it");
        assert_eq!(
            gap.gap_ps,
            explanation.duration_ps as i64 - gap.model_ps as i64,
            "{what}: gap"
        );
    }
    if let Some(bound) = &explanation.bound {
        assert_eq!(bound.limit_ps, int(&report, "limit_ps"), "{what}: bound");
        assert_eq!(bound.time_ps, explanation.duration_ps, "{what}: bound time");
        assert!(
            explanation.to_string().contains(&bound.detail),
            "{what}: the text shows the bound"
        );
    }
    for usage in explanation.busiest.iter().chain(&explanation.links) {
        assert!(
            (0.0..=1.0).contains(&usage.busy_fraction) && usage.busy_ps <= explanation.duration_ps,
            "{what}: {usage:?}"
        );
    }
    // Nothing falls through the labels on these runs.
    assert_eq!(
        explanation.class_ps(hwx::Class::Other),
        0,
        "{what}: unexplained time"
    );
    report
}

#[test]
fn every_all_reduce_of_the_catalogue_is_explained_exactly_in_both_fidelities() {
    for sets in [
        &["system.sips.count=2"][..],
        &["system.sips.count=4", "system.sips.topology=torus_2d"],
    ] {
        for fidelity in ["packet", "flow"] {
            let fid = format!("simulation.fidelity={fidelity}");
            let machine = machine(&[sets, &[fid.as_str()]].concat());
            for algorithm in &allreduce_algorithms() {
                let params = [("algorithm", algorithm.as_str()), ("size", "64K")];
                let report = explained(&machine, "ccl_allreduce", &params, "allreduce_ps");
                let explanation = report.explain.unwrap();
                let gap = explanation.model_gap.expect("every all-reduce has a model");
                assert_eq!(gap.model_ps, int_of(&report.figures, "model_ps"));
                assert!(gap.gap_ps >= 0, "{algorithm}: the model is a lower bound");
                assert!(explanation.bound.is_some(), "{algorithm}: a bound");
            }
        }
    }
}

fn int_of(figures: &[workloads::Figure], name: &str) -> u64 {
    figures
        .iter()
        .find_map(|f| match (f.name == name, &f.value) {
            (true, Value::Int(n)) => Some(*n),
            _ => None,
        })
        .unwrap()
}

#[test]
fn the_other_collectives_are_explained_exactly() {
    let calls = [
        ("ccl_allgather", "allgather_ps"),
        ("ccl_reducescatter", "reducescatter_ps"),
        ("ccl_broadcast", "broadcast_ps"),
        ("ccl_reduce", "reduce_ps"),
        ("ccl_alltoall", "alltoall_ps"),
        ("ccl_sendrecv", "sendrecv_ps"),
        ("ccl_gather", "gather_ps"),
        ("ccl_scatter", "scatter_ps"),
    ];
    for fidelity in ["packet", "flow"] {
        let fid = format!("simulation.fidelity={fidelity}");
        let machine = machine(&["system.sips.count=2", fid.as_str()]);
        for (bench, figure) in calls {
            explained(&machine, bench, &[("size", "16K")], figure);
        }
    }
}

#[test]
fn a_workload_without_an_interval_is_explained_over_the_whole_run() {
    let machine = machine(&[]);
    let workload = workloads::find("gemm_single_pe").unwrap();
    let options = Options {
        explain: true,
        ..Options::default()
    };
    let report = workload.run(machine, &options).unwrap();
    let explanation = report.explain.unwrap();
    assert_eq!(explanation.start_ps, 0);
    assert_eq!(explanation.duration_ps, report.simulated_ps);
    let sum: u64 = explanation.by_class.iter().map(|s| s.ps).sum();
    assert_eq!(sum, report.simulated_ps);
    assert!(
        explanation.class_ps(hwx::Class::PeMath) > 0,
        "{explanation}"
    );
    // Issue 40 item 3: utilisation is over the whole run too.
    assert!(
        !explanation.utilisation.is_empty() && !explanation.busiest.is_empty(),
        "{explanation}"
    );
    assert!(explanation.busiest[0].busy_fraction > 0.0, "{explanation}");
}

fn hop(bytes_per_ns: u64, latency_ns: u64) -> HopParams {
    HopParams::new(
        Bandwidth::from_bytes_per_sec(bytes_per_ns * 1_000_000_000).unwrap(),
        Fraction::from_ppm(1_000_000).unwrap(),
        SimDuration::from_ns(latency_ns),
        Size::from_bytes(0),
    )
}

/// Runs `body` over `links` in a recorded simulation, the interval from
/// its start to its end; the explanation.
fn explain_alone<F>(
    links: Rc<Vec<Link>>,
    body: impl FnOnce(Rc<Vec<Link>>) -> F + 'static,
) -> Explanation
where
    F: std::future::Future<Output = ()> + 'static,
{
    let mut simulation = Simulation::new();
    simulation.record_causes();
    hwx::install();
    let servers = links.clone();
    simulation.spawn("t", async move {
        hwx::mark_start(sim::now(), servers.iter().map(Link::server));
        body(servers.clone()).await;
        let poll = sim::current_poll();
        hwx::mark_end(sim::now(), poll, "test", servers.iter().map(Link::server));
    });
    simulation.run().unwrap();
    let recording = hwx::finish().unwrap();
    let log = simulation.causal_log().unwrap();
    Explanation::from_recording(&log, &recording, PathKept::Whole)
}

/// Per link: (latency, service, queue) on the path.
fn per_link(explanation: &Explanation) -> BTreeMap<String, [u64; 3]> {
    explanation
        .on_path
        .iter()
        .map(|c| {
            assert_eq!(c.wait_ps, 0, "{}", c.name);
            (c.name.clone(), [c.latency_ps, c.service_ps, c.queue_ps])
        })
        .collect()
}

#[test]
fn an_uncontended_flow_is_exactly_the_closed_forms_terms() {
    // Fast, slow, fast; 4 packets of 100 B: the formula is 3 ns of latency
    // + S_a(P) + (N − 2 + 2)·S_b(P) + S_c(P_last) = 3 + 10 + 400 + 10 ns,
    // the slow hop holding every packet and the fast ones one each.
    let params = [hop(10, 1), hop(1, 1), hop(10, 1)];
    let payload = NonZeroU64::new(100).unwrap();
    let formula = transfer_formula(&params, 400, payload).unwrap();
    assert_eq!(formula, SimDuration::from_ns(423));
    let links: Vec<Link> = ["a", "b", "c"]
        .iter()
        .zip(params)
        .map(|(name, p)| Link::new(name, p))
        .collect();
    let explanation = explain_alone(Rc::new(links), move |links| async move {
        transfer_flow(links.iter(), 400, payload).await.unwrap();
    });
    assert_eq!(explanation.duration_ps, formula.as_ps());
    let ns = |n: u64| n * 1000;
    let expected = BTreeMap::from([
        ("a".to_owned(), [ns(1), ns(10), 0]),
        ("b".to_owned(), [ns(1), ns(400), 0]),
        ("c".to_owned(), [ns(1), ns(10), 0]),
    ]);
    assert_eq!(per_link(&explanation), expected);
}

#[test]
fn an_uncontended_packet_is_exactly_the_closed_forms_terms_in_packet_mode() {
    // One packet: Σ (L_h + S_h(P_last)): 100 B at 1 and 2 B/ns, 10 and
    // 20 ns of latency.
    let params = [hop(1, 10), hop(2, 20)];
    let payload = NonZeroU64::new(256).unwrap();
    assert_eq!(
        transfer_formula(&params, 100, payload).unwrap(),
        SimDuration::from_ns(180)
    );
    let links: Vec<Link> = ["x", "y"]
        .iter()
        .zip(params)
        .map(|(name, p)| Link::new(name, p))
        .collect();
    let explanation = explain_alone(Rc::new(links), move |links| async move {
        transfer(&links[..], 100, payload).await.unwrap();
    });
    let ns = |n: u64| n * 1000;
    let expected = BTreeMap::from([
        ("x".to_owned(), [ns(10), ns(100), 0]),
        ("y".to_owned(), [ns(20), ns(50), 0]),
    ]);
    assert_eq!(per_link(&explanation), expected);
}

#[test]
fn a_saturated_link_is_busy_the_whole_interval_and_its_queueing_is_seen() {
    // Two flows at once on one link without latency: the second queues
    // behind the first for its whole service, and the link is busy from
    // the interval's start to its end.
    let links = vec![Link::new("only", hop(4, 0))];
    let payload = NonZeroU64::new(256).unwrap();
    let explanation = explain_alone(Rc::new(links), move |links| async move {
        let other = links.clone();
        let first = sim::spawn("first", async move {
            transfer_flow(other.iter(), 4096, payload).await.unwrap();
        });
        transfer_flow(links.iter(), 4096, payload).await.unwrap();
        first.await.unwrap();
    });
    // 2 × 4096 B at 4 B/ns.
    assert_eq!(explanation.duration_ps, 2_048_000);
    let usage = &explanation.busiest[0];
    assert_eq!(usage.name, "only");
    assert!(
        explanation.duration_ps.abs_diff(usage.busy_ps) <= 1,
        "{usage:?}"
    );
    assert!((usage.busy_fraction - 1.0).abs() < 1e-9);
    assert_eq!(usage.bytes, 8192);
    assert_eq!(
        usage.queue_ps, 1_024_000,
        "the second flow waits for the first"
    );
    // The path ends in the second flow, which queued for the first.
    let link = per_link(&explanation)["only"];
    assert_eq!(link, [0, 1_024_000, 1_024_000]);
    let _ = SimTime::ZERO;
}

/// Issue 40 item 5: on a 9-SIP mesh gather the link time on the path is
/// below the model, so one term is negative; the signed terms still sum to
/// the gap, and the text prints the negative one.
#[test]
fn a_gap_with_link_time_below_the_model_has_a_negative_term_and_sums() {
    let machine = machine(&[
        "simulation.fidelity=flow",
        "system.sips.count=9",
        "system.sips.topology=mesh_2d_no_wrap",
    ]);
    let report = explained(&machine, "ccl_gather", &[("size", "64K")], "gather_ps");
    let explanation = report.explain.unwrap();
    let gap = explanation.model_gap.as_ref().unwrap();
    let below = gap
        .terms
        .iter()
        .find(|t| t.what == "link service and latency below the model")
        .expect("a negative link term");
    assert!(below.ps < 0, "{below:?}");
    assert!(explanation.to_string().contains("−"), "{explanation}");
}

/// Issue 40 items 3 and 4: the workloads that mark no interval are
/// explained over the whole run with nothing unexplained (DMA issue,
/// PE_GEMM without an epilogue, a trace's compute nodes are labelled) and
/// with their utilisation (counted from zero).
#[test]
fn whole_run_workloads_have_utilisation_and_nothing_unexplained() {
    let machine = machine(&["simulation.fidelity=flow", "system.sips.count=4"]);
    let cases: [(&str, &[(&str, &str)]); 3] = [
        ("gpt3_qkv", &[("seq", "64")]),
        ("megatron_mlp", &[]),
        (
            "transformer_step",
            &[
                ("model", "gpt3-125m"),
                ("layers", "1"),
                ("tp", "2"),
                ("dp", "2"),
            ],
        ),
    ];
    for (bench, params) in cases {
        let mut options = Options {
            explain: true,
            ..Options::default()
        };
        for (name, value) in params {
            options = options.with(name, value);
        }
        let report = workloads::find(bench)
            .unwrap()
            .run(machine.clone(), &options)
            .unwrap();
        let explanation = report.explain.unwrap();
        assert_eq!(
            explanation.class_ps(hwx::Class::Other),
            0,
            "{bench}: unexplained time\n{explanation}"
        );
        assert!(
            !explanation.utilisation.is_empty() && !explanation.links.is_empty(),
            "{bench}: no utilisation\n{explanation}"
        );
    }
}
