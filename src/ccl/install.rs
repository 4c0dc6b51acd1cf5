//! Installing IPCQ networks (seed author guide §1 "install_ipcq", seed
//! seed ADR-0032 D3): an algorithm's [`Endpoints`] (tables already edited by
//! its `neighbors` hook) → [`Wiring`] → one ring per (sender, direction)
//! on a [`Device`], slots allocated in the configured [`BufferKind`]
//! memory of each receiving PE.
//!
//! Knows ranks, tables, the device and `tl::ipcq`; nothing of algorithms'
//! kernels, the process group or torch.

use std::rc::Rc;

use crate::device::{Device, DeviceError};
use crate::tl::{IpcqError, IpcqNetwork, IpcqParams, PeCoord, RingSpec, ipcq::ConnectError};
use crate::topology::MemSpace;

use super::BufferKind;
use super::endpoints::Endpoints;
use super::topology::{TopologyError, Wiring};

/// Why a network could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The tables cannot be built or wired.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A rank with no PE in the rank map.
    #[error("rank {rank} has no PE: the rank map covers {mapped} ranks")]
    Unmapped {
        /// The rank.
        rank: usize,
        /// Ranks the map covers.
        mapped: usize,
    },
    /// A ring that cannot be installed.
    #[error(transparent)]
    Ipcq(#[from] IpcqError),
    /// Slots that cannot be allocated, routes that do not exist.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

impl From<ConnectError> for InstallError {
    fn from(error: ConnectError) -> Self {
        match error {
            ConnectError::Ipcq(e) => InstallError::Ipcq(e),
            ConnectError::Device(e) => InstallError::Device(e),
        }
    }
}

/// Where the slots of a ring received by `receiver` live.
pub fn slot_space(kind: BufferKind, receiver: PeCoord) -> MemSpace {
    let PeCoord { sip, cube, pe } = receiver;
    match kind {
        BufferKind::Tcm => MemSpace::Tcm { sip, cube, pe },
        BufferKind::Hbm => MemSpace::Hbm { sip, cube },
        BufferKind::Sram => MemSpace::Sram { sip, cube },
    }
}

/// Installs every ring of `wiring` on `device`: rank `r` is the PE
/// `rank_to_pe[r]`; slots in `buffer_kind` memory, `params` for all.
pub fn install(
    device: &Device,
    wiring: &Wiring,
    rank_to_pe: &[PeCoord],
    buffer_kind: BufferKind,
    params: IpcqParams,
) -> Result<Rc<IpcqNetwork>, InstallError> {
    let pe = |rank: usize| {
        let mapped = rank_to_pe.len();
        rank_to_pe
            .get(rank)
            .copied()
            .ok_or(InstallError::Unmapped { rank, mapped })
    };
    let mut network = IpcqNetwork::new(params)?;
    for rank in 0..wiring.world_size() {
        let sends = wiring.rank(rank).map(|r| r.sends.iter()).into_iter();
        for (&send_dir, &(peer, label)) in sends.flatten() {
            let receiver = pe(peer)?;
            let space = slot_space(buffer_kind, receiver);
            let sender = pe(rank)?;
            let spec = RingSpec {
                sender,
                send_dir,
                receiver,
                label,
                space,
            };
            network.connect(device, spec)?;
        }
    }
    Ok(Rc::new(network))
}

/// Installs `endpoints`' rings (derived by [`Wiring::install`]) on
/// `device`, slots in `buffer_kind` memory, `params` for all.
pub fn install_endpoints(
    device: &Device,
    endpoints: &Endpoints,
    buffer_kind: BufferKind,
    params: IpcqParams,
) -> Result<Rc<IpcqNetwork>, InstallError> {
    let wiring = Wiring::install(&endpoints.tables)?;
    install(device, &wiring, &endpoints.coords, buffer_kind, params)
}
