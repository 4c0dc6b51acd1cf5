//! `ccl_sendrecv`: `torch.distributed.isend` / `recv` around the ring of
//! ranks (rank = SIP; nccl-tests' `sendrecv_perf`), run by the collective
//! driver (`kernbench::workloads::collective`: `--algorithm`, `--dtype`,
//! `--size`, checks and nccl-tests bandwidths, busbw factor 1). Every
//! rank sends its input to `rank + 1` and receives `rank − 1`'s into its
//! output. With `--verify-data`, every cube tile of the output holds the
//! same cube's input of the previous rank, exact copies.

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed isend/recv to the next rank on every rank (rank = SIP): time, algbw, busbw",
    params: PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::SendRecv)),
};
