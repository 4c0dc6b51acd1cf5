//! The causal log of a run: for every poll of every task, what made it
//! runnable (its own timer, or another task's poll at the same instant),
//! and for every timer, the poll that set it and an opaque label. It is
//! what `--explain` walks back from the end of an interval to find the
//! critical path (ADR-0028).
//!
//! Off by default: [`Simulation::record_causes`](super::Simulation::record_causes)
//! turns it on for one simulation; without it the executor pays one
//! `Cell<bool>` test per schedule, poll and timer. Labels are numbers the
//! layers above give [`sleep_until_labelled`](super::sleep_until_labelled)
//! (what a sleep is: a link's service, a memory access, ...); this module
//! only carries them.
//!
//! Knows tasks, polls and virtual time; nothing of hardware or of what a
//! label means.

use super::time::SimTime;

/// A label meaning "none given".
pub const NO_LABEL: u32 = u32::MAX;

/// What made a task runnable for one poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Nothing recorded: the first poll of a task spawned from outside the
    /// simulation, or a wake from outside it.
    External,
    /// The task's own timer: index into [`CausalLog::sleeps`].
    Timer(u32),
    /// Another (or the same) task's poll at the same instant: index into
    /// [`CausalLog::polls`] (a send, an event set, a release, a spawn, a
    /// finished task waking its joiner).
    Poll(u32),
}

/// One poll of one task: 16 bytes (an explained run keeps one per poll,
/// about a million at 64 SIPs × 64 MiB; ADR-0051).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollRecord {
    /// When the poll ran.
    pub time: SimTime,
    /// The task's slot (reused after the task ends; with `time` and the
    /// causes it is unambiguous).
    pub task: u32,
    /// What made the task runnable, packed: see [`PollRecord::cause`].
    cause: u32,
}

// An explained run keeps one per poll.
const _: () = assert!(std::mem::size_of::<PollRecord>() == 16);

/// [`PollRecord::cause`]'s packing: `External` is all ones, a poll index
/// has the top bit set, a timer index has it clear.
const EXTERNAL: u32 = u32::MAX;
const POLL_BIT: u32 = 1 << 31;

impl PollRecord {
    fn new(task: u32, time: SimTime, cause: Cause) -> Self {
        let cause = match cause {
            Cause::External => EXTERNAL,
            Cause::Timer(sleep) => sleep,
            Cause::Poll(poll) => POLL_BIT | poll,
        };
        PollRecord { time, task, cause }
    }

    /// What made the task runnable for this poll.
    pub fn cause(&self) -> Cause {
        match self.cause {
            EXTERNAL => Cause::External,
            c if c & POLL_BIT != 0 => Cause::Poll(c & !POLL_BIT),
            sleep => Cause::Timer(sleep),
        }
    }
}

/// One timer set by a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SleepRecord {
    /// The poll that set it (its start is that poll's time).
    pub poll: u32,
    /// The label the caller gave, or [`NO_LABEL`].
    pub label: u32,
}

/// Everything recorded so far, in the order it happened.
#[derive(Debug, Default, Clone)]
pub struct CausalLog {
    /// Every poll.
    pub polls: Vec<PollRecord>,
    /// Every timer set.
    pub sleeps: Vec<SleepRecord>,
    /// The most bytes the two lists may hold (`None`: no bound).
    budget: Option<u64>,
    /// Where recording stopped because the next record would have passed
    /// the budget.
    overflow: Option<Overflow>,
}

/// Where a causal log stopped at its budget
/// ([`Simulation::record_causes_within`](super::Simulation::record_causes_within)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow {
    /// The bound, in bytes.
    pub budget: u64,
    /// The bytes of the records kept by then.
    pub used: u64,
    /// The simulated time of the record that did not fit.
    pub time: SimTime,
    /// The run's events by then.
    pub events: u64,
}

impl CausalLog {
    /// An empty log that may hold at most `budget` bytes of records.
    pub(crate) fn within(budget: Option<u64>) -> CausalLog {
        CausalLog {
            budget,
            ..CausalLog::default()
        }
    }

