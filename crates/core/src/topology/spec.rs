//! `TopologySpec`: the validated, typed form of `configs/topology.yaml`.
//!
//! Every value is either a type that cannot hold a bad value on its own
//! (`Count` is never zero, `Bandwidth` never zero, `Fraction` in (0, 1]) or
//! a type whose constructor checks the rules between its fields
//! ([`SipArrangement`], [`HbmSpec`], and [`UcieSpec`], [`NocSpec`],
//! [`PeSpec`], whose derived rates must fit 64 bits). The rules between
//! sections (the address map, the cube layout, the hop times) are checked
//! by the one constructor of a `TopologySpec`, whose fields are private:
//! a `TopologySpec` that exists describes a machine that can be built, and
//! its accessors cannot fail. A changed copy is made with a `with_*`
//! method, which checks again and returns a [`SpecError`] (ADR-0047).
//!
//! Loading goes through `config::Document`: unknown keys, wrong units and
//! broken rules are reported with the file, line, column and key path.
//! The rules include the compiler's: the cube NoC can be laid out
//! (`layout`) and every hop time fits in 64-bit picoseconds (`link`); and
//! every fault of `faults:` names a part of this machine (`faults`).

use std::fmt;
use std::ops::Deref;

use serde::Deserialize;

use super::address::{AddressError, AddressMap};
use super::error::TopologyError;
use super::faults::{FaultError, FaultsSpec};
use super::layout::{CubeLayout, LayoutError};
use super::link::{LinkCatalog, LinkError};
use super::machine::Machine;
use crate::config::units::{Bandwidth, Count, Fraction, Frequency, NonZeroSize, Size};
use crate::config::{ConfigError, ConfigSource, Document, Override};
use crate::sim::SimDuration;

const DEFAULT_FILE: &str = "configs/topology.yaml";

/// The largest machine (estimated host bytes) whose link faults are
/// checked by building it at load (ADR-0106): 1 GiB, about 1,800 SIPs of
/// the default 16 cubes of 8 PEs (`Machine::estimated_bytes`).
const EARLY_BUILD_BYTES: u128 = 1 << 30;
const DEFAULT_YAML: &str = include_str!("../../../../configs/topology.yaml");

/// The whole machine: host and SIPs, the cube mesh of a SIP, one cube, one PE.
///
/// Made only by [`TopologySpec::load`] / [`TopologySpec::from_document`] or
/// from another spec by a `with_*` method, all of which check every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologySpec {
    system: SystemSpec,
    sip: SipSpec,
    cube: CubeSpec,
    pe: PeSpec,
    simulation: SimulationSpec,
    faults: FaultsSpec,
}

/// `simulation:` (optional) — how the machine is simulated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with fidelity and repeats")]
pub struct SimulationSpec {
    /// How transfers cross their links (default `packet`).
    #[serde(default)]
    pub fidelity: Fidelity,
    /// How a training step's repeated collectives run (default
    /// `simulate`; ADR-0107).
    #[serde(default)]
    pub repeats: Repeats,
}

/// How a Chakra step's repeated collectives run (`simulation.repeats`,
/// ADR-0107): every call simulated, or each distinct call simulated once
/// and its repeats replayed from the first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(expecting = "simulate or replay")]
pub enum Repeats {
    /// Every collective call is simulated, message by message: exact.
    #[default]
    #[serde(rename = "simulate")]
    Simulate,
    /// A group's members meet before each collective; the first call of
    /// each (group, collective, bytes) is simulated from the meeting and
    /// every later one takes, per member, the time the first took. Exact
    /// where the members arrive together and nothing else crosses the
    /// collective's links; otherwise an approximation (ADR-0107).
    #[serde(rename = "replay")]
    Replay,
}

impl Repeats {
    /// The name used in topology.yaml.
    pub const fn name(self) -> &'static str {
        match self {
            Repeats::Simulate => "simulate",
            Repeats::Replay => "replay",
        }
    }
}

/// How a transfer crosses its path (`simulation.fidelity`, `--fidelity`;
/// docs/latency-model.md, ADR-0012).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(expecting = "packet or flow")]
pub enum Fidelity {
    /// Every packet is an event at every hop (store-and-forward, FIFO per
    /// packet): the reference model.
    #[default]
    #[serde(rename = "packet")]
    Packet,
    /// A whole transfer reserves each hop once for its occupancy, pipelined
    /// as the closed form says: O(hops) arithmetic and one timer.
    #[serde(rename = "flow")]
    Flow,
}

impl Fidelity {
    /// Every fidelity, in the order help texts list them.
    pub const ALL: [Fidelity; 2] = [Fidelity::Packet, Fidelity::Flow];

    /// The name used in topology.yaml and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Fidelity::Packet => "packet",
            Fidelity::Flow => "flow",
        }
    }
}

impl fmt::Display for Fidelity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `system:` — the SIPs, the host and the links that join them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemSpec {
    /// How many SIPs and how they are connected.
    pub sips: SipArrangement,
    /// Host-side software costs.
    pub host: HostSpec,
    /// The PCIe link between the host and each SIP.
    pub host_link: LinkSpec,
    /// One link between neighbouring SIPs.
    pub inter_sip: LinkSpec,
}

/// `system.host:` — host-side software costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with kernel_launch_overhead"
)]
pub struct HostSpec {
    /// Time from a kernel launch call to the launch command leaving the host.
    pub kernel_launch_overhead: SimDuration,
}

