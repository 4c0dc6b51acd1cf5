//! [`Work`]: a collective in flight, what `torch.distributed` returns for
//! `async_op=True` (`all_reduce(tensor, async_op=True).wait()`).
//!
//! The collective runs in a simulation task of its own, bound to the
//! caller's rank, so the caller's host code goes on (launches the next
//! kernel) while it runs; [`Work::wait`] returns when it has finished, with
//! the instant it finished (so a caller can time the collective however
//! late it waits) or its error. A `Work` dropped without `wait` still runs
//! to the end, as in torch.
//!
//! Knows the simulation's tasks and the rank scope; nothing of algorithms.

use std::future::Future;

use super::distributed::DistError;
use super::worker;
use crate::sim::{self, JoinHandle, SimTime};

/// A collective in flight; see the module docs.
#[must_use = "a collective's errors surface through wait"]
pub struct Work {
    handle: JoinHandle<Result<SimTime, DistError>>,
}

impl Work {
    /// Runs `collective` in a new task named `name`, as the calling rank.
    pub(super) fn spawn<F>(name: &str, collective: F) -> Work
    where
        F: Future<Output = Result<(), DistError>> + 'static,
    {
        let rank = worker::get_rank();
        let task = format!("rank{rank}.{name}");
        let timed = async move { collective.await.map(|()| sim::now()) };
        let handle = sim::spawn(&task, worker::scope_rank(rank, timed));
        Work { handle }
    }

    /// Whether the collective has finished (`Work.is_completed()`).
    pub fn is_completed(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits until the collective has finished; the instant it finished,
    /// or its error if it failed.
    pub async fn wait(self) -> Result<SimTime, DistError> {
        self.handle.await.map_err(DistError::Work)?
    }
}
