//! Command and DMA engines: DMA issue and in-flight limits, the M_CPU's
//! fan-out paths, and the IO_CPU's common start time and aggregation.

use std::cell::RefCell;
use std::num::NonZeroU64;
use std::rc::Rc;

use kernbench::config::units::{Bandwidth, Fraction, Size};
use kernbench::hw::{
    CubeFanout, DmaEngine, HopParams, IoCpu, Link, Mcpu, PeCommand, transfer, transfer_formula,
};
use kernbench::sim::{self, SimDuration, SimTime, Simulation};
use kernbench::topology::{DmaSpec, TopologySpec};

fn ns(n: u64) -> SimDuration {
    SimDuration::from_ns(n)
}

fn spec() -> TopologySpec {
    TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()
}

fn payload(p: u64) -> NonZeroU64 {
    NonZeroU64::new(p).unwrap()
}

fn hop(latency_ns: u64) -> HopParams {
    HopParams::new(
        Bandwidth::from_bytes_per_sec(64_000_000_000).unwrap(),
        Fraction::from_ppm(1_000_000).unwrap(),
        ns(latency_ns),
        Size::from_bytes(0),
    )
}

fn path(name: &str, hops: usize) -> Vec<Rc<Link>> {
    (0..hops)
        .map(|h| Rc::new(Link::new(&format!("{name}.{h}"), hop(10))))
        .collect()
}

#[test]
fn third_of_three_dma_jobs_waits_for_a_free_slot() {
    let dma_spec = DmaSpec {
        max_outstanding: kernbench::config::units::Count::new(2).unwrap(),
        ..spec().pe().dma
    };
    let engine = Rc::new(DmaEngine::new("pe_dma", &dma_spec));
    let mut simulation = Simulation::new();
    let jobs: Vec<_> = [100u64, 300, 50]
        .into_iter()
        .enumerate()
        .map(|(i, work)| {
            let engine = engine.clone();
            simulation.spawn(&format!("job{i}"), async move {
                let e = engine.clone();
                let job = async move {
                    let in_flight = e.in_flight();
                    sim::sleep(ns(work)).await;
                    in_flight
                };
                engine.run(job).await.unwrap()
            })
        })
        .collect();
    simulation.run().unwrap();
    let done: Vec<_> = jobs.into_iter().map(|j| j.output().unwrap()).collect();
    // Issue is serial, 32 ns each: issued at 32, 64, 96 ns.
    let issued: Vec<u64> = done.iter().map(|d| d.issued.as_ps() / 1000).collect();
    assert_eq!(issued, vec![32, 64, 96]);
    assert_eq!(done[0].started.as_ps(), 32_000);
    assert_eq!(done[1].started.as_ps(), 64_000);
    // Job 0 ends at 132 ns; only then does job 2 get a slot.
    assert_eq!(done[0].end.as_ps(), 132_000);
    assert_eq!(done[2].started, done[0].end);
    assert_eq!(done[2].end.as_ps(), 182_000);
    assert!(done.iter().all(|d| d.output <= 2), "at most two in flight");
    assert_eq!(engine.issue_stats(SimTime::from_ns(200)).jobs, 3);
}

#[test]
fn uncontended_dma_costs_issue_plus_its_transfer() {
    let spec = spec();
    let engine = Rc::new(DmaEngine::new("pe_dma", &spec.pe().dma));
    let links = path("noc", 3);
    let mut simulation = Simulation::new();
    let e = engine.clone();
    let l = links.clone();
    let done = simulation.spawn("dma", async move {
        e.run(transfer(&l, 32 * 1024, payload(8192))).await.unwrap()
    });
    simulation.run().unwrap();
    let done = done.output().unwrap();
    let hops: Vec<_> = links.iter().map(|l| *l.params()).collect();
    let formula = transfer_formula(&hops, 32 * 1024, payload(8192)).unwrap();
    let expected = spec.pe().dma.issue_overhead.checked_add(formula).unwrap();
    assert_eq!(done.end.saturating_since(done.requested), expected);
    assert_eq!(done.output.unwrap().duration(), formula);
}

#[test]
fn mcpu_host_dma_is_dispatch_then_issue_then_data() {
    let spec = spec();
    let mcpu = Rc::new(Mcpu::new("mcpu", "mcpu.dma", &spec.cube().mcpu));
    let mut simulation = Simulation::new();
    let m = mcpu.clone();
    let done = simulation.spawn("h2d", async move {
        m.host_dma(async { sim::sleep(ns(1000)).await })
            .await
            .unwrap()
    });
    simulation.run().unwrap();
    let done = done.output().unwrap();
    // 200 ns dispatch + 500 ns issue + 1000 ns of data.
    assert_eq!(done.issued.as_ps(), 700_000);
    assert_eq!(done.end.as_ps(), 1_700_000);
    assert_eq!(mcpu.dma().descriptor_bytes(), 64);
    assert_eq!(mcpu.dispatch_stats(done.end).jobs, 1);
}