/// A point-to-point link, per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a link mapping (bandwidth, latency, max_payload, packet_overhead, efficiency)"
)]
pub struct LinkSpec {
    /// Raw line rate.
    pub bandwidth: Bandwidth,
    /// Fixed time for a packet's first flit to cross.
    pub latency: SimDuration,
    /// Largest payload of one packet; transfers are split into packets.
    pub max_payload: NonZeroSize,
    /// Header and framing bytes sent with every packet.
    pub packet_overhead: Size,
    /// Share of the line rate left for packets after other protocol costs.
    pub efficiency: Fraction,
}

/// `sip:` — what every SIP contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SipSpec {
    /// The mesh of cubes.
    pub cube_mesh: Grid,
    /// The IO_CPU that receives launches from the host.
    pub io_cpu: IoCpuSpec,
    /// The link on each edge between neighbouring cubes.
    pub ucie: UcieSpec,
}

/// A `w × h` grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a grid mapping {w, h}")]
pub struct Grid {
    /// Columns.
    pub w: Count,
    /// Rows.
    pub h: Count,
}

impl Grid {
    /// `w × h`.
    pub fn cells(self) -> u64 {
        u64::from(self.w.get()) * u64::from(self.h.get())
    }
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.w, self.h)
    }
}

/// `sip.io_cpu:`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with dispatch_overhead")]
pub struct IoCpuSpec {
    /// Time to handle one launch (stamp the start time, fan out to cubes).
    pub dispatch_overhead: SimDuration,
}

/// The values of `sip.ucie:` as written — the die-to-die link on one
/// cube-mesh edge, per direction; [`UcieSpec`] is the checked form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a UCIe mapping (module_bandwidth, modules_per_edge, latency, bridge_latency, max_payload, efficiency)"
)]
pub struct UcieParams {
    /// Rate of one UCIe module.
    pub module_bandwidth: Bandwidth,
    /// Modules side by side on one edge.
    pub modules_per_edge: Count,
    /// Time to cross the link.
    pub latency: SimDuration,
    /// Time through the NoC-to-UCIe bridge on each side.
    pub bridge_latency: SimDuration,
    /// Largest payload of one flit/packet.
    pub max_payload: NonZeroSize,
    /// Share of the line rate left for payload (flit overhead).
    pub efficiency: Fraction,
}

/// `sip.ucie:` checked: the edge's rate (all modules together) fits 64-bit
/// bytes per second. Reads as [`UcieParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UcieSpec {
    params: UcieParams,
    edge_bandwidth: Bandwidth,
}

impl UcieSpec {
    /// Checks `params`.
    pub fn new(params: UcieParams) -> Result<Self, RateOverflow> {
        let edge_bandwidth = params
            .module_bandwidth
            .checked_mul(params.modules_per_edge)
            .ok_or(RateOverflow::UcieEdge {
                module_bandwidth: params.module_bandwidth,
                modules_per_edge: params.modules_per_edge,
            })?;
        Ok(UcieSpec {
            params,
            edge_bandwidth,
        })
    }

    /// The raw rate of one edge: all its modules together.
    pub fn edge_bandwidth(&self) -> Bandwidth {
        self.edge_bandwidth
    }
}

impl Deref for UcieSpec {
    type Target = UcieParams;
    fn deref(&self) -> &UcieParams {
        &self.params
    }
}

/// `cube:` — what every cube contains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubeSpec {
    /// PEs per cube.
    pub pes: Count,
    /// The on-cube network.
    pub noc: NocSpec,
    /// The HBM stack and its controller.
    pub hbm: HbmSpec,
    /// The cube's shared SRAM.
    pub sram: MemorySpec,
    /// The management CPU and its DMA engine.
    pub mcpu: McpuSpec,
}

/// The values of `cube.noc:` as written — routers joined by links; cycles
/// are NoC clock cycles. [`NocSpec`] is the checked form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a NoC mapping (clock, planes, link_width, hop_cycles, inject_eject_cycles, virtual_channels, max_payload, efficiency, optionally grid)"
)]
pub struct NocParams {
    /// Router and link clock.
    pub clock: Frequency,
    /// Independent networks laid side by side.
    pub planes: Count,
    /// Bytes one link moves per cycle.
    pub link_width: NonZeroSize,
    /// Cycles from one router to the next.
    pub hop_cycles: u32,
    /// Cycles between an endpoint and its router, at each end.
    pub inject_eject_cycles: u32,
    /// Virtual channels per link.
    pub virtual_channels: Count,
    /// Largest payload of one packet.
    pub max_payload: NonZeroSize,
    /// Share of the line rate achieved.
    pub efficiency: Fraction,
    /// The router grid `{w, h}`. Optional: without it the grid is sized
    /// from the cube's attachments (see `docs/topology.md`); with it, a grid
    /// too small for them is an error.
    #[serde(default)]
    pub grid: Option<Grid>,
}

/// `cube.noc:` checked: one link's rate fits 64-bit bytes per second.
/// Reads as [`NocParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NocSpec {
    params: NocParams,
    link_bandwidth: Bandwidth,
}

impl NocSpec {
    /// Checks `params`.
    pub fn new(params: NocParams) -> Result<Self, RateOverflow> {
        let link_bandwidth =
            Bandwidth::per_cycle(params.link_width, params.clock).ok_or(RateOverflow::NocLink {
                clock: params.clock,
                link_width: params.link_width,
            })?;
        Ok(NocSpec {
            params,
            link_bandwidth,
        })
    }

