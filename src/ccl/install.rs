//! Installing IPCQ networks (author guide §1 "install_ipcq", ADR-0032 D3):
//! neighbour tables (builtin, optionally edited by an algorithm's
//! `neighbors` hook) → [`Wiring`] → one ring per (sender, direction) on a
//! [`Device`], slots allocated in the configured [`BufferKind`] memory of
//! each receiving PE.
//!
//! [`intercube_multisip`] builds the tables of ADR-0032 D3 over the
//! `sips × cubes` endpoints `(sip, cube, 0)`: `E/W/N/S` between the pe0s
//! of neighbouring cubes of a SIP's mesh (no wrap), and `global_E/W/N/S`
//! between cube `c`'s pe0 on neighbouring SIPs per `system.sips.topology`.
//!
//! Knows ranks, tables, the device and `tl::ipcq`; nothing of algorithms'
//! kernels, the process group or torch.

use std::rc::Rc;

use crate::device::{Device, DeviceError};
use crate::tl::{IpcqError, IpcqNetwork, IpcqParams, PeCoord, RingSpec, ipcq::ConnectError};
use crate::topology::{MemSpace, SipTopology, TopologySpec};

use super::BufferKind;
use super::topology::{Builtin, NeighborMap, TopologyError, Wiring};

/// An algorithm's `neighbors(rank, world_size, map)` hook: edits `map` in
/// place, or returns a replacement (`None` keeps the edited map).
pub type NeighborsHook = dyn Fn(usize, usize, &mut NeighborMap) -> Option<NeighborMap>;

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

/// The tables of `builtin` over `world_size` ranks (2-D on `grid`), each
/// passed through `hook` if given.
pub fn neighbor_tables(
    builtin: Builtin,
    world_size: usize,
    grid: Option<(usize, usize)>,
    hook: Option<&NeighborsHook>,
) -> Result<Vec<NeighborMap>, TopologyError> {
    let mut tables = builtin.tables(world_size, grid)?;
    if let Some(hook) = hook {
        for (rank, table) in tables.iter_mut().enumerate() {
            if let Some(replaced) = hook(rank, world_size, table) {
                *table = replaced;
            }
        }
    }
    Ok(tables)
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

/// ADR-0032 D3 tables and their endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntercubeTables {
    /// Rank `sip × cubes + cube`'s table.
    pub tables: Vec<NeighborMap>,
    /// Rank → `(sip, cube, 0)`.
    pub rank_to_pe: Vec<PeCoord>,
}

/// The intercube multi-SIP tables of `spec`'s machine (see the module
/// docs).
pub fn intercube_multisip(spec: &TopologySpec) -> Result<IntercubeTables, TopologyError> {
    let mesh = spec.sip.cube_mesh;
    let (w, h) = (mesh.w.get() as usize, mesh.h.get() as usize);
    let cubes = w * h;
    let cube_tables = Builtin::Mesh2dNoWrap.tables(cubes, Some((w, h)))?;
    let sips = spec.system.sips;
    let n_sips = sips.count().get() as usize;
    let sip_grid = sips
        .grid()
        .map(|g| (g.w.get() as usize, g.h.get() as usize));
    let sip_builtin = match sips.topology() {
        SipTopology::Ring1d => Builtin::Ring1d,
        SipTopology::Torus2d => Builtin::Torus2d,
        SipTopology::Mesh2dNoWrap => Builtin::Mesh2dNoWrap,
    };
    let sip_tables = sip_builtin.tables(n_sips, sip_grid)?;
    let mut tables = Vec::with_capacity(n_sips * cubes);
    for sip_table in &sip_tables {
        for cube_table in &cube_tables {
            let sip_of = tables.len() / cubes;
            let cube = tables.len() % cubes;
            let local = cube_table.iter().map(|(&d, &c)| (d, sip_of * cubes + c));
            let global = sip_table
                .iter()
                .map(|(&d, &s)| (d.global(), s * cubes + cube));
            tables.push(local.chain(global).collect());
        }
    }
    let rank_to_pe = (0..n_sips * cubes)
        .map(|rank| PeCoord {
            sip: (rank / cubes) as u32,
            cube: (rank % cubes) as u32,
            pe: 0,
        })
        .collect();
    Ok(IntercubeTables { tables, rank_to_pe })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Override;
    use crate::tl::Dir;

    fn spec(sets: &[&str]) -> TopologySpec {
        let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap()
    }

    #[test]
    fn intercube_ring_of_two_sips_links_same_cubes_globally() {
        let t = intercube_multisip(&spec(&[])).unwrap();
        assert_eq!(t.tables.len(), 32);
        let corner: Vec<_> = t.tables[0].iter().map(|(&d, &p)| (d, p)).collect();
        assert_eq!(
            corner,
            [
                (Dir::E, 1),
                (Dir::S, 4),
                (Dir::GlobalE, 16),
                (Dir::GlobalW, 16)
            ]
        );
        assert_eq!(t.tables[21][&Dir::GlobalW], 5);
        assert_eq!(
            t.rank_to_pe[21],
            PeCoord {
                sip: 1,
                cube: 5,
                pe: 0
            }
        );
        assert!(Wiring::install(&t.tables).is_ok());
    }

    #[test]
    fn torus_of_four_sips_has_all_global_directions() {
        let t = intercube_multisip(&spec(&[
            "system.sips.count=4",
            "system.sips.topology=torus_2d",
        ]))
        .unwrap();
        let globals = t.tables[16].keys().filter(|d| **d >= Dir::GlobalE).count();
        assert_eq!(globals, 4);
    }

    #[test]
    fn hooks_edit_or_replace_tables() {
        let drop_w: &NeighborsHook = &|rank, _, map| {
            if rank % 2 == 1 {
                map.remove(&Dir::W);
            }
            None
        };
        let tables = neighbor_tables(Builtin::Ring1d, 4, None, Some(drop_w)).unwrap();
        assert!(!tables[1].contains_key(&Dir::W) && tables[2].contains_key(&Dir::W));
        let skip: &NeighborsHook = &|rank, n, _| Some([(Dir::E, (rank + 2) % n)].into());
        let tables = neighbor_tables(Builtin::Ring1d, 4, None, Some(skip)).unwrap();
        assert_eq!(tables[3], [(Dir::E, 1)].into());
    }
}
