//! The timer queue and the futures built on it: [`Sleep`] and [`YieldNow`].
//!
//! Timers are kept in a binary min-heap ordered by (time, sequence), so
//! timers due at the same instant fire in the order they were set. Heap
//! entries are packed 16-byte keys; what to wake sits in a side slab and is
//! a bare task id in the common case. A timer dropped before it fires is
//! cancelled in the slab, so it can never move the clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::causal::NO_LABEL;
use super::error::Waiting;
use super::executor::{Core, current_core};
use super::time::{SimDuration, SimTime};
use super::waker::{TaskId, WakeTarget};

/// Identifies a set timer so it can be re-targeted or cancelled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimerKey {
    time: SimTime,
    seq: u64,
    slot: u32,
}

/// Bits of a heap key holding the target slot; the rest (above the time)
/// hold the sequence number.
const SLOT_BITS: u32 = 24;
const MAX_SEQ: u64 = (1 << (64 - SLOT_BITS)) - 1;

enum SlotTarget {
    Free,
    Task(TaskId),
    Waker(Waker),
    Cancelled,
}

struct Slot {
    seq: u64,
    target: SlotTarget,
    /// The causal log's record of this timer, or `NO_LABEL`.
    sleep: u32,
}

/// Pending timers of one simulation.
///
/// The heap holds packed 16-byte keys `time << 64 | seq << 24 | slot`, so a
/// comparison is one `u128` compare and four keys share a cache line; the
/// slot indexes the target (a task id or a foreign waker) in a reused slab.
#[derive(Default)]
pub(crate) struct TimerQueue {
    heap: BinaryHeap<Reverse<u128>>,
    next_seq: u64,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
}

fn pack(time: SimTime, seq: u64, slot: u32) -> u128 {
    (u128::from(time.as_ps()) << 64) | u128::from(seq << SLOT_BITS) | u128::from(slot)
}

fn unpack_time(key: u128) -> SimTime {
    SimTime::from_ps((key >> 64) as u64)
}

fn unpack_slot(key: u128) -> u32 {
    (key as u32) & ((1 << SLOT_BITS) - 1)
}

impl TimerQueue {
    /// Sets a timer for `time` that wakes `target`; `sleep` is its causal
    /// record (`NO_LABEL` when none is kept), handed back when it fires.
    pub fn add(&mut self, time: SimTime, target: WakeTarget, sleep: u32) -> TimerKey {
        let seq = self.next_seq;
        assert!(seq < MAX_SEQ, "more than 2^40 timers set in one simulation");
        self.next_seq += 1;
        let target = match target {
            WakeTarget::Task(id) => SlotTarget::Task(id),
            WakeTarget::Waker(w) => SlotTarget::Waker(w),
        };
        let slot = self.store(Slot { seq, target, sleep });
        self.heap.push(Reverse(pack(time, seq, slot)));
        TimerKey { time, seq, slot }
    }

    fn store(&mut self, entry: Slot) -> u32 {
        if let Some(slot) = self.free_slots.pop() {
            self.slots[slot as usize] = entry;
            return slot;
        }
        let slot = self.slots.len() as u32;
        assert!(
            slot < 1 << SLOT_BITS,
            "more than 2^24 timers pending at once"
        );
        self.slots.push(entry);
        slot
    }

    fn slot_of(&mut self, key: &TimerKey) -> Option<&mut Slot> {
        self.slots
            .get_mut(key.slot as usize)
            .filter(|slot| slot.seq == key.seq)
    }

    /// Points a pending timer at a new foreign waker (a combinator re-polled
    /// the sleep with a different context).
    pub fn retarget(&mut self, key: &TimerKey, waker: &Waker) {
        if let Some(Slot {
            target: SlotTarget::Waker(stored),
            ..
        }) = self.slot_of(key)
            && !stored.will_wake(waker)
        {
            *stored = waker.clone();
        }
    }

    /// Cancels a timer that has not fired by `now`; it will never move the
    /// clock.
    pub fn cancel(&mut self, key: TimerKey, now: SimTime) {
        if key.time > now
            && let Some(slot) = self.slot_of(&key)
        {
            slot.target = SlotTarget::Cancelled;
        }
    }

