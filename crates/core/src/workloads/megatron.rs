//! Megatron-LM tensor parallelism over rank = SIP (seed ADR-0027): the
//! column- and row-parallel linear layers as host building blocks over the
//! tiled GEMM (ADR-0014).
//!
//! A weight `W` (`in × out`) of a [`ColumnParallelLinear`] is split by
//! columns, as Megatron-LM's `ColumnParallelLinear` (without gathering the
//! output): rank `r` holds `W[:, O_r]`, `O_r` the `r`-th band of the output
//! features, and computes `Y_r = act(X · W[:, O_r])` with no communication.
//! A [`RowParallelLinear`] splits `W` by rows (`input_is_parallel`): rank `r`
//! holds `W[I_r, :]`, takes the column slice `X[:, I_r]` its column-parallel
//! predecessor produced, and computes the partial `X[:, I_r] · W[I_r, :]`;
//! the all-reduce of the partials is `Y`.
//!
//! Inside a rank the same cut repeats over the cubes (the cube problems of
//! ADR-0014 D2): cube `c` holds the `c`-th band of the rank's features,
//! every band padded with zeros to the widest. So the column-parallel
//! layer's cube `c` writes exactly the `K` slice the row-parallel layer's
//! cube `c` reads, and the row-parallel partials of every cube of every
//! rank are the contributions `torch.distributed.all_reduce` sums (one tile
//! per cube, seed ADR-0032).

use std::ops::Range;

use ndarray::{Array2, ArrayView2, s};

use super::WorkloadError;
use super::tiled_gemm::{Problem, Tiling};
use crate::mem::DType;
use crate::runtime::placement::{Block, row_wise};

/// How a rank's share of one dimension of a weight is cut over its cubes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slices {
    /// The features cube `c` holds, at index `c`.
    pub cubes: Vec<Range<usize>>,
    /// The widest slice: every cube's is padded to it.
    pub width: usize,
}

impl Slices {
    /// `features` split into `world` rank bands and `rank`'s band into
    /// `cubes` cube bands (the first bands one longer when uneven).
    pub fn new(
        features: usize,
        (world, rank): (u32, u32),
        cubes: u32,
    ) -> Result<Slices, WorkloadError> {
        let placement = |e| WorkloadError::BadOption(format!("tensor parallelism: {e}"));
        let ranks = row_wise(Block::whole(features, 1), world).map_err(placement)?;
        let band = ranks[rank as usize];
        let cubes = row_wise(band, cubes).map_err(placement)?;
        let slices: Vec<_> = cubes
            .iter()
            .map(|b| b.row_offset..b.row_offset + b.rows)
            .collect();
        let width = slices.iter().map(ExactSizeIterator::len).max().unwrap_or(0);
        Ok(Slices {
            cubes: slices,
            width,
        })
    }
}

/// `matrix[rows, cols]` zero-padded to `shape`.
fn padded<T: Copy + Default>(
    matrix: ArrayView2<'_, T>,
    (rows, cols): (Range<usize>, Range<usize>),
    shape: (usize, usize),
) -> Array2<T> {
    let mut out = Array2::default(shape);
    let (r, c) = (rows.len(), cols.len());
    out.slice_mut(s![..r, ..c])
        .assign(&matrix.slice(s![rows, cols]));
    out
}

/// `Y_r = act(X · W[:, O_r])`: see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnParallelLinear {
    /// Input features (rows of `W`).
    pub in_features: usize,
    /// This rank's output features, by cube.
    pub slices: Slices,
}

impl ColumnParallelLinear {
    /// Rank `rank` of `world` of an `in_features × out_features` layer on
    /// `cubes` cubes.
    pub fn new(
        (in_features, out_features): (usize, usize),
        (world, rank): (u32, u32),
        cubes: u32,
    ) -> Result<Self, WorkloadError> {
        Ok(ColumnParallelLinear {
            in_features,
            slices: Slices::new(out_features, (world, rank), cubes)?,
        })
    }

    /// One cube's GEMM for `tokens` input rows of `dtype`.
    pub fn problem(&self, tokens: usize, dtype: DType) -> Problem {
        Problem {
            m: tokens,
            k: self.in_features,
            n: self.slices.width,
            dtype,
            out: dtype,
        }
    }

    /// Cube `cube`'s weight: its columns of `weight`, zero-padded.
    pub fn shard<T: Copy + Default>(&self, weight: ArrayView2<'_, T>, cube: usize) -> Array2<T> {
        let cols = self.slices.cubes[cube].clone();
        let shape = (self.in_features, self.slices.width);
        padded(weight, (0..self.in_features, cols), shape)
    }
}

