//! IPCQ: the PE-to-PE queues collectives send through (author guide §4,
//! §7, §8; ADR-0023).
//!
//! An [`IpcqNetwork`] holds one ring per installed receive direction of
//! every participating PE: `K` slots ([`IpcqParams::slots`]) of
//! [`IpcqParams::slot_bytes`] each, allocated with `Device::alloc` in the
//! memory the installer chose (the receiver's TCM, or its cube's HBM or
//! SRAM). Each ring has exactly one sender (a PE and its send direction).
//!
//! A send waits for a free slot (a credit), copies the message into the
//! slot with the sender's PE_DMA over the real route (`Device::start_copy`,
//! source snapshotted at issue) and then rings a doorbell: a header-only
//! transfer sender PE → receiver PE. The slot is receivable when the
//! doorbell lands; the send returns then. A released slot returns its
//! credit with a header-only transfer receiver PE → sender PE (posted: the
//! receiver does not wait for it).
//!
//! A message larger than a slot travels as `ceil(nbytes / slot_bytes)`
//! slot-sized segments, in order, each with its own credit, DMA and
//! doorbell (as CCL runtimes cut a buffer into slot-sized steps); the
//! segments whose credits are in hand copy concurrently. `recv_into`
//! drains them segment by segment into its destination; `recv` (whose
//! handle is one slot) refuses a message larger than a slot.
//!
//! Pointers, per ring (what [`pointer_dump`] prints): the sender's
//! `my_tail` (slots it has claimed) and `peer_head_cache` (credits it has
//! seen); the receiver's `my_head` (slots released, in order) and
//! `peer_tail_cache` (doorbells seen, in order).
//!
//! Slot release (`return_slot` mode): a slot handed out by `recv`,
//! `recv_any` or a waited `recv_async` stays valid until this program
//! issues its next receive on the same ring (`recv_any` counts for every
//! ring of the PE), calls `Tl::release` on it, or ends. `recv_into` copies
//! the slot out and releases it at once.
//!
//! Backpressure: with [`Backpressure::Sleep`] a blocked sender is woken by
//! the credit's arrival; with [`Backpressure::Poll`] it re-checks every
//! [`IpcqParams::poll_interval`] from the instant it blocked, so it proceeds
//! at the first poll tick at or after the credit arrived. Both are modelled
//! as waits on the credit (the poll tick is computed, not slept for), so an
//! unmatched send is a deadlock report, not an endless poll loop.
//!
//! Knows PEs, memory spaces, the device and the sim core; nothing of
//! ranks, neighbour tables, ccl.yaml or algorithms (those install the
//! network: `ccl::install`).

mod dir;
mod ops;
mod ring;

use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use crate::device::{Device, DeviceError};
use crate::mem::DType;
use crate::sim::{PS_PER_NS, SimDuration, SimTime};
use crate::topology::MemSpace;

pub use dir::Dir;
pub(crate) use ops::IpcqPort;
pub use ops::{RecvFuture, SendArgs};

use super::PeCoord;
use ring::{Endpoint, Ring};

/// How a sender waits for a free slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backpressure {
    /// Re-check every poll interval from the moment it blocked.
    Poll,
    /// Sleep until the credit arrives.
    Sleep,
}

/// The parameters of a network, the same for every ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpcqParams {
    /// Slots per ring (`K`, at least 1).
    pub slots: usize,
    /// Bytes per slot: the largest message a ring carries.
    pub slot_bytes: u64,
    /// How blocked senders wait.
    pub backpressure: Backpressure,
    /// The poll period of [`Backpressure::Poll`].
    pub poll_interval: SimDuration,
    /// Check that every receive names the shape and dtype that was sent.
    pub strict_validation: bool,
}

impl IpcqParams {
    /// Default slots per ring.
    pub const DEFAULT_SLOTS: usize = 4;
    /// Default slot size.
    pub const DEFAULT_SLOT_BYTES: u64 = 64 << 10;
    /// Default poll period.
    pub const DEFAULT_POLL_INTERVAL: SimDuration = SimDuration::from_ps(100 * PS_PER_NS);

    /// The bytes one slot takes: `slot_bytes` rounded up to the device's
    /// allocation granule (saturating at `u64::MAX`).
    pub fn slot_stride(&self) -> u64 {
        let granule = crate::device::GRANULE;
        self.slot_bytes.div_ceil(granule).saturating_mul(granule)
    }
}

impl Default for IpcqParams {
    fn default() -> Self {
        IpcqParams {
            slots: Self::DEFAULT_SLOTS,
            slot_bytes: Self::DEFAULT_SLOT_BYTES,
            backpressure: Backpressure::Sleep,
            poll_interval: Self::DEFAULT_POLL_INTERVAL,
            strict_validation: false,
        }
    }
}

