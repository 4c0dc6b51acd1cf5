//! `megatron_mlp`: a transformer MLP `Y = GeLU(X·W1)·W2` with Megatron
//! tensor parallelism over the SIPs (rank = SIP): `W1` split by columns
//! (`ColumnParallelLinear`), `W2` by rows (`RowParallelLinear`), and the
//! all-reduce of the partial outputs (`kernbench::workloads::megatron`,
//! `kernbench::workloads::tensor_parallel`).
//!
//! `--shape TOKENSxHIDDENxFFN` (default 64x256x1024), `--micro-batches`
//! micro-batches (default 2), `--overlap on` to hide each all-reduce
//! behind the next micro-batch's GEMMs. Figures: `compute_ps`, `comm_ps`,
//! `layer_ps`, `exposed_comm_ps`; with `--verify-data` every rank's `Y` is
//! checked exactly against an integer reference.

use kernbench::workloads::tensor_parallel::{Block, CHUNKS, MICRO_BATCHES, OVERLAP, run, schedule};
use kernbench::workloads::tiled_gemm::Activation;
use kernbench::workloads::{Definition, GemmDims, Param};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "Y = GeLU(X W1) W2 with Megatron tensor parallelism over the SIPs",
    params: &[
        Param {
            name: "shape",
            value_name: "MxKxN",
            help: "GEMM dimensions (megatron_mlp: TOKENSxHIDDENxFFN, default 64x256x1024)",
        },
        MICRO_BATCHES,
        CHUNKS,
        OVERLAP,
    ],
    host: |torch, options| {
        Box::pin(async move {
            let dims = options.get::<GemmDims>("shape")?.unwrap_or(DEFAULT_DIMS);
            let (micro_batches, overlap) = schedule(&options)?;
            let block = Block {
                tokens: dims.m,
                hidden: dims.k,
                inner: dims.n,
                activation: Activation::Gelu,
                micro_batches,
                overlap,
            };
            run(torch, block).await
        })
    },
};

/// Tokens, hidden and FFN sizes when none are given.
pub const DEFAULT_DIMS: GemmDims = GemmDims {
    m: 64,
    k: 256,
    n: 1024,
};
