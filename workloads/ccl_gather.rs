//! `ccl_gather`: `torch.distributed.gather` to rank 0 on every rank (rank
//! = SIP; nccl-tests' `gather_perf`), run by the collective driver
//! (`kernbench::workloads::collective`: `--algorithm`, `--dtype`, `--size`,
//! checks, `model_ps` and nccl-tests bandwidths: `S` the root's whole
//! list, busbw factor `(n − 1) / n` over the ranks). With
//! `--verify-data`, block `r` of every cube tile of rank 0's output holds
//! rank `r`'s input tile of that cube, exact copies, and the other ranks'
//! outputs stay untouched.

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.gather to rank 0 on every rank (rank = SIP): time, algbw, busbw",
    params: PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::Gather)),
};
