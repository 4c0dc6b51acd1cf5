//! A tensor-parallel block (Megatron-LM, rank = SIP): a column-parallel
//! linear layer, a row-parallel one reading its output slice, and the
//! all-reduce of the row-parallel partials — the body of `megatron_mlp`
//! (`Y = GeLU(X·W1)·W2`) and `gpt3_qkv` (the QKV projection and the
//! projection back to the hidden size whose partials Megatron all-reduces).
//!
//! Every rank (a worker per SIP) holds its slices of both weights
//! ([`super::megatron`]) and runs the tokens in `micro_batches` micro-batches.
//! Per chunk: the column-parallel GEMM (activation in its epilogue), the
//! row-parallel GEMM into a `[cubes, …]` partial, and `all_reduce` of the
//! partial. Without overlap each all-reduce blocks; with overlap it is
//! issued `async_op` and waited for after the next chunk's GEMMs (and
//! before the next all-reduce), so communication hides behind compute.
//! Both orders compute the same values.
//!
//! Figures per rank, the largest reported: `compute_ps` (the GEMM
//! launches), `comm_ps` (each all-reduce from its call to its end),
//! `layer_ps` (first launch to the last result) and `exposed_comm_ps =
//! layer_ps − compute_ps`, the time no GEMM was running.
//!
//! Data (with `--verify-data`) is chosen so every value is exact: `X` and
//! `W2` in `{−1, 0, 1}`, `W1` in `{−8, 0, 8}`, so pre-activations are
//! multiples of 8 where GeLU is exactly ReLU in f32 (`erf(8/√2)` rounds
//! to one) and every partial sum is a multiple of 8, exact in f16 below
//! 16384 (at the default shapes they stay far below). The check is then
//! equality with an integer reference. Timing-only runs make the same H2D
//! copies without values and build no host arrays.

use std::fmt;
use std::str::FromStr;

use half::f16;
use ndarray::{Array1, Array2, ArrayView2, s};

use super::gemm_check::tflops;
use super::megatron::{ColumnParallelLinear, RowParallelLinear};
use super::tiled_gemm::{
    Activation, Problem, TiledGemm, Tiling, blocked_tensor, launch_tiled, operands, pack, unpack,
};
use super::{Check, Figure, Options, Outcome, Param, WorkloadError};
use crate::mem::{DType, DataMode};
use crate::runtime::{ReduceOp, Tensor, Torch, Work, get_rank, spawn};
use crate::sim::{self, SimDuration, SimTime};

/// `--micro-batches N`: the micro-batches the tokens run in (default 2).
pub const MICRO_BATCHES: Param = Param {
    name: "micro-batches",
    value_name: "N",
    help: "Micro-batches the tokens run in, each with its all-reduce (default 2)",
};

/// `--chunks N`: the old name of `--micro-batches` ("chunk" is the
/// collectives' pipelining unit; see the glossary in ARCHITECTURE.md).
/// Still accepted, with a warning on stderr.
pub const CHUNKS: Param = Param {
    name: "chunks",
    value_name: "N",
    help: "Deprecated alias of --micro-batches (warns when used)",
};

/// `--overlap on|off`: hide each all-reduce behind the next GEMMs.
pub const OVERLAP: Param = Param {
    name: "overlap",
    value_name: "on|off",
    help: "Issue each all-reduce async_op and wait after the next micro-batch's GEMMs (default off)",
};

/// Whether all-reduces overlap the next micro-batch's GEMMs (`--overlap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Each all-reduce blocks before the next GEMM.
    #[default]
    Off,
    /// Each all-reduce is issued `async_op` and waited for after the next
    /// micro-batch's GEMMs.
    On,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Overlap::Off => "off",
            Overlap::On => "on",
        })
    }
}

impl FromStr for Overlap {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "on" => Ok(Overlap::On),
            "off" => Ok(Overlap::Off),
            _ => Err(format!("expected on or off, got `{text}`")),
        }
    }
}

