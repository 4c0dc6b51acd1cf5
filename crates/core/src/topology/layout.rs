//! Compile stage 2: the router grid of a cube's NoC and where everything
//! attaches to it. One layout serves every cube of the machine.
//!
//! The algorithm (seed ADR-0053's auto-layout, made exact):
//!
//! 1. **Endpoints** needing a router of their own, in placement order: the
//!    PEs, then M_CPU, M_CPU.DMA, SRAM, IO_CPU and the PCIe endpoint. The last
//!    two exist only on the IO cube, but their routers are reserved on every
//!    cube so that all cubes share one layout.
//! 2. **HBM ports**: enough NoC links into the HBM controller to carry the
//!    stack's bandwidth, `⌈HBM bandwidth / NoC link bandwidth⌉`.
//! 3. **Grid**: `w` columns; the HBM exclusion zone is `⌈ports / w⌉` full
//!    rows, every router in it an HBM port and nothing else attached; the
//!    endpoints need `⌈endpoints / w⌉` more rows, half of them (rounded down)
//!    above the zone and the rest below. Without `cube.noc.grid`, `w` is the
//!    one giving the squarest grid: smallest `max(w, h)`, then fewest
//!    routers, then smallest `w`. With it, the given grid must hold both.
//! 4. **Placement**: each endpoint in order takes the free router nearest
//!    the zone (fewest rows away), ties to the lowest row, then column.
//! 5. **Link ports** (UCIe N/S/E/W and the SIP's inter-SIP ports) attach to
//!    the middle router of their side (`(n - 1) / 2` along the edge); they
//!    share that router with whatever else is there, so they do not size
//!    the grid.
//!
//! This module knows the cube's spec and grid positions only: no node ids,
//! no names, no latencies.

use std::fmt::{self, Write as _};
use std::ops::Range;

use super::grid::{GridPos, LinkGrid};
use super::naming::Side;
use super::spec::{CubeSpec, Grid};

/// Most routers one cube's NoC may have.
pub const MAX_ROUTERS: u64 = 4096;

/// A cube that cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The explicit grid cannot hold the endpoints and the HBM zone.
    #[error(
        "a {grid} router grid is too small: {endpoints} endpoints need {endpoint_rows} rows \
         and {hbm_ports} HBM ports need {zone_rows} rows of {w}, {needed} rows in all \
         (remove cube.noc.grid to size the grid automatically)",
        w = grid.w
    )]
    GridTooSmall {
        /// `cube.noc.grid` as given.
        grid: Grid,
        /// Routers the endpoints need.
        endpoints: u64,
        /// Rows the endpoints need at this width.
        endpoint_rows: u64,
        /// HBM ports needed.
        hbm_ports: u64,
        /// Rows the HBM zone needs at this width.
        zone_rows: u64,
        /// `endpoint_rows + zone_rows`.
        needed: u64,
    },
    /// More routers than [`MAX_ROUTERS`].
    #[error(
        "the cube NoC needs at least {routers} routers ({endpoints} endpoints: cube.pes + 5; \
         {hbm_ports} HBM ports: HBM bandwidth / NoC link bandwidth, the link being \
         cube.noc.link_width x cube.noc.clock); at most {MAX_ROUTERS} are supported: {remedy}",
        remedy = self.remedy()
    )]
    TooLarge {
        /// Routers the grid would have.
        routers: u64,
        /// Routers the endpoints need.
        endpoints: u64,
        /// HBM ports needed.
        hbm_ports: u64,
    },
}

impl LayoutError {
    /// The spec key to blame: for a NoC too large, `cube.pes` when the
    /// endpoints outnumber the HBM ports, else the NoC clock that sets the
    /// link bandwidth the HBM ports are counted in.
    pub fn key(&self) -> &'static str {
        match self {
            LayoutError::GridTooSmall { .. } => "cube.noc.grid",
            LayoutError::TooLarge {
                endpoints,
                hbm_ports,
                ..
            } if endpoints >= hbm_ports => "cube.pes",
            LayoutError::TooLarge { .. } => "cube.noc.clock",
        }
    }

    fn remedy(&self) -> &'static str {
        match self.key() {
            "cube.pes" => "lower cube.pes",
            _ => {
                "raise cube.noc.clock or cube.noc.link_width, or lower cube.hbm.pc_bandwidth \
                 or cube.hbm.pseudo_channels"
            }
        }
    }
}

