//! The collective-algorithm contract (seed ADR-0050 D1–D7 in Rust): what
//! one file in `algorithms/` implements so that `all_reduce` can run it.
//!
//! An algorithm is a [`CclAlgorithm`]: its PE [`kernel`](CclAlgorithm::kernel)
//! (an `async` function of a [`Tl`](crate::tl::Tl) and the standard
//! [`KernelArgs`]), the per-tensor scalar arguments it wants
//! ([`kernel_args`](CclAlgorithm::kernel_args), D2), the SIP topologies it
//! supports ([`topo_name_to_kind`](CclAlgorithm::topo_name_to_kind), D1/D5)
//! and, optionally, an edit of its neighbour tables
//! ([`neighbors`](CclAlgorithm::neighbors), author guide §3) or its own
//! IPCQ endpoints and tables ([`endpoints`](CclAlgorithm::endpoints), e.g.
//! the ADR-0032 intercube wiring).
//!
//! Endpoints: a collective runs one program on PE 0 of every cube of every
//! SIP ([`Endpoints::flat`]); endpoint `e = sip × cubes + cube` is the
//! "rank" the IPCQ tables speak of (D7's flat mode), while the process
//! group's rank stays the SIP (ADR-0024).
//!
//! Knows kernels, neighbour tables and shapes; nothing of torch or tensors.

use std::rc::Rc;

use crate::sim::SimDuration;
use crate::tl::{Grid, Kernel, KernelError, PeCoord, TensorHandle, Tl};
use crate::topology::{SipTopology, TopologySpec};

use super::cost::{CostError, Network};
use super::install::{IntercubeTables, intercube_multisip};
use super::topology::{Builtin, NeighborMap, TopologyError};

/// `sip_topo_kind` of a ring of SIPs (ADR-0032 D4).
pub const SIP_TOPO_RING: u32 = 0;
/// `sip_topo_kind` of a 2-D torus of SIPs.
pub const SIP_TOPO_TORUS: u32 = 1;
/// `sip_topo_kind` of a 2-D mesh of SIPs without wrap.
pub const SIP_TOPO_MESH: u32 = 2;

/// The usual topology name → kind map (D1's `TOPO_NAME_TO_KIND`).
pub const TOPO_NAME_TO_KIND: &[(&str, u32)] = &[
    ("ring_1d", SIP_TOPO_RING),
    ("torus_2d", SIP_TOPO_TORUS),
    ("mesh_2d_no_wrap", SIP_TOPO_MESH),
];

/// The per-tensor scalars [`CclAlgorithm::kernel_args`] returns (D2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileArgs {
    /// Elements per cube tile (f16).
    pub n_elem: usize,
    /// Cube-mesh width (1 on a single-cube machine).
    pub cube_w: u32,
    /// Cube-mesh height (1 on a single-cube machine).
    pub cube_h: u32,
    /// SIPs taking part (= world size, rank = SIP).
    pub n_sips: u32,
}

/// The standard kernel arguments (D3): the tensor, [`TileArgs`] and the
/// four trailing SIP values the process group appends (ADR-0047 D5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelArgs {
    /// Virtual address of the tensor's first byte on this SIP.
    pub t_ptr: u64,
    /// Device address of each cube's tile, by cube index (the translation
    /// of `t_ptr + cube × n_elem × 2`; PE DMAs take device addresses).
    pub tiles: Rc<[u64]>,
    /// Elements per tile, cube mesh and SIP count.
    pub tile: TileArgs,
    /// This SIP's rank.
    pub sip_rank: u32,
    /// [`SIP_TOPO_RING`], [`SIP_TOPO_TORUS`] or [`SIP_TOPO_MESH`].
    pub sip_topo_kind: u32,
    /// SIP grid width (0 for a ring).
    pub sip_topo_w: u32,
    /// SIP grid height (0 for a ring).
    pub sip_topo_h: u32,
}

impl KernelArgs {
    /// The device address of `cube`'s tile.
    pub fn tile_addr(&self, cube: u32) -> Result<u64, KernelError> {
        self.tiles.get(cube as usize).copied().ok_or_else(|| {
            let tiles = self.tiles.len();
            KernelError::failed(format!(
                "the tensor has {tiles} cube tiles, none for cube {cube}"
            ))
        })
    }

    /// Cubes per SIP.
    pub fn cubes(&self) -> u32 {
        self.tile.cube_w * self.tile.cube_h
    }

    /// The flat endpoint index of `cube` on this SIP
    /// (`sip_rank × cubes + cube`).
    pub fn endpoint(&self, cube: u32) -> usize {
        (self.sip_rank * self.cubes() + cube) as usize
    }

    /// Endpoints in the whole collective (`n_sips × cubes`).
    pub fn endpoints(&self) -> usize {
        (self.tile.n_sips * self.cubes()) as usize
    }
}

/// The shape of the collective's world: what tables are built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorldShape {
    /// SIPs (= ranks).
    pub n_sips: u32,
    /// Cube-mesh width and height the kernel sees.
    pub cube_w: u32,
    /// See `cube_w`.
    pub cube_h: u32,
    /// How the SIPs are connected.
    pub sip_topology: SipTopology,
    /// The SIP grid `(w, h)` of a 2-D topology.
    pub sip_grid: Option<(u32, u32)>,
    /// The ccl.yaml `topology` of the algorithm entry.
    pub builtin: Builtin,
}

/// IPCQ endpoints (one PE each) and their neighbour tables, by endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// Where endpoint `e` runs.
    pub coords: Vec<PeCoord>,
    /// Endpoint `e`'s table (peers are endpoint indices).
    pub tables: Vec<NeighborMap>,
}

