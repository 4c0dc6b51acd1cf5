//! [`Fabric`]: the hardware of one compiled machine, instantiated for one
//! simulation.
//!
//! It binds every directed edge of the topology graph to a [`Link`] (one
//! serial resource per direction of every physical link), and owns every
//! cube's HBM controller, SRAM port, M_CPU (with its DMA engine), every PE's
//! PE_DMA engine, TCM port, PE_GEMM and PE_MATH, and every SIP's IO_CPU.
//! Routes come from the topology's [`PathRouter`]; the fabric turns a route
//! into the links to cross and times moves over it, with the closed form
//! beside each.
//!
//! Cost ownership, so nothing is charged twice: a path's hops carry the
//! bandwidth and first-flit latency of every link crossed, including the
//! PE-to-TCM port hop at the TCM's bandwidth; the memory stage at the end of
//! a path charges what the memory itself does (HBM: controller and access
//! latency plus pseudo-channel serialisation; SRAM: its port; TCM reached
//! through a path: its access latency only).
//!
//! A degraded machine (`faults:`, ADR-0106) needs nothing here per event:
//! its links' parameters come derated from the machine, and a slow PE's
//! units are made with its factor.
//!
//! Knows the machine's structure and the hardware models; nothing of
//! tensors, kernels or collectives.

use std::cell::{OnceCell, RefCell};
use std::num::NonZeroU64;
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

mod copy;

pub use copy::{HeaderCrossing, WholeCopy, WholeTimes};

use super::explain;
use super::flow_route::FlowRoute;
use super::flow_share::Pushed;
use super::{
    DmaEngine, GemmEngine, HbmController, HopParams, HwError, IoCpu, Link, LinkTable, MathEngine,
    Mcpu, MemoryPort, SerialServer, TransferReport, hbm_formula, memory_formula, transfer,
    transfer_formula,
};
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::{
    EdgeId, Fidelity, Machine, MemSpace, Path, PathRouter, TopologySpec, naming,
};

/// Pushes, for `--explain`, an access to `space` that books nothing (a
/// TCM's latency; the host's nothing).
#[inline(always)]
fn explain_unbooked(space: MemSpace, took: SimDuration) {
    if explain::recording() {
        push_unbooked(space, took);
    }
}

/// [`explain_unbooked`] while `--explain` records (out of line: every
/// flow-mode copy from a TCM passes here, and `--explain` seldom records).
#[inline(never)]
fn push_unbooked(space: MemSpace, took: SimDuration) {
    if let MemSpace::Tcm { sip, cube, pe } = space {
        explain::push_keyed(
            [sip, cube, pe],
            || naming::tcm(sip, cube, pe),
            explain::Class::SramTcm,
            explain::TermKind::Latency,
            took.as_ps(),
        );
    }
}

/// The instantiated hardware of one machine.
pub struct Fabric {
    machine: Arc<Machine>,
    /// The machine's `simulation.fidelity`, asked for at every stage of
    /// every copy.
    fidelity: Fidelity,
    router: PathRouter,
    /// One per directed edge, made when first crossed (ADR-0050).
    links: LinkTable,
    /// One entry per cube, SIP-major, made when first asked for: a run
    /// touches the units of the cubes it uses (ADR-0040).
    cubes: Box<[OnceCell<CubeUnits>]>,
    /// One entry per PE, cube-major, made when first asked for.
    pes: Box<[OnceCell<PeUnits>]>,
    io_cpu: Vec<Rc<IoCpu>>,
    /// Flow mode's routes, by the address of their path (each route holds
    /// its path, so an address is never reused while its route exists).
    /// Looked up, never iterated.
    flow_routes: RefCell<FxHashMap<*const Path, Rc<FlowRoute>>>,
}

/// A path as a fabric sends over it ([`Fabric::route`]): the path and,
/// in flow mode, its `FlowRoute`. Valid for any fabric of the same
/// machine.
#[derive(Clone)]
pub struct Route {
    path: Arc<Path>,
    flow: Option<Rc<FlowRoute>>,
}

impl Route {
    /// The path.
    pub fn path(&self) -> &Arc<Path> {
        &self.path
    }
}

