//! Watching runs by the wall clock: progress lines while a sweep or a long
//! run goes on, and the wall-time limit after which it is cancelled.
//!
//! [`sweep()`] runs a sweep's points on worker threads while the calling
//! thread reports progress after every point and every `every` of wall
//! time, and, given a limit, raises the sweep's cancellation flag when it
//! is reached ([`crate::sim::cancel`], ADR-0030). [`heartbeat`] runs one
//! closure and calls back every `every` until it returns. The CLI uses
//! them for lines on stderr when it is not a terminal (a log, a Slurm
//! job), the web server for its run pages and limits.
//!
//! The wall clock is read here only, never in the model: a run that is
//! not cancelled is the same run, event for event. The terminal progress
//! bar of one run is `progress` (issue 25); this module draws nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::results::Row;
use super::sweep::{self, Plan, Point};

/// How often a long sweep or run reports when it is not on a terminal.
pub const LINE_EVERY: Duration = Duration::from_secs(5);

/// The rows of a watched sweep and whether its limit stopped it.
#[derive(Debug)]
pub struct Watched {
    /// A row per point, in point order.
    pub rows: Vec<Row>,
    /// Whether the limit was reached (some rows then say so).
    pub stopped: bool,
}

/// Runs `points` of `plan` on `jobs` threads; `progress` hears the points
/// done and the wall time so far after each point and every `every`; past
/// `limit` (if any) the sweep is cancelled: running simulations stop and
/// points not started become rows saying so ([`sweep::NOT_RUN`]).
pub fn sweep(
    plan: &Plan,
    points: &[Point],
    jobs: usize,
    limit: Option<Duration>,
    every: Duration,
    progress: &mut dyn FnMut(usize, Duration),
) -> Watched {
    let cancel = Arc::new(AtomicBool::new(false));
    let done = AtomicUsize::new(0);
    let (tick, ticks) = mpsc::channel::<()>();
    let start = Instant::now();
    let rows = std::thread::scope(|scope| {
        let runner = scope.spawn(|| {
            let tick = tick;
            sweep::run_cancellable(plan, points, jobs, &cancel, &|| {
                done.fetch_add(1, Ordering::Relaxed);
                let _ = tick.send(());
            })
        });
        loop {
            let left = limit.map_or(every, |l| l.saturating_sub(start.elapsed()));
            let wait = if left.is_zero() {
                every
            } else {
                left.min(every)
            };
            match ticks.recv_timeout(wait) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => {
                    progress(done.load(Ordering::Relaxed), start.elapsed());
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if limit.is_some_and(|l| start.elapsed() >= l) {
                cancel.store(true, Ordering::Relaxed);
            }
        }
        runner.join().expect("the sweep's workers do not panic")
    });
    Watched {
        rows,
        stopped: cancel.load(Ordering::Relaxed),
    }
}

/// Runs `work` in this thread while `beat` is called with the wall time
/// so far every `every` until it returns.
pub fn heartbeat<R>(
    every: Duration,
    beat: &(dyn Fn(Duration) + Sync),
    work: impl FnOnce() -> R,
) -> R {
    let (finished, wait) = mpsc::channel::<()>();
    let start = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            while wait.recv_timeout(every) == Err(mpsc::RecvTimeoutError::Timeout) {
                beat(start.elapsed());
            }
        });
        let result = work();
        let _ = finished.send(());
        result
    })
}

/// A line for stderr about a sweep in progress.
pub fn sweep_line(done: usize, total: usize, elapsed: Duration) -> String {
    format!(
        "sweep: {done} of {total} point(s) done after {:.0} s",
        elapsed.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_heartbeat_beats_until_the_work_returns_and_gives_its_result() {
        let beats = Mutex::new(0);
        let beat = |_: Duration| *beats.lock().unwrap() += 1;
        let (tx, rx) = mpsc::channel::<()>();
        // The work waits until the heartbeat has beaten twice.
        let got = heartbeat(
            Duration::from_millis(1),
            &|d| {
                beat(d);
                if *beats.lock().unwrap() == 2 {
                    let _ = tx.send(());
                }
            },
            || {
                rx.recv().unwrap();
                7
            },
        );
        assert_eq!(got, 7);
        assert!(*beats.lock().unwrap() >= 2);
    }

    #[test]
    fn the_sweep_line_counts_points() {
        assert_eq!(
            sweep_line(3, 64, Duration::from_secs(10)),
            "sweep: 3 of 64 point(s) done after 10 s"
        );
    }
}
