//! The executor: one thread, a virtual clock, a FIFO run queue and a timer
//! queue.
//!
//! Scheduling rule (the determinism contract): tasks run in the FIFO order in
//! which they were woken; when nothing is runnable the clock jumps to the
//! earliest timer and every timer due at that instant fires, in the order the
//! timers were set. Nothing here reads the wall clock or iterates a hash map.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::causal::{CausalLog, Cause, NO_LABEL};
use super::error::{BlockedTask, SimError, Waiting};
use super::run_queue::RunQueue;
use super::task::{JoinHandle, TaskCell, TaskFuture};
use super::time::SimTime;
use super::timer::{Due, NOT_ARMED, TimerKey, TimerQueue};
use super::waker::{Injector, TaskId, TaskWaker, WakeTarget};

type BoxedTask = Pin<Box<dyn TaskFuture>>;

/// FNV-1a offset basis and prime, for the schedule fingerprint.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// [`HotSlot::flags`]: the slot holds a task that has not finished.
const LIVE: u8 = 1;
/// The task is in the run queue.
const SCHEDULED: u8 = 2;
/// The task is a daemon.
const DAEMON: u8 = 4;
/// What the task's record ([`ColdSlot::waiting`]) is: `Unknown` (0),
/// `Timer` or `On`, so a poll that ends waiting as the last one did on a
/// timer or on nothing named does not touch the record (ADR-0052).
const WAIT_KIND: u8 = 0b11 << 3;
const WAIT_TIMER: u8 = 1 << 3;
const WAIT_ON: u8 = 2 << 3;

/// The part of a task's state an event touches, 32 bytes (ADR-0052): its
/// future (with its waker, [`TaskCell`]), the generation stale wakes are
/// told by, the flags, and the sequence number of its task-keyed timer
/// ([`NOT_ARMED`] if none).
struct HotSlot {
    future: Option<BoxedTask>,
    armed: u64,
    generation: u32,
    flags: u8,
}

// Two slots to a cache line (ADR-0103; docs/tables.md).
const _: () = assert!(std::mem::size_of::<HotSlot>() == 32);

/// The part read only to spawn, report and explain, indexed as the hot
/// slots are.
struct ColdSlot {
    name: Rc<str>,
    waiting: Waiting,
    /// What last made it runnable (kept only while causes are recorded).
    cause: Cause,
}

/// The hot slots and the run queue, borrowed together: making a task
/// runnable touches both (ADR-0063).
#[derive(Default)]
struct Tasks {
    slots: Vec<HotSlot>,
    queue: RunQueue,
}

fn wait_kind(waiting: &Waiting) -> u8 {
    match waiting {
        Waiting::Unknown => 0,
        Waiting::Timer => WAIT_TIMER,
        Waiting::On(..) => WAIT_ON,
    }
}

/// Counters of one simulation, cumulative over all its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimStats {
    /// Virtual time now.
    pub now: SimTime,
    /// Wake-ups delivered to tasks (timer expiries and primitive wakes).
    pub events: u64,
    /// Task polls, including the first poll of every task.
    pub polls: u64,
    /// Tasks spawned.
    pub spawned: u64,
    /// FNV-1a fold of (task slot, virtual time) over every poll, in order: a
    /// fingerprint of the whole schedule.
    pub order_hash: u64,
}

/// How a bounded run ([`Simulation::run_until`]) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Every non-daemon task finished.
    Finished,
    /// The limit was reached with work still pending; the clock is at the
    /// limit and a later run continues from there.
    LimitReached,
}

enum StepEnd {
    Finished,
    LimitReached,
    BudgetSpent,
    Stalled,
}

/// The state of one simulation, shared by the `Simulation` handle and the
/// free functions (`now`, `sleep`, `spawn`) of the tasks it runs.
pub(crate) struct Core {
    now: Cell<SimTime>,
    tasks: RefCell<Tasks>,
    cold: RefCell<Vec<ColdSlot>>,
    free_slots: RefCell<Vec<u32>>,
    timers: RefCell<TimerQueue>,
    injector: Arc<Injector>,
    current: Cell<Option<TaskId>>,
    /// The data pointer of the waker of the task being polled (null
    /// between polls), so a primitive recognises it without reading it.
    polling: Cell<*const ()>,
    current_waiting: Cell<Waiting>,
    live_non_daemons: Cell<usize>,
    events: Cell<u64>,
    polls: Cell<u64>,
    spawned: Cell<u64>,
    order_hash: Cell<u64>,
    cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Whether the causal log grows ([`Simulation::record_causes`], until
    /// [`stop_recording_causes`](super::stop_recording_causes)).
    recording: Cell<bool>,
    /// Whether a causal log was kept (readable after recording stops).
    causal_kept: Cell<bool>,
    /// What a wake now would be caused by (while recording).
    waking: Cell<Cause>,
    /// The index of the poll running now (while recording).
    current_poll: Cell<u32>,
    causal: RefCell<CausalLog>,
}

thread_local! {
    static CURRENT: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
}

/// Calls `f` with the simulation running on this thread, if any.
pub(crate) fn with_current_core<R>(f: impl FnOnce(Option<&Core>) -> R) -> R {
    CURRENT.with(|cell| {
        let ptr = cell.get();
        // SAFETY: CURRENT is non-null only inside `Core::enter`, whose guard
        // borrows the core for at least as long as the pointer is set.
        f(unsafe { ptr.as_ref() })
    })
}

/// The simulation running on this thread; panics with the name of the
/// operation if there is none (calling a sim function outside a simulation
/// is a programming error, like `tokio::spawn` outside a runtime).
pub(crate) fn current_core(operation: &str) -> &'static Core {
    let ptr = CURRENT.with(Cell::get);
    assert!(
        !ptr.is_null(),
        "kernbench::sim::{operation}() called outside a running simulation"
    );
    // SAFETY: as above; the reference is only used within the current poll,
    // which the enter guard outlives.
    unsafe { &*ptr }
}