/// The schedule flags of a block's run: `--micro-batches` (or its
/// deprecated alias `--chunks`, which warns) and `--overlap`.
pub fn schedule(options: &Options) -> Result<(usize, Overlap), WorkloadError> {
    let micro_batches = options.get::<usize>(MICRO_BATCHES.name)?;
    let chunks = options.get::<usize>(CHUNKS.name)?;
    if chunks.is_some() {
        if micro_batches.is_some() {
            return Err(WorkloadError::BadOption(
                "--chunks is the deprecated name of --micro-batches: give only --micro-batches"
                    .to_owned(),
            ));
        }
        tracing::warn!(target: "kernbench::workloads::tensor_parallel", "--chunks is deprecated: use --micro-batches (same meaning)");
    }
    let overlap = options.get::<Overlap>(OVERLAP.name)?.unwrap_or_default();
    Ok((micro_batches.or(chunks).unwrap_or(2), overlap))
}

/// The block's dimensions and schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Rows of `X` (batch × sequence).
    pub tokens: usize,
    /// Input and output features (the model's hidden size).
    pub hidden: usize,
    /// Features between the two layers (`4h` for the MLP, `3h` for QKV).
    pub inner: usize,
    /// The column-parallel layer's activation.
    pub activation: Activation,
    /// Micro-batches the tokens are run in.
    pub micro_batches: usize,
    /// Whether each all-reduce overlaps the next micro-batch's GEMMs.
    pub overlap: Overlap,
}

/// One rank's measurements and, with data on, its result.
#[derive(Debug, Clone, PartialEq)]
pub struct RankResult {
    /// The GEMM launches.
    pub compute: SimDuration,
    /// The all-reduces, call to end.
    pub comm: SimDuration,
    /// First launch to the last result.
    pub layer: SimDuration,
    /// `Y` (every cube's copy equal), with data on.
    pub y: Option<Result<Array2<f32>, String>>,
}

/// A value of `{-1, 0, 1}` × `scale` from position `i` and `salt`.
fn ternary(i: usize, salt: u64, scale: i64) -> i64 {
    let mixed = (i as u64)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(salt * 40_503)
        >> 13;
    scale * [-1, 0, 0, 0, 1][(mixed % 5) as usize]
}

/// The block's inputs as integers: `X`, `W1`, `W2`.
pub fn inputs(block: &Block) -> [Array2<i64>; 3] {
    let make = |(rows, cols), salt, scale| {
        Array2::from_shape_fn((rows, cols), |(r, c)| ternary(r * cols + c, salt, scale))
    };
    [
        make((block.tokens, block.hidden), 1, 1),
        make((block.hidden, block.inner), 2, 8),
        make((block.inner, block.hidden), 3, 1),
    ]
}

/// The exact `Y = act(X·W1)·W2` (GeLU is ReLU on these inputs).
pub fn reference(block: &Block) -> Array2<i64> {
    let [x, w1, w2] = inputs(block);
    let h = x.dot(&w1);
    let h = match block.activation {
        Activation::Gelu => h.mapv(|v| v.max(0)),
        Activation::Identity => h,
    };
    h.dot(&w2)
}

fn to_f16(a: ArrayView2<'_, i64>) -> Array2<f16> {
    a.mapv(|v| f16::from_f32(v as f32))
}

/// The tensors of one rank.
struct Tensors {
    w1: Tensor,
    w2: Tensor,
    /// Per chunk: `X` (replicated), the hidden activations, the partials.
    chunks: Vec<[Tensor; 3]>,
}

impl Tensors {
    /// The H2D copies of [`Plan::upload`], timed the same, without values.
    async fn upload_timing_only(&self) -> Result<(), WorkloadError> {
        let inputs = self.chunks.iter().map(|[x, ..]| x);
        for tensor in [&self.w1, &self.w2].into_iter().chain(inputs) {
            tensor.copy_timing_only().await?;
        }
        Ok(())
    }
}

