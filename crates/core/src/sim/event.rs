//! [`Event`]: a latched one-shot signal (SimPy's `Event`), and [`Barrier`]:
//! a reusable rendezvous of a fixed number of parties.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::error::Describe;
use super::wait::WakerList;
use super::waiting_on;

struct EventInner {
    name: String,
    set: Cell<bool>,
    waiters: WakerList,
}

impl Describe for EventInner {
    fn describe(&self) -> String {
        format!("event \"{}\" (not set)", self.name)
    }
}

/// A signal that, once set, stays set: every waiter, past and future,
/// proceeds. Waiters are woken in the order they started waiting. Cloning
/// gives another handle to the same event.
#[derive(Clone)]
pub struct Event {
    inner: Rc<EventInner>,
}

impl Event {
    /// An unset event named `name` (used in deadlock reports).
    pub fn new(name: &str) -> Self {
        Event {
            inner: Rc::new(EventInner {
                name: name.to_owned(),
                set: Cell::new(false),
                waiters: WakerList::default(),
            }),
        }
    }

    /// Sets the event and wakes every waiter. Setting it again does nothing.
    pub fn set(&self) {
        if !self.inner.set.replace(true) {
            self.inner.waiters.wake_all();
        }
    }

    /// Whether the event has been set.
    pub fn is_set(&self) -> bool {
        self.inner.set.get()
    }

    /// Runs `future` unless the event is set first: `None` when the event
    /// was set before `future` finished (checked before each poll of it).
    /// Cheaper than racing [`wait`](Self::wait) against `future`: the
    /// waker is registered once, and what the task waits on is whatever
    /// `future` says.
    pub fn cancels<F: Future + Unpin>(&self, future: F) -> Cancellable<'_, F> {
        Cancellable {
            event: self,
            registered: None,
            future,
        }
    }

    /// Waits until the event is set (at once if it already is).
    pub fn wait(&self) -> EventWait<'_> {
        EventWait {
            event: self,
            registered: None,
        }
    }
}

/// Future returned by [`Event::wait`].
#[must_use = "futures do nothing unless awaited"]
pub struct EventWait<'a> {
    event: &'a Event,
    /// The waker already in the event's list: a future polled again by the
    /// same task does not scan the list again (a launch's cancel event has
    /// one waiter per program, polled at every step of each).
    registered: Option<Waker>,
}

impl Future for EventWait<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let inner = &this.event.inner;
        if inner.set.get() {
            return Poll::Ready(());
        }
        register_once(inner, &mut this.registered, cx.waker());
        waiting_on("wait", inner.clone());
        Poll::Pending
    }
}

/// Future returned by [`Event::cancels`].
#[must_use = "futures do nothing unless awaited"]
pub struct Cancellable<'a, F> {
    event: &'a Event,
    registered: Option<Waker>,
    future: F,
}

impl<F: Future + Unpin> Future for Cancellable<'_, F> {
    type Output = Option<F::Output>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let inner = &this.event.inner;
        if inner.set.get() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(output) = Pin::new(&mut this.future).poll(cx) {
            return Poll::Ready(Some(output));
        }
        register_once(inner, &mut this.registered, cx.waker());
        Poll::Pending
    }
}

/// Puts `waker` in the event's list unless `registered` (the waker a
/// future put there before) says it is there already.
fn register_once(inner: &EventInner, registered: &mut Option<Waker>, waker: &Waker) {
    if !registered
        .as_ref()
        .is_some_and(|known| known.will_wake(waker))
    {
        inner.waiters.register(waker);
        *registered = Some(waker.clone());
    }
}

struct BarrierInner {
    name: String,
    parties: usize,
    arrived: Cell<usize>,
    generation: Cell<u64>,
    waiters: WakerList,
}

impl Describe for BarrierInner {
    fn describe(&self) -> String {
        format!(
            "barrier \"{}\" ({} of {} arrived)",
            self.name,
            self.arrived.get(),
            self.parties
        )
    }
}

/// A rendezvous of `parties` tasks, reusable round after round: each
/// `wait` returns once `parties` tasks are waiting in the same round.
#[derive(Clone)]
pub struct Barrier {
    inner: Rc<BarrierInner>,
}

/// What [`Barrier::wait`] returns: exactly one party per round is the leader
/// (the last to arrive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult {
    /// Whether this party completed the round.
    pub is_leader: bool,
}

