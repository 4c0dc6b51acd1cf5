//! [`SerialServer`]: a FIFO single server kept as a reservation calendar.
//!
//! Every bandwidth-limited part of the machine (a link direction, an HBM
//! pseudo-channel, an SRAM/TCM port, a DMA issue stage, a CPU's dispatch
//! loop) serves one job at a time, in arrival order. Instead of a queue of
//! waiting tasks the server remembers only when it becomes free: a job that
//! arrives at `now` with occupancy `S` is served over
//! `[max(now, free_at), max(now, free_at) + S)`. Because jobs reserve at the
//! instant they arrive, and the executor runs instants in order, this is
//! exactly a FIFO queue (ties in the order the executor runs the arriving
//! tasks), and the caller needs a single timer per job.
//!
//! It also counts jobs, bytes and busy time. Jobs that arrive when they
//! book leave the reserved time after `now` one contiguous block
//! `[now, free_at)`. Flows (ADR-0012) book ahead: the idle gaps they leave
//! before `free_at` are kept and used by earlier arrivals
//! ([`SerialServer::reserve_batch`]), and a flow's single packet slips in
//! between booked flows' packets ([`SerialServer::reserve_between`]). The
//! busy time up to any instant stays exact and never exceeds the elapsed
//! time. A caller may keep the counts of bookings it makes often and add
//! them later (`DeferredCounts`, ADR-0069): every read of the counters
//! adds them first, so no reader sees the difference.
//!
//! Knows virtual time and an opaque name; nothing of what it serves.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use super::{HwError, later_for};
use crate::sim::{self, SimDuration, SimTime};
use crate::trace::{self, CompleteEvent};

/// What a server's busy periods are called in traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// A packet occupying a link.
    Packet,
    /// A request's share served by an HBM pseudo-channel.
    PcAccess,
    /// An SRAM or TCM access.
    MemoryAccess,
    /// A DMA engine issuing a descriptor.
    DmaIssue,
    /// A CPU handling a command.
    Dispatch,
    /// PE_GEMM working on one output tile.
    Gemm,
    /// PE_MATH running one op (or one tile's epilogue).
    Math,
}

impl Activity {
    /// Its name in traces, and whether its jobs' bytes are shown there.
    fn label(self) -> (&'static str, bool) {
        match self {
            Activity::Packet => ("packet", true),
            Activity::PcAccess => ("pc_access", true),
            Activity::MemoryAccess => ("mem_access", true),
            Activity::DmaIssue => ("dma_issue", false),
            Activity::Dispatch => ("dispatch", false),
            Activity::Gemm => ("gemm", true),
            Activity::Math => ("math", false),
        }
    }
}

/// When one job holds a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The job starts being served.
    pub start: SimTime,
    /// The server is free again.
    pub end: SimTime,
}

/// A server's counters as of some instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerStats {
    /// Jobs accepted (packets on a link, requests on a pseudo-channel, ...).
    pub jobs: u64,
    /// Payload bytes of those jobs (packet overhead not included).
    pub bytes: u64,
    /// Time spent serving, up to the instant asked about.
    pub busy: SimDuration,
    /// Time from the start of the run to the instant asked about.
    pub elapsed: SimDuration,
}

impl ServerStats {
    /// `busy / elapsed` in [0, 1] (0 at time zero). For reports only.
    pub fn utilisation(&self) -> f64 {
        match self.elapsed.as_ps() {
            0 => 0.0,
            elapsed => self.busy.as_ps() as f64 / elapsed as f64,
        }
    }
}

/// Bookings whose counts (jobs, bytes, busy time) their maker keeps for
/// a while and adds to its servers later (a flow route's one-packet
/// messages, ADR-0069): a maker that keeps some registers itself with
/// [`defer_counts`], is told to [`flush`](Self::flush) them before any
/// server's counters are read, and flushes its own when dropped.
pub(crate) trait DeferredCounts {
    /// Adds the counts kept to the servers they belong to.
    fn flush(&self);
}

thread_local! {
    /// The makers that may keep counts, registered since the last read.
    static DEFERRED: RefCell<Vec<Weak<dyn DeferredCounts>>> = const { RefCell::new(Vec::new()) };
}

/// Registers `maker`, which keeps counts, to be flushed before the next
/// read of any server's counters. A maker registers once until then.
pub(crate) fn defer_counts(maker: Weak<dyn DeferredCounts>) {
    DEFERRED.with_borrow_mut(|makers| makers.push(maker));
}

/// Flushes every registered maker's counts (one gone flushed its own).
fn flush_deferred() {
    let makers = DEFERRED.with_borrow_mut(std::mem::take);
    for maker in makers.iter().filter_map(Weak::upgrade) {
        maker.flush();
    }
}

/// The start and end of a completed access, and the bytes it moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessReport {
    /// When the access was asked for.
    pub start: SimTime,
    /// When its last byte was done.
    pub end: SimTime,
    /// Bytes actually accessed (after rounding up to bursts, for HBM).
    pub bytes: u64,
}