/// One rank's plan: its layers, problems and tiles.
struct Plan {
    first: ColumnParallelLinear,
    second: RowParallelLinear,
    problems: [Problem; 2],
    tilings: [Tiling; 2],
    cubes: u32,
}

impl Plan {
    fn new(torch: &Torch, block: &Block, (world, rank): (u32, u32)) -> Result<Plan, WorkloadError> {
        let machine = torch.device().fabric().machine();
        let (cubes, pes) = (machine.cubes_per_sip(), machine.pes_per_cube() as usize);
        // Half the TCM: PE 0 of each cube also runs the all-reduce.
        let tcm = machine.spec().pe().tcm.capacity.get().bytes() / 2;
        let first = ColumnParallelLinear::new((block.hidden, block.inner), (world, rank), cubes)?;
        let second = RowParallelLinear::new((block.inner, block.hidden), (world, rank), cubes)?;
        let tokens = chunk_tokens(block)?;
        let problems = [
            first.problem(tokens, DType::F16),
            second.problem(tokens, DType::F16),
        ];
        let t1 = Tiling::choose(&problems[0], pes, tcm)?;
        let t2 = second.tiling_after(t1, &problems[1], pes, tcm)?;
        Ok(Plan {
            first,
            second,
            problems,
            tilings: [t1, t2],
            cubes,
        })
    }

    /// Elements of the blocked `X`, `W1`, `H`, `W2` and partial.
    fn lengths(&self) -> [usize; 5] {
        let [x, w1, h] = self.tilings[0].blocked_elements(&self.problems[0]);
        let [_, w2, y] = self.tilings[1].blocked_elements(&self.problems[1]);
        [x, w1, h, w2, y]
    }

    fn allocate(&self, torch: &Torch, chunks: usize) -> Result<Tensors, WorkloadError> {
        let [x, w1, h, w2, y] = self.lengths();
        let f16 = DType::F16;
        let per_cube = |name: &str, len| blocked_tensor(torch, name, (self.cubes, len), f16, false);
        let chunks = (0..chunks)
            .map(|c| {
                Ok([
                    blocked_tensor(torch, &format!("X{c}"), (self.cubes, x), f16, true)?,
                    per_cube(&format!("H{c}"), h)?,
                    per_cube(&format!("Y{c}"), y)?,
                ])
            })
            .collect::<Result<_, WorkloadError>>()?;
        Ok(Tensors {
            w1: per_cube("W1", w1)?,
            w2: per_cube("W2", w2)?,
            chunks,
        })
    }

    /// Uploads the weights' cube slices and every chunk of `X`, blocked.
    async fn upload(&self, block: &Block, tensors: &Tensors) -> Result<(), WorkloadError> {
        let [x, w1, w2] = inputs(block);
        let [t1, t2] = self.tilings;
        let (w1, w2) = (to_f16(w1.view()), to_f16(w2.view()));
        let cubes = 0..self.cubes as usize;
        let w1_shards = cubes.clone().map(|c| self.first.shard(w1.view(), c));
        let w1_blocked = rows(w1_shards.map(|w| pack(w.view(), (t1.kt, t1.nt))));
        tensors.w1.copy_from(&w1_blocked).await?;
        let w2_shards = cubes.map(|c| self.second.shard(w2.view(), c));
        let w2_blocked = rows(w2_shards.map(|w| pack(w.view(), (t2.kt, t2.nt))));
        tensors.w2.copy_from(&w2_blocked).await?;
        let tokens = self.problems[0].m;
        for (c, [x_tensor, ..]) in tensors.chunks.iter().enumerate() {
            let chunk = to_f16(x.slice(s![c * tokens..(c + 1) * tokens, ..]));
            x_tensor
                .copy_from(&Array1::from(pack(chunk.view(), (t1.mt, t1.kt))))
                .await?;
        }
        Ok(())
    }