    /// The raw rate of one link: `link_width × clock`.
    pub fn link_bandwidth(&self) -> Bandwidth {
        self.link_bandwidth
    }

    /// This NoC on the router grid `grid` (`None`: sized from the cube).
    /// The grid takes no part in the rate, so this cannot fail; whether the
    /// cube fits is the layout's rule, checked with the whole spec.
    #[must_use]
    pub fn with_grid(self, grid: Option<Grid>) -> Self {
        NocSpec {
            params: NocParams {
                grid,
                ..self.params
            },
            ..self
        }
    }
}

impl Deref for NocSpec {
    type Target = NocParams;
    fn deref(&self) -> &NocParams {
        &self.params
    }
}

/// The values of `cube.hbm:` as written; [`HbmSpec`] is the checked form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an HBM mapping (capacity, pseudo_channels, pc_bandwidth, burst, interleave, access_latency, controller_latency)"
)]
pub struct HbmParams {
    /// Bytes in the stack.
    pub capacity: NonZeroSize,
    /// Independent pseudo-channels (PCs), each with its own queue.
    pub pseudo_channels: Count,
    /// Rate of one pseudo-channel.
    pub pc_bandwidth: Bandwidth,
    /// Smallest access; requests are rounded up to it.
    pub burst: NonZeroSize,
    /// Consecutive address bytes mapped to one PC before the next PC.
    pub interleave: NonZeroSize,
    /// Time of one access at the DRAM.
    pub access_latency: SimDuration,
    /// Time through the controller and PHY.
    pub controller_latency: SimDuration,
}

/// A rule between `cube.hbm` values that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HbmError {
    /// The interleave granule does not hold whole bursts.
    #[error("interleave {interleave} is not a whole number of {burst} bursts")]
    InterleaveNotBursts {
        /// `interleave` as given.
        interleave: NonZeroSize,
        /// `burst` as given.
        burst: NonZeroSize,
    },
    /// The capacity does not split evenly over the pseudo-channels.
    #[error(
        "capacity {capacity} is not a whole number of interleave rounds \
         ({pseudo_channels} pseudo-channels x {interleave})"
    )]
    CapacityNotRounds {
        /// `capacity` as given.
        capacity: NonZeroSize,
        /// `pseudo_channels` as given.
        pseudo_channels: Count,
        /// `interleave` as given.
        interleave: NonZeroSize,
    },
    /// All pseudo-channels together overflow 64-bit bytes per second.
    #[error("{pc_bandwidth} x pseudo_channels {pseudo_channels} overflows 64-bit bytes per second")]
    BandwidthOverflow {
        /// `pc_bandwidth` as given.
        pc_bandwidth: Bandwidth,
        /// `pseudo_channels` as given.
        pseudo_channels: Count,
    },
}

impl HbmError {
    /// The key under `cube.hbm` to blame.
    pub fn key(&self) -> &'static str {
        match self {
            HbmError::InterleaveNotBursts { .. } => "interleave",
            HbmError::CapacityNotRounds { .. } => "capacity",
            HbmError::BandwidthOverflow { .. } => "pc_bandwidth",
        }
    }
}

/// `cube.hbm:` checked: interleave holds whole bursts, the capacity is
/// whole rounds of the interleave over all pseudo-channels, and the stack's
/// rate fits 64-bit bytes per second. Reads as [`HbmParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HbmSpec {
    params: HbmParams,
    bandwidth: Bandwidth,
}

impl HbmSpec {
    /// Checks `params`.
    pub fn new(params: HbmParams) -> Result<Self, HbmError> {
        let interleave = params.interleave.get().bytes();
        if interleave % params.burst.get().bytes() != 0 {
            return Err(HbmError::InterleaveNotBursts {
                interleave: params.interleave,
                burst: params.burst,
            });
        }
        let round = u128::from(interleave) * u128::from(params.pseudo_channels.get());
        if u128::from(params.capacity.get().bytes()) % round != 0 {
            return Err(HbmError::CapacityNotRounds {
                capacity: params.capacity,
                pseudo_channels: params.pseudo_channels,
                interleave: params.interleave,
            });
        }
        let bandwidth = params
            .pc_bandwidth
            .checked_mul(params.pseudo_channels)
            .ok_or(HbmError::BandwidthOverflow {
                pc_bandwidth: params.pc_bandwidth,
                pseudo_channels: params.pseudo_channels,
            })?;
        Ok(HbmSpec { params, bandwidth })
    }

    /// All pseudo-channels together.
    pub fn bandwidth(&self) -> Bandwidth {
        self.bandwidth
    }
}

impl Deref for HbmSpec {
    type Target = HbmParams;
    fn deref(&self) -> &HbmParams {
        &self.params
    }
}

/// An on-chip memory (SRAM, TCM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a memory mapping (capacity, bandwidth, latency)"
)]
pub struct MemorySpec {
    /// Bytes.
    pub capacity: NonZeroSize,
    /// Access rate.
    pub bandwidth: Bandwidth,
    /// Time of one access.
    pub latency: SimDuration,
}

/// `cube.mcpu:`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with dispatch_overhead and dma"
)]
pub struct McpuSpec {
    /// Time to handle one kernel command.
    pub dispatch_overhead: SimDuration,
    /// The M_CPU.DMA engine.
    pub dma: DmaSpec,
}

