//! Stopping a simulation from outside it: a flag a host (the web server's
//! watchdog, a test) raises, which the executor reads between polls
//! (ADR-0030).
//!
//! The flag is handed to every simulation created on this thread inside
//! [`with_cancel`], so a caller can bound a whole workload run (however
//! many simulations it makes) without the workload knowing. The executor
//! reads the flag every 1,024 polls — one relaxed atomic load —
//! and stops the run with [`SimError::Cancelled`](super::SimError). The
//! model never reads a clock: when to raise the flag is the host's
//! business, and a run that is not cancelled is unchanged event for event.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The words every cancellation error carries, so that a caller holding
/// only its text can tell it from other failures.
pub const MARK: &str = "stopped from outside the simulation";

/// Polls between two reads of the flag.
pub(crate) const CHECK_EVERY: u64 = 1024;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `f` with `flag` given to every [`Simulation`](super::Simulation)
/// it creates on this thread: raising it stops them.
pub fn with_cancel<R>(flag: Arc<AtomicBool>, f: impl FnOnce() -> R) -> R {
    let previous = FLAG.with(|cell| cell.replace(Some(flag)));
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            FLAG.with(|cell| *cell.borrow_mut() = previous);
        }
    }
    let _restore = Restore(previous);
    f()
}

/// The flag of this thread's [`with_cancel`], if any.
pub(crate) fn current() -> Option<Arc<AtomicBool>> {
    FLAG.with(|cell| cell.borrow().clone())
}

/// Whether `flag` is raised.
pub(crate) fn raised(flag: &Option<Arc<AtomicBool>>) -> bool {
    flag.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDuration, SimError, Simulation, sleep};

    /// A simulation that would never end: a task sleeping 1 ns forever.
    fn endless() -> Simulation {
        let simulation = Simulation::new();
        simulation.spawn("forever", async {
            loop {
                sleep(SimDuration::from_ps(1000)).await;
            }
        });
        simulation
    }

    #[test]
    fn a_raised_flag_stops_the_run_within_a_check_interval() {
        let flag = Arc::new(AtomicBool::new(true));
        let mut simulation = with_cancel(flag, endless);
        let error = simulation.run().unwrap_err();
        assert!(matches!(error, SimError::Cancelled { .. }), "{error}");
        assert!(
            simulation.stats().polls <= CHECK_EVERY,
            "{:?}",
            simulation.stats()
        );
    }

    #[test]
    fn a_lowered_flag_changes_nothing_and_the_scope_ends_with_the_call() {
        let flag = Arc::new(AtomicBool::new(false));
        let run = |simulation: &mut Simulation| {
            simulation.spawn("short", async { sleep(SimDuration::from_ps(5000)).await });
            simulation.run().unwrap()
        };
        let with = with_cancel(flag, || run(&mut Simulation::new()));
        assert_eq!(with, run(&mut Simulation::new()));
        assert!(current().is_none());
    }
}
