//! Task wakers and wake targets.
//!
//! Every task owns one `Arc<TaskWaker>` for its whole life, so polling never
//! allocates. The `Waker` handed to a task's future is built on the fly from
//! that `Arc` without touching its count. A wake on the executor's own thread
//! (the common case) schedules the task directly; a wake from anywhere else
//! (another thread, or a host task between slices of `run_async`) goes
//! through the injection queue and wakes the host.
//!
//! Timers store a [`WakeTarget`] rather than a cloned `Waker`: when the
//! context's waker is a plain task waker only the task id is kept (no
//! refcount traffic); any other waker (from `join!`, `FuturesUnordered`, ...)
//! is cloned and woken normally, so combinators keep working. Timers always
//! fire inside the executor, where a bare task id can be scheduled; the other
//! primitives keep ordinary `Waker`s, because host code may also set an
//! event or drop a guard between runs.

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, RawWaker, RawWakerVTable, Waker};

use futures::task::AtomicWaker;

use super::executor::{Core, with_current_core};

/// A task's slot index and the generation of that slot, so a stale wake for a
/// finished task never reaches the task that reuses the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskId {
    pub index: u32,
    pub generation: u32,
}

/// What wakes from outside the executor's loop pass through.
#[derive(Default)]
pub(crate) struct Injector {
    queue: Mutex<Vec<TaskId>>,
    pending: AtomicBool,
    host: AtomicWaker,
}

impl Injector {
    fn inject(&self, id: TaskId) {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(id);
        self.pending.store(true, Ordering::Release);
        self.host.wake();
    }

    /// Whether wakes are waiting to be drained (cheap; checked every step).
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Takes the injected wakes in arrival order.
    pub fn drain(&self) -> Vec<TaskId> {
        self.pending.store(false, Ordering::Release);
        std::mem::take(
            &mut *self
                .queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Registers the host task to be woken by the next injected wake.
    pub fn register_host(&self, waker: &Waker) {
        self.host.register(waker);
    }
}

/// The data behind a task's `Waker`.
pub(crate) struct TaskWaker {
    id: TaskId,
    injector: Arc<Injector>,
}

impl TaskWaker {
    pub fn new(id: TaskId, injector: Arc<Injector>) -> Arc<Self> {
        Arc::new(TaskWaker { id, injector })
    }

    fn wake(&self) {
        let local = with_current_core(|core| {
            let mine = core.is_some_and(|c| Arc::ptr_eq(c.injector(), &self.injector));
            if mine {
                core.expect("checked above").schedule(self.id);
            }
            mine
        });
        if !local {
            self.injector.inject(self.id);
        }
    }

    /// A `Waker` borrowing this task waker: no refcount change until cloned.
    pub fn borrowed_waker(this: &Arc<Self>) -> ManuallyDrop<Waker> {
        let raw = RawWaker::new(Arc::as_ptr(this).cast(), &VTABLE);
        // SAFETY: the pointer comes from a live Arc that the caller keeps
        // alive for as long as the returned waker is used, and ManuallyDrop
        // stops the borrowed reference from being released.
        ManuallyDrop::new(unsafe { Waker::from_raw(raw) })
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone_raw, wake_raw, wake_by_ref_raw, drop_raw);

unsafe fn clone_raw(data: *const ()) -> RawWaker {
    // SAFETY: `data` came from `Arc::as_ptr` of a live `Arc<TaskWaker>`.
    unsafe { Arc::increment_strong_count(data.cast::<TaskWaker>()) };
    RawWaker::new(data, &VTABLE)
}

unsafe fn wake_raw(data: *const ()) {
    // SAFETY: an owned waker holds one strong count, released here.
    let owned = unsafe { Arc::from_raw(data.cast::<TaskWaker>()) };
    owned.wake();
}

unsafe fn wake_by_ref_raw(data: *const ()) {
    // SAFETY: the waker keeps the Arc alive for the duration of this call.
    unsafe { &*data.cast::<TaskWaker>() }.wake();
}

unsafe fn drop_raw(data: *const ()) {
    // SAFETY: an owned waker holds one strong count, released here.
    unsafe { Arc::decrement_strong_count(data.cast::<TaskWaker>()) };
}

/// The task id behind `waker` if it is a task waker of the simulation `core`.
/// The waker of the task being polled (the common case) is recognised by
/// its pointer, without reading the `TaskWaker` behind it.
fn own_task(waker: &Waker, core: &Core) -> Option<TaskId> {
    if !std::ptr::eq(waker.vtable(), &VTABLE) {
        return None;
    }
    if let Some(id) = core.polling_task(waker.data()) {
        return Some(id);
    }
    // SAFETY: the vtable identifies the data as a live `TaskWaker`.
    let task = unsafe { &*waker.data().cast::<TaskWaker>() };
    Arc::ptr_eq(&task.injector, core.injector()).then_some(task.id)
}

/// Whom to wake later: a task of this simulation, or any other waker.
pub(crate) enum WakeTarget {
    Task(TaskId),
    Waker(Waker),
}

impl WakeTarget {
    /// The cheapest target that wakes whoever polled with `cx`.
    pub fn from_cx(cx: &Context<'_>, core: &Core) -> Self {
        match own_task(cx.waker(), core) {
            Some(id) => WakeTarget::Task(id),
            None => WakeTarget::Waker(cx.waker().clone()),
        }
    }

    /// Whether both wake the same task (or the same waker's target).
    pub fn same(&self, other: &WakeTarget) -> bool {
        match (self, other) {
            (WakeTarget::Task(a), WakeTarget::Task(b)) => a == b,
            (WakeTarget::Waker(a), WakeTarget::Waker(b)) => a.will_wake(b),
            _ => false,
        }
    }

    /// Wakes the target; `core` is the running simulation.
    pub fn wake(self, core: &Core) {
        match self {
            WakeTarget::Task(id) => core.schedule(id),
            WakeTarget::Waker(w) => w.wake(),
        }
    }
}
