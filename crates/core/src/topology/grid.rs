//! Grid arithmetic shared by the three levels of the machine: the SIP
//! arrangement, the cube mesh of a SIP and the router grid of a cube.
//!
//! A grid is two dimensions; each is a line (no wrap) or a ring (wrap).
//! This module owns which neighbours exist, the one list of links of a grid
//! (each physical link once) and the dimension-order step (X before Y, the
//! shorter way round a ring, ties going east or south). It knows nothing of
//! what sits at a grid position.

use serde::Serialize;

use super::naming::Side;

/// A position on a grid: row (north to south) and column (west to east).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GridPos {
    /// Row, 0 at the north edge.
    pub row: u32,
    /// Column, 0 at the west edge.
    pub col: u32,
}

impl GridPos {
    /// Where index `i` sits on a grid `width` columns wide, row-major
    /// (`i = row · width + col`; a zero width is taken as one).
    pub fn of(i: u32, width: u32) -> GridPos {
        let width = width.max(1);
        GridPos {
            row: i / width,
            col: i % width,
        }
    }

    /// The row-major index of this position on a grid `width` columns wide.
    pub fn index(self, width: u32) -> u32 {
        self.row * width + self.col
    }

    /// Hops between two positions on a grid without wrap.
    pub fn manhattan(self, other: GridPos) -> u32 {
        self.row.abs_diff(other.row) + self.col.abs_diff(other.col)
    }
}

/// One dimension of a grid.
///
/// A ring needs at least three positions: with two, the wrap link would
/// join the same pair as the direct one, so two positions are a line; one
/// position has no links at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dim {
    /// `n` positions, links between consecutive ones.
    Line(u32),
    /// `n >= 3` positions, links between consecutive ones and from the last
    /// back to the first.
    Ring(u32),
}

impl Dim {
    /// A line of `n`.
    pub fn line(n: u32) -> Dim {
        Dim::Line(n)
    }

    /// A ring of `n`, or the line it degenerates to below three.
    pub fn ring(n: u32) -> Dim {
        if n >= 3 { Dim::Ring(n) } else { Dim::Line(n) }
    }

    /// Number of positions.
    pub fn len(self) -> u32 {
        match self {
            Dim::Line(n) | Dim::Ring(n) => n,
        }
    }

    /// The neighbour of `i` one step forward (east or south), if linked.
    fn forward(self, i: u32) -> Option<u32> {
        match self {
            Dim::Line(n) => (i + 1 < n).then_some(i + 1),
            Dim::Ring(n) => Some((i + 1) % n),
        }
    }

    /// The neighbour of `i` one step backward (west or north), if linked.
    fn backward(self, i: u32) -> Option<u32> {
        match self {
            Dim::Line(_) => i.checked_sub(1),
            Dim::Ring(n) => Some((i + n - 1) % n),
        }
    }

    /// The direction of the first step from `from` to `to`: `Some(true)`
    /// forward, `Some(false)` backward, `None` when already there. On a ring
    /// the shorter way round; a tie goes forward.
    fn step(self, from: u32, to: u32) -> Option<bool> {
        if from == to {
            return None;
        }
        match self {
            Dim::Line(_) => Some(to > from),
            Dim::Ring(n) => {
                let ahead = (to + n - from) % n;
                Some(ahead <= n - ahead)
            }
        }
    }
}

/// A two-dimensional grid: `x` runs west to east, `y` north to south.
/// Position `i` is row `i / w`, column `i % w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkGrid {
    /// Columns.
    pub x: Dim,
    /// Rows.
    pub y: Dim,
}

impl LinkGrid {
    /// A `w × h` grid without wrap.
    pub fn mesh(w: u32, h: u32) -> LinkGrid {
        LinkGrid {
            x: Dim::line(w),
            y: Dim::line(h),
        }
    }

    /// Width.
    pub fn width(&self) -> u32 {
        self.x.len()
    }

    /// Height.
    pub fn height(&self) -> u32 {
        self.y.len()
    }

    /// Number of positions.
    pub fn cells(&self) -> u32 {
        self.width() * self.height()
    }

    /// The position of index `i` (row-major).
    pub fn pos(&self, i: u32) -> GridPos {
        GridPos::of(i, self.width())
    }

    /// The row-major index of `pos`.
    pub fn index(&self, pos: GridPos) -> u32 {
        pos.index(self.width())
    }

