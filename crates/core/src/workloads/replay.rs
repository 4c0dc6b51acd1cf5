//! A Chakra step's repeated collectives and sends replayed
//! (`simulation.repeats: replay`, ADR-0107, ADR-0114).
//!
//! The members of a call (a group's collective, or a send with its
//! receive) meet before it: the call starts when the last member arrives.
//! The first call of each key (its [`Shape`] placed up to the machine's
//! symmetry, and its company) then runs on the machine, and each member's
//! time from the meeting to its end is kept; every later call of that key
//! takes, per member, that time, with no message sent. A call met while
//! its key's first still runs follows it: each member takes its
//! counterpart's time once that member has left. A step of thousands of
//! identical calls costs a few simulated ones.
//!
//! Exact where a repeat's members arrive together (as the first call's
//! did: the meeting is where both are timed from) and nothing else
//! crosses the collective's links while it runs; otherwise the repeat
//! neither feels nor causes contention, and the first call's members were
//! held at the meeting where a plain run starts each on arrival. Both
//! are what ADR-0107 accepts; `scale --compare`-style cross-checks against
//! `simulate` print the error.
//!
//! Knows the runner's call identity (group key and the call's place in
//! the group's order), nothing of the machine.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::chakra::CommType;
use crate::sim::{self, Event, SimDuration, SimTime};
use crate::topology::SipArrangement;

/// What a call is: a group's collective, or one send with its receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    /// A collective of the group's members.
    Collective(CommType),
    /// A send and the matching receive: the members are sender and
    /// receiver, in that order.
    SendRecv,
}

/// What a call does, wherever it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Shape {
    pub kind: Kind,
    /// Its bytes per rank.
    pub bytes: u64,
}

/// The machine's translations, which map one group's SIPs and routes onto
/// another's: a ring's rotations, a torus' shifts in both directions (SIPs
/// row-major); a grid without wrap has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Symmetry {
    /// No two places are alike.
    None,
    /// A ring of this many SIPs.
    Ring(usize),
    /// A torus of this many columns and rows.
    Torus(usize, usize),
}

impl Symmetry {
    /// The symmetry of `arrangement`.
    pub(super) fn of(arrangement: SipArrangement) -> Symmetry {
        match arrangement {
            SipArrangement::Ring { n } => Symmetry::Ring(n as usize),
            SipArrangement::Torus { w, h } => Symmetry::Torus(w as usize, h as usize),
            SipArrangement::Mesh { .. } => Symmetry::None,
        }
    }

    /// `ranks` as seen from `origin`: the ranks they are when the
    /// translation that takes `origin` to rank 0 is applied.
    fn seen_from(self, ranks: &[usize], origin: usize) -> Vec<usize> {
        let shift = |r: usize| match self {
            Symmetry::None => r,
            Symmetry::Ring(n) => (r + n - origin % n) % n,
            Symmetry::Torus(w, h) => {
                let (x, y) = (r % w, r / w);
                let (ox, oy) = (origin % w, origin / w);
                (y + h - oy) % h * w + (x + w - ox) % w
            }
        };
        ranks.iter().map(|&r| shift(r)).collect()
    }
}

/// One call: the group's key and the call's place in the group's order
/// (every member makes a group's calls in the same order).
pub(super) type CallId = (String, usize);

/// A call as seen from its first member's SIP: its shape and its
/// members' ranks, translated so the first member is rank 0 (the ranks
/// themselves where the machine has no symmetry).
type Placed = (Shape, Vec<usize>);

/// What a call's times are kept and looked up by: the call placed, and
/// the calls already running on one of its SIPs when its members met (its
/// company), each as the members it shares, sorted (ADR-0114). Calls alike
/// up to the machine's symmetry, meeting alike company, share one first
/// call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    call: Placed,
    company: Vec<Company>,
}

/// A call running on some of a meeting call's SIPs: its shape, how many
/// members it has, and which of the meeting call's members (their places
/// in its group) it runs on.
type Company = (Shape, usize, Vec<usize>);

