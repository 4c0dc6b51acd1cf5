//! One IPCQ ring (slots, pointers, doorbells, credits) and one PE's
//! endpoint (its send and receive rings).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::{Future, poll_fn};
use std::rc::Rc;
use std::task::Poll;

use crate::device::{Device, DeviceError, RouteMemo};
use crate::hw::explain::{self, Class, TermKind};
use crate::hw::{Fabric, HeaderCrossing, Route};
use crate::mem::DType;
use crate::sim::SimTime;
use crate::sim::{self, Describe};
use crate::tl::PeCoord;
use crate::topology::{Fidelity, NodeId};

use super::{ConnectError, Dir, IpcqError, IpcqParams, RingSpec};

/// Tasks to wake when something changes; they re-check their condition.
/// Doorbells and credits land only in tasks, so a waiting task is kept as
/// its id (`sim::TaskWakers`): no waker cloned per wait (ADR-0070).
pub(super) type Wakers = sim::TaskWakers;

/// Waits until `check` gives a value, woken through `wakers`; while
/// pending, a deadlock report shows `op` on `what`. Borrows both: nothing
/// is shared until the wait is registered.
pub(super) fn wait_until<'a, T, D: Describe + 'static>(
    op: &'static str,
    what: &'a Rc<D>,
    wakers: &'a Wakers,
    mut check: impl FnMut() -> Option<T> + 'a,
) -> impl Future<Output = T> + 'a {
    poll_fn(move |cx| match check() {
        Some(value) => Poll::Ready(value),
        None => {
            wakers.register(cx, op, what.clone());
            Poll::Pending
        }
    })
}

/// What a sender put in a slot: one segment of a message (a message larger
/// than a slot travels as several, in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Message {
    /// The whole message's shape (kept only under strict validation, the
    /// one check that reads it), dtype and size.
    pub shape: Option<Box<[usize]>>,
    pub dtype: DType,
    pub nbytes: u64,
    /// This segment's index and the message's segment count.
    pub segment: u64,
    pub segments: u64,
}

impl Message {
    /// The segment count of an `nbytes` message over `slot_bytes` slots
    /// (a zero-byte message is one segment).
    pub fn segments(nbytes: u64, slot_bytes: u64) -> u64 {
        if nbytes <= slot_bytes {
            // The usual message: one segment, with no division.
            return 1;
        }
        nbytes.div_ceil(slot_bytes.max(1))
    }
}

/// The pointers of one ring (see the module docs of `ipcq`).
#[derive(Default)]
struct Pointers {
    my_tail: u64,
    peer_head_cache: u64,
    my_head: u64,
    peer_tail_cache: u64,
    /// Receive tickets handed out.
    claimed: u64,
    /// Doorbells landed beyond `peer_tail_cache` (out of order).
    landed: BTreeSet<u64>,
    /// Releases beyond `my_head` (out of order).
    released: BTreeSet<u64>,
    /// A credit message that failed, reported to the sender's next send.
    failure: Option<String>,
    /// Flow mode: credits sent, not yet landed (landing instant, head).
    credits_in_flight: Vec<(SimTime, u64)>,
}

impl Pointers {
    /// Takes in the credits in flight that have landed by `now` (all of
    /// them when `now` is `None`: outside a run, every message has
    /// arrived).
    fn take_landed_credits(&mut self, now: Option<SimTime>) {
        if self.credits_in_flight.is_empty() {
            return;
        }
        let landed = |at: SimTime| now.is_none_or(|now| at <= now);
        let mut head = self.peer_head_cache;
        self.credits_in_flight.retain(|&(at, h)| {
            let keep = !landed(at);
            if !keep {
                head = head.max(h);
            }
            keep
        });
        self.peer_head_cache = head;
    }
}

/// Marks `seq` done and moves `next` (the first not yet done) past every
/// done number; `early` holds those done out of order. The usual in-order
/// case does not touch the set.
fn advance_in_order(next: &mut u64, early: &mut BTreeSet<u64>, seq: u64) {
    if seq != *next {
        early.insert(seq);
        return;
    }
    *next += 1;
    // Usually nothing came early: no look-up in an empty set.
    while !early.is_empty() && early.remove(next) {
        *next += 1;
    }
}