impl AccessReport {
    /// `end - start`.
    pub fn duration(&self) -> SimDuration {
        self.end.saturating_since(self.start)
    }
}

/// What a booking reads and writes, one cell per field so that a booking
/// touches only the fields it needs (a whole-calendar copy in and out cost
/// a tenth of a flow-mode hop).
#[derive(Default)]
#[repr(C)]
struct Calendar {
    free_at: Cell<SimTime>,
    /// When the last packet that slipped in between booked flows
    /// ([`SerialServer::reserve_between`]) is served: the next one queues
    /// behind it.
    slipped_until: Cell<SimTime>,
    /// Total reserved picoseconds; never more than `free_at` since
    /// reservations do not overlap.
    reserved: Cell<u64>,
    /// After `reserved`, not `jobs`: two counters side by side that a
    /// booking adds to are summed as one vector, more instructions than
    /// two adds (ADR-0065).
    bytes: Cell<u64>,
    jobs: Cell<u64>,
    /// The earliest idle gap (`from == to`: none). A link booked ahead by
    /// one flow at a time holds one gap, replaced at every booking: kept
    /// here, it costs no access beyond the calendar's cache line.
    first_gap: Cell<Gap>,
    /// How many gaps [`SerialServer::later_gaps`] holds; never more than
    /// zero while `first_gap` is empty.
    later_gaps: Cell<u64>,
}

impl Calendar {
    fn has_gap(&self) -> bool {
        let (from, to) = self.first_gap.get();
        from < to
    }

    /// Counts a booking of `jobs` jobs, `bytes` bytes and `occupancy`.
    fn count(&self, occupancy: SimDuration, bytes: u64, jobs: u64) {
        self.reserved.set(self.reserved.get() + occupancy.as_ps());
        self.jobs.set(self.jobs.get() + jobs);
        self.bytes.set(self.bytes.get().saturating_add(bytes));
    }
}

type Gap = (SimTime, SimTime);

/// A FIFO single server; see the module documentation. `repr(C)`: what
/// every booking touches first (the calendar, one cache line when the
/// server is aligned: a [`Link`](super::Link) is), the name (for errors
/// and traces) last. 96 bytes, so that a link (a server and its class)
/// is two cache lines, not four (ADR-0040).
#[repr(C)]
pub struct SerialServer {
    calendar: Calendar,
    /// The idle spans before `free_at` after the calendar's first one, in
    /// time order. Together they are the spans that end after the last
    /// booking's `now` (left by flows booked ahead; none when every job
    /// arrives at the instant it books). Boxed on first use: most servers
    /// never hold more than the calendar's one gap.
    #[allow(clippy::box_collection)] // 8 bytes in the server, not 32 (ADR-0040)
    later_gaps: Cell<Option<Box<VecDeque<Gap>>>>,
    name: Rc<str>,
    activity: Activity,
    /// Whether it is held for windows of time ([`hold`](Self::hold)): no
    /// job slips in then. In the byte of padding after `activity`.
    held: Cell<bool>,
    /// The `--explain` recording `explain_id` belongs to (0: none). With
    /// `explain_id`, in the padding `activity` leaves at the end: the
    /// server stays 96 bytes.
    explain_generation: Cell<u16>,
    /// Its component id in that recording (`hw::explain::component`'s
    /// cache).
    explain_id: Cell<u32>,
}

// 96 bytes, with or without the `--explain` cache in `activity`'s padding.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<SerialServer>() == 96);

/// Uses the idle `gaps` from `arrives` on for up to `left` ps of service,
/// in time order; what is used leaves the gaps and goes into `pieces`.
fn fill_gaps(gaps: &mut VecDeque<Gap>, arrives: SimTime, left: &mut u64, pieces: &mut Pieces) {
    let mut index = 0;
    while *left > 0 && index < gaps.len() {
        let (from, to) = gaps[index];
        let begin = from.max(arrives);
        if begin >= to {
            index += 1;
            continue;
        }
        let used = to.saturating_since(begin).as_ps().min(*left);
        let end = begin + SimDuration::from_ps(used);
        *left -= used;
        pieces.push(begin, end);
        gaps.remove(index);
        for gap in [(end, to), (from, begin)] {
            if gap.0 < gap.1 {
                gaps.insert(index, gap);
            }
        }
        // Past what was kept before `begin`; what is kept after `end` is
        // only left when the service is complete.
        index += usize::from(from < begin);
    }
}

/// The spans one booking is served over: its first start and last end,
/// and every span when they are traced.
struct Pieces {
    first: Option<SimTime>,
    last: SimTime,
    traced: Vec<Reservation>,
    tracing: bool,
}

impl Pieces {
    fn new(tracing: bool) -> Self {
        Pieces {
            first: None,
            last: SimTime::ZERO,
            traced: Vec::new(),
            tracing,
        }
    }