/// A DMA engine (M_CPU.DMA, PE_DMA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a DMA mapping (descriptor, issue_overhead, max_outstanding)"
)]
pub struct DmaSpec {
    /// Size of one transfer descriptor.
    pub descriptor: NonZeroSize,
    /// Time to issue one descriptor.
    pub issue_overhead: SimDuration,
    /// Transfers in flight at once.
    pub max_outstanding: Count,
}

/// The values of `pe:` as written — one processing element; [`PeSpec`] is
/// the checked form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a PE mapping (clock, tcm, gemm, math, dma)"
)]
pub struct PeParams {
    /// PE clock.
    pub clock: Frequency,
    /// PE-local tightly coupled memory.
    pub tcm: MemorySpec,
    /// The matrix engine.
    pub gemm: GemmSpec,
    /// The vector/elementwise engine.
    pub math: MathSpec,
    /// PE_DMA.
    pub dma: DmaSpec,
}

/// `pe:` checked: the peak GEMM rate fits a 64-bit FLOP/s figure. Reads as
/// [`PeParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeSpec {
    params: PeParams,
    peak_flops: u64,
}

impl PeSpec {
    /// Checks `params`.
    pub fn new(params: PeParams) -> Result<Self, RateOverflow> {
        let peak_flops = params
            .gemm
            .macs_per_cycle()
            .checked_mul(2)
            .and_then(|flops| flops.checked_mul(params.clock.hz()))
            .ok_or(RateOverflow::PeakFlops {
                clock: params.clock,
                gemm: params.gemm,
            })?;
        Ok(PeSpec { params, peak_flops })
    }

    /// Peak GEMM rate: two FLOPs per MAC per cycle.
    pub fn peak_flops(&self) -> u64 {
        self.peak_flops
    }
}

impl Deref for PeSpec {
    type Target = PeParams;
    fn deref(&self) -> &PeParams {
        &self.params
    }
}

/// A rate derived from several keys that does not fit its 64-bit base unit
/// (so none is ever saturated); names the key to lower.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateOverflow {
    /// `sip.ucie`: module rate × modules per edge.
    #[error(
        "{module_bandwidth} x modules_per_edge {modules_per_edge} overflows 64-bit bytes per second"
    )]
    UcieEdge {
        /// `module_bandwidth` as given.
        module_bandwidth: Bandwidth,
        /// `modules_per_edge` as given.
        modules_per_edge: Count,
    },
    /// `cube.noc`: clock × link width.
    #[error("{clock} x link_width {link_width} overflows 64-bit bytes per second")]
    NocLink {
        /// `clock` as given.
        clock: Frequency,
        /// `link_width` as given.
        link_width: NonZeroSize,
    },
    /// `pe`: clock × 2 × GEMM MACs.
    #[error("{clock} x 2 x {}x{} GEMM MACs overflows a 64-bit FLOP/s figure", gemm.rows, gemm.cols)]
    PeakFlops {
        /// `clock` as given.
        clock: Frequency,
        /// `gemm` as given.
        gemm: GemmSpec,
    },
}

impl RateOverflow {
    /// The key path to blame.
    pub fn key(&self) -> &'static str {
        match self {
            RateOverflow::UcieEdge { .. } => "sip.ucie.module_bandwidth",
            RateOverflow::NocLink { .. } => "cube.noc.clock",
            RateOverflow::PeakFlops { .. } => "pe.clock",
        }
    }
}

/// `pe.gemm:` — a `rows × cols` MAC array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with rows and cols")]
pub struct GemmSpec {
    /// Array rows.
    pub rows: Count,
    /// Array columns.
    pub cols: Count,
}

impl GemmSpec {
    /// MACs per cycle: `rows × cols`.
    pub fn macs_per_cycle(&self) -> u64 {
        u64::from(self.rows.get()) * u64::from(self.cols.get())
    }
}

/// `pe.math:`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with elements_per_cycle")]
pub struct MathSpec {
    /// Elements processed per cycle.
    pub elements_per_cycle: Count,
}

/// The values `system.sips.topology` takes: the file's name of an
/// arrangement, read only to build a [`SipArrangement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(expecting = "ring_1d, torus_2d or mesh_2d_no_wrap")]
pub(crate) enum ArrangementName {
    #[serde(rename = "ring_1d")]
    Ring1d,
    #[serde(rename = "torus_2d")]
    Torus2d,
    #[serde(rename = "mesh_2d_no_wrap")]
    Mesh2dNoWrap,
}

/// The SIP arrangement (glossary: arrangement): how the SIPs are laid out,
/// from topology.yaml's `system.sips` to the kernel. A ring of `n`, or a
/// `w × h` grid with or without wrap; SIPs (ranks) sit row-major on the
/// 2-D grids.
///
/// A machine's arrangement is built by `SipArrangement::new` when the
/// spec loads, which checks the grid rules; a collective's world (a
/// sub-group of SIPs on a logical ring, a mock's square grid) names its
/// own directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SipArrangement {
    /// A ring of `n` SIPs (`ring_1d`); each talks to east and west.
    Ring {
        /// SIPs on the ring.
        n: u32,
    },
    /// A `w × h` grid with wrap-around links (`torus_2d`).
    Torus {
        /// Columns.
        w: u32,
        /// Rows.
        h: u32,
    },
    /// A `w × h` grid without wrap-around links (`mesh_2d_no_wrap`).
    Mesh {
        /// Columns.
        w: u32,
        /// Rows.
        h: u32,
    },
}