/// What a sender waiting for a slot learns: a slot, or when the next
/// credit in flight lands.
enum Claim {
    Slot(Result<u64, IpcqError>),
    CreditLandsAt(SimTime),
}

/// Whether a sender's wait for a credit looks for a free one first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstLook {
    /// Looks: a free credit is claimed at once.
    Try,
    /// A `try_claim` has just found no credit, at this instant and with
    /// nothing between: the first look would find the same, and is
    /// skipped (ADR-0070).
    Skip,
}

/// One ring: `K` slots at the receiver, one sender.
pub(super) struct Ring {
    pub spec: RingSpec,
    slots: Vec<u64>,
    pub slot_bytes: u64,
    pub doorbell: Route,
    /// The routes of the sender's last copy into a slot (ADR-0057).
    pub copy_routes: RouteMemo,
    credit: Route,
    pointers: RefCell<Pointers>,
    messages: RefCell<Vec<Option<Message>>>,
    /// Per slot, flow mode: how its credit crosses, as its message's
    /// doorbell did (`Fabric::message_crossing`, ADR-0048).
    crossings: Vec<Cell<HeaderCrossing>>,
    /// The sender waiting for a credit.
    credits: Rc<Wakers>,
    /// Every receive of the receiving PE (shared by its rings).
    arrivals: Rc<Wakers>,
}

impl Ring {
    /// Allocates the slots in `spec.space` and finds the routes.
    pub fn new(
        device: &Device,
        spec: RingSpec,
        params: &IpcqParams,
        arrivals: Rc<Wakers>,
    ) -> Result<Ring, ConnectError> {
        let stride = params.slot_stride();
        let base = device.alloc(spec.space, stride * params.slots as u64)?;
        let node = |pe: PeCoord| pe_node(device.fabric(), pe);
        let (sender_node, receiver_node) = (node(spec.sender)?, node(spec.receiver)?);
        let fabric = device.fabric();
        let route = |from, to| -> Result<Route, DeviceError> {
            Ok(fabric.route(&fabric.router().find_path(from, to)?)?)
        };
        Ok(Ring {
            spec,
            slots: (0..params.slots as u64)
                .map(|i| base + i * stride)
                .collect(),
            slot_bytes: params.slot_bytes,
            doorbell: route(sender_node, receiver_node)?,
            copy_routes: RouteMemo::default(),
            credit: route(receiver_node, sender_node)?,
            pointers: RefCell::default(),
            messages: RefCell::new(vec![None; params.slots]),
            crossings: (0..params.slots)
                .map(|_| Cell::new(HeaderCrossing::Hops))
                .collect(),
            credits: Rc::default(),
            arrivals,
        })
    }

    /// `receiver:label`, e.g. `sip0.cube0.pe1:W`.
    pub fn name(&self) -> String {
        format!("{}:{}", self.spec.receiver, self.spec.label)
    }

    pub fn slot_addrs(&self) -> Vec<u64> {
        self.slots.clone()
    }

    /// The slot of sequence number `seq`.
    pub fn slot(&self, seq: u64) -> u64 {
        self.slots[(seq % self.slots.len() as u64) as usize]
    }

    /// Sender: claims the next slot if a credit is free, else `None`.
    /// Errors with a failed credit message.
    pub fn try_claim(&self) -> Option<Result<u64, IpcqError>> {
        let mut p = self.pointers.borrow_mut();
        p.take_landed_credits(Some(sim::now()));
        if let Some(reason) = p.failure.take() {
            let (what, ring) = ("credit", self.name());
            return Some(Err(IpcqError::Transfer { what, ring, reason }));
        }
        let free = p.my_tail - p.peer_head_cache < self.slots.len() as u64;
        free.then(|| {
            p.my_tail += 1;
            Ok(p.my_tail - 1)
        })
    }

    /// Sender: slots claimed so far (`my_tail`).
    pub fn sent(&self) -> u64 {
        self.pointers.borrow().my_tail
    }

