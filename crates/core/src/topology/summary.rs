//! `TopologySummary`: the readable overview of a [`TopologySpec`] that
//! `kernbench topo` prints (and `topo --json` serializes): the shape,
//! memories, links and compute of the machine, quantities with their units.
//!
//! It reads the spec only; it knows nothing of the compiled graph, latency
//! models or collectives.

use std::fmt;

use serde::Serialize;

use super::spec::{LinkSpec, MemorySpec, PeSpec, TopologySpec};
use crate::config::units::{NonZeroSize, fmt_si};

impl TopologySpec {
    /// A readable overview of the machine (see [`TopologySummary`]).
    pub fn summary(&self) -> TopologySummary {
        TopologySummary::of(self)
    }
}

/// What `kernbench topo` prints: the shape, memories, links and compute of
/// the machine, quantities rendered with their units. Serializes to the
/// JSON of `topo --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopologySummary {
    /// Number of SIPs.
    pub sips: u32,
    /// `ring_1d`, `torus_2d` or `mesh_2d_no_wrap`.
    pub sip_topology: String,
    /// The SIP grid (`2x3`) of a 2-D topology.
    pub sip_grid: Option<String>,
    /// The cube mesh of one SIP (`4x4`).
    pub cube_mesh: String,
    /// Cubes in one SIP.
    pub cubes_per_sip: u64,
    /// PEs in one cube.
    pub pes_per_cube: u32,
    /// Cubes in the machine.
    pub total_cubes: u64,
    /// PEs in the machine.
    pub total_pes: u64,
    /// One PE's engines.
    pub compute: ComputeSummary,
    /// HBM, SRAM, TCM.
    pub memories: Vec<MemorySummary>,
    /// PCIe, inter-SIP, UCIe, NoC, HBM pseudo-channel.
    pub links: Vec<LinkSummary>,
}

/// One PE's engines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeSummary {
    /// PE clock.
    pub clock: String,
    /// GEMM array shape (`128x128`).
    pub gemm_array: String,
    /// GEMM MACs per cycle.
    pub gemm_macs_per_cycle: u64,
    /// Peak GEMM rate.
    pub gemm_peak: String,
    /// Math engine elements per cycle.
    pub math_elements_per_cycle: u32,
}

/// One level of memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemorySummary {
    /// `HBM`, `SRAM`, `TCM`.
    pub name: String,
    /// `cube` or `PE`.
    pub per: String,
    /// Capacity of one instance.
    pub size: String,
    /// Capacity summed over the machine.
    pub total: String,
    /// Access rate of one instance.
    pub bandwidth: String,
    /// Time of one access.
    pub latency: String,
    /// Further detail (pseudo-channels, interleave).
    pub detail: String,
}

/// One kind of link, per direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkSummary {
    /// What the link joins.
    pub name: String,
    /// Raw rate.
    pub bandwidth: String,
    /// Share of the raw rate achieved.
    pub efficiency: String,
    /// Crossing time.
    pub latency: String,
    /// Largest packet payload.
    pub max_payload: String,
    /// Further detail.
    pub detail: String,
}

impl TopologySummary {
    fn of(spec: &TopologySpec) -> Self {
        let sips = spec.system().sips;
        TopologySummary {
            sips: sips.count(),
            sip_topology: sips.name().to_string(),
            sip_grid: sips.grid().map(|grid| grid.to_string()),
            cube_mesh: spec.sip().cube_mesh.to_string(),
            cubes_per_sip: spec.cubes_per_sip(),
            pes_per_cube: spec.cube().pes.get(),
            total_cubes: spec.total_cubes(),
            total_pes: spec.total_pes(),
            compute: ComputeSummary::of(spec.pe()),
            memories: MemorySummary::all(spec),
            links: LinkSummary::all(spec),
        }
    }
}

impl ComputeSummary {
    fn of(pe: &PeSpec) -> Self {
        ComputeSummary {
            clock: pe.clock.to_string(),
            gemm_array: format!("{}x{}", pe.gemm.rows, pe.gemm.cols),
            gemm_macs_per_cycle: pe.gemm.macs_per_cycle(),
            gemm_peak: fmt_si(pe.peak_flops(), "FLOP/s"),
            math_elements_per_cycle: pe.math.elements_per_cycle.get(),
        }
    }
}

/// `size × n` for a total, or `overflow` if it does not fit in 64 bits.
fn total(size: NonZeroSize, n: u64) -> String {
    size.get()
        .checked_mul(n)
        .map_or_else(|| "overflow".to_owned(), |total| total.to_string())
}

impl MemorySummary {
    fn all(spec: &TopologySpec) -> Vec<Self> {
        let hbm = &spec.cube().hbm;
        let (sram, tcm) = (&spec.cube().sram, &spec.pe().tcm);
        vec![
            MemorySummary {
                name: "HBM".into(),
                per: "cube".into(),
                size: hbm.capacity.to_string(),
                total: total(hbm.capacity, spec.total_cubes()),
                bandwidth: hbm.bandwidth().to_string(),
                latency: hbm.access_latency.to_string(),
                detail: format!(
                    "{} pseudo-channels x {}, {} interleave, + {} controller",
                    hbm.pseudo_channels, hbm.pc_bandwidth, hbm.interleave, hbm.controller_latency
                ),
            },
            MemorySummary::plain("SRAM", "cube", sram, spec.total_cubes()),
            MemorySummary::plain("TCM", "PE", tcm, spec.total_pes()),
        ]
    }