/// What a member does once every member has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    /// Run the collective on the machine.
    Simulate,
    /// Take this long, sending nothing.
    Replay(SimDuration),
}

/// How many collective calls ran and how many were replayed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    /// Calls run on the machine (each a first of its key).
    pub simulated: u64,
    /// Calls that took their first's times.
    pub replayed: u64,
}

/// A simulated call's time per member from its meeting, each set as the
/// member leaves: what its followers wait for.
struct Times {
    taken: Vec<Cell<Option<SimDuration>>>,
    left: Vec<Event>,
}

impl Times {
    fn new(members: usize, call: &CallId) -> Times {
        let name = |m: usize| format!("et.replay.{}#{}.member{m}", call.0, call.1);
        Times {
            taken: vec![Cell::new(None); members],
            left: (0..members).map(|m| Event::new(&name(m))).collect(),
        }
    }
}

/// What a met call does, fixed when its last member arrives.
#[derive(Clone)]
enum Role {
    /// The first of its key: it runs on the machine.
    Simulated(Rc<Times>),
    /// Its key's first call has ended: its times, per member.
    Replayed(Rc<[SimDuration]>),
    /// Its key's first call is still running: each member takes that
    /// call's member's time once it is known (the first call met no
    /// later, so it is known by the time it is due).
    Following(Rc<Times>),
}

/// One call's meeting.
struct Meeting {
    members: usize,
    arrived: usize,
    left: usize,
    all_in: Rc<Event>,
    /// When the last member arrived.
    at: SimTime,
    /// Its key and its role, fixed when the last member arrived.
    key: Option<Key>,
    role: Option<Role>,
}

/// A call from its meeting until its last member leaves.
struct Running {
    shape: Shape,
    ranks: Rc<[usize]>,
}

/// The meetings in progress, the calls running, the first calls still
/// running, and the first times of every key seen.
pub(super) struct Replays {
    symmetry: Symmetry,
    meetings: RefCell<BTreeMap<CallId, Meeting>>,
    running: RefCell<BTreeMap<CallId, Running>>,
    leading: RefCell<BTreeMap<Key, Rc<Times>>>,
    first: RefCell<BTreeMap<Key, Rc<[SimDuration]>>>,
    counts: Cell<ReplayCounts>,
}

impl Replays {
    /// No call met yet, on a machine of `symmetry`.
    pub(super) fn new(symmetry: Symmetry) -> Replays {
        Replays {
            symmetry,
            meetings: RefCell::default(),
            running: RefCell::default(),
            leading: RefCell::default(),
            first: RefCell::default(),
            counts: Cell::default(),
        }
    }

    /// Member `member` of `ranks` arrives at `call` of `shape`, waits for
    /// the others, and learns its turn.
    pub(super) async fn meet(
        &self,
        call: &CallId,
        shape: &Shape,
        ranks: &Rc<[usize]>,
        member: usize,
    ) -> Turn {
        let all_in = self.arrive(call, shape, ranks);
        all_in.wait().await;
        let (role, at) = {
            let meetings = self.meetings.borrow();
            let meeting = &meetings[call];
            (meeting.role.clone(), meeting.at)
        };
        match role.expect("the last member to arrive gives the call its role") {
            Role::Simulated(_) => Turn::Simulate,
            Role::Replayed(times) => Turn::Replay(times[member]),
            Role::Following(first) => {
                first.left[member].wait().await;
                let taken = first.taken[member].get();
                let taken = taken.expect("a member's time is kept before it leaves");
                Turn::Replay(at + taken - sim::now())
            }
        }
    }

