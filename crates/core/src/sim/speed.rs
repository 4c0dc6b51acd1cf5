//! The executor's speed workloads (W1 sleep storm, W2 ring ping-pong), shared
//! by `examples/sim_speed.rs`, `benches/sim_core.rs` and the tests that pin
//! their exact final times. Wall-clock time is read here only to measure the
//! harness, never inside the model.

use std::time::Instant;

use super::{SimDuration, SimError, SimStats, Simulation, channel, sleep};

/// W1: tasks × sleeps per task.
pub const W1_TASKS: u64 = 1024;
/// W1: sleeps per task.
pub const W1_SLEEPS: u64 = 2000;

/// One measured run of a speed workload.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpeedResult {
    /// `W1` or `W2`.
    pub workload: &'static str,
    /// Wake-ups delivered to tasks.
    pub events: u64,
    /// Wall-clock seconds of the run (setup included).
    pub wall_s: f64,
    /// `events / wall_s`.
    pub events_per_s: f64,
    /// Virtual time at the end of the run, in picoseconds.
    pub final_time_ps: u64,
    /// The executor's schedule fingerprint.
    pub order_hash: u64,
}

/// The LCG step of W1 (u64 wrapping).
pub fn lcg_next(x: u64) -> u64 {
    x.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
}

/// W1's sleep length for LCG state `x`: 1..=1000 ns.
pub fn w1_duration_ns(x: u64) -> u64 {
    1 + (x >> 33) % 1000
}

/// Runs W1 (1024 tasks × 2000 sleeps of LCG-drawn 1..=1000 ns).
pub fn w1_sleep_storm() -> Result<SpeedResult, SimError> {
    measure("W1", |simulation| {
        for task in 0..W1_TASKS {
            simulation.spawn("w1", async move {
                let mut x = task;
                for _ in 0..W1_SLEEPS {
                    x = lcg_next(x);
                    sleep(SimDuration::from_ns(w1_duration_ns(x))).await;
                }
            });
        }
    })
}

/// W1's events without the executor: a bare [`BinaryHeap`] of
/// (time, sequence, task) and nothing else, the limit W1 is measured
/// against (issue 24 item 6). Every task's first sleep is drawn in task
/// order at time zero (as W1's first polls run, in spawn order), then the
/// earliest (time, sequence) is taken, its task draws its next sleep and
/// pushes it with the next sequence number: the same wake-ups in the same
/// order as W1's, `on_wake(task, time_ps)` told of each.
///
/// [`BinaryHeap`]: std::collections::BinaryHeap
pub fn w1_heap_loop(tasks: u64, sleeps: u64, mut on_wake: impl FnMut(u64, u64)) -> (u64, u64) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut heap = BinaryHeap::with_capacity(tasks as usize);
    let mut state: Vec<(u64, u64)> = (0..tasks).map(|task| (task, 0)).collect();
    let mut seq = 0_u64;
    let mut draw = |task: u64, now: u64, heap: &mut BinaryHeap<Reverse<(u64, u64, u64)>>| {
        let (x, done) = &mut state[task as usize];
        if *done == sleeps {
            return;
        }
        *x = lcg_next(*x);
        *done += 1;
        heap.push(Reverse((now + w1_duration_ns(*x) * 1_000, seq, task)));
        seq += 1;
    };
    for task in 0..tasks {
        draw(task, 0, &mut heap);
    }
    let (mut events, mut now) = (0, 0);
    while let Some(Reverse((time, _, task))) = heap.pop() {
        (events, now) = (events + 1, time);
        on_wake(task, time);
        draw(task, time, &mut heap);
    }
    (events, now)
}

/// Runs [`w1_heap_loop`] on W1's tasks and sleeps, timed like W1.
pub fn w1_heap() -> SpeedResult {
    let started = Instant::now();
    let (events, final_ps) = w1_heap_loop(W1_TASKS, W1_SLEEPS, |_, _| {});
    let wall_s = started.elapsed().as_secs_f64();
    SpeedResult {
        workload: "W1-heap",
        events,
        wall_s,
        events_per_s: events as f64 / wall_s,
        final_time_ps: final_ps,
        order_hash: 0,
    }
}

fn measure(
    workload: &'static str,
    setup: impl FnOnce(&Simulation),
) -> Result<SpeedResult, SimError> {
    let started = Instant::now();
    let mut simulation = Simulation::new();
    setup(&simulation);
    let stats: SimStats = simulation.run()?;
    let wall_s = started.elapsed().as_secs_f64();
    Ok(SpeedResult {
        workload,
        events: stats.events,
        wall_s,
        events_per_s: stats.events as f64 / wall_s,
        final_time_ps: stats.now.as_ps(),
        order_hash: stats.order_hash,
    })
}

/// W2: tasks in the ring.
pub const W2_TASKS: usize = 64;
/// W2: rounds each task sends and receives.
pub const W2_ROUNDS: u64 = 2000;
/// W2: payload bytes per message.
pub const W2_PAYLOAD: usize = 4096;
/// W2: channel capacity (messages in flight or waiting).
pub const W2_CAPACITY: usize = 4;
/// W2: delivery latency, 50 ns + 64 × 1 ns.
pub const W2_LATENCY_NS: u64 = 114;

/// Runs W2: a ring of 64 tasks, each sending a 4 KiB payload east and then
/// receiving from the west, 2000 rounds. Payload buffers travel round the
/// ring and are reused; each carries a (sender, round) tag the receiver
/// checks, so a lost or reordered message fails the run.
pub fn w2_ring_pingpong() -> Result<SpeedResult, SimError> {
    measure("W2", |simulation| {
        let latency = SimDuration::from_ns(W2_LATENCY_NS);
        let (senders, mut receivers): (Vec<_>, Vec<_>) = (0..W2_TASKS)
            .map(|i| channel::<Vec<u8>>(&format!("ring{i}->E"), W2_CAPACITY, latency))
            .unzip();
        receivers.rotate_right(1); // task i receives what task i-1 sent east
        for (i, (east, mut west)) in senders.into_iter().zip(receivers).enumerate() {
            simulation.spawn(&format!("ring{i}"), async move {
                let mut payload = vec![0u8; W2_PAYLOAD];
                let from = (i + W2_TASKS - 1) % W2_TASKS;
                for round in 0..W2_ROUNDS {
                    stamp(&mut payload, i, round);
                    east.send(payload).await.expect("ring receiver alive");
                    payload = west.recv().await.expect("ring sender alive");
                    assert_eq!(
                        read_stamp(&payload),
                        (from as u64, round),
                        "W2 message out of order"
                    );
                }
            });
        }
    })
}

fn stamp(payload: &mut [u8], sender: usize, round: u64) {
    payload[..8].copy_from_slice(&(sender as u64).to_le_bytes());
    payload[8..16].copy_from_slice(&round.to_le_bytes());
}

fn read_stamp(payload: &[u8]) -> (u64, u64) {
    let word = |range: std::ops::Range<usize>| {
        u64::from_le_bytes(payload[range].try_into().expect("8 bytes"))
    };
    (word(0..8), word(8..16))
}
