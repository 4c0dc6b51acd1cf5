//! `ccl_allgather`: `torch.distributed.all_gather` on every rank (rank =
//! SIP), run by the collective driver (`kernbench::workloads::collective`:
//! `--algorithm`, `--dtype`, `--size`, checks and nccl-tests bandwidths).
//! With `--verify-data`, every endpoint's output (one block per endpoint)
//! ends holding every endpoint's input block, exact copies on every
//! endpoint, bitwise the same everywhere.

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.all_gather on every rank (rank = SIP): time, algbw, busbw",
    params: PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::AllGather)),
};
