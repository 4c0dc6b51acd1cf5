//! Installing IPCQ networks (seed author guide §1 "install_ipcq",
//! seed ADR-0032 D3): an algorithm's [`Endpoints`] (tables already edited by
//! its `neighbors` hook) → [`Wiring`] → one ring per (sender, direction)
//! on a [`Device`], slots allocated in the configured [`BufferKind`]
//! memory of each receiving PE.
//!
//! Knows endpoints, tables, the device and `tl::ipcq`; nothing of algorithms'
//! kernels, the process group or torch.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::device::{Device, DeviceError};
use crate::tl::{IpcqError, IpcqNetwork, IpcqParams, PeCoord, RingSpec, ipcq::ConnectError};
use crate::topology::{MemSpace, TopologySpec};

use super::BufferKind;
use super::endpoints::Endpoints;
use super::topology::{TopologyError, Wiring};

/// Why a network could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The tables cannot be built or wired.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// An endpoint with no PE in the endpoint map.
    #[error("endpoint {endpoint} has no PE: the endpoint map covers {mapped} endpoints")]
    Unmapped {
        /// The endpoint.
        endpoint: usize,
        /// Endpoints the map covers.
        mapped: usize,
    },
    /// A ring that cannot be installed.
    #[error(transparent)]
    Ipcq(#[from] IpcqError),
    /// Routes that do not exist, and other device failures.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A ring's slots do not fit what is left of their memory.
    #[error(
        "the slots of IPCQ ring {ring} ({slots} x {stride} B, sized by ccl.yaml ipcq.slots and \
         ipcq.slot_size, placed by buffer_kind) cannot be allocated: {source}"
    )]
    Slots {
        /// `receiver:label`.
        ring: String,
        /// `ipcq.slots`.
        slots: usize,
        /// One slot's bytes, padded to the allocation granule.
        stride: u64,
        /// The allocation failure.
        source: DeviceError,
    },
}

/// The receive rings of one memory need more bytes than it has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "IPCQ slots do not fit {space}: {rings} receive ring(s) x ipcq.slots {slots} x \
     ipcq.slot_size {slot_bytes} B (padded to {stride} B) = {needed} B, but it holds \
     {capacity} B ({capacity_key}): lower ipcq.slots or ipcq.slot_size, or choose a larger \
     buffer_kind (tcm, sram, hbm)"
)]
pub struct SlotsDoNotFit {
    /// The memory the slots live in.
    pub space: MemSpace,
    /// Rings received into it.
    pub rings: u64,
    /// `ipcq.slots`.
    pub slots: usize,
    /// `ipcq.slot_size` in bytes.
    pub slot_bytes: u64,
    /// One slot's bytes, padded to the allocation granule.
    pub stride: u64,
    /// All its rings' slots.
    pub needed: u128,
    /// The memory's capacity.
    pub capacity: u64,
    /// The topology.yaml key that sets it.
    pub capacity_key: &'static str,
}

/// The most bytes of IPCQ slots any one PE's TCM holds for the rings
/// `endpoints` receive (0 unless `buffer_kind` is TCM): what a kernel's
/// own TCM buffers share that memory with.
pub fn tcm_slot_bytes(endpoints: &Endpoints, buffer_kind: BufferKind, params: IpcqParams) -> u64 {
    if buffer_kind != BufferKind::Tcm {
        return 0;
    }
    let most = rings_by_space(endpoints, buffer_kind)
        .into_values()
        .max()
        .unwrap_or(0);
    most.saturating_mul(params.slot_stride())
        .saturating_mul(params.slots as u64)
}

/// How many receive rings of `endpoints` each memory holds.
fn rings_by_space(endpoints: &Endpoints, buffer_kind: BufferKind) -> BTreeMap<MemSpace, u64> {
    let mut rings = BTreeMap::new();
    for table in &endpoints.tables {
        for &peer in table.values() {
            if let Some(&receiver) = endpoints.coords.get(peer) {
                *rings.entry(slot_space(buffer_kind, receiver)).or_default() += 1;
            }
        }
    }
    rings
}

