//! The rank = SIP launcher (`mp.spawn` of the seeds, ADR-0024): one sim task
//! per rank, each with its task-local rank and its device bound to the SIP
//! of the same number, awaited together. The first rank to fail (in virtual
//! time; ties in completion order) cancels the others — they are dropped at
//! that same instant — and its error is returned naming the rank.

use std::future::Future;
use std::rc::Rc;

use futures::future::{AbortHandle, abortable};

use super::worker::{scope_rank, set_device};
use crate::sim::{self, SimDuration};

/// A rank's failure, as returned by [`spawn`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rank {rank} failed: {source}")]
pub struct RankError<E: std::error::Error + 'static> {
    /// The rank that failed first.
    pub rank: usize,
    /// Its error.
    #[source]
    pub source: E,
}

/// Runs `worker(rank)` for ranks `0..world_size` as concurrent sim tasks
/// named `rank{r}`; must be awaited inside a running simulation. Inside a
/// worker, `get_rank()` is its rank and `current_device()` its SIP. Returns
/// every rank's value in rank order when all have finished, or the first
/// failure, with every other rank cancelled.
pub async fn spawn<W, Fut, T, E>(world_size: usize, worker: W) -> Result<Vec<T>, RankError<E>>
where
    W: Fn(usize) -> Fut + 'static,
    Fut: Future<Output = Result<T, E>> + 'static,
    T: 'static,
    E: std::error::Error + 'static,
{
    let (tx, mut done) =
        sim::channel::<(usize, Result<T, E>)>("launcher", world_size.max(1), SimDuration::ZERO);
    let worker = Rc::new(worker);
    let cancels: Vec<AbortHandle> = (0..world_size)
        .map(|rank| {
            let (worker, tx) = (worker.clone(), tx.clone());
            let (run, cancel) = abortable(scope_rank(rank, async move {
                set_device(rank);
                worker(rank).await
            }));
            sim::spawn(&format!("rank{rank}"), async move {
                if let Ok(result) = run.await {
                    let _ = tx.send((rank, result)).await;
                }
            });
            cancel
        })
        .collect();
    drop(tx);
    let mut values: Vec<Option<T>> = (0..world_size).map(|_| None).collect();
    while let Some((rank, result)) = done.recv().await {
        match result {
            Ok(value) => values[rank] = Some(value),
            Err(source) => {
                cancels.iter().for_each(AbortHandle::abort);
                return Err(RankError { rank, source });
            }
        }
    }
    Ok(values
        .into_iter()
        .map(|value| value.expect("every rank reports once before the channel closes"))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::runtime::{current_device, get_rank};
    use crate::sim::{Simulation, now, sleep};

    #[derive(Debug, PartialEq, thiserror::Error)]
    #[error("bad shard")]
    struct BadShard;

    #[test]
    fn every_rank_runs_with_its_rank_and_device() {
        let mut simulation = Simulation::new();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let log = seen.clone();
        let driver = simulation.spawn("driver", async move {
            spawn(4, move |rank| {
                let log = log.clone();
                async move {
                    sleep(SimDuration::from_ns(10 - rank as u64)).await;
                    log.borrow_mut().push((rank, get_rank(), current_device()));
                    Ok::<_, BadShard>(rank * 10)
                }
            })
            .await
        });
        simulation.run().unwrap();
        assert_eq!(
            driver.output().unwrap(),
            Ok(vec![0, 10, 20, 30]),
            "values in rank order, not finishing order"
        );
        let seen = seen.borrow();
        assert_eq!(seen.len(), 4);
        assert!(seen.iter().all(|&(r, got, dev)| got == r && dev == Some(r)));
        assert_eq!(seen[0].0, 3, "rank 3 sleeps least and logs first");
    }

    #[test]
    fn first_failure_names_the_rank_and_cancels_the_rest() {
        let mut simulation = Simulation::new();
        let finished = Rc::new(RefCell::new(Vec::new()));
        let log = finished.clone();
        let driver = simulation.spawn("driver", async move {
            let result = spawn(3, move |rank| {
                let log = log.clone();
                async move {
                    sleep(SimDuration::from_ns(if rank == 1 { 5 } else { 50 })).await;
                    if rank == 1 {
                        return Err(BadShard);
                    }
                    log.borrow_mut().push(rank);
                    Ok(())
                }
            })
            .await;
            (result, now())
        });
        let stats = simulation.run().unwrap();
        let (result, at) = driver.output().unwrap();
        let error = result.unwrap_err();
        assert_eq!(error.rank, 1);
        assert_eq!(error.to_string(), "rank 1 failed: bad shard");
        assert_eq!(at.as_ps(), 5_000);
        assert!(finished.borrow().is_empty(), "cancelled ranks kept running");
        assert_eq!(stats.now.as_ps(), 5_000, "nothing ran after the failure");
    }
}
