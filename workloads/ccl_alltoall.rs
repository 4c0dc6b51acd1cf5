//! `ccl_alltoall`: `torch.distributed.all_to_all` on every rank (rank =
//! SIP), run by the collective driver (`kernbench::workloads::collective`:
//! `--algorithm`, `--dtype`, `--size`, checks and nccl-tests bandwidths).
//! With `--verify-data`, every tile holds one block per endpoint; block `j`
//! of endpoint `e`'s output ends holding block `e` of endpoint `j`'s input,
//! exact copies.

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.all_to_all on every rank (rank = SIP): time, algbw, busbw",
    params: PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::AllToAll)),
};
