//! `ccl_allreduce`: `torch.distributed.all_reduce` of a cube-mesh tensor
//! on every rank (rank = SIP), the seeds' unified CCL bench, run by the
//! collective driver (`kernbench::workloads::collective`: `--algorithm`,
//! `--dtype`, `--op`, `--size`, checks, nccl-tests bandwidths and the
//! algorithm's α-β cost model `model_ps` when it states one). With
//! `--verify-data`, every endpoint's tile ends holding the reduction of all
//! tiles (seed ADR-0032: each cube's tile is one contribution), within the
//! dtype's bound of an f64 reference (`collective::bound`; a `prod` allows
//! one subnormal spacing per combine, ADR-0031) and bitwise the same on
//! every endpoint.
//!
//! [`pattern`] is the small-integer f16 input of the tests that drive
//! `all_reduce` themselves.

use half::f16;
use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, REDUCING_PARAMS};
use ndarray::Array2;

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.all_reduce on every rank (rank = SIP): time, model, algbw, busbw",
    params: REDUCING_PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::AllReduce)),
};

/// `rank`'s `(cubes, n_elem)` input: element `i` of cube `c`'s tile is
/// `1 + (rank × cubes + c + i) mod 4`, so every partial sum is exact in
/// f16.
pub fn pattern(rank: usize, cubes: usize, n_elem: usize) -> Array2<f16> {
    Array2::from_shape_fn((cubes, n_elem), |(c, i)| {
        f16::from_f32((1 + (rank * cubes + c + i) % 4) as f32)
    })
}