struct EnterGuard {
    previous: *const Core,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        CURRENT.with(|cell| cell.set(self.previous));
    }
}

impl Core {
    fn new() -> Self {
        Core {
            now: Cell::new(SimTime::ZERO),
            tasks: RefCell::new(Tasks::default()),
            cold: RefCell::new(Vec::new()),
            free_slots: RefCell::new(Vec::new()),
            timers: RefCell::new(TimerQueue::default()),
            injector: Arc::new(Injector::default()),
            current: Cell::new(None),
            polling: Cell::new(std::ptr::null()),
            current_waiting: Cell::new(Waiting::Unknown),
            live_non_daemons: Cell::new(0),
            events: Cell::new(0),
            polls: Cell::new(0),
            spawned: Cell::new(0),
            order_hash: Cell::new(FNV_OFFSET),
            cancel: super::cancel::current(),
            recording: Cell::new(false),
            causal_kept: Cell::new(false),
            waking: Cell::new(Cause::External),
            current_poll: Cell::new(NO_LABEL),
            causal: RefCell::new(CausalLog::default()),
        }
    }

    fn enter(&self) -> EnterGuard {
        let previous = CURRENT.with(|cell| cell.replace(self));
        EnterGuard { previous }
    }

    pub fn now(&self) -> SimTime {
        self.now.get()
    }

    pub fn injector(&self) -> &Arc<Injector> {
        &self.injector
    }

    /// Records what the task being polled now waits on (primitives call this
    /// just before returning `Pending`).
    pub fn set_waiting(&self, waiting: Waiting) {
        self.current_waiting.set(waiting);
    }

    pub fn current_task_name(&self) -> Option<Rc<str>> {
        let id = self.current.get()?;
        Some(self.cold.borrow()[id.index as usize].name.clone())
    }

    /// The task being polled, if `waker_data` is its waker's data pointer.
    pub fn polling_task(&self, waker_data: *const ()) -> Option<TaskId> {
        if std::ptr::eq(waker_data, self.polling.get()) {
            self.current.get()
        } else {
            None
        }
    }

    /// Sets a timer for `time` that wakes `target`. A task's first pending
    /// timer is keyed by the task (its slot armed with the timer's
    /// sequence number); other timers, and every timer while the causal
    /// log is kept (it needs the timer's record), go to the slab.
    pub fn add_timer(&self, time: SimTime, target: WakeTarget, label: u32) -> TimerKey {
        if self.recording.get() && self.causal_room() {
            let poll = self.current_poll.get();
            let sleep = self.causal.borrow_mut().push_sleep(poll, label);
            return self.timers.borrow_mut().add(time, target, sleep);
        }
        if let WakeTarget::Task(id) = target
            && TimerQueue::keys_task(id.index)
        {
            let mut tasks = self.tasks.borrow_mut();
            let slot = &mut tasks.slots[id.index as usize];
            if slot.generation == id.generation && slot.flags & LIVE != 0 && slot.armed == NOT_ARMED
            {
                let key = self.timers.borrow_mut().add_for_task(time, id.index);
                slot.armed = key.seq();
                return key;
            }
        }
        self.timers.borrow_mut().add(time, target, NO_LABEL)
    }

    /// Whether the causal log has room for one more record; when not, it
    /// stops growing (its overflow noted).
    fn causal_room(&self) -> bool {
        let room = self
            .causal
            .borrow_mut()
            .has_room(self.now(), self.events.get());
        if !room {
            self.stop_recording_causes();
        }
        room
    }

    /// Whether the causal log is being kept.
    pub fn recording_causes(&self) -> bool {
        self.recording.get()
    }

    /// Stops the causal log from growing; what it holds stays readable.
    pub fn stop_recording_causes(&self) {
        self.recording.set(false);
        self.waking.set(Cause::External);
    }

    /// The index in the causal log of the poll running now, while
    /// recording.
    pub fn current_poll(&self) -> Option<u32> {
        (self.recording.get() && self.current.get().is_some()).then(|| self.current_poll.get())
    }

    pub fn retarget_timer(&self, key: TimerKey, waker: &std::task::Waker) {
        self.timers.borrow_mut().retarget(key, waker);
    }

    /// Cancels a timer: disarms its task's slot, or marks it in the slab.
    pub fn cancel_timer(&self, key: TimerKey) {
        let Some(slot) = key.task_slot() else {
            self.timers.borrow_mut().cancel(key);
            return;
        };
        if let Some(hot) = self.tasks.borrow_mut().slots.get_mut(slot as usize)
            && hot.armed == key.seq()
        {
            hot.armed = NOT_ARMED;
        }
    }