/// The units every cube has. A new per-cube unit is one field here and one
/// line in `CubeUnits::new`.
pub struct CubeUnits {
    /// The HBM controller and its pseudo-channels.
    pub hbm: Rc<HbmController>,
    /// The SRAM port.
    pub sram: Rc<MemoryPort>,
    /// The M_CPU and its DMA engine.
    pub mcpu: Rc<Mcpu>,
}

impl CubeUnits {
    fn new(spec: &TopologySpec, sip: u32, cube: u32) -> Self {
        let (mcpu, mcpu_dma) = (naming::mcpu(sip, cube), naming::mcpu_dma(sip, cube));
        let pc = |k| naming::hbm_pc(sip, cube, k);
        CubeUnits {
            hbm: Rc::new(HbmController::new(
                &naming::hbm(sip, cube),
                &spec.cube().hbm,
                pc,
            )),
            sram: Rc::new(MemoryPort::new(&naming::sram(sip, cube), &spec.cube().sram)),
            mcpu: Rc::new(Mcpu::new(&mcpu, &mcpu_dma, &spec.cube().mcpu)),
        }
    }
}

/// The units every PE has. A new per-PE unit is one field here and one
/// line in `PeUnits::new`.
pub struct PeUnits {
    /// PE_DMA.
    pub dma: Rc<DmaEngine>,
    /// The TCM port (direct PE access, not DMA paths).
    pub tcm: Rc<MemoryPort>,
    /// PE_GEMM, the matrix engine.
    pub gemm: Rc<GemmEngine>,
    /// PE_MATH, the vector unit.
    pub math: Rc<MathEngine>,
}

impl PeUnits {
    /// The units of PE `pe` of cube `cube` of SIP `sip`; a slow PE's
    /// (`faults.compute`, ADR-0106) with its factor fixed into them here,
    /// once: GEMM and math holds and the PE_DMA issue time stretched.
    fn new(spec: &TopologySpec, sip: u32, cube: u32, pe: u32) -> Self {
        let name = naming::pe(sip, cube, pe);
        let slowdown = spec.faults().pe_slowdown(sip, cube, pe);
        let dma = spec.pe_dma(sip, cube, pe);
        let gemm = GemmEngine::new(&format!("{name}.gemm"), spec.pe()).with_slowdown(slowdown);
        let math = MathEngine::new(&format!("{name}.math"), spec.pe()).with_slowdown(slowdown);
        PeUnits {
            dma: Rc::new(DmaEngine::new(&format!("{name}.dma"), &dma)),
            tcm: Rc::new(MemoryPort::new(&naming::tcm(sip, cube, pe), &spec.pe().tcm)),
            gemm: Rc::new(gemm),
            math: Rc::new(math),
        }
    }
}

impl Fabric {
    /// Fresh hardware (idle links, empty queues, zero counters) for
    /// `machine`.
    pub fn new(machine: Arc<Machine>) -> Fabric {
        let spec = machine.spec().clone();
        let cubes = machine.sip_count() as usize * machine.cubes_per_sip() as usize;
        let pes = cubes * machine.pes_per_cube() as usize;
        Fabric {
            router: PathRouter::new(machine.clone()),
            links: LinkTable::new(machine.clone()),
            pes: (0..pes).map(|_| OnceCell::new()).collect(),
            cubes: (0..cubes).map(|_| OnceCell::new()).collect(),
            io_cpu: (0..machine.sip_count())
                .map(|s| Rc::new(IoCpu::new(&naming::io_cpu(s), &spec.sip().io_cpu)))
                .collect(),
            fidelity: spec.simulation().fidelity,
            machine,
            flow_routes: RefCell::default(),
        }
    }

    /// Fresh hardware for the machine `spec` describes.
    pub fn from_spec(spec: &TopologySpec) -> Result<Fabric, crate::topology::TopologyError> {
        Ok(Fabric::new(Arc::new(Machine::build(spec)?)))
    }

    /// The compiled machine.
    pub fn machine(&self) -> &Arc<Machine> {
        &self.machine
    }

    /// The machine's router (routes are cached per pair).
    pub fn router(&self) -> &PathRouter {
        &self.router
    }

    /// Tells the `--explain` recorder of this thread the class of every
    /// link made so far (from its edge's kind; a link made later is told
    /// when made); call before the run.
    pub fn explain_classes(&self) {
        self.links.explain_classes();
    }

    /// Snapshots every server made so far at the start of the explained
    /// interval, at `now` ([`explain::mark_start`]; one made later starts
    /// with its counters at zero).
    pub fn explain_start(&self, now: SimTime) {
        explain::mark_start(now, self.servers());
    }