    fn push(&mut self, start: SimTime, end: SimTime) {
        self.first.get_or_insert(start);
        self.last = self.last.max(end);
        if self.tracing {
            self.traced.push(Reservation { start, end });
        }
    }

    fn reservation(&self) -> Reservation {
        Reservation {
            start: self.first.unwrap_or(self.last),
            end: self.last,
        }
    }
}

impl SerialServer {
    /// An idle server named `name` whose busy periods are traced as
    /// `activity` on the track `name`.
    pub fn new(name: &str, activity: Activity) -> Self {
        SerialServer {
            name: name.into(),
            activity,
            calendar: Calendar::default(),
            later_gaps: Cell::new(None),
            held: Cell::new(false),
            explain_generation: Cell::new(0),
            explain_id: Cell::new(0),
        }
    }

    /// The name given at creation (trace track, error messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as a shared string.
    pub fn shared_name(&self) -> Rc<str> {
        self.name.clone()
    }

    /// The shared name, borrowed (its address identifies the server).
    pub fn name_rc(&self) -> &Rc<str> {
        &self.name
    }

    /// The `--explain` component id cached for recording `generation`.
    pub(crate) fn explain_id(&self, generation: u16) -> Option<u32> {
        (self.explain_generation.get() == generation).then(|| self.explain_id.get())
    }

    /// Caches its `--explain` component id for recording `generation`.
    pub(crate) fn set_explain_id(&self, generation: u16, id: u32) {
        self.explain_generation.set(generation);
        self.explain_id.set(id);
    }

    /// Holds an idle server over `windows` (in time order, disjoint): the
    /// spans a link is down (`faults.down`, ADR-0115). They are booked as
    /// one job's service that counts no job and no byte: a job arriving
    /// before one uses the idle time before it and resumes after it, one
    /// arriving inside waits for its end, and no packet slips in while it
    /// is down. The held time counts as busy. Windows ended by now are
    /// left out.
    pub fn hold(&self, windows: &[(SimTime, SimTime)]) {
        let now = sim::try_now().unwrap_or(SimTime::ZERO);
        let ahead: Vec<(SimTime, SimTime)> = windows
            .iter()
            .filter(|&&(_, end)| end > now)
            .map(|&(start, end)| (start.max(now), end))
            .collect();
        let Some(&(_, last)) = ahead.last() else {
            return;
        };
        debug_assert!(self.calendar.free_at.get() <= now && !self.calendar.has_gap());
        let mut idle_from = now;
        let mut gaps = VecDeque::new();
        for &(start, end) in &ahead {
            if start > idle_from {
                gaps.push_back((idle_from, start));
            }
            self.calendar.count(end.saturating_since(start), 0, 0);
            idle_from = end;
        }
        self.calendar.free_at.set(last);
        self.edit_gaps(|kept| kept.extend(gaps));
        self.held.set(true);
    }

    /// Whether it is held for windows ([`hold`](Self::hold)).
    pub fn is_held(&self) -> bool {
        self.held.get()
    }

    /// What its busy periods are.
    pub fn activity(&self) -> Activity {
        self.activity
    }

    /// Reserves the server for a job of `bytes` payload arriving now, for
    /// `occupancy`. Must be called from a simulation task.
    pub fn reserve(&self, occupancy: SimDuration, bytes: u64) -> Result<Reservation, HwError> {
        self.reserve_batch(sim::now(), occupancy, bytes, 1)
    }

    /// [`reserve`](Self::reserve) where the caller has read the clock
    /// (`now`), inlined: a DMA engine's issue, once per copy.
    #[inline(always)]
    pub(crate) fn reserve_at(
        &self,
        now: SimTime,
        occupancy: SimDuration,
        bytes: u64,
    ) -> Result<Reservation, HwError> {
        let reservation = self.book_block_at(now, now, occupancy, bytes)?;
        self.calendar.count(occupancy, bytes, 1);
        Ok(reservation)
    }

    /// Reserves the server for `jobs` jobs (a flow's packets) that start to
    /// arrive at `arrives` (now or later), for `occupancy` in all. Booking
    /// ahead is what a flow does on the hops it has not reached yet
    /// (ADR-0012): the server is then idle until `arrives`, and a job booked
    /// later that arrives earlier uses that idle time first, so the service
    /// is split over the idle gaps from `arrives` on, in time order, and
    /// then continues at `free_at`. Jobs that arrive now (all of them, in
    /// every caller but a flow) never see a gap: they are served over
    /// `[max(now, free_at), + occupancy)`. Must be called from a simulation
    /// task.
    #[inline]
    pub fn reserve_batch(
        &self,
        arrives: SimTime,
        occupancy: SimDuration,
        bytes: u64,
        jobs: u64,
    ) -> Result<Reservation, HwError> {
        let reservation = self.book_block(arrives, occupancy, bytes)?;
        self.calendar.count(occupancy, bytes, jobs);
        Ok(reservation)
    }

