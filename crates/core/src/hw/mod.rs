//! Hardware components and their latency models.
//!
//! Every part of the machine that data or commands pass through is here, as
//! a small type with `async` methods that advance virtual time by exactly
//! what its documented formula says (`docs/latency-model.md` lists them
//! all):
//!
//! - [`server`]: the FIFO serial server (a reservation calendar) every
//!   bandwidth-limited part is built on, with busy-time counters.
//! - [`link`]: one direction of one physical link ([`Link`], [`HopParams`]).
//! - [`transit`]: a transfer split into packets, store-and-forward per
//!   packet, pipelined over a path of links ([`transfer`]), and its closed
//!   form ([`transfer_formula`]).
//! - [`hbm`]: the HBM controller and its pseudo-channels.
//! - [`memory`]: on-chip SRAM and TCM ports.
//! - [`dma`]: DMA engines (PE_DMA, M_CPU.DMA).
//! - [`mcpu`], [`io_cpu`]: the command processors of a cube and of a SIP.
//! - [`pe`]: a PE's compute units, PE_GEMM and PE_MATH, and the pipeline
//!   that streams GEMM output tiles through a math epilogue.
//! - `flow_route`: a path as flow mode crosses it, its per-hop constants
//!   beside the link indices.
//! - [`fabric`]: all of the above instantiated for one compiled machine,
//!   one [`Link`] per directed edge of its graph ([`Fabric`]).
//!
//! Components take plain parameters (values of the `topology` spec types)
//! and paths as slices of [`Link`]s; they never search a graph. Only
//! [`fabric`] knows the compiled machine, and it asks the topology's router
//! for routes. This module must not know torch, tensors, collectives, memory
//! contents or routing: it times what it is asked to move.

pub mod dma;
pub mod explain;
pub mod fabric;
mod flow_route;
mod flow_share;
pub mod hbm;
pub mod io_cpu;
pub mod link;
#[allow(unsafe_code)] // a link's pointer read back from the table that owns it
mod link_table;
pub mod mcpu;
pub mod memory;
pub mod pe;
pub mod server;
pub mod transit;

pub use dma::{DmaCompletion, DmaEngine, DmaSlot};
pub use fabric::{CubeUnits, Fabric, HeaderCrossing, PeUnits, Route, WholeCopy, WholeTimes};
pub use flow_share::Pushed;
pub use hbm::{HbmController, hbm_formula, pc_shares};
pub use io_cpu::{CubeFanout, IoCpu, LaunchReport};
pub use link::{HopParams, Link, LinkClass};
pub use link_table::LinkTable;
pub use mcpu::{CubeCompletion, Mcpu, PeCommand};
pub use memory::{MemoryPort, memory_formula};
pub use pe::{
    GemmEngine, GemmShape, MATH_PIPELINE_CYCLES, MathEngine, PipelineJob, PipelineRun,
    gemm_formula, math_formula, pipeline_formula,
};
pub use server::{AccessReport, Activity, Reservation, SerialServer, ServerStats};
pub use transit::{
    Bottleneck, PacketPlan, TransferReport, book_flow, transfer, transfer_flow, transfer_formula,
};

use crate::sim::{SimDuration, SimTime, TimeError};

/// A request a component cannot time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HwError {
    /// A time computed for `component` does not fit in u64 picoseconds
    /// (213 days): an absurd size or a near-zero bandwidth.
    #[error("{component}: {source}")]
    Time {
        /// The component whose timing overflowed.
        component: String,
        /// What overflowed.
        source: TimeError,
    },
    /// An access that does not lie inside the memory.
    #[error("{component}: access of {len} B at offset {offset} does not fit in its {capacity} B")]
    OutOfRange {
        /// The memory.
        component: String,
        /// First byte of the access.
        offset: u64,
        /// Bytes accessed.
        len: u64,
        /// The memory's size.
        capacity: u64,
    },
}

impl HwError {
    /// Wraps a [`TimeError`] met while timing `component`.
    pub(crate) fn time(component: &str) -> impl Fn(TimeError) -> HwError + '_ {
        move |source| HwError::Time {
            component: component.to_owned(),
            source,
        }
    }
}

/// `at + d`, or an overflow error naming `component`.
#[inline]
pub(crate) fn later(at: SimTime, d: SimDuration, component: &str) -> Result<SimTime, HwError> {
    later_for(at, d, || component)
}

/// [`later`], asking for the component's name only on overflow: on a
/// hop, reading a link's name touches a cache line nothing else there
/// needs.
#[inline]
pub(crate) fn later_for<'a>(
    at: SimTime,
    d: SimDuration,
    component: impl FnOnce() -> &'a str,
) -> Result<SimTime, HwError> {
    match at.as_ps().checked_add(d.as_ps()) {
        Some(ps) => Ok(SimTime::from_ps(ps)),
        None => Err(overflowed(at, d, component())),
    }
}

/// The error of `at + d` overflowing (kept out of line: it never happens in
/// a sane run, and [`later`] sits on every hop of every transfer).
#[cold]
fn overflowed(at: SimTime, d: SimDuration, component: &str) -> HwError {
    HwError::time(component)(TimeError::Overflow(format!("{at} + {d}")))
}
