//! The rendezvous of point-to-point `send` / `recv` between ranks
//! (ADR-0019), and of the puts `gather` and `scatter` are made of
//! (ADR-0020): which `send` meets which `recv`, and how each side learns
//! the other's part.
//!
//! The `k`-th `send` from rank `s` to rank `d` meets the `k`-th `recv` on
//! `d` from `s` (torch's FIFO order per pair): each call takes its ticket
//! when it is made, and the two tickets of one number share a
//! [`Rendezvous`]. The receiver posts its tiles ([`Rendezvous::post`]) and
//! waits until the transfer is [`done`](Rendezvous::outcome); the sender
//! waits for the post ([`Rendezvous::posted`]), moves the data and
//! [`finish`](Rendezvous::finish)es it with its outcome, which both sides
//! return. Both waits are sim [`Event`]s named after the call
//! ([`Exchange`]), so a `send` or `recv` (or a rank's part of a `gather` or
//! `scatter`) nobody matches ends the run in a deadlock report that says
//! which. Each kind of exchange has its own [`Mailbox`], so a collective's
//! puts never meet a user's `recv`.
//!
//! Knows ranks and tile addresses; nothing of kernels or the fabric.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::mem::DType;
use crate::sim::Event;

/// One side of a point-to-point transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Send,
    Recv,
}

/// The `seq`-th transfer from rank `src` to rank `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    src: usize,
    dst: usize,
    seq: u64,
}

/// What a mailbox's transfers are part of: it names the waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exchange {
    /// `send` / `recv` (and `isend` / `irecv`).
    SendRecv,
    /// `gather`: every rank puts its tiles into its block of the root's.
    Gather,
    /// `scatter`: the root puts block `r` of its tiles into rank `r`'s.
    Scatter,
}

impl Exchange {
    /// The names of the sender's wait for the receiver's post and of the
    /// receiver's wait for the transfer, of the `seq`-th transfer from
    /// `src` to `dst`.
    fn waits(self, Key { src, dst, seq }: Key) -> (String, String) {
        match self {
            Exchange::SendRecv => (
                format!(
                    "dist.send #{seq} from rank {src} to rank {dst}: no matching \
                     recv(src={src}) on rank {dst}"
                ),
                format!(
                    "dist.recv #{seq} on rank {dst} from rank {src}: no matching \
                     send(dst={dst}) from rank {src}"
                ),
            ),
            Exchange::Gather => (
                format!(
                    "dist.gather #{seq} on rank {src}: the root rank {dst} has not called \
                     gather(dst={dst})"
                ),
                format!(
                    "dist.gather #{seq} on the root rank {dst}: rank {src} has not called \
                     gather(dst={dst})"
                ),
            ),
            Exchange::Scatter => (
                format!(
                    "dist.scatter #{seq} on the root rank {src}: rank {dst} has not called \
                     scatter(src={src})"
                ),
                format!(
                    "dist.scatter #{seq} on rank {dst}: the root rank {src} has not called \
                     scatter(src={src})"
                ),
            ),
        }
    }
}

/// The tiles one side of a transfer holds: its tensor's name, each cube's
/// tile address, elements per tile and their type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tiles {
    /// The tensor's name.
    pub tensor: String,
    /// Device address of each cube's tile.
    pub addrs: Rc<[u64]>,
    /// Elements per tile.
    pub n_elem: usize,
    /// Their type.
    pub dtype: DType,
}

impl Tiles {
    /// Block `index` of every tile, each split into `blocks` equal blocks
    /// (`n_elem` a multiple of `blocks`).
    pub fn block(&self, index: usize, blocks: usize) -> Tiles {
        let n_elem = self.n_elem / blocks;
        let offset = (index * n_elem) as u64 * self.dtype.size();
        Tiles {
            tensor: self.tensor.clone(),
            addrs: self.addrs.iter().map(|addr| addr + offset).collect(),
            n_elem,
            dtype: self.dtype,
        }
    }
}

/// Why a transfer did not happen, as both sides report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The two tensors differ in tile size or dtype: (sent, received).
    Mismatch(Box<(Tiles, Tiles)>),
    /// The sender's copy failed.
    Send(String),
}

/// Where matching `send`s and `recv`s meet: one per [`Exchange`] of a
/// process group.
pub(super) struct Mailbox {
    exchange: Exchange,
    /// The next ticket of each (side, src, dst).
    next: RefCell<BTreeMap<(Side, usize, usize), u64>>,
    /// Transfers one side has reached and the other not yet.
    open: RefCell<BTreeMap<Key, Rc<Rendezvous>>>,
}

impl Mailbox {
    /// An empty mailbox for `exchange`'s transfers.
    pub fn new(exchange: Exchange) -> Mailbox {
        Mailbox {
            exchange,
            next: RefCell::default(),
            open: RefCell::default(),
        }
    }

    /// The sender's ticket for its next transfer from `src` to `dst`.
    pub fn send(&self, src: usize, dst: usize) -> Rc<Rendezvous> {
        self.ticket(Side::Send, src, dst)
    }

    /// The receiver's ticket for its next transfer from `src` to `dst`.
    pub fn recv(&self, src: usize, dst: usize) -> Rc<Rendezvous> {
        self.ticket(Side::Recv, src, dst)
    }