    /// The time of the earliest live timer, dropping cancelled ones on top.
    pub fn next_time(&mut self) -> Option<SimTime> {
        while let Some(&Reverse(key)) = self.heap.peek() {
            let slot = unpack_slot(key);
            if !matches!(self.slots[slot as usize].target, SlotTarget::Cancelled) {
                return Some(unpack_time(key));
            }
            self.heap.pop();
            self.release(slot);
        }
        None
    }

    /// Pops the next live timer due exactly at `time`, with its causal
    /// record.
    pub fn pop_due(&mut self, time: SimTime) -> Option<(WakeTarget, u32)> {
        while let Some(&Reverse(key)) = self.heap.peek() {
            if unpack_time(key) != time {
                return None;
            }
            self.heap.pop();
            let slot = unpack_slot(key);
            let sleep = self.slots[slot as usize].sleep;
            match self.release(slot) {
                SlotTarget::Task(id) => return Some((WakeTarget::Task(id), sleep)),
                SlotTarget::Waker(w) => return Some((WakeTarget::Waker(w), sleep)),
                SlotTarget::Cancelled | SlotTarget::Free => {}
            }
        }
        None
    }

    fn release(&mut self, slot: u32) -> SlotTarget {
        self.free_slots.push(slot);
        let entry = &mut self.slots[slot as usize];
        entry.seq = u64::MAX;
        std::mem::replace(&mut entry.target, SlotTarget::Free)
    }

    /// Drops every timer (the run was aborted).
    pub fn clear(&mut self) {
        *self = TimerQueue {
            next_seq: self.next_seq,
            ..TimerQueue::default()
        };
    }
}

/// A point in virtual time a future waits for; cancels its timer on drop.
pub(crate) struct Deadline {
    at: SimTime,
    key: Option<TimerKey>,
    /// What the wait is, for the causal log (`NO_LABEL`: not said).
    label: u32,
}

impl Deadline {
    pub fn new(at: SimTime) -> Self {
        Deadline::labelled(at, NO_LABEL)
    }

    pub fn labelled(at: SimTime, label: u32) -> Self {
        Deadline {
            at,
            key: None,
            label,
        }
    }

    pub fn at(&self) -> SimTime {
        self.at
    }

    /// Ready once the clock has reached the deadline; otherwise sets (once)
    /// a timer that wakes whoever polled.
    #[inline]
    pub fn poll_reached(&mut self, cx: &mut Context<'_>, core: &Core) -> Poll<()> {
        if core.now() >= self.at {
            self.key = None;
            return Poll::Ready(());
        }
        self.wait(cx, core)
    }

    /// The pending half of [`poll_reached`](Self::poll_reached), out of
    /// line so that the ready half inlines into its callers.
    #[inline(never)]
    fn wait(&mut self, cx: &mut Context<'_>, core: &Core) -> Poll<()> {
        match &self.key {
            None => {
                let target = WakeTarget::from_cx(cx, core);
                self.key = Some(core.add_timer(self.at, target, self.label));
            }
            Some(key) => core.retarget_timer(key, cx.waker()),
        }
        core.set_waiting(Waiting::Timer(self.at));
        Poll::Pending
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            super::executor::with_current_core(|core| {
                if let Some(core) = core {
                    core.cancel_timer(key);
                }
            });
        }
    }
}

/// Future returned by [`sleep`] and [`sleep_until`].
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    deadline: Deadline,
}

impl Sleep {
    /// The instant this sleep ends.
    pub fn deadline(&self) -> SimTime {
        self.deadline.at()
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let core = current_core("sleep");
        self.deadline.poll_reached(cx, core)
    }
}

/// Suspends the calling task for `d` of virtual time.
///
/// Panics outside a running simulation, or if the end overflows the clock.
pub fn sleep(d: SimDuration) -> Sleep {
    let now = current_core("sleep").now();
    sleep_until(now + d)
}

/// Suspends the calling task until virtual time `t` (at once if `t` is past).
pub fn sleep_until(t: SimTime) -> Sleep {
    Sleep {
        deadline: Deadline::new(t),
    }
}

/// [`sleep_until`] with a label for the causal log (ADR-0028): what the
/// wait is, as a number the caller's layer gives meaning to. Takes exactly
/// the time of `sleep_until(t)`.
pub fn sleep_until_labelled(t: SimTime, label: u32) -> Sleep {
    Sleep {
        deadline: Deadline::labelled(t, label),
    }
}

/// Future returned by [`yield_now`].
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Lets every other task runnable at this instant run first; the clock does
/// not move.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}