/// Checks, before anything is allocated, that every memory can hold the
/// slots of the rings `endpoints` receive into it (against an empty
/// memory, in the first-memory order of [`MemSpace`]).
pub fn check_slot_memory(
    spec: &TopologySpec,
    endpoints: &Endpoints,
    buffer_kind: BufferKind,
    params: IpcqParams,
) -> Result<(), SlotsDoNotFit> {
    let rings = rings_by_space(endpoints, buffer_kind);
    let stride = params.slot_stride();
    let ring_bytes = u128::from(stride) * params.slots as u128;
    let (capacity, capacity_key) = match buffer_kind {
        BufferKind::Tcm => (spec.pe().tcm.capacity, "pe.tcm.capacity"),
        BufferKind::Hbm => (spec.cube().hbm.capacity, "cube.hbm.capacity"),
        BufferKind::Sram => (spec.cube().sram.capacity, "cube.sram.capacity"),
    };
    let capacity = capacity.get().bytes();
    match rings
        .into_iter()
        .find(|&(_, n)| u128::from(n) * ring_bytes > u128::from(capacity))
    {
        Some((space, n)) => Err(SlotsDoNotFit {
            space,
            rings: n,
            slots: params.slots,
            slot_bytes: params.slot_bytes,
            stride,
            needed: u128::from(n) * ring_bytes,
            capacity,
            capacity_key,
        }),
        None => Ok(()),
    }
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

/// Installs every ring of `wiring` on `device`: endpoint `e` is the PE
/// `endpoint_to_pe[e]`; slots in `buffer_kind` memory, `params` for all.
pub fn install(
    device: &Device,
    wiring: &Wiring,
    endpoint_to_pe: &[PeCoord],
    buffer_kind: BufferKind,
    params: IpcqParams,
) -> Result<Rc<IpcqNetwork>, InstallError> {
    let pe = |endpoint: usize| {
        let mapped = endpoint_to_pe.len();
        endpoint_to_pe
            .get(endpoint)
            .copied()
            .ok_or(InstallError::Unmapped { endpoint, mapped })
    };
    let mut network = IpcqNetwork::new(params)?;
    for endpoint in 0..wiring.endpoints() {
        let sends = wiring
            .endpoint(endpoint)
            .map(|w| w.sends.iter())
            .into_iter();
        for (&send_dir, &(peer, label)) in sends.flatten() {
            let receiver = pe(peer)?;
            let space = slot_space(buffer_kind, receiver);
            let sender = pe(endpoint)?;
            let spec = RingSpec {
                sender,
                send_dir,
                receiver,
                label,
                space,
            };
            network.connect(device, spec).map_err(|error| match error {
                ConnectError::Device(source @ DeviceError::Alloc(_)) => InstallError::Slots {
                    ring: format!("{receiver}:{label}"),
                    slots: params.slots,
                    stride: params.slot_stride(),
                    source,
                },
                other => other.into(),
            })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::topology::Builtin;
    use crate::ccl::{CclConfig, WorldShape};
    use crate::config::Override;

    fn spec(sets: &[&str]) -> TopologySpec {
        let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        TopologySpec::load(&TopologySpec::default_source(), &sets).unwrap()
    }

    fn intercube(spec: &TopologySpec) -> Endpoints {
        let shape = WorldShape::new(spec, 2, Builtin::Ring1d, None).unwrap();
        Endpoints::intercube(&shape).unwrap()
    }

    #[test]
    fn slots_are_counted_per_receiving_memory() {
        // Intercube on a ring of 2 SIPs: every pe0 receives global_E and
        // global_W, plus one ring per mesh neighbour. Corner cube 0 (E, S)
        // has 4 rings of 4 slots of 64 KiB = 1 MiB, which fits a 1 MiB TCM;
        // edge cube 1 (E, W, S) has 5 = 1.25 MiB, the first that does not.
        let params = CclConfig::load(&CclConfig::default_source(), &[])
            .unwrap()
            .default_algorithm()
            .ipcq;
        let small = spec(&["pe.tcm.capacity=1 MiB"]);
        let error =
            check_slot_memory(&small, &intercube(&small), BufferKind::Tcm, params).unwrap_err();
        assert_eq!(error.space.to_string(), "sip0.cube1.pe0.tcm");
        assert_eq!((error.rings, error.needed), (5, 5 * 4 * 65_536));
        assert!(error.to_string().contains("(pe.tcm.capacity)"), "{error}");
        // An inner cube's 6 rings (1.5 MiB) fit 2 MiB; the SRAM holds them.
        let fits = spec(&["pe.tcm.capacity=2 MiB"]);
        assert!(check_slot_memory(&fits, &intercube(&fits), BufferKind::Tcm, params).is_ok());
        assert!(check_slot_memory(&small, &intercube(&small), BufferKind::Sram, params).is_ok());
        // Odd slot sizes are padded to the 64 B granule: 100 B takes 128 B,
        // so cube 0's 4 rings of 8192 slots need 4 MiB.
        let odd = IpcqParams {
            slots: 8192,
            slot_bytes: 100,
            ..params
        };
        let error =
            check_slot_memory(&small, &intercube(&small), BufferKind::Tcm, odd).unwrap_err();
        assert_eq!(error.space.to_string(), "sip0.cube0.pe0.tcm");
        assert_eq!((error.stride, error.needed), (128, 4 * 8192 * 128));
    }
}