    /// Makes task `id` runnable (once, however often it is woken).
    pub fn schedule(&self, id: TaskId) {
        let tasks = &mut *self.tasks.borrow_mut();
        let Some(slot) = tasks.slots.get_mut(id.index as usize) else {
            return;
        };
        if slot.generation != id.generation || slot.flags & LIVE == 0 {
            return;
        }
        self.make_runnable(&mut tasks.queue, slot, id);
    }

    #[inline(always)]
    fn make_runnable(&self, queue: &mut RunQueue, slot: &mut HotSlot, id: TaskId) {
        if self.recording.get() {
            self.cold.borrow_mut()[id.index as usize].cause = self.waking.get();
        }
        if slot.flags & SCHEDULED != 0 {
            return;
        }
        slot.flags |= SCHEDULED;
        self.events.set(self.events.get() + 1);
        queue.push_back(id);
    }

    pub fn spawn<F>(&self, name: &str, daemon: bool, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let name: Rc<str> = Rc::from(name);
        let index = self.allocate_slot();
        let id = TaskId {
            index,
            generation: self.tasks.borrow().slots[index as usize].generation,
        };
        let waker = TaskWaker::new(id, self.injector.clone());
        let (cell, handle) = TaskCell::new(waker, name.clone(), future);
        self.insert_task(id, name, daemon, Box::pin(cell));
        handle
    }

    fn insert_task(&self, id: TaskId, name: Rc<str>, daemon: bool, future: BoxedTask) {
        {
            let mut tasks = self.tasks.borrow_mut();
            let slot = &mut tasks.slots[id.index as usize];
            slot.future = Some(future);
            slot.armed = NOT_ARMED;
            slot.flags = LIVE | SCHEDULED | if daemon { DAEMON } else { 0 };
        }
        let old = {
            let mut cold = self.cold.borrow_mut();
            let slot = &mut cold[id.index as usize];
            slot.cause = self.waking.get();
            std::mem::replace(&mut slot.name, name)
        };
        drop(old);
        if !daemon {
            self.live_non_daemons.set(self.live_non_daemons.get() + 1);
        }
        self.spawned.set(self.spawned.get() + 1);
        self.tasks.borrow_mut().queue.push_back(id);
    }

    fn allocate_slot(&self) -> u32 {
        if let Some(index) = self.free_slots.borrow_mut().pop() {
            return index;
        }
        let mut tasks = self.tasks.borrow_mut();
        tasks.slots.push(HotSlot {
            future: None,
            armed: NOT_ARMED,
            generation: 0,
            flags: 0,
        });
        self.cold.borrow_mut().push(ColdSlot {
            name: Rc::from(""),
            waiting: Waiting::Unknown,
            cause: Cause::External,
        });
        u32::try_from(tasks.slots.len() - 1).expect("more than 2^32 task slots")
    }

    /// Runs until every non-daemon task finished, the clock would pass
    /// `limit`, `budget` polls were made, or nothing can run.
    fn step(&self, limit: SimTime, mut budget: u64) -> Result<StepEnd, SimError> {
        let _entered = self.enter();
        loop {
            if self.injector.has_pending() {
                for id in self.injector.drain() {
                    self.schedule(id);
                }
            }
            let next = self.next_runnable();
            if let Some((id, started)) = next {
                if let Some((future, kind_before)) = started {
                    self.poll_task(id, future, kind_before)?;
                }
                if self.polls.get() % super::cancel::CHECK_EVERY == 0 {
                    self.look_outside()?;
                }
                budget -= 1;
                if budget == 0 {
                    return Ok(StepEnd::BudgetSpent);
                }
                continue;
            }
            if self.live_non_daemons.get() == 0 {
                return Ok(StepEnd::Finished);
            }
            if !self.fire_due_timers(limit) {
                return Ok(if self.next_timer().is_some() {
                    self.now.set(limit.max(self.now()));
                    StepEnd::LimitReached
                } else {
                    StepEnd::Stalled
                });
            }
        }
    }

    /// The time of the earliest timer not cancelled.
    fn next_timer(&self) -> Option<SimTime> {
        let tasks = self.tasks.borrow();
        self.timers
            .borrow_mut()
            .next_time(|slot| tasks.slots[slot as usize].armed)
    }

    /// Advances the clock to the earliest timer (if not beyond `limit`) and
    /// fires every timer due then, in the order they were set.
    fn fire_due_timers(&self, limit: SimTime) -> bool {
        let Some(time) = self.next_timer() else {
            return false;
        };
        if time > limit {
            return false;
        }
        self.now.set(time);
        while let Some((target, sleep)) = self.fire_task_timers(time) {
            if self.recording.get() && sleep != NO_LABEL {
                self.waking.set(Cause::Timer(sleep));
            }
            target.wake(self);
            self.waking.set(Cause::External);
        }
        true
    }

