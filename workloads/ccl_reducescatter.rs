//! `ccl_reducescatter`: `torch.distributed.reduce_scatter` on every rank
//! (rank = SIP), run by the collective driver
//! (`kernbench::workloads::collective`: `--algorithm`, `--dtype`, `--op`,
//! `--size`, checks and nccl-tests bandwidths). With `--verify-data`, every
//! endpoint's input holds one block per endpoint; endpoint `e`'s output
//! ends holding the reduction (`--op`) of block `e` of every input, within
//! the dtype's bound of an f64 reference (`collective::bound`; a `prod`
//! allows one subnormal spacing per combine, ADR-0031).

use kernbench::ccl::Collective;
use kernbench::workloads::Definition;
use kernbench::workloads::collective::{self, REDUCING_PARAMS};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.reduce_scatter on every rank (rank = SIP): time, algbw, busbw",
    params: REDUCING_PARAMS,
    host: |torch, options| Box::pin(collective::run(torch, options, Collective::ReduceScatter)),
};
