//! The world a collective runs in and its IPCQ endpoints.
//!
//! [`WorldShape`] is what the process group derives from topology.yaml,
//! ccl.yaml and the world size: SIPs, cube mesh, [`SipArrangement`] (the one SIP
//! vocabulary from the topology to the kernel) and the entry's builtin
//! table. A world size the SIP grid cannot hold is a [`WorldError`] here,
//! at `init_process_group`, never a deadlock later.
//!
//! [`Endpoints`] are the PEs that run a collective's kernel with their
//! neighbour tables: [`Endpoints::flat`] (PE 0 of every cube of every SIP,
//! one builtin table over all of them) or [`Endpoints::intercube`]
//! (seed ADR-0032 D3). [`Endpoints::with_neighbors`] is the one place an
//! algorithm's `neighbors` hook is applied.
//!
//! Knows ranks, tables and machine shapes; nothing of kernels or time.

use crate::tl::PeCoord;
use crate::topology::{SipArrangement, TopologySpec};

use super::topology::{Builtin, NeighborMap, TopologyError};

/// The shape of the collective's world: what tables are built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorldShape {
    /// SIPs taking part (= ranks = world size).
    pub n_sips: u32,
    /// Cube-mesh width the kernel sees.
    pub cube_w: u32,
    /// Cube-mesh height the kernel sees.
    pub cube_h: u32,
    /// How the participating SIPs are connected.
    pub sip_arrangement: SipArrangement,
    /// The ccl.yaml `topology` of the algorithm entry.
    pub builtin: Builtin,
    /// ccl.yaml's `root_cube` of the entry, checked against the cube mesh.
    pub root_cube: Option<u32>,
}

/// A world the machine cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// A world size that is not the SIP grid's size on a 2-D grid.
    #[error(
        "world_size {world_size} cannot run on the SIP grid {grid} ({cells} SIPs): a 2-D SIP \
         grid needs every SIP (set world_size to {cells}, or system.sips to a {world_size}-SIP \
         grid or ring)"
    )]
    GridSize {
        /// The world size.
        world_size: u32,
        /// The machine's SIP grid.
        grid: SipArrangement,
        /// SIPs on it.
        cells: u32,
    },
    /// A `root_cube` outside the cube mesh.
    #[error("root_cube {root_cube}: the cube mesh has cubes 0 to {}", cubes - 1)]
    RootCube {
        /// The value given.
        root_cube: u32,
        /// Cubes per SIP.
        cubes: u32,
    },
}

impl WorldShape {
    /// The world of the first `world_size` SIPs of `spec`'s machine
    /// (`world_size` must not exceed the SIP count; the caller checks).
    pub fn new(
        spec: &TopologySpec,
        world_size: u32,
        builtin: Builtin,
        root_cube: Option<u32>,
    ) -> Result<WorldShape, WorldError> {
        let mesh = spec.sip().cube_mesh;
        let sip_arrangement = spec.system().sips;
        if let Some((w, h)) = sip_arrangement.dims()
            && w * h != world_size
        {
            return Err(WorldError::GridSize {
                world_size,
                grid: sip_arrangement,
                cells: w * h,
            });
        }
        let shape = WorldShape {
            n_sips: world_size,
            cube_w: mesh.w.get(),
            cube_h: mesh.h.get(),
            sip_arrangement,
            builtin,
            root_cube,
        };
        match root_cube {
            Some(root_cube) if root_cube >= shape.cubes() => Err(WorldError::RootCube {
                root_cube,
                cubes: shape.cubes(),
            }),
            _ => Ok(shape),
        }
    }

    /// A world of `world_size` SIPs on a logical ring whatever the
    /// machine's SIP grid (a sub-group of its SIPs: the ring visits them in
    /// group-rank order, each hop routed over the grid).
    pub fn ring(
        spec: &TopologySpec,
        world_size: u32,
        builtin: Builtin,
        root_cube: Option<u32>,
    ) -> Result<WorldShape, WorldError> {
        let mesh = spec.sip().cube_mesh;
        let shape = WorldShape {
            n_sips: world_size,
            cube_w: mesh.w.get(),
            cube_h: mesh.h.get(),
            sip_arrangement: SipArrangement::Ring { n: world_size },
            builtin,
            root_cube,
        };
        match root_cube {
            Some(root_cube) if root_cube >= shape.cubes() => Err(WorldError::RootCube {
                root_cube,
                cubes: shape.cubes(),
            }),
            _ => Ok(shape),
        }
    }

    /// Cubes per SIP.
    pub fn cubes(&self) -> u32 {
        self.cube_w * self.cube_h
    }

    /// Endpoints (PE 0 of every cube of every SIP).
    pub fn endpoints(&self) -> usize {
        (self.n_sips * self.cubes()) as usize
    }

    /// The SIPs' neighbour tables on the SIP grid (`E`/`W` on a ring,
    /// `E`/`W`/`N`/`S` on a 2-D grid).
    pub fn sip_tables(&self) -> Result<Vec<NeighborMap>, TopologyError> {
        let n = self.n_sips as usize;
        match self.sip_arrangement {
            SipArrangement::Ring { .. } => Builtin::Ring1d.tables(n, None),
            SipArrangement::Torus { w, h } => {
                Builtin::Torus2d.tables(n, Some((w as usize, h as usize)))
            }
            SipArrangement::Mesh { w, h } => {
                Builtin::Mesh2d.tables(n, Some((w as usize, h as usize)))
            }
        }
    }
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

