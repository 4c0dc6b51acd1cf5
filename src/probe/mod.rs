//! `kernbench probe`: the traffic-pattern catalogue (seed ADR-0049).
//!
//! Each case moves data the way the machine does — H2D (host writes a
//! device HBM), D2H (host reads it back) and PE DMA (a PE reads an HBM into
//! its TCM: local, the neighbouring cube over UCIe, the farthest cube of the
//! SIP, another SIP) — on a fresh simulation and fresh hardware, and puts
//! the closed-form **formula** time beside the simulated **actual** time.
//! Uncontended cases must agree to the picosecond. A size sweep and a
//! 5-point load sweep (1..8 PEs reading the far HBM at once) show growth
//! (the load sweep moves at least [`REFERENCE_BYTES`] per flow, or the
//! largest valid size if that is less: at a few hundred bytes the flows
//! barely share hardware and the time stays flat, so a smaller `--size` is
//! raised to it for that sweep only; sizes above a PE's TCM / 32 are
//! refused, naming the largest valid one);
//! automatic checks (formula = actual when uncontended, time grows with size
//! and load, D2H ≥ H2D, best < worst) decide the exit code.
//!
//! Timing of one case is [`Device::dma_copy`]: issue on the DMA engine, a
//! header-only request from the initiator to the source memory, the source
//! memory stage, the data path, the destination memory stage. H2D is a
//! posted write pushed by the host (no request trip), D2H a read the host
//! requests; both are issued on the target cube's M_CPU.DMA. PE DMA is
//! issued on the reading PE's PE_DMA.
//!
//! Knows the machine, the device and the hardware models; nothing of
//! tensors, kernels or collectives.

mod catalogue;
mod report;

use std::rc::Rc;
use std::sync::Arc;

pub use catalogue::{Category, Flow, ProbeCase, catalogue};
pub use report::{Check, ProbeReport};

use crate::device::{CopyJob, Device, DeviceError};
use crate::mem::DataMode;
use crate::sim::{SimDuration, SimError, SimTime, Simulation};
use crate::topology::{Machine, MemSpace, NodeId};

use catalogue::Engine;

/// The reference transfer size of the catalogue: 32 KiB.
pub const REFERENCE_BYTES: u64 = 32 << 10;

/// The smallest reference size: below it the size sweep's points are not
/// all different (1 B and an eighth of 1 B, rounded up, are both 1 B).
pub const SMALLEST_BYTES: u64 = 2;

/// Why the probe could not run (as opposed to a check failing).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A reference size whose sweep does not fit the reading PE's TCM.
    #[error(
        "--size {bytes}: the size sweep copies up to {factor} x that into a PE's TCM, which \
         holds {capacity} (pe.tcm.capacity): the largest valid size is {largest} B"
    )]
    SizeTooLarge {
        /// The size asked for.
        bytes: u64,
        /// The largest multiple of it the sweep copies.
        factor: u64,
        /// The TCM's capacity.
        capacity: crate::config::units::NonZeroSize,
        /// The largest size that fits.
        largest: u64,
    },
    /// A reference size too small for the size sweep to spread: its
    /// smallest point (an eighth of it, at least 1 B) would equal it.
    #[error(
        "--size {bytes}: the size sweep also copies an eighth of it (at least 1 B), which must \
         differ from it for \"time grows with size\" to mean anything: the smallest valid \
         size is {smallest} B"
    )]
    SizeTooSmall {
        /// The size asked for.
        bytes: u64,
        /// The smallest size the sweep spreads.
        smallest: u64,
    },
    /// A device operation failed while setting up or running a case.
    #[error("probe case {case}: {source}")]
    Device {
        /// The case.
        case: String,
        /// What failed.
        source: DeviceError,
    },
    /// The simulation of a case stopped with an error.
    #[error("probe case {case}: {source}")]
    Sim {
        /// The case.
        case: String,
        /// What failed.
        source: SimError,
    },
}

