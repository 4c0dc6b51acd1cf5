//! One transformer training step as Chakra traces, one per rank: Megatron
//! tensor parallelism (TP), data parallelism (DP) and a pipeline (PP),
//! scheduled 1F1B (PipeDream-flush: `P − s − 1` warm-up forwards on stage
//! `s`, then one forward and one backward in turn, then the remaining
//! backwards) or GPipe (every forward, then every backward); ADR-0095.
//!
//! Ranks: `rank = (stage × DP + replica) × TP + shard` (TP fastest, as
//! Megatron-LM lays them out), so a TP group is `TP` neighbouring SIPs.
//! Per layer, micro-batch and TP rank, with `t = s·b` tokens (sequence
//! `s`, micro-batch size `b`), hidden size `h`, `e` bytes an element and
//! `T = TP`:
//! - forward: the QKV GEMM (`2·t·h·q/T` FLOPs, `q = h + 2·kv·h/heads`:
//!   `3h` for multi-head attention, less with GQA), attention
//!   (`4·b·s²·h/T`), the output projection (`2·t·h²/T`), a TP all-reduce
//!   of `t·h` activations, the MLP's up GEMM (`2·t·h·u/T`, `u` = `ffn`,
//!   or `2·ffn` for SwiGLU's fused gate and up) and down GEMM
//!   (`2·t·ffn·h/T`), a TP all-reduce;
//! - backward: each GEMM twice its forward FLOPs (input and weight
//!   gradients), in reverse, with the two TP all-reduces of the input
//!   gradients;
//! - between stages: a SEND / RECV of the `t·h` activations (forward) and
//!   of their gradients (backward), tag `2m` and `2m + 1` for micro-batch
//!   `m`;
//! - DP by all-reduce: the stage's gradients (each layer's parameters over
//!   `T`) in buckets of at least [`BUCKET_BYTES`], last layer first, each
//!   issued when the last micro-batch's backward of its layers is done, so
//!   it overlaps the remaining backward; DP as ZeRO-3 / FSDP: an
//!   all-gather of each layer's weight shard before its forward and its
//!   backward, and a reduce-scatter of its gradients after its backward,
//!   every micro-batch.
//!
//! Mixture of experts (`Model::experts` above 1, ADR-0108; a dense model
//! is the case of one expert and generates what it did before): with
//! `E` experts, top-`k` routing and expert parallelism `EP` (the experts
//! sharded over `EP` neighbouring DP replicas of a stage, `E/EP` a rank,
//! EP group `ep{i}`), a layer's MLP is, after the first TP all-reduce:
//! - the router GEMM (`2·t·h·E` FLOPs, replicated over TP);
//! - the dispatch all-to-all over the EP group, `t·k·h·e` bytes per rank
//!   (each of the `t` tokens sends its `k` copies of `h` elements; the
//!   collective is uniform, every rank the mean);
//! - the up and down GEMMs of the rank's experts on the `r` tokens they
//!   receive (`2·r·h·u/T` and `2·r·ffn·h/T`, weights of `E/EP` experts
//!   touched); `r` is the mean `t·k` except with `--moe-skew σ`: in layer
//!   `l` the EP rank `l mod EP` (replica mod EP) receives `⌊t·k·(1 + σ)⌋`
//!   and every other `⌊(EP·t·k − that)/(EP − 1)⌋`
//!   ([`Step::expert_tokens`]);
//! - the combine all-to-all (`t·k·h·e` bytes per rank) back, then the TP
//!   all-reduce;
//! - backward: the combine's mirror all-to-all, the expert GEMMs (twice
//!   the FLOPs), the dispatch's mirror, the router, the TP all-reduce.
//!
//! The DP gradient all-reduce of a MoE stage: with EP 1 the whole layer
//! over the DP group; with EP above 1 the shared parameters (attention,
//! router) over the DP group and then the experts' over the expert-DP
//! group `edp{i}` (the `DP/EP` replicas holding the same experts, if more
//! than one). ZeRO-3 is refused for a MoE model. The MFU FLOPs count the
//! active experts: every EP rank at the mean `t·k` tokens.
//!
//! A rank's compute nodes run in schedule order (each has a control
//! dependency on the one before); communication depends on the compute
//! that produces its data. Embeddings, layer norms, softmax, dropout and
//! the optimizer are left out (a few percent of the FLOPs).

use std::collections::BTreeMap;

use super::{GenError, collective_node, compute_node, p2p_node, trace};
use crate::chakra::io::RawTrace;
use crate::chakra::schema::{CommType, Node};

/// Process-group names and their ranks (written as
/// `PREFIX.comm_groups.json`).
pub type Groups = BTreeMap<String, Vec<usize>>;

/// The smallest DP gradient bucket (PyTorch DDP's default, 25 MiB).
pub const BUCKET_BYTES: u64 = 25 << 20;

/// How a layer's MLP is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mlp {
    /// Two GEMMs, `h → ffn → h`, GeLU between (GPT-3).
    Gelu,
    /// SwiGLU: the gate and up projections (`h → 2·ffn`, fused as
    /// Megatron-LM fuses them), then down (`ffn → h`) (Llama-3).
    SwiGlu,
}

/// A model's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    /// Its name.
    pub name: &'static str,
    /// Transformer layers.
    pub layers: usize,
    /// Hidden size.
    pub hidden: u64,
    /// Attention (query) heads.
    pub heads: u64,
    /// Key/value heads (`heads` for multi-head attention, fewer for GQA).
    pub kv_heads: u64,
    /// The MLP's inner size.
    pub ffn: u64,
    /// The MLP's kind.
    pub mlp: Mlp,
    /// Experts of each layer's MLP (1: a dense MLP; more: a
    /// mixture-of-experts layer with a router).
    pub experts: u64,
    /// Experts each token is routed to (1 for a dense model).
    pub top_k: u64,
}