/// What a router of the layout carries (for pictures and views).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Slot {
    /// PE `p`.
    Pe(u32),
    /// The M_CPU.
    Mcpu,
    /// The M_CPU.DMA engine.
    McpuDma,
    /// The SRAM.
    Sram,
    /// The IO_CPU (IO cube only).
    IoCpu,
    /// The PCIe endpoint (IO cube only).
    PcieEp,
    /// An HBM controller port.
    HbmPort,
    /// Nothing.
    Free,
}

/// The NoC layout shared by every cube.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubeLayout {
    grid: LinkGrid,
    zone: Range<u32>,
    pes: Vec<GridPos>,
    mcpu: GridPos,
    mcpu_dma: GridPos,
    sram: GridPos,
    io_cpu: GridPos,
    pcie_ep: GridPos,
}

/// Routers the non-HBM endpoints need besides the PEs: M_CPU, M_CPU.DMA,
/// SRAM, IO_CPU, PCIe endpoint.
const FIXED_ENDPOINTS: u64 = 5;

/// Width, zone rows and endpoint rows of a grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    w: u64,
    zone_rows: u64,
    endpoint_rows: u64,
}

impl Shape {
    fn at_width(w: u64, endpoints: u64, hbm_ports: u64) -> Shape {
        Shape {
            w,
            zone_rows: hbm_ports.div_ceil(w),
            endpoint_rows: endpoints.div_ceil(w),
        }
    }

    fn h(self) -> u64 {
        self.zone_rows.saturating_add(self.endpoint_rows)
    }

    fn routers(self) -> u64 {
        self.w.saturating_mul(self.h())
    }

    /// Squarest first, then fewest routers, then narrowest.
    fn score(self) -> (u64, u64, u64) {
        (self.w.max(self.h()), self.routers(), self.w)
    }
}

impl CubeLayout {
    /// Lays out a cube of `cube`.
    pub fn new(cube: &CubeSpec) -> Result<CubeLayout, LayoutError> {
        let endpoints = u64::from(cube.pes.get()) + FIXED_ENDPOINTS;
        let hbm_ports = hbm_ports(cube);
        let too_large = |routers| LayoutError::TooLarge {
            routers,
            endpoints,
            hbm_ports,
        };
        if endpoints.saturating_add(hbm_ports) > MAX_ROUTERS {
            return Err(too_large(endpoints.saturating_add(hbm_ports)));
        }
        let shape = match cube.noc.grid {
            Some(grid) => explicit_shape(grid, endpoints, hbm_ports)?,
            None => auto_shape(endpoints, hbm_ports),
        };
        let routers = shape.routers();
        if routers > MAX_ROUTERS {
            return Err(too_large(routers));
        }
        Ok(CubeLayout::place(shape, cube.pes.get()))
    }

    /// Fixes the zone and places the endpoints on a checked shape (at most
    /// [`MAX_ROUTERS`] routers, so every number fits in `u32`).
    fn place(shape: Shape, pes: u32) -> CubeLayout {
        let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let above = narrow(shape.endpoint_rows / 2);
        let grid = LinkGrid::mesh(narrow(shape.w), narrow(shape.h()));
        let zone = above..above + narrow(shape.zone_rows);
        let mut free: Vec<GridPos> = grid
            .positions()
            .filter(|pos| !zone.contains(&pos.row))
            .collect();
        free.sort_by_key(|pos| (rows_from(&zone, pos.row), pos.row, pos.col));
        let mut slots = free.into_iter();
        let mut next = || slots.next().unwrap_or(GridPos { row: 0, col: 0 });
        let pes = (0..pes).map(|_| next()).collect();
        CubeLayout {
            grid,
            zone,
            pes,
            mcpu: next(),
            mcpu_dma: next(),
            sram: next(),
            io_cpu: next(),
            pcie_ep: next(),
        }
    }

    /// The router grid.
    pub(crate) fn grid(&self) -> LinkGrid {
        self.grid
    }

    /// Columns of routers.
    pub fn width(&self) -> u32 {
        self.grid.width()
    }

    /// Rows of routers.
    pub fn height(&self) -> u32 {
        self.grid.height()
    }

    /// The rows of the HBM exclusion zone.
    pub fn hbm_zone(&self) -> Range<u32> {
        self.zone.clone()
    }

