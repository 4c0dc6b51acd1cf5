//! [`channel`]: a bounded FIFO link between tasks whose messages become
//! receivable a fixed delivery latency after they are sent.
//!
//! Capacity counts every message sent and not yet received (in flight plus
//! waiting), like credits on a real link: a sender blocks while the channel
//! holds `capacity` messages and is served first-come-first-served when a
//! receive frees a slot. Messages arrive in send order.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::error::Describe;
use super::executor::current_core;
use super::time::{SimDuration, SimTime};
use super::timer::Deadline;
use super::wait::{WaitQueue, Waiter};
use super::waiting_on;

struct Shared<T> {
    name: String,
    capacity: usize,
    latency: SimDuration,
    /// (receivable at, message), in send order.
    messages: RefCell<VecDeque<(SimTime, T)>>,
    /// Slots granted to woken senders that have not pushed yet.
    reserved: Cell<usize>,
    send_queue: WaitQueue,
    receiver: RefCell<Option<Waker>>,
    senders: Cell<usize>,
    receiver_alive: Cell<bool>,
}

impl<T> Shared<T> {
    fn occupancy(&self) -> usize {
        self.messages.borrow().len() + self.reserved.get()
    }

    fn push(&self, message: T) {
        let at = current_core("send").now() + self.latency;
        self.messages.borrow_mut().push_back((at, message));
        self.wake_receiver();
    }

    fn wake_receiver(&self) {
        if let Some(waker) = self.receiver.borrow_mut().take() {
            waker.wake();
        }
    }

    /// A message left the channel: the oldest blocked sender gets its slot.
    fn free_slot(&self) {
        if self.send_queue.grant_next() {
            self.reserved.set(self.reserved.get() + 1);
        }
    }
}

impl<T> Describe for Shared<T> {
    fn describe(&self) -> String {
        let messages = self.messages.borrow();
        let next = match messages.front() {
            Some((at, _)) => format!(", next receivable at {at}"),
            None => String::new(),
        };
        format!(
            "channel \"{}\" (capacity {}, {} held, {} sender(s) blocked{next})",
            self.name,
            self.capacity,
            messages.len() + self.reserved.get(),
            self.send_queue.len()
        )
    }
}

/// Creates a channel named `name` (used in deadlock reports) holding at most
/// `capacity` messages, each receivable `latency` after its send. Panics if
/// `capacity` is zero.
pub fn channel<T: 'static>(
    name: &str,
    capacity: usize,
    latency: SimDuration,
) -> (Sender<T>, Receiver<T>) {
    assert!(
        capacity > 0,
        "channel \"{name}\" needs a capacity of at least 1"
    );
    let shared = Rc::new(Shared {
        name: name.to_owned(),
        capacity,
        latency,
        messages: RefCell::new(VecDeque::with_capacity(capacity)),
        reserved: Cell::new(0),
        send_queue: WaitQueue::default(),
        receiver: RefCell::new(None),
        senders: Cell::new(1),
        receiver_alive: Cell::new(true),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// The message of a send that cannot complete because the receiver is gone.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("send on channel \"{channel}\" failed: the receiver was dropped")]
pub struct SendError<T> {
    /// The channel's name.
    pub channel: String,
    /// The message that was not delivered.
    pub message: T,
}

/// Sending half; clone it for more producers.
pub struct Sender<T: 'static> {
    shared: Rc<Shared<T>>,
}

impl<T: 'static> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.set(self.shared.senders.get() + 1);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T: 'static> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.senders.set(self.shared.senders.get() - 1);
        if self.shared.senders.get() == 0 {
            self.shared.wake_receiver();
        }
    }
}

impl<T: 'static> Sender<T> {
    /// Sends `message`, waiting (FIFO) while the channel is full.
    pub fn send(&self, message: T) -> Send<'_, T> {
        Send {
            shared: &self.shared,
            message: Some(message),
            waiter: None,
        }
    }

    /// Messages sent and not yet received.
    pub fn len(&self) -> usize {
        self.shared.occupancy()
    }

    /// Whether no message is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Future returned by [`Sender::send`].
#[must_use = "futures do nothing unless awaited"]
pub struct Send<'a, T: 'static> {
    shared: &'a Rc<Shared<T>>,
    message: Option<T>,
    waiter: Option<Rc<Waiter>>,
}

/// The message is moved, never pinned, so the future is `Unpin` whatever `T`.
impl<T: 'static> Unpin for Send<'_, T> {}

impl<T: 'static> Send<'_, T> {
    fn deliver(&mut self) -> Result<(), SendError<T>> {
        let message = self.message.take().expect("send polled after completion");
        if !self.shared.receiver_alive.get() {
            return Err(SendError {
                channel: self.shared.name.clone(),
                message,
            });
        }
        self.shared.push(message);
        Ok(())
    }
}

impl<T: 'static> Future for Send<'_, T> {
    type Output = Result<(), SendError<T>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let shared = this.shared;
        if let Some(waiter) = &this.waiter {
            if waiter.is_granted() {
                this.waiter = None;
                shared.reserved.set(shared.reserved.get() - 1);
                return Poll::Ready(this.deliver());
            }
            if !shared.receiver_alive.get() {
                return Poll::Ready(this.deliver());
            }
            waiter.update(cx.waker());
        } else if !shared.receiver_alive.get()
            || (shared.occupancy() < shared.capacity && shared.send_queue.is_empty())
        {
            return Poll::Ready(this.deliver());
        } else {
            this.waiter = Some(shared.send_queue.push(cx.waker()));
        }
        waiting_on("send", shared.clone());
        Poll::Pending
    }
}