impl Model {
    const fn gpt3(name: &'static str, layers: usize, hidden: u64, heads: u64) -> Model {
        Model {
            name,
            layers,
            hidden,
            heads,
            kv_heads: heads,
            ffn: 4 * hidden,
            mlp: Mlp::Gelu,
            experts: 1,
            top_k: 1,
        }
    }

    const fn llama(name: &'static str, layers: usize, hidden: u64, heads: u64, ffn: u64) -> Model {
        Model {
            name,
            layers,
            hidden,
            heads,
            kv_heads: 8,
            ffn,
            mlp: Mlp::SwiGlu,
            experts: 1,
            top_k: 1,
        }
    }

    /// Mixtral-8x7B's shape (Jiang et al. 2024, "Mixtral of Experts",
    /// table 1): Llama-like layers, each MLP 8 SwiGLU experts, top-2.
    const fn mixtral(name: &'static str, experts: u64, top_k: u64) -> Model {
        Model {
            experts,
            top_k,
            ..Model::llama(name, 32, 4096, 32, 14336)
        }
    }

    /// A mixture-of-experts model (more than one expert a layer).
    pub fn is_moe(&self) -> bool {
        self.experts > 1
    }

    /// The width of the fused Q, K and V projection: `h + 2·kv_heads·h/heads`
    /// (multiplied first: `3h` for multi-head attention even where `h` is
    /// not a multiple of the heads, as in GPT-3 1.3B and 13B).
    pub fn qkv_width(&self) -> u64 {
        self.hidden + 2 * (self.kv_heads * self.hidden / self.heads)
    }

    /// The width of the MLP's first GEMM (`ffn`, or `2·ffn` for SwiGLU).
    pub fn up_width(&self) -> u64 {
        match self.mlp {
            Mlp::Gelu => self.ffn,
            Mlp::SwiGlu => 2 * self.ffn,
        }
    }

    /// Parameters of one layer's attention (QKV and output projection).
    pub fn attention_params(&self) -> u64 {
        self.hidden * self.qkv_width() + self.hidden * self.hidden
    }

    /// Parameters of one expert's MLP (of the MLP, for a dense model).
    pub fn expert_params(&self) -> u64 {
        self.hidden * self.up_width() + self.ffn * self.hidden
    }

    /// Parameters of one layer's router (`h × experts`; none for a dense
    /// model).
    pub fn router_params(&self) -> u64 {
        match self.is_moe() {
            true => self.hidden * self.experts,
            false => 0,
        }
    }

    /// Parameters of one layer's MLP: every expert and the router.
    pub fn mlp_params(&self) -> u64 {
        self.experts * self.expert_params() + self.router_params()
    }
}

/// The models `--model` names: the GPT-3 family (Brown et al. 2020,
/// table 2.1), Llama-3 8B and 70B (Meta 2024: GQA with 8 KV heads,
/// SwiGLU), and Mixtral-8x7B (Llama-3 8B's layers with 8 SwiGLU experts a
/// layer, top-2).
pub const MODELS: &[Model] = &[
    Model::gpt3("gpt3-125m", 12, 768, 12),
    Model::gpt3("gpt3-350m", 24, 1024, 16),
    Model::gpt3("gpt3-760m", 24, 1536, 16),
    Model::gpt3("gpt3-1.3b", 24, 2048, 24),
    Model::gpt3("gpt3-2.7b", 32, 2560, 32),
    Model::gpt3("gpt3-6.7b", 32, 4096, 32),
    Model::gpt3("gpt3-13b", 40, 5140, 40),
    Model::gpt3("gpt3-175b", 96, 12288, 96),
    Model::llama("llama3-8b", 32, 4096, 32, 14336),
    Model::llama("llama3-70b", 80, 8192, 64, 28672),
    Model::mixtral("mixtral-8x7b", 8, 2),
];

/// The model called `name`.
pub fn model(name: &str) -> Result<Model, GenError> {
    MODELS
        .iter()
        .copied()
        .find(|m| m.name == name)
        .ok_or_else(|| GenError::UnknownModel {
            name: name.to_owned(),
        })
}

/// The pipeline schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// 1F1B (PipeDream-flush): `P − s − 1` warm-up forwards on stage `s`,
    /// then one forward and one backward in turn.
    #[default]
    OneFOneB,
    /// GPipe: every forward, then every backward.
    GPipe,
}

impl Schedule {
    /// Its name as `--schedule` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::OneFOneB => "1f1b",
            Schedule::GPipe => "gpipe",
        }
    }

    /// The schedule `--schedule NAME` names.
    pub fn parse(name: &str) -> Result<Schedule, GenError> {
        match name {
            "1f1b" => Ok(Schedule::OneFOneB),
            "gpipe" => Ok(Schedule::GPipe),
            _ => Err(GenError::Flag(format!(
                "--schedule {name}: expected 1f1b or gpipe"
            ))),
        }
    }
}

/// How data parallelism keeps and synchronises the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataParallel {
    /// Every replica holds the whole stage; gradients all-reduced in
    /// buckets (PyTorch DDP, Megatron-LM).
    #[default]
    AllReduce,
    /// ZeRO-3 / FSDP (full shard): weights, gradients and optimizer state
    /// sharded over the DP group; each layer's weights all-gathered before
    /// its forward and before its backward, its gradients reduce-scattered
    /// after its backward, every micro-batch.
    Zero,
}

impl DataParallel {
    /// Its name as `--dp-mode` takes it.
    pub fn name(self) -> &'static str {
        match self {
            DataParallel::AllReduce => "allreduce",
            DataParallel::Zero => "zero",
        }
    }

    /// The mode `--dp-mode NAME` names.
    pub fn parse(name: &str) -> Result<DataParallel, GenError> {
        match name {
            "allreduce" => Ok(DataParallel::AllReduce),
            "zero" | "fsdp" => Ok(DataParallel::Zero),
            _ => Err(GenError::Flag(format!(
                "--dp-mode {name}: expected allreduce or zero (fsdp)"
            ))),
        }
    }
}

