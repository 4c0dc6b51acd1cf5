//! [`Resource`]: a FIFO server with `capacity` units, the virtual-time
//! counterpart of `simpy.Resource`. Units are handed to waiters in arrival
//! order; a unit is returned when its [`ResourceGuard`] is dropped.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::error::Describe;
use super::wait::{WaitQueue, Waiter};
use super::waiting_on;

struct Inner {
    name: String,
    capacity: usize,
    in_use: Cell<usize>,
    queue: WaitQueue,
}

impl Inner {
    /// Hands the unit to the oldest waiter, or frees it.
    fn release(&self) {
        if !self.queue.grant_next() {
            self.in_use.set(self.in_use.get() - 1);
        }
    }
}

impl Describe for Inner {
    fn describe(&self) -> String {
        format!(
            "resource \"{}\" ({}/{} in use, {} queued)",
            self.name,
            self.in_use.get(),
            self.capacity,
            self.queue.len()
        )
    }
}

/// A FIFO server with a fixed number of units. Cloning gives another handle
/// to the same resource.
#[derive(Clone)]
pub struct Resource {
    inner: Rc<Inner>,
}

impl Resource {
    /// A resource named `name` (used in deadlock reports) with `capacity`
    /// units. Panics if `capacity` is zero: such a resource could never be
    /// acquired, and configs are validated before models are built.
    pub fn new(name: &str, capacity: usize) -> Self {
        assert!(
            capacity > 0,
            "resource \"{name}\" needs a capacity of at least 1"
        );
        Resource {
            inner: Rc::new(Inner {
                name: name.to_owned(),
                capacity,
                in_use: Cell::new(0),
                queue: WaitQueue::default(),
            }),
        }
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Total units.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Units held now.
    pub fn in_use(&self) -> usize {
        self.inner.in_use.get()
    }

    /// Tasks waiting for a unit.
    pub fn queued(&self) -> usize {
        self.inner.queue.len()
    }

    /// Waits for a unit (FIFO) and holds it until the guard is dropped.
    pub fn acquire(&self) -> Acquire {
        Acquire {
            resource: self.clone(),
            waiter: None,
        }
    }

    /// Takes a unit if one is free and nobody is queued for it.
    pub fn try_acquire(&self) -> Option<ResourceGuard> {
        let inner = &self.inner;
        if inner.in_use.get() < inner.capacity && inner.queue.is_empty() {
            inner.in_use.set(inner.in_use.get() + 1);
            Some(self.guard())
        } else {
            None
        }
    }

    fn guard(&self) -> ResourceGuard {
        ResourceGuard {
            resource: self.clone(),
        }
    }
}

/// Future returned by [`Resource::acquire`].
#[must_use = "futures do nothing unless awaited"]
pub struct Acquire {
    resource: Resource,
    waiter: Option<Rc<Waiter>>,
}

impl Future for Acquire {
    type Output = ResourceGuard;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ResourceGuard> {
        if let Some(waiter) = &self.waiter {
            if waiter.is_granted() {
                self.waiter = None;
                return Poll::Ready(self.resource.guard());
            }
            waiter.update(cx.waker());
        } else if let Some(guard) = self.resource.try_acquire() {
            return Poll::Ready(guard);
        } else {
            self.waiter = Some(self.resource.inner.queue.push(cx.waker()));
        }
        waiting_on("acquire", self.resource.inner.clone());
        Poll::Pending
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if let Some(waiter) = self.waiter.take() {
            if waiter.is_granted() {
                self.resource.inner.release();
            } else {
                self.resource.inner.queue.remove(&waiter);
            }
        }
    }
}

/// One held unit of a [`Resource`]; dropping it returns the unit.
pub struct ResourceGuard {
    resource: Resource,
}

impl Drop for ResourceGuard {
    fn drop(&mut self) {
        self.resource.inner.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDuration, Simulation, now, sleep};
    use std::cell::RefCell;

    #[test]
    fn units_are_granted_in_arrival_order() {
        let mut simulation = Simulation::new();
        let server = Resource::new("server", 1);
        let log = Rc::new(RefCell::new(Vec::new()));
        for i in 0..3u64 {
            let (server, log) = (server.clone(), log.clone());
            simulation.spawn(&format!("client{i}"), async move {
                let _unit = server.acquire().await;
                log.borrow_mut().push((i, now().as_ps()));
                sleep(SimDuration::from_ps(10)).await;
            });
        }
        simulation.run().unwrap();
        assert_eq!(*log.borrow(), vec![(0, 0), (1, 10), (2, 20)]);
        assert_eq!(server.in_use(), 0);
    }

    #[test]
    fn capacity_two_serves_two_at_once() {
        let mut simulation = Simulation::new();
        let server = Resource::new("pair", 2);
        for i in 0..4 {
            let server = server.clone();
            simulation.spawn(&format!("c{i}"), async move {
                let _unit = server.acquire().await;
                sleep(SimDuration::from_ns(1)).await;
            });
        }
        let stats = simulation.run().unwrap();
        assert_eq!(stats.now.as_ps(), 2_000);
    }

    #[test]
    fn abandoned_acquire_passes_its_grant_on() {
        let mut simulation = Simulation::new();
        let server = Resource::new("server", 1);
        let held = server.try_acquire().unwrap();
        let mut abandoned = Box::pin(server.acquire());
        let waker = futures::task::noop_waker();
        assert!(
            abandoned
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        let late = server.clone();
        let handle = simulation.spawn(
            "late",
            async move { late.acquire().await.resource.in_use() },
        );
        drop(held); // grants the abandoned waiter
        drop(abandoned); // which passes the unit on to "late"
        simulation.run().unwrap();
        assert_eq!(handle.output().unwrap(), 1);
        assert_eq!(server.in_use(), 0);
    }
}
