//! What one rank of a generated training step keeps in HBM (ADR-0096):
//! weights, gradients, optimizer state (mixed-precision Adam) and the
//! activations of the micro-batches in flight, checked against a SIP's
//! HBM before anything is written or run.
//!
//! With `P` parameters per rank (the stage's `L/PP` layers, each layer's
//! `attention + MLP` parameters divided by TP; for a mixture-of-experts
//! model `⌈attention/TP⌉ + router + ⌈(experts/EP)·expert/TP⌉`, the
//! router `h × experts` replicated over TP), element size `e` bytes
//! (2 for f16/bf16, 4 for f32), DP degree `d`:
//! - DP by all-reduce: weights `P·e`, gradients `P·e`, optimizer
//!   `P·o` with `o = 12` (fp32 master weights, Adam's two moments) for
//!   16-bit training and `o = 8` (the two moments) for f32;
//! - ZeRO-3 / FSDP: each of the three sharded over `d` (`⌈P/d⌉`), plus the
//!   unsharded weights of two layers (the one computing and the one being
//!   gathered) and the unsharded gradients of one (being reduce-scattered);
//! - activations: per layer and micro-batch
//!   `s·b·(10·h + 24·h/t + 5·a·s/t)·e/2` bytes (Korthikanti et al. 2022,
//!   eq. 2: no recomputation, no sequence parallelism; `s` sequence, `b`
//!   micro-batch size, `h` hidden, `a` heads, `t` TP), times the stage's
//!   layers, times the micro-batches in flight: `min(PP − stage, M)` under
//!   1F1B, `M` under GPipe. A MoE layer's activations are taken as a
//!   dense layer's (the routed copies and the experts' intermediates are
//!   not added: an approximation).
//!
//! Knows the step's shape; the capacity is the caller's (the machine).

use super::GenError;
use super::step::{DataParallel, Schedule, Step};

/// One rank's HBM, by kind, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankMemory {
    /// The rank.
    pub rank: usize,
    /// Its pipeline stage.
    pub stage: usize,
    /// Weights (their dtype).
    pub weights: u64,
    /// Gradients (their dtype).
    pub gradients: u64,
    /// Optimizer state (fp32).
    pub optimizer: u64,
    /// Activations kept for the backward of the micro-batches in flight.
    pub activations: u64,
}

impl RankMemory {
    /// Everything together.
    pub fn total(&self) -> u64 {
        self.weights + self.gradients + self.optimizer + self.activations
    }

    /// `weights W + gradients G + optimizer O + activations A` in bytes.
    pub fn breakdown(&self) -> String {
        format!(
            "weights {} + gradients {} + optimizer {} + activations {}",
            self.weights, self.gradients, self.optimizer, self.activations
        )
    }
}

impl Step {
    /// Parameters of one layer on one TP rank (of a MoE layer: the
    /// attention, the router and the rank's `experts/ep` experts).
    pub fn layer_params_per_rank(&self) -> u64 {
        let (shared, experts) = self.layer_params_split();
        shared + experts
    }

    /// Activation bytes one layer keeps for one micro-batch on one rank.
    pub fn activation_bytes_per_layer(&self) -> u64 {
        let (s, b, h) = (self.seq, self.micro_batch, self.model.hidden);
        let (a, t) = (self.model.heads, self.tp as u64);
        let half_units = s * b * (10 * h + 24 * h / t + 5 * a * s / t);
        half_units * self.dtype.bytes() / 2
    }

    /// Micro-batches whose activations stage `stage` holds at its peak.
    pub fn in_flight(&self, stage: usize) -> u64 {
        let m = self.micro_batches;
        match self.schedule {
            Schedule::OneFOneB => (self.pp - stage).min(m) as u64,
            Schedule::GPipe => m as u64,
        }
    }