    /// Marks the end of the explained interval, `what`, at `now` in poll
    /// `poll` ([`explain::mark_end`]).
    pub fn explain_end(&self, now: SimTime, poll: Option<u32>, what: &str) {
        if explain::recording() {
            explain::mark_end(now, poll, what, self.servers());
        }
    }

    /// Every server made so far: links in edge order, then each cube's
    /// and each PE's units (cube-major), then the IO_CPUs. Makes none:
    /// `--explain` snapshots these, and a server made later starts idle
    /// (ADR-0051).
    pub fn servers(&self) -> Vec<&SerialServer> {
        let mut servers: Vec<&SerialServer> = self.links.made_links().map(Link::server).collect();
        for cube in self.cubes.iter().filter_map(OnceCell::get) {
            servers.extend(cube.hbm.servers());
            servers.push(cube.sram.server());
            servers.extend(cube.mcpu.servers());
        }
        for pe in self.pes.iter().filter_map(OnceCell::get) {
            servers.push(pe.dma.server());
            servers.push(pe.tcm.server());
            servers.push(pe.gemm.server());
            servers.push(pe.math.server());
        }
        servers.extend(self.io_cpu.iter().map(|io| io.server()));
        servers
    }

    /// The link of one directed edge.
    pub fn link(&self, edge: EdgeId) -> &Link {
        self.links.get(edge)
    }

    /// Every link, by edge index, each made when first asked for.
    pub fn links(&self) -> &LinkTable {
        &self.links
    }

    /// The links `path` crosses, in order.
    pub fn path_links(&self, path: &Path) -> Vec<&Link> {
        path.edges().iter().map(|&e| self.link(e)).collect()
    }

    /// The hop parameters of `path`, in order.
    pub fn path_hops(&self, path: &Path) -> Vec<HopParams> {
        path.edges()
            .iter()
            .map(|&e| *self.link(e).params())
            .collect()
    }

    /// The packet payload used on `path`: the smallest `max_payload` of its
    /// links (a transfer is packetised once, at its source).
    pub fn max_payload(&self, path: &Path) -> NonZeroU64 {
        NonZeroU64::new(path.max_payload()).unwrap_or(NonZeroU64::MIN)
    }

    /// Whether `bytes` cross `route` as one packet (at most its payload):
    /// in flow mode, an IPCQ message of one packet of its doorbell's route
    /// is booked as one unit (ADR-0048).
    pub fn is_one_packet(&self, route: &Route, bytes: u64) -> bool {
        bytes <= self.max_payload(&route.path).get()
    }

    /// How transfers are simulated (`simulation.fidelity`).
    pub fn fidelity(&self) -> Fidelity {
        self.fidelity
    }

    /// Moves `bytes` over `path`: packet by packet ([`transfer`]) or as one
    /// flow ([`transfer_flow`](super::transfer_flow)), as the machine's
    /// fidelity says. In flow mode a header-only transfer (`bytes == 0`: a
    /// DMA read request, an IPCQ doorbell or credit) books no link
    /// (ADR-0022).
    pub async fn send(&self, route: &Route, bytes: u64) -> Result<TransferReport, HwError> {
        match self.fidelity() {
            Fidelity::Packet => {
                let path = &route.path;
                transfer(&self.path_links(path), bytes, self.max_payload(path)).await
            }
            Fidelity::Flow => {
                let (mut report, pushed) = self.book_send(route, bytes)?;
                explain::sleep_until(report.end).await;
                report.end = report.end + pushed.settle(report.end).await;
                Ok(report)
            }
        }
    }

    /// Flow mode: books `bytes` over `path` from now and tells when they
    /// land, without waiting (a header books nothing: ADR-0022), and what
    /// may push the landing later (flows booked after it: ADR-0056).
    fn book_send(&self, route: &Route, bytes: u64) -> Result<(TransferReport, Pushed), HwError> {
        if bytes > 0 {
            return self.with_flow(route, |flow| flow.book(&self.links, bytes));
        }
        let report = TransferReport {
            start: sim::now(),
            end: self.header_lands(route, sim::now())?,
            bytes: 0,
            packets: 1,
            bottleneck: None,
        };
        Ok((report, Pushed::default()))
    }

