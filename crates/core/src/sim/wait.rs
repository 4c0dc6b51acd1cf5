//! FIFO wait queues shared by the blocking primitives: a waiter is granted
//! its turn explicitly, so hand-over is first come, first served and a
//! late arrival can never overtake a woken one. [`TaskWakers`]: the
//! waiters of a model woken only from inside the executor, kept as task
//! ids.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Context, Waker};

use smallvec::SmallVec;

use super::error::{Describe, Waiting};
use super::executor::current_core;
use super::waker::WakeTarget;

/// One task waiting its turn.
pub(crate) struct Waiter {
    granted: Cell<bool>,
    waker: RefCell<Waker>,
}

impl Waiter {
    pub fn is_granted(&self) -> bool {
        self.granted.get()
    }

    /// Keeps the waker current when the waiting future is polled again.
    pub fn update(&self, waker: &Waker) {
        let mut stored = self.waker.borrow_mut();
        if !stored.will_wake(waker) {
            *stored = waker.clone();
        }
    }
}

/// First-come-first-served queue of waiters.
#[derive(Default)]
pub(crate) struct WaitQueue {
    waiters: RefCell<VecDeque<Rc<Waiter>>>,
}

impl WaitQueue {
    pub fn is_empty(&self) -> bool {
        self.waiters.borrow().is_empty()
    }

    pub fn len(&self) -> usize {
        self.waiters.borrow().len()
    }

    /// Appends a waiter for the task polling with `waker`.
    pub fn push(&self, waker: &Waker) -> Rc<Waiter> {
        let waiter = Rc::new(Waiter {
            granted: Cell::new(false),
            waker: RefCell::new(waker.clone()),
        });
        self.waiters.borrow_mut().push_back(waiter.clone());
        waiter
    }

    /// Grants the oldest waiter its turn and wakes it; false if none waits.
    pub fn grant_next(&self) -> bool {
        let next = self.waiters.borrow_mut().pop_front();
        match next {
            Some(waiter) => {
                waiter.granted.set(true);
                waiter.waker.borrow().wake_by_ref();
                true
            }
            None => false,
        }
    }

    /// Removes a waiter that gave up before being granted.
    pub fn remove(&self, waiter: &Rc<Waiter>) {
        self.waiters.borrow_mut().retain(|w| !Rc::ptr_eq(w, waiter));
    }

    /// Wakes every waiter without granting (they re-check their condition).
    pub fn wake_all(&self) {
        for waiter in self.waiters.borrow().iter() {
            waiter.waker.borrow().wake_by_ref();
        }
    }
}

/// Wakers to wake together (an event set, a barrier filled), deduplicated
/// per waiting future and woken in registration order.
#[derive(Default)]
pub(crate) struct WakerList {
    wakers: RefCell<Vec<Waker>>,
}

impl WakerList {
    pub fn register(&self, waker: &Waker) {
        let mut wakers = self.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    pub fn wake_all(&self) {
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for waker in wakers {
            waker.wake();
        }
    }
}

/// Tasks to wake together, for a model that only code inside the
/// executor wakes (an IPCQ ring: its doorbells and credits land in tasks).
/// A task of the running simulation is kept as its id, as a timer keeps
/// it: no waker is cloned when it registers, nor dropped when it is
/// woken (any other waker is cloned). Deduplicated, woken in registration
/// order; mostly one or two wait, kept inline.
#[derive(Default)]
pub(crate) struct TaskWakers(RefCell<SmallVec<[WakeTarget; 2]>>);

impl TaskWakers {
    /// Registers whoever polls with `cx` and records that it waits in `op`
    /// on `what` (for a deadlock report).
    pub fn register(&self, cx: &Context<'_>, op: &'static str, what: Rc<dyn Describe>) {
        let core = current_core(op);
        let target = WakeTarget::from_cx(cx, core);
        let mut targets = self.0.borrow_mut();
        if !targets.iter().any(|t| t.same(&target)) {
            targets.push(target);
        }
        drop(targets);
        core.set_waiting(Waiting::On(op, what));
    }

    /// Wakes every task registered, in order. Waking only schedules a
    /// task (it polls nothing), so the list is drained in place; an empty
    /// list (half the wakes of a ring: a credit while its sender sleeps
    /// until one lands) is looked at inline and left.
    #[inline]
    pub fn wake_all(&self) {
        if !self.0.borrow().is_empty() {
            self.wake_registered();
        }
    }

    fn wake_registered(&self) {
        let core = current_core("wake");
        let mut targets = self.0.borrow_mut();
        targets.drain(..).for_each(|target| target.wake(core));
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::task::Poll;

    use super::*;
    use crate::sim::{SimDuration, Simulation, now, sleep};

    struct Nothing;

    impl Describe for Nothing {
        fn describe(&self) -> String {
            "nothing".to_owned()
        }
    }

    /// A task registered twice is woken once; tasks are woken in the order
    /// they registered, and a woken task registers afresh.
    #[test]
    fn task_wakers_wake_each_task_once_in_registration_order() {
        let mut simulation = Simulation::new();
        let wakers = Rc::new(TaskWakers::default());
        let log = Rc::new(RefCell::new(Vec::new()));
        for name in ["a", "b"] {
            let (wakers, log) = (wakers.clone(), log.clone());
            simulation.spawn(name, async move {
                let mut polls = 0;
                poll_fn(|cx| {
                    polls += 1;
                    if polls == 3 {
                        return Poll::Ready(());
                    }
                    // Twice per poll: kept once.
                    wakers.register(cx, "wait", Rc::new(Nothing));
                    wakers.register(cx, "wait", Rc::new(Nothing));
                    Poll::Pending
                })
                .await;
                log.borrow_mut().push((name, now().as_ps()));
            });
        }
        simulation.spawn("waker", async move {
            for _ in 0..2 {
                sleep(SimDuration::from_ps(10)).await;
                wakers.wake_all();
            }
        });
        simulation.run().unwrap();
        // Polled at 0, 10 and 20 ps: each wake is one poll.
        assert_eq!(*log.borrow(), [("a", 20), ("b", 20)]);
    }
}