impl<T: 'static> Drop for Send<'_, T> {
    fn drop(&mut self) {
        if let Some(waiter) = self.waiter.take() {
            if waiter.is_granted() {
                self.shared.reserved.set(self.shared.reserved.get() - 1);
                self.shared.free_slot();
            } else {
                self.shared.send_queue.remove(&waiter);
            }
        }
    }
}

/// Receiving half (single consumer).
pub struct Receiver<T: 'static> {
    shared: Rc<Shared<T>>,
}

impl<T: 'static> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.receiver_alive.set(false);
        self.shared.send_queue.wake_all();
    }
}

impl<T: 'static> Receiver<T> {
    /// Waits for the next message; `None` once every sender is gone and the
    /// channel is empty.
    pub fn recv(&mut self) -> Recv<'_, T> {
        Recv {
            shared: &self.shared,
            delivery: None,
        }
    }

    /// The next message if one is receivable now.
    pub fn try_recv(&mut self) -> Option<T> {
        let now = current_core("try_recv").now();
        take_receivable(&self.shared, now)
    }

    /// Messages sent and not yet received.
    pub fn len(&self) -> usize {
        self.shared.occupancy()
    }

    /// Whether no message is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn take_receivable<T>(shared: &Shared<T>, now: SimTime) -> Option<T> {
    let mut messages = shared.messages.borrow_mut();
    if messages.front().is_some_and(|(at, _)| *at <= now) {
        let (_, message) = messages.pop_front().expect("checked front");
        drop(messages);
        shared.free_slot();
        Some(message)
    } else {
        None
    }
}

/// Future returned by [`Receiver::recv`].
#[must_use = "futures do nothing unless awaited"]
pub struct Recv<'a, T: 'static> {
    shared: &'a Rc<Shared<T>>,
    delivery: Option<Deadline>,
}

impl<T: 'static> Future for Recv<'_, T> {
    type Output = Option<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        let core = current_core("recv");
        if let Some(message) = take_receivable(this.shared, core.now()) {
            this.delivery = None;
            return Poll::Ready(Some(message));
        }
        let front = this.shared.messages.borrow().front().map(|(at, _)| *at);
        match front {
            Some(at) => {
                let delivery = this.delivery.get_or_insert_with(|| Deadline::new(at));
                let reached = delivery.poll_reached(cx, core);
                debug_assert!(reached.is_pending(), "front message was not receivable");
                Poll::Pending
            }
            None if this.shared.senders.get() == 0 => Poll::Ready(None),
            None => {
                *this.shared.receiver.borrow_mut() = Some(cx.waker().clone());
                waiting_on("recv", this.shared.clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Simulation, now, sleep, spawn};

    #[test]
    fn messages_arrive_after_the_latency_in_send_order() {
        let mut simulation = Simulation::new();
        let (tx, mut rx) = channel::<u32>("link", 8, SimDuration::from_ns(10));
        simulation.spawn("producer", async move {
            tx.send(1).await.unwrap();
            sleep(SimDuration::from_ns(3)).await;
            tx.send(2).await.unwrap();
        });
        let consumer = simulation.spawn("consumer", async move {
            let mut got = Vec::new();
            while let Some(v) = rx.recv().await {
                got.push((v, now().as_ps()));
            }
            got
        });
        simulation.run().unwrap();
        assert_eq!(consumer.output().unwrap(), [(1, 10_000), (2, 13_000)]);
    }

    #[test]
    fn a_full_channel_blocks_senders_first_come_first_served() {
        let mut simulation = Simulation::new();
        let (tx, mut rx) = channel::<&'static str>("credit", 1, SimDuration::ZERO);
        for name in ["a", "b", "c"] {
            let tx = tx.clone();
            simulation.spawn(name, async move { tx.send(name).await.unwrap() });
        }
        drop(tx);
        let consumer = simulation.spawn("consumer", async move {
            let mut got = Vec::new();
            while let Some(v) = rx.recv().await {
                got.push((v, now().as_ps()));
                sleep(SimDuration::from_ps(5)).await;
            }
            got
        });
        simulation.run().unwrap();
        assert_eq!(consumer.output().unwrap(), [("a", 0), ("b", 5), ("c", 10)]);
    }

    #[test]
    fn send_to_a_dropped_receiver_returns_the_message() {
        let mut simulation = Simulation::new();
        let (tx, rx) = channel::<u32>("gone", 1, SimDuration::ZERO);
        drop(rx);
        let sent = simulation.spawn("sender", async move { tx.send(7).await });
        simulation.run().unwrap();
        let error = sent.output().unwrap().unwrap_err();
        assert_eq!(error.message, 7);
        assert!(error.to_string().contains("\"gone\""));
    }

    #[test]
    fn blocked_sender_fails_when_the_receiver_goes_away() {
        let mut simulation = Simulation::new();
        let (tx, rx) = channel::<u32>("full", 1, SimDuration::ZERO);
        let sent = simulation.spawn("sender", async move {
            tx.send(1).await.unwrap();
            tx.send(2).await
        });
        simulation.spawn("dropper", async move {
            sleep(SimDuration::from_ns(1)).await;
            drop(rx);
        });
        simulation.run().unwrap();
        assert_eq!(sent.output().unwrap().unwrap_err().message, 2);
    }

    #[test]
    fn receiver_sees_a_message_sent_by_a_task_spawned_later() {
        let mut simulation = Simulation::new();
        let (tx, mut rx) = channel::<u32>("late", 2, SimDuration::from_ps(1));
        let got = simulation.spawn("receiver", async move {
            spawn("sender", async move {
                sleep(SimDuration::from_ps(4)).await;
                tx.send(9).await.unwrap();
            });
            (rx.recv().await, now().as_ps())
        });
        simulation.run().unwrap();
        assert_eq!(got.output().unwrap(), (Some(9), 5));
    }
}
