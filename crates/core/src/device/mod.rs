//! [`Device`]: the simulated machine as kernels and host code use it —
//! timed hardware ([`Fabric`]) joined with the bytes it moves ([`mem`]).
//!
//! Every data movement goes through here, so that timing, data and the op
//! log cannot drift apart: a DMA copy is issued on a DMA engine, its effect
//! on memory is applied and logged at the instant its data phase starts
//! (the source is snapshotted when the DMA is issued, as real hardware
//! would; in flow mode a copy from a TCM that finds a free slot starts it
//! at its request, ADR-0027), and it then takes exactly the time of its
//! stages:
//!
//! ```text
//! request   initiator -> source memory node        (header-only packet)
//! read      source memory stage                    (HBM PCs / SRAM port / TCM latency)
//! data      source node -> destination node        (len bytes, packetised)
//! write     destination memory stage
//! ```
//!
//! [`Device::dma_copy_formula`] is the closed form of the same stages for
//! an uncontended copy. Allocation maps the region in the store through the
//! op log too, so replaying the log on a fresh store rebuilds the memory.
//!
//! Knows hardware, routes and memory; nothing of tensors' shapes, kernels'
//! grids or collectives.
//!
//! [`mem`]: crate::mem

use std::cell::{Cell, Ref, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::hw::{Fabric, HwError, Route};
use crate::mem::{
    DataMode, DeviceAllocError, DeviceAllocators, MemoryStore, Op, OpLog, OpLogError, Payload,
    RegionMemo, StoreError,
};
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::{AddressError, Machine, MemSpace, NodeId, RouteError, TopologySpec};

mod copy;

pub use copy::{BookedCopy, CopyJob, CopyRequest, CopyShape, CopyStart, PendingCopy};

use copy::CopyPath;

/// Allocation granule of every device memory: one 64-byte line.
pub const GRANULE: u64 = 64;

/// What a device operation could not do, naming the address, memory or
/// unit involved.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// An address that is not in the machine's address map.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// Two nodes with no route between them.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A timing that could not be computed.
    #[error(transparent)]
    Hw(#[from] HwError),
    /// Out of memory, a bad free, a memory that does not exist.
    #[error(transparent)]
    Alloc(#[from] DeviceAllocError),
    /// An access outside the mapped regions (or data read while data is off).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The op log refused an op.
    #[error(transparent)]
    OpLog(#[from] OpLogError),
    /// The machine could not be compiled.
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
    /// A strided copy's shape refused, or a side leaving its memory
    /// (ADR-0112).
    #[error(transparent)]
    Strided(#[from] crate::mem::StridedError),
}

/// When the stages of one DMA copy happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyTiming {
    /// When the copy was requested.
    pub requested: SimTime,
    /// When its data phase started (after issue and a free slot).
    pub started: SimTime,
    /// When the last byte was written.
    pub end: SimTime,
}

/// The timed machine and its memory contents.
pub struct Device {
    fabric: Rc<Fabric>,
    store: RefCell<MemoryStore>,
    allocators: RefCell<DeviceAllocators>,
    oplog: RefCell<OpLog>,
    /// [`Device::routes`]' memory. Nothing iterates it (ARCHITECTURE: when
    /// a hash map is allowed).
    copy_routes: RefCell<CopyRoutes>,
}

/// A copy's routes by initiator, source memory and destination memory.
type CopyRoutes = FxHashMap<RouteKey, Rc<RoutePair>>;

/// A copy's read-request route and data route.
struct RoutePair {
    request: Route,
    data: Route,
}

impl Device {
    /// A fresh device for `spec`'s machine; `data` chooses whether bytes are
    /// kept (`On`) or only timed (`Off`).
    pub fn new(spec: &TopologySpec, data: DataMode) -> Result<Rc<Device>, DeviceError> {
        Device::from_machine(Arc::new(Machine::build(spec)?), data)
    }

    /// A fresh device (idle hardware, empty memory) for an already
    /// compiled machine, so repeated runs need not recompile it.
    pub fn from_machine(machine: Arc<Machine>, data: DataMode) -> Result<Rc<Device>, DeviceError> {
        let map = machine.address_map().clone();
        let allocators = DeviceAllocators::new(machine.spec(), GRANULE)?;
        Ok(Rc::new(Device {
            fabric: Rc::new(Fabric::new(machine)),
            store: RefCell::new(MemoryStore::with_mode(map, data)),
            allocators: RefCell::new(allocators),
            oplog: RefCell::new(OpLog::new()),
            copy_routes: RefCell::default(),
        }))
    }

    /// The timed hardware.
    pub fn fabric(&self) -> &Rc<Fabric> {
        &self.fabric
    }

    /// The memory contents (read-only view).
    pub fn store(&self) -> Ref<'_, MemoryStore> {
        self.store.borrow()
    }

    /// From now on, ops are applied and counted but not recorded
    /// ([`OpLog::counting`]): a timing-only run that will not replay its log
    /// keeps memory independent of its op count. Ops already recorded are
    /// dropped.
    pub fn stop_recording_ops(&self) {
        *self.oplog.borrow_mut() = OpLog::counting();
    }

    /// From now on (call it before the first op), ops are replayed on a
    /// second, empty store as they are applied instead of recorded
    /// ([`OpLog::replaying`]): a data run's op-log check whose memory is
    /// that of the data, not of the op count.
    pub fn replay_ops_as_applied(&self) {
        let fresh = self.store.borrow().fresh();
        *self.oplog.borrow_mut() = OpLog::replaying(fresh);
    }

    /// Every op applied so far, in effect order.
    pub fn oplog(&self) -> Ref<'_, OpLog> {
        self.oplog.borrow()
    }

    /// Whether bytes are kept.
    pub fn data_mode(&self) -> DataMode {
        self.store.borrow().mode()
    }

    /// Allocates `len` bytes in `space` and maps them (zero-filled);
    /// returns the device address. Untimed: allocation is bookkeeping.
    pub fn alloc(&self, space: MemSpace, len: u64) -> Result<u64, DeviceError> {
        let addr = self.allocators.borrow_mut().alloc(space, len)?;
        self.apply("allocator", Op::Map { addr, len })?;
        Ok(addr)
    }

    /// Like [`alloc`](Self::alloc), at a multiple of `align` bytes (a power
    /// of two, at least [`GRANULE`]).
    pub fn alloc_aligned(&self, space: MemSpace, len: u64, align: u64) -> Result<u64, DeviceError> {
        let addr = self
            .allocators
            .borrow_mut()
            .alloc_aligned(space, len, align)?;
        self.apply("allocator", Op::Map { addr, len })?;
        Ok(addr)
    }

    /// Frees an allocation made by [`alloc`](Self::alloc).
    pub fn free(&self, addr: u64) -> Result<(), DeviceError> {
        self.allocators.borrow_mut().free(addr)?;
        self.apply("allocator", Op::Unmap { addr })?;
        Ok(())
    }

    /// Writes `bytes` at `addr` without moving them through the machine:
    /// host code filling host memory, or a test preparing state.
    pub fn write_untimed(&self, node: &str, addr: u64, bytes: &[u8]) -> Result<(), DeviceError> {
        let data = Payload::Bytes(bytes.to_vec());
        self.apply(node, Op::HostWrite { addr, data })?;
        Ok(())
    }

    /// The bytes at `addr` (untimed; for checking results). Errors when data
    /// is off.
    pub fn read_untimed(&self, addr: u64, len: u64) -> Result<Vec<u8>, DeviceError> {
        Ok(self.store.borrow().read(addr, len)?.to_vec())
    }

    /// Applies `op` now, issued by `node`, and logs it.
    pub fn apply(&self, node: &str, op: Op) -> Result<crate::mem::OpId, DeviceError> {
        let now = sim::try_now().unwrap_or(SimTime::ZERO);
        let mut store = self.store.borrow_mut();
        Ok(self.oplog.borrow_mut().apply(&mut store, node, now, op)?)
    }

    /// [`apply`](Self::apply) by a caller that remembers where its last
    /// op's operands were (`memo`, ADR-0064): the same checks and errors.
    pub fn apply_remembered(
        &self,
        node: &str,
        op: Op,
        memo: &Cell<RegionMemo>,
    ) -> Result<crate::mem::OpId, DeviceError> {
        let now = sim::try_now().unwrap_or(SimTime::ZERO);
        let mut store = self.store.borrow_mut();
        let mut log = self.oplog.borrow_mut();
        Ok(log.apply_remembered(&mut store, node, now, (op, memo))?)
    }

    /// Marks op `id` (from [`apply`](Self::apply)) complete now: a unit
    /// that applies an op when it starts calls this when it ends.
    pub fn complete(&self, id: crate::mem::OpId) -> Result<(), DeviceError> {
        Ok(self.oplog.borrow_mut().complete(id, sim::now())?)
    }

    /// The uncontended time of [`dma_copy`](Self::dma_copy) from request
    /// to last byte written.
    pub fn dma_copy_formula(
        &self,
        engine_issue: SimDuration,
        initiator: NodeId,
        src: u64,
        dst: u64,
        len: u64,
    ) -> Result<SimDuration, DeviceError> {
        let plan = self.plan(initiator, src, dst)?;
        let f = &self.fabric;
        let stages = [
            f.send_formula(plan.routes.request.path(), 0)?,
            f.access_formula(plan.src.0, plan.src.1, len)?,
            f.send_formula(plan.routes.data.path(), len)?,
            f.access_formula(plan.dst.0, plan.dst.1, len)?,
        ];
        Ok(stages.into_iter().fold(engine_issue, |sum, d| sum + d))
    }

    fn plan(&self, initiator: NodeId, src: u64, dst: u64) -> Result<CopyPath, DeviceError> {
        let map = self.fabric.machine().address_map();
        let (src_space, src_offset) = map.decode(src)?;
        let (dst_space, dst_offset) = map.decode(dst)?;
        Ok(CopyPath {
            routes: self.routes(initiator, src_space, dst_space)?,
            src: (src_space, src_offset),
            dst: (dst_space, dst_offset),
        })
    }

    /// [`plan`](Self::plan), taken from `memo` when its copy was between
    /// the same memories, by the same initiator: each address is then
    /// checked to fall inside the memory remembered (one subtraction and
    /// one compare, the same answer as a decode), not decoded again.
    /// Inlined: `start_copy`'s whole path, which calls it for every
    /// IPCQ message, paid about 30 instructions a call more when a second caller
    /// (`copy`) made the compiler keep it out of line (ADR-0071).
    #[inline(always)]
    fn plan_remembered(
        &self,
        initiator: NodeId,
        src: u64,
        dst: u64,
        memo: &RouteMemo,
    ) -> Result<CopyPath, DeviceError> {
        if let Some(remembered) = &*memo.remembered.borrow()
            && remembered.initiator == initiator
            && let Some(src) = remembered.src.locate(src)
            && let Some(dst) = remembered.dst.locate(dst)
        {
            let routes = remembered.routes.clone();
            return Ok(CopyPath { routes, src, dst });
        }
        let map = self.fabric.machine().address_map();
        let (src, dst) = ((src, map.decode(src)?), (dst, map.decode(dst)?));
        let routes = self.routes(initiator, src.1.0, dst.1.0)?;
        let memory = |(addr, (space, offset)): (u64, (MemSpace, u64))| Memory {
            base: addr - offset,
            space,
            capacity: map.capacity(space),
        };
        *memo.remembered.borrow_mut() = Some(Remembered {
            initiator,
            src: memory(src),
            dst: memory(dst),
            routes: routes.clone(),
        });
        Ok(CopyPath {
            routes,
            src: src.1,
            dst: dst.1,
        })
    }

    /// The routes of a copy by `initiator` from `src` to `dst`: its read
    /// request's and its data's (remembered: a kernel copies between the
    /// same memories again and again).
    fn routes(
        &self,
        initiator: NodeId,
        src: MemSpace,
        dst: MemSpace,
    ) -> Result<Rc<RoutePair>, DeviceError> {
        let key = (initiator, src, dst);
        if let Some(routes) = self.copy_routes.borrow().get(&key) {
            return Ok(routes.clone());
        }
        let router = self.fabric.router();
        let src_node = router.resolver().memory_node(src)?;
        let dst_node = router.resolver().memory_node(dst)?;
        let routes = Rc::new(RoutePair {
            request: self.fabric.route(&router.find_path(initiator, src_node)?)?,
            data: self.fabric.route(&router.find_path(src_node, dst_node)?)?,
        });
        self.copy_routes.borrow_mut().insert(key, routes.clone());
        Ok(routes)
    }
}

/// The routes and memories of the last copy one caller made, kept by it
/// (an IPCQ ring, whose sends copy between the same memories again and
/// again: ADR-0057), so that its next copy between the same memories
/// skips the device's route table and the addresses' decoding, and its
/// op's check skips the store's look-ups while its regions stay mapped
/// (ADR-0064).
#[derive(Default)]
pub struct RouteMemo {
    remembered: RefCell<Option<Remembered>>,
    regions: Cell<RegionMemo>,
}

/// What a [`RouteMemo`] keeps of one copy.
struct Remembered {
    initiator: NodeId,
    src: Memory,
    dst: Memory,
    routes: Rc<RoutePair>,
}

/// One memory as the address map lays it out: the addresses from `base`
/// up to `capacity` bytes on are its offsets (an offset field is wide
/// enough for the largest memory, so no other memory's address is in
/// that range).
struct Memory {
    base: u64,
    space: MemSpace,
    capacity: u64,
}

impl Memory {
    /// What decoding `addr` gives, if it falls in this memory.
    fn locate(&self, addr: u64) -> Option<(MemSpace, u64)> {
        let offset = addr.wrapping_sub(self.base);
        (offset < self.capacity).then_some((self.space, offset))
    }
}

/// A copy's initiator, source memory and destination memory.
type RouteKey = (NodeId, MemSpace, MemSpace);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Strided;
    use crate::sim::Simulation;
    use crate::topology::Fidelity;

    fn device(data: DataMode) -> Rc<Device> {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        Device::new(&spec, data).unwrap()
    }

    /// Copies 32 KiB from cube 5's HBM into PE 0's TCM of cube 0 with that
    /// PE's DMA; returns (simulated, formula, bytes read back).
    fn copy_far_hbm_to_tcm(data: DataMode) -> (SimDuration, SimDuration, Option<Vec<u8>>) {
        let device = device(data);
        let len = 32 << 10;
        let src = device
            .alloc(MemSpace::Hbm { sip: 0, cube: 5 }, len)
            .unwrap();
        let dst = device
            .alloc(
                MemSpace::Tcm {
                    sip: 0,
                    cube: 0,
                    pe: 0,
                },
                len,
            )
            .unwrap();
        let pattern: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        device.write_untimed("host", src, &pattern).unwrap();
        let (simulated, formula, _) = copy_by_pe0(&device, src, dst, len);
        let back = device.read_untimed(dst, len).ok();
        assert!(device.oplog().verify(&device.store()).is_ok());
        (simulated, formula, back)
    }

    /// Runs one copy with the DMA of PE 0 of cube 0 of SIP 0; returns
    /// (simulated, formula, events of the run).
    fn copy_by_pe0(
        device: &Rc<Device>,
        src: u64,
        dst: u64,
        len: u64,
    ) -> (SimDuration, SimDuration, u64) {
        let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
        let issue = device.fabric().machine().spec().pe().dma.issue_overhead;
        let formula = device.dma_copy_formula(issue, pe, src, dst, len).unwrap();
        let mut simulation = Simulation::new();
        let d = device.clone();
        let copy = simulation.spawn("pe0", async move {
            let engine = d.fabric().pe_dma(0, 0, 0).clone();
            d.dma_copy(&engine, pe, CopyJob::contiguous(src, dst, len))
                .await
        });
        let stats = simulation.run().unwrap();
        let timing = copy.output().unwrap().unwrap();
        (timing.end - timing.requested, formula, stats.events)
    }

    #[test]
    fn uncontended_copy_takes_exactly_its_formula_and_moves_the_bytes() {
        let (simulated, formula, back) = copy_far_hbm_to_tcm(DataMode::On);
        assert_eq!(simulated, formula);
        let expected: Vec<u8> = (0..32u64 << 10).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(back.unwrap(), expected);
    }

    #[test]
    fn timing_is_the_same_with_data_off() {
        let (on, _, _) = copy_far_hbm_to_tcm(DataMode::On);
        let (off, _, back) = copy_far_hbm_to_tcm(DataMode::Off);
        assert_eq!(on, off);
        assert!(back.is_none(), "reads fail with data off");
    }

    /// Copies 4 KiB from PE 0's TCM of cube 0 to PE 0's TCM of cube 5 and
    /// signals over the route between the two PEs; returns (when the
    /// signal landed, the copy's formula plus the signal's crossing).
    fn signalled_tcm_copy(fidelity: Fidelity) -> (SimDuration, SimDuration) {
        let (landed, formula, _) = signalled_tcm_copy_of(fidelity, 4 << 10);
        (landed, formula)
    }

    /// [`signalled_tcm_copy`] of `len` bytes, and the run's events.
    fn signalled_tcm_copy_of(fidelity: Fidelity, len: u64) -> (SimDuration, SimDuration, u64) {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[])
            .unwrap()
            .with_fidelity(fidelity);
        let device = Device::new(&spec, DataMode::Off).unwrap();
        let tcm = |cube| MemSpace::Tcm {
            sip: 0,
            cube,
            pe: 0,
        };
        let (src, dst) = (
            device.alloc(tcm(0), len).unwrap(),
            device.alloc(tcm(5), len).unwrap(),
        );
        let machine = device.fabric().machine().clone();
        let (pe, peer) = (machine.pe(0, 0, 0).unwrap(), machine.pe(0, 5, 0).unwrap());
        let path = device.fabric().router().find_path(pe, peer).unwrap();
        let signal = device.fabric().route(&path).unwrap();
        let issue = spec.pe().dma.issue_overhead;
        let formula = device.dma_copy_formula(issue, pe, src, dst, len).unwrap()
            + device.fabric().send_formula(&path, 0).unwrap();
        let mut simulation = Simulation::new();
        let d = device.clone();
        let copy = simulation.spawn("pe0", async move {
            let engine = d.fabric().pe_dma(0, 0, 0).clone();
            let memo = RouteMemo::default();
            let request = CopyRequest {
                memo: Some(&memo),
                doorbell: Some(&signal),
                ..CopyRequest::plain(&engine, pe, CopyJob::contiguous(src, dst, len))
            };
            d.copy(request).await.map(|timing| (timing, sim::now()))
        });
        let stats = simulation.run().unwrap();
        let (timing, landed) = copy.output().unwrap().unwrap();
        assert!(
            timing.end < landed,
            "the signal leaves once the data is written"
        );
        (landed - timing.requested, formula, stats.events)
    }

    #[test]
    fn a_one_packet_signalled_copy_is_one_unit_and_one_sleep_in_flow_mode() {
        // ADR-0048: issue, read, data, write and signal booked at the
        // request; a 4 KiB copy keeps its two sleeps (ADR-0027).
        let device = timing_device(Fidelity::Flow);
        let machine = device.fabric().machine().clone();
        let (pe, peer) = (machine.pe(0, 0, 0).unwrap(), machine.pe(0, 5, 0).unwrap());
        let payload = device
            .fabric()
            .router()
            .find_path(pe, peer)
            .unwrap()
            .max_payload();
        for (len, flow_events) in [(payload, 1), (4 << 10, 2)] {
            let (packet, packet_formula, _) = signalled_tcm_copy_of(Fidelity::Packet, len);
            let (flow, flow_formula, events) = signalled_tcm_copy_of(Fidelity::Flow, len);
            assert_eq!((packet, flow), (packet_formula, flow_formula), "{len} B");
            assert_eq!(events, flow_events, "{len} B");
        }
    }

    #[test]
    fn an_uncontended_signalled_copy_takes_its_formula_in_both_fidelities() {
        for fidelity in Fidelity::ALL {
            let (simulated, formula) = signalled_tcm_copy(fidelity);
            assert_eq!(simulated, formula, "{fidelity:?}");
        }
    }

    /// PE 0's TCM of cube 0 of SIP 0.
    const TCM0: MemSpace = MemSpace::Tcm {
        sip: 0,
        cube: 0,
        pe: 0,
    };

    /// A timing-only device of the default machine in `fidelity`.
    fn timing_device(fidelity: Fidelity) -> Rc<Device> {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[])
            .unwrap()
            .with_fidelity(fidelity);
        Device::new(&spec, DataMode::Off).unwrap()
    }

    /// One 4 KiB copy by PE 0 of cube 0 from its TCM to `to`: (simulated,
    /// formula, events).
    fn copy_from_tcm0(fidelity: Fidelity, to: MemSpace) -> (SimDuration, SimDuration, u64) {
        let device = timing_device(fidelity);
        let len = 4 << 10;
        let (src, dst) = (
            device.alloc(TCM0, len).unwrap(),
            device.alloc(to, len).unwrap(),
        );
        copy_by_pe0(&device, src, dst, len)
    }

    /// `check(destination, flow-mode events)`: the copy takes its formula
    /// in both modes, and flow mode sleeps as often as expected.
    fn check_copy_from_tcm0(to: MemSpace, flow_events: u64) {
        let (packet, packet_formula, _) = copy_from_tcm0(Fidelity::Packet, to);
        let (flow, flow_formula, events) = copy_from_tcm0(Fidelity::Flow, to);
        assert_eq!(packet, packet_formula);
        assert_eq!(flow, flow_formula);
        assert_eq!(events, flow_events);
    }

    #[test]
    fn a_copy_within_a_tcm_takes_its_formula_and_one_sleep_in_flow_mode() {
        // Issue, read request, read and write: nothing books (ADR-0027).
        check_copy_from_tcm0(TCM0, 1);
    }

    #[test]
    fn a_copy_from_a_tcm_to_another_cube_takes_its_formula_and_two_sleeps_in_flow_mode() {
        // Issue, read request and read in one sleep; the data books links
        // at the instant it leaves, and the write follows.
        let far = MemSpace::Tcm {
            sip: 0,
            cube: 5,
            pe: 3,
        };
        check_copy_from_tcm0(far, 2);
    }

    #[test]
    fn a_flow_mode_copy_without_a_free_slot_waits_for_one() {
        let device = timing_device(Fidelity::Flow);
        let len = 4 << 10;
        let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
        let slots = device
            .fabric()
            .machine()
            .spec()
            .pe()
            .dma
            .max_outstanding
            .get() as usize;
        let far = MemSpace::Tcm {
            sip: 0,
            cube: 5,
            pe: 3,
        };
        let mut simulation = Simulation::new();
        // Each copy holds its slot far longer than the issues take.
        let copies: Vec<_> = (0..=slots)
            .map(|_| {
                let (src, dst) = (
                    device.alloc(TCM0, len).unwrap(),
                    device.alloc(far, len).unwrap(),
                );
                let d = device.clone();
                simulation.spawn("copy", async move {
                    let engine = d.fabric().pe_dma(0, 0, 0).clone();
                    d.dma_copy(&engine, pe, CopyJob::contiguous(src, dst, len))
                        .await
                })
            })
            .collect();
        simulation.run().unwrap();
        let timings: Vec<CopyTiming> = copies
            .into_iter()
            .map(|copy| copy.output().unwrap().unwrap())
            .collect();
        let (last, first) = timings.split_last().unwrap();
        let first_free = first.iter().map(|t| t.end).min().unwrap();
        assert!(first.iter().all(|t| t.started < first_free));
        assert_eq!(last.started, first_free);
    }

    /// `start_copy` of 4 KiB by PE 0 of cube 0 from its TCM to `to`, no
    /// doorbell, at time zero: (when it is done, if booked; the formula;
    /// ops applied).
    fn start_copy_to(fidelity: Fidelity, to: MemSpace) -> (Option<SimTime>, SimDuration, usize) {
        let device = timing_device(fidelity);
        let len = 4 << 10;
        let (src, dst) = (
            device.alloc(TCM0, len).unwrap(),
            device.alloc(to, len).unwrap(),
        );
        let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
        let issue = device.fabric().machine().spec().pe().dma.issue_overhead;
        let formula = device.dma_copy_formula(issue, pe, src, dst, len).unwrap();
        let ops = device.oplog().len();
        let mut simulation = Simulation::new();
        let d = device.clone();
        let booked = simulation.spawn("pe0", async move {
            let engine = d.fabric().pe_dma(0, 0, 0).clone();
            let memo = RouteMemo::default();
            let request = CopyRequest {
                memo: Some(&memo),
                ..CopyRequest::plain(&engine, pe, CopyJob::contiguous(src, dst, len))
            };
            let done = match d.start_copy(request).unwrap() {
                CopyStart::Booked(copy) => {
                    let done = copy.done;
                    copy.finish(&d).unwrap();
                    Some(done)
                }
                CopyStart::Pending(_) => None,
            };
            (done, d.oplog().len())
        });
        simulation.run().unwrap();
        let (done, after) = booked.output().unwrap();
        (done, formula, after - ops)
    }

    #[test]
    fn start_copy_books_a_copy_within_a_tcm_whole_and_nothing_else() {
        // ADR-0057: within one TCM in flow mode, booked at once and done
        // at its formula; across a link or in packet mode, nothing booked
        // and nothing applied.
        let (done, formula, ops) = start_copy_to(Fidelity::Flow, TCM0);
        assert_eq!((done, ops), (Some(SimTime::ZERO + formula), 1));
        let far = MemSpace::Tcm {
            sip: 0,
            cube: 5,
            pe: 3,
        };
        assert_eq!(start_copy_to(Fidelity::Flow, far).0, None);
        assert_eq!(start_copy_to(Fidelity::Flow, far).2, 0);
        assert_eq!(start_copy_to(Fidelity::Packet, TCM0).0, None);
        assert_eq!(start_copy_to(Fidelity::Packet, TCM0).2, 0);
    }

    /// ADR-0059: a memo answers for addresses inside the memories it
    /// remembers, as a decode would, and leaves any other to the decode:
    /// another memory is found, an address past a TCM's end refused.
    #[test]
    fn a_route_memo_locates_its_memories_and_decodes_the_rest() {
        let device = timing_device(Fidelity::Flow);
        let len = 256;
        let tcm1 = MemSpace::Tcm {
            sip: 0,
            cube: 0,
            pe: 1,
        };
        let (a, b, c) = (
            device.alloc(TCM0, len).unwrap(),
            device.alloc(TCM0, len).unwrap(),
            device.alloc(tcm1, len).unwrap(),
        );
        let map = device.fabric().machine().address_map().clone();
        let past_end = map.encode(TCM0, 0).unwrap() + map.capacity(TCM0);
        let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
        let memo = RouteMemo::default();
        let plan = |src, dst| device.plan_remembered(pe, src, dst, &memo);
        let spaces = |src, dst| plan(src, dst).map(|p| (p.src, p.dst)).unwrap();
        let decoded = |addr| map.decode(addr).unwrap();
        assert_eq!(spaces(a, b), (decoded(a), decoded(b)));
        assert_eq!(spaces(b + 8, a + 16), (decoded(b + 8), decoded(a + 16)));
        assert_eq!(spaces(a, c), (decoded(a), decoded(c)));
        assert!(plan(past_end, c).is_err());
        assert!(plan(c, past_end).is_err());
    }

    #[test]
    fn copies_from_unmapped_addresses_are_errors() {
        let device = device(DataMode::On);
        let dst = device.alloc(MemSpace::Hbm { sip: 0, cube: 0 }, 64).unwrap();
        let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
        let mut simulation = Simulation::new();
        let d = device.clone();
        let copy = simulation.spawn("pe0", async move {
            let engine = d.fabric().pe_dma(0, 0, 0).clone();
            let src = 0x0900_0000_0000_0000;
            d.dma_copy(&engine, pe, CopyJob::contiguous(src, dst, 64))
                .await
        });
        simulation.run().unwrap();
        let error = copy.output().unwrap().unwrap_err().to_string();
        assert!(error.contains("sip 9 does not exist"), "{error}");
    }

    /// Runs `job` with the DMA of PE 0 of cube 0 of SIP 0: its time from
    /// request to last byte, or its error.
    fn job_by_pe0(device: &Rc<Device>, job: CopyJob) -> Result<SimDuration, DeviceError> {
        let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
        let mut simulation = Simulation::new();
        let d = device.clone();
        let copy = simulation.spawn("pe0", async move {
            let engine = d.fabric().pe_dma(0, 0, 0).clone();
            d.dma_copy(&engine, pe, job).await
        });
        simulation.run().unwrap();
        copy.output().unwrap().map(|t| t.end - t.requested)
    }

    /// ADR-0112: a strided copy from cube 5's HBM into PE 0's TCM moves
    /// every run to its place (the gaps stay zero, the log replays) and
    /// takes the formula of a contiguous copy of its timed bytes: the
    /// rows' own when runs are whole lines, a line per run of 4 B.
    #[test]
    fn a_strided_copy_moves_its_runs_in_the_time_of_its_timed_bytes() {
        for fidelity in Fidelity::ALL {
            for (rows, run, timed) in [(8, 128, 8 * 128), (16, 4, 16 * GRANULE)] {
                let spec = TopologySpec::load(&TopologySpec::default_source(), &[])
                    .unwrap()
                    .with_fidelity(fidelity);
                let device = Device::new(&spec, DataMode::On).unwrap();
                let src = device
                    .alloc(MemSpace::Hbm { sip: 0, cube: 5 }, 4096)
                    .unwrap();
                let dst = device.alloc(TCM0, 4096).unwrap();
                let pattern: Vec<u8> = (0..4096u64).map(|i| (i * 7 % 251) as u8).collect();
                device.write_untimed("host", src, &pattern).unwrap();
                let layout = Strided {
                    rows,
                    run,
                    src_stride: 3 * run,
                    dst_stride: 2 * run,
                };
                let job = CopyJob::strided(src, dst, layout);
                assert_eq!(job.timed_len(), timed);
                let simulated = job_by_pe0(&device, job).unwrap();
                let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
                let issue = spec.pe().dma.issue_overhead;
                let formula = device.dma_copy_formula(issue, pe, src, dst, timed);
                assert_eq!(simulated, formula.unwrap(), "{fidelity:?} run {run}");
                let back = device.read_untimed(dst, 4096).unwrap();
                let (run, rows) = (run as usize, rows as usize);
                for (i, row) in back.chunks(2 * run).enumerate() {
                    let want = match i < rows {
                        true => &pattern[3 * run * i..3 * run * i + run],
                        false => &[0; 0][..],
                    };
                    assert_eq!(&row[..want.len()], want, "row {i}");
                    assert!(row[want.len()..].iter().all(|&b| b == 0), "row {i}");
                }
                assert!(device.oplog().verify(&device.store()).is_ok());
            }
        }
    }

    /// ADR-0112: a strided copy whose strides equal its run is timed as
    /// the contiguous copy of its bytes, whatever their count.
    #[test]
    fn a_strided_copy_with_contiguous_sides_is_timed_as_one_run() {
        let layout = Strided {
            rows: 3,
            run: 5,
            src_stride: 5,
            dst_stride: 5,
        };
        let job = CopyJob::strided(0, 0, layout);
        assert_eq!((job.len(), job.timed_len()), (15, 15));
        assert_eq!(CopyJob::contiguous(0, 0, 15).timed_len(), 15);
    }

    /// ADR-0112: overlapping strides, a side that leaves its memory and a
    /// run outside every mapped region are errors naming the argument or
    /// the address, not panics; nothing is applied.
    #[test]
    fn bad_strided_copies_are_errors() {
        let device = timing_device(Fidelity::Flow);
        let src = device.alloc(TCM0, 256).unwrap();
        let dst = device
            .alloc(MemSpace::Hbm { sip: 0, cube: 0 }, 256)
            .unwrap();
        let map = device.fabric().machine().address_map().clone();
        let tcm_end = map.encode(TCM0, 0).unwrap() + map.capacity(TCM0);
        let shape = |run, src_stride, dst_stride| Strided {
            rows: 2,
            run,
            src_stride,
            dst_stride,
        };
        let ops = device.oplog().len();
        let error = |s, d, layout| {
            let job = CopyJob::strided(s, d, layout);
            job_by_pe0(&device, job).unwrap_err().to_string()
        };
        let overlapping = error(src, dst, shape(64, 64, 32));
        assert!(overlapping.contains("`dst_stride` 32 B"), "{overlapping}");
        let leaving = error(tcm_end - 128, dst, shape(64, 128, 64));
        assert!(leaving.contains("`src` runs"), "{leaving}");
        let unmapped = error(src, dst, shape(64, 64, 4096));
        assert!(unmapped.contains("not mapped"), "{unmapped}");
        assert_eq!(device.oplog().len(), ops);
    }
}
