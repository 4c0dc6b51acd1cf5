//! Which rank the running worker task is, and which device it bound.
//!
//! One host worker task runs per rank (rank = SIP). The rank and the device
//! chosen with `set_device` live in task-local storage (`tokio::task_local!`,
//! which works on the simulator's own executor because it is just a future
//! wrapper), so `get_rank()` inside a worker returns that worker's rank and
//! `0` outside any worker: the single-driver fallback of seed ADR-0024 D2.
//! `torch.ahbm.set_device` and `torch.accelerator.set_device_index` share this
//! one registry.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static WORKER: WorkerContext;
}

thread_local! {
    /// The device bound by code running outside any worker (single driver).
    static DRIVER_DEVICE: Cell<Option<usize>> = const { Cell::new(None) };
}

struct WorkerContext {
    rank: usize,
    device: Cell<Option<usize>>,
}

/// Runs `future` as the worker of `rank`: inside it, [`get_rank`] returns
/// `rank` and [`set_device`] binds a device for this worker only.
pub fn scope_rank<F: Future>(rank: usize, future: F) -> impl Future<Output = F::Output> {
    let context = WorkerContext {
        rank,
        device: Cell::new(None),
    };
    WORKER.scope(context, future)
}

/// The rank of the calling worker; `0` outside any worker.
pub fn get_rank() -> usize {
    WORKER.try_with(|w| w.rank).unwrap_or_else(|_| {
        tracing::debug!(target: "kernbench::runtime::worker", "get_rank() called outside a rank worker: returning 0 (single driver)");
        0
    })
}

/// Whether the caller runs inside a rank worker.
pub fn in_worker() -> bool {
    WORKER.try_with(|_| ()).is_ok()
}

/// Binds `device` to the calling worker (or to the single driver outside
/// any worker).
pub fn set_device(device: usize) {
    if WORKER.try_with(|w| w.device.set(Some(device))).is_err() {
        DRIVER_DEVICE.with(|d| d.set(Some(device)));
    }
}

/// The device bound by the calling worker (or the driver), if any.
pub fn current_device() -> Option<usize> {
    WORKER
        .try_with(|w| w.device.get())
        .unwrap_or_else(|_| DRIVER_DEVICE.with(Cell::get))
}
