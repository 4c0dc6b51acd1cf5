//! A user's ordinary `#[tokio::test]` drives a simulation with
//! `run_async` while other tokio tasks keep running, and sim tasks may await
//! tokio primitives completed from outside the simulation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kernbench::sim::{SimDuration, SimTime, Simulation, channel, now, sleep};

/// A ring of `tasks` passing tokens `rounds` times, 114 ns per hop.
fn ring(simulation: &Simulation, tasks: usize, rounds: u32) {
    let (senders, mut receivers): (Vec<_>, Vec<_>) = (0..tasks)
        .map(|i| channel::<u32>(&format!("ring{i}"), 4, SimDuration::from_ns(114)))
        .unzip();
    receivers.rotate_right(1);
    for (i, (east, mut west)) in senders.into_iter().zip(receivers).enumerate() {
        simulation.spawn(&format!("ring{i}"), async move {
            for round in 0..rounds {
                east.send(round).await.unwrap();
                assert_eq!(west.recv().await, Some(round));
            }
        });
    }
}

#[tokio::test]
async fn run_async_shares_the_thread_with_other_tokio_tasks() {
    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = {
        let ticks = ticks.clone();
        tokio::spawn(async move {
            loop {
                ticks.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        })
    };
    let mut simulation = Simulation::new();
    ring(&simulation, 64, 2000);
    let stats = simulation.run_async().await.unwrap();
    ticker.abort();
    assert_eq!(stats.now, SimTime::from_ps(228_000_000));
    assert!(
        ticks.load(Ordering::Relaxed) > 10,
        "the host task never ran"
    );

    let mut again = Simulation::new();
    ring(&again, 64, 2000);
    assert_eq!(again.run().unwrap().order_hash, stats.order_hash);
}

#[tokio::test]
async fn sim_task_awaits_a_oneshot_completed_by_a_tokio_task() {
    let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
    let mut simulation = Simulation::new();
    let waiter = simulation.spawn("waiter", async move {
        sleep(SimDuration::from_ns(10)).await;
        let value = rx.await.unwrap();
        sleep(SimDuration::from_ns(value)).await;
        now()
    });
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send(5).unwrap();
    });
    simulation.run_async().await.unwrap();
    assert_eq!(waiter.output().unwrap(), SimTime::from_ns(15));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_under_the_multi_thread_runtime_and_timeouts_stay_real() {
    let mut simulation = Simulation::new();
    ring(&simulation, 8, 10_000);
    let stats = tokio::time::timeout(Duration::from_secs(60), simulation.run_async())
        .await
        .expect("real-time timeout is not disturbed by virtual time")
        .unwrap();
    assert_eq!(stats.now, SimTime::from_ns(114 * 10_000));
}

#[tokio::test]
async fn run_async_reports_a_deadlock_instead_of_hanging() {
    let mut simulation = Simulation::new();
    let (keep_tx, mut keep_rx) = channel::<u8>("never", 1, SimDuration::ZERO);
    simulation.spawn("stuck", async move {
        let _ = keep_tx;
        keep_rx.recv().await
    });
    let error = simulation.run_async().await.unwrap_err();
    assert!(
        error.to_string().contains("recv on channel \"never\""),
        "{error}"
    );
}