    /// Sender: waits for a credit and claims a slot (see `try_claim`),
    /// its first look as `first` says.
    pub async fn claim(self: &Rc<Self>, first: FirstLook) -> Result<u64, IpcqError> {
        let mut missed = first == FirstLook::Skip;
        loop {
            let claim = wait_until("send", self, &self.credits, || {
                let slot = match std::mem::take(&mut missed) {
                    true => None,
                    false => self.try_claim(),
                };
                slot.map(Claim::Slot).or_else(|| {
                    let in_flight = &self.pointers.borrow().credits_in_flight;
                    let next = in_flight.iter().map(|&(at, _)| at).min();
                    next.map(Claim::CreditLandsAt)
                })
            });
            match claim.await {
                Claim::Slot(slot) => return slot,
                Claim::CreditLandsAt(at) => {
                    if explain::recording() {
                        let ps = at.saturating_since(sim::now()).as_ps();
                        explain::push_named(&self.name(), Class::CreditWait, TermKind::Wait, ps);
                    }
                    explain::sleep_until(at).await
                }
            }
        }
    }

    /// Sender: fills the slot of `seq` when its DMA is issued: its
    /// message, and how its doorbell (and so its credit) crosses in flow
    /// mode (ADR-0048). The slot's address.
    pub fn put(&self, seq: u64, message: Message, crossing: HeaderCrossing) -> u64 {
        let index = (seq % self.slots.len() as u64) as usize;
        self.messages.borrow_mut()[index] = Some(message);
        self.crossings[index].set(crossing);
        self.slots[index]
    }

    /// The doorbell of `seq` has landed: the slot is receivable once every
    /// earlier one is.
    pub fn doorbell_landed(&self, seq: u64) {
        {
            let p = &mut *self.pointers.borrow_mut();
            advance_in_order(&mut p.peer_tail_cache, &mut p.landed, seq);
        }
        self.arrivals.wake_all();
    }

    /// Receiver: the next ticket, whether or not it has landed.
    pub fn ticket(&self) -> u64 {
        let mut p = self.pointers.borrow_mut();
        p.claimed += 1;
        p.claimed - 1
    }

    /// Receiver: `n` consecutive tickets; the first.
    pub fn tickets(&self, n: u64) -> u64 {
        let mut p = self.pointers.borrow_mut();
        p.claimed += n;
        p.claimed - n
    }

    /// Receiver: a ticket for a slot that has landed and is not yet
    /// claimed, if there is one.
    pub fn try_ticket(&self) -> Option<u64> {
        let ready = {
            let p = self.pointers.borrow();
            p.claimed < p.peer_tail_cache
        };
        ready.then(|| self.ticket())
    }

    /// Whether `ticket`'s doorbell has landed.
    pub fn has_landed(&self, ticket: u64) -> bool {
        ticket < self.pointers.borrow().peer_tail_cache
    }

    /// Receiver: `ticket`'s message if it has landed (as
    /// [`delivered`](Self::delivered), without a future).
    pub fn try_delivered(&self, ticket: u64) -> Option<Message> {
        self.has_landed(ticket).then(|| self.message(ticket))
    }