    /// What rank `rank` keeps in HBM at its peak.
    pub fn memory(&self, rank: usize) -> RankMemory {
        let (stage, _, _) = self.coords(rank);
        let layers = (self.layers / self.pp) as u64;
        let layer = self.layer_params_per_rank();
        let params = layers * layer;
        let e = self.dtype.bytes();
        let optimizer = if e < 4 { 12 } else { 8 };
        let (weights, gradients, optimizer) = match self.data_parallel {
            DataParallel::AllReduce => (params * e, params * e, params * optimizer),
            DataParallel::Zero => {
                let shard = params.div_ceil(self.dp as u64);
                (
                    (shard + 2 * layer) * e,
                    (shard + layer) * e,
                    shard * optimizer,
                )
            }
        };
        RankMemory {
            rank,
            stage,
            weights,
            gradients,
            optimizer,
            activations: layers * self.in_flight(stage) * self.activation_bytes_per_layer(),
        }
    }

    /// Every rank's memory, in rank order.
    pub fn memories(&self) -> Vec<RankMemory> {
        (0..self.ranks()).map(|r| self.memory(r)).collect()
    }

    /// The first rank (the one needing most, lowest rank first among
    /// equals) that does not fit `capacity` bytes of HBM.
    pub fn check_memory(&self, capacity: u64) -> Result<(), GenError> {
        let memories = self.memories();
        let worst = memories
            .iter()
            .max_by_key(|m| (m.total(), std::cmp::Reverse(m.rank)));
        match worst {
            Some(m) if m.total() > capacity => Err(GenError::Memory {
                rank: m.rank,
                stage: m.stage,
                needed: m.total(),
                breakdown: m.breakdown(),
                capacity,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::step::{Dtype, model};
    use super::*;

    #[test]
    fn gpt3_175b_on_one_rank_per_replica_needs_sixteen_bytes_a_parameter() {
        let mut step = Step::new(model("gpt3-175b").unwrap());
        step.dp = 16;
        let h = 12288u64;
        // 96 layers of 12 h² parameters (the layers only: no embeddings).
        let params = 96 * 12 * h * h;
        let m = step.memory(3);
        assert_eq!(
            (m.weights, m.gradients, m.optimizer),
            (2 * params, 2 * params, 12 * params)
        );
        // One micro-batch in flight: s·h·(10 + 24 + 5·a·s/h) 2-byte units.
        let s = 2048u64;
        assert_eq!(m.activations, 96 * s * (34 * h + 5 * 96 * s));
        let error = step.check_memory(256 << 30).unwrap_err().to_string();
        assert!(error.starts_with("rank 0 (stage 0) needs "), "{error}");
        assert!(
            error.contains(&format!("{} B of HBM", m.total())),
            "{error}"
        );
        assert!(error.contains("a SIP holds 274877906944 B"), "{error}");
    }

    #[test]
    fn pipelines_zero_and_dtype_change_what_a_rank_holds() {
        let mut step = Step::new(model("gpt3-1.3b").unwrap());
        (step.tp, step.dp, step.pp, step.micro_batches) = (2, 4, 4, 8);
        let per_layer = step.activation_bytes_per_layer();
        // 1F1B: stage s holds PP − s micro-batches; GPipe all 8.
        assert_eq!(step.memory(0).activations, 6 * 4 * per_layer);
        assert_eq!(step.memory(31).activations, 6 * per_layer);
        step.schedule = Schedule::GPipe;
        assert_eq!(step.memory(31).activations, 6 * 8 * per_layer);
        let layer = step.layer_params_per_rank();
        assert_eq!(layer, 12 * 2048 * 2048 / 2);
        step.data_parallel = DataParallel::Zero;
        let shard = (6 * layer).div_ceil(4);
        let zero = step.memory(0);
        assert_eq!(zero.weights, 2 * (shard + 2 * layer));
        assert_eq!(zero.optimizer, 12 * shard);
        step.dtype = Dtype::F32;
        assert_eq!(step.memory(0).optimizer, 8 * shard);
        assert_eq!(step.activation_bytes_per_layer(), 2 * per_layer);
    }
}
