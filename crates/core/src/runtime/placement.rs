//! Where a tensor's pieces live (seed ADR-0026): a [`DPPolicy`] describes
//! the cube × PE layout inside **one** SIP, and [`DPPolicy::resolve`] turns
//! it into [`ShardSpec`]s in structural `(sip, cube, pe)` coordinates.
//!
//! The SIP is not part of the policy: it is the caller's device, chosen with
//! `torch.ahbm.set_device(rank)` (seed ADR-0024 D3; see [`super::torch`]).
//! Fields of the older API (`sip`, `num_sips`, a flat `pe_index`) are
//! rejected when a policy is read from YAML or JSON, with a message naming
//! what replaced them.
//!
//! Semantics. A tensor is seen as a 2-D `rows × cols` matrix (the last
//! dimension is `cols`, the others multiply into `rows`). The cube split
//! divides it among cubes `0..num_cubes`; each cube's block is then divided
//! among PEs `0..num_pes` of that cube by the PE split. Each [`Split`]:
//!
//! - `row_wise` / `column_wise`: contiguous bands of rows / columns, as even
//!   as possible (the first `extent % parts` bands are one longer);
//! - `replicate`: every part holds the whole block;
//! - `tiled_row_major` / `tiled_col_major`: a `gr × gc` grid of tiles with
//!   `gr` the largest divisor of `parts` not above its square root (8 parts:
//!   2 × 4), rows and columns banded as above; part `p` is tile
//!   `(p / gc, p % gc)` in row-major order, `(p % gr, p / gr)` in
//!   column-major order.
//!
//! Every shard is a block of the matrix; [`ShardSpec::replica`] numbers the
//! copies of one block, so the primary shards (`replica == 0`) cover every
//! element exactly once. Shards are listed cube-major, then by PE.
//!
//! Knows the machine's counts (SIPs, cubes, PEs), nothing of memory or time.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::topology::Machine;

/// How one level (cubes, or the PEs of a cube) divides its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Contiguous bands of rows.
    RowWise,
    /// Contiguous bands of columns.
    ColumnWise,
    /// Every part holds the whole block.
    Replicate,
    /// A grid of tiles numbered along rows first.
    TiledRowMajor,
    /// A grid of tiles numbered down columns first.
    TiledColMajor,
}

impl Split {
    /// The blocks of `parts` parts of `block`, in part order.
    pub fn resolve(self, block: Block, parts: u32) -> Result<Vec<Block>, PlacementError> {
        match self {
            Split::RowWise => row_wise(block, parts),
            Split::ColumnWise => column_wise(block, parts),
            Split::Replicate => Ok(replicate(block, parts)),
            Split::TiledRowMajor => tiled_row_major(block, parts),
            Split::TiledColMajor => tiled_col_major(block, parts),
        }
    }
}

/// A rectangle of the tensor's 2-D view, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Block {
    /// First row.
    pub row_offset: usize,
    /// Rows.
    pub rows: usize,
    /// First column.
    pub col_offset: usize,
    /// Columns.
    pub cols: usize,
}

impl Block {
    /// The whole `rows × cols` matrix.
    pub fn whole(rows: usize, cols: usize) -> Block {
        Block {
            row_offset: 0,
            rows,
            col_offset: 0,
            cols,
        }
    }

