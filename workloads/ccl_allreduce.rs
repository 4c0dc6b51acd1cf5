//! `ccl_allreduce`: `torch.distributed.all_reduce` of a cube-mesh tensor
//! on every rank (rank = SIP), the seeds' unified CCL bench.
//!
//! The driver initialises the `ahbm` process group (ccl.yaml's default
//! algorithm, or `--algorithm NAME`) and spawns one worker per rank. Each
//! worker places a `(cubes, n_elem)` f16 tensor with
//! `DPPolicy(cube=row_wise, pe=replicate, num_cubes=cubes, num_pes=1)`
//! (seed ADR-0032 D2: one tile per cube), fills it with rank-dependent values
//! ([`pattern`]), meets the others at a barrier, all-reduces, meets them
//! again and reads the tensor back. The all-reduce time is the span
//! between the two barriers.
//!
//! Checks (with `--verify-data`): every rank's tensor holds [`expected`],
//! the sum of every tile of every rank. Timing only, no host array of the
//! tensor's size is built (`Tensor::copy_timing_only`) and nothing is
//! compared. Figures: the algorithm, ranks,
//! bytes per rank (`--size`, default: ccl.yaml's `n_elem` per tile), the
//! all-reduce time, the algorithm's α-β cost model `model_ps` when it
//! states one (`CclAlgorithm::model`, a lower bound of the all-reduce time)
//! and the nccl-tests bandwidths ([`bandwidths`]).

use half::f16;
use kernbench::ccl::Collective;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::{DPPolicy, ReduceOp, Split, Torch, get_rank, spawn};
use kernbench::sim::{self, SimDuration};
use kernbench::workloads::{
    ByteSize, Check, Definition, Figure, Options, Outcome, Param, WorkloadError,
};
use ndarray::{Array2, ArrayD};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "torch.distributed.all_reduce on every rank (rank = SIP): time, algbw, busbw",
    params: &[
        Param {
            name: "algorithm",
            value_name: "NAME",
            help: "The ccl.yaml algorithm entry to run (default: defaults.algorithm)",
        },
        Param {
            name: "size",
            value_name: "BYTES",
            help: "Bytes per rank, K/M/G suffixes allowed (default: ccl.yaml's n_elem per cube tile)",
        },
    ],
    host: |torch, options| Box::pin(run(torch, options)),
};

/// Bytes per f16 element.
const ELEMENT: usize = 2;

/// The value of element `i` of cube `cube`'s tile on `rank`: small
/// integers (1 to 4), so every partial sum is exact in f16.
pub fn value(rank: usize, cube: usize, cubes: usize, i: usize) -> f16 {
    f16::from_f32((1 + (rank * cubes + cube + i) % 4) as f32)
}

/// `rank`'s `(cubes, n_elem)` input.
pub fn pattern(rank: usize, cubes: usize, n_elem: usize) -> Array2<f16> {
    Array2::from_shape_fn((cubes, n_elem), |(c, i)| value(rank, c, cubes, i))
}

/// What every tile holds after the all-reduce of `world_size` ranks: the
/// sum of all tiles of all ranks (every cube's tile counts as one
/// contribution, seed ADR-0032). O(world_size × cubes × n_elem): each
/// column is summed once.
pub fn expected(world_size: usize, cubes: usize, n_elem: usize) -> Array2<f16> {
    let column = |i: usize| -> f32 {
        let tiles = (0..world_size).flat_map(|r| (0..cubes).map(move |c| (r, c)));
        tiles.map(|(r, c)| value(r, c, cubes, i).to_f32()).sum()
    };
    let sums: Vec<f16> = (0..n_elem).map(|i| f16::from_f32(column(i))).collect();
    Array2::from_shape_fn((cubes, n_elem), |(_, i)| sums[i])
}

/// nccl-tests' `(algbw, busbw)` in GB/s for `bytes` per rank reduced in
/// `time` by `ranks` ranks: `algbw = bytes / time`, `busbw = algbw ×
/// 2 (n − 1) / n`.
pub fn bandwidths(bytes: u64, time: SimDuration, ranks: usize) -> (f64, f64) {
    let seconds = time.as_ps() as f64 * 1e-12;
    let algbw = bytes as f64 / seconds / 1e9;
    let n = ranks as f64;
    (algbw, algbw * 2.0 * (n - 1.0) / n)
}

/// One rank's all-reduce: its time and, with data on, whether it was right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RankResult {
    rank: usize,
    time: SimDuration,
    correct: Option<bool>,
    model: Option<SimDuration>,
}