/// The measured outcome of one case.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CaseResult {
    /// Case name, e.g. `pe_dma_far`.
    pub name: String,
    /// `h2d`, `d2h` or `pe_dma`.
    pub category: Category,
    /// Bytes per flow.
    pub bytes: u64,
    /// Flows running at once (1 = uncontended).
    pub load: u32,
    /// Whether flows share hardware (load > 1).
    pub contended: bool,
    /// Closed-form time of one uncontended flow, in ps.
    pub formula_ps: u64,
    /// Simulated time from the first request to the last byte written, ps.
    pub actual_ps: u64,
    /// Achieved bandwidth of all flows together, GB/s (10^9 B/s).
    pub bandwidth_gbps: f64,
    /// The link that limits the data path's rate (largest per-packet
    /// occupancy; the first such link on ties).
    pub bottleneck: String,
    /// Where the data went: `source -> destination`.
    pub route: String,
}

/// Runs the whole catalogue on `machine` with `bytes` as the reference size.
pub fn run(machine: &Arc<Machine>, bytes: u64) -> Result<ProbeReport, ProbeError> {
    check_size(machine, bytes)?;
    let results = catalogue(machine, bytes)
        .iter()
        .map(|case| run_case(machine, case))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProbeReport::new(results))
}

/// Every case of the catalogue fits its memories at `bytes` (checked
/// before anything is allocated): the largest copy lands in a TCM.
fn check_size(machine: &Machine, bytes: u64) -> Result<(), ProbeError> {
    if bytes < SMALLEST_BYTES {
        return Err(ProbeError::SizeTooSmall {
            bytes,
            smallest: SMALLEST_BYTES,
        });
    }
    let capacity = machine.spec().pe().tcm.capacity;
    let factor = catalogue::LARGEST_FACTOR;
    let largest = capacity.get().bytes() / factor;
    if bytes > largest {
        return Err(ProbeError::SizeTooLarge {
            bytes,
            factor,
            capacity,
            largest,
        });
    }
    Ok(())
}

/// Runs one case on a fresh simulation and fresh hardware.
pub fn run_case(machine: &Arc<Machine>, case: &ProbeCase) -> Result<CaseResult, ProbeError> {
    let device_error = |source| ProbeError::Device {
        case: case.name.clone(),
        source,
    };
    let device = Device::from_machine(machine.clone(), DataMode::Off).map_err(device_error)?;
    let copies = case
        .flows
        .iter()
        .map(|flow| prepare(&device, flow, case.bytes))
        .collect::<Result<Vec<_>, _>>()
        .map_err(device_error)?;
    let formula = formula(&device, &copies[0], case.bytes).map_err(device_error)?;
    let (start, end) = simulate(&device, &copies, case.bytes).map_err(|e| match e {
        Failure::Device(source) => device_error(source),
        Failure::Sim(source) => ProbeError::Sim {
            case: case.name.clone(),
            source,
        },
    })?;
    Ok(result(&device, case, &copies[0], formula, end - start))
}

/// One flow made concrete: buffers allocated, engine and initiator chosen.
struct Copy {
    flow: Flow,
    initiator: NodeId,
    src: u64,
    dst: u64,
}

fn prepare(device: &Rc<Device>, flow: &Flow, bytes: u64) -> Result<Copy, DeviceError> {
    let machine = device.fabric().machine();
    let alloc = |space| device.alloc(space, bytes.max(1));
    let initiator = match flow.engine {
        Engine::Host { .. } => machine.host(),
        Engine::PeDma { sip, cube, pe } => machine
            .pe(sip, cube, pe)
            .ok_or_else(|| missing(MemSpace::Tcm { sip, cube, pe }))?,
    };
    Ok(Copy {
        flow: flow.clone(),
        initiator,
        src: alloc(flow.src)?,
        dst: alloc(flow.dst)?,
    })
}