impl Endpoints {
    /// PE 0 of every cube of every SIP, SIP-major, with `shape.builtin`'s
    /// table over all of them (a ring of `n_sips × cubes` for `ring_1d`).
    pub fn flat(shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        let coords = pe0_coords(shape);
        let tables = shape.builtin.tables(coords.len(), None)?;
        Ok(Endpoints { coords, tables })
    }

    /// ADR-0032 D3's intercube tables of `spec`'s machine
    /// ([`intercube_multisip`]): N/S/E/W between the cube-mesh neighbours'
    /// PE 0 (no wrap), `global_*` to the same cube on the peer SIPs.
    pub fn intercube(spec: &TopologySpec) -> Result<Endpoints, TopologyError> {
        let IntercubeTables { tables, rank_to_pe } = intercube_multisip(spec)?;
        Ok(Endpoints {
            coords: rank_to_pe,
            tables,
        })
    }
}

/// PE 0 of every cube of every SIP, SIP-major.
fn pe0_coords(shape: &WorldShape) -> Vec<PeCoord> {
    let cubes = shape.cube_w * shape.cube_h;
    (0..shape.n_sips)
        .flat_map(|sip| (0..cubes).map(move |cube| PeCoord { sip, cube, pe: 0 }))
        .collect()
}

/// A collective algorithm: one file in `algorithms/` (see the module docs
/// and `docs/algorithm-author-guide.md`).
pub trait CclAlgorithm {
    /// The PE program every endpoint runs.
    fn kernel(&self) -> Kernel<KernelArgs, ()>;

    /// The per-tensor scalars (D2); the default is the standard
    /// `(n_elem, cube_w, cube_h, n_sips = world_size)`.
    fn kernel_args(&self, world_size: usize, n_elem: usize, cube_w: u32, cube_h: u32) -> TileArgs {
        TileArgs {
            n_elem,
            cube_w,
            cube_h,
            n_sips: world_size as u32,
        }
    }

    /// SIP topology name → `sip_topo_kind` (D1); empty (the default) means
    /// the algorithm ignores the SIP topology and gets kind 0.
    fn topo_name_to_kind(&self) -> &'static [(&'static str, u32)] {
        &[]
    }

    /// Edits endpoint `rank`'s builtin table `map` (author guide §3):
    /// return a new table, or edit `map` in place and return `None`.
    fn neighbors(
        &self,
        _rank: usize,
        _world_size: usize,
        _map: &mut NeighborMap,
    ) -> Option<NeighborMap> {
        None
    }

    /// The IPCQ endpoints and tables on the machine of `spec`, before
    /// [`neighbors`](Self::neighbors) is applied; the default is
    /// [`Endpoints::flat`].
    fn endpoints(
        &self,
        shape: &WorldShape,
        _spec: &TopologySpec,
    ) -> Result<Endpoints, TopologyError> {
        Endpoints::flat(shape)
    }

    /// The α-β (Hockney) cost of one collective with `args` (any rank's)
    /// over the endpoints of `net` ([`super::cost`]): a documented lower
    /// bound of the simulated time. `None` (the default): the algorithm
    /// states no model.
    fn model(&self, _args: &KernelArgs, _net: &Network) -> Result<Option<SimDuration>, CostError> {
        Ok(None)
    }

    /// The launch grid on each SIP; the default is PE 0 of every cube.
    fn grid(&self, cube_w: u32, cube_h: u32) -> Grid {
        Grid {
            pes: 1,
            cubes: cube_w * cube_h,
        }
    }
}

/// `acc += received` on PE_MATH, for a received IPCQ slot in any buffer
/// kind: a slot outside this PE's TCM (ccl.yaml `buffer_kind: hbm | sram`)
/// is first loaded into TCM scratch with PE_DMA, which is freed after.
pub async fn add_received(
    tl: &Tl,
    acc: &TensorHandle,
    received: &TensorHandle,
) -> Result<(), KernelError> {
    if received.space() == tl.tcm() {
        return tl.add_assign(acc, received).await;
    }
    let local = tl
        .load(received, received.shape(), received.dtype())
        .await?;
    tl.add_assign(acc, &local).await?;
    tl.free(&local)
}

/// `algorithm`'s endpoints with its `neighbors` hook applied to every table.
pub fn wired_endpoints(
    algorithm: &dyn CclAlgorithm,
    shape: &WorldShape,
    spec: &TopologySpec,
) -> Result<Endpoints, TopologyError> {
    let mut endpoints = algorithm.endpoints(shape, spec)?;
    let world_size = endpoints.tables.len();
    for (rank, table) in endpoints.tables.iter_mut().enumerate() {
        if let Some(replaced) = algorithm.neighbors(rank, world_size, table) {
            *table = replaced;
        }
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::topology::Dir;

    fn shape(n_sips: u32, topology: SipTopology, grid: Option<(u32, u32)>) -> WorldShape {
        WorldShape {
            n_sips,
            cube_w: 2,
            cube_h: 2,
            sip_topology: topology,
            sip_grid: grid,
            builtin: Builtin::Ring1d,
        }
    }

    #[test]
    fn flat_ring_spans_every_cube_of_every_sip() {
        let endpoints = Endpoints::flat(&shape(2, SipTopology::Ring1d, None)).unwrap();
        assert_eq!(endpoints.coords.len(), 8);
        assert_eq!(
            endpoints.coords[5],
            PeCoord {
                sip: 1,
                cube: 1,
                pe: 0
            }
        );
        assert_eq!(endpoints.tables[7][&Dir::E], 0);
    }
}