    /// The two GEMMs of chunk `c`: their launch time.
    async fn gemms(
        &self,
        torch: &Torch,
        (tensors, activation): (&Tensors, Activation),
        c: usize,
    ) -> Result<SimDuration, WorkloadError> {
        let [x, h, y] = &tensors.chunks[c];
        let sip = x.shards()?[0].spec.sip;
        let start = sim::now();
        let layers = [
            (x, &tensors.w1, h, activation),
            (h, &tensors.w2, y, Activation::Identity),
        ];
        for (layer, (a, b, out, activation)) in layers.into_iter().enumerate() {
            let args = TiledGemm {
                cubes: operands(a, b, out)?,
                problem: self.problems[layer],
                tiling: self.tilings[layer],
                activation,
            };
            launch_tiled(torch.device(), sip, args).await?;
        }
        Ok(sim::now() - start)
    }

    /// `Y` from chunk partials read back, if every cube holds the same.
    async fn read(
        &self,
        block: &Block,
        tensors: &Tensors,
    ) -> Result<Option<Result<Array2<f32>, String>>, WorkloadError> {
        let t2 = self.tilings[1];
        let tokens = self.problems[1].m;
        let mut y = Array2::zeros((block.tokens, block.hidden));
        for (c, [.., partial]) in tensors.chunks.iter().enumerate() {
            let Some(values) = partial.to_ndarray::<f16>().await? else {
                return Ok(None);
            };
            let first = values.index_axis(ndarray::Axis(0), 0).to_owned();
            if values.outer_iter().any(|row| row != first) {
                return Ok(Some(Err(format!("chunk {c}: the cubes' copies differ"))));
            }
            let flat: Vec<f32> = first.iter().map(|v| v.to_f32()).collect();
            let chunk = unpack(&flat, (tokens, block.hidden), (t2.mt, t2.nt));
            y.slice_mut(s![c * tokens..(c + 1) * tokens, ..])
                .assign(&chunk);
        }
        Ok(Some(Ok(y)))
    }
}

/// Rows in a `rows × …` array of equal blocked rows.
fn rows(blocks: impl Iterator<Item = Vec<f16>>) -> Array2<f16> {
    let blocks: Vec<Vec<f16>> = blocks.collect();
    let len = blocks.first().map_or(0, Vec::len);
    let flat: Vec<f16> = blocks.iter().flatten().copied().collect();
    Array2::from_shape_vec((blocks.len(), len), flat).expect("equal blocked lengths")
}

/// Tokens per micro-batch.
fn chunk_tokens(block: &Block) -> Result<usize, WorkloadError> {
    if block.micro_batches == 0 || block.tokens % block.micro_batches != 0 {
        return Err(WorkloadError::BadOption(format!(
            "--micro-batches {}: must divide the {} tokens",
            block.micro_batches, block.tokens
        )));
    }
    Ok(block.tokens / block.micro_batches)
}

