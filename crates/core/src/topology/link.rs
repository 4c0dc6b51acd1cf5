//! The parameters of one hop, per direction, and which spec values each
//! kind of hop takes them from.
//!
//! This module owns the mapping spec → [`LinkParams`] (one table in
//! `docs/topology.md`). It does not say how a hop is timed: that is the
//! latency model's business (`hw`), which reads these numbers.

use serde::Serialize;

use super::spec::TopologySpec;
use crate::config::units::{Bandwidth, Fraction, NonZeroSize, Size};
use crate::sim::{SimDuration, TimeError};

/// The parameters of one directed hop, as the spec gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkParams {
    /// Raw line rate.
    pub bandwidth: Bandwidth,
    /// Share of the raw rate left for packets.
    pub efficiency: Fraction,
    /// Time for a packet's first flit to cross the hop.
    pub latency: SimDuration,
    /// Largest payload of one packet on this hop.
    pub max_payload: NonZeroSize,
    /// Header and framing bytes added to every packet.
    pub packet_overhead: Size,
}

impl LinkParams {
    /// `bandwidth × efficiency`.
    pub fn effective_bandwidth(&self) -> Bandwidth {
        self.efficiency.of(self.bandwidth)
    }

    /// The figures as JSON-friendly values (bytes per second, picoseconds,
    /// parts per million, bytes) with readable forms beside them.
    pub fn figures(&self) -> LinkFigures {
        LinkFigures {
            bandwidth: self.bandwidth.to_string(),
            bandwidth_bytes_per_sec: self.bandwidth.bytes_per_sec(),
            efficiency: self.efficiency.to_string(),
            latency: self.latency.to_string(),
            latency_ps: self.latency.as_ps(),
            max_payload_bytes: self.max_payload.get().bytes(),
            packet_overhead_bytes: self.packet_overhead.bytes(),
        }
    }
}

/// [`LinkParams`] as plain numbers for JSON output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkFigures {
    /// Raw rate, e.g. `64 GB/s`.
    pub bandwidth: String,
    /// Raw rate in bytes per second.
    pub bandwidth_bytes_per_sec: u64,
    /// Efficiency, e.g. `0.9`.
    pub efficiency: String,
    /// First-flit latency, e.g. `9 ns`.
    pub latency: String,
    /// First-flit latency in picoseconds.
    pub latency_ps: u64,
    /// Largest payload in bytes.
    pub max_payload_bytes: u64,
    /// Per-packet overhead in bytes.
    pub packet_overhead_bytes: u64,
}

/// A hop's time that does not fit in 64-bit picoseconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {source}")]
pub struct LinkError {
    /// The spec key whose value overflows.
    pub key: &'static str,
    /// The overflow.
    pub source: TimeError,
}

/// The parameters of every kind of hop of one machine, and of each
/// degraded link (`faults.links`, ADR-0106).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkCatalog {
    /// Router to neighbouring router: one NoC link, `hop_cycles`.
    pub noc_hop: LinkParams,
    /// Endpoint (PE, SRAM, M_CPU, M_CPU.DMA, IO_CPU, PCIe endpoint,
    /// inter-SIP port) or HBM controller to its router: one NoC link,
    /// `inject_eject_cycles`. Also the management bus.
    pub noc_attach: LinkParams,
    /// PE to its TCM: the TCM's bandwidth, no latency of its own (the
    /// TCM's access latency belongs to the memory model).
    pub tcm_port: LinkParams,
    /// Router to a UCIe port: the NoC-to-UCIe bridge of that side, at the
    /// edge's rate, `bridge_latency`, no efficiency loss (flit overhead is
    /// on the UCIe hop).
    pub ucie_bridge: LinkParams,
    /// UCIe port to the neighbouring cube's port: all modules of the edge.
    pub ucie: LinkParams,
    /// Inter-SIP port to the neighbouring SIP's port.
    pub inter_sip: LinkParams,
    /// Host to a SIP's PCIe endpoint.
    pub pcie: LinkParams,
    /// The distinct parameters of degraded edges ([`LinkRole::Derated`]),
    /// in the order first met; empty for a healthy machine.
    derated: Vec<LinkParams>,
}

/// How many distinct sets of degraded link parameters a machine may have
/// ([`LinkRole::Derated`] numbers them in one byte).
pub const MAX_DERATED: usize = 256;