    /// Fires the task-keyed timers due at `time` under one borrow of the
    /// timers and the tasks, up to the next slab timer due then, which it
    /// hands over to be woken outside those borrows (its waker may run any
    /// code). A task-keyed timer wakes its task unless it was cancelled
    /// (the slot is armed with another sequence number or none).
    fn fire_task_timers(&self, time: SimTime) -> Option<(WakeTarget, u32)> {
        let mut timers = self.timers.borrow_mut();
        let tasks = &mut *self.tasks.borrow_mut();
        loop {
            match timers.pop_due(time)? {
                Due::Task { slot, seq } => {
                    let hot = &mut tasks.slots[slot as usize];
                    if hot.armed == seq {
                        hot.armed = NOT_ARMED;
                        let id = TaskId {
                            index: slot,
                            generation: hot.generation,
                        };
                        self.make_runnable(&mut tasks.queue, hot, id);
                    }
                }
                Due::Target(target, sleep) => return Some((target, sleep)),
            }
        }
    }

    /// Takes the next task off the run queue and, unless the id is stale,
    /// starts its poll ([`start_poll`]), under one borrow.
    fn next_runnable(&self) -> Option<(TaskId, Option<Started>)> {
        let tasks = &mut *self.tasks.borrow_mut();
        let id = tasks.queue.pop_front()?;
        if tasks.slots.len() > FAR_TASKS
            && let Some(next) = tasks.queue.front()
        {
            prefetch_future(&tasks.slots, next);
        }
        Some((id, start_poll(&mut tasks.slots, id)))
    }

    /// Polls task `id`, whose future `start_poll` handed over.
    fn poll_task(
        &self,
        id: TaskId,
        future: *mut dyn TaskFuture,
        kind_before: u8,
    ) -> Result<(), SimError> {
        self.fold_order(id);
        if self.recording.get() && self.causal_room() {
            self.note_poll(id);
        }
        self.current.set(Some(id));
        let polled = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `future` points into the task's box, which stays in
            // its slot (and so alive and unmoved) until the poll returns:
            // only `retire`'s callers and `drop_all_tasks` take a future
            // out, and none of them runs during a poll (ADR-0063).
            unsafe { Pin::new_unchecked(&mut *future) }.poll_task(&self.polling)
        }));
        self.current.set(None);
        self.polling.set(std::ptr::null());
        self.waking.set(Cause::External);
        let waiting = self.current_waiting.take();
        match polled {
            Ok(Poll::Pending) => {
                self.note_waiting(id, kind_before, waiting);
                Ok(())
            }
            Ok(Poll::Ready(())) => {
                drop(self.take_future(id));
                self.retire(id);
                Ok(())
            }
            Err(payload) => {
                let error = self.panic_error(id, payload.as_ref());
                if let Some(future) = self.take_future(id) {
                    drop_quietly(future);
                }
                self.retire(id);
                self.drop_all_tasks();
                Err(error)
            }
        }
    }

    /// Takes a finished or panicked task's future out of its slot.
    fn take_future(&self, id: TaskId) -> Option<BoxedTask> {
        self.tasks.borrow_mut().slots[id.index as usize]
            .future
            .take()
    }

    /// Records what a pending task waits on, touching the slot only when
    /// the record's kind changed or it names a primitive (the kind was
    /// `kind_before` when the poll started; only this function sets it).
    fn note_waiting(&self, id: TaskId, kind_before: u8, waiting: Waiting) {
        let kind = wait_kind(&waiting);
        if kind != kind_before {
            let slot = &mut self.tasks.borrow_mut().slots[id.index as usize];
            slot.flags = (slot.flags & !WAIT_KIND) | kind;
        } else if kind != WAIT_ON {
            return;
        }
        let old = std::mem::replace(
            &mut self.cold.borrow_mut()[id.index as usize].waiting,
            waiting,
        );
        drop(old);
    }

    /// Logs the poll of `id` starting now and makes it the cause of the
    /// wakes it makes.
    fn note_poll(&self, id: TaskId) {
        let cause = self.cold.borrow()[id.index as usize].cause;
        let poll = self
            .causal
            .borrow_mut()
            .push_poll(id.index, self.now(), cause);
        self.current_poll.set(poll);
        self.waking.set(Cause::Poll(poll));
    }

    fn fold_order(&self, id: TaskId) {
        let mut hash = self.order_hash.get();
        for word in [u64::from(id.index), self.now().as_ps()] {
            hash = (hash ^ word).wrapping_mul(FNV_PRIME);
        }
        self.order_hash.set(hash);
        self.polls.set(self.polls.get() + 1);
    }

    /// What the event loop does once every [`CHECK_EVERY`] polls, the one
    /// test it adds per poll: tells this thread's observer the counters
    /// (every [`EVERY_POLLS`]) and stops the run if the cancel flag is up.
    ///
    /// [`CHECK_EVERY`]: super::cancel::CHECK_EVERY
    /// [`EVERY_POLLS`]: super::observe::EVERY_POLLS
    #[cold]
    fn look_outside(&self) -> Result<(), SimError> {
        if self.polls.get() % super::observe::EVERY_POLLS == 0 {
            super::observe::notify(&self.stats());
        }
        if super::cancel::raised(&self.cancel) {
            self.drop_all_tasks();
            return Err(SimError::Cancelled { time: self.now() });
        }
        Ok(())
    }

    /// Frees a finished task's slot for reuse under a new generation; its
    /// task-keyed timer, if any, is disarmed.
    fn retire(&self, id: TaskId) {
        let daemon = {
            let mut tasks = self.tasks.borrow_mut();
            let slot = &mut tasks.slots[id.index as usize];
            let daemon = slot.flags & DAEMON != 0;
            slot.flags = 0;
            slot.armed = NOT_ARMED;
            slot.generation = slot.generation.wrapping_add(1);
            daemon
        };
        let old = std::mem::take(&mut self.cold.borrow_mut()[id.index as usize].waiting);
        drop(old);
        if !daemon {
            self.live_non_daemons.set(self.live_non_daemons.get() - 1);
        }
        self.free_slots.borrow_mut().push(id.index);
    }

    fn panic_error(&self, id: TaskId, payload: &(dyn std::any::Any + Send)) -> SimError {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        SimError::TaskPanicked {
            task: self.cold.borrow()[id.index as usize].name.to_string(),
            time: self.now(),
            message,
        }
    }

    /// Drops every task (after a panic, or when the simulation is dropped).
    /// Futures are dropped outside any borrow, since their destructors may
    /// wake other tasks.
    fn drop_all_tasks(&self) {
        let _entered = self.enter();
        let mut futures = Vec::new();
        let live: Vec<TaskId> = self.live_task_ids();
        for id in live {
            if let Some(future) = self.tasks.borrow_mut().slots[id.index as usize]
                .future
                .take()
            {
                futures.push(future);
            }
            self.retire(id);
        }
        self.tasks.borrow_mut().queue.clear();
        self.timers.borrow_mut().clear();
        for future in futures {
            drop_quietly(future);
        }
        self.tasks.borrow_mut().queue.clear();
    }

    fn live_task_ids(&self) -> Vec<TaskId> {
        let tasks = self.tasks.borrow();
        (0..tasks.slots.len())
            .filter(|&i| tasks.slots[i].flags & LIVE != 0)
            .map(|i| TaskId {
                index: i as u32,
                generation: tasks.slots[i].generation,
            })
            .collect()
    }

    fn blocked_tasks(&self) -> Vec<BlockedTask> {
        let (tasks, cold) = (self.tasks.borrow(), self.cold.borrow());
        tasks
            .slots
            .iter()
            .zip(cold.iter())
            .filter(|(hot, _)| hot.flags & LIVE != 0)
            .map(|(hot, cold)| BlockedTask::new(&cold.name, &cold.waiting, hot.flags & DAEMON != 0))
            .collect()
    }

    /// Whether a stalled run may still be woken from outside: some
    /// non-daemon task waits on a foreign future.
    fn waits_on_foreign_future(&self) -> bool {
        let (tasks, cold) = (self.tasks.borrow(), self.cold.borrow());
        tasks.slots.iter().zip(cold.iter()).any(|(hot, cold)| {
            hot.flags & (LIVE | DAEMON) == LIVE && matches!(cold.waiting, Waiting::Unknown)
        })
    }

    fn deadlock(&self) -> SimError {
        SimError::Deadlock {
            time: self.now(),
            blocked: self.blocked_tasks(),
        }
    }

    fn stats(&self) -> SimStats {
        SimStats {
            now: self.now(),
            events: self.events.get(),
            polls: self.polls.get(),
            spawned: self.spawned.get(),
            order_hash: self.order_hash.get(),
        }
    }
}