    /// [`book_send`](Self::book_send)'s landing instant alone (no
    /// bottleneck looked for): a header's crossing, or a flow's booking.
    fn book_flow_now(&self, route: &Route, bytes: u64) -> Result<(SimTime, Pushed), HwError> {
        match bytes {
            0 => Ok((self.header_lands(route, sim::now())?, Pushed::default())),
            _ => self.with_flow(route, |flow| flow.book_flow(&self.links, bytes, sim::now())),
        }
    }

    /// When a header-only packet sent over `path` at `start` lands, in flow
    /// mode: each hop's crossing, no link booked (ADR-0022). Uncontended it
    /// is [`send_formula`](Self::send_formula) of zero bytes.
    pub fn header_lands(&self, route: &Route, start: SimTime) -> Result<SimTime, HwError> {
        self.with_flow(route, |flow| flow.header_lands(&self.links, start))
    }

    /// When an IPCQ doorbell or credit sent over `route` at `start` lands,
    /// in flow mode: its uncontended crossing, a constant of the route,
    /// with no hop read (ADR-0048; a DMA read request still crosses its
    /// hops, [`header_lands`](Self::header_lands)).
    pub fn signal_lands(&self, route: &Route, start: SimTime) -> Result<SimTime, HwError> {
        self.with_flow(route, |flow| flow.signal_lands(start))
    }

    /// When an IPCQ credit sent over `route` at `start` lands, in flow
    /// mode: as its message's doorbell crossed (`crossing`:
    /// [`signal_lands`](Self::signal_lands)' constant, or
    /// [`header_lands`](Self::header_lands)' hops), with no term pushed
    /// for `--explain`: no sleep of the poll that sends it covers it (the
    /// sender's claim waits for it, a credit wait; ADR-0051). Its queueing
    /// at busy hops still counts in their utilisation.
    pub fn credit_lands(
        &self,
        route: &Route,
        start: SimTime,
        crossing: HeaderCrossing,
    ) -> Result<SimTime, HwError> {
        self.with_flow(route, |flow| match crossing {
            HeaderCrossing::Constant => flow.signal_crossing(start),
            HeaderCrossing::Hops => flow.credit_header_lands(&self.links, start),
        })
    }

    /// `path` as this fabric sends over it: in flow mode with its
    /// `FlowRoute`, so a caller that keeps the route (a DMA's copy
    /// routes, an IPCQ ring's doorbell) never looks it up again.
    pub fn route(&self, path: &Arc<Path>) -> Result<Route, HwError> {
        let flow = match self.fidelity() {
            Fidelity::Flow => Some(self.flow_route(path)?),
            Fidelity::Packet => None,
        };
        Ok(Route {
            path: path.clone(),
            flow,
        })
    }

    /// `cross` over the flow-mode route of `route` (made when the route
    /// was, unless it was made in packet mode or by another fabric: a
    /// route holds its own fabric's links, ADR-0058).
    fn with_flow<T>(
        &self,
        route: &Route,
        cross: impl FnOnce(&FlowRoute) -> Result<T, HwError>,
    ) -> Result<T, HwError> {
        match &route.flow {
            Some(flow) if flow.is_over(&self.links) => cross(flow),
            _ => cross(&*self.flow_route(&route.path)?),
        }
    }

    /// The flow-mode route of `path`, made on first use.
    fn flow_route(&self, path: &Arc<Path>) -> Result<Rc<FlowRoute>, HwError> {
        let key = Arc::as_ptr(path);
        if let Some(route) = self.flow_routes.borrow().get(&key) {
            debug_assert!(Arc::ptr_eq(route.path(), path));
            return Ok(route.clone());
        }
        let route = FlowRoute::new(path.clone(), &self.links)?;
        self.flow_routes.borrow_mut().insert(key, route.clone());
        Ok(route)
    }