async fn run(torch: Torch, options: Options) -> Result<Outcome, WorkloadError> {
    let dist = torch.distributed.clone();
    match options.get::<String>("algorithm")? {
        Some(name) => dist.init_process_group_with("ahbm", Collective::AllReduce, &name)?,
        None => dist.init_process_group("ahbm")?,
    }
    let world_size = dist.get_world_size()?;
    let cubes = torch.device().fabric().machine().cubes_per_sip() as usize;
    let size = options.get::<ByteSize>("size")?;
    let n_elem = tile_elements(size, cubes, dist.n_elem(Collective::AllReduce)?)?;
    check_tile_fits(&torch, n_elem)?;
    let results = spawn(world_size, move |_rank| {
        let torch = torch.clone();
        async move { worker(&torch, cubes, n_elem).await }
    })
    .await
    .map_err(|e| WorkloadError::Rank(e.rank, Box::new(e.source)))?;
    let algorithm = dist.algorithm(Collective::AllReduce)?;
    let bytes = (cubes * n_elem * ELEMENT) as u64;
    Ok(outcome(&algorithm, &results, bytes))
}

/// Elements per tile: `--size` bytes spread over the cubes, else ccl.yaml's
/// `n_elem`.
fn tile_elements(
    size: Option<ByteSize>,
    cubes: usize,
    n_elem: usize,
) -> Result<usize, WorkloadError> {
    let Some(ByteSize(size)) = size else {
        return Ok(n_elem);
    };
    let per_tile = (cubes * ELEMENT) as u64;
    if size == 0 || size % per_tile != 0 {
        return Err(WorkloadError::BadOption(format!(
            "--size {size}: must be a positive multiple of {per_tile} B ({cubes} cube tiles of f16)"
        )));
    }
    Ok((size / per_tile) as usize)
}

/// A rank's tile fits its cube's HBM, checked before anything is allocated.
fn check_tile_fits(torch: &Torch, n_elem: usize) -> Result<(), WorkloadError> {
    let capacity = torch.device().fabric().machine().spec().cube.hbm.capacity;
    let tile = (n_elem as u128) * ELEMENT as u128;
    if tile > u128::from(capacity.get().bytes()) {
        return Err(WorkloadError::BadOption(format!(
            "--size: each cube's tile would be {tile} B, but a cube's HBM holds {capacity} \
             (cube.hbm.capacity): lower --size or raise cube.hbm.capacity"
        )));
    }
    Ok(())
}

/// The DDP worker: place, fill, all-reduce between barriers, read back.
async fn worker(torch: &Torch, cubes: usize, n_elem: usize) -> Result<RankResult, WorkloadError> {
    let dist = &torch.distributed;
    dist.init_process_group("ahbm")?;
    let (rank, world_size) = (get_rank(), dist.get_world_size()?);
    let dp = DPPolicy::new(Split::RowWise, Split::Replicate, cubes as u32, 1);
    let tensor = torch.zeros(&[cubes, n_elem], DType::F16, &dp)?;
    match torch.device().data_mode() {
        DataMode::On => tensor.copy_from(&pattern(rank, cubes, n_elem)).await?,
        DataMode::Off => tensor.copy_timing_only().await?,
    }
    let model = dist.all_reduce_model(&tensor)?;
    dist.barrier().await?;
    let start = sim::now();
    dist.all_reduce(&tensor, ReduceOp::Sum).await?;
    dist.barrier().await?;
    let time = sim::now() - start;
    let back: Option<ArrayD<f16>> = tensor.to_ndarray().await?;
    tensor.free()?;
    let correct = back.map(|got| got == expected(world_size, cubes, n_elem).into_dyn());
    Ok(RankResult {
        rank,
        time,
        correct,
        model,
    })
}

/// Checks and figures from every rank's result, in rank order.
fn outcome(algorithm: &str, results: &[RankResult], bytes: u64) -> Outcome {
    let checks = results
        .iter()
        .filter_map(|r| {
            let ok = r.correct?;
            let detail = if ok { "global sum" } else { "wrong values" };
            Some(Check::new(&format!("rank{}_result", r.rank), ok, detail))
        })
        .collect();
    let time = results.iter().map(|r| r.time).max().unwrap_or_default();
    let (algbw, busbw) = bandwidths(bytes, time, results.len());
    let mut figures = vec![
        Figure::text("algorithm", algorithm),
        Figure::int("ranks", results.len() as u64),
        Figure::int("bytes_per_rank", bytes),
        Figure::time("allreduce_ps", time),
    ];
    if let Some(model) = results.first().and_then(|r| r.model) {
        figures.push(Figure::time("model_ps", model));
    }
    figures.push(Figure::real("algbw_gbps", algbw));
    figures.push(Figure::real("busbw_gbps", busbw));
    Outcome { checks, figures }
}
