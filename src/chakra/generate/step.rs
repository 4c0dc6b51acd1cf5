//! One transformer training step as Chakra traces, one per rank: Megatron
//! tensor parallelism (TP), data parallelism (DP) and a pipeline (PP) with
//! the 1F1B schedule (PipeDream-flush: `P − s − 1` warm-up forwards on
//! stage `s`, then one forward and one backward in turn, then the
//! remaining backwards).
//!
//! Ranks: `rank = (stage × DP + replica) × TP + shard` (TP fastest, as
//! Megatron-LM lays them out), so a TP group is `TP` neighbouring SIPs.
//! Per layer, micro-batch and TP rank, with `t = seq` tokens (micro-batch
//! size 1), hidden size `h` and `T = TP`:
//! - forward: the QKV GEMM (`2·t·h·3h/T` FLOPs), attention (`4·t²·h/T`),
//!   the output projection (`2·t·h²/T`), a TP all-reduce of `t·h` 2-byte
//!   activations, the MLP's two GEMMs (`2·t·h·4h/T` each), a TP
//!   all-reduce;
//! - backward: each GEMM twice its forward FLOPs (input and weight
//!   gradients), in reverse, with the two TP all-reduces of the input
//!   gradients;
//! - between stages: a SEND / RECV of the `t·h` activations (forward) and
//!   of their gradients (backward), tag `2m` and `2m + 1` for micro-batch
//!   `m`;
//! - the DP gradient all-reduce: the stage's `12h²/T` parameters per layer
//!   (2-byte gradients) in buckets of at least [`BUCKET_BYTES`], last layer
//!   first, each issued when the last micro-batch's backward of its layers
//!   is done, so it overlaps the remaining backward.
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

/// Bytes per activation and gradient element (f16 / bf16).
const ELEMENT: u64 = 2;

/// A model's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    /// Its name.
    pub name: &'static str,
    /// Transformer layers.
    pub layers: usize,
    /// Hidden size.
    pub hidden: u64,
    /// Attention heads.
    pub heads: u64,
}

/// The GPT-3 family (Brown et al. 2020, table 2.1).
pub const MODELS: &[Model] = &[
    Model {
        name: "gpt3-125m",
        layers: 12,
        hidden: 768,
        heads: 12,
    },
    Model {
        name: "gpt3-350m",
        layers: 24,
        hidden: 1024,
        heads: 16,
    },
    Model {
        name: "gpt3-760m",
        layers: 24,
        hidden: 1536,
        heads: 16,
    },
    Model {
        name: "gpt3-1.3b",
        layers: 24,
        hidden: 2048,
        heads: 24,
    },
    Model {
        name: "gpt3-2.7b",
        layers: 32,
        hidden: 2560,
        heads: 32,
    },
    Model {
        name: "gpt3-6.7b",
        layers: 32,
        hidden: 4096,
        heads: 32,
    },
    Model {
        name: "gpt3-13b",
        layers: 40,
        hidden: 5140,
        heads: 40,
    },
    Model {
        name: "gpt3-175b",
        layers: 96,
        hidden: 12288,
        heads: 96,
    },
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
    /// Sequence length (tokens per micro-batch).
    pub seq: u64,
}

impl Step {
    /// Checks the degrees against the model.
    pub fn check(&self) -> Result<(), GenError> {
        let positive = [
            ("--tp", self.tp),
            ("--dp", self.dp),
            ("--pp", self.pp),
            ("--layers", self.layers),
            ("--micro-batches", self.micro_batches),
            ("--seq", self.seq as usize),
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
        if self.model.heads % self.tp as u64 != 0 || self.model.hidden % self.tp as u64 != 0 {
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
        let (t, h, tp) = (self.seq, self.model.hidden, self.tp as u64);
        let gemm = |m: u64, k: u64, n: u64| (2 * m * k * n, (m * k + k * n + m * n) * ELEMENT);
        let qkv = gemm(t, h, 3 * h / tp);
        let proj = gemm(t, h / tp, h);
        let fc1 = gemm(t, h, 4 * h / tp);
        let fc2 = gemm(t, 4 * h / tp, h);
        let heads = self.model.heads / tp;
        let attention = (
            4 * t * t * h / tp,
            (4 * t * h / tp + 2 * heads * t * t) * ELEMENT,
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
        self.step.seq * self.step.model.hidden * ELEMENT
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

    /// The DP all-reduces of the stage's gradients, bucketed, each after
    /// the last backward of its layers (`done`: layer, node; last first).
    fn gradient_buckets(&mut self, done: &[(usize, u64)]) {
        if self.step.dp == 1 {
            return;
        }
        let h = self.step.model.hidden;
        let layer_bytes = 12 * h * h / self.step.tp as u64 * ELEMENT;
        let group = format!("dp{}", self.stage * self.step.tp + self.shard);
        let (mut bucket, mut count) = (0u64, 0usize);
        for (i, &(layer, node)) in done.iter().enumerate() {
            bucket += layer_bytes;
            if bucket >= BUCKET_BYTES || i + 1 == done.len() {
                let id = self.next_id();
                let name = format!("dp_allreduce_bucket{count}_to_l{layer}");
                self.push(collective_node(
                    (id, &name),
                    CommType::AllReduce,
                    bucket,
                    Some(&group),
                    vec![node],
                ));
                (bucket, count) = (0, count + 1);
            }
        }
    }

    /// The 1F1B schedule.
    fn nodes(mut self) -> Vec<Node> {
        let (p, m) = (self.step.pp, self.step.micro_batches);
        let warmup = (p - self.stage - 1).min(m);
        let mut forwards = BTreeMap::new();
        let mut next_forward = 0;
        let mut last_backward = Vec::new();
        for _ in 0..warmup {
            forwards.insert(next_forward, self.forward(next_forward));
            next_forward += 1;
        }
        for b in 0..m {
            if next_forward < m {
                forwards.insert(next_forward, self.forward(next_forward));
                next_forward += 1;
            }
            last_backward = self.backward(b, forwards[&b]);
        }
        self.gradient_buckets(&last_backward);
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
            model: model("gpt3-125m").unwrap(),
            tp,
            dp,
            pp,
            layers: 4,
            micro_batches,
            seq: 128,
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