    /// Counts an arrival; the last one fixes the call's start, its key
    /// and whether it replays.
    fn arrive(&self, call: &CallId, shape: &Shape, ranks: &Rc<[usize]>) -> Rc<Event> {
        let members = ranks.len();
        let mut meetings = self.meetings.borrow_mut();
        let meeting = meetings.entry(call.clone()).or_insert_with(|| Meeting {
            members,
            arrived: 0,
            left: 0,
            all_in: Rc::new(Event::new(&format!("et.meeting.{}#{}", call.0, call.1))),
            at: SimTime::ZERO,
            key: None,
            role: None,
        });
        meeting.arrived += 1;
        if meeting.arrived == members {
            let origin = ranks[0];
            let key = Key {
                call: (*shape, self.symmetry.seen_from(ranks, origin)),
                company: self.company(ranks),
            };
            meeting.at = sim::now();
            let role = self.role(&key, members, call);
            self.count(!matches!(role, Role::Simulated(_)));
            meeting.role = Some(role);
            meeting.key = Some(key);
            let running = Running {
                shape: *shape,
                ranks: ranks.clone(),
            };
            self.running.borrow_mut().insert(call.clone(), running);
            meeting.all_in.set();
        }
        meeting.all_in.clone()
    }

    /// The role of a call of `key`: replayed if its first call has ended,
    /// following it if it runs, else simulated (and the first).
    fn role(&self, key: &Key, members: usize, call: &CallId) -> Role {
        if let Some(times) = self.first.borrow().get(key) {
            return Role::Replayed(times.clone());
        }
        if let Some(first) = self.leading.borrow().get(key) {
            return Role::Following(first.clone());
        }
        let times = Rc::new(Times::new(members, call));
        self.leading.borrow_mut().insert(key.clone(), times.clone());
        Role::Simulated(times)
    }

    /// The calls running on one of `ranks`, each as the members of
    /// `ranks` it shares, sorted.
    fn company(&self, ranks: &[usize]) -> Vec<Company> {
        let running = self.running.borrow();
        let shared = |other: &Running| -> Vec<usize> {
            let on = |&(_, r): &(usize, &usize)| other.ranks.contains(r);
            ranks
                .iter()
                .enumerate()
                .filter(on)
                .map(|(m, _)| m)
                .collect()
        };
        let mut company: Vec<Company> = running
            .values()
            .map(|r| (r.shape, r.ranks.len(), shared(r)))
            .filter(|(.., members)| !members.is_empty())
            .collect();
        company.sort();
        company
    }

    fn count(&self, replayed: bool) {
        let mut counts = self.counts.get();
        match replayed {
            true => counts.replayed += 1,
            false => counts.simulated += 1,
        }
        self.counts.set(counts);
    }

    /// Member `member` has finished `call`: a simulated call keeps its
    /// time from the meeting; the last to leave closes the meeting and, if
    /// it was simulated, makes its times its key's.
    pub(super) fn leave(&self, call: &CallId, member: usize) {
        let mut meetings = self.meetings.borrow_mut();
        let Some(meeting) = meetings.get_mut(call) else {
            return;
        };
        if let Some(Role::Simulated(times)) = &meeting.role {
            times.taken[member].set(Some(sim::now() - meeting.at));
            times.left[member].set();
        }
        meeting.left += 1;
        if meeting.left < meeting.members {
            return;
        }
        self.running.borrow_mut().remove(call);
        let Some(meeting) = meetings.remove(call) else {
            return;
        };
        if let (Some(Role::Simulated(times)), Some(key)) = (meeting.role, meeting.key) {
            self.leading.borrow_mut().remove(&key);
            let taken: Option<Vec<SimDuration>> = times.taken.iter().map(Cell::get).collect();
            let taken = taken.expect("every member has left");
            self.first
                .borrow_mut()
                .entry(key)
                .or_insert_with(|| taken.into());
        }
    }

