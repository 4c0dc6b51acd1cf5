//! `ccl_reduce`: `torch.distributed.reduce` on every rank (rank = SIP), run
//! by the collective driver (`kernbench::workloads::collective`:
//! `--algorithm`, `--dtype`, `--op`, `--size`, checks and nccl-tests
//! bandwidths). With `--verify-data`, the root endpoint's tile (cube
//! `root_cube`, default 0, of rank 0) ends holding the reduction (`--op`)
//! of every tile, within the dtype's bound of an f64 reference
//! (`collective::bound`; a `prod` allows one subnormal spacing per
//! combine, ADR-0031); the others keep theirs.

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, REDUCING_PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.reduce on every rank (rank = SIP): time, algbw, busbw",
    params: REDUCING_PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::Reduce)),
};