impl SipArrangement {
    /// Checks `params` (`system.sips` as written) and resolves the grid.
    ///
    /// Grid rules (seed ADR-0024 D5): explicit `w`/`h` must multiply to
    /// `count`; without them a square `count` gives a `sqrt × sqrt` grid;
    /// anything else is an error. A ring has no grid, and `w`/`h` on a ring
    /// are an error rather than silently ignored.
    pub(crate) fn new(params: SipsParams) -> Result<Self, SipArrangementError> {
        let SipsParams {
            count,
            topology,
            w,
            h,
        } = params;
        let dims = match (topology, w, h) {
            (ArrangementName::Ring1d, None, None) => {
                return Ok(SipArrangement::Ring { n: count.get() });
            }
            (ArrangementName::Ring1d, w, _) => {
                let key = if w.is_some() { "w" } else { "h" };
                return Err(SipArrangementError::GridOnRing { key });
            }
            (_, Some(w), Some(h)) => explicit_grid(count, w, h)?,
            (_, None, None) => square_grid(count, topology)?,
            (_, w, _) => {
                let (given, missing) = if w.is_some() { ("w", "h") } else { ("h", "w") };
                return Err(SipArrangementError::HalfGrid { given, missing });
            }
        };
        let (w, h) = (dims.w.get(), dims.h.get());
        Ok(if topology == ArrangementName::Torus2d {
            SipArrangement::Torus { w, h }
        } else {
            SipArrangement::Mesh { w, h }
        })
    }

    /// Number of SIPs.
    pub const fn count(self) -> u32 {
        match self {
            SipArrangement::Ring { n } => n,
            SipArrangement::Torus { w, h } | SipArrangement::Mesh { w, h } => w * h,
        }
    }

    /// The topology.yaml name of this kind of arrangement
    /// (`system.sips.topology`).
    pub const fn name(self) -> &'static str {
        match self {
            SipArrangement::Ring { .. } => "ring_1d",
            SipArrangement::Torus { .. } => "torus_2d",
            SipArrangement::Mesh { .. } => "mesh_2d_no_wrap",
        }
    }

    /// The `(w, h)` of a 2-D grid; `None` for a ring.
    pub const fn dims(self) -> Option<(u32, u32)> {
        match self {
            SipArrangement::Ring { .. } => None,
            SipArrangement::Torus { w, h } | SipArrangement::Mesh { w, h } => Some((w, h)),
        }
    }

    /// The `w × h` grid of a 2-D arrangement; `None` for a ring.
    pub fn grid(self) -> Option<Grid> {
        let (w, h) = self.dims()?;
        Some(Grid {
            w: Count::new(w)?,
            h: Count::new(h)?,
        })
    }
}

impl fmt::Display for SipArrangement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.dims() {
            None => f.write_str(self.name()),
            Some((w, h)) => write!(f, "{} {w}x{h}", self.name()),
        }
    }
}

/// The values of `system.sips:` as written; [`SipArrangement`] is the
/// checked form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with count, topology and optionally w and h"
)]
pub(crate) struct SipsParams {
    /// Number of SIPs (= ranks).
    pub count: Count,
    /// How they are arranged.
    pub topology: ArrangementName,
    /// Grid width, 2-D arrangements only.
    pub w: Option<Count>,
    /// Grid height, 2-D arrangements only.
    pub h: Option<Count>,
}

/// `system.sips` values that do not describe a SIP arrangement (seed ADR-0024 D5).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SipArrangementError {
    /// `w` or `h` given for a ring.
    #[error(
        "sips.{key} sets a 2-D grid, but ring_1d has none: remove it \
         (or unset it with --set system.sips.{key}=)"
    )]
    GridOnRing {
        /// `w` or `h`.
        key: &'static str,
    },
    /// Only one of `w` and `h`.
    #[error("sips.{given} is set but sips.{missing} is not: set both, with w x h = sips.count")]
    HalfGrid {
        /// The key that was given.
        given: &'static str,
        /// The key that is missing.
        missing: &'static str,
    },
    /// `w × h` differs from `count`.
    #[error("sip layout {w}x{h} = {cells} != sips.count {count} (w={w}, h={h})")]
    Mismatch {
        /// Grid width.
        w: Count,
        /// Grid height.
        h: Count,
        /// `w × h`.
        cells: u64,
        /// `sips.count`.
        count: Count,
    },
    /// A 2-D arrangement, no grid, and a count that is not a square.
    #[error(
        "sips.count {count} is not a square, so {topology} cannot derive its grid: \
         set sips.w and sips.h with w x h = {count}"
    )]
    NotSquare {
        /// `sips.count`.
        count: Count,
        /// The 2-D arrangement's name.
        topology: &'static str,
    },
}

impl SipArrangementError {
    /// The key under `system.sips` to blame (empty for the section).
    pub fn key(&self) -> &'static str {
        match self {
            SipArrangementError::GridOnRing { key } => key,
            SipArrangementError::HalfGrid { given, .. } => given,
            SipArrangementError::Mismatch { .. } => "",
            SipArrangementError::NotSquare { .. } => "count",
        }
    }
}

fn explicit_grid(count: Count, w: Count, h: Count) -> Result<Grid, SipArrangementError> {
    let grid = Grid { w, h };
    if grid.cells() != u64::from(count.get()) {
        return Err(SipArrangementError::Mismatch {
            w,
            h,
            cells: grid.cells(),
            count,
        });
    }
    Ok(grid)
}

