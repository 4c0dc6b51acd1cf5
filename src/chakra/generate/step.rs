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
        }
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

    /// Parameters of one layer's MLP.
    pub fn mlp_params(&self) -> u64 {
        self.hidden * self.up_width() + self.ffn * self.hidden
    }
}

/// The models `--model` names: the GPT-3 family (Brown et al. 2020,
/// table 2.1), Llama-3 8B and 70B (Meta 2024: GQA with 8 KV heads,
/// SwiGLU).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// and backward GEMMs and attention, as generated): the MFU numerator.
    pub fn flops(&self) -> u64 {
        let per_layer: u64 = self.layer_gemms().iter().map(|g| g.1).sum::<u64>() * 3;
        per_layer * (self.tp * self.dp) as u64 * self.layers as u64 * self.micro_batches as u64
    }

    /// The forward compute of one layer on one TP rank: (name, FLOPs,
    /// bytes touched), in order; a TP all-reduce follows the third and the
    /// fifth.
    fn layer_gemms(&self) -> [(&'static str, u64, u64); 5] {
        let (t, h, tp) = (self.tokens(), self.model.hidden, self.tp as u64);
        let (s, b, e) = (self.seq, self.micro_batch, self.dtype.bytes());
        let gemm = |m: u64, k: u64, n: u64| (2 * m * k * n, (m * k + k * n + m * n) * e);
        let qkv = gemm(t, h, self.model.qkv_width().div_ceil(tp));
        let proj = gemm(t, h / tp, h);
        let fc1 = gemm(t, h, self.model.up_width().div_ceil(tp));
        let fc2 = gemm(t, self.model.ffn.div_ceil(tp), h);
        let heads = self.model.heads / tp;
        // Q·Kᵀ and the weighted sum of V, per sequence of `s` tokens.
        let attention = (
            4 * b * s * s * h / tp,
            (4 * t * h / tp + 2 * heads * b * s * s) * e,
        );
        [
            ("qkv", qkv.0, qkv.1),
            ("attention", attention.0, attention.1),
            ("proj", proj.0, proj.1),
            ("fc1", fc1.0, fc1.1),
            ("fc2", fc2.0, fc2.1),
        ]
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
    /// (`dp{stage·TP + shard}`).
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
        groups
    }
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

    fn tp_all_reduce(&mut self, name: String, after: u64) -> u64 {
        let (id, bytes) = (self.next_id(), self.activation_bytes());
        if self.step.tp == 1 {
            return after;
        }
        let group = self.tp_group();
        self.push(collective_node(
            (id, &name),
            CommType::AllReduce,
            bytes,
            Some(&group),
            vec![after],
        ))
    }

    /// The pipeline peer of this rank on `stage`.
    fn peer(&self, stage: usize) -> usize {
        self.step.rank((stage, self.replica, self.shard))
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
        let gemms = self.step.layer_gemms();
        let mut last = None;
        for l in 0..per_stage {
            let layer = self.stage * per_stage + l;
            input.extend(self.gather_weights("fwd", layer, m, Vec::new()));
            for (g, &(name, flops, touched)) in gemms.iter().enumerate() {
                let deps = input.drain(..).chain(last).collect();
                let id = self.compute(format!("fwd_{name}_l{layer}_mb{m}"), (flops, touched), deps);
                last = Some(id);
                if g == 2 || g == 4 {
                    last = Some(
                        self.tp_all_reduce(format!("fwd_allreduce_{name}_l{layer}_mb{m}"), id),
                    );
                }
            }
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
        let gemms = self.step.layer_gemms();
        let mut last = None;
        let mut layers = Vec::new();
        for l in (0..per_stage).rev() {
            let layer = self.stage * per_stage + l;
            input.extend(self.gather_weights("bwd", layer, m, Vec::new()));
            for (g, &(name, flops, touched)) in gemms.iter().enumerate().rev() {
                let deps = input.drain(..).chain(last).collect();
                let id = self.compute(
                    format!("bwd_{name}_l{layer}_mb{m}"),
                    (2 * flops, 2 * touched),
                    deps,
                );
                last = Some(id);
                if g == 3 || g == 0 {
                    last = Some(
                        self.tp_all_reduce(format!("bwd_allreduce_{name}_l{layer}_mb{m}"), id),
                    );
                }
            }
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

    /// Parameters of one layer held by one TP rank (the whole DP replica's
    /// share, before any ZeRO sharding).
    fn layer_params(&self) -> u64 {
        let m = &self.step.model;
        (m.attention_params() + m.mlp_params()).div_ceil(self.step.tp as u64)
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
        if self.step.dp == 1 {
            return deps.last().copied();
        }
        let (id, group) = (self.next_id(), self.dp_group());
        Some(self.push(collective_node(
            (id, &name),
            comm,
            bytes,
            Some(&group),
            deps,
        )))
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
        let shard = self.layer_params().div_ceil(self.step.dp as u64) * self.step.dtype.bytes();
        let name = format!("{phase}_allgather_weights_l{layer}_mb{m}");
        self.dp_collective(name, CommType::AllGather, shard, after)
    }

    /// The DP synchronisation of the gradients: with all-reduce, the
    /// stage's gradients in buckets of at least [`BUCKET_BYTES`], each after
    /// the last backward of its layers (`done`: layer, node; last first);
    /// with ZeRO-3, each layer's reduce-scatter after every backward.
    fn gradient_buckets(&mut self, done: &[(usize, u64)], m: usize) {
        let layer_bytes = self.layer_params() * self.step.dtype.bytes();
        if self.step.data_parallel == DataParallel::Zero {
            for &(l, node) in done {
                let layer = self.stage * self.step.layers / self.step.pp + l;
                let name = format!("zero_reducescatter_grads_l{layer}_mb{m}");
                self.dp_collective(name, CommType::ReduceScatter, layer_bytes, vec![node]);
            }
            return;
        }
        if m + 1 != self.step.micro_batches {
            return;
        }
        let (mut bucket, mut count) = (0u64, 0usize);
        for (i, &(layer, node)) in done.iter().enumerate() {
            bucket += layer_bytes;
            if bucket >= BUCKET_BYTES || i + 1 == done.len() {
                let name = format!("dp_allreduce_bucket{count}_to_l{layer}");
                self.dp_collective(name, CommType::AllReduce, bucket, vec![node]);
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
}