    /// Moves `bytes` over `path`, then accesses `len` bytes at `offset` of
    /// `space`, where the path ends: a DMA's read request and read, or its
    /// data and write. In flow mode, when the access books nothing (a TCM,
    /// the host), one sleep covers both.
    pub async fn send_then_access(
        &self,
        route: &Route,
        bytes: u64,
        (space, offset): (MemSpace, u64),
        len: u64,
    ) -> Result<(), HwError> {
        if self.works_ahead(space) {
            let (lands, pushed) = self.book_flow_now(route, bytes)?;
            let took = self.access_formula(space, offset, len)?;
            let accessed = super::later(lands, took, "memory access")?;
            if explain::recording() {
                explain_unbooked(space, took);
            }
            explain::sleep_until(accessed).await;
            pushed.settle(accessed).await;
            return Ok(());
        }
        // Boxed: the packet-mode stages' futures are large, and every
        // caller (a DMA copy's future, a send's) would carry them inline
        // and move them, even in flow mode. In a statement of its own, so
        // that the unboxed future is not a temporary kept across `await`.
        let stages = Box::pin(async move {
            self.send(route, bytes).await?;
            self.access(space, offset, len).await
        });
        stages.await
    }

    /// The uncontended time of [`send`](Self::send).
    pub fn send_formula(&self, path: &Path, bytes: u64) -> Result<SimDuration, HwError> {
        transfer_formula(&self.path_hops(path), bytes, self.max_payload(path))
    }

    /// Accesses `len` bytes at `offset` of `space`, as the memory stage at
    /// the end of a path (see the module docs for what it charges).
    pub async fn access(&self, space: MemSpace, offset: u64, len: u64) -> Result<(), HwError> {
        match space {
            MemSpace::Hbm { sip, cube } => {
                self.hbm(sip, cube).access(offset, len).await?;
            }
            MemSpace::Sram { sip, cube } => {
                self.sram(sip, cube).access(len).await?;
            }
            MemSpace::Tcm { .. } => {
                let latency = self.machine.spec().pe().tcm.latency;
                explain_unbooked(space, latency);
                explain::sleep_until(sim::now() + latency).await
            }
            MemSpace::Host => {}
        }
        Ok(())
    }

    /// The uncontended time of [`access`](Self::access).
    pub fn access_formula(
        &self,
        space: MemSpace,
        offset: u64,
        len: u64,
    ) -> Result<SimDuration, HwError> {
        let spec = self.machine.spec();
        match space {
            MemSpace::Hbm { .. } => hbm_formula(&spec.cube().hbm, offset, len),
            MemSpace::Sram { .. } => memory_formula(&spec.cube().sram, len),
            MemSpace::Tcm { .. } => Ok(spec.pe().tcm.latency),
            MemSpace::Host => Ok(SimDuration::ZERO),
        }
    }

    fn cube_index(&self, sip: u32, cube: u32) -> usize {
        (sip * self.machine.cubes_per_sip() + cube) as usize
    }

    fn pe_index(&self, sip: u32, cube: u32, pe: u32) -> usize {
        self.cube_index(sip, cube) * self.machine.pes_per_cube() as usize + pe as usize
    }

    /// The units of one cube (made on first use).
    pub fn cube(&self, sip: u32, cube: u32) -> &CubeUnits {
        self.cubes[self.cube_index(sip, cube)]
            .get_or_init(|| CubeUnits::new(self.machine.spec(), sip, cube))
    }

    /// The units of one PE (made on first use).
    pub fn pe(&self, sip: u32, cube: u32, pe: u32) -> &PeUnits {
        self.pes[self.pe_index(sip, cube, pe)]
            .get_or_init(|| PeUnits::new(self.machine.spec(), sip, cube, pe))
    }

    /// A cube's HBM controller.
    pub fn hbm(&self, sip: u32, cube: u32) -> &Rc<HbmController> {
        &self.cube(sip, cube).hbm
    }

    /// A cube's SRAM port.
    pub fn sram(&self, sip: u32, cube: u32) -> &Rc<MemoryPort> {
        &self.cube(sip, cube).sram
    }

    /// A cube's M_CPU (and its DMA engine).
    pub fn mcpu(&self, sip: u32, cube: u32) -> &Rc<Mcpu> {
        &self.cube(sip, cube).mcpu
    }

    /// A PE's PE_DMA engine.
    pub fn pe_dma(&self, sip: u32, cube: u32, pe: u32) -> &Rc<DmaEngine> {
        &self.pe(sip, cube, pe).dma
    }

    /// A PE's TCM port (for direct PE access, not DMA paths).
    pub fn tcm(&self, sip: u32, cube: u32, pe: u32) -> &Rc<MemoryPort> {
        &self.pe(sip, cube, pe).tcm
    }

    /// A PE's matrix engine (PE_GEMM).
    pub fn pe_gemm(&self, sip: u32, cube: u32, pe: u32) -> &Rc<GemmEngine> {
        &self.pe(sip, cube, pe).gemm
    }