impl Barrier {
    /// A barrier for `parties` tasks. Panics if `parties` is zero.
    pub fn new(name: &str, parties: usize) -> Self {
        assert!(parties > 0, "barrier \"{name}\" needs at least 1 party");
        Barrier {
            inner: Rc::new(BarrierInner {
                name: name.to_owned(),
                parties,
                arrived: Cell::new(0),
                generation: Cell::new(0),
                waiters: WakerList::default(),
            }),
        }
    }

    /// Arrives at the barrier and waits for the round to fill.
    pub fn wait(&self) -> BarrierWait<'_> {
        BarrierWait {
            barrier: self,
            round: None,
        }
    }
}

/// Future returned by [`Barrier::wait`].
#[must_use = "futures do nothing unless awaited"]
pub struct BarrierWait<'a> {
    barrier: &'a Barrier,
    round: Option<u64>,
}

impl Future for BarrierWait<'_> {
    type Output = BarrierWaitResult;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<BarrierWaitResult> {
        let inner = self.barrier.inner.clone();
        match self.round {
            Some(round) if round != inner.generation.get() => {
                self.round = None;
                return Poll::Ready(BarrierWaitResult { is_leader: false });
            }
            Some(_) => {}
            None => {
                inner.arrived.set(inner.arrived.get() + 1);
                if inner.arrived.get() == inner.parties {
                    inner.arrived.set(0);
                    inner.generation.set(inner.generation.get() + 1);
                    inner.waiters.wake_all();
                    return Poll::Ready(BarrierWaitResult { is_leader: true });
                }
                self.round = Some(inner.generation.get());
            }
        }
        inner.waiters.register(cx.waker());
        waiting_on("wait", inner);
        Poll::Pending
    }
}

impl Drop for BarrierWait<'_> {
    fn drop(&mut self) {
        let inner = &self.barrier.inner;
        if self.round == Some(inner.generation.get()) {
            inner.arrived.set(inner.arrived.get() - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDuration, Simulation, now, sleep};

    /// A future cancelled by `event` set at `set_at` ps; it would finish at
    /// `done_at`. Its output and the instant it ended.
    fn cancelled_at(set_at: u64, done_at: u64) -> (Option<u64>, u64) {
        let mut simulation = Simulation::new();
        let cancel = Event::new("cancel");
        let work = {
            let cancel = cancel.clone();
            simulation.spawn("work", async move {
                let work = std::pin::pin!(async move {
                    sleep(SimDuration::from_ps(done_at)).await;
                    done_at
                });
                (cancel.cancels(work).await, now().as_ps())
            })
        };
        simulation.spawn("canceller", async move {
            sleep(SimDuration::from_ps(set_at)).await;
            cancel.set();
        });
        simulation.run().unwrap();
        work.output().unwrap()
    }

    #[test]
    fn cancels_ends_a_future_when_the_event_is_set_first() {
        assert_eq!(cancelled_at(30, 100), (None, 30));
        assert_eq!(cancelled_at(100, 30), (Some(30), 30));
    }

    #[test]
    fn event_releases_past_and_future_waiters() {
        let mut simulation = Simulation::new();
        let ready = Event::new("ready");
        let early = {
            let ready = ready.clone();
            simulation.spawn("early", async move {
                ready.wait().await;
                now().as_ps()
            })
        };
        let late = {
            let ready = ready.clone();
            simulation.spawn("late", async move {
                sleep(SimDuration::from_ps(50)).await;
                ready.wait().await;
                now().as_ps()
            })
        };
        simulation.spawn("setter", async move {
            sleep(SimDuration::from_ps(20)).await;
            ready.set();
            ready.set();
        });
        simulation.run().unwrap();
        assert_eq!((early.output().unwrap(), late.output().unwrap()), (20, 50));
    }

    #[test]
    fn barrier_rounds_release_together_with_one_leader() {
        let mut simulation = Simulation::new();
        let barrier = Barrier::new("sync", 3);
        let handles: Vec<_> = (0..3u64)
            .map(|i| {
                let barrier = barrier.clone();
                simulation.spawn(&format!("p{i}"), async move {
                    let mut log = Vec::new();
                    for round in 0..2 {
                        sleep(SimDuration::from_ps(10 * (i + 1) + round)).await;
                        let result = barrier.wait().await;
                        log.push((now().as_ps(), result.is_leader));
                    }
                    log
                })
            })
            .collect();
        simulation.run().unwrap();
        let logs: Vec<_> = handles.into_iter().map(|h| h.output().unwrap()).collect();
        assert_eq!(logs[0], [(30, false), (61, false)]);
        assert_eq!(logs[1], [(30, false), (61, false)]);
        assert_eq!(logs[2], [(30, true), (61, true)]);
    }
}