fn missing(space: MemSpace) -> DeviceError {
    DeviceError::Route(crate::topology::RouteError::UnknownNode(space.node_name()))
}

/// The issuing engine's time per descriptor (a slow PE's stretched,
/// ADR-0106).
fn issue_overhead(device: &Device, flow: &Flow) -> SimDuration {
    let spec = device.fabric().machine().spec();
    match flow.engine {
        Engine::Host { .. } => spec.cube().mcpu.dma.issue_overhead,
        Engine::PeDma { sip, cube, pe } => spec.pe_dma(sip, cube, pe).issue_overhead,
    }
}

fn formula(device: &Device, copy: &Copy, bytes: u64) -> Result<SimDuration, DeviceError> {
    let issue = issue_overhead(device, &copy.flow);
    device.dma_copy_formula(issue, copy.initiator, copy.src, copy.dst, bytes)
}

enum Failure {
    Device(DeviceError),
    Sim(SimError),
}

/// Runs every copy at once from time zero; returns (first request, last end).
fn simulate(
    device: &Rc<Device>,
    copies: &[Copy],
    bytes: u64,
) -> Result<(SimTime, SimTime), Failure> {
    let mut simulation = Simulation::new();
    let handles: Vec<_> = copies
        .iter()
        .enumerate()
        .map(|(i, copy)| {
            let (device, flow) = (device.clone(), copy.flow.clone());
            let (initiator, src, dst) = (copy.initiator, copy.src, copy.dst);
            simulation.spawn(&format!("flow{i}"), async move {
                let engine = flow.engine.resolve(device.fabric());
                device
                    .dma_copy(
                        engine.dma(),
                        initiator,
                        CopyJob::contiguous(src, dst, bytes),
                    )
                    .await
            })
        })
        .collect();
    simulation.run().map_err(Failure::Sim)?;
    let mut span: Option<(SimTime, SimTime)> = None;
    for handle in handles {
        let timing = handle
            .output()
            .expect("every flow finishes when the run succeeds")
            .map_err(Failure::Device)?;
        let (start, end) = span.unwrap_or((timing.requested, timing.end));
        span = Some((start.min(timing.requested), end.max(timing.end)));
    }
    Ok(span.unwrap_or_default())
}

fn result(
    device: &Device,
    case: &ProbeCase,
    copy: &Copy,
    formula: SimDuration,
    actual: SimDuration,
) -> CaseResult {
    let total_bytes = case.bytes * case.flows.len() as u64;
    CaseResult {
        name: case.name.clone(),
        category: case.category,
        bytes: case.bytes,
        load: case.flows.len() as u32,
        contended: case.flows.len() > 1,
        formula_ps: formula.as_ps(),
        actual_ps: actual.as_ps(),
        bandwidth_gbps: gbps(total_bytes, actual),
        bottleneck: bottleneck(device, copy).unwrap_or_else(|| "-".to_owned()),
        route: format!("{} -> {}", copy.flow.src, copy.flow.dst),
    }
}

fn gbps(bytes: u64, time: SimDuration) -> f64 {
    if time == SimDuration::ZERO {
        return 0.0;
    }
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// The data path's link with the largest per-packet occupancy.
fn bottleneck(device: &Device, copy: &Copy) -> Option<String> {
    let fabric = device.fabric();
    let resolver = fabric.router().resolver();
    let node = |space| resolver.memory_node(space).ok();
    let path = fabric
        .router()
        .find_path(node(copy.flow.src)?, node(copy.flow.dst)?)
        .ok()?;
    let payload = fabric.max_payload(&path).get();
    let links = fabric.path_links(&path);
    let mut best: Option<(SimDuration, &str)> = None;
    for link in &links {
        let occupancy = link.params().occupancy(payload).ok()?;
        if best.is_none_or(|(b, _)| occupancy > b) {
            best = Some((occupancy, link.name()));
        }
    }
    best.map(|(_, name)| name.to_owned())
}