    /// Where the log stopped at its budget, if it did.
    pub fn overflow(&self) -> Option<Overflow> {
        self.overflow
    }

    /// Whether one more poll and one more sleep fit in the budget: a list
    /// that is full doubles, or takes its share of what the budget has
    /// left (in proportion to its size), so that together they can fill
    /// it. Otherwise the overflow is noted (at `time`, after `events`).
    pub(crate) fn has_room(&mut self, time: SimTime, events: u64) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        // The common case, checked per record while recording: room in both.
        if self.polls.len() < self.polls.capacity() && self.sleeps.len() < self.sleeps.capacity() {
            return true;
        }
        // An empty list counts as the four records it first grows to.
        let polls = bytes_of(self.polls.capacity().max(4), size_of::<PollRecord>());
        let sleeps = bytes_of(self.sleeps.capacity().max(4), size_of::<SleepRecord>());
        let free = budget.saturating_sub(polls + sleeps);
        let share = |mine: u64| {
            let more = u128::from(free) * u128::from(mine) / u128::from(polls + sleeps);
            mine + u64::try_from(more).unwrap_or(free)
        };
        if grow_within(&mut self.polls, share(polls))
            && grow_within(&mut self.sleeps, share(sleeps))
        {
            return true;
        }
        let used = bytes_of(self.polls.len(), size_of::<PollRecord>())
            + bytes_of(self.sleeps.len(), size_of::<SleepRecord>());
        self.overflow.get_or_insert(Overflow {
            budget,
            used,
            time,
            events,
        });
        false
    }

    /// The time a timer was set.
    pub fn sleep_start(&self, sleep: u32) -> SimTime {
        self.polls[self.sleeps[sleep as usize].poll as usize].time
    }

    pub(crate) fn push_poll(&mut self, task: u32, time: SimTime, cause: Cause) -> u32 {
        let index = index_of(self.polls.len());
        self.polls.push(PollRecord::new(task, time, cause));
        index
    }

    pub(crate) fn push_sleep(&mut self, poll: u32, label: u32) -> u32 {
        let index = index_of(self.sleeps.len());
        self.sleeps.push(SleepRecord { poll, label });
        index
    }
}

/// The bytes of `count` records of `size` bytes.
fn bytes_of(count: usize, size: usize) -> u64 {
    (count as u64).saturating_mul(size as u64)
}

/// Makes room for one more record in `list` within `room` bytes for the
/// whole list: a full list doubles, or grows to what `room` holds; false
/// when it is full and `room` holds no more.
fn grow_within<T>(list: &mut Vec<T>, room: u64) -> bool {
    if list.len() < list.capacity() {
        return true;
    }
    let most = usize::try_from(room / size_of::<T>() as u64).unwrap_or(usize::MAX);
    let grown = (2 * list.capacity()).max(4).min(most);
    if grown <= list.len() {
        return false;
    }
    list.reserve_exact(grown - list.len());
    true
}