/// The element type of activations, weights and gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dtype {
    /// IEEE half.
    #[default]
    F16,
    /// bfloat16.
    Bf16,
    /// IEEE single.
    F32,
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 => 4,
        }
    }

    /// Its name as `--dtype` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
        }
    }

    /// The type `--dtype NAME` names.
    pub fn parse(name: &str) -> Result<Dtype, GenError> {
        match name {
            "f16" => Ok(Dtype::F16),
            "bf16" => Ok(Dtype::Bf16),
            "f32" => Ok(Dtype::F32),
            _ => Err(GenError::Flag(format!(
                "--dtype {name}: expected f16, bf16 or f32"
            ))),
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The model.
    pub model: Model,
    /// Tensor-parallel degree.
    pub tp: usize,
    /// Data-parallel degree.
    pub dp: usize,
    /// Pipeline stages.
    pub pp: usize,
    /// Layers (the model's, or fewer to shorten a run).
    pub layers: usize,
    /// Micro-batches per step.
    pub micro_batches: usize,
    /// Sequence length (tokens per sequence).
    pub seq: u64,
    /// Sequences per micro-batch.
    pub micro_batch: u64,
    /// Element type of activations, weights and gradients.
    pub dtype: Dtype,
    /// The pipeline schedule.
    pub schedule: Schedule,
    /// How data parallelism synchronises.
    pub data_parallel: DataParallel,
    /// Expert-parallel degree: a MoE layer's experts sharded over `ep`
    /// neighbouring DP replicas of a stage (divides DP and the experts).
    pub ep: usize,
    /// Load skew: the busiest EP rank of a layer receives `1 + moe_skew`
    /// times the mean tokens (`0 ≤ moe_skew ≤ ep − 1`; see
    /// [`Step::expert_tokens`]).
    pub moe_skew: f64,
}

impl Step {
    /// `model` whole on one rank: one micro-batch of one sequence of 2,048
    /// tokens, f16, 1F1B, DP by all-reduce.
    pub fn new(model: Model) -> Step {
        Step {
            model,
            tp: 1,
            dp: 1,
            pp: 1,
            layers: model.layers,
            micro_batches: 1,
            seq: 2048,
            micro_batch: 1,
            dtype: Dtype::F16,
            schedule: Schedule::OneFOneB,
            data_parallel: DataParallel::AllReduce,
            ep: 1,
            moe_skew: 0.0,
        }
    }

    /// Tokens per micro-batch.
    pub fn tokens(&self) -> u64 {
        self.seq * self.micro_batch
    }

    /// Checks the degrees against the model.
    pub fn check(&self) -> Result<(), GenError> {
        let positive = [
            ("--tp", self.tp),
            ("--dp", self.dp),
            ("--pp", self.pp),
            ("--layers", self.layers),
            ("--micro-batches", self.micro_batches),
            ("--seq", self.seq as usize),
            ("--micro-batch-size", self.micro_batch as usize),
            ("--ep", self.ep),
        ];
        if let Some((flag, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(GenError::Zero(flag));
        }
        if self.layers % self.pp != 0 {
            return Err(GenError::LayersPerStage {
                layers: self.layers,
                pp: self.pp,
            });
        }
        let tp = self.tp as u64;
        let kv = self.model.kv_heads;
        if self.model.heads % tp != 0
            || self.model.hidden % tp != 0
            || (kv % tp != 0 && tp % kv != 0)
        {
            return Err(GenError::TpDivides {
                tp: self.tp,
                model: self.model.name,
                heads: self.model.heads,
                hidden: self.model.hidden,
            });
        }
        self.check_experts()
    }

    /// Checks `--ep` and `--moe-skew` against the DP degree and the model.
    fn check_experts(&self) -> Result<(), GenError> {
        let ep = self.ep as u64;
        if !self.model.is_moe() && self.ep > 1 {
            return Err(GenError::Flag(format!(
                "--ep {}: {} is a dense model (one MLP a layer); expert parallelism needs a \
                 mixture-of-experts model (mixtral-8x7b)",
                self.ep, self.model.name
            )));
        }
        if self.dp % self.ep != 0 || self.model.experts % ep != 0 {
            return Err(GenError::EpDivides {
                ep: self.ep,
                dp: self.dp,
                model: self.model.name,
                experts: self.model.experts,
            });
        }
        let most = (self.ep - 1) as f64;
        if !(0.0..=most).contains(&self.moe_skew) {
            return Err(GenError::Flag(format!(
                "--moe-skew {}: expected 0 to --ep − 1 = {most} (the busiest EP rank receives \
                 1 + skew times the mean tokens)",
                self.moe_skew
            )));
        }
        if self.model.is_moe() && self.data_parallel == DataParallel::Zero {
            return Err(GenError::Flag(format!(
                "--dp-mode zero: not supported for the mixture-of-experts model {}; use \
                 --dp-mode allreduce",
                self.model.name
            )));
        }
        Ok(())
    }

    /// Ranks: `TP × DP × PP`.
    pub fn ranks(&self) -> usize {
        self.tp * self.dp * self.pp
    }

    /// `(stage, replica, shard)` of `rank`.
    pub fn coords(&self, rank: usize) -> (usize, usize, usize) {
        (
            rank / (self.tp * self.dp),
            rank / self.tp % self.dp,
            rank % self.tp,
        )
    }

    fn rank(&self, (stage, replica, shard): (usize, usize, usize)) -> usize {
        (stage * self.dp + replica) * self.tp + shard
    }

    /// The FLOPs of one training step on every rank together (forward
    /// and backward GEMMs and attention, as generated, every EP rank at
    /// the mean `t·k` routed tokens: the active experts only): the MFU
    /// numerator.
    pub fn flops(&self) -> u64 {
        let mean = self.tokens() * self.model.top_k;
        let per_layer: u64 = self.layer_gemms(mean).iter().map(|g| g.1).sum::<u64>() * 3;
        per_layer * (self.tp * self.dp) as u64 * self.layers as u64 * self.micro_batches as u64
    }

    /// The forward compute of one layer on one TP rank whose experts
    /// receive `routed` tokens (`t` for a dense model): (name, FLOPs,
    /// bytes touched), in order: `qkv`, `attention`, `proj`, then `router`
    /// for a MoE model, `fc1`, `fc2`.
    fn layer_gemms(&self, routed: u64) -> Vec<(&'static str, u64, u64)> {
        let (t, h, tp) = (self.tokens(), self.model.hidden, self.tp as u64);
        let (s, b, e) = (self.seq, self.micro_batch, self.dtype.bytes());
        // `m × k` by `k × n`, over `w` weight matrices (the rank's experts).
        let gemm_of =
            |m: u64, k: u64, n: u64, w: u64| (2 * m * k * n, (m * k + w * k * n + m * n) * e);
        let gemm = |m: u64, k: u64, n: u64| gemm_of(m, k, n, 1);
        let qkv = gemm(t, h, self.model.qkv_width().div_ceil(tp));
        let proj = gemm(t, h / tp, h);
        let local = self.local_experts();
        let fc1 = gemm_of(routed, h, self.model.up_width().div_ceil(tp), local);
        let fc2 = gemm_of(routed, self.model.ffn.div_ceil(tp), h, local);
        let heads = self.model.heads / tp;
        // Q·Kᵀ and the weighted sum of V, per sequence of `s` tokens.
        let attention = (
            4 * b * s * s * h / tp,
            (4 * t * h / tp + 2 * heads * b * s * s) * e,
        );
        let mut gemms = vec![
            ("qkv", qkv.0, qkv.1),
            ("attention", attention.0, attention.1),
            ("proj", proj.0, proj.1),
        ];
        if self.model.is_moe() {
            let router = gemm(t, h, self.model.experts);
            gemms.push(("router", router.0, router.1));
        }
        gemms.extend([("fc1", fc1.0, fc1.1), ("fc2", fc2.0, fc2.1)]);
        gemms
    }

    /// Experts each EP rank holds: `experts / ep`.
    pub fn local_experts(&self) -> u64 {
        self.model.experts / self.ep as u64
    }

    /// Bytes per rank of each expert-parallel all-to-all: every one of the
    /// `t` tokens sends `k` copies of its `h` elements, `t·k·h·e`.
    pub fn alltoall_bytes(&self) -> u64 {
        self.tokens() * self.model.top_k * self.model.hidden * self.dtype.bytes()
    }

    /// Tokens the experts of EP rank `ep_rank` (`replica mod ep`) receive
    /// in layer `layer`, of the mean `μ = t·k`: the busiest rank, `layer
    /// mod ep`, receives `⌊μ·(1 + skew)⌋`, every other rank
    /// `⌊(ep·μ − busiest)/(ep − 1)⌋` (the rest shared evenly); `μ` with
    /// EP 1.
    pub fn expert_tokens(&self, layer: usize, ep_rank: usize) -> u64 {
        let mean = self.tokens() * self.model.top_k;
        if self.ep == 1 {
            return mean;
        }
        let busiest = (mean as f64 * (1.0 + self.moe_skew)).floor() as u64;
        match layer % self.ep == ep_rank {
            true => busiest,
            false => (self.ep as u64 * mean - busiest) / (self.ep as u64 - 1),
        }
    }

    /// Parameters of one layer on one TP rank, as `(shared, expert)`:
    /// those synchronised over the DP group (attention over TP, the
    /// router; the whole layer for a dense model) and the rank's experts
    /// (`experts/ep` of them, over TP), synchronised over the expert-DP
    /// group (`dp/ep` replicas holding the same experts).
    pub fn layer_params_split(&self) -> (u64, u64) {
        let (m, tp) = (&self.model, self.tp as u64);
        if !m.is_moe() {
            return ((m.attention_params() + m.mlp_params()).div_ceil(tp), 0);
        }
        let experts = self.local_experts() * m.expert_params();
        (
            m.attention_params().div_ceil(tp) + m.router_params(),
            experts.div_ceil(tp),
        )
    }

    /// Every rank's trace and the process groups (`tp{i}`, `dp{i}`).
    pub fn generate(&self) -> Result<(Vec<RawTrace>, Groups), GenError> {
        self.check()?;
        let groups = self.groups();
        let traces = (0..self.ranks())
            .map(|rank| trace(Rank::new(self, rank).nodes()))
            .collect();
        Ok((traces, groups))
    }

    /// The TP groups (`tp{stage·DP + replica}`) and DP groups
    /// (`dp{stage·TP + shard}`); with EP above 1 also the EP groups and
    /// the expert-DP groups ([`Step::ep_group`], [`Step::edp_group`]).
    fn groups(&self) -> Groups {
        let mut groups = BTreeMap::new();
        for stage in 0..self.pp {
            for replica in 0..self.dp {
                let ranks = (0..self.tp)
                    .map(|s| self.rank((stage, replica, s)))
                    .collect();
                groups.insert(format!("tp{}", stage * self.dp + replica), ranks);
            }
            for shard in 0..self.tp {
                let ranks = (0..self.dp).map(|r| self.rank((stage, r, shard))).collect();
                groups.insert(format!("dp{}", stage * self.tp + shard), ranks);
            }
        }
        if self.ep > 1 {
            for rank in 0..self.ranks() {
                let (stage, replica, shard) = self.coords(rank);
                let (ep, edp) = (self.ep_group(rank), self.edp_group(rank));
                groups.entry(ep).or_insert_with(|| {
                    let first = replica - replica % self.ep;
                    (first..first + self.ep)
                        .map(|r| self.rank((stage, r, shard)))
                        .collect()
                });
                if self.dp > self.ep {
                    groups.entry(edp).or_insert_with(|| {
                        (replica % self.ep..self.dp)
                            .step_by(self.ep)
                            .map(|r| self.rank((stage, r, shard)))
                            .collect()
                    });
                }
            }
        }
        groups
    }

    /// The EP group of `rank`: `ep{(stage·TP + shard)·DP/EP + replica/EP}`,
    /// the `EP` neighbouring replicas of its stage and shard.
    pub fn ep_group(&self, rank: usize) -> String {
        let (stage, replica, shard) = self.coords(rank);
        let per = self.dp / self.ep;
        format!("ep{}", (stage * self.tp + shard) * per + replica / self.ep)
    }

    /// The expert-DP group of `rank`: `edp{(stage·TP + shard)·EP +
    /// replica mod EP}`, the `DP/EP` replicas of its stage and shard that
    /// hold the same experts.
    pub fn edp_group(&self, rank: usize) -> String {
        let (stage, replica, shard) = self.coords(rank);
        format!(
            "edp{}",
            (stage * self.tp + shard) * self.ep + replica % self.ep
        )
    }
}

/// One piece of a layer's forward or backward.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// A compute node: its name, FLOPs and bytes touched.
    Compute(&'static str, u64, u64),
    /// The TP all-reduce after the compute named.
    TpAllReduce(&'static str),
    /// An EP all-to-all: `dispatch` (tokens to their experts) or
    /// `combine` (results back).
    AllToAll(&'static str),
}

/// One rank's trace under construction.
struct Rank<'a> {
    step: &'a Step,
    stage: usize,
    replica: usize,
    shard: usize,
    nodes: Vec<Node>,
    /// The last compute node (the schedule's order).
    last_compute: Option<u64>,
}

impl<'a> Rank<'a> {
    fn new(step: &'a Step, rank: usize) -> Rank<'a> {
        let (stage, replica, shard) = step.coords(rank);
        Rank {
            step,
            stage,
            replica,
            shard,
            nodes: Vec::new(),
            last_compute: None,
        }
    }

    fn next_id(&self) -> u64 {
        self.nodes.len() as u64
    }

    fn tp_group(&self) -> String {
        format!("tp{}", self.stage * self.step.dp + self.replica)
    }

    fn activation_bytes(&self) -> u64 {
        self.step.tokens() * self.step.model.hidden * self.step.dtype.bytes()
    }

    /// A compute node after the previous compute node and `deps`.
    fn compute(&mut self, name: String, (flops, bytes): (u64, u64), mut deps: Vec<u64>) -> u64 {
        let id = self.next_id();
        deps.extend(self.last_compute);
        self.nodes
            .push(compute_node((id, &name), flops, bytes, deps));
        self.last_compute = Some(id);
        id
    }

    fn push(&mut self, node: Node) -> u64 {
        let id = node.id;
        self.nodes.push(node);
        id
    }

    /// A collective `comm` of `bytes` per rank in `group` of `size`
    /// ranks after `deps`: its node, or (size 1) the last of `deps`.
    fn group_collective(
        &mut self,
        name: String,
        (comm, bytes): (CommType, u64),
        (group, size): (String, usize),
        deps: Vec<u64>,
    ) -> Option<u64> {
        if size == 1 {
            return deps.last().copied();
        }
        let id = self.next_id();
        Some(self.push(collective_node(
            (id, &name),
            comm,
            bytes,
            Some(&group),
            deps,
        )))
    }

    /// The pipeline peer of this rank on `stage`.
    fn peer(&self, stage: usize) -> usize {
        self.step.rank((stage, self.replica, self.shard))
    }

    /// The pieces of layer `layer`'s forward (or `backward`), in order.
    /// Dense: QKV, attention, projection, TP all-reduce, up, down, TP
    /// all-reduce (backward: down, up, all-reduce, projection, attention,
    /// QKV, all-reduce). MoE: the router after the first all-reduce, the
    /// experts' GEMMs between a dispatch and a combine all-to-all
    /// (backward: the combine's mirror, down, up, the dispatch's mirror,
    /// router, all-reduce, ...). Collectives of a group of one are left out.
    fn pieces(&self, layer: usize, backward: bool) -> Vec<Piece> {
        let step = self.step;
        let routed = match step.model.is_moe() {
            true => step.expert_tokens(layer, self.replica % step.ep),
            false => step.tokens(),
        };
        let scale = if backward { 2 } else { 1 };
        let gemms: BTreeMap<&str, Piece> = step
            .layer_gemms(routed)
            .into_iter()
            .map(|(n, f, b)| (n, Piece::Compute(n, scale * f, scale * b)))
            .collect();
        let names: &[&str] = match (step.model.is_moe(), backward) {
            (false, false) => &["qkv", "attention", "proj", "AR", "fc1", "fc2", "AR"],
            (false, true) => &["fc2", "fc1", "AR", "proj", "attention", "qkv", "AR"],
            (true, false) => &[
                "qkv",
                "attention",
                "proj",
                "AR",
                "router",
                "dispatch",
                "fc1",
                "fc2",
                "combine",
                "AR",
            ],
            (true, true) => &[
                "combine",
                "fc2",
                "fc1",
                "dispatch",
                "router",
                "AR",
                "proj",
                "attention",
                "qkv",
                "AR",
            ],
        };
        let (mut pieces, mut computed) = (Vec::new(), "");
        for &name in names {
            match name {
                "AR" if step.tp > 1 => pieces.push(Piece::TpAllReduce(computed)),
                "dispatch" | "combine" if step.ep > 1 => pieces.push(Piece::AllToAll(name)),
                "AR" | "dispatch" | "combine" => {}
                gemm => {
                    pieces.push(gemms[gemm]);
                    computed = gemm;
                }
            }
        }
        pieces
    }

    /// Layer `layer`'s forward or backward (`phase` `fwd` / `bwd`) of
    /// micro-batch `m`, its first piece after `input` and `last`: its last
    /// node.
    fn layer(
        &mut self,
        phase: &str,
        (layer, m): (usize, usize),
        mut input: Vec<u64>,
        mut last: Option<u64>,
    ) -> Option<u64> {
        let step = self.step;
        for piece in self.pieces(layer, phase == "bwd") {
            let deps: Vec<u64> = input.drain(..).chain(last).collect();
            last = match piece {
                Piece::Compute(name, flops, touched) => {
                    let name = format!("{phase}_{name}_l{layer}_mb{m}");
                    Some(self.compute(name, (flops, touched), deps))
                }
                Piece::TpAllReduce(after) => {
                    let name = format!("{phase}_allreduce_{after}_l{layer}_mb{m}");
                    let comm = (CommType::AllReduce, self.activation_bytes());
                    self.group_collective(name, comm, (self.tp_group(), step.tp), deps)
                }
                Piece::AllToAll(what) => {
                    let name = format!("{phase}_alltoall_{what}_l{layer}_mb{m}");
                    let comm = (CommType::AllToAll, step.alltoall_bytes());
                    let group = (step.ep_group(self.peer(self.stage)), step.ep);
                    self.group_collective(name, comm, group, deps)
                }
            };
        }
        last
    }

    /// Forward of micro-batch `m` on this stage: its last node.
    fn forward(&mut self, m: usize) -> u64 {
        let bytes = self.activation_bytes();
        let mut input = Vec::new();
        if self.stage > 0 {
            let (id, src) = (self.next_id(), self.peer(self.stage - 1));
            let me = self.peer(self.stage);
            let name = format!("recv_act_mb{m}");
            input.push(self.push(p2p_node(
                (id, &name),
                false,
                (src, me, 2 * m as u32),
                bytes,
                vec![],
            )));
        }
        let per_stage = self.step.layers / self.step.pp;
        let mut last = None;
        for l in 0..per_stage {
            let layer = self.stage * per_stage + l;
            input.extend(self.gather_weights("fwd", layer, m, Vec::new()));
            last = self.layer("fwd", (layer, m), std::mem::take(&mut input), last);
        }
        let last = last.expect("a stage has at least one layer");
        if self.stage + 1 < self.step.pp {
            let (id, dst) = (self.next_id(), self.peer(self.stage + 1));
            let me = self.peer(self.stage);
            let name = format!("send_act_mb{m}");
            return self.push(p2p_node(
                (id, &name),
                true,
                (me, dst, 2 * m as u32),
                bytes,
                vec![last],
            ));
        }
        last
    }

    /// Backward of micro-batch `m` after its forward ended at `forward`;
    /// the last node of each layer's backward, last layer first.
    fn backward(&mut self, m: usize, forward: u64) -> Vec<(usize, u64)> {
        let bytes = self.activation_bytes();
        let mut input = vec![forward];
        if self.stage + 1 < self.step.pp {
            let (id, src) = (self.next_id(), self.peer(self.stage + 1));
            let me = self.peer(self.stage);
            let name = format!("recv_grad_mb{m}");
            input.push(self.push(p2p_node(
                (id, &name),
                false,
                (src, me, 2 * m as u32 + 1),
                bytes,
                vec![],
            )));
        }
        let per_stage = self.step.layers / self.step.pp;
        let mut last = None;
        let mut layers = Vec::new();
        for l in (0..per_stage).rev() {
            let layer = self.stage * per_stage + l;
            input.extend(self.gather_weights("bwd", layer, m, Vec::new()));
            last = self.layer("bwd", (layer, m), std::mem::take(&mut input), last);
            layers.push((l, last.expect("each layer has GEMMs")));
        }
        if self.stage > 0 {
            let (id, dst) = (self.next_id(), self.peer(self.stage - 1));
            let me = self.peer(self.stage);
            let name = format!("send_grad_mb{m}");
            let last = last.expect("a stage has at least one layer");
            self.push(p2p_node(
                (id, &name),
                true,
                (me, dst, 2 * m as u32 + 1),
                bytes,
                vec![last],
            ));
        }
        layers
    }

    fn dp_group(&self) -> String {
        format!("dp{}", self.stage * self.step.tp + self.shard)
    }

    /// A DP collective `comm` of `bytes` per rank after `deps` (none with
    /// DP 1): its node, or the last of `deps`.
    fn dp_collective(
        &mut self,
        name: String,
        comm: CommType,
        bytes: u64,
        deps: Vec<u64>,
    ) -> Option<u64> {
        let group = (self.dp_group(), self.step.dp);
        self.group_collective(name, (comm, bytes), group, deps)
    }

    /// ZeRO-3: the all-gather of layer `layer`'s weight shard before its
    /// forward or backward (`phase`) of micro-batch `m`, after `after`.
    fn gather_weights(
        &mut self,
        phase: &str,
        layer: usize,
        m: usize,
        after: Vec<u64>,
    ) -> Option<u64> {
        if self.step.data_parallel != DataParallel::Zero {
            return None;
        }
        let params = self.step.layer_params_per_rank();
        let shard = params.div_ceil(self.step.dp as u64) * self.step.dtype.bytes();
        let name = format!("{phase}_allgather_weights_l{layer}_mb{m}");
        self.dp_collective(name, CommType::AllGather, shard, after)
    }

    /// The DP synchronisation of the gradients: with all-reduce, the
    /// stage's gradients in buckets of at least [`BUCKET_BYTES`], each after
    /// the last backward of its layers (`done`: layer, node; last first),
    /// with EP above 1 the shared parameters' over the DP group (`dp_…`)
    /// and then the experts' over the expert-DP group (`edp_…`, if it has
    /// more than one rank); with ZeRO-3, each layer's reduce-scatter after
    /// every backward.
    fn gradient_buckets(&mut self, done: &[(usize, u64)], m: usize) {
        let e = self.step.dtype.bytes();
        let (shared, experts) = self.step.layer_params_split();
        if self.step.data_parallel == DataParallel::Zero {
            for &(l, node) in done {
                let layer = self.stage * self.step.layers / self.step.pp + l;
                let name = format!("zero_reducescatter_grads_l{layer}_mb{m}");
                let bytes = (shared + experts) * e;
                self.dp_collective(name, CommType::ReduceScatter, bytes, vec![node]);
            }
            return;
        }
        if m + 1 != self.step.micro_batches {
            return;
        }
        let (dp, ep) = (self.step.dp, self.step.ep);
        if ep == 1 {
            self.buckets("dp", (self.dp_group(), dp), (shared + experts) * e, done);
            return;
        }
        self.buckets("dp", (self.dp_group(), dp), shared * e, done);
        let edp = self.step.edp_group(self.peer(self.stage));
        self.buckets("edp", (edp, dp / ep), experts * e, done);
    }

    /// All-reduces of `layer_bytes` a layer over `group`, in buckets of at
    /// least [`BUCKET_BYTES`], named `{prefix}_allreduce_bucket{i}_to_l{layer}`.
    fn buckets(
        &mut self,
        prefix: &str,
        group: (String, usize),
        layer_bytes: u64,
        done: &[(usize, u64)],
    ) {
        let (mut bucket, mut count) = (0u64, 0usize);
        for (i, &(layer, node)) in done.iter().enumerate() {
            bucket += layer_bytes;
            if bucket >= BUCKET_BYTES || i + 1 == done.len() {
                let name = format!("{prefix}_allreduce_bucket{count}_to_l{layer}");
                let comm = (CommType::AllReduce, bucket);
                self.group_collective(name, comm, group.clone(), vec![node]);
                (bucket, count) = (0, count + 1);
            }
        }
    }

    /// The order of forwards (`true`) and backwards on this stage: its
    /// schedule's.
    fn order(&self) -> Vec<(bool, usize)> {
        let (p, m) = (self.step.pp, self.step.micro_batches);
        if self.step.schedule == Schedule::GPipe {
            return (0..m)
                .map(|b| (true, b))
                .chain((0..m).map(|b| (false, b)))
                .collect();
        }
        let warmup = (p - self.stage - 1).min(m);
        let mut order: Vec<(bool, usize)> = (0..warmup).map(|f| (true, f)).collect();
        let mut next_forward = warmup;
        for b in 0..m {
            if next_forward < m {
                order.push((true, next_forward));
                next_forward += 1;
            }
            order.push((false, b));
        }
        order
    }

    /// The schedule's nodes.
    fn nodes(mut self) -> Vec<Node> {
        let mut forwards = BTreeMap::new();
        for (forward, b) in self.order() {
            if forward {
                forwards.insert(b, self.forward(b));
            } else {
                let done = self.backward(b, forwards[&b]);
                self.gradient_buckets(&done, b);
            }
        }
        self.nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chakra::graph::{self, Op};
    use crate::chakra::world;

    fn step(tp: usize, dp: usize, pp: usize, micro_batches: usize) -> Step {
        Step {
            tp,
            dp,
            pp,
            layers: 4,
            micro_batches,
            seq: 128,
            ..Step::new(model("gpt3-125m").unwrap())
        }
    }

    #[test]
    fn ranks_are_tp_fastest_and_groups_follow() {
        let s = step(2, 2, 2, 2);
        assert_eq!(s.coords(5), (1, 0, 1));
        let groups = s.groups();
        assert_eq!(groups["tp0"], [0, 1]);
        assert_eq!(groups["tp3"], [6, 7]);
        assert_eq!(groups["dp0"], [0, 2]);
        assert_eq!(groups["dp3"], [5, 7]);
    }

    #[test]
    fn a_generated_step_is_a_valid_deadlock_free_world() {
        let s = step(2, 2, 2, 3);
        let (traces, groups) = s.generate().unwrap();
        let graphs: Vec<_> = traces.iter().map(|t| graph::build(t).unwrap()).collect();
        let files: Vec<_> = (0..8).map(|r| format!("r{r}")).collect();
        let checked = world::check(&files, &graphs, &groups).unwrap();
        assert_eq!(checked.groups.len(), 8);
        // Stage 0 sends 3 activations and receives 3 gradients.
        let sends = graphs[0]
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Send { .. }))
            .count();
        assert_eq!(sends, 3);
        // 2 layers per stage x 3 micro-batches x (2 fwd + 2 bwd) TP all-reduces + 1 bucket.
        let colls = graphs[0]
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Collective { .. }))
            .count();
        assert_eq!(colls, 2 * 3 * 4 + 1);
    }

    #[test]
    fn flops_are_three_forwards() {
        // gpt3-125m, t = 128, h = 768, TP 1: per layer forward
        // 24·t·h² + 4·t²·h.
        let s = step(1, 1, 1, 1);
        let (t, h) = (128u64, 768u64);
        assert_eq!(s.flops(), 3 * 4 * (24 * t * h * h + 4 * t * t * h));
        let error = step(5, 1, 1, 1).check().unwrap_err();
        assert!(matches!(error, GenError::TpDivides { tp: 5, .. }));
        assert_eq!(
            error.to_string(),
            "--tp 5 must divide gpt3-125m's 12 heads and hidden size 768"
        );
    }

    #[test]
    fn bad_flags_are_named() {
        let mut zero = step(1, 1, 1, 1);
        zero.micro_batches = 0;
        assert_eq!(
            zero.generate().unwrap_err().to_string(),
            "--micro-batches must be at least 1"
        );
        let error = model("gpt3-1t").unwrap_err().to_string();
        assert!(
            error.starts_with("--model gpt3-1t: expected one of gpt3-125m, gpt3-350m"),
            "{error}"
        );
        let error = super::super::comm_type("all_reduce_x").unwrap_err();
        assert_eq!(
            error.to_string(),
            "--collective all_reduce_x: expected one of all_reduce, reduce, all_gather, gather, \
             scatter, broadcast, all_to_all, reduce_scatter, barrier"
        );
    }
    fn moe(ep: usize, skew: f64) -> Step {
        Step {
            tp: 2,
            dp: 4,
            pp: 2,
            layers: 2,
            micro_batches: 2,
            seq: 32,
            ep,
            moe_skew: skew,
            ..Step::new(model("mixtral-8x7b").unwrap())
        }
    }

    fn named<'a>(graph: &'a graph::RankGraph, part: &str) -> Vec<&'a graph::EtNode> {
        graph
            .nodes
            .iter()
            .filter(|n| n.name.contains(part))
            .collect()
    }

    #[test]
    fn a_moe_step_dispatches_and_combines_over_its_ep_group() {
        let s = moe(2, 0.0);
        let (traces, groups) = s.generate().unwrap();
        let graphs: Vec<_> = traces.iter().map(|t| graph::build(t).unwrap()).collect();
        let files: Vec<_> = (0..16).map(|r| format!("r{r}")).collect();
        world::check(&files, &graphs, &groups).unwrap();
        // EP groups: 2 neighbouring replicas of a stage and shard; expert-DP
        // groups: the replicas holding the same experts.
        assert_eq!(groups["ep0"], [0, 2]);
        assert_eq!(groups["ep1"], [4, 6]);
        assert_eq!(groups["edp0"], [0, 4]);
        assert_eq!(groups["edp1"], [2, 6]);
        assert_eq!(groups.keys().filter(|k| k.starts_with("ep")).count(), 8);
        assert_eq!(s.ep_group(5), "ep3");
        assert_eq!(groups["ep3"], [5, 7]);
        // One layer a stage, 2 micro-batches, 4 all-to-alls each of t·k·h·e.
        let a2a = named(&graphs[0], "alltoall");
        assert_eq!(a2a.len(), 2 * 4);
        let bytes = 32 * 2 * 4096 * 2;
        for node in a2a {
            let Op::Collective {
                comm,
                bytes: b,
                group,
            } = &node.op
            else {
                panic!("{} is a collective", node.name)
            };
            assert_eq!(
                (*comm, *b, group.as_deref()),
                (CommType::AllToAll, bytes, Some("ep0"))
            );
        }
        // Shared gradients over DP, the experts' over expert-DP.
        let dp = graphs[0]
            .nodes
            .iter()
            .filter(|n| n.name.starts_with("dp_allreduce"));
        assert_eq!(dp.count(), 1);
        assert_eq!(named(&graphs[0], "edp_allreduce_bucket0_to_l0").len(), 1);
        let (shared, experts) = s.layer_params_split();
        let (h, f) = (4096u64, 14336u64);
        assert_eq!(shared, (h * 6144 + h * h) / 2 + h * 8);
        assert_eq!(experts, 4 * 3 * h * f / 2);
    }

    #[test]
    fn moe_flops_count_the_active_experts() {
        let s = moe(2, 0.0);
        let (t, h, f, q) = (32u64, 4096u64, 14336u64, 6144u64);
        // Per TP rank: attention as Llama-3 8B, the router, the experts
        // at t·k tokens.
        let dense = 2 * t * h * q / 2 + 4 * t * t * h / 2 + 2 * t * h * h / 2;
        let router = 2 * t * h * 8;
        let experts = 2 * (t * 2) * (h * 2 * f + f * h) / 2;
        assert_eq!(s.flops(), 3 * (dense + router + experts) * 8 * 2 * 2);
    }

    #[test]
    fn the_busiest_ep_rank_of_a_layer_takes_one_plus_skew_the_mean() {
        let s = moe(4, 0.5);
        let mean = 32 * 2;
        // Layer l's busiest EP rank is l mod EP; the rest share what is left.
        assert_eq!(s.expert_tokens(0, 0), 96);
        assert_eq!(s.expert_tokens(0, 1), (4 * mean - 96) / 3);
        assert_eq!(s.expert_tokens(1, 1), 96);
        assert_eq!(s.expert_tokens(5, 0), (4 * mean - 96) / 3);
        assert_eq!(moe(4, 0.0).expert_tokens(3, 2), mean);
        // The busiest rank's up GEMM: 2·r·h·2f/T FLOPs.
        let (traces, _) = s.generate().unwrap();
        let fc1 = |rank: usize, layer: usize| {
            let graph = graph::build(&traces[rank]).unwrap();
            let node = named(&graph, &format!("fwd_fc1_l{layer}_mb0"))[0];
            match node.op {
                Op::Compute { num_ops, .. } => num_ops,
                _ => panic!("fc1 computes"),
            }
        };
        assert_eq!(fc1(0, 0), 2 * 96 * 4096 * 2 * 14336 / 2);
        let rest = (4 * mean - 96) / 3;
        assert_eq!(fc1(2, 0), 2 * rest * 4096 * 2 * 14336 / 2, "replica 1");
    }

    #[test]
    fn bad_ep_and_skew_are_refused_naming_the_flags() {
        let error = moe(3, 0.0).check().unwrap_err().to_string();
        assert_eq!(
            error,
            "--ep 3 must divide --dp 4 and mixtral-8x7b's 8 experts (the experts are sharded \
             over the DP replicas of a stage)"
        );
        let mut dp = moe(4, 0.0);
        dp.dp = 2;
        assert!(matches!(
            dp.check(),
            Err(GenError::EpDivides { ep: 4, dp: 2, .. })
        ));
        let error = moe(2, 1.5).check().unwrap_err().to_string();
        assert!(
            error.starts_with("--moe-skew 1.5: expected 0 to --ep − 1 = 1"),
            "{error}"
        );
        assert!(moe(2, f64::NAN).check().is_err());
        let mut dense = step(1, 2, 1, 1);
        dense.ep = 2;
        let error = dense.check().unwrap_err().to_string();
        assert!(
            error.starts_with("--ep 2: gpt3-125m is a dense model"),
            "{error}"
        );
        let mut zero = moe(2, 0.0);
        zero.data_parallel = DataParallel::Zero;
        assert!(
            zero.check()
                .unwrap_err()
                .to_string()
                .starts_with("--dp-mode zero: not supported")
        );
    }
}