    /// Every HBM port router, row-major.
    pub fn hbm_ports(&self) -> impl Iterator<Item = GridPos> + '_ {
        self.grid
            .positions()
            .filter(|pos| self.zone.contains(&pos.row))
    }

    /// The HBM port nearest `pos`: the zone router in its column on the
    /// nearest zone row (unique, so no tie-break is needed).
    pub fn nearest_hbm_port(&self, pos: GridPos) -> GridPos {
        let last = self.zone.end.saturating_sub(1);
        GridPos {
            row: pos.row.clamp(self.zone.start, last),
            col: pos.col,
        }
    }

    /// The router of PE `pe` (`None` past the last PE).
    pub fn pe(&self, pe: u32) -> Option<GridPos> {
        self.pes.get(usize::try_from(pe).ok()?).copied()
    }

    /// The router of the M_CPU.
    pub fn mcpu(&self) -> GridPos {
        self.mcpu
    }

    /// The router of the M_CPU.DMA engine.
    pub fn mcpu_dma(&self) -> GridPos {
        self.mcpu_dma
    }

    /// The router of the SRAM.
    pub fn sram(&self) -> GridPos {
        self.sram
    }

    /// The router of the IO_CPU (on the IO cube).
    pub fn io_cpu(&self) -> GridPos {
        self.io_cpu
    }

    /// The router of the PCIe endpoint (on the IO cube).
    pub fn pcie_ep(&self) -> GridPos {
        self.pcie_ep
    }

    /// The router a link port on `side` attaches to: the middle of that edge.
    pub fn port(&self, side: Side) -> GridPos {
        self.grid.edge_middle(side)
    }

    /// What the router at `pos` carries.
    pub fn slot(&self, pos: GridPos) -> Slot {
        if self.zone.contains(&pos.row) {
            return Slot::HbmPort;
        }
        let fixed = [
            (self.mcpu, Slot::Mcpu),
            (self.mcpu_dma, Slot::McpuDma),
            (self.sram, Slot::Sram),
            (self.io_cpu, Slot::IoCpu),
            (self.pcie_ep, Slot::PcieEp),
        ];
        let pe = self.pes.iter().position(|&at| at == pos);
        let fixed = fixed.iter().find(|(at, _)| *at == pos).map(|&(_, s)| s);
        match (pe, fixed) {
            (Some(p), _) => Slot::Pe(u32::try_from(p).unwrap_or(u32::MAX)),
            (None, Some(slot)) => slot,
            (None, None) => Slot::Free,
        }
    }

    /// An ASCII picture of the grid: one cell per router, rows north to
    /// south, then where the link ports attach.
    pub fn picture(&self) -> String {
        let mut out = String::from("      ");
        for col in 0..self.width() {
            let _ = write!(out, "{:<9}", format!("c{col}"));
        }
        out = out.trim_end().to_owned();
        for row in 0..self.height() {
            let _ = write!(out, "\n{:<6}", format!("r{row}"));
            let cells: String = (0..self.width())
                .map(|col| format!("{:<9}", self.slot(GridPos { row, col }).to_string()))
                .collect();
            out.push_str(cells.trim_end());
        }
        let ports: Vec<String> = Side::ALL
            .iter()
            .map(|&side| {
                let GridPos { row, col } = self.port(side);
                format!("{} r{row}c{col}", side.letter().to_uppercase())
            })
            .collect();
        let _ = write!(out, "\nlink ports: {}\n", ports.join(", "));
        out
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Pe(p) => write!(f, "pe{p}"),
            Slot::Mcpu => f.write_str("mcpu"),
            Slot::McpuDma => f.write_str("mcpu.dma"),
            Slot::Sram => f.write_str("sram"),
            Slot::IoCpu => f.write_str("io_cpu"),
            Slot::PcieEp => f.write_str("pcie_ep"),
            Slot::HbmPort => f.write_str("HBM"),
            Slot::Free => f.write_str("."),
        }
    }
}

/// Rows between `row` and the zone (0 inside it).
fn rows_from(zone: &Range<u32>, row: u32) -> u32 {
    if row < zone.start {
        zone.start - row
    } else {
        row.saturating_sub(zone.end.saturating_sub(1))
    }
}

/// HBM ports needed: `⌈HBM bandwidth / NoC link bandwidth⌉`, at least one.
fn hbm_ports(cube: &CubeSpec) -> u64 {
    let hbm = u128::from(cube.hbm.bandwidth().bytes_per_sec());
    let link = u128::from(cube.noc.link_bandwidth().bytes_per_sec());
    u64::try_from(hbm.div_ceil(link)).unwrap_or(u64::MAX).max(1)
}