    /// [`reserve_batch`](Self::reserve_batch)'s service (counted by the
    /// caller).
    #[inline(always)]
    fn book_block(
        &self,
        arrives: SimTime,
        occupancy: SimDuration,
        bytes: u64,
    ) -> Result<Reservation, HwError> {
        self.book_block_at(sim::now(), arrives, occupancy, bytes)
    }

    /// [`book_block`](Self::book_block) at `now`, the caller's reading of
    /// the clock.
    #[inline(always)]
    fn book_block_at(
        &self,
        now: SimTime,
        arrives: SimTime,
        occupancy: SimDuration,
        bytes: u64,
    ) -> Result<Reservation, HwError> {
        self.forget_gaps_before(now);
        if self.calendar.has_gap() || trace::is_recording() {
            return self.fill_and_append((now, arrives), occupancy, bytes);
        }
        self.append_block(arrives, occupancy, now)
    }

    /// The service of a job arriving at `arrives` on a calendar with no
    /// idle gap, nothing traced: one block from `max(arrives, free_at)`;
    /// the idle time before it, if any, becomes the calendar's gap.
    #[inline(always)]
    fn append_block(
        &self,
        arrives: SimTime,
        occupancy: SimDuration,
        now: SimTime,
    ) -> Result<Reservation, HwError> {
        let calendar = &self.calendar;
        let free_at = calendar.free_at.get();
        let start = arrives.max(free_at);
        let end = later_for(start, occupancy, || &self.name)?;
        let idle_from = free_at.max(now);
        if start > idle_from {
            calendar.first_gap.set((idle_from, start));
        }
        calendar.free_at.set(end);
        Ok(Reservation { start, end })
    }

    /// Drops the gaps that end by `now`: no job can use them any more.
    #[inline]
    fn forget_gaps_before(&self, now: SimTime) {
        let calendar = &self.calendar;
        while calendar.has_gap() && calendar.first_gap.get().1 <= now {
            calendar.first_gap.set(match calendar.later_gaps.get() {
                0 => (SimTime::ZERO, SimTime::ZERO),
                _ => self.take_later_gap(),
            });
        }
    }

    /// The earliest of the later gaps, taken out (out of line: the hot
    /// path of a booking keeps to the calendar's cache line).
    #[inline(never)]
    fn take_later_gap(&self) -> Gap {
        let count = &self.calendar.later_gaps;
        count.set(count.get() - 1);
        let mut gaps = self.later_gaps.take().unwrap_or_default();
        let next = gaps.pop_front();
        self.later_gaps.set(Some(gaps));
        next.expect("later_gaps counts the gaps kept")
    }

    /// Runs `edit` on every gap, in time order, then keeps them as the
    /// calendar's first and the later ones.
    fn edit_gaps<R>(&self, edit: impl FnOnce(&mut VecDeque<Gap>) -> R) -> R {
        let (calendar, mut gaps) = (&self.calendar, self.later_gaps.take().unwrap_or_default());
        if calendar.has_gap() {
            gaps.push_front(calendar.first_gap.get());
        }
        let result = edit(&mut gaps);
        calendar.first_gap.set(gaps.pop_front().unwrap_or_default());
        calendar.later_gaps.set(gaps.len() as u64);
        self.later_gaps.set(Some(gaps));
        result
    }

    /// [`reserve_batch`](Self::reserve_batch)'s service where idle gaps
    /// may hold some of it or it is traced: the gaps from `arrives` on
    /// first, the rest from `free_at` on.
    #[inline(never)]
    fn fill_and_append(
        &self,
        (now, arrives): (SimTime, SimTime),
        occupancy: SimDuration,
        bytes: u64,
    ) -> Result<Reservation, HwError> {
        let mut pieces = Pieces::new(trace::is_recording());
        let mut left = occupancy.as_ps();
        let free_at = self.calendar.free_at.get();
        let held = self.held.get();
        let appended = self.edit_gaps(|gaps| {
            // On a held server an empty job (a header of no bytes on a
            // link of no packet overhead) passes where it arrives in a gap:
            // the link is up then.
            let up = |&(from, to): &Gap| from <= arrives && arrives < to;
            if held && left == 0 && gaps.iter().any(up) {
                pieces.push(arrives, arrives);
                return Ok(None);
            }
            fill_gaps(gaps, arrives, &mut left, &mut pieces);
            if left == 0 && pieces.first.is_some() {
                return Ok(None);
            }
            let start = arrives.max(free_at);
            if start > free_at.max(now) {
                gaps.push_back((free_at.max(now), start));
            }
            let end = later_for(start, SimDuration::from_ps(left), || &self.name)?;
            pieces.push(start, end);
            Ok(Some(end))
        })?;
        if let Some(end) = appended {
            self.calendar.free_at.set(end);
        }
        for piece in &pieces.traced {
            self.trace(*piece, bytes);
        }
        Ok(pieces.reservation())
    }

