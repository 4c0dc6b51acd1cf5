//! `ccl_scatter`: `torch.distributed.scatter` from rank 0 on every rank
//! (rank = SIP; nccl-tests' `scatter_perf`), run by the collective driver
//! (`kernbench::workloads::collective`: `--algorithm`, `--dtype`, `--size`
//! = the root's list per rank, checks, `model_ps` and nccl-tests
//! bandwidths: `S` the root's whole list, busbw factor `(n − 1) / n` over
//! the ranks). With `--verify-data`, every rank's output tile of each cube
//! holds its block of rank 0's input tile of that cube, exact copies.

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.scatter from rank 0 on every rank (rank = SIP): time, algbw, busbw",
    params: PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::Scatter)),
};