    /// Seed ADR-0032 D3's intercube tables: `E/W/N/S` between the pe0s of
    /// neighbouring cubes of a SIP's mesh (no wrap), `global_*` to the same
    /// cube on the neighbouring SIPs of the SIP grid.
    pub fn intercube(shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        let (w, h) = (shape.cube_w as usize, shape.cube_h as usize);
        let cubes = w * h;
        let cube_tables = Builtin::Mesh2d.tables(cubes, Some((w, h)))?;
        let sip_tables = shape.sip_tables()?;
        let mut tables = Vec::with_capacity(shape.endpoints());
        for (sip, sip_table) in sip_tables.iter().enumerate() {
            for (cube, cube_table) in cube_tables.iter().enumerate() {
                let local = cube_table.iter().map(|(&d, &c)| (d, sip * cubes + c));
                let global = sip_table
                    .iter()
                    .map(|(&d, &s)| (d.global(), s * cubes + cube));
                tables.push(local.chain(global).collect());
            }
        }
        Ok(Endpoints {
            coords: pe0_coords(shape),
            tables,
        })
    }

    /// Builtin `builtin` tables over the given PEs (the mock runtime's
    /// world of PEs in one cube).
    pub fn over(coords: Vec<PeCoord>, builtin: Builtin) -> Result<Endpoints, TopologyError> {
        let tables = builtin.tables(coords.len(), None)?;
        Ok(Endpoints { coords, tables })
    }

    /// Every table passed through an algorithm's `neighbors(endpoint,
    /// endpoints, map)` hook, which edits `map` in place or returns a
    /// replacement (`None` keeps the edited map).
    pub fn with_neighbors(
        mut self,
        hook: impl Fn(usize, usize, &mut NeighborMap) -> Option<NeighborMap>,
    ) -> Endpoints {
        let endpoints = self.tables.len();
        for (endpoint, table) in self.tables.iter_mut().enumerate() {
            if let Some(replaced) = hook(endpoint, endpoints, table) {
                *table = replaced;
            }
        }
        self
    }
}

/// PE 0 of every cube of every SIP, SIP-major.
fn pe0_coords(shape: &WorldShape) -> Vec<PeCoord> {
    let cubes = shape.cubes();
    (0..shape.n_sips)
        .flat_map(|sip| (0..cubes).map(move |cube| PeCoord { sip, cube, pe: 0 }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::topology::{Dir, Wiring};
    use crate::config::Override;

    fn spec(sets: &[&str]) -> TopologySpec {
        let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap()
    }

    fn shape(sets: &[&str], world_size: u32) -> Result<WorldShape, WorldError> {
        WorldShape::new(&spec(sets), world_size, Builtin::Ring1d, None)
    }

    #[test]
    fn flat_ring_spans_every_cube_of_every_sip() {
        let endpoints = Endpoints::flat(&shape(&[], 2).unwrap()).unwrap();
        assert_eq!(endpoints.coords.len(), 32);
        assert_eq!(
            endpoints.coords[21],
            PeCoord {
                sip: 1,
                cube: 5,
                pe: 0
            }
        );
        assert_eq!(endpoints.tables[31][&Dir::E], 0);
    }

    #[test]
    fn intercube_ring_of_two_sips_links_same_cubes_globally() {
        let t = Endpoints::intercube(&shape(&[], 2).unwrap()).unwrap();
        assert_eq!(t.tables.len(), 32);
        let corner: Vec<_> = t.tables[0].iter().map(|(&d, &p)| (d, p)).collect();
        // On a ring of 2, E and W name the same peer.
        let want = [
            (Dir::E, 1),
            (Dir::S, 4),
            (Dir::GlobalE, 16),
            (Dir::GlobalW, 16),
        ];
        assert_eq!(corner, want);
        assert_eq!(t.tables[21][&Dir::GlobalW], 5);
        assert!(Wiring::install(&t.tables).is_ok());
    }

    #[test]
    fn torus_of_four_sips_has_all_global_directions() {
        let torus = ["system.sips.count=4", "system.sips.topology=torus_2d"];
        let t = Endpoints::intercube(&shape(&torus, 4).unwrap()).unwrap();
        let globals = t.tables[16].keys().filter(|d| **d >= Dir::GlobalE).count();
        assert_eq!(globals, 4);
    }

    #[test]
    fn a_world_smaller_than_a_2d_grid_is_refused_and_a_ring_shrinks() {
        let torus = ["system.sips.count=4", "system.sips.topology=torus_2d"];
        let error = shape(&torus, 3).unwrap_err().to_string();
        assert!(error.starts_with("world_size 3 cannot run on the SIP grid torus_2d 2x2 (4 SIPs)"));
        let ring = shape(&["system.sips.count=4"], 3).unwrap();
        let t = Endpoints::intercube(&ring).unwrap();
        assert_eq!(t.tables.len(), 48);
        assert_eq!(t.tables[32][&Dir::GlobalE], 0, "SIP 2 wraps to SIP 0");
    }

    #[test]
    fn root_cube_must_be_a_cube_and_hooks_edit_tables() {
        let error = WorldShape::new(&spec(&[]), 2, Builtin::Ring1d, Some(16)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "root_cube 16: the cube mesh has cubes 0 to 15"
        );
        let coords = (0..4)
            .map(|pe| PeCoord {
                sip: 0,
                cube: 0,
                pe,
            })
            .collect();
        let ring = Endpoints::over(coords, Builtin::Ring1d).unwrap();
        let skip = ring.with_neighbors(|e, n, _| Some([(Dir::E, (e + 2) % n)].into()));
        assert_eq!(skip.tables[3], [(Dir::E, 1)].into());
        let dropped = skip.with_neighbors(|_, _, map| {
            map.remove(&Dir::E);
            None
        });
        assert!(dropped.tables[0].is_empty());
    }
}
