//! The simulation core: a deterministic single-threaded executor with a
//! virtual clock, and the primitives hardware models are built from.
//!
//! Tasks are ordinary futures. Inside a task, the free functions of this
//! module ([`now`], [`sleep`], [`spawn`], ...) act on the simulation that is
//! running it. Ties in time run in FIFO order of scheduling; see
//! [`Simulation`] for the contract and `docs/adr/0001-executor.md` for why
//! this is our own executor and not tokio's scheduler.
//!
//! This module knows nothing of hardware, topology or torch.

pub mod cancel;
pub mod causal;
mod channel;
mod error;
mod event;
#[allow(unsafe_code)] // the current core's pointer, pinned futures
mod executor;
pub mod observe;
mod resource;
mod run_queue;
pub mod speed;
mod task;
mod time;
mod timer;
mod wait;
#[allow(unsafe_code)] // the raw waker's vtable
mod waker;

use std::future::Future;
use std::rc::Rc;

pub use channel::{Receiver, Recv, Send, SendError, Sender, channel};
pub use error::{BlockedTask, Describe, JoinError, SimError};
pub use event::{Barrier, BarrierWait, BarrierWaitResult, Event, EventWait};
pub use executor::{RunStatus, SimStats, Simulation};
pub use resource::{Acquire, Resource, ResourceGuard};
pub use task::JoinHandle;
pub use time::{PS_PER_MS, PS_PER_NS, PS_PER_S, PS_PER_US, SimDuration, SimTime, TimeError};
pub use timer::{Sleep, YieldNow, sleep, sleep_until, sleep_until_labelled, yield_now};
pub(crate) use wait::TaskWakers;

/// Asks the core to bring the cache line at `at` into its first-level
/// cache, without waiting for it: a hint (nothing is read, no address
/// faults), so that the misses of reads known ahead overlap instead of
/// queueing one behind the other (ADR-0068). Nothing off x86-64.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch<T>(at: *const T) {
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 has; it reads
    // nothing, so any address will do.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

use executor::{current_core, with_current_core};

/// The current virtual time. Panics outside a running simulation.
pub fn now() -> SimTime {
    current_core("now").now()
}

/// The current virtual time, or `None` outside a running simulation.
pub fn try_now() -> Option<SimTime> {
    with_current_core(|core| core.map(|c| c.now()))
}

/// The name of the task being polled, or `None` outside a task.
pub fn current_task_name() -> Option<Rc<str>> {
    with_current_core(|core| core.and_then(|c| c.current_task_name()))
}

/// Spawns a task on the running simulation (from inside another task).
pub fn spawn<F>(name: &str, future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    current_core("spawn").spawn(name, false, future)
}

/// Spawns a daemon task on the running simulation; see
/// [`Simulation::spawn_daemon`].
pub fn spawn_daemon<F>(name: &str, future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    current_core("spawn_daemon").spawn(name, true, future)
}

/// Records, for deadlock reports, that the task being polled is about to
/// return `Pending` waiting to `operation` on `what`. Primitives outside this
/// module (IPCQ rings, ...) call it so a deadlock names them.
pub fn waiting_on(operation: &'static str, what: Rc<dyn Describe>) {
    with_current_core(|core| {
        if let Some(core) = core {
            core.set_waiting(error::Waiting::On(operation, what));
        }
    });
}

/// The index in the causal log of the poll running now, when the running
/// simulation records causes ([`Simulation::record_causes`]); `None`
/// otherwise (and outside a task).
pub fn current_poll() -> Option<u32> {
    with_current_core(|core| core.and_then(|c| c.current_poll()))
}

/// Stops the running simulation's causal log from growing (what it holds
/// stays readable): nothing after the end of an explained interval can be
/// on its critical path (ADR-0039). Outside a simulation, nothing.
pub fn stop_recording_causes() {
    with_current_core(|core| {
        if let Some(core) = core {
            core.stop_recording_causes();
        }
    });
}

/// Whether the running simulation (if any) records causes.
pub fn recording_causes() -> bool {
    with_current_core(|core| core.is_some_and(|c| c.recording_causes()))
}
