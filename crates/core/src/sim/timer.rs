//! The timer queue and the futures built on it: [`Sleep`] and [`YieldNow`].
//!
//! Timers are kept in a binary min-heap ordered by (time, sequence), so
//! timers due at the same instant fire in the order they were set. Heap
//! entries are packed 16-byte keys whose low bits (the tag) say whom to
//! wake. A task's first pending timer is keyed by the task itself: the tag
//! is the task's slot, and the executor's slot holds the timer's sequence
//! number while it is armed (ADR-0052); a fired or stale entry whose
//! sequence number is no longer armed there is skipped. Any other timer
//! (a second one of the same task, a foreign waker's, or any timer while
//! the causal log is kept) has its target in a side slab. A timer dropped
//! before it fires is cancelled (disarmed, or marked in the slab), so it
//! can never move the clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::causal::NO_LABEL;
use super::error::Waiting;
use super::executor::{Core, current_core};
use super::time::{SimDuration, SimTime};
use super::waker::{TaskId, WakeTarget};

/// Identifies a set timer so it can be re-targeted or cancelled: the low
/// 64 bits of its heap key (`seq << 24 | tag`; sequence numbers start at
/// 1, so an `Option<TimerKey>` is 8 bytes in every future that sleeps).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimerKey(NonZeroU64);

// A pending timer adds 8 bytes to a future that sleeps.
const _: () = assert!(std::mem::size_of::<Option<TimerKey>>() == 8);

impl TimerKey {
    fn new(seq: u64, tag: u32) -> Self {
        TimerKey(
            NonZeroU64::new(seq << TAG_BITS | u64::from(tag)).expect("sequence numbers start at 1"),
        )
    }

    fn tag(self) -> u32 {
        (self.0.get() as u32) & ((1 << TAG_BITS) - 1)
    }

    /// The task slot of a task-keyed timer; `None` for a slab timer.
    pub fn task_slot(self) -> Option<u32> {
        let tag = self.tag();
        (tag & TASK_TIMER != 0).then_some(tag & !TASK_TIMER)
    }

    /// The timer's sequence number (unique within its simulation).
    pub fn seq(self) -> u64 {
        self.0.get() >> TAG_BITS
    }
}

/// Bits of a heap key holding the tag; the rest (above the time) hold the
/// sequence number.
const TAG_BITS: u32 = 24;
const MAX_SEQ: u64 = (1 << (64 - TAG_BITS)) - 1;
/// The tag bit of a task-keyed timer; the tag's other bits are the slot.
const TASK_TIMER: u32 = 1 << (TAG_BITS - 1);

/// A task slot's armed sequence number when it has no task-keyed timer.
pub(crate) const NOT_ARMED: u64 = u64::MAX;

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

/// A timer due now, as [`TimerQueue::pop_due`] hands it over.
pub(crate) enum Due {
    /// A task-keyed timer: wake the task in `slot` if its armed sequence
    /// number is still `seq` (otherwise the timer was cancelled).
    Task { slot: u32, seq: u64 },
    /// A slab timer's target and causal record (`NO_LABEL` when none).
    Target(WakeTarget, u32),
}

/// Pending timers of one simulation.
///
/// The heap holds packed 16-byte keys `time << 64 | seq << 24 | tag`, so a
/// comparison is one `u128` compare and four keys share a cache line; the
/// tag is a task slot (task-keyed timers) or indexes the target (a task id
/// or a foreign waker) in a reused slab.
pub(crate) struct TimerQueue {
    heap: BinaryHeap<Reverse<u128>>,
    next_seq: u64,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
}

impl Default for TimerQueue {
    fn default() -> Self {
        TimerQueue {
            heap: BinaryHeap::new(),
            next_seq: 1,
            slots: Vec::new(),
            free_slots: Vec::new(),
        }
    }
}

fn pack(time: SimTime, seq: u64, tag: u32) -> u128 {
    (u128::from(time.as_ps()) << 64) | u128::from(seq << TAG_BITS) | u128::from(tag)
}

fn unpack_time(key: u128) -> SimTime {
    SimTime::from_ps((key >> 64) as u64)
}

fn unpack_seq(key: u128) -> u64 {
    (key as u64) >> TAG_BITS
}

fn unpack_tag(key: u128) -> u32 {
    (key as u32) & ((1 << TAG_BITS) - 1)
}

impl TimerQueue {
    /// Whether a task in slot `slot` can have a task-keyed timer (the tag
    /// holds slots below 2^23; tasks beyond use the slab).
    pub fn keys_task(slot: u32) -> bool {
        slot < TASK_TIMER
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        assert!(seq < MAX_SEQ, "more than 2^40 timers set in one simulation");
        self.next_seq += 1;
        seq
    }