    /// Elements in the block.
    pub fn elements(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether element `(row, col)` of the matrix lies in the block.
    pub fn contains(&self, row: usize, col: usize) -> bool {
        (self.row_offset..self.row_offset + self.rows).contains(&row)
            && (self.col_offset..self.col_offset + self.cols).contains(&col)
    }
}

/// `parts` bands of `extent` starting at `offset`: `(offset, length)` each.
fn bands(
    offset: usize,
    extent: usize,
    parts: u32,
    axis: &'static str,
) -> Result<Vec<(usize, usize)>, PlacementError> {
    let n = parts as usize;
    if n == 0 || extent < n {
        return Err(PlacementError::TooFewElements {
            axis,
            extent,
            parts,
        });
    }
    let (base, extra) = (extent / n, extent % n);
    Ok((0..n)
        .map(|i| {
            (
                offset + i * base + i.min(extra),
                base + usize::from(i < extra),
            )
        })
        .collect())
}

/// Splits `block` into `parts` bands of rows.
pub fn row_wise(block: Block, parts: u32) -> Result<Vec<Block>, PlacementError> {
    let rows = bands(block.row_offset, block.rows, parts, "rows")?;
    Ok(rows
        .into_iter()
        .map(|(row_offset, rows)| Block {
            row_offset,
            rows,
            ..block
        })
        .collect())
}

/// Splits `block` into `parts` bands of columns.
pub fn column_wise(block: Block, parts: u32) -> Result<Vec<Block>, PlacementError> {
    let cols = bands(block.col_offset, block.cols, parts, "columns")?;
    Ok(cols
        .into_iter()
        .map(|(col_offset, cols)| Block {
            col_offset,
            cols,
            ..block
        })
        .collect())
}

/// `parts` copies of `block`.
pub fn replicate(block: Block, parts: u32) -> Vec<Block> {
    vec![block; parts as usize]
}

/// The tile grid of `parts` tiles: `(gr, gc)` with `gr × gc = parts` and
/// `gr` the largest divisor not above `√parts`.
pub fn tile_grid(parts: u32) -> (u32, u32) {
    let gr = (1..=parts)
        .take_while(|d| d * d <= parts)
        .filter(|d| parts % d == 0)
        .last()
        .unwrap_or(1);
    (gr, parts / gr)
}

/// The tiles of `block` on its [`tile_grid`], indexed `[tile row][tile col]`.
fn tiles(block: Block, parts: u32) -> Result<Vec<Vec<Block>>, PlacementError> {
    if parts == 0 {
        return Err(PlacementError::TooFewElements {
            axis: "rows",
            extent: block.rows,
            parts,
        });
    }
    let (gr, gc) = tile_grid(parts);
    let rows = bands(block.row_offset, block.rows, gr, "rows")?;
    let cols = bands(block.col_offset, block.cols, gc, "columns")?;
    Ok(rows
        .iter()
        .map(|&(row_offset, rows)| {
            cols.iter()
                .map(|&(col_offset, cols)| Block {
                    row_offset,
                    rows,
                    col_offset,
                    cols,
                })
                .collect()
        })
        .collect())
}

/// Splits `block` into a grid of `parts` tiles numbered along rows.
pub fn tiled_row_major(block: Block, parts: u32) -> Result<Vec<Block>, PlacementError> {
    Ok(tiles(block, parts)?.into_iter().flatten().collect())
}

/// Splits `block` into a grid of `parts` tiles numbered down columns.
pub fn tiled_col_major(block: Block, parts: u32) -> Result<Vec<Block>, PlacementError> {
    let grid = tiles(block, parts)?;
    let gc = grid.first().map_or(0, Vec::len);
    Ok((0..gc)
        .flat_map(|c| grid.iter().map(move |row| row[c]))
        .collect())
}

/// The counts a placement is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineBounds {
    /// SIPs in the machine.
    pub sips: u32,
    /// Cubes in one SIP.
    pub cubes_per_sip: u32,
    /// PEs in one cube.
    pub pes_per_cube: u32,
}

impl From<&Machine> for MachineBounds {
    fn from(machine: &Machine) -> Self {
        MachineBounds {
            sips: machine.sip_count(),
            cubes_per_sip: machine.cubes_per_sip(),
            pes_per_cube: machine.pes_per_cube(),
        }
    }
}

/// Data-parallel placement of a tensor inside one SIP: how its cubes and,
/// within each cube, its PEs divide it. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "PolicyFile")]
pub struct DPPolicy {
    /// How cubes `0..num_cubes` divide the tensor.
    pub cube: Split,
    /// How PEs `0..num_pes` of each cube divide that cube's block.
    pub pe: Split,
    /// Cubes used.
    pub num_cubes: u32,
    /// PEs used in each cube.
    pub num_pes: u32,
}

impl DPPolicy {
    /// A policy.
    pub fn new(cube: Split, pe: Split, num_cubes: u32, num_pes: u32) -> Self {
        DPPolicy {
            cube,
            pe,
            num_cubes,
            num_pes,
        }
    }

    /// The whole tensor in one shard: cube 0, PE 0.
    pub fn single() -> Self {
        DPPolicy::new(Split::Replicate, Split::Replicate, 1, 1)
    }

    /// The shards of a `rows × cols` tensor on `target_sip` (the caller's
    /// device), checked against `bounds`.
    pub fn resolve(
        &self,
        rows: usize,
        cols: usize,
        target_sip: u32,
        bounds: MachineBounds,
    ) -> Result<Vec<ShardSpec>, PlacementError> {
        self.check(target_sip, bounds)?;
        if rows == 0 || cols == 0 {
            return Err(PlacementError::Empty { rows, cols });
        }
        let mut shards = Vec::new();
        for (cube, cube_block) in (0..).zip(
            self.cube
                .resolve(Block::whole(rows, cols), self.num_cubes)?,
        ) {
            for (pe, block) in (0..).zip(self.pe.resolve(cube_block, self.num_pes)?) {
                shards.push(ShardSpec::new(
                    target_sip,
                    cube,
                    pe,
                    block,
                    self.replica(cube, pe),
                ));
            }
        }
        Ok(shards)
    }

