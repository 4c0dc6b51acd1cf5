//! The grids of the two upper levels of the machine: the SIP arrangement
//! (`ring_1d`, `torus_2d`, `mesh_2d_no_wrap`), the cube mesh inside a SIP,
//! and on which cube each SIP-level attachment sits.
//!
//! Decisions (documented in `docs/topology.md`):
//!
//! - `ring_1d` of `n` SIPs is a `n × 1` grid whose row is a ring; the 2-D
//!   arrangements use their `w × h`, `torus_2d` wrapping both
//!   dimensions. A wrapping dimension of 2 is a line (one link, not two),
//!   of 1 has no links.
//! - The PCIe endpoint and IO_CPU attach to the NoC of cube 0, the IO cube.
//! - The SIP's port towards the neighbour on side `D` sits on the cube in
//!   the middle of the cube mesh's `D` edge (`(n - 1) / 2` along it), on
//!   that cube's own `D`-side port router, where no UCIe port is because no
//!   cube lies beyond.
//!
//! This module knows grids and indices only: no nodes, names or latencies.

use super::grid::{Dim, LinkGrid};
use super::naming::Side;
use super::spec::{SipArrangement, TopologySpec};

/// The cube whose NoC carries the PCIe endpoint and the IO_CPU.
pub const IO_CUBE: u32 = 0;

/// The SIP grid and the cube mesh of one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MachineGrids {
    /// SIP `s` sits at `sips.pos(s)`.
    pub sips: LinkGrid,
    /// Cube `c` of a SIP sits at `cubes.pos(c)`.
    pub cubes: LinkGrid,
}

impl MachineGrids {
    /// The SIP grid and cube mesh of `spec`'s machine.
    pub fn new(spec: &TopologySpec) -> MachineGrids {
        let sips = match spec.system().sips {
            SipArrangement::Ring { n } => LinkGrid {
                x: Dim::ring(n),
                y: Dim::line(1),
            },
            SipArrangement::Torus { w, h } => LinkGrid {
                x: Dim::ring(w),
                y: Dim::ring(h),
            },
            SipArrangement::Mesh { w, h } => LinkGrid::mesh(w, h),
        };
        let mesh = spec.sip().cube_mesh;
        MachineGrids {
            sips,
            cubes: LinkGrid::mesh(mesh.w.get(), mesh.h.get()),
        }
    }

    /// The cube carrying the SIP's port on `side`.
    pub fn port_cube(&self, side: Side) -> u32 {
        self.cubes.index(self.cubes.edge_middle(side))
    }

    /// The sides on which SIP `sip` has an inter-SIP port.
    pub fn sip_port_sides(&self, sip: u32) -> Vec<Side> {
        self.sips.linked_sides(self.sips.pos(sip)).collect()
    }

    /// The sides on which cube `cube` has a UCIe port.
    pub fn ucie_sides(&self, cube: u32) -> Vec<Side> {
        self.cubes.linked_sides(self.cubes.pos(cube)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Override;

    fn grids(sets: &[&str]) -> MachineGrids {
        let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap();
        MachineGrids::new(&spec)
    }

    #[test]
    fn two_sip_ring_has_one_link() {
        let two = grids(&[]);
        assert_eq!(two.sips.links().len(), 1);
        assert_eq!(two.sip_port_sides(0), [Side::E]);
        assert_eq!(two.sip_port_sides(1), [Side::W]);
        let one = grids(&["system.sips.count=1"]);
        assert!(one.sips.links().is_empty());
    }

    #[test]
    fn torus_wraps_and_mesh_does_not() {
        let torus = grids(&["system.sips.count=9", "system.sips.topology=torus_2d"]);
        assert_eq!(torus.sips.links().len(), 18);
        let mesh = grids(&[
            "system.sips.count=9",
            "system.sips.topology=mesh_2d_no_wrap",
        ]);
        assert_eq!(mesh.sips.links().len(), 12);
    }

    #[test]
    fn ports_sit_mid_edge() {
        let default = grids(&[]);
        assert_eq!(default.port_cube(Side::E), 7);
        assert_eq!(default.port_cube(Side::W), 4);
        assert_eq!(default.port_cube(Side::N), 1);
        assert_eq!(default.port_cube(Side::S), 13);
        assert_eq!(default.ucie_sides(0), [Side::S, Side::E]);
    }
}