    /// Reserves the server for one packet of a flow (ADR-0012 D5) that
    /// arrives at `arrives` (now or later). Where the server is idle, or an
    /// idle gap holds it, it books as [`reserve_batch`](Self::reserve_batch)
    /// does. Where time booked ahead holds the server at `arrives`, it does
    /// not wait for the booked flows' last bytes, which have not arrived
    /// yet: it is served on arrival, between their packets, and pushes
    /// everything booked after it back by its occupancy (no work is lost;
    /// the flows' own ends, already computed, stay as booked). Packet mode
    /// would make it wait for the packet in service (at most one packet's
    /// occupancy), modelled by `wait`. Such packets queue among themselves:
    /// one is served no earlier than the last one slipped in has been, so
    /// packets arriving together are served one after another, as a queue
    /// of packets would (ADR-0012 D5, amended by ADR-0022).
    #[inline]
    pub fn reserve_between(
        &self,
        arrives: SimTime,
        occupancy: SimDuration,
        bytes: u64,
        wait: SimDuration,
    ) -> Result<Reservation, HwError> {
        let reservation = if arrives >= self.calendar.free_at.get() || self.held.get() {
            self.book_block(arrives, occupancy, bytes)?
        } else {
            self.slip_in(arrives, occupancy, bytes, wait)?
        };
        self.calendar.count(occupancy, bytes, 1);
        Ok(reservation)
    }

    /// [`reserve_between`](Self::reserve_between) in its commonest case,
    /// for flow mode's hop loop: a packet that arrives at or after
    /// `free_at`, on a calendar with no idle gap left after `now`
    /// ([`is_idle_from`](Self::is_idle_from)), while nothing is traced
    /// (the caller checks that, once per flow), `now` given by the caller.
    /// The same booking as `reserve_between`, served from `arrives` to the
    /// instant returned; `None`, with nothing booked, in every other case
    /// (an end past u64 picoseconds too: the general booking then says
    /// which link overflowed).
    #[inline(always)]
    pub(crate) fn try_reserve_idle(
        &self,
        arrives: SimTime,
        occupancy: SimDuration,
        bytes: u64,
        now: SimTime,
    ) -> Option<SimTime> {
        debug_assert!(!crate::trace::is_recording());
        if !self.is_idle_from(arrives, now) {
            return None;
        }
        let end = arrives.checked_add(occupancy).ok()?;
        self.book_idle((arrives, end), now);
        self.count(occupancy, bytes, 1);
        Some(end)
    }

    /// Whether a packet arriving at `arrives` finds the server idle: at or
    /// after `free_at`, with no idle gap left after `now` (the gaps before
    /// it are forgotten here, as every booking does). Tested in the order
    /// that makes the common case (one gap, ended by `now`) cheapest.
    #[inline(always)]
    pub(crate) fn is_idle_from(&self, arrives: SimTime, now: SimTime) -> bool {
        let calendar = &self.calendar;
        // The only gap kept, ended by `now` (an empty one too, unless it
        // ends later), is forgotten by being replaced in `book_idle`.
        if calendar.first_gap.get().1 > now || calendar.later_gaps.get() != 0 {
            return self.is_idle_after_forgetting(arrives, now);
        }
        arrives >= calendar.free_at.get()
    }

    /// [`is_idle_from`](Self::is_idle_from) where a gap may be left after
    /// `now` (out of line: a hop loop keeps to the common case, ADR-0069).
    #[cold]
    #[inline(never)]
    fn is_idle_after_forgetting(&self, arrives: SimTime, now: SimTime) -> bool {
        self.forget_gaps_before(now);
        !self.calendar.has_gap() && arrives >= self.calendar.free_at.get()
    }

    /// Books a packet that [`is_idle_from`](Self::is_idle_from) `arrives`
    /// (checked by the caller), served to `end` (`arrives + occupancy`,
    /// summed by the caller): what [`reserve_between`](Self::reserve_between)
    /// books then, but not counted: the caller [`count`](Self::count)s it,
    /// now or (with [`defer_counts`]) later.
    #[inline(always)]
    pub(crate) fn book_idle(&self, (arrives, end): (SimTime, SimTime), now: SimTime) {
        let calendar = &self.calendar;
        debug_assert!(arrives >= calendar.free_at.get() && end >= arrives);
        // The idle time before the packet is the only gap left (none if
        // it is empty: the packet arrives when the server is free).
        calendar
            .first_gap
            .set((calendar.free_at.get().max(now), arrives));
        calendar.free_at.set(end);
    }

    /// Counts `jobs` jobs of `bytes` bytes in all, served for `occupancy`
    /// in all, booked by [`book_idle`](Self::book_idle).
    #[inline(always)]
    pub(crate) fn count(&self, occupancy: SimDuration, bytes: u64, jobs: u64) {
        self.calendar.count(occupancy, bytes, jobs);
    }