    /// Errors unless the SIP, the cubes and the PEs exist.
    fn check(&self, sip: u32, bounds: MachineBounds) -> Result<(), PlacementError> {
        if sip >= bounds.sips {
            return Err(PlacementError::NoSuchSip {
                sip,
                sips: bounds.sips,
            });
        }
        for (level, parts) in [("num_cubes", self.num_cubes), ("num_pes", self.num_pes)] {
            if parts == 0 {
                return Err(PlacementError::NoParts { level });
            }
        }
        if self.num_cubes > bounds.cubes_per_sip {
            return Err(PlacementError::NoSuchCube {
                sip,
                cube: self.num_cubes - 1,
                cubes: bounds.cubes_per_sip,
            });
        }
        if self.num_pes > bounds.pes_per_cube {
            return Err(PlacementError::NoSuchPe {
                sip,
                cube: 0,
                pe: self.num_pes - 1,
                pes: bounds.pes_per_cube,
            });
        }
        Ok(())
    }

    /// Which copy of its block the shard of `(cube, pe)` is.
    fn replica(&self, cube: u32, pe: u32) -> u32 {
        let replicated = |split, index, parts| match split {
            Split::Replicate => (index, parts),
            _ => (0, 1),
        };
        let (cube_copy, _) = replicated(self.cube, cube, self.num_cubes);
        let (pe_copy, pe_copies) = replicated(self.pe, pe, self.num_pes);
        cube_copy * pe_copies + pe_copy
    }
}

/// One shard of a tensor: where it lives (`sip`, `cube`, `pe`: its bytes in
/// that cube's HBM, owned by that PE) and which block of the tensor's 2-D
/// view it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ShardSpec {
    /// SIP (the caller's device).
    pub sip: u32,
    /// Cube within the SIP.
    pub cube: u32,
    /// PE within the cube.
    pub pe: u32,
    /// First row of the block.
    pub row_offset: usize,
    /// Rows of the block.
    pub rows: usize,
    /// First column of the block.
    pub col_offset: usize,
    /// Columns of the block.
    pub cols: usize,
    /// Which copy of this block (0 = primary) under replication.
    pub replica: u32,
}

impl ShardSpec {
    fn new(sip: u32, cube: u32, pe: u32, block: Block, replica: u32) -> Self {
        ShardSpec {
            sip,
            cube,
            pe,
            row_offset: block.row_offset,
            rows: block.rows,
            col_offset: block.col_offset,
            cols: block.cols,
            replica,
        }
    }

    /// The block this shard holds.
    pub fn block(&self) -> Block {
        Block {
            row_offset: self.row_offset,
            rows: self.rows,
            col_offset: self.col_offset,
            cols: self.cols,
        }
    }

    /// Whether this is the primary copy of its block.
    pub fn is_primary(&self) -> bool {
        self.replica == 0
    }
}

/// A placement that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// A field of the pre-0026 API.
    #[error("`{field}` is not a placement field any more (seed ADR-0026): {}", legacy_replacement(.field))]
    LegacyField {
        /// The removed field.
        field: &'static str,
    },
    /// A policy file without a required field.
    #[error("the placement has no `{field}`")]
    MissingField {
        /// The field.
        field: &'static str,
    },
    /// The caller's device is not a SIP of the machine.
    #[error("placement on sip{sip}, which does not exist: the machine has SIPs 0..{sips}")]
    NoSuchSip {
        /// The SIP asked for.
        sip: u32,
        /// SIPs in the machine.
        sips: u32,
    },
    /// More cubes than a SIP has.
    #[error("placement on sip{sip}.cube{cube}, which does not exist: a SIP has cubes 0..{cubes}")]
    NoSuchCube {
        /// The SIP.
        sip: u32,
        /// The first missing cube.
        cube: u32,
        /// Cubes per SIP.
        cubes: u32,
    },
    /// More PEs than a cube has.
    #[error(
        "placement on sip{sip}.cube{cube}.pe{pe}, which does not exist: a cube has PEs 0..{pes}"
    )]
    NoSuchPe {
        /// The SIP.
        sip: u32,
        /// The cube.
        cube: u32,
        /// The first missing PE.
        pe: u32,
        /// PEs per cube.
        pes: u32,
    },
    /// `num_cubes` or `num_pes` of 0.
    #[error("{level} is 0: a placement needs at least one part")]
    NoParts {
        /// `num_cubes` or `num_pes`.
        level: &'static str,
    },
    /// A band split with fewer elements than parts.
    #[error("cannot split {extent} {axis} into {parts} parts of at least one")]
    TooFewElements {
        /// `rows` or `columns`.
        axis: &'static str,
        /// Elements along that axis.
        extent: usize,
        /// Parts asked for.
        parts: u32,
    },
    /// A tensor with no elements.
    #[error("a {rows}x{cols} tensor has no elements to place")]
    Empty {
        /// Rows of the 2-D view.
        rows: usize,
        /// Columns of the 2-D view.
        cols: usize,
    },
}