    /// The rendezvous of `side`'s next transfer: the one the other side
    /// opened with the same number (which the mailbox then forgets), or a
    /// new one it keeps for the other side.
    fn ticket(&self, side: Side, src: usize, dst: usize) -> Rc<Rendezvous> {
        let seq = {
            let mut next = self.next.borrow_mut();
            let counter = next.entry((side, src, dst)).or_insert(0);
            *counter += 1;
            *counter - 1
        };
        let key = Key { src, dst, seq };
        let mut open = self.open.borrow_mut();
        match open.remove(&key) {
            Some(rendezvous) => rendezvous,
            None => {
                let rendezvous = Rc::new(Rendezvous::new(self.exchange.waits(key)));
                open.insert(key, rendezvous.clone());
                rendezvous
            }
        }
    }
}

/// One transfer's meeting point; see the module docs.
pub(super) struct Rendezvous {
    posted: Event,
    tiles: RefCell<Option<Tiles>>,
    done: Event,
    outcome: RefCell<Option<Result<(), Failure>>>,
}

impl Rendezvous {
    /// A rendezvous whose two waits are named `(posted, done)`.
    fn new((posted, done): (String, String)) -> Rendezvous {
        Rendezvous {
            posted: Event::new(&posted),
            tiles: RefCell::new(None),
            done: Event::new(&done),
            outcome: RefCell::new(None),
        }
    }

    /// The receiver posts where the data goes.
    pub fn post(&self, tiles: Tiles) {
        *self.tiles.borrow_mut() = Some(tiles);
        self.posted.set();
    }

    /// The sender waits for the receiver's tiles.
    pub async fn posted(&self) -> Tiles {
        self.posted.wait().await;
        let tiles = self.tiles.borrow();
        tiles
            .clone()
            .expect("a set post holds the receiver's tiles")
    }

    /// The sender ends the transfer with its outcome.
    pub fn finish(&self, outcome: Result<(), Failure>) {
        *self.outcome.borrow_mut() = Some(outcome);
        self.done.set();
    }

    /// The receiver waits for the transfer's outcome.
    pub async fn outcome(&self) -> Result<(), Failure> {
        self.done.wait().await;
        let outcome = self.outcome.borrow();
        outcome
            .clone()
            .expect("a finished transfer holds its outcome")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDuration, SimError, Simulation, now, sleep};

    fn tiles(name: &str) -> Tiles {
        Tiles {
            tensor: name.to_owned(),
            addrs: Rc::from([0x1000, 0x2000]),
            n_elem: 4,
            dtype: DType::F32,
        }
    }

    #[test]
    fn tickets_pair_in_order_per_direction() {
        let mailbox = Mailbox::new(Exchange::SendRecv);
        let (s0, s1) = (mailbox.send(0, 2), mailbox.send(0, 2));
        let other = mailbox.send(2, 0);
        let r0 = mailbox.recv(0, 2);
        assert!(Rc::ptr_eq(&s0, &r0));
        let r1 = mailbox.recv(0, 2);
        assert!(Rc::ptr_eq(&s1, &r1) && !Rc::ptr_eq(&s1, &other));
        let r = mailbox.recv(2, 0);
        assert!(Rc::ptr_eq(&other, &r));
        assert!(
            mailbox.open.borrow().is_empty(),
            "every ticket met its match"
        );
    }

    #[test]
    fn the_sender_waits_for_the_post_and_the_receiver_for_the_outcome() {
        let mut simulation = Simulation::new();
        let mailbox = Rc::new(Mailbox::new(Exchange::SendRecv));
        let sender = {
            let rendezvous = mailbox.send(0, 1);
            simulation.spawn("sender", async move {
                let posted = rendezvous.posted().await;
                let at = now().as_ps();
                sleep(SimDuration::from_ps(7)).await;
                rendezvous.finish(Err(Failure::Send("link down".into())));
                (posted.tensor, at)
            })
        };
        let receiver = {
            let rendezvous = mailbox.recv(0, 1);
            simulation.spawn("receiver", async move {
                sleep(SimDuration::from_ps(5)).await;
                rendezvous.post(tiles("b"));
                let outcome = rendezvous.outcome().await;
                (outcome, now().as_ps())
            })
        };
        simulation.run().unwrap();
        assert_eq!(sender.output().unwrap(), ("b".to_owned(), 5));
        let (outcome, at) = receiver.output().unwrap();
        assert_eq!((outcome, at), (Err(Failure::Send("link down".into())), 12));
    }

    #[test]
    fn an_unmatched_send_is_a_deadlock_naming_it() {
        let mut simulation = Simulation::new();
        let rendezvous = Mailbox::new(Exchange::SendRecv).send(3, 1);
        simulation.spawn("rank3", async move { rendezvous.posted().await });
        let Err(SimError::Deadlock { blocked, .. }) = simulation.run() else {
            panic!("an unmatched send cannot finish");
        };
        assert_eq!(
            blocked[0].to_string(),
            "task \"rank3\" waits on wait on event \"dist.send #0 from rank 3 to rank 1: no \
             matching recv(src=3) on rank 1\" (not set)"
        );
    }
}
