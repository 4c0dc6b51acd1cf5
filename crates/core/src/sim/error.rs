//! Errors a simulation run can end with, and what blocked tasks wait on.

use std::fmt;
use std::rc::Rc;

use super::time::SimTime;

/// A sim primitive that can say, at any moment, what it is and what state it
/// is in. Deadlock reports call it for every blocked task, so the text shows
/// the state at the moment the run stopped (queue lengths, pointers, ...).
pub trait Describe {
    /// A short description, e.g. `channel "sip0.cube3.pe0:W" (capacity 4, 0 queued)`.
    fn describe(&self) -> String;
}

/// What a suspended task is waiting for, as recorded by the primitive that
/// returned `Pending` to it.
#[derive(Clone, Default)]
pub(crate) enum Waiting {
    /// Suspended without a sim primitive saying why: a foreign future such as
    /// a `tokio::sync` channel, which something outside the simulation may
    /// complete.
    #[default]
    Unknown,
    /// A virtual-time timer; never part of a deadlock (a run with a timer
    /// pending is not stalled), so its time is not kept: the executor then
    /// writes a task's record only when it changes (ADR-0052).
    Timer,
    /// An operation (`"recv"`, `"acquire"`, ...) on a described primitive.
    On(&'static str, Rc<dyn Describe>),
}

impl Waiting {
    fn render(&self) -> String {
        match self {
            Waiting::Unknown => {
                "something outside the simulation (not a kernbench primitive)".to_owned()
            }
            Waiting::Timer => "a timer".to_owned(),
            Waiting::On(op, what) => format!("{op} on {}", what.describe()),
        }
    }
}

/// One task that could not make progress when a run stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedTask {
    /// The name the task was spawned with.
    pub name: String,
    /// What it waits on, as its primitive describes itself.
    pub waiting_on: String,
    /// Daemons (servers that wait forever by design) are listed but do not
    /// by themselves make a deadlock.
    pub daemon: bool,
}

impl BlockedTask {
    pub(crate) fn new(name: &str, waiting: &Waiting, daemon: bool) -> Self {
        BlockedTask {
            name: name.to_owned(),
            waiting_on: waiting.render(),
            daemon,
        }
    }
}

impl fmt::Display for BlockedTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let daemon = if self.daemon { " (daemon)" } else { "" };
        write!(
            f,
            "task \"{}\"{daemon} waits on {}",
            self.name, self.waiting_on
        )
    }
}

/// Why a simulation run stopped without completing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// Nothing can run, no timer is pending, yet tasks are still waiting.
    #[error("deadlock at {time}: no task can run and no timer is pending\n{}", list(.blocked))]
    Deadlock {
        /// Virtual time at which the run stopped.
        time: SimTime,
        /// Every suspended task, in spawn-slot order.
        blocked: Vec<BlockedTask>,
    },
    /// A task panicked; the run was stopped and every other task dropped.
    #[error("task \"{task}\" panicked at {time}: {message}")]
    TaskPanicked {
        /// The name of the panicking task.
        task: String,
        /// Virtual time of the panic.
        time: SimTime,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The host raised the run's cancellation flag ([`super::cancel`]).
    #[error("cancelled at {time} ({})", super::cancel::MARK)]
    Cancelled {
        /// Virtual time at which the run stopped.
        time: SimTime,
    },
}

fn list(blocked: &[BlockedTask]) -> String {
    blocked
        .iter()
        .map(|b| format!("  {b}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why awaiting a [`JoinHandle`](super::JoinHandle) gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// The task was dropped before it finished (its simulation stopped on an
    /// error or was dropped).
    #[error("task \"{0}\" was cancelled before it finished")]
    Cancelled(String),
    /// The value was asked for synchronously before the task finished.
    #[error("task \"{0}\" has not finished yet")]
    NotFinished(String),
}