    /// Sets a timer for `time` keyed by task slot `slot` (see
    /// [`keys_task`](Self::keys_task)); the caller arms the slot with the
    /// key's sequence number.
    #[inline]
    pub fn add_for_task(&mut self, time: SimTime, slot: u32) -> TimerKey {
        debug_assert!(Self::keys_task(slot));
        let seq = self.take_seq();
        let tag = slot | TASK_TIMER;
        self.heap.push(Reverse(pack(time, seq, tag)));
        TimerKey::new(seq, tag)
    }

    /// Sets a timer for `time` that wakes `target`; `sleep` is its causal
    /// record (`NO_LABEL` when none is kept), handed back when it fires.
    pub fn add(&mut self, time: SimTime, target: WakeTarget, sleep: u32) -> TimerKey {
        let seq = self.take_seq();
        let target = match target {
            WakeTarget::Task(id) => SlotTarget::Task(id),
            WakeTarget::Waker(w) => SlotTarget::Waker(w),
        };
        let tag = self.store(Slot { seq, target, sleep });
        self.heap.push(Reverse(pack(time, seq, tag)));
        TimerKey::new(seq, tag)
    }

    fn store(&mut self, entry: Slot) -> u32 {
        if let Some(slot) = self.free_slots.pop() {
            self.slots[slot as usize] = entry;
            return slot;
        }
        let slot = self.slots.len() as u32;
        assert!(
            slot < TASK_TIMER,
            "more than 2^23 slab timers pending at once"
        );
        self.slots.push(entry);
        slot
    }

    /// The slab entry of a pending slab timer (a fired one's entry was
    /// released or holds another sequence number).
    fn slot_of(&mut self, key: TimerKey) -> Option<&mut Slot> {
        if key.task_slot().is_some() {
            return None;
        }
        self.slots
            .get_mut(key.tag() as usize)
            .filter(|slot| slot.seq == key.seq())
    }

    /// Points a pending slab timer at a new foreign waker (a combinator
    /// re-polled the sleep with a different context).
    pub fn retarget(&mut self, key: TimerKey, waker: &Waker) {
        if let Some(Slot {
            target: SlotTarget::Waker(stored),
            ..
        }) = self.slot_of(key)
            && !stored.will_wake(waker)
        {
            *stored = waker.clone();
        }
    }

    /// Cancels a slab timer that has not fired; it will never move the
    /// clock. (A task-keyed timer is cancelled by disarming its slot.)
    pub fn cancel(&mut self, key: TimerKey) {
        if let Some(slot) = self.slot_of(key) {
            slot.target = SlotTarget::Cancelled;
        }
    }

    /// The time of the earliest live timer, dropping cancelled ones on top;
    /// `armed(slot)` is the sequence number task slot `slot` is armed with.
    pub fn next_time(&mut self, armed: impl Fn(u32) -> u64) -> Option<SimTime> {
        while let Some(&Reverse(key)) = self.heap.peek() {
            let tag = unpack_tag(key);
            if tag & TASK_TIMER != 0 {
                if armed(tag & !TASK_TIMER) == unpack_seq(key) {
                    return Some(unpack_time(key));
                }
                self.heap.pop();
                continue;
            }
            if !matches!(self.slots[tag as usize].target, SlotTarget::Cancelled) {
                return Some(unpack_time(key));
            }
            self.heap.pop();
            self.release(tag);
        }
        None
    }

    /// Pops the next timer due exactly at `time`: a task-keyed one as it is
    /// (the caller checks it is still armed), a slab one only if live.
    pub fn pop_due(&mut self, time: SimTime) -> Option<Due> {
        while let Some(&Reverse(key)) = self.heap.peek() {
            if unpack_time(key) != time {
                return None;
            }
            self.heap.pop();
            let tag = unpack_tag(key);
            if tag & TASK_TIMER != 0 {
                let (slot, seq) = (tag & !TASK_TIMER, unpack_seq(key));
                return Some(Due::Task { slot, seq });
            }
            let sleep = self.slots[tag as usize].sleep;
            match self.release(tag) {
                SlotTarget::Task(id) => return Some(Due::Target(WakeTarget::Task(id), sleep)),
                SlotTarget::Waker(w) => return Some(Due::Target(WakeTarget::Waker(w), sleep)),
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
            Some(key) => core.retarget_timer(*key, cx.waker()),
        }
        core.set_waiting(Waiting::Timer);
        Poll::Pending
    }
}

impl Drop for Deadline {
    /// Inlined: most deadlines are dropped after they were reached, with no
    /// timer left to cancel (ADR-0063).
    #[inline]
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            cancel(key);
        }
    }
}

/// Cancels the pending timer `key` of a dropped [`Deadline`].
#[inline(never)]
fn cancel(key: TimerKey) {
    super::executor::with_current_core(|core| {
        if let Some(core) = core {
            core.cancel_timer(key);
        }
    });
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