/// A task's future, polled in place, and the kind of its wait record when
/// the poll starts.
type Started = (*mut dyn TaskFuture, u8);

/// Marks task `id` no longer scheduled and hands over a pointer to its
/// future, which stays in its slot while it is polled (no move out and
/// back), and the kind of its wait record; `None` for a stale id.
fn start_poll(slots: &mut [HotSlot], id: TaskId) -> Option<Started> {
    let slot = &mut slots[id.index as usize];
    if slot.generation != id.generation || slot.flags & LIVE == 0 {
        return None;
    }
    slot.flags &= !SCHEDULED;
    let future = slot.future.as_mut()?;
    // SAFETY: the pointer is only used to poll the future in place
    // (pinned: it never moves out of its box while the task lives).
    let future = unsafe { future.as_mut().get_unchecked_mut() };
    Some((future as *mut dyn TaskFuture, slot.flags & WAIT_KIND))
}

/// How many task slots a simulation has at most for the next task's
/// future to be left unasked for ([`prefetch_future`], ADR-0071): at 16
/// SIPs (256 endpoints) the futures stay in the core's caches and the
/// hint only costs instructions (+0.3 % on the yardstick); at 256 SIPs
/// (4,096 endpoints) they do not.
const FAR_TASKS: usize = 1 << 11;

/// How many cache lines of the next task's future are asked for: its
/// cell and the first of its state (four read 4-5 % better than two at
/// 256 SIPs, eight no better than four; ADR-0071).
const FUTURE_LINES: usize = 4;

