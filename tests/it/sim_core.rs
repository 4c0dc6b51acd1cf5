//! Whole behaviours of the simulation core: exact final times, the schedule
//! fingerprint, deadlock and panic reports, task-local ranks, and a trace
//! stamped with simulated time.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use kernbench::runtime::{current_device, get_rank, scope_rank, set_device};
use kernbench::sim::speed::{self, W1_SLEEPS, W1_TASKS, lcg_next, w1_duration_ns};
use kernbench::sim::{
    Barrier, Event, JoinError, Resource, SimDuration, SimError, SimTime, Simulation, channel, now,
    sleep,
};

/// W1's final time computed without the simulator: the longest task's sum.
fn w1_expected_final_ps() -> u64 {
    (0..W1_TASKS)
        .map(|task| {
            let mut x = task;
            (0..W1_SLEEPS)
                .map(|_| {
                    x = lcg_next(x);
                    w1_duration_ns(x) * 1_000
                })
                .sum::<u64>()
        })
        .max()
        .unwrap()
}

#[test]
fn w1_ends_at_the_longest_tasks_sum_with_a_stable_schedule() {
    let first = speed::w1_sleep_storm().unwrap();
    let second = speed::w1_sleep_storm().unwrap();
    assert_eq!(first.final_time_ps, w1_expected_final_ps());
    assert_eq!(first.events, W1_TASKS * W1_SLEEPS);
    assert_eq!(first.order_hash, second.order_hash);
    assert_eq!(
        first.order_hash, 5_654_794_238_789_708_605,
        "schedule changed"
    );
}

#[test]
fn the_bare_heap_loop_wakes_w1s_tasks_in_w1s_order() {
    // W1 shrunk (64 tasks × 50 sleeps), each wake-up recorded as the task
    // sees it, against the bare loop's on the same draws.
    let (tasks, sleeps) = (64_u64, 50_u64);
    let seen = Rc::new(RefCell::new(Vec::new()));
    let mut simulation = Simulation::new();
    for task in 0..tasks {
        let seen = seen.clone();
        simulation.spawn("w1", async move {
            let mut x = task;
            for _ in 0..sleeps {
                x = lcg_next(x);
                sleep(SimDuration::from_ns(w1_duration_ns(x))).await;
                seen.borrow_mut().push((task, now().as_ps()));
            }
        });
    }
    let stats = simulation.run().unwrap();
    let mut bare = Vec::new();
    let (events, final_ps) = speed::w1_heap_loop(tasks, sleeps, |task, ps| bare.push((task, ps)));
    assert_eq!(*seen.borrow(), bare);
    assert_eq!((events, final_ps), (stats.events, stats.now.as_ps()));
    assert_eq!(events, tasks * sleeps);
    // Full size: the same end as W1's closed form.
    let full = speed::w1_heap();
    assert_eq!(full.final_time_ps, w1_expected_final_ps());
    assert_eq!(full.events, W1_TASKS * W1_SLEEPS);
}

#[test]
fn w2_ring_ends_at_rounds_times_latency() {
    let first = speed::w2_ring_pingpong().unwrap();
    let second = speed::w2_ring_pingpong().unwrap();
    assert_eq!(first.final_time_ps, 228_000_000);
    assert_eq!(first.order_hash, second.order_hash);
    assert_eq!(
        first.order_hash, 235_015_727_520_326_341,
        "schedule changed"
    );
}

/// Folds (task, time) of every wake-up, as the tasks see them, into FNV-1a.
fn user_level_wakeup_hash() -> u64 {
    let mut simulation = Simulation::new();
    let hash = Rc::new(Cell::new(0xcbf2_9ce4_8422_2325_u64));
    let server = Resource::new("server", 2);
    let fold = |hash: &Cell<u64>, task: u64| {
        for word in [task, now().as_ps()] {
            hash.set((hash.get() ^ word).wrapping_mul(0x100_0000_01b3));
        }
    };
    for task in 0..16u64 {
        let (hash, server) = (hash.clone(), server.clone());
        simulation.spawn(&format!("t{task}"), async move {
            for round in 0..5 {
                sleep(SimDuration::from_ps(task % 3 + round)).await;
                fold(&hash, task);
                let _unit = server.acquire().await;
                fold(&hash, task);
                sleep(SimDuration::from_ps(7)).await;
            }
        });
    }
    simulation.run().unwrap();
    hash.get()
}

#[test]
fn wakeup_order_is_identical_across_runs_and_pinned() {
    let first = user_level_wakeup_hash();
    assert_eq!(first, user_level_wakeup_hash());
    assert_eq!(
        first, 0x505d_3c1b_33a3_26c0,
        "wake-up order changed: {first:#x}"
    );
}