    /// Receiver: waits until `ticket` has landed; returns its message.
    pub fn delivered(self: &Rc<Self>, ticket: u64) -> impl Future<Output = Message> + '_ {
        wait_until("recv", self, &self.arrivals, move || {
            self.try_delivered(ticket)
        })
    }

    /// The message of slot `seq`, taken out: each landed slot is received
    /// once, and `put` fills it again before it next lands.
    fn message(&self, seq: u64) -> Message {
        let index = (seq % self.slots.len() as u64) as usize;
        self.messages.borrow_mut()[index]
            .take()
            .expect("a landed slot has its message, received once")
    }

    /// Receiver: releases slot `ticket`; when `my_head` moves, a credit
    /// message (header only) goes back to the sender.
    pub fn release(self: &Rc<Self>, fabric: &Rc<Fabric>, ticket: u64) {
        let head = {
            let p = &mut *self.pointers.borrow_mut();
            let before = p.my_head;
            advance_in_order(&mut p.my_head, &mut p.released, ticket);
            (p.my_head > before).then_some(p.my_head)
        };
        if let Some(head) = head {
            let crossing = self.crossings[(ticket % self.slots.len() as u64) as usize].get();
            self.send_credit(fabric, head, crossing);
        }
    }

    /// In flow mode the credit's landing instant is known when it is sent
    /// (`Fabric::credit_lands`: its header's crossing, ADR-0022, or for
    /// the slot of a message of one packet its route's uncontended
    /// crossing, `crossing`, ADR-0048): it is recorded, and the sender
    /// takes it in at its next claim, with no task of its own (nor any
    /// `--explain` term: no sleep here covers it, ADR-0051). In packet
    /// mode a task carries it.
    fn send_credit(self: &Rc<Self>, fabric: &Rc<Fabric>, head: u64, crossing: HeaderCrossing) {
        if fabric.fidelity() == Fidelity::Flow {
            let now = sim::now();
            let lands = fabric.credit_lands(&self.credit, now, crossing);
            match lands {
                Ok(at) => {
                    let in_flight = &mut self.pointers.borrow_mut().credits_in_flight;
                    in_flight.push((at, head));
                    self.credits.wake_all();
                }
                Err(e) => self.credit_landed(head, Some(e.to_string())),
            }
            return;
        }
        let (ring, fabric) = (self.clone(), fabric.clone());
        let route = self.credit.clone();
        // The task ends when the credit lands; nobody joins it.
        drop(sim::spawn("ipcq credit", async move {
            let sent = fabric.send(&route, 0).await;
            ring.credit_landed(head, sent.err().map(|e| e.to_string()));
        }));
    }

    fn credit_landed(&self, head: u64, failure: Option<String>) {
        let mut p = self.pointers.borrow_mut();
        p.peer_head_cache = p.peer_head_cache.max(head);
        p.failure = p.failure.take().or(failure);
        drop(p);
        self.credits.wake_all();
    }

    /// One line of the pointer dump.
    pub fn dump(&self) -> String {
        self.pointers
            .borrow_mut()
            .take_landed_credits(sim::try_now());
        let p = self.pointers.borrow();
        let s = &self.spec;
        format!(
            "ring {} <- {} dir={} [{} x {} B in {}]: sender my_tail={} peer_head_cache={}; \
             receiver my_head={} peer_tail_cache={}",
            self.name(),
            s.sender,
            s.send_dir,
            self.slots.len(),
            self.slot_bytes,
            s.space,
            p.my_tail,
            p.peer_head_cache,
            p.my_head,
            p.peer_tail_cache
        )
    }
}

impl Describe for Ring {
    fn describe(&self) -> String {
        format!("IPCQ {}", self.dump())
    }
}

/// A PE's node, or an install error naming the missing PE.
fn pe_node(fabric: &Fabric, pe: PeCoord) -> Result<NodeId, IpcqError> {
    let machine = fabric.machine();
    machine
        .pe(pe.sip, pe.cube, pe.pe)
        .ok_or_else(|| IpcqError::Install(format!("{pe} is not a PE of this machine")))
}

/// One PE's rings.
#[derive(Default)]
pub(super) struct Endpoint {
    pub sends: BTreeMap<Dir, Rc<Ring>>,
    pub receives: BTreeMap<Dir, Rc<Ring>>,
    /// Woken by a doorbell on any receive ring.
    pub arrivals: Rc<Wakers>,
    /// Where `recv_any` starts looking next.
    pub next_any: Cell<usize>,
}

impl Endpoint {
    /// Waits for a landed slot on any receive ring, looking round-robin
    /// from where the last `recv_any` left off; the ring and its ticket.
    pub async fn any(&self) -> (Rc<Ring>, u64) {
        let rings: Vec<Rc<Ring>> = self.receives.values().cloned().collect();
        let what = Rc::new(RingSet(rings.clone()));
        wait_until("recv_any", &what, &self.arrivals, || self.try_any(&rings)).await
    }

    fn try_any(&self, rings: &[Rc<Ring>]) -> Option<(Rc<Ring>, u64)> {
        let start = self.next_any.get();
        (0..rings.len())
            .map(|i| (start + i) % rings.len())
            .find_map(|i| {
                let ticket = rings[i].try_ticket()?;
                self.next_any.set(i + 1);
                Some((rings[i].clone(), ticket))
            })
    }
}

/// The receive rings one `recv_any` waits on.
struct RingSet(Vec<Rc<Ring>>);

impl Describe for RingSet {
    fn describe(&self) -> String {
        let rings: Vec<String> = self.0.iter().map(|r| r.dump()).collect();
        format!("IPCQ receive rings:\n  {}", rings.join("\n  "))
    }
}
