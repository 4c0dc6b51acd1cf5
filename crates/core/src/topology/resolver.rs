//! [`AddressResolver`] (seed ADR-0051): which node holds an address, and the
//! SIP-level nodes a launch or a copy starts from.
//!
//! It combines the address map (`address`) with the compiled machine; it
//! knows nothing of routes or time.

use std::sync::Arc;

use super::address::MemSpace;
use super::machine::{Machine, NodeId};
use super::naming;
use super::routing::RouteError;

/// Where an address lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// The memory.
    pub space: MemSpace,
    /// The offset within it.
    pub offset: u64,
    /// The node that holds it (host, HBM controller, SRAM or TCM).
    pub node: NodeId,
}

/// Resolves addresses and SIP-level nodes of one machine.
#[derive(Debug, Clone)]
pub struct AddressResolver {
    machine: Arc<Machine>,
}

impl AddressResolver {
    /// A resolver over `machine`.
    pub fn new(machine: Arc<Machine>) -> AddressResolver {
        AddressResolver { machine }
    }

    /// The memory, offset and node of `addr`.
    pub fn resolve(&self, addr: u64) -> Result<Resolved, RouteError> {
        let (space, offset) = self.machine.address_map().decode(addr)?;
        Ok(Resolved {
            space,
            offset,
            node: self.memory_node(space)?,
        })
    }

    /// The node that holds `space`.
    pub fn memory_node(&self, space: MemSpace) -> Result<NodeId, RouteError> {
        let machine = &self.machine;
        let node = match space {
            MemSpace::Host => Some(machine.host()),
            MemSpace::Hbm { sip, cube } => machine.hbm(sip, cube),
            MemSpace::Sram { sip, cube } => machine.sram(sip, cube),
            MemSpace::Tcm { sip, cube, pe } => machine.tcm(sip, cube, pe),
        };
        node.ok_or_else(|| RouteError::UnknownNode(space.node_name()))
    }

    /// The M_CPU of cube `cube` of SIP `sip`.
    pub fn find_m_cpu(&self, sip: u32, cube: u32) -> Result<NodeId, RouteError> {
        self.machine
            .mcpu(sip, cube)
            .ok_or_else(|| RouteError::UnknownNode(naming::mcpu(sip, cube)))
    }

    /// SIP `sip`'s PCIe endpoint.
    pub fn find_pcie_ep(&self, sip: u32) -> Result<NodeId, RouteError> {
        self.machine
            .pcie_ep(sip)
            .ok_or_else(|| RouteError::UnknownNode(naming::pcie_ep(sip)))
    }

    /// SIP `sip`'s IO_CPU.
    pub fn find_io_cpu(&self, sip: u32) -> Result<NodeId, RouteError> {
        self.machine
            .io_cpu(sip)
            .ok_or_else(|| RouteError::UnknownNode(naming::io_cpu(sip)))
    }

    /// Every SIP's PCIe endpoint, SIP 0 first.
    pub fn find_all_pcie_eps(&self) -> Vec<NodeId> {
        (0..self.machine.sip_count())
            .filter_map(|sip| self.machine.pcie_ep(sip))
            .collect()
    }
}