#[test]
fn deadlocked_pair_is_reported_with_what_each_waits_on() {
    let mut simulation = Simulation::new();
    let (to_b, mut from_a) = channel::<u32>("sip0.cube0.pe0:E", 4, SimDuration::from_ns(1));
    let (to_a, mut from_b) = channel::<u32>("sip0.cube0.pe1:W", 4, SimDuration::from_ns(1));
    simulation.spawn("pe0", async move {
        let got = from_b.recv().await;
        to_b.send(got.unwrap_or(0)).await.ok();
    });
    simulation.spawn("pe1", async move {
        let got = from_a.recv().await;
        to_a.send(got.unwrap_or(0)).await.ok();
    });
    let error = simulation.run().unwrap_err();
    // Found at once: each task polled once (its first poll blocks), no wake
    // delivered, no spinning until a time-out.
    let stats = simulation.stats();
    assert_eq!((stats.polls, stats.events), (2, 0), "{stats:?}");
    let text = error.to_string();
    assert!(text.starts_with("deadlock at t=0 ps"), "{text}");
    assert!(
        text.contains("task \"pe0\" waits on recv on channel \"sip0.cube0.pe1:W\""),
        "{text}"
    );
    assert!(
        text.contains("task \"pe1\" waits on recv on channel \"sip0.cube0.pe0:E\""),
        "{text}"
    );
    let SimError::Deadlock { blocked, .. } = error else {
        unreachable!()
    };
    assert_eq!(blocked.len(), 2);
}

#[test]
fn deadlock_names_resources_events_and_barriers() {
    let mut simulation = Simulation::new();
    let dma = Resource::new("sip0.cube1.pe3.dma", 1);
    let held = dma.try_acquire().unwrap();
    let never = Event::new("kernel_done");
    let barrier = Barrier::new("all_ranks", 3);
    simulation.spawn("dma_user", async move { drop(dma.acquire().await) });
    simulation.spawn("waiter", async move { never.wait().await });
    let b = barrier.clone();
    simulation.spawn("rank0", async move { b.wait().await });
    simulation.spawn("rank1", async move { barrier.wait().await });
    let text = simulation.run().unwrap_err().to_string();
    for expected in [
        "task \"dma_user\" waits on acquire on resource \"sip0.cube1.pe3.dma\" (1/1 in use, 1 queued)",
        "task \"waiter\" waits on wait on event \"kernel_done\" (not set)",
        "task \"rank0\" waits on wait on barrier \"all_ranks\" (2 of 3 arrived)",
        "task \"rank1\" waits on wait on barrier \"all_ranks\" (2 of 3 arrived)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    drop(held);
}

struct DropCounter(Rc<Cell<u32>>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn a_panicking_task_becomes_an_error_and_the_rest_are_dropped() {
    let mut simulation = Simulation::new();
    let dropped = Rc::new(Cell::new(0));
    let guard = DropCounter(dropped.clone());
    let bystander = simulation.spawn("bystander", async move {
        let _guard = guard;
        sleep(SimDuration::from_us(1)).await;
    });
    simulation.spawn("faulty", async {
        sleep(SimDuration::from_ns(5)).await;
        panic!("bad descriptor");
    });
    let error = simulation.run().unwrap_err();
    assert_eq!(
        error,
        SimError::TaskPanicked {
            task: "faulty".into(),
            time: SimTime::from_ns(5),
            message: "bad descriptor".into(),
        }
    );
    assert_eq!(dropped.get(), 1, "the bystander's state was not dropped");
    assert_eq!(
        bystander.output(),
        Err(JoinError::Cancelled("bystander".into()))
    );
    assert_eq!(simulation.run().unwrap().now, SimTime::from_ns(5));
}

#[test]
fn task_local_rank_and_device_follow_each_worker() {
    let mut simulation = Simulation::new();
    let seen = Rc::new(RefCell::new(Vec::new()));
    for rank in 0..4usize {
        let seen = seen.clone();
        simulation.spawn(
            &format!("rank{rank}"),
            scope_rank(rank, async move {
                set_device(rank + 10);
                for step in 0..3u64 {
                    sleep(SimDuration::from_ns((4 - rank as u64) * (step + 1))).await;
                    seen.borrow_mut().push((rank, get_rank(), current_device()));
                }
            }),
        );
    }
    simulation.run().unwrap();
    let seen = seen.borrow();
    assert_eq!(seen.len(), 12);
    for &(rank, got, device) in seen.iter() {
        assert_eq!((got, device), (rank, Some(rank + 10)));
    }
    assert_eq!(get_rank(), 0, "outside any worker the rank is 0");
}

#[test]
fn trace_spans_carry_simulated_times() {
    use kernbench::trace::ChromeTraceLayer;
    use tracing_subscriber::layer::SubscriberExt;

    let (layer, handle) = ChromeTraceLayer::with_sim_clock();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let mut simulation = Simulation::new();
        for pe in 0..2u64 {
            simulation.spawn(&format!("pe{pe}"), async move {
                sleep(SimDuration::from_ps(1_500 * (pe + 1))).await;
                let span = tracing::info_span!("dma", component = format!("sip0.cube0.pe{pe}"));
                sleep(SimDuration::from_ps(64)).await;
                drop(span);
            });
        }
        simulation.run().unwrap();
    });
    let trace = handle.to_value();
    let spans: Vec<_> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    assert_eq!(spans.len(), 2);
    for (pe, span) in spans.iter().enumerate() {
        let start_ps = 1_500 * (pe as u64 + 1);
        assert_eq!(span["args"]["start_ps"], start_ps);
        assert_eq!(span["args"]["dur_ps"], 64);
        assert_eq!(span["dur"].as_f64().unwrap(), 0.000064);
        assert_eq!(span["ts"].as_f64().unwrap(), start_ps as f64 / 1e6);
    }
}