    /// Every position, row-major.
    pub fn positions(&self) -> impl Iterator<Item = GridPos> + '_ {
        (0..self.cells()).map(|i| self.pos(i))
    }

    /// The neighbour of `pos` on `side`, if a link joins them.
    pub fn neighbour(&self, pos: GridPos, side: Side) -> Option<GridPos> {
        let GridPos { row, col } = pos;
        match side {
            Side::E => self.x.forward(col).map(|col| GridPos { row, col }),
            Side::W => self.x.backward(col).map(|col| GridPos { row, col }),
            Side::S => self.y.forward(row).map(|row| GridPos { row, col }),
            Side::N => self.y.backward(row).map(|row| GridPos { row, col }),
        }
    }

    /// The middle position of the edge on `side`: `(n - 1) / 2` along it.
    pub fn edge_middle(&self, side: Side) -> GridPos {
        let (w, h) = (self.width(), self.height());
        let (mid_col, mid_row) = ((w - 1) / 2, (h - 1) / 2);
        match side {
            Side::N => GridPos {
                row: 0,
                col: mid_col,
            },
            Side::S => GridPos {
                row: h - 1,
                col: mid_col,
            },
            Side::W => GridPos {
                row: mid_row,
                col: 0,
            },
            Side::E => GridPos {
                row: mid_row,
                col: w - 1,
            },
        }
    }

    /// The sides of `pos` that have a link, in `Side::ALL` order.
    pub fn linked_sides(&self, pos: GridPos) -> impl Iterator<Item = Side> + '_ {
        Side::ALL
            .into_iter()
            .filter(move |&side| self.neighbour(pos, side).is_some())
    }

    /// Every link once, as its west or north end and the side it leaves by
    /// (`E` or `S`), row-major.
    pub fn links(&self) -> Vec<(GridPos, Side)> {
        self.positions()
            .flat_map(|pos| [(pos, Side::E), (pos, Side::S)])
            .filter(|&(pos, side)| self.neighbour(pos, side).is_some())
            .collect()
    }

    /// The side of the first dimension-order step from `from` to `to`:
    /// columns first, then rows; `None` when `from == to`.
    pub fn first_step(&self, from: GridPos, to: GridPos) -> Option<Side> {
        let horizontal = self.x.step(from.col, to.col);
        let vertical = self.y.step(from.row, to.row);
        match (horizontal, vertical) {
            (Some(east), _) => Some(if east { Side::E } else { Side::W }),
            (None, Some(south)) => Some(if south { Side::S } else { Side::N }),
            (None, None) => None,
        }
    }

    /// The sides of every dimension-order step from `from` to `to`.
    pub fn route(&self, from: GridPos, to: GridPos) -> Vec<Side> {
        let mut sides = Vec::new();
        let mut at = from;
        while let Some(side) = self.first_step(at, to) {
            let Some(next) = self.neighbour(at, side) else {
                break;
            };
            sides.push(side);
            at = next;
        }
        sides
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(row: u32, col: u32) -> GridPos {
        GridPos { row, col }
    }

    #[test]
    fn positions_are_row_major() {
        assert_eq!(GridPos::of(6, 4), pos(1, 2));
        assert_eq!(pos(1, 2).index(4), 6);
        assert_eq!(GridPos::of(5, 1), pos(5, 0));
        let mesh = LinkGrid::mesh(4, 2);
        assert!((0..8).all(|i| mesh.index(mesh.pos(i)) == i));
    }

    #[test]
    fn short_rings_are_lines() {
        assert_eq!(Dim::ring(2), Dim::Line(2));
        assert_eq!(Dim::ring(1), Dim::Line(1));
        assert_eq!(Dim::ring(3), Dim::Ring(3));
    }

    #[test]
    fn links_are_listed_once() {
        let ring2 = LinkGrid {
            x: Dim::ring(2),
            y: Dim::ring(1),
        };
        assert_eq!(ring2.links(), vec![(pos(0, 0), Side::E)]);
        let torus = LinkGrid {
            x: Dim::ring(3),
            y: Dim::ring(3),
        };
        assert_eq!(torus.links().len(), 18);
        assert_eq!(LinkGrid::mesh(4, 4).links().len(), 24);
        assert!(LinkGrid::mesh(1, 1).links().is_empty());
    }

    #[test]
    fn dimension_order_goes_x_first() {
        let mesh = LinkGrid::mesh(4, 4);
        let sides = mesh.route(pos(0, 0), pos(3, 3));
        assert_eq!(
            sides,
            [Side::E, Side::E, Side::E, Side::S, Side::S, Side::S]
        );
        assert_eq!(
            mesh.route(pos(2, 3), pos(0, 1)),
            [Side::W, Side::W, Side::N, Side::N]
        );
    }

    #[test]
    fn rings_go_the_shorter_way_and_ties_go_forward() {
        let ring = LinkGrid {
            x: Dim::ring(5),
            y: Dim::line(1),
        };
        assert_eq!(ring.route(pos(0, 0), pos(0, 4)), [Side::W]);
        let even = LinkGrid {
            x: Dim::ring(4),
            y: Dim::line(1),
        };
        assert_eq!(even.route(pos(0, 3), pos(0, 1)), [Side::E, Side::E]);
        assert_eq!(even.route(pos(0, 1), pos(0, 3)), [Side::E, Side::E]);
    }
}