/// Which entry of the [`LinkCatalog`] times an edge: a machine has these
/// seven kinds of hop parameters, and a degraded machine up to
/// `MAX_DERATED` more, so an edge names its entry in two bytes instead
/// of carrying the parameters (ADR-0050 D3, ADR-0106).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkRole {
    /// [`LinkCatalog::noc_hop`].
    NocHop,
    /// [`LinkCatalog::noc_attach`].
    NocAttach,
    /// [`LinkCatalog::tcm_port`].
    TcmPort,
    /// [`LinkCatalog::ucie_bridge`].
    UcieBridge,
    /// [`LinkCatalog::ucie`].
    Ucie,
    /// [`LinkCatalog::inter_sip`].
    InterSip,
    /// [`LinkCatalog::pcie`].
    Pcie,
    /// The `n`-th degraded parameters of the machine's catalog.
    Derated(u8),
}

impl LinkCatalog {
    /// The parameters of `role`.
    pub fn params(&self, role: LinkRole) -> &LinkParams {
        match role {
            LinkRole::NocHop => &self.noc_hop,
            LinkRole::NocAttach => &self.noc_attach,
            LinkRole::TcmPort => &self.tcm_port,
            LinkRole::UcieBridge => &self.ucie_bridge,
            LinkRole::Ucie => &self.ucie,
            LinkRole::InterSip => &self.inter_sip,
            LinkRole::Pcie => &self.pcie,
            LinkRole::Derated(n) => &self.derated[usize::from(n)],
        }
    }

    /// The role of degraded parameters `params`: an earlier one's if equal,
    /// else a new one; `None` beyond [`MAX_DERATED`] distinct sets.
    pub(crate) fn derated_role(&mut self, params: LinkParams) -> Option<LinkRole> {
        let n = match self.derated.iter().position(|p| *p == params) {
            Some(n) => n,
            None => {
                self.derated.push(params);
                self.derated.len() - 1
            }
        };
        u8::try_from(n).ok().map(LinkRole::Derated)
    }

    /// The hop parameters of `spec`'s machine.
    pub fn new(spec: &TopologySpec) -> Result<LinkCatalog, LinkError> {
        let (noc, ucie) = (&spec.cube().noc, &spec.sip().ucie);
        let cycles = |n: u32, key| {
            noc.clock
                .cycles(u64::from(n))
                .map_err(|source| LinkError { key, source })
        };
        let noc_link = |latency| LinkParams {
            bandwidth: noc.link_bandwidth(),
            efficiency: noc.efficiency,
            latency,
            max_payload: noc.max_payload,
            packet_overhead: Size::default(),
        };
        let whole = Fraction::from_ppm(Fraction::PPM_PER_ONE).unwrap_or(noc.efficiency);
        let from_spec = |link: &super::spec::LinkSpec| LinkParams {
            bandwidth: link.bandwidth,
            efficiency: link.efficiency,
            latency: link.latency,
            max_payload: link.max_payload,
            packet_overhead: link.packet_overhead,
        };
        Ok(LinkCatalog {
            noc_hop: noc_link(cycles(noc.hop_cycles, "cube.noc.hop_cycles")?),
            noc_attach: noc_link(cycles(
                noc.inject_eject_cycles,
                "cube.noc.inject_eject_cycles",
            )?),
            tcm_port: LinkParams {
                bandwidth: spec.pe().tcm.bandwidth,
                efficiency: whole,
                latency: SimDuration::ZERO,
                max_payload: noc.max_payload,
                packet_overhead: Size::default(),
            },
            ucie_bridge: LinkParams {
                bandwidth: ucie.edge_bandwidth(),
                efficiency: whole,
                latency: ucie.bridge_latency,
                max_payload: ucie.max_payload,
                packet_overhead: Size::default(),
            },
            ucie: LinkParams {
                bandwidth: ucie.edge_bandwidth(),
                efficiency: ucie.efficiency,
                latency: ucie.latency,
                max_payload: ucie.max_payload,
                packet_overhead: Size::default(),
            },
            inter_sip: from_spec(&spec.system().inter_sip),
            pcie: from_spec(&spec.system().host_link),
            derated: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_hops_take_the_spec_values() {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        let links = LinkCatalog::new(&spec).unwrap();
        assert_eq!(links.noc_hop.latency, SimDuration::from_ns(9));
        assert_eq!(links.noc_attach.latency, SimDuration::from_ns(5));
        assert_eq!(links.noc_hop.bandwidth.bytes_per_sec(), 64_000_000_000);
        assert_eq!(
            links.noc_hop.effective_bandwidth().bytes_per_sec(),
            57_600_000_000
        );
        assert_eq!(links.ucie.bandwidth.bytes_per_sec(), 1_024_000_000_000);
        assert_eq!(links.ucie_bridge.latency, SimDuration::from_ns(5));
        assert_eq!(links.pcie.packet_overhead.bytes(), 24);
        assert_eq!(links.inter_sip.latency, SimDuration::from_ns(500));
    }
}
