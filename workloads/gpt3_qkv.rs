//! `gpt3_qkv`: the QKV projection of a GPT-3 layer with Megatron tensor
//! parallelism over the SIPs (rank = SIP). `W_qkv` (`d_model × 3·d_model`)
//! is split by columns, so each rank computes its heads' Q, K and V with
//! no communication. Attention is not modelled: a row-parallel projection
//! of the QKV activations back to `d_model` (`3·d_model × d_model`, split
//! by rows) stands in for attention and its output projection, and its
//! partial outputs are all-reduced where Megatron places the layer's
//! all-reduce (`kernbench::workloads::tensor_parallel`).
//!
//! `--model` picks `d_model` from the GPT-3 paper's table (Brown et al.
//! 2020, table 2.1): small 768, medium 1024, large 1536, xl 2048, 2.7b
//! 2560, 6.7b 4096, 13b 5140, 175b 12288. Tokens are `--batch × --seq`
//! (default 1 × 64 of `small`, checked with `--verify-data` in seconds);
//! the full 175B layer is `--model 175b --seq 2048 --micro-batches 16`, run
//! timing-only (with `--fidelity flow` it takes seconds): each micro-batch's
//! all-reduce tile, `tokens / micro_batches × d_model × 2` bytes per cube, must
//! fit PE 0's TCM beside the GEMM tiles, so the default 2 micro-batches of 1024
//! tokens (24 MiB) are refused by the algorithm as out of TCM.
//! `--micro-batches` (deprecated alias `--chunks`) and `--overlap` as in
//! `megatron_mlp`.

use std::num::NonZeroUsize;

use kernbench::workloads::tensor_parallel::{Block, CHUNKS, MICRO_BATCHES, OVERLAP, run, schedule};
use kernbench::workloads::tiled_gemm::Activation;
use kernbench::workloads::{Definition, Param, WorkloadError};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "GPT-3 QKV projection with Megatron tensor parallelism and its all-reduce",
    params: &[
        Param {
            name: "model",
            value_name: "NAME",
            help: "GPT-3 size: small, medium, large, xl, 2.7b, 6.7b, 13b, 175b (default small)",
        },
        Param {
            name: "batch",
            value_name: "N",
            help: "Sequences per batch (default 1)",
        },
        Param {
            name: "seq",
            value_name: "N",
            help: "Tokens per sequence (default 64; GPT-3 trains at 2048)",
        },
        MICRO_BATCHES,
        CHUNKS,
        OVERLAP,
    ],
    host: |torch, options| {
        Box::pin(async move {
            let model = options.get::<String>("model")?;
            let hidden = d_model(model.as_deref().unwrap_or("small"))?;
            let batch = options
                .get::<NonZeroUsize>("batch")?
                .map_or(1, NonZeroUsize::get);
            let seq = options
                .get::<NonZeroUsize>("seq")?
                .map_or(64, NonZeroUsize::get);
            let (micro_batches, overlap) = schedule(&options)?;
            let block = Block {
                tokens: batch * seq,
                hidden,
                inner: 3 * hidden,
                activation: Activation::Identity,
                micro_batches,
                overlap,
            };
            run(torch, block).await
        })
    },
};

/// GPT-3's model sizes and their `d_model` (the paper's table 2.1).
pub const MODELS: [(&str, usize); 8] = [
    ("small", 768),
    ("medium", 1024),
    ("large", 1536),
    ("xl", 2048),
    ("2.7b", 2560),
    ("6.7b", 4096),
    ("13b", 5140),
    ("175b", 12288),
];

/// The `d_model` of GPT-3 size `name`.
fn d_model(name: &str) -> Result<usize, WorkloadError> {
    MODELS
        .iter()
        .find(|(model, _)| *model == name)
        .map(|&(_, hidden)| hidden)
        .ok_or_else(|| {
            let known: Vec<_> = MODELS.iter().map(|(model, _)| *model).collect();
            WorkloadError::BadOption(format!(
                "--model {name}: expected one of {}",
                known.join(", ")
            ))
        })
}
