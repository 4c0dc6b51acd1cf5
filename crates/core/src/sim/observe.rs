//! A progress observer: a callback that any simulation running on this
//! thread calls every [`EVERY_POLLS`] task polls with its counters (virtual
//! time reached, events, polls), so a front end can show how a long run is
//! going. None is installed unless someone asks; sweeps' worker threads
//! have none.
//!
//! The executor reads no wall clock and the callback cannot change the
//! schedule (it gets a copy of the counters): a run with an observer is
//! the same run. The observer may read a wall clock; that is the
//! reporter's business, not the model's.

use std::cell::RefCell;

use super::SimStats;

/// Task polls between two calls of the observer: rare enough to cost
/// nothing measurable (one mask test per poll), often enough for a
/// display (a few times a second at millions of polls per second).
pub const EVERY_POLLS: u64 = 1 << 16;
const _: () = assert!(
    EVERY_POLLS % super::cancel::CHECK_EVERY == 0,
    "the executor looks for the observer only when it looks for the cancel flag"
);

type Observer = Box<dyn FnMut(&SimStats)>;

thread_local! {
    static OBSERVER: RefCell<Option<Observer>> = const { RefCell::new(None) };
}

/// Removes the observer it was returned for when dropped.
#[must_use = "the observer is removed when the guard is dropped"]
pub struct ObserverGuard(());

impl Drop for ObserverGuard {
    fn drop(&mut self) {
        OBSERVER.with(|slot| slot.borrow_mut().take());
    }
}

/// Installs `observer` for the simulations run on this thread until the
/// guard is dropped (replacing any other).
pub fn set_observer(observer: impl FnMut(&SimStats) + 'static) -> ObserverGuard {
    OBSERVER.with(|slot| *slot.borrow_mut() = Some(Box::new(observer)));
    ObserverGuard(())
}

/// Calls the observer, if any (the executor, every [`EVERY_POLLS`] polls).
/// An observer that observes re-entrantly is skipped, not a panic.
pub(crate) fn notify(stats: &SimStats) {
    OBSERVER.with(|slot| {
        if let Ok(mut observer) = slot.try_borrow_mut()
            && let Some(observer) = observer.as_mut()
        {
            observer(stats);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDuration, Simulation, sleep};
    use std::rc::Rc;

    /// A simulation of `tasks` tasks each sleeping `sleeps` times.
    fn run(tasks: u64, sleeps: u64) -> SimStats {
        let mut simulation = Simulation::new();
        for t in 0..tasks {
            simulation.spawn(&format!("t{t}"), async move {
                for _ in 0..sleeps {
                    sleep(SimDuration::from_ps(1 + t)).await;
                }
            });
        }
        simulation.run().unwrap()
    }

    #[test]
    fn the_observer_sees_every_stride_and_does_not_change_the_run() {
        let plain = run(4, 40_000);
        let seen = Rc::new(RefCell::new(Vec::new()));
        let guard = set_observer({
            let seen = seen.clone();
            move |stats: &SimStats| seen.borrow_mut().push((stats.polls, stats.now))
        });
        let observed = run(4, 40_000);
        drop(guard);
        assert_eq!(observed, plain, "same schedule, same counters");
        let seen = seen.borrow();
        // One call per EVERY_POLLS polls: 4 × 40,001 polls → 2 calls.
        assert_eq!(seen.len() as u64, plain.polls / EVERY_POLLS);
        assert!(seen.iter().all(|(polls, _)| polls % EVERY_POLLS == 0));
        assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1), "time only grows");
        // Removed with its guard.
        let after = run(4, 40_000);
        assert_eq!(after, plain);
        assert_eq!(seen.len() as u64, plain.polls / EVERY_POLLS);
    }
}