fn auto_shape(endpoints: u64, hbm_ports: u64) -> Shape {
    let side = endpoints.saturating_add(hbm_ports).isqrt() + 1;
    (1..=side + 2)
        .map(|w| Shape::at_width(w, endpoints, hbm_ports))
        .min_by_key(|shape| shape.score())
        .unwrap_or(Shape {
            w: 1,
            zone_rows: hbm_ports,
            endpoint_rows: endpoints,
        })
}

fn explicit_shape(grid: Grid, endpoints: u64, hbm_ports: u64) -> Result<Shape, LayoutError> {
    let shape = Shape::at_width(u64::from(grid.w.get()), endpoints, hbm_ports);
    let h = u64::from(grid.h.get());
    if shape.h() > h {
        return Err(LayoutError::GridTooSmall {
            grid,
            endpoints,
            endpoint_rows: shape.endpoint_rows,
            hbm_ports,
            zone_rows: shape.zone_rows,
            needed: shape.h(),
        });
    }
    Ok(Shape {
        endpoint_rows: h - shape.zone_rows,
        ..shape
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::units::Count;
    use crate::topology::TopologySpec;

    fn count(n: u32) -> Count {
        Count::new(n).unwrap()
    }

    fn cube() -> CubeSpec {
        TopologySpec::load(&TopologySpec::default_source(), &[])
            .unwrap()
            .cube()
            .clone()
    }

    #[test]
    fn default_cube_is_five_by_six_with_a_three_row_zone() {
        let layout = CubeLayout::new(&cube()).unwrap();
        assert_eq!((layout.width(), layout.height()), (5, 6));
        assert_eq!(layout.hbm_zone(), 1..4);
        assert_eq!(layout.hbm_ports().count(), 15);
        assert_eq!(layout.pe(0), Some(GridPos { row: 0, col: 0 }));
        assert_eq!(layout.pe(5), Some(GridPos { row: 4, col: 0 }));
        assert_eq!(layout.pcie_ep(), GridPos { row: 5, col: 2 });
        assert_eq!(layout.port(Side::E), GridPos { row: 2, col: 4 });
    }

    #[test]
    fn no_pe_in_the_zone_and_no_router_shared() {
        let layout = CubeLayout::new(&cube()).unwrap();
        let mut used: Vec<GridPos> = (0..8).filter_map(|p| layout.pe(p)).collect();
        used.extend([
            layout.mcpu(),
            layout.mcpu_dma(),
            layout.sram(),
            layout.io_cpu(),
            layout.pcie_ep(),
        ]);
        assert!(used.iter().all(|pos| !layout.hbm_zone().contains(&pos.row)));
        used.sort();
        used.dedup();
        assert_eq!(used.len(), 13);
    }

    #[test]
    fn nearest_hbm_port_is_straight_up_or_down() {
        let layout = CubeLayout::new(&cube()).unwrap();
        let at = |row, col| GridPos { row, col };
        assert_eq!(layout.nearest_hbm_port(at(0, 3)), at(1, 3));
        assert_eq!(layout.nearest_hbm_port(at(5, 1)), at(3, 1));
        assert_eq!(layout.nearest_hbm_port(at(2, 2)), at(2, 2));
    }

    #[test]
    fn explicit_grid_must_hold_the_cube() {
        let on_grid = |w, h| {
            let cube = cube();
            let grid = Grid {
                w: count(w),
                h: count(h),
            };
            CubeSpec {
                noc: cube.noc.with_grid(Some(grid)),
                ..cube
            }
        };
        let error = CubeLayout::new(&on_grid(4, 4)).unwrap_err();
        assert_eq!(error.key(), "cube.noc.grid");
        assert!(error.to_string().contains("8 rows in all"), "{error}");
        let layout = CubeLayout::new(&on_grid(13, 3)).unwrap();
        assert_eq!(layout.hbm_zone(), 1..2);
    }

    #[test]
    fn picture_shows_every_router() {
        let picture = CubeLayout::new(&cube()).unwrap().picture();
        assert!(picture.contains("r0    pe0      pe1"), "{picture}");
        assert!(
            picture.contains("link ports: N r0c2, S r5c2, E r2c4, W r2c0"),
            "{picture}"
        );
    }
}
