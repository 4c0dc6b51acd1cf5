//! `ccl_broadcast`: `torch.distributed.broadcast` on every rank (rank =
//! SIP), run by the collective driver (`kernbench::workloads::collective`:
//! `--algorithm`, `--dtype`, `--size`, checks and nccl-tests bandwidths).
//! With `--verify-data`, every endpoint's tile ends holding the root
//! endpoint's (cube `root_cube`, default 0, of rank 0), exact copies,
//! bitwise the same everywhere.

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.broadcast on every rank (rank = SIP): time, algbw, busbw",
    params: PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::Broadcast)),
};