/// One launch over three cubes whose command paths have 1, 3 and 6 hops;
/// each cube runs two PE kernels of different lengths and sends one
/// response back over the same number of hops. Returns the IO_CPU report
/// and every kernel's start time.
#[allow(clippy::type_complexity)]
fn launch(
    underestimate_last: bool,
) -> (kernbench::hw::LaunchReport<(usize, SimTime)>, Vec<SimTime>) {
    let spec = spec();
    let io_cpu = Rc::new(IoCpu::new("io_cpu", &spec.sip().io_cpu));
    let starts = Rc::new(RefCell::new(Vec::new()));
    let cubes: Vec<_> = [1usize, 3, 6]
        .into_iter()
        .enumerate()
        .map(|(c, hops)| {
            let mcpu = Rc::new(Mcpu::new(&format!("mcpu{c}"), "dma", &spec.cube().mcpu));
            let command = path(&format!("cmd{c}"), hops);
            let response = path(&format!("rsp{c}"), hops);
            let params: Vec<_> = command.iter().map(|l| *l.params()).collect();
            let transit = transfer_formula(&params, 64, payload(256)).unwrap();
            let delivery = [ns(5), ns(7)];
            let mut reach = transit
                .checked_add(mcpu.dispatch_overhead())
                .and_then(|t| t.checked_add(ns(7)))
                .unwrap();
            if underestimate_last && c == 2 {
                reach = ns(1);
            }
            let starts = starts.clone();
            CubeFanout {
                reach,
                run: move |target_start: SimTime| async move {
                    transfer(&command, 64, payload(256)).await.unwrap();
                    let kernels = delivery
                        .iter()
                        .enumerate()
                        .map(|(pe, d)| PeCommand {
                            delivery: *d,
                            kernel: {
                                let starts = starts.clone();
                                async move {
                                    starts.borrow_mut().push(sim::now());
                                    sim::sleep(ns(100 * (c as u64 + pe as u64 + 1))).await;
                                }
                            },
                        })
                        .collect();
                    let cube = mcpu.run_kernels(target_start, kernels).await.unwrap();
                    assert_eq!(cube.started.len(), 2);
                    transfer(&response, 16, payload(256)).await.unwrap();
                    (c, sim::now())
                },
            }
        })
        .collect();
    let mut simulation = Simulation::new();
    let done = simulation.spawn("launch", async move { io_cpu.launch(cubes).await.unwrap() });
    simulation.run().unwrap();
    let report = done.output().unwrap();
    let starts = starts.borrow().clone();
    (report, starts)
}

#[test]
fn io_cpu_stamps_one_start_time_for_near_and_far_cubes() {
    let (report, starts) = launch(false);
    assert_eq!(report.dispatched.as_ps(), 1_000_000, "1 us dispatch");
    // Farthest cube: 6 hops × (10 ns + 1 ns for 64 B at 64 GB/s), 200 ns
    // M_CPU dispatch, 7 ns delivery to its farthest PE.
    let reach = 6 * 11_000 + 200_000 + 7_000;
    assert_eq!(report.target_start.as_ps(), 1_000_000 + reach);
    assert_eq!(starts.len(), 6);
    assert!(
        starts.iter().all(|s| *s == report.target_start),
        "{starts:?}"
    );
}

#[test]
fn io_cpu_completes_when_the_last_response_is_in() {
    let (report, _) = launch(false);
    let cubes: Vec<usize> = report.responses.iter().map(|(c, _)| *c).collect();
    assert_eq!(cubes, vec![0, 1, 2], "responses in fan-out order");
    let last = report.responses.iter().map(|(_, at)| *at).max().unwrap();
    assert_eq!(report.end, last);
    // Cube 2's second kernel runs 400 ns; its response crosses 6 hops of
    // 10 ns + 250 ps (16 B at 64 GB/s).
    let expected = report.target_start.as_ps() + 400_000 + 6 * 10_250;
    assert_eq!(report.end.as_ps(), expected);
}

#[test]
fn a_cube_reached_late_starts_late_and_the_rest_on_time() {
    let (report, starts) = launch(true);
    // The stamp now only covers cube 1 (3 hops).
    assert_eq!(
        report.target_start.as_ps(),
        1_000_000 + 3 * 11_000 + 200_000 + 7_000
    );
    let on_time = starts.iter().filter(|s| **s == report.target_start).count();
    assert_eq!(on_time, 4);
    assert!(starts.iter().all(|s| *s >= report.target_start));
}