    /// [`reserve_between`](Self::reserve_between)'s service of a packet
    /// arriving inside booked time.
    fn slip_in(
        &self,
        arrives: SimTime,
        occupancy: SimDuration,
        bytes: u64,
        wait: SimDuration,
    ) -> Result<Reservation, HwError> {
        let calendar = &self.calendar;
        let start = later_for(arrives, wait, || &self.name)?.max(calendar.slipped_until.get());
        let end = later_for(start, occupancy, || &self.name)?;
        calendar.slipped_until.set(end);
        if !self.shrink_gap_at(arrives, occupancy) {
            let free_at = later_for(calendar.free_at.get(), occupancy, || &self.name)?;
            calendar.free_at.set(free_at);
        }
        let reservation = Reservation { start, end };
        if trace::is_recording() {
            self.trace(reservation, bytes);
        }
        Ok(reservation)
    }

    /// Takes `occupancy` off the end of the idle gap that holds `arrives`,
    /// if one does and is long enough (the gap stays one piece, so the
    /// flow it was left for is not split around a header).
    fn shrink_gap_at(&self, arrives: SimTime, occupancy: SimDuration) -> bool {
        if !self.calendar.has_gap() {
            return false;
        }
        let holds = |&(from, to): &Gap| {
            from <= arrives && arrives < to && to.saturating_since(from) >= occupancy
        };
        self.edit_gaps(|gaps| {
            let Some(index) = gaps.iter().position(holds) else {
                return false;
            };
            let (from, to) = gaps[index];
            let to = SimTime::from_ps(to.as_ps() - occupancy.as_ps());
            if from < to {
                gaps[index] = (from, to);
            } else {
                gaps.remove(index);
            }
            true
        })
    }

    /// The end of the last booking: a packet arriving before it finds the
    /// server busy (or an idle gap left for a flow booked ahead).
    pub fn free_at(&self) -> SimTime {
        self.calendar.free_at.get()
    }

    /// Counters as of `now` (any instant; a past one counts less busy time),
    /// the counts kept by `DeferredCounts` makers added first.
    pub fn stats(&self, now: SimTime) -> ServerStats {
        flush_deferred();
        let calendar = &self.calendar;
        let ahead = calendar.free_at.get().saturating_since(now).as_ps();
        let first = calendar.has_gap().then_some(calendar.first_gap.get());
        let later = self.later_gaps.take();
        let idle_ahead: u64 = first
            .iter()
            .chain(later.iter().flat_map(|gaps| gaps.iter()))
            .map(|&(from, to)| to.saturating_since(from.max(now)).as_ps())
            .sum();
        self.later_gaps.set(later);
        let busy = calendar
            .reserved
            .get()
            .saturating_sub(ahead.saturating_sub(idle_ahead));
        ServerStats {
            jobs: calendar.jobs.get(),
            bytes: calendar.bytes.get(),
            busy: SimDuration::from_ps(busy),
            elapsed: now.saturating_since(SimTime::ZERO),
        }
    }