/// What replaced a removed placement field.
fn legacy_replacement(field: &str) -> &'static str {
    match field {
        "pe_index" => {
            "shards are addressed structurally as (sip, cube, pe); use ShardSpec's sip, cube and pe"
        }
        _ => {
            "the SIP is the caller's device: call torch.ahbm.set_device(rank) \
             (or torch.accelerator.set_device_index(rank)) in each rank's worker; \
             a DPPolicy places cubes and PEs inside that SIP, as structural (sip, cube, pe)"
        }
    }
}

/// A policy as written in YAML or JSON, before the legacy fields are
/// refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    cube: Option<Split>,
    pe: Option<Split>,
    num_cubes: Option<u32>,
    num_pes: Option<u32>,
    sip: Option<IgnoredAny>,
    num_sips: Option<IgnoredAny>,
    pe_index: Option<IgnoredAny>,
}

impl TryFrom<PolicyFile> for DPPolicy {
    type Error = PlacementError;

    fn try_from(file: PolicyFile) -> Result<Self, PlacementError> {
        let legacy = [
            ("sip", file.sip.is_some()),
            ("num_sips", file.num_sips.is_some()),
            ("pe_index", file.pe_index.is_some()),
        ];
        if let Some((field, _)) = legacy.into_iter().find(|&(_, present)| present) {
            return Err(PlacementError::LegacyField { field });
        }
        let missing = |field| PlacementError::MissingField { field };
        Ok(DPPolicy {
            cube: file.cube.ok_or_else(|| missing("cube"))?,
            pe: file.pe.ok_or_else(|| missing("pe"))?,
            num_cubes: file.num_cubes.ok_or_else(|| missing("num_cubes"))?,
            num_pes: file.num_pes.ok_or_else(|| missing("num_pes"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: MachineBounds = MachineBounds {
        sips: 2,
        cubes_per_sip: 16,
        pes_per_cube: 8,
    };

    #[test]
    fn bands_are_even_with_the_remainder_first() {
        let parts = row_wise(Block::whole(10, 3), 4).unwrap();
        let rows: Vec<_> = parts.iter().map(|b| (b.row_offset, b.rows)).collect();
        assert_eq!(rows, [(0, 3), (3, 3), (6, 2), (8, 2)]);
        assert!(parts.iter().all(|b| b.cols == 3 && b.col_offset == 0));
    }

    #[test]
    fn tile_grids_are_as_square_as_the_count_allows() {
        assert_eq!(tile_grid(8), (2, 4));
        assert_eq!(tile_grid(16), (4, 4));
        assert_eq!(tile_grid(7), (1, 7));
        assert_eq!(tile_grid(1), (1, 1));
        let col_major = tiled_col_major(Block::whole(4, 8), 8).unwrap();
        assert_eq!((col_major[1].row_offset, col_major[1].col_offset), (2, 0));
        let row_major = tiled_row_major(Block::whole(4, 8), 8).unwrap();
        assert_eq!((row_major[1].row_offset, row_major[1].col_offset), (0, 2));
    }

    #[test]
    fn replicas_are_numbered_per_block() {
        let policy = DPPolicy::new(Split::Replicate, Split::RowWise, 2, 4);
        let shards = policy.resolve(8, 8, 1, BOUNDS).unwrap();
        assert_eq!(shards.len(), 8);
        assert!(shards.iter().all(|s| s.sip == 1));
        let replicas: Vec<_> = shards.iter().map(|s| (s.cube, s.pe, s.replica)).collect();
        assert_eq!(replicas[5], (1, 1, 1));
        assert_eq!(shards.iter().filter(|s| s.is_primary()).count(), 4);
    }

    #[test]
    fn missing_hardware_is_named() {
        let too_many_pes = DPPolicy::new(Split::RowWise, Split::RowWise, 1, 9);
        let error = too_many_pes.resolve(64, 64, 0, BOUNDS).unwrap_err();
        assert_eq!(
            error.to_string(),
            "placement on sip0.cube0.pe8, which does not exist: a cube has PEs 0..8"
        );
        let error = DPPolicy::single().resolve(4, 4, 2, BOUNDS).unwrap_err();
        assert!(matches!(
            error,
            PlacementError::NoSuchSip { sip: 2, sips: 2 }
        ));
    }
}
