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
/// with, in one allocation (ADR-0052), so a poll reads the waker from the
/// cache line it is about to touch anyway and the executor's slot need not
/// hold it.
pub(crate) trait TaskFuture {
    /// Polls the task with its own waker, after storing that waker's data
    /// pointer in `polling` (the executor's note of whose poll runs).
    fn poll_task(self: Pin<&mut Self>, polling: &Cell<*const ()>) -> Poll<()>;
}

pin_project_lite::pin_project! {
    /// A task's future and its waker.
    pub(crate) struct TaskCell<F> {
        waker: Arc<TaskWaker>,
        #[pin]
        future: F,
    }
}

impl<F> TaskCell<F> {
    pub fn new(waker: Arc<TaskWaker>, future: F) -> Self {
        TaskCell { waker, future }
    }
}

impl<F: Future<Output = ()>> TaskFuture for TaskCell<F> {
    #[inline]
    fn poll_task(self: Pin<&mut Self>, polling: &Cell<*const ()>) -> Poll<()> {
        let this = self.project();
        polling.set(Arc::as_ptr(this.waker).cast());
        let waker = TaskWaker::borrowed_waker(this.waker);
        this.future.poll(&mut Context::from_waker(&waker))
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

/// Wraps `future` into the output-storing future the executor polls (one
/// allocation, the user's future inline) and the handle that reads it.
pub(crate) fn task_future<F: Future>(
    name: Rc<str>,
    future: F,
) -> (impl Future<Output = ()>, JoinHandle<F::Output>) {
    let state = Rc::new(JoinState {
        name,
        outcome: RefCell::new(Outcome::Running),
        waiter: RefCell::new(None),
    });
    let guard = CancelOnDrop(state.clone());
    let task = async move {
        let guard = guard;
        let output = future.await;
        guard.0.settle(Outcome::Finished(output));
    };
    (task, JoinHandle { state })
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