    /// The calls simulated and replayed so far.
    pub(super) fn counts(&self) -> ReplayCounts {
        self.counts.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Simulation;

    fn shape(bytes: u64) -> Shape {
        Shape {
            kind: Kind::Collective(CommType::AllReduce),
            bytes,
        }
    }

    /// Two members call the same shape twice and a new shape once; the
    /// "collective" is a sleep of 10 ps × (member + 1) from the meeting.
    /// The second call replays the first's times, the new shape is
    /// simulated; member 1 arrives late at the second call, so its
    /// replayed time is counted from its late arrival.
    #[test]
    fn a_repeat_takes_the_first_calls_time_per_member_from_the_meeting() {
        let replays = Rc::new(Replays::new(Symmetry::None));
        let mut simulation = Simulation::new();
        let ends = Rc::new(RefCell::new(Vec::new()));
        for member in 0..2usize {
            let (replays, ends) = (replays.clone(), ends.clone());
            let ranks: Rc<[usize]> = Rc::new([0, 1]);
            simulation.spawn(&format!("m{member}"), async move {
                let calls = [
                    (0, shape(8), 0u64),
                    (1, shape(8), 5 * member as u64),
                    (2, shape(16), 0),
                ];
                for (k, shape, late) in calls {
                    sim::sleep(SimDuration::from_ps(late)).await;
                    let call = ("tp0".to_string(), k);
                    let turn = replays.meet(&call, &shape, &ranks, member).await;
                    let took = SimDuration::from_ps(10 * (member as u64 + 1));
                    match turn {
                        Turn::Simulate => sim::sleep(took).await,
                        Turn::Replay(time) => sim::sleep(time).await,
                    }
                    replays.leave(&call, member);
                    ends.borrow_mut().push((member, k, turn, sim::now()));
                }
            });
        }
        simulation.run().unwrap();
        let ends = ends.borrow();
        let at = |m, k| ends.iter().find(|e| e.0 == m && e.1 == k).copied().unwrap();
        let ps = |t: SimTime| (t - SimTime::ZERO).as_ps();
        // Call 0 at 0: ends at 10 and 20. Call 1 meets at 20 + 5 = 25.
        assert_eq!(ps(at(0, 0).3), 10);
        assert_eq!(ps(at(1, 0).3), 20);
        assert_eq!(at(0, 1).2, Turn::Replay(SimDuration::from_ps(10)));
        assert_eq!((ps(at(0, 1).3), ps(at(1, 1).3)), (35, 45));
        assert_eq!(at(0, 2).2, Turn::Simulate);
        let counts = replays.counts();
        assert_eq!((counts.simulated, counts.replayed), (2, 1));
    }

    /// Two groups alike up to a ring's rotation, the second meeting 3 ps
    /// after the first while the first still runs: the second follows
    /// it, each member taking its counterpart's time from its own
    /// meeting, and sends nothing.
    #[test]
    fn a_call_met_while_its_keys_first_runs_follows_it() {
        let replays = Rc::new(Replays::new(Symmetry::Ring(4)));
        let mut simulation = Simulation::new();
        let ends = Rc::new(RefCell::new(Vec::new()));
        for (group, first_rank, late) in [("a", 0usize, 0u64), ("b", 2, 3)] {
            for member in 0..2usize {
                let (replays, ends) = (replays.clone(), ends.clone());
                let ranks: Rc<[usize]> = Rc::new([first_rank, first_rank + 1]);
                simulation.spawn(&format!("{group}{member}"), async move {
                    sim::sleep(SimDuration::from_ps(late)).await;
                    let call = (group.to_string(), 0);
                    let turn = replays.meet(&call, &shape(8), &ranks, member).await;
                    match turn {
                        Turn::Simulate => {
                            sim::sleep(SimDuration::from_ps(10 * (member as u64 + 1))).await
                        }
                        Turn::Replay(time) => sim::sleep(time).await,
                    }
                    replays.leave(&call, member);
                    let end = (sim::now() - SimTime::ZERO).as_ps();
                    ends.borrow_mut()
                        .push((group, member, turn == Turn::Simulate, end));
                });
            }
        }
        simulation.run().unwrap();
        let mut ends = ends.borrow().clone();
        ends.sort();
        assert_eq!(
            ends,
            [
                ("a", 0, true, 10),
                ("a", 1, true, 20),
                ("b", 0, false, 13),
                ("b", 1, false, 23)
            ]
        );
        let counts = replays.counts();
        assert_eq!((counts.simulated, counts.replayed), (1, 1));
    }
}