fn square_grid(count: Count, topology: ArrangementName) -> Result<Grid, SipArrangementError> {
    let side = count.get().isqrt();
    match Count::new(side) {
        Some(side) if u64::from(side.get()).pow(2) == u64::from(count.get()) => {
            Ok(Grid { w: side, h: side })
        }
        _ => {
            let name = if topology == ArrangementName::Torus2d {
                "torus_2d"
            } else {
                "mesh_2d_no_wrap"
            };
            Err(SipArrangementError::NotSquare {
                count,
                topology: name,
            })
        }
    }
}

/// topology.yaml as written, before the cross-field rules are checked.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a topology mapping with system, sip, cube, pe and optionally simulation and faults"
)]
struct TopologyFile {
    system: SystemFile,
    sip: SipFile,
    cube: CubeFile,
    pe: PeParams,
    #[serde(default)]
    simulation: SimulationSpec,
    #[serde(default)]
    faults: FaultsSpec,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with sips, host, host_link and inter_sip"
)]
struct SystemFile {
    sips: SipsParams,
    host: HostSpec,
    host_link: LinkSpec,
    inter_sip: LinkSpec,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with cube_mesh, io_cpu and ucie"
)]
struct SipFile {
    cube_mesh: Grid,
    io_cpu: IoCpuSpec,
    ucie: UcieParams,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a cube mapping (pes, noc, hbm, sram, mcpu)"
)]
struct CubeFile {
    pes: Count,
    noc: NocParams,
    hbm: HbmParams,
    sram: MemorySpec,
    mcpu: McpuSpec,
}

impl TopologyFile {
    /// Checks every section's own rules, then the rules between them.
    fn into_spec(self) -> Result<TopologySpec, SpecError> {
        let (system, sip, cube) = (self.system, self.sip, self.cube);
        let sips = SipArrangement::new(system.sips)?;
        let ucie = UcieSpec::new(sip.ucie)?;
        let noc = NocSpec::new(cube.noc)?;
        let hbm = HbmSpec::new(cube.hbm)?;
        let pe = PeSpec::new(self.pe)?;
        TopologySpec {
            system: SystemSpec {
                sips,
                host: system.host,
                host_link: system.host_link,
                inter_sip: system.inter_sip,
            },
            sip: SipSpec {
                cube_mesh: sip.cube_mesh,
                io_cpu: sip.io_cpu,
                ucie,
            },
            cube: CubeSpec {
                pes: cube.pes,
                noc,
                hbm,
                sram: cube.sram,
                mcpu: cube.mcpu,
            },
            pe,
            simulation: self.simulation,
            faults: self.faults,
        }
        .checked()
    }
}