    /// Writes the reservation to the trace being recorded, if any, as a
    /// complete event on this server's track. It touches no model state, so
    /// tracing never changes simulated times.
    fn trace(&self, reservation: Reservation, bytes: u64) {
        if reservation.start == reservation.end {
            return;
        }
        let (name, sized) = self.activity.label();
        let with_bytes = [("bytes", bytes)];
        trace::record_complete(&CompleteEvent {
            track: &self.name,
            name,
            category: "kernbench::hw::server",
            start: reservation.start,
            end: reservation.end,
            args: if sized { &with_bytes } else { &[] },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Simulation;

    fn ns(n: u64) -> SimDuration {
        SimDuration::from_ns(n)
    }

    /// Runs `book` on a fresh server named `name`, in one simulation task;
    /// what it returned and the server.
    fn on_server<T: 'static, F: std::future::Future<Output = T> + 'static>(
        name: &str,
        book: impl FnOnce(Rc<SerialServer>) -> F,
    ) -> (T, Rc<SerialServer>) {
        let mut simulation = Simulation::new();
        let server = Rc::new(SerialServer::new(name, Activity::Packet));
        let done = simulation.spawn("book", book(server.clone()));
        simulation.run().unwrap();
        (done.output().unwrap(), server)
    }

    #[test]
    fn jobs_are_served_in_arrival_order_back_to_back() {
        let mut simulation = Simulation::new();
        let server = Rc::new(SerialServer::new("s", Activity::Packet));
        let mut handles = Vec::new();
        for (i, arrive) in [0u64, 0, 5, 40].into_iter().enumerate() {
            let server = server.clone();
            handles.push(simulation.spawn(&format!("job{i}"), async move {
                sim::sleep(ns(arrive)).await;
                server.reserve(ns(10), 1).unwrap()
            }));
        }
        simulation.run().unwrap();
        let spans: Vec<_> = handles
            .into_iter()
            .map(|h| {
                let r = h.output().unwrap();
                (r.start.as_ps() / 1000, r.end.as_ps() / 1000)
            })
            .collect();
        assert_eq!(spans, vec![(0, 10), (10, 20), (20, 30), (40, 50)]);
    }

    #[test]
    fn a_held_server_waits_out_its_windows_and_resumes_a_job_they_cut() {
        let t = SimTime::from_ns;
        let mut simulation = Simulation::new();
        let server = Rc::new(SerialServer::new("s", Activity::Packet));
        server.hold(&[(t(20), t(50)), (t(60), t(70))]);
        let mut handles = Vec::new();
        for (i, (arrive, slip)) in [(0u64, false), (10, false), (30, true), (52, false)]
            .into_iter()
            .enumerate()
        {
            let server = server.clone();
            handles.push(simulation.spawn(&format!("job{i}"), async move {
                sim::sleep(ns(arrive)).await;
                match slip {
                    true => server.reserve_between(sim::now(), ns(5), 1, ns(1)).unwrap(),
                    false => server.reserve(ns(15), 1).unwrap(),
                }
            }));
        }
        simulation.run().unwrap();
        let spans: Vec<_> = handles
            .into_iter()
            .map(|h| {
                let r = h.output().unwrap();
                (r.start.as_ps() / 1000, r.end.as_ps() / 1000)
            })
            .collect();
        // Job 1 is cut at 20 and resumes at 50; the packet arriving in the
        // first window waits for it (and job 1); job 3 fills 55..60, then
        // resumes after the second window.
        assert_eq!(spans, vec![(0, 15), (15, 60), (70, 75), (75, 90)]);
        assert!(server.is_held());
        assert_eq!(server.stats(t(100)).busy, ns(15 + 15 + 5 + 15 + 30 + 10));
    }

    #[test]
    fn busy_time_counts_only_what_has_elapsed() {
        let ((), server) = on_server("s", |s| async move {
            for _ in 0..3 {
                s.reserve(ns(10), 8).unwrap();
            }
        });
        let at = |t: u64| server.stats(SimTime::from_ns(t));
        assert_eq!(at(0).busy, SimDuration::ZERO);
        assert_eq!(at(15).busy, ns(15));
        assert_eq!(at(15).utilisation(), 1.0);
        assert_eq!(at(60).busy, ns(30));
        assert_eq!(at(60).utilisation(), 0.5);
        assert_eq!((at(60).jobs, at(60).bytes), (3, 24));
    }

    #[test]
    fn a_job_booked_ahead_leaves_its_idle_time_to_earlier_arrivals() {
        let (spans, server) = on_server("s", |s| async move {
            // A flow books [100, 130); one arriving now needs 150 ns: it
            // takes [0, 100) and, after the booking, [130, 180).
            let ahead = s
                .reserve_batch(SimTime::from_ns(100), ns(30), 0, 1)
                .unwrap();
            let now = s.reserve(ns(150), 0).unwrap();
            // A third, arriving at 120, finds no gap: after 180.
            let late = s
                .reserve_batch(SimTime::from_ns(120), ns(10), 0, 1)
                .unwrap();
            let busy_at_100 = s.stats(SimTime::from_ns(100)).busy;
            [ahead, now, late]
                .map(|r| (r.start.as_ps() / 1000, r.end.as_ps() / 1000))
                .into_iter()
                .chain([(busy_at_100.as_ps() / 1000, 0)])
                .collect::<Vec<_>>()
        });
        assert_eq!(spans, vec![(100, 130), (0, 180), (180, 190), (100, 0)]);
        let end = server.stats(SimTime::from_ns(200));
        assert_eq!((end.busy, end.jobs), (ns(190), 3));
    }

    #[test]
    fn several_gaps_are_used_in_time_order_and_forgotten_once_past() {
        let span = |r: Reservation| (r.start.as_ps() / 1000, r.end.as_ps() / 1000);
        let (spans, server) = on_server("s", |s| async move {
            // Three flows booked ahead leave [0, 100), [130, 200) and
            // [230, 300) idle.
            for at in [100, 200, 300] {
                s.reserve_batch(SimTime::from_ns(at), ns(30), 0, 1).unwrap();
            }
            // 150 ns arriving now: [0, 100) and [130, 180). Then 100 ns:
            // [180, 200), [230, 300) and [330, 340) after the bookings.
            let first = s.reserve(ns(150), 0).unwrap();
            let second = s.reserve(ns(100), 0).unwrap();
            [first, second].map(span)
        });
        assert_eq!(spans, [(0, 180), (180, 340)]);
        assert_eq!(server.stats(SimTime::from_ns(340)).busy, ns(340));
        let (spans, _) = on_server("s", |s| async move {
            // Gaps [0, 100) and [130, 200); at 150 the first is past and
            // the second half gone: 30 ns arriving then is served at 150.
            for at in [100, 200] {
                s.reserve_batch(SimTime::from_ns(at), ns(30), 0, 1).unwrap();
            }
            sim::sleep(ns(150)).await;
            span(s.reserve(ns(30), 0).unwrap())
        });
        assert_eq!(spans, (150, 180));
    }

    /// Books `history` (flows booked ahead: arrival and occupancy, ns) at
    /// time 0, moves to `now`, then books a 10 ns packet arriving at
    /// `arrives` with `try_reserve_idle` on one server and with
    /// `reserve_between` on a twin. Returns the quick booking's span (if it
    /// took it) and whether both servers then agree (span, free_at, stats).
    fn quick_and_general(history: &[(u64, u64)], now: u64, arrives: u64) -> Option<(u64, u64)> {
        let book = move |quick: bool| {
            let history = history.to_vec();
            on_server("s", move |s| async move {
                for &(at, busy) in &history {
                    s.reserve_batch(SimTime::from_ns(at), ns(busy), 0, 1)
                        .unwrap();
                }
                sim::sleep(ns(now)).await;
                let (at, wait) = (SimTime::from_ns(arrives), ns(5));
                match quick {
                    true => s
                        .try_reserve_idle(at, ns(10), 64, sim::now())
                        .map(|end| Reservation { start: at, end }),
                    false => Some(s.reserve_between(at, ns(10), 64, wait).unwrap()),
                }
            })
        };
        let ((quick, server), (general, twin)) = (book(true), book(false));
        let quick = quick?;
        let later = SimTime::from_ns(1_000);
        assert_eq!(Some(quick), general);
        assert_eq!(server.free_at(), twin.free_at());
        assert_eq!(server.stats(later), twin.stats(later));
        Some((quick.start.as_ps() / 1000, quick.end.as_ps() / 1000))
    }

    #[test]
    fn the_quick_booking_takes_only_idle_hops_and_books_as_the_general_one() {
        // (flows booked ahead, now, arrival) -> the quick booking's span.
        type Case = (&'static [(u64, u64)], u64, u64, Option<(u64, u64)>);
        let cases: [Case; 5] = [
            (&[], 0, 0, Some((0, 10))),
            // An idle gap [0, 100) ahead: the general booking fills it.
            (&[(100, 30)], 0, 50, None),
            // The gap is past at 150: forgotten, the hop is idle.
            (&[(100, 30)], 150, 150, Some((150, 160))),
            // Arriving inside booked time: the packet slips in (general).
            (&[(100, 30)], 120, 120, None),
            // Arriving ahead of an idle hop leaves a gap [150, 200).
            (&[(100, 30)], 150, 200, Some((200, 210))),
        ];
        for (history, now, arrives, expect) in cases {
            let got = quick_and_general(history, now, arrives);
            assert_eq!(
                got, expect,
                "history {history:?}, now {now}, arrives {arrives}"
            );
        }
    }

    #[test]
    fn a_single_packet_slips_between_booked_flows_and_never_splits_a_gap() {
        let (spans, server) = on_server("s", |s| async move {
            // A flow booked ahead over [100, 200) leaves the gap [0, 100).
            s.reserve_batch(SimTime::from_ns(100), ns(100), 0, 50)
                .unwrap();
            let span = |r: Reservation| (r.start.as_ps() / 1000, r.end.as_ps() / 1000);
            // A header arriving at 40 is served there (after the 2 ns wait)
            // and takes its 4 ns off the end of the gap: [0, 96) stays one
            // piece, so a 96 ns flow arriving at 0 still fits before 100.
            let header = s.reserve_between(SimTime::from_ns(40), ns(4), 0, ns(2));
            let fits = s.reserve_batch(SimTime::ZERO, ns(96), 0, 12).unwrap();
            // One arriving inside the booked flow (at 150) does not wait for
            // its end: it is served on arrival and pushes the end to 204.
            let inside = s.reserve_between(SimTime::from_ns(150), ns(4), 0, ns(2));
            let after = s.reserve(ns(1), 0).unwrap();
            [header.unwrap(), fits, inside.unwrap(), after].map(span)
        });
        assert_eq!(spans, [(42, 46), (0, 96), (152, 156), (204, 205)]);
        assert_eq!(server.stats(SimTime::from_ns(205)).busy, ns(205));
    }

    #[test]
    fn packets_slipping_in_together_queue_one_behind_another() {
        let (starts, server) = on_server("s", |s| async move {
            // A flow booked over [0, 1000); three packets of 4 ns arrive
            // inside it at 100 ns, each waiting 2 ns for the packet in
            // service: served 102, 106, 110 as a queue would, not side by
            // side at 102.
            s.reserve_batch(SimTime::ZERO, ns(1000), 0, 100).unwrap();
            let slip = || s.reserve_between(SimTime::from_ns(100), ns(4), 0, ns(2));
            [slip(), slip(), slip()].map(|r| r.unwrap().start.as_ps() / 1000)
        });
        assert_eq!(starts, [102, 106, 110]);
        assert_eq!(server.stats(SimTime::from_ns(1012)).busy, ns(1012));
    }

    #[test]
    fn overflowing_reservation_is_an_error_naming_the_server() {
        let (result, _) = on_server("slow link", |s| async move {
            s.reserve(SimDuration::MAX, 0).unwrap();
            s.reserve(ns(1), 0)
        });
        let error = result.unwrap_err();
        assert!(error.to_string().starts_with("slow link: "), "{error}");
    }
}