/// A misuse of IPCQ, or a network that cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum IpcqError {
    /// A send or receive in a direction the PE has no ring for.
    #[error(
        "IpcqInvalidDirection: {pe} has no {side} ring in direction {dir} (installed: {})",
        dir_list(.installed)
    )]
    InvalidDirection {
        /// The PE.
        pe: PeCoord,
        /// `send` or `receive`.
        side: &'static str,
        /// The direction asked for.
        dir: Dir,
        /// The directions it has.
        installed: Vec<Dir>,
    },
    /// `recv_any` on a PE with no receive ring.
    #[error("IpcqInvalidDirection: recv_any: {pe} has no receive ring")]
    NoReceiveRings {
        /// The PE.
        pe: PeCoord,
    },
    /// A `tl` IPCQ call in a program launched without a network.
    #[error("{op}: {pe} has no IPCQ network (launch it with one installed)")]
    NoNetwork {
        /// The call.
        op: &'static str,
        /// The PE.
        pe: PeCoord,
    },
    /// Strict validation: the receive does not name what was sent.
    #[error("IpcqMismatch: {0}")]
    Mismatch(Box<Mismatch>),
    /// A `recv` (the handle is the slot) of a message larger than a slot.
    #[error(
        "{op}: {nbytes} B does not fit a {slot_bytes} B slot of ring {ring}; a larger message \
         travels in slot-sized segments and is received with recv_into, or send chunks of at \
         most the slot (ccl.yaml `ipcq.slot_size`, an algorithm's `params.chunk`)"
    )]
    TooLarge {
        /// The call.
        op: &'static str,
        /// The message size.
        nbytes: u64,
        /// The slot size.
        slot_bytes: u64,
        /// The ring, `receiver:label`.
        ring: String,
    },
    /// A segmented receive met a segment of another message.
    #[error(
        "recv_into on ring {ring}: expected segment {} of {}, got segment {} of {} of a \
         {sent_bytes} B message (sender and receiver disagree on the message size)",
        expected.0 + 1, expected.1, sent.0 + 1, sent.1
    )]
    Segments {
        /// The ring, `receiver:label`.
        ring: String,
        /// The size of the message the segment belongs to.
        sent_bytes: u64,
        /// The segment that arrived: index and count.
        sent: (u64, u64),
        /// The segment expected: index and count.
        expected: (u64, u64),
    },
    /// `release` of a handle that is not a slot this program holds.
    #[error("release: {addr:#018x} is not an IPCQ slot held by {pe}")]
    NotHeld {
        /// The address given.
        addr: u64,
        /// The PE.
        pe: PeCoord,
    },
    /// A ring installed twice, or with no slots.
    #[error("install: {0}")]
    Install(String),
    /// A credit or doorbell message that could not be timed.
    #[error("IPCQ {what} on ring {ring}: {reason}")]
    Transfer {
        /// `credit` or `doorbell`.
        what: &'static str,
        /// The ring.
        ring: String,
        /// Why.
        reason: String,
    },
}

/// Both sides of a strict-validation mismatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The sending PE.
    pub sender: PeCoord,
    /// The send direction.
    pub send_dir: Dir,
    /// What was sent.
    pub sent_shape: Vec<usize>,
    /// Its element type.
    pub sent_dtype: DType,
    /// The receiving PE.
    pub receiver: PeCoord,
    /// The receive ring.
    pub label: Dir,
    /// What the receive named.
    pub recv_shape: Vec<usize>,
    /// Its element type.
    pub recv_dtype: DType,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sent dir={} shape {:?} {:?}, but {} receives dir={} shape {:?} {:?}",
            self.sender,
            self.send_dir,
            self.sent_shape,
            self.sent_dtype,
            self.receiver,
            self.label,
            self.recv_shape,
            self.recv_dtype
        )
    }
}

fn dir_list(dirs: &[Dir]) -> String {
    if dirs.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<&str> = dirs.iter().map(|d| d.name()).collect();
    names.join(", ")
}

/// One ring to install: `sender` sends in `send_dir`, landing in the ring
/// `label` of `receiver`, whose slots live in `space`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSpec {
    /// The sending PE.
    pub sender: PeCoord,
    /// Its send direction.
    pub send_dir: Dir,
    /// The receiving PE.
    pub receiver: PeCoord,
    /// The receive ring's label.
    pub label: Dir,
    /// Where the slots are allocated.
    pub space: MemSpace,
}