/// Asks for the first [`FUTURE_LINES`] cache lines of task `id`'s
/// future, so that its poll's first misses overlap the poll before it.
#[inline(always)]
fn prefetch_future(slots: &[HotSlot], id: TaskId) {
    if let Some(future) = slots
        .get(id.index as usize)
        .and_then(|slot| slot.future.as_ref())
    {
        let at = (&**future as *const dyn TaskFuture).cast::<u8>();
        for line in 0..FUTURE_LINES {
            super::prefetch(at.wrapping_add(64 * line));
        }
    }
}

fn drop_quietly(future: BoxedTask) {
    // A destructor that panics while unwinding from a task panic must not
    // abort the process; the first panic is the one reported.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(future)));
}

/// A deterministic discrete-event simulation: owns the clock, the tasks and
/// the timers. Single-threaded; drive it with [`run`](Self::run),
/// [`run_until`](Self::run_until) or, inside an async host such as a
/// `#[tokio::test]`, [`run_async`](Self::run_async).
///
/// ```
/// use kernbench_core::sim::{self, SimDuration, Simulation};
///
/// let mut simulation = Simulation::new();
/// let done = simulation.spawn("worker", async {
///     sim::sleep(SimDuration::from_ns(8)).await;
///     sim::now()
/// });
/// simulation.run().unwrap();
/// assert_eq!(done.output().unwrap().as_ps(), 8_000);
/// ```
pub struct Simulation {
    core: Box<Core>,
}

impl Default for Simulation {
    fn default() -> Self {
        Self::new()
    }
}

/// Polls made by one slice of [`Simulation::run_async`] before it yields to
/// the host executor.
const POLLS_PER_SLICE: u64 = 4096;

impl Simulation {
    /// An empty simulation at time zero.
    pub fn new() -> Self {
        Simulation {
            core: Box::new(Core::new()),
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> SimTime {
        self.core.now()
    }

    /// Keeps the causal log from now on (`--explain`, ADR-0028): what
    /// made every poll runnable and who set every timer. Times are the same
    /// with or without it.
    pub fn record_causes(&mut self) {
        self.core.recording.set(true);
        self.core.causal_kept.set(true);
    }

    /// [`record_causes`](Self::record_causes) with the log bounded to
    /// `budget` bytes: where the next record would pass it, the log stops
    /// growing and notes where ([`CausalLog::overflow`]); the run goes on,
    /// its times the same.
    pub fn record_causes_within(&mut self, budget: u64) {
        *self.core.causal.borrow_mut() = CausalLog::within(Some(budget));
        self.record_causes();
    }

    /// The causal log, if [`record_causes`](Self::record_causes) was called
    /// (also after [`stop_recording_causes`](super::stop_recording_causes)).
    pub fn causal_log(&self) -> Option<std::cell::Ref<'_, CausalLog>> {
        self.core
            .causal_kept
            .get()
            .then(|| self.core.causal.borrow())
    }

    /// Counters so far (events, polls, schedule fingerprint).
    pub fn stats(&self) -> SimStats {
        self.core.stats()
    }

    /// Adds a task; it first runs at the current virtual time, after the
    /// tasks already runnable. The run ends when every such task finished.
    pub fn spawn<F>(&self, name: &str, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.core.spawn(name, false, future)
    }

    /// Adds a daemon: a server task that may wait forever (a link worker, a
    /// DMA engine). Runs end without waiting for daemons, and a daemon
    /// waiting alone is not a deadlock.
    pub fn spawn_daemon<F>(&self, name: &str, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.core.spawn(name, true, future)
    }

    /// Runs until every non-daemon task has finished.
    ///
    /// Errors: [`SimError::Deadlock`] when tasks wait and nothing can wake
    /// them (tasks waiting on futures outside the simulation count as
    /// deadlocked here; use [`run_async`](Self::run_async) for those), and
    /// [`SimError::TaskPanicked`].
    pub fn run(&mut self) -> Result<SimStats, SimError> {
        match self.core.step(SimTime::MAX, u64::MAX)? {
            StepEnd::Finished | StepEnd::LimitReached | StepEnd::BudgetSpent => Ok(self.stats()),
            StepEnd::Stalled => Err(self.core.deadlock()),
        }
    }

    /// Runs every event up to and including virtual time `limit`. If work
    /// remains after it, the clock is left at `limit`.
    pub fn run_until(&mut self, limit: SimTime) -> Result<RunStatus, SimError> {
        loop {
            match self.core.step(limit, u64::MAX)? {
                StepEnd::Finished => return Ok(RunStatus::Finished),
                StepEnd::LimitReached => return Ok(RunStatus::LimitReached),
                StepEnd::BudgetSpent => continue,
                StepEnd::Stalled => return Err(self.core.deadlock()),
            }
        }
    }

    /// Runs to completion as a future, yielding to the host executor every
    /// few thousand polls, so other tasks of the host (for instance a
    /// `#[tokio::test]`) keep running. Sim tasks may await foreign futures
    /// (a `tokio::sync::oneshot` completed by a host task): while only such
    /// waits remain, this future sleeps until one of them wakes.
    pub async fn run_async(&mut self) -> Result<SimStats, SimError> {
        loop {
            match self.core.step(SimTime::MAX, POLLS_PER_SLICE)? {
                StepEnd::Finished | StepEnd::LimitReached => return Ok(self.stats()),
                StepEnd::BudgetSpent => HostYield::default().await,
                StepEnd::Stalled if self.core.waits_on_foreign_future() => {
                    ForeignWake {
                        injector: &self.core.injector,
                    }
                    .await
                }
                StepEnd::Stalled => return Err(self.core.deadlock()),
            }
        }
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        self.core.drop_all_tasks();
    }
}

/// Returns `Pending` once, asking the host to poll again later.
#[derive(Default)]
struct HostYield {
    yielded: bool,
}

impl Future for HostYield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.yielded, true) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Ready once a wake from outside the simulation has been injected.
struct ForeignWake<'a> {
    injector: &'a Injector,
}