    fn plain(name: &str, per: &str, memory: &MemorySpec, instances: u64) -> Self {
        MemorySummary {
            name: name.into(),
            per: per.into(),
            size: memory.capacity.to_string(),
            total: total(memory.capacity, instances),
            bandwidth: memory.bandwidth.to_string(),
            latency: memory.latency.to_string(),
            detail: String::new(),
        }
    }
}

impl LinkSummary {
    fn all(spec: &TopologySpec) -> Vec<Self> {
        let (ucie, noc, hbm) = (&spec.sip().ucie, &spec.cube().noc, &spec.cube().hbm);
        let noc_hop = noc
            .clock
            .cycles(u64::from(noc.hop_cycles))
            .map_or_else(|_| "overflow".to_owned(), |hop| hop.to_string());
        vec![
            LinkSummary::of("PCIe host link", &spec.system().host_link),
            LinkSummary::of("inter-SIP", &spec.system().inter_sip),
            LinkSummary {
                name: "UCIe cube edge".into(),
                bandwidth: ucie.edge_bandwidth().to_string(),
                efficiency: ucie.efficiency.to_string(),
                latency: ucie.latency.to_string(),
                max_payload: ucie.max_payload.to_string(),
                detail: format!(
                    "{} modules x {}, + {} bridge per side",
                    ucie.modules_per_edge, ucie.module_bandwidth, ucie.bridge_latency
                ),
            },
            LinkSummary {
                name: "NoC link".into(),
                bandwidth: noc.link_bandwidth().to_string(),
                efficiency: noc.efficiency.to_string(),
                latency: noc_hop,
                max_payload: noc.max_payload.to_string(),
                detail: format!(
                    "{} planes, {} cycles per hop at {}, {} VCs",
                    noc.planes, noc.hop_cycles, noc.clock, noc.virtual_channels
                ),
            },
            LinkSummary {
                name: "HBM pseudo-channel".into(),
                bandwidth: hbm.pc_bandwidth.to_string(),
                efficiency: "1".into(),
                latency: hbm.access_latency.to_string(),
                max_payload: hbm.burst.to_string(),
                detail: format!("{} per cube", hbm.pseudo_channels),
            },
        ]
    }

    fn of(name: &str, link: &LinkSpec) -> Self {
        LinkSummary {
            name: name.into(),
            bandwidth: link.bandwidth.to_string(),
            efficiency: link.efficiency.to_string(),
            latency: link.latency.to_string(),
            max_payload: link.max_payload.to_string(),
            detail: format!("+ {} per packet", link.packet_overhead),
        }
    }
}

impl fmt::Display for TopologySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let grid = self
            .sip_grid
            .as_ref()
            .map(|g| format!(", {g} grid"))
            .unwrap_or_default();
        writeln!(
            f,
            "SIPs           {} ({}{grid})",
            self.sips, self.sip_topology
        )?;
        writeln!(
            f,
            "cubes per SIP  {} ({} mesh)",
            self.cubes_per_sip, self.cube_mesh
        )?;
        writeln!(f, "PEs per cube   {}", self.pes_per_cube)?;
        writeln!(
            f,
            "total          {} cubes, {} PEs",
            self.total_cubes, self.total_pes
        )?;
        writeln!(f)?;
        self.compute.fmt(f)?;
        writeln!(f)?;
        writeln!(
            f,
            "{:<21} {:>9} {:>10} {:>11} {:>8}  detail",
            "memory", "size", "total", "bandwidth", "latency"
        )?;
        for memory in &self.memories {
            memory.fmt(f)?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<21} {:>11} {:>5} {:>8} {:>8}  detail",
            "link (per direction)", "bandwidth", "eff", "latency", "payload"
        )?;
        for link in &self.links {
            link.fmt(f)?;
        }
        Ok(())
    }
}

impl fmt::Display for ComputeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "PE clock       {}", self.clock)?;
        writeln!(
            f,
            "PE GEMM        {} array, {} MAC/cycle, peak {}",
            self.gemm_array, self.gemm_macs_per_cycle, self.gemm_peak
        )?;
        writeln!(
            f,
            "PE math        {} elements/cycle",
            self.math_elements_per_cycle
        )
    }
}

impl fmt::Display for MemorySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = format!("{} per {}", self.name, self.per);
        let line = format!(
            "{name:<21} {:>9} {:>10} {:>11} {:>8}  {}",
            self.size, self.total, self.bandwidth, self.latency, self.detail
        );
        writeln!(f, "{}", line.trim_end())
    }
}

impl fmt::Display for LinkSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = format!(
            "{:<21} {:>11} {:>5} {:>8} {:>8}  {}",
            self.name, self.bandwidth, self.efficiency, self.latency, self.max_payload, self.detail
        );
        writeln!(f, "{}", line.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_spec() -> TopologySpec {
        TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()
    }

    #[test]
    fn summary_counts_and_units() {
        let summary = default_spec().summary();
        assert_eq!(summary.total_pes, 256);
        assert_eq!(summary.memories[0].total, "512 GiB");
        assert_eq!(summary.memories[0].bandwidth, "819.2 GB/s");
        assert_eq!(summary.links[0].bandwidth, "63 GB/s");
        assert_eq!(summary.links[3].latency, "9 ns");
        let text = summary.to_string();
        assert!(text.contains("SIPs           2 (ring_1d)"), "{text}");
        assert!(text.contains("32.768 TFLOP/s"), "{text}");
        assert!(text.contains("16 GiB"), "{text}");
    }
}