/// A record's index: below 2^31 - 1, so that a poll's index, its top bit
/// set, is never [`EXTERNAL`].
fn index_of(len: usize) -> u32 {
    u32::try_from(len)
        .ok()
        .filter(|&i| i < POLL_BIT - 1)
        .expect("more than 2^31 - 1 records in one causal log")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{self, Event, SimDuration, Simulation};

    /// A task that sleeps, then sets an event another task waits on: the
    /// waiter's resuming poll is caused by the setter's poll, whose cause is
    /// its own timer, labelled, set at time 0.
    #[test]
    fn wakes_are_traced_to_the_poll_or_timer_that_caused_them() {
        let mut simulation = Simulation::new();
        simulation.record_causes();
        let event = Event::new("e");
        let set = event.clone();
        simulation.spawn("setter", async move {
            sim::sleep_until_labelled(sim::SimTime::from_ps(700), 42).await;
            set.set();
        });
        let waiter = simulation.spawn("waiter", async move {
            event.wait().await;
            sim::current_poll()
        });
        simulation.run().unwrap();
        let log = simulation.causal_log().unwrap();
        let last = waiter.output().unwrap().unwrap();
        let resumed = log.polls[last as usize];
        assert_eq!(resumed.time.as_ps(), 700);
        let Cause::Poll(setter) = resumed.cause() else {
            panic!("{resumed:?}")
        };
        let setter = log.polls[setter as usize];
        assert_eq!(setter.time.as_ps(), 700);
        let Cause::Timer(sleep) = setter.cause() else {
            panic!("{setter:?}")
        };
        assert_eq!(log.sleeps[sleep as usize].label, 42);
        assert_eq!(log.sleep_start(sleep), sim::SimTime::ZERO);
        assert_eq!(
            log.polls[log.sleeps[sleep as usize].poll as usize].cause(),
            Cause::External
        );
        let _ = SimDuration::ZERO;
    }

    /// Off by default: nothing is kept, and `current_poll` is `None`.
    #[test]
    fn nothing_is_recorded_unless_asked() {
        let mut simulation = Simulation::new();
        let poll = simulation.spawn("t", async {
            sim::sleep(SimDuration::from_ns(1)).await;
            sim::current_poll()
        });
        simulation.run().unwrap();
        assert!(simulation.causal_log().is_none());
        assert_eq!(poll.output().unwrap(), None);
    }

    /// Every cause reads back as packed, the largest indices included.
    #[test]
    fn a_poll_record_keeps_its_cause() {
        let largest = POLL_BIT - 2;
        for cause in [
            Cause::External,
            Cause::Timer(0),
            Cause::Timer(largest),
            Cause::Poll(0),
            Cause::Poll(largest),
        ] {
            let record = PollRecord::new(7, SimTime::from_ps(9), cause);
            assert_eq!((record.cause(), record.task), (cause, 7));
        }
        assert_eq!(index_of(largest as usize), largest);
    }

    /// A spawned task's first poll is caused by its spawner's poll.
    #[test]
    fn a_spawn_is_a_cause() {
        let mut simulation = Simulation::new();
        simulation.record_causes();
        let outer = simulation.spawn("outer", async {
            sim::sleep(SimDuration::from_ns(3)).await;
            let spawner = sim::current_poll().unwrap();
            let child = sim::spawn("child", async { sim::current_poll().unwrap() });
            (spawner, child.await.unwrap())
        });
        simulation.run().unwrap();
        let (spawner, child) = outer.output().unwrap();
        let log = simulation.causal_log().unwrap();
        assert_eq!(log.polls[child as usize].cause(), Cause::Poll(spawner));
    }

    /// A log bounded to 1 KiB stops before passing it, notes where, and
    /// changes no time: 1,000 sleeps end at 1,000 ns either way.
    #[test]
    fn a_bounded_log_stops_at_its_budget_and_changes_no_time() {
        let run = |budget: Option<u64>| {
            let mut simulation = Simulation::new();
            match budget {
                Some(bytes) => simulation.record_causes_within(bytes),
                None => simulation.record_causes(),
            }
            simulation.spawn("sleeper", async {
                for _ in 0..1000 {
                    sim::sleep(SimDuration::from_ns(1)).await;
                }
            });
            simulation.run().unwrap();
            let log = simulation.causal_log().unwrap();
            let bytes = log.polls.capacity() * std::mem::size_of::<PollRecord>()
                + log.sleeps.capacity() * std::mem::size_of::<SleepRecord>();
            (simulation.now(), log.overflow(), bytes, log.polls.len())
        };
        let (free_end, free_overflow, _, free_polls) = run(None);
        let (end, overflow, bytes, polls) = run(Some(1024));
        assert_eq!((free_end, free_overflow), (end, None));
        assert_eq!(end.as_ps(), 1_000_000);
        assert!(
            bytes <= 1024 && polls < free_polls,
            "{bytes} B, {polls} polls"
        );
        let overflow = overflow.expect("the budget was passed");
        assert_eq!(overflow.budget, 1024);
        // The lists grew into the budget, not only to the last doubling
        // that fitted (which held 768 B here): to within a few records.
        assert!(
            overflow.used <= 1024 && overflow.used + 64 >= 1024,
            "{overflow:?}"
        );
        assert!(overflow.time < end && overflow.events > 0, "{overflow:?}");
    }
}