impl Future for ForeignWake<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.injector.register_host(cx.waker());
        if self.injector.has_pending() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDuration, now, sleep, sleep_until, spawn, yield_now};
    use std::cell::RefCell;

    type Log = Rc<RefCell<Vec<(&'static str, u64)>>>;

    fn record(log: &Log, what: &'static str) {
        log.borrow_mut().push((what, now().as_ps()));
    }

    #[test]
    fn same_time_wakeups_run_in_timer_order() {
        let mut simulation = Simulation::new();
        let log = Log::default();
        for (name, ps) in [("late", 20), ("a", 10), ("b", 10), ("c", 10)] {
            let log = log.clone();
            simulation.spawn(name, async move {
                sleep(SimDuration::from_ps(ps)).await;
                record(&log, name);
            });
        }
        simulation.run().unwrap();
        assert_eq!(
            *log.borrow(),
            [("a", 10), ("b", 10), ("c", 10), ("late", 20)]
        );
    }

    #[test]
    fn timers_due_together_fire_before_tasks_they_wake_later() {
        // "first" wakes at 10 and sets an event that "waker" waits on; "second"
        // also has a timer at 10 and was scheduled before that wake, so it runs
        // before "woken".
        let mut simulation = Simulation::new();
        let log = Log::default();
        let signal = crate::sim::Event::new("signal");
        let (l1, l2, l3, s1, s2) = (
            log.clone(),
            log.clone(),
            log.clone(),
            signal.clone(),
            signal,
        );
        simulation.spawn("woken", async move {
            s2.wait().await;
            record(&l3, "woken");
        });
        simulation.spawn("first", async move {
            sleep(SimDuration::from_ps(10)).await;
            record(&l1, "first");
            s1.set();
        });
        simulation.spawn("second", async move {
            sleep(SimDuration::from_ps(10)).await;
            record(&l2, "second");
        });
        simulation.run().unwrap();
        assert_eq!(
            *log.borrow(),
            [("first", 10), ("second", 10), ("woken", 10)]
        );
    }

    #[test]
    fn yield_lets_peers_run_without_moving_the_clock() {
        let mut simulation = Simulation::new();
        let log = Log::default();
        let (l1, l2) = (log.clone(), log.clone());
        simulation.spawn("yielder", async move {
            yield_now().await;
            record(&l1, "yielder");
        });
        simulation.spawn("peer", async move { record(&l2, "peer") });
        simulation.run().unwrap();
        assert_eq!(*log.borrow(), [("peer", 0), ("yielder", 0)]);
    }

    #[test]
    fn tasks_spawn_tasks_and_join_them() {
        let mut simulation = Simulation::new();
        let parent = simulation.spawn("parent", async {
            let child = spawn("child", async {
                sleep(SimDuration::from_ns(3)).await;
                now()
            });
            let child_end = child.await.unwrap();
            (child_end, now())
        });
        simulation.run().unwrap();
        let (child_end, parent_end) = parent.output().unwrap();
        assert_eq!(child_end, SimTime::from_ns(3));
        assert_eq!(parent_end, SimTime::from_ns(3));
    }

    /// `select` of a 5 us and a 1 ns sleep: the short one wins and the
    /// long one is dropped.
    async fn short_sleep_wins_a_race() {
        let long = sleep(SimDuration::from_us(5));
        let short = sleep(SimDuration::from_ns(1));
        futures::pin_mut!(long, short);
        futures::future::select(long, short).await;
    }

    #[test]
    fn dropped_sleep_never_moves_the_clock() {
        let mut simulation = Simulation::new();
        simulation.spawn("racer", short_sleep_wins_a_race());
        let stats = simulation.run().unwrap();
        assert_eq!(stats.now, SimTime::from_ns(1));
    }

    #[test]
    fn sleep_inside_join_uses_the_combinator_waker() {
        let mut simulation = Simulation::new();
        let done = simulation.spawn("joiner", async {
            let a = sleep(SimDuration::from_ns(2));
            let b = sleep_until(SimTime::from_ns(5));
            futures::join!(a, b);
            now()
        });
        simulation.run().unwrap();
        assert_eq!(done.output().unwrap(), SimTime::from_ns(5));
    }

    #[test]
    fn run_until_stops_at_the_limit_and_resumes() {
        let mut simulation = Simulation::new();
        simulation.spawn("ticker", async {
            for _ in 0..4 {
                sleep(SimDuration::from_ns(10)).await;
            }
        });
        assert_eq!(
            simulation.run_until(SimTime::from_ns(25)).unwrap(),
            RunStatus::LimitReached
        );
        assert_eq!(simulation.now(), SimTime::from_ns(25));
        assert_eq!(
            simulation.run_until(SimTime::MAX).unwrap(),
            RunStatus::Finished
        );
        assert_eq!(simulation.now(), SimTime::from_ns(40));
    }

    #[test]
    fn daemons_do_not_keep_a_run_alive() {
        let mut simulation = Simulation::new();
        let (tx, mut rx) = crate::sim::channel::<u32>("requests", 1, SimDuration::ZERO);
        simulation.spawn_daemon("server", async move { while rx.recv().await.is_some() {} });
        simulation.spawn("client", async move {
            sleep(SimDuration::from_ns(7)).await;
            tx.send(1).await.unwrap();
            std::future::pending::<()>().await;
        });
        let error = simulation.run().unwrap_err();
        let SimError::Deadlock { blocked, .. } = error else {
            panic!("expected a deadlock")
        };
        assert_eq!(blocked.len(), 2);
        assert!(blocked[0].daemon && !blocked[1].daemon);
    }

    /// `select` of a long and a short sleep, then another sleep: the long
    /// one, keyed by the task (polled first), is cancelled when the short
    /// one wins; its stale heap entry neither moves the clock nor wakes the
    /// task while it sleeps again. Three polls: the first, after 1 ns, and
    /// after the last 10 us.
    #[test]
    fn a_cancelled_task_timer_never_wakes_its_task() {
        let mut simulation = Simulation::new();
        simulation.spawn("racer", async {
            // The long sleep is dropped when the race ends, not at the
            // task's end.
            short_sleep_wins_a_race().await;
            sleep(SimDuration::from_us(10)).await;
        });
        let stats = simulation.run().unwrap();
        assert_eq!(stats.now, SimTime::from_ps(1_000 + 10_000_000));
        assert_eq!((stats.polls, stats.events), (3, 2));
    }

    /// A task that ends with a cancelled timer pending frees its slot; the
    /// next task spawned reuses it and sleeps past the stale entry's time:
    /// that entry wakes no one.
    #[test]
    fn a_stale_timer_does_not_wake_the_task_that_reuses_its_slot() {
        let mut simulation = Simulation::new();
        let log = Log::default();
        let first_log = log.clone();
        simulation.spawn("first", async move {
            let long = sleep(SimDuration::from_us(5));
            let short = sleep(SimDuration::from_ns(1));
            futures::pin_mut!(long, short);
            futures::future::select(long, short).await;
            let log = first_log.clone();
            spawn("second", async move {
                sleep(SimDuration::from_us(10)).await;
                record(&log, "second");
            });
            record(&first_log, "first");
        });
        let stats = simulation.run().unwrap();
        assert_eq!(*log.borrow(), [("first", 1_000), ("second", 10_001_000)]);
        // first: 2 polls; second: its first poll and its wake-up.
        assert_eq!(stats.polls, 4);
    }

    /// Two timers of one task pending at once (only the first is keyed by
    /// the task, the second goes to the slab): both fire, in time order.
    #[test]
    fn a_task_with_two_pending_timers_is_woken_by_each() {
        let mut simulation = Simulation::new();
        let done = simulation.spawn("joiner", async {
            let late = sleep(SimDuration::from_ns(5));
            let early = sleep(SimDuration::from_ns(2));
            futures::join!(late, early);
            now()
        });
        let stats = simulation.run().unwrap();
        assert_eq!(done.output().unwrap(), SimTime::from_ns(5));
        assert_eq!(stats.events, 2);
    }

    /// What a task waits on is recorded at the end of every poll, also
    /// when it changes from a timer to a primitive and to something
    /// outside the simulation: the deadlock report names the last.
    #[test]
    fn the_wait_record_follows_each_change() {
        let mut simulation = Simulation::new();
        let started = crate::sim::Event::new("started");
        let never = crate::sim::Event::new("never");
        let set = started.clone();
        simulation.spawn("setter", async move {
            sleep(SimDuration::from_ns(1)).await;
            set.set();
        });
        simulation.spawn("event_then_timer_then_foreign", async move {
            started.wait().await;
            sleep(SimDuration::from_ns(1)).await;
            std::future::pending::<()>().await;
        });
        simulation.spawn("timer_then_event", async move {
            sleep(SimDuration::from_ns(3)).await;
            never.wait().await;
        });
        let SimError::Deadlock { blocked, time } = simulation.run().unwrap_err() else {
            panic!("expected a deadlock")
        };
        assert_eq!(time, SimTime::from_ns(3));
        let waits: Vec<_> = blocked
            .iter()
            .map(|b| (b.name.as_str(), b.waiting_on.as_str()))
            .collect();
        assert_eq!(
            waits,
            [
                (
                    "event_then_timer_then_foreign",
                    "something outside the simulation (not a kernbench primitive)"
                ),
                ("timer_then_event", "wait on event \"never\" (not set)")
            ]
        );
    }

    #[test]
    fn empty_simulation_finishes_at_time_zero() {
        let stats = Simulation::new().run().unwrap();
        assert_eq!(
            (stats.now, stats.events, stats.polls),
            (SimTime::ZERO, 0, 0)
        );
    }
}