/// A rule of topology.yaml that does not hold; [`SpecError::key`] names
/// the key to blame. The loader reports it with the key's file position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// `system.sips` does not describe an arrangement.
    #[error(transparent)]
    Sips(#[from] SipArrangementError),
    /// `cube.hbm` breaks a rule between its values.
    #[error(transparent)]
    Hbm(#[from] HbmError),
    /// A derived rate overflows.
    #[error(transparent)]
    Rate(#[from] RateOverflow),
    /// The address map cannot number every memory.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The cube NoC cannot be laid out.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A hop time does not fit 64-bit picoseconds.
    #[error("{}", .0.source)]
    Link(#[from] LinkError),
    /// A fault names no part of the machine, or does not fit it.
    #[error(transparent)]
    Fault(#[from] FaultError),
}

impl SpecError {
    /// The key path to blame (`system.sips` for the whole section).
    pub fn key(&self) -> String {
        match self {
            SpecError::Sips(e) => under("system.sips", e.key()),
            SpecError::Hbm(e) => under("cube.hbm", e.key()),
            SpecError::Rate(e) => e.key().to_owned(),
            SpecError::Address(e) => e.key().to_owned(),
            SpecError::Layout(e) => e.key().to_owned(),
            SpecError::Link(e) => e.key.to_owned(),
            SpecError::Fault(e) => e.key.clone(),
        }
    }
}

impl TopologySpec {
    /// The default machine, compiled into the binary from
    /// `configs/topology.yaml`.
    pub fn default_source() -> ConfigSource {
        ConfigSource::embedded(DEFAULT_FILE, DEFAULT_YAML)
    }

    /// Reads `source`, applies `overrides` and checks the result.
    pub fn load(source: &ConfigSource, overrides: &[Override]) -> Result<Self, ConfigError> {
        TopologySpec::from_document(&Document::load(source, overrides)?)
    }

    /// Deserializes and checks a parsed topology document (overrides
    /// included): the file's values, then every rule, each error placed at
    /// the key it names.
    pub fn from_document(document: &Document) -> Result<Self, ConfigError> {
        let file: TopologyFile = document.deserialize()?;
        file.into_spec()
            .map_err(|e| document.error_at(&e.key(), &e))
    }

    /// The rules that need the compiler's view: the address map can
    /// number every memory, the cube NoC can be laid out and every hop time
    /// fits, so that `Machine::build` succeeds.
    fn checked(self) -> Result<Self, SpecError> {
        AddressMap::new(&self)?;
        CubeLayout::new(&self.cube)?;
        LinkCatalog::new(&self)?;
        self.check_faults()?;
        Ok(self)
    }

    /// The faults' SIPs, cubes, PEs and ranks exist; with link faults,
    /// the machine is built once so that their names are checked here
    /// (a fault-free spec builds nothing). A machine estimated above
    /// [`EARLY_BUILD_BYTES`] is not built here, before the commands'
    /// memory check: its link names are checked when it is built, with
    /// the same message at the key but no file position. A build error
    /// other than a fault's is the build's own, reported there too.
    fn check_faults(&self) -> Result<(), SpecError> {
        let pes = self.cube.pes.get();
        let sips = self.system.sips.count();
        self.faults.check(sips, self.cubes_per_sip(), pes)?;
        let named = !self.faults.links.is_empty() || !self.faults.down.is_empty();
        if !named || Machine::estimated_bytes(self) > EARLY_BUILD_BYTES {
            return Ok(());
        }
        match Machine::build(self) {
            Err(TopologyError::Fault(error)) => Err(error.into()),
            _ => Ok(()),
        }
    }

    /// The host, the SIPs and the links between them.
    pub fn system(&self) -> &SystemSpec {
        &self.system
    }

    /// One SIP: its cube mesh, IO_CPU and cube-to-cube links.
    pub fn sip(&self) -> &SipSpec {
        &self.sip
    }

    /// One cube: PEs, NoC, HBM, SRAM, M_CPU.
    pub fn cube(&self) -> &CubeSpec {
        &self.cube
    }

    /// One PE: clock, TCM, GEMM and math engines, PE_DMA.
    pub fn pe(&self) -> &PeSpec {
        &self.pe
    }

    /// How the hardware is simulated (not what it is).
    pub fn simulation(&self) -> &SimulationSpec {
        &self.simulation
    }

    /// What is degraded (`faults:`, ADR-0106); empty when healthy.
    pub fn faults(&self) -> &FaultsSpec {
        &self.faults
    }

    /// The PE_DMA of PE `pe` of cube `cube` of SIP `sip`: `pe.dma`, its
    /// issue time stretched by the PE's slowdown (`faults.compute`,
    /// ADR-0106; saturated at the largest duration, which the first use
    /// reports as an overflow).
    pub fn pe_dma(&self, sip: u32, cube: u32, pe: u32) -> DmaSpec {
        let slowdown = self.faults.pe_slowdown(sip, cube, pe);
        let mut dma = self.pe.dma;
        dma.issue_overhead = slowdown
            .stretch(dma.issue_overhead)
            .unwrap_or(SimDuration::MAX);
        dma
    }

    /// This machine with `faults` instead, checked again.
    pub fn with_faults(self, faults: FaultsSpec) -> Result<Self, SpecError> {
        TopologySpec { faults, ..self }.checked()
    }

    /// This machine simulated at `fidelity`. No rule reads the fidelity,
    /// so this cannot fail.
    #[must_use]
    pub fn with_fidelity(self, fidelity: Fidelity) -> Self {
        let simulation = SimulationSpec {
            fidelity,
            ..self.simulation
        };
        TopologySpec { simulation, ..self }
    }

    /// This machine with `system` instead, checked again.
    pub fn with_system(self, system: SystemSpec) -> Result<Self, SpecError> {
        TopologySpec { system, ..self }.checked()
    }

    /// This machine with `sip` instead, checked again.
    pub fn with_sip(self, sip: SipSpec) -> Result<Self, SpecError> {
        TopologySpec { sip, ..self }.checked()
    }

    /// This machine with `cube` instead, checked again.
    pub fn with_cube(self, cube: CubeSpec) -> Result<Self, SpecError> {
        TopologySpec { cube, ..self }.checked()
    }

    /// This machine with `pe` instead, checked again.
    pub fn with_pe(self, pe: PeSpec) -> Result<Self, SpecError> {
        TopologySpec { pe, ..self }.checked()
    }

    /// Cubes in one SIP.
    pub fn cubes_per_sip(&self) -> u64 {
        self.sip.cube_mesh.cells()
    }

    /// Cubes in the machine.
    pub fn total_cubes(&self) -> u64 {
        u64::from(self.system.sips.count()) * self.cubes_per_sip()
    }

    /// PEs in the machine.
    pub fn total_pes(&self) -> u64 {
        self.total_cubes() * u64::from(self.cube.pes.get())
    }
}

/// `section.key`, or `section` when `key` is empty.
fn under(section: &str, key: &str) -> String {
    if key.is_empty() {
        section.to_owned()
    } else {
        format!("{section}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(n: u32) -> Count {
        Count::new(n).unwrap()
    }

    fn sips(n: u32, topology: ArrangementName, w: Option<u32>, h: Option<u32>) -> SipsParams {
        SipsParams {
            count: count(n),
            topology,
            w: w.map(count),
            h: h.map(count),
        }
    }

    fn default_spec() -> TopologySpec {
        TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()
    }

    #[test]
    fn default_machine_matches_the_research_table() {
        let spec = default_spec();
        assert_eq!(spec.system.sips.count(), 2);
        assert_eq!(spec.system.sips, SipArrangement::Ring { n: 2 });
        assert_eq!(spec.cubes_per_sip(), 16);
        assert_eq!(spec.total_pes(), 256);
        assert_eq!(spec.pe.clock.hz(), 1_000_000_000);
        assert_eq!(spec.pe.gemm.macs_per_cycle(), 16_384);
        assert_eq!(spec.cube.hbm.bandwidth().bytes_per_sec(), 819_200_000_000);
        assert_eq!(
            spec.sip.ucie.edge_bandwidth().bytes_per_sec(),
            1_024_000_000_000
        );
        assert_eq!(
            spec.cube.noc.link_bandwidth().bytes_per_sec(),
            64_000_000_000
        );
        assert_eq!(
            spec.system.host_link.bandwidth.bytes_per_sec(),
            63_000_000_000
        );
        assert_eq!(spec.pe.peak_flops(), 32_768_000_000_000);
    }

    #[test]
    fn ring_has_no_grid_and_rejects_one() {
        let ring = SipArrangement::new(sips(5, ArrangementName::Ring1d, None, None)).unwrap();
        assert_eq!(ring.grid(), None);
        let error =
            SipArrangement::new(sips(4, ArrangementName::Ring1d, Some(2), Some(2))).unwrap_err();
        assert_eq!(error.key(), "w");
    }

    #[test]
    fn explicit_grid_must_match_count() {
        let grid =
            SipArrangement::new(sips(6, ArrangementName::Torus2d, Some(3), Some(2))).unwrap();
        assert_eq!(grid.grid().unwrap().to_string(), "3x2");
        let error =
            SipArrangement::new(sips(6, ArrangementName::Torus2d, Some(4), Some(2))).unwrap_err();
        assert_eq!(
            error.to_string(),
            "sip layout 4x2 = 8 != sips.count 6 (w=4, h=2)"
        );
        assert_eq!(error.key(), "");
        let half =
            SipArrangement::new(sips(6, ArrangementName::Mesh2dNoWrap, None, Some(2))).unwrap_err();
        assert_eq!(half.key(), "h");
    }

    #[test]
    fn square_count_falls_back_to_sqrt() {
        let square =
            SipArrangement::new(sips(9, ArrangementName::Mesh2dNoWrap, None, None)).unwrap();
        assert_eq!(square.grid().unwrap().to_string(), "3x3");
        let one = SipArrangement::new(sips(1, ArrangementName::Torus2d, None, None)).unwrap();
        assert_eq!(one.grid().unwrap().to_string(), "1x1");
        let error = SipArrangement::new(sips(6, ArrangementName::Torus2d, None, None)).unwrap_err();
        assert!(
            error.to_string().contains("set sips.w and sips.h"),
            "{error}"
        );
        assert_eq!(error.key(), "count");
    }

    #[test]
    fn hbm_rules_between_fields() {
        let params = *default_spec().cube.hbm;
        let odd = "48 B".parse().unwrap();
        let error = HbmSpec::new(HbmParams {
            interleave: odd,
            ..params
        })
        .unwrap_err();
        assert_eq!(error.key(), "interleave");
        let error = HbmSpec::new(HbmParams {
            capacity: "1000 B".parse().unwrap(),
            ..params
        })
        .unwrap_err();
        assert_eq!(error.key(), "capacity");
    }

    #[test]
    fn each_derived_rate_that_overflows_is_refused_with_its_key() {
        let spec = default_spec();
        let huge = count(u32::MAX);
        let ucie = UcieSpec::new(UcieParams {
            module_bandwidth: "18446744 TB/s".parse().unwrap(),
            modules_per_edge: huge,
            ..*spec.sip().ucie
        })
        .unwrap_err();
        assert_eq!(ucie.key(), "sip.ucie.module_bandwidth");
        assert!(
            ucie.to_string()
                .ends_with("overflows 64-bit bytes per second")
        );
        let gemm = GemmSpec {
            rows: huge,
            cols: huge,
        };
        let pe = PeSpec::new(PeParams {
            gemm,
            ..**spec.pe()
        })
        .unwrap_err();
        assert_eq!(pe.key(), "pe.clock");
        let hbm = HbmSpec::new(HbmParams {
            pc_bandwidth: "18446744 TB/s".parse().unwrap(),
            pseudo_channels: huge,
            ..*spec.cube().hbm
        });
        // 2^32 - 1 pseudo-channels are not whole interleave rounds of the
        // default capacity either; that rule is checked first.
        assert_eq!(hbm.unwrap_err().key(), "capacity");
    }

    #[test]
    fn a_changed_copy_is_checked_again() {
        let spec = default_spec();
        let cube = spec.cube().clone();
        let tiny = Grid {
            w: count(2),
            h: count(2),
        };
        let error = spec
            .clone()
            .with_cube(CubeSpec {
                noc: cube.noc.with_grid(Some(tiny)),
                ..cube.clone()
            })
            .unwrap_err();
        assert!(matches!(error, SpecError::Layout(_)), "{error:?}");
        assert_eq!(error.key(), "cube.noc.grid");
        let same = spec.clone().with_cube(cube).unwrap();
        assert_eq!(same, spec);
        let flow = spec.clone().with_fidelity(Fidelity::Flow);
        assert_eq!(flow.simulation().fidelity, Fidelity::Flow);
        assert_eq!(flow.cube(), spec.cube());
    }

    #[test]
    fn loader_places_a_spec_error_at_its_key() {
        let sets = [
            "sip.ucie.modules_per_edge=4294967295",
            "sip.ucie.module_bandwidth=18446744 TB/s",
        ];
        let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        let error = TopologySpec::load(&TopologySpec::default_source(), &overrides)
            .unwrap_err()
            .to_string();
        assert!(error.contains("sip.ucie.module_bandwidth"), "{error}");
        assert!(
            error.contains("overflows 64-bit bytes per second"),
            "{error}"
        );
    }
}