    /// A PE's vector unit (PE_MATH).
    pub fn pe_math(&self, sip: u32, cube: u32, pe: u32) -> &Rc<MathEngine> {
        &self.pe(sip, cube, pe).math
    }

    /// A SIP's IO_CPU.
    pub fn io_cpu(&self, sip: u32) -> &Rc<IoCpu> {
        &self.io_cpu[sip as usize]
    }
}

/// Whether an access to `space` books nothing: a TCM (its latency only)
/// or the host.
fn unbooked(space: MemSpace) -> bool {
    matches!(space, MemSpace::Tcm { .. } | MemSpace::Host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Simulation;

    fn fabric() -> Rc<Fabric> {
        fabric_with(&[])
    }

    fn fabric_with(overrides: &[&str]) -> Rc<Fabric> {
        let overrides: Vec<_> = overrides
            .iter()
            .map(|o| crate::config::Override::parse(o).unwrap())
            .collect();
        let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap();
        Rc::new(Fabric::from_spec(&spec).unwrap())
    }

    /// Sends `bytes` over each path in turn at time zero (each send its own
    /// task, in order); the durations.
    fn send_all(fabric: &Rc<Fabric>, sends: &[(Arc<Path>, u64)]) -> Vec<SimDuration> {
        let mut simulation = Simulation::new();
        let handles: Vec<_> = sends
            .iter()
            .cloned()
            .map(|(path, bytes)| {
                let f = fabric.clone();
                simulation.spawn("send", async move { f.send(&f.route(&path)?, bytes).await })
            })
            .collect();
        simulation.run().unwrap();
        let took = |h: crate::sim::JoinHandle<Result<TransferReport, HwError>>| {
            h.output().unwrap().unwrap().duration()
        };
        handles.into_iter().map(took).collect()
    }

    fn pe_to_pe(fabric: &Fabric) -> Arc<Path> {
        let m = fabric.machine();
        let (from, to) = (m.pe(0, 0, 0).unwrap(), m.pe(0, 5, 0).unwrap());
        fabric.router().find_path(from, to).unwrap()
    }

    /// ADR-0056: two 64 KiB flows over one path, started together, share
    /// its hops as their packets do. Packet mode (the reference) ends the
    /// first about one packet before the second, both about one bottleneck
    /// occupancy `B` after a lone flow; FIFO booking ended the first with
    /// the lone flow's time. Flow mode now ends both within 1 % of packet
    /// mode, and a flow started once both have landed is alone again: its
    /// formula to the picosecond.
    #[test]
    fn flows_started_together_share_their_hops_and_end_as_their_packets_do() {
        let bytes = 64 << 10;
        let took = |fidelity: &str| {
            let fabric = fabric_with(&[fidelity]);
            let path = pe_to_pe(&fabric);
            let alone = fabric.send_formula(&path, bytes).unwrap();
            let pair = send_all(&fabric, &[(path.clone(), bytes), (path.clone(), bytes)]);
            (pair, alone, fabric, path)
        };
        let (packet, alone, ..) = took("simulation.fidelity=packet");
        let (flow, _, fabric, path) = took("simulation.fidelity=flow");
        let ps = |d: SimDuration| d.as_ps() as f64;
        for (i, (f, p)) in flow.iter().zip(&packet).enumerate() {
            let off = (ps(*f) - ps(*p)).abs() / ps(*p);
            assert!(off < 0.01, "flow {i}: flow {f:?}, packet {p:?}");
        }
        // The first flow waited for the second's work, as its packets did
        // (FIFO booking: not at all).
        let waited = |d: SimDuration| ps(d) - ps(alone);
        assert!(
            waited(flow[0]) > 0.9 * waited(packet[0]),
            "{flow:?} {packet:?}"
        );
        assert!(
            waited(packet[0]) > 0.4 * ps(alone),
            "the pair shares a bottleneck"
        );
        let mut simulation = Simulation::new();
        let f = fabric.clone();
        let later = simulation.spawn("later", async move {
            sim::sleep(SimDuration::from_ps(1_000_000_000)).await;
            f.send(&f.route(&path)?, bytes).await
        });
        simulation.run().unwrap();
        assert_eq!(later.output().unwrap().unwrap().duration(), alone);
    }

    #[test]
    fn a_flow_header_takes_its_formula_and_books_no_link() {
        let fabric = fabric_with(&["simulation.fidelity=flow"]);
        let path = pe_to_pe(&fabric);
        let took = send_all(&fabric, &[(path.clone(), 0)]);
        assert_eq!(took, [fabric.send_formula(&path, 0).unwrap()]);
        let end = SimTime::from_ps(took[0].as_ps());
        for link in fabric.path_links(&path) {
            assert_eq!(link.stats(end).jobs, 0, "{}", link.name());
        }
    }

    #[test]
    fn a_flow_header_behind_a_booked_flow_waits_half_a_packet_per_hop() {
        let fabric = fabric_with(&["simulation.fidelity=flow"]);
        let path = pe_to_pe(&fabric);
        // The data flow is booked first, on every hop far beyond the
        // header's arrival, so the header finds every hop busy.
        let took = send_all(&fabric, &[(path.clone(), 1 << 20), (path.clone(), 0)]);
        let half_packets: u64 = fabric
            .path_hops(&path)
            .iter()
            .map(|hop| hop.occupancy(path.max_payload()).unwrap().as_ps() / 2)
            .sum();
        let alone = fabric.send_formula(&path, 0).unwrap();
        assert_eq!(took[1], alone + SimDuration::from_ps(half_packets));
    }

    #[test]
    fn an_ipcq_signal_takes_its_formula_even_behind_a_booked_flow() {
        // ADR-0048: a doorbell or credit of a message booked as one unit
        // is its route's uncontended crossing, whatever the hops hold.
        let fabric = fabric_with(&["simulation.fidelity=flow"]);
        let path = pe_to_pe(&fabric);
        let route = fabric.route(&path).unwrap();
        let alone = fabric.send_formula(&path, 0).unwrap();
        let mut simulation = Simulation::new();
        let f = fabric.clone();
        let times = simulation.spawn("signal", async move {
            let idle = f.signal_lands(&route, sim::now()).unwrap();
            f.book_send(&route, 1 << 20).unwrap();
            let busy = f.signal_lands(&route, sim::now()).unwrap();
            let header = f.header_lands(&route, sim::now()).unwrap();
            (idle, busy, header)
        });
        simulation.run().unwrap();
        let (idle, busy, header) = times.output().unwrap();
        let at = SimTime::ZERO + alone;
        assert_eq!((idle, busy), (at, at));
        assert!(header > busy, "a DMA read request still waits at busy hops");
    }

    /// ADR-0051: a flow-mode credit's crossing is slept on by no poll of
    /// the receiver that sends it, so it pushes no `--explain` term (a
    /// later sleep of the same poll carries only its own); a doorbell's
    /// does, its route's uncontended crossing.
    #[test]
    fn a_flow_credit_pushes_no_explain_term_and_a_doorbell_its_crossing() {
        use explain::{Class, Term, TermKind};
        let fabric = fabric_with(&["simulation.fidelity=flow"]);
        let path = pe_to_pe(&fabric);
        let route = fabric.route(&path).unwrap();
        let mut simulation = Simulation::new();
        simulation.record_causes();
        explain::install();
        let f = fabric.clone();
        simulation.spawn("receiver", async move {
            let now = sim::now();
            f.credit_lands(&route, now, HeaderCrossing::Constant)
                .unwrap();
            f.credit_lands(&route, now, HeaderCrossing::Hops).unwrap();
            explain::push_named("math", Class::PeMath, TermKind::Service, 7);
            explain::sleep_until(now + SimDuration::from_ps(10)).await;
            let lands = f.signal_lands(&route, sim::now()).unwrap();
            explain::sleep_until(lands).await;
        });
        simulation.run().unwrap();
        let kept = explain::finish().unwrap();
        let log = simulation.causal_log().unwrap();
        let labels: Vec<Vec<Term>> = log.sleeps.iter().map(|s| kept.label(s.label)).collect();
        let math = kept.components.iter().position(|c| &*c.name == "math");
        assert_eq!(labels.len(), 2);
        assert_eq!(labels[0].len(), 1, "{:?}", labels[0]);
        assert_eq!(Some(labels[0][0].component as usize), math);
        let doorbell: u64 = labels[1].iter().map(|t| t.ps).sum();
        assert_eq!(doorbell, fabric.send_formula(&path, 0).unwrap().as_ps());
        assert!(labels[1].len() >= path.edges().len(), "a term per hop");
    }

    #[test]
    fn units_are_made_when_first_asked_for_and_links_share_classes() {
        let fabric = fabric();
        let made = |f: &Fabric| {
            let pes = f.pes.iter().filter(|u| u.get().is_some()).count();
            (pes, f.cubes.iter().filter(|u| u.get().is_some()).count())
        };
        assert_eq!(made(&fabric), (0, 0));
        let dma = fabric.pe_dma(1, 3, 2).name().to_owned();
        assert_eq!(dma, "sip1.cube3.pe2.dma");
        assert_eq!(fabric.hbm(1, 3).name(), "sip1.cube3.hbm");
        assert_eq!(made(&fabric), (1, 1));
        // The same unit on every later call.
        assert!(Rc::ptr_eq(fabric.pe_dma(1, 3, 2), fabric.pe_dma(1, 3, 2)));
        // Explain's snapshot lists the units made so far and makes none:
        // the cube's HBM channels, SRAM, M_CPU and DMA, the PE's four, the
        // IO_CPUs.
        let servers = fabric.servers();
        let m = fabric.machine();
        let hbm = fabric.hbm(1, 3).servers().count();
        assert_eq!(servers.len(), hbm + 1 + 2 + 4 + m.sip_count() as usize);
        assert_eq!(servers[hbm + 3 + 1].name(), "sip1.cube3.pe2.tcm");
        assert_eq!(made(&fabric), (1, 1));
        assert_eq!(fabric.links().made(), 0);
    }

    /// ADR-0058: a flow route holds its fabric's links by address; a
    /// route made by one fabric and sent on another books the other's
    /// links (the `Route` is valid for any fabric of the machine), and
    /// the links it holds stay alive after their fabric is gone.
    #[test]
    fn a_route_books_the_links_of_the_fabric_it_is_sent_on() {
        let (first, second) = (
            fabric_with(&["simulation.fidelity=flow"]),
            fabric_with(&["simulation.fidelity=flow"]),
        );
        let path = pe_to_pe(&first);
        let route = first.route(&path).unwrap();
        let mut simulation = Simulation::new();
        let (f, r) = (second.clone(), route.clone());
        let sent = simulation.spawn("send", async move { f.send(&r, 4096).await });
        simulation.run().unwrap();
        let end = sent.output().unwrap().unwrap().end;
        assert_eq!(
            end.saturating_since(SimTime::ZERO),
            second.send_formula(&path, 4096).unwrap()
        );
        let jobs = |f: &Fabric| -> Vec<u64> {
            f.path_links(&path)
                .iter()
                .map(|l| l.stats(end).jobs)
                .collect()
        };
        assert!(jobs(&second).iter().all(|&n| n > 0), "{:?}", jobs(&second));
        assert!(jobs(&first).iter().all(|&n| n == 0), "{:?}", jobs(&first));
        // The first fabric gone, its route still reads its own links.
        drop(first);
        let flow = route.flow.as_ref().unwrap();
        assert!(!flow.is_over(second.links()));
        assert_eq!(flow.signal_crossing(SimTime::ZERO).unwrap().as_ps(), {
            second.send_formula(&path, 0).unwrap().as_ps()
        });
    }

    #[test]
    fn every_directed_edge_has_its_own_link() {
        let fabric = fabric();
        assert_eq!(fabric.links().len(), fabric.machine().edges().len());
        let edge = &fabric.machine().edges()[0];
        assert!(!std::ptr::eq(
            fabric.link(EdgeId::from_index(0)),
            fabric.link(edge.reverse)
        ));
    }

    #[test]
    fn a_send_over_a_routed_path_matches_its_formula() {
        let fabric = fabric();
        let m = fabric.machine().clone();
        let path = fabric
            .router()
            .find_path(m.pe(0, 0, 0).unwrap(), m.hbm(0, 15).unwrap())
            .unwrap();
        let expected = fabric.send_formula(&path, 32 << 10).unwrap();
        let mut simulation = Simulation::new();
        let f = fabric.clone();
        let done = simulation.spawn(
            "dma",
            async move { f.send(&f.route(&path)?, 32 << 10).await },
        );
        simulation.run().unwrap();
        assert_eq!(done.output().unwrap().unwrap().duration(), expected);
    }
}