/// One rank's block: allocate, upload (data on), meet, run, read back.
pub async fn worker(torch: Torch, block: Block) -> Result<RankResult, WorkloadError> {
    let dist = torch.distributed.clone();
    dist.init_process_group("ahbm")?;
    let (rank, world) = (get_rank() as u32, dist.get_world_size()? as u32);
    let plan = Plan::new(&torch, &block, (world, rank))?;
    let tensors = plan.allocate(&torch, block.micro_batches)?;
    match torch.data_mode() {
        DataMode::On => plan.upload(&block, &tensors).await?,
        DataMode::Off => tensors.upload_timing_only().await?,
    }
    dist.barrier().await?;
    let start = sim::now();
    let (mut compute, mut comm) = (SimDuration::ZERO, SimDuration::ZERO);
    let mut pending: Option<(Work, SimTime)> = None;
    for c in 0..block.micro_batches {
        compute += plan.gemms(&torch, (&tensors, block.activation), c).await?;
        if let Some((work, issued)) = pending.take() {
            comm += work.wait().await? - issued;
        }
        let partial = &tensors.chunks[c][2];
        let issued = sim::now();
        match block.overlap {
            Overlap::On => pending = Some((dist.all_reduce_async(partial, ReduceOp::Sum)?, issued)),
            Overlap::Off => {
                dist.all_reduce(partial, ReduceOp::Sum).await?;
                comm += sim::now() - issued;
            }
        }
    }
    if let Some((work, issued)) = pending {
        comm += work.wait().await? - issued;
    }
    let layer = sim::now() - start;
    let y = plan.read(&block, &tensors).await?;
    for tensor in tensors
        .chunks
        .iter()
        .flatten()
        .chain([&tensors.w1, &tensors.w2])
    {
        tensor.free()?;
    }
    Ok(RankResult {
        compute,
        comm,
        layer,
        y,
    })
}

/// Runs `block` on every rank (rank = SIP) and reports. What the flags
/// get wrong (chunks that do not divide the tokens, fewer features than
/// cubes to split them over) is refused before any rank starts.
pub async fn run(torch: Torch, block: Block) -> Result<Outcome, WorkloadError> {
    torch.distributed.init_process_group("ahbm")?;
    let world = torch.distributed.get_world_size()?;
    chunk_tokens(&block)?;
    let last = u32::try_from(world.max(1) - 1).expect("a world size fits u32");
    Plan::new(&torch, &block, (last + 1, last))?;
    let results = spawn(world, move |_rank| worker(torch.clone(), block))
        .await
        .map_err(|e| WorkloadError::Rank(e.rank, Box::new(e.source)))?;
    Ok(outcome(&block, &results))
}

/// Checks and figures from every rank's result.
fn outcome(block: &Block, results: &[RankResult]) -> Outcome {
    let want = results
        .iter()
        .any(|r| r.y.is_some())
        .then(|| reference(block).mapv(|v| v as f32));
    let checks = results
        .iter()
        .enumerate()
        .filter_map(|(rank, r)| {
            let (y, want) = (r.y.as_ref()?, want.as_ref()?);
            let name = format!("rank{rank}_y_matches_reference");
            Some(match y {
                Ok(y) if y == want => Check::new(&name, true, "exact"),
                Ok(y) => {
                    let wrong = y.iter().zip(want).filter(|(a, b)| a != b).count();
                    Check::new(
                        &name,
                        false,
                        format!("{wrong} of {} elements differ", y.len()),
                    )
                }
                Err(why) => Check::new(&name, false, why.clone()),
            })
        })
        .collect();
    let max = |f: fn(&RankResult) -> SimDuration| results.iter().map(f).max().unwrap_or_default();
    let (compute, comm, layer) = (max(|r| r.compute), max(|r| r.comm), max(|r| r.layer));
    let exposed = results
        .iter()
        .map(|r| SimDuration::from_ps(r.layer.as_ps().saturating_sub(r.compute.as_ps())))
        .max()
        .unwrap_or_default();
    let flops = 2 * 2 * (block.tokens * block.hidden * block.inner) as u64;
    let figures = vec![
        Figure::int("ranks", results.len() as u64),
        Figure::text(
            "dims",
            format!(
                "tokens={} hidden={} inner={}",
                block.tokens, block.hidden, block.inner
            ),
        ),
        Figure::int("chunks", block.micro_batches as u64),
        Figure::text("overlap", block.overlap.to_string()),
        Figure::int("flops", flops),
        Figure::time("layer_ps", layer),
        Figure::time("compute_ps", compute),
        Figure::time("comm_ps", comm),
        Figure::time("exposed_comm_ps", exposed),
        Figure::real("achieved_tflops", tflops(flops, layer)),
    ];
    Outcome { checks, figures }
}
