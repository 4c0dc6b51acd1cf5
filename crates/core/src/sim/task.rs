//! Spawned tasks: the cell the executor polls (a task's future beside its
//! own waker), the wrapper that stores a task's result and the
//! [`JoinHandle`] that hands it over.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::error::{Describe, JoinError, Waiting};
use super::executor::with_current_core;
use super::waker::TaskWaker;

/// What the executor polls: a task's future with the waker it is polled
/// with and the state its [`JoinHandle`] reads, in one allocation
/// (ADR-0052), so a poll reads the waker from the cache line it is about to
/// touch anyway and the executor's slot need not hold it.
pub(crate) trait TaskFuture {
    /// Polls the task with its own waker, after storing that waker's data
    /// pointer in `polling` (the executor's note of whose poll runs).
    fn poll_task(self: Pin<&mut Self>, polling: &Cell<*const ()>) -> Poll<()>;
}

pin_project_lite::pin_project! {
    /// A task: its waker, its future (dropped in place when it finishes),
    /// and the guard that hands its output to its [`JoinHandle`] or marks
    /// the handle cancelled if the task is dropped first. A struct, not an
    /// `async` block around the future: a block would hold the future twice
    /// (as captured and as awaited), doubling every task's size.
    pub(crate) struct TaskCell<F: Future> {
        waker: Arc<TaskWaker>,
        #[pin]
        future: Option<F>,
        guard: CancelOnDrop<F::Output>,
    }
}

impl<F: Future> TaskCell<F> {
    /// The cell of a task named `name` polled with `waker`, and the handle
    /// that reads its output.
    pub fn new(waker: Arc<TaskWaker>, name: Rc<str>, future: F) -> (Self, JoinHandle<F::Output>) {
        let state = Rc::new(JoinState {
            name,
            outcome: RefCell::new(Outcome::Running),
            waiter: RefCell::new(None),
        });
        let cell = TaskCell {
            waker,
            future: Some(future),
            guard: CancelOnDrop(state.clone()),
        };
        (cell, JoinHandle { state })
    }
}

impl<F: Future> TaskFuture for TaskCell<F> {
    #[inline]
    fn poll_task(self: Pin<&mut Self>, polling: &Cell<*const ()>) -> Poll<()> {
        let mut this = self.project();
        polling.set(Arc::as_ptr(this.waker).cast());
        let Some(future) = this.future.as_mut().as_pin_mut() else {
            return Poll::Ready(());
        };
        let waker = TaskWaker::borrowed_waker(this.waker);
        match future.poll(&mut Context::from_waker(&waker)) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(output) => {
                // As an `async` block would: the future's remains go before
                // the output is handed over.
                this.future.set(None);
                this.guard.0.settle(Outcome::Finished(output));
                Poll::Ready(())
            }
        }
    }
}

enum Outcome<T> {
    Running,
    Finished(T),
    Taken,
    Cancelled,
}

struct JoinState<T> {
    name: Rc<str>,
    outcome: RefCell<Outcome<T>>,
    waiter: RefCell<Option<Waker>>,
}

impl<T> JoinState<T> {
    fn settle(&self, outcome: Outcome<T>) {
        *self.outcome.borrow_mut() = outcome;
        if let Some(waker) = self.waiter.borrow_mut().take() {
            waker.wake();
        }
    }
}

impl<T> Describe for JoinState<T> {
    fn describe(&self) -> String {
        format!("task \"{}\"", self.name)
    }
}

/// Marks the handle cancelled if the task is dropped before it finished.
struct CancelOnDrop<T>(Rc<JoinState<T>>);

impl<T> Drop for CancelOnDrop<T> {
    fn drop(&mut self) {
        if matches!(*self.0.outcome.borrow(), Outcome::Running) {
            self.0.settle(Outcome::Cancelled);
        }
    }
}

/// Awaitable result of a spawned task. Await it from another task (or from
/// the host after the run), or read it with [`output`](Self::output) once
/// the run is over.
pub struct JoinHandle<T> {
    state: Rc<JoinState<T>>,
}

impl<T> JoinHandle<T> {
    /// The task's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Whether the task has finished (or was cancelled).
    pub fn is_finished(&self) -> bool {
        !matches!(*self.state.outcome.borrow(), Outcome::Running)
    }

    /// The task's output, without waiting.
    pub fn output(self) -> Result<T, JoinError> {
        self.take()
    }

    fn take(&self) -> Result<T, JoinError> {
        let mut outcome = self.state.outcome.borrow_mut();
        let name = || self.state.name.to_string();
        match std::mem::replace(&mut *outcome, Outcome::Taken) {
            Outcome::Finished(value) => Ok(value),
            Outcome::Running => {
                *outcome = Outcome::Running;
                Err(JoinError::NotFinished(name()))
            }
            Outcome::Cancelled | Outcome::Taken => {
                *outcome = Outcome::Cancelled;
                Err(JoinError::Cancelled(name()))
            }
        }
    }
}

impl<T: 'static> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.take() {
            Err(JoinError::NotFinished(_)) => {
                *self.state.waiter.borrow_mut() = Some(cx.waker().clone());
                with_current_core(|core| {
                    if let Some(core) = core {
                        let state: Rc<dyn Describe> = self.state.clone();
                        core.set_waiting(Waiting::On("join", state));
                    }
                });
                Poll::Pending
            }
            done => Poll::Ready(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Event, Simulation, spawn, yield_now};

    /// A future whose destructor sets an event.
    struct SetOnDrop(Event);

    impl Future for SetOnDrop {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
            Poll::Ready(7)
        }
    }

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.set();
        }
    }

    /// A cell holds its future once (an `async` wrapper held it twice):
    /// the future plus the waker, the guard and the `Option`'s tag.
    #[test]
    fn a_cell_is_its_future_and_three_words() {
        let future = async {
            let data = [1_u64; 8];
            yield_now().await;
            data.iter().sum::<u64>()
        };
        let size = std::mem::size_of_val(&future);
        let waker = TaskWaker::new(
            super::super::waker::TaskId {
                index: 0,
                generation: 0,
            },
            Arc::default(),
        );
        let (cell, _handle) = TaskCell::new(waker, Rc::from("t"), future);
        assert!(size >= 64, "{size}");
        assert_eq!(std::mem::size_of_val(&cell), size + 24);
    }

    /// When a task finishes, its future is dropped before its output is
    /// handed over, as when it was an `async` block: what the drop wakes
    /// runs before the joiner.
    #[test]
    fn a_finished_future_is_dropped_before_its_output_is_handed_over() {
        let mut simulation = Simulation::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let dropped = Event::new("dropped");
        let (log1, log2, wait) = (log.clone(), log.clone(), dropped.clone());
        simulation.spawn("drop_watcher", async move {
            wait.wait().await;
            log1.borrow_mut().push("dropped");
        });
        simulation.spawn("joiner", async move {
            let handle = spawn("finisher", SetOnDrop(dropped));
            let output = handle.await.unwrap();
            log2.borrow_mut()
                .push(if output == 7 { "joined 7" } else { "?" });
        });
        simulation.run().unwrap();
        assert_eq!(*log.borrow(), ["dropped", "joined 7"]);
    }
}