/// The installed rings of every participating PE (see the module docs).
pub struct IpcqNetwork {
    params: IpcqParams,
    endpoints: BTreeMap<PeCoord, Endpoint>,
}

impl IpcqNetwork {
    /// A network with no rings yet.
    pub fn new(params: IpcqParams) -> Result<Self, IpcqError> {
        if params.slots == 0 || params.slot_bytes == 0 {
            return Err(IpcqError::Install(format!(
                "a ring needs at least one slot of at least one byte, not {} x {} B",
                params.slots, params.slot_bytes
            )));
        }
        Ok(IpcqNetwork {
            params,
            endpoints: BTreeMap::new(),
        })
    }

    /// Installs one ring, allocating its slots on `device` (untimed).
    pub fn connect(&mut self, device: &Device, spec: RingSpec) -> Result<(), ConnectError> {
        self.check_free(&spec)?;
        let receiver_wakers = self.endpoint(spec.receiver).arrivals.clone();
        let ring = Rc::new(Ring::new(device, spec, &self.params, receiver_wakers)?);
        self.endpoint(spec.receiver)
            .receives
            .insert(spec.label, ring.clone());
        self.endpoint(spec.sender).sends.insert(spec.send_dir, ring);
        Ok(())
    }

    fn check_free(&self, spec: &RingSpec) -> Result<(), IpcqError> {
        let taken = |pe, dir, side: &str| {
            let endpoint = self.endpoints.get(&pe);
            let rings = endpoint.map(|e| {
                if side == "send" {
                    &e.sends
                } else {
                    &e.receives
                }
            });
            rings
                .is_some_and(|r| r.contains_key(&dir))
                .then(|| IpcqError::Install(format!("{pe} already has a {side} ring {dir}")))
        };
        let send = taken(spec.sender, spec.send_dir, "send");
        send.or_else(|| taken(spec.receiver, spec.label, "receive"))
            .map_or(Ok(()), Err)
    }

    fn endpoint(&mut self, pe: PeCoord) -> &mut Endpoint {
        self.endpoints.entry(pe).or_default()
    }

    /// The parameters.
    pub fn params(&self) -> &IpcqParams {
        &self.params
    }

    /// The PEs with at least one ring, in order.
    pub fn pes(&self) -> impl Iterator<Item = PeCoord> + '_ {
        self.endpoints.keys().copied()
    }

    /// `pe`'s send directions, in order.
    pub fn send_dirs(&self, pe: PeCoord) -> Vec<Dir> {
        self.endpoints
            .get(&pe)
            .map_or_else(Vec::new, |e| e.sends.keys().copied().collect())
    }

    /// `pe`'s receive ring labels, in order.
    pub fn recv_dirs(&self, pe: PeCoord) -> Vec<Dir> {
        self.endpoints
            .get(&pe)
            .map_or_else(Vec::new, |e| e.receives.keys().copied().collect())
    }

    /// The slot addresses of `pe`'s receive ring `label`.
    pub fn slot_addrs(&self, pe: PeCoord, label: Dir) -> Option<Vec<u64>> {
        let ring = self.endpoints.get(&pe)?.receives.get(&label)?;
        Some(ring.slot_addrs())
    }

    /// Messages (slot-sized segments) claimed by senders so far, over every
    /// ring: the IPCQ traffic a scale report divides wall time by.
    pub fn messages(&self) -> u64 {
        let rings = self.endpoints.values().flat_map(|e| e.sends.values());
        rings.map(|ring| ring.sent()).sum()
    }

    fn endpoint_of(&self, pe: PeCoord) -> Option<&Endpoint> {
        self.endpoints.get(&pe)
    }
}

/// What [`IpcqNetwork::connect`] can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The ring cannot be installed.
    #[error(transparent)]
    Ipcq(#[from] IpcqError),
    /// Its slots cannot be allocated or its routes found.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// Every ring's pointers, one line per ring, receivers in order (author
/// guide §7). Callable at any time, inside or outside a run.
pub fn pointer_dump(network: &IpcqNetwork) -> String {
    let lines: Vec<String> = network
        .endpoints
        .values()
        .flat_map(|e| e.receives.values())
        .map(|ring| ring.dump())
        .collect();
    lines.join("\n")
}

/// `t` in nanoseconds with one decimal, rounded to nearest (`346.4`).
pub(super) fn ns_one_decimal(t: SimTime) -> String {
    let tenths = (t.as_ps() + 50) / 100;
    format!("{}.{}", tenths / 10, tenths % 10)
}

impl fmt::Debug for IpcqNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IpcqNetwork")
            .field("params", &self.params)
            .field("pes", &self.endpoints.len())
            .finish()
    }
}