/// The partial `X[:, I_r] · W[I_r, :]`: see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowParallelLinear {
    /// This rank's input features, by cube.
    pub slices: Slices,
    /// Output features (columns of `W`).
    pub out_features: usize,
}

impl RowParallelLinear {
    /// Rank `rank` of `world` of an `in_features × out_features` layer on
    /// `cubes` cubes.
    pub fn new(
        (in_features, out_features): (usize, usize),
        (world, rank): (u32, u32),
        cubes: u32,
    ) -> Result<Self, WorkloadError> {
        Ok(RowParallelLinear {
            slices: Slices::new(in_features, (world, rank), cubes)?,
            out_features,
        })
    }

    /// One cube's GEMM for `tokens` input rows of `dtype`.
    pub fn problem(&self, tokens: usize, dtype: DType) -> Problem {
        Problem {
            m: tokens,
            k: self.slices.width,
            n: self.out_features,
            dtype,
            out: dtype,
        }
    }

    /// Cube `cube`'s weight: its rows of `weight`, zero-padded.
    pub fn shard<T: Copy + Default>(&self, weight: ArrayView2<'_, T>, cube: usize) -> Array2<T> {
        let rows = self.slices.cubes[cube].clone();
        let shape = (self.slices.width, self.out_features);
        padded(weight, (rows, 0..self.out_features), shape)
    }

    /// Tiles that read the blocked output of `before` (tiled `first`) as
    /// they are: the same `mt`, `kt = first.nt`, and `nt` as
    /// [`Tiling::choose`] would, halved until the PE's TCM need fits.
    pub fn tiling_after(
        &self,
        first: Tiling,
        problem: &Problem,
        pes: usize,
        tcm: u64,
    ) -> Result<Tiling, WorkloadError> {
        let mut tiling = Tiling {
            mt: first.mt,
            kt: first.nt,
            nt: Tiling::choose(problem, pes, tcm)?.nt,
        };
        while tiling.tcm_bytes(problem) > tcm {
            if tiling.nt == 1 {
                return Err(WorkloadError::BadOption(format!(
                    "row-parallel tiles {tiling} do not fit a PE's TCM of {tcm} B"
                )));
            }
            tiling.nt = tiling.nt.div_ceil(2);
        }
        Ok(tiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_then_cubes_take_bands_of_the_features() {
        // 10 features over 2 ranks (5 each), rank 1's over 2 cubes: 3 + 2.
        let slices = Slices::new(10, (2, 1), 2).unwrap();
        assert_eq!(slices.cubes, vec![5..8, 8..10]);
        assert_eq!(slices.width, 3);
        assert!(Slices::new(3, (2, 0), 4).is_err(), "2 features, 4 cubes");
    }

    #[test]
    fn shards_are_the_weight_slices_zero_padded() {
        let w = Array2::from_shape_fn((2, 10), |(r, c)| (r * 10 + c) as i32);
        let column = ColumnParallelLinear::new((2, 10), (2, 1), 2).unwrap();
        assert_eq!(
            column.shard(w.view(), 1),
            ndarray::array![[8, 9, 0], [18, 19, 0]]
        );
        let wt = w.t().to_owned();
        let row = RowParallelLinear::new((10, 2), (2, 1), 2).unwrap();
        assert_eq!(
            row.shard(wt.view(), 1),
            ndarray::array![[8, 18], [9, 19], [0, 0]]
        );
    }

    #[test]
    fn the_row_parallel_tiles_read_the_column_parallel_output() {
        let column = ColumnParallelLinear::new((256, 1024), (2, 0), 16).unwrap();
        let row = RowParallelLinear::new((1024, 256), (2, 0), 16).unwrap();
        let (p1, p2) = (column.problem(64, DType::F16), row.problem(64, DType::F16));
        assert_eq!(p1.n, p2.k);
        let t1 = Tiling::choose(&p1, 8, 8 << 20).unwrap();
        let t2 = row.tiling_after(t1, &p2, 8, 8 << 20).unwrap();
        let (g1, g2) = (t1.grid(&p1), t2.grid(&p2));
        assert_eq!((t2.mt, t2.kt), (t1.mt, t1.nt));
        assert_eq!((g2.mb, g2.kb), (g1.mb, g1.nb));
    }
}
