//! The collective workloads' shared driver (`ccl_allreduce`,
//! `ccl_allgather`, `ccl_reducescatter`, `ccl_broadcast`, `ccl_reduce`,
//! `ccl_alltoall`, `ccl_sendrecv`, `ccl_gather`, `ccl_scatter`, each a
//! file of `workloads/` that calls [`run`] with its [`Collective`]): one
//! `torch.distributed` call on every rank (rank = SIP) between barriers,
//! the time between them, nccl-tests' bandwidths and, with
//! `--verify-data`, the results checked. For `send_recv` the call is
//! nccl-tests' `sendrecv_perf` ring: every rank `isend`s its input to
//! `rank + 1` and `recv`s its output from `rank − 1` (at least 2 ranks).
//! The rooted calls name rank 0 as the root (`src` / `dst`).
//!
//! Parameters ([`PARAMS`], [`REDUCING_PARAMS`]): `--algorithm` (the
//! ccl.yaml entry; default: the `defaults` entry of the collective),
//! `--dtype f16|bf16|f32` (default f16), `--op sum|prod|min|max|avg` for
//! the reducing calls (default sum) and `--size`, the input bytes per rank
//! (default: ccl.yaml's `n_elem` per block): any whole number of elements
//! of at least one, over blocks of equal length, the last ones padded
//! when the count does not split (at most one element per block; the
//! `padding_per_rank` figure, ADR-0045).
//!
//! Tensors: every rank places a `(cubes, tile)` tensor of the dtype with
//! `DPPolicy(cube=row_wise, pe=replicate, num_cubes=cubes, num_pes=1)`
//! (one tile per cube, seed ADR-0032 D2) and, for the out-of-place calls,
//! an output of the same placement. Participants are the endpoints (PE 0
//! of every cube of every rank, `n = ranks × cubes`); a tile holds one
//! block of `n_elem` elements, or one block per endpoint for the input of
//! `reduce_scatter` / `all_to_all` and the output of `all_gather` /
//! `all_to_all`; `send_recv`'s output is one block, the tile received;
//! `gather`'s output and `scatter`'s input hold one block per rank (every
//! rank places them, only the root passes them as its list).
//! Before anything is allocated, a cube's tiles must fit its
//! HBM and one block a PE's TCM (every kernel of the catalogue holds a
//! block in TCM scratch while it combines or forwards it).
//!
//! Bandwidths (nccl-tests' PERFORMANCE.md, with `n` = endpoints, the
//! participants that exchange data, and `S` the bytes per participant
//! nccl-tests counts — the output of `all_gather`, the input otherwise, a
//! rank's whole input for `send_recv`, whose participants are the ranks):
//! `algbw = S / t`, `busbw = algbw × f` with `f = 2 (n − 1) / n` for
//! all_reduce, `(n − 1) / n` for all_gather, reduce_scatter and all_to_all,
//! and 1 for broadcast, reduce and sendrecv ([`busbw_factor`]). `gather`
//! and `scatter` follow nccl-tests' `gather_perf` / `scatter_perf`: the
//! participants are the ranks (every cube's put crosses the rank's port),
//! `S` is the root's whole list (`ranks ×` a rank's tensor) and `f =
//! (n − 1) / n`, so `busbw` is the rate of the bytes that actually cross
//! into (out of) the root, its own block being a local copy.
//! Every collective also reports its algorithm's α-β cost model
//! `model_ps` when it states one
//! (`CclAlgorithm::model`, a lower bound of the time; the largest rank's
//! for `send_recv`, whose routes differ).
//!
//! Timing only (no `--verify-data`): no host array of tensor size is built,
//! filled, read or compared (`Tensor::copy_timing_only`). With
//! `--verify-data`: inputs are seeded pseudo-random values in `[-1, 1)`
//! (`[0.5, 1.5)` for `prod`), rounded to the dtype, and the check costs
//! O(bytes): copies must be exact; a reduction must be within [`bound`] of
//! an f64 reference (relative to the dtype's unit roundoff, plus, for
//! `prod` and `avg`, the absolute error of roundings below the normal
//! range: ADR-0031 D3), and overflow (a non-finite result, or a reference
//! beyond the dtype's range) is a failure, never `inf == inf`; the calls
//! whose result every endpoint holds must leave the same bits on every
//! endpoint.

use half::{bf16, f16};
use ndarray::Array2;

use super::{ByteSize, Check, Figure, Options, Outcome, Param, WorkloadError};
use crate::ccl::topology::Builtin;
use crate::ccl::{AlgorithmEntry, CclConfig, Collective, ParamValue, ReduceOp};
use crate::explain;
use crate::mem::{DType, DataMode};
use crate::runtime::{DPPolicy, Distributed, Split, Tensor, Torch, get_rank, spawn};
use crate::sim::{self, SimDuration, SimTime};

const ALGORITHM: Param = Param {
    name: "algorithm",
    value_name: "NAME",
    help: "The ccl.yaml algorithm entry to run (default: the collective's defaults entry)",
};

const DTYPE: Param = Param {
    name: "dtype",
    value_name: "TYPE",
    help: "Element type: f16, bf16 or f32 (default f16; GEMM inputs take f16 or bf16)",
};

const OP: Param = Param {
    name: "op",
    value_name: "OP",
    help: "Reduction: sum, prod, min, max or avg (default sum)",
};

const SIZE: Param = Param {
    name: "size",
    value_name: "BYTES",
    help: "Input bytes per rank, K/M/G suffixes allowed (default: ccl.yaml's n_elem per block)",
};

const MSCCL_XML: Param = Param {
    name: "msccl-xml",
    value_name: "FILE",
    help: "Run the MSCCL algorithm file FILE (its coll must be this collective; ADR-0035)",
};

/// The ccl.yaml entry `--msccl-xml` adds (see [`with_msccl_entry`]).
pub const MSCCL_ENTRY: &str = "msccl_xml";

/// The rank a rooted call (`broadcast`, `reduce`) names as `src` / `dst`.
const ROOT_RANK: usize = 0;

/// The parameters of a collective that reduces nothing.
pub const PARAMS: &[Param] = &[ALGORITHM, DTYPE, SIZE, MSCCL_XML];

/// The parameters of a reducing collective (`--op` added).
pub const REDUCING_PARAMS: &[Param] = &[ALGORITHM, DTYPE, OP, SIZE, MSCCL_XML];

/// `--msccl-xml FILE` as ccl.yaml: `options` with the entry
/// [`MSCCL_ENTRY`] (`module: msccl`, `wiring: none`, `params: {xml:
/// FILE}`) added to its ccl.yaml and chosen as `--algorithm`; `options`
/// unchanged without the flag. Naming the algorithm twice is a usage
/// error.
pub fn with_msccl_entry(options: &Options) -> Result<Options, WorkloadError> {
    let Some(file) = options.params.get(MSCCL_XML.name) else {
        return Ok(options.clone());
    };
    if let Some(name) = options.params.get(ALGORITHM.name) {
        return Err(WorkloadError::BadOption(format!(
            "--msccl-xml {file} and --algorithm {name} both choose the algorithm: give one"
        )));
    }
    let ccl = match &options.ccl {
        Some(ccl) => ccl.clone(),
        None => CclConfig::load(&CclConfig::default_source(), &[])
            .map_err(|e| WorkloadError::BadOption(e.to_string()))?,
    };
    let params = [("xml".to_owned(), ParamValue::Text(file.clone()))].into();
    let entry = AlgorithmEntry::new("msccl", Builtin::None, params);
    let mut options = options.clone().with(ALGORITHM.name, MSCCL_ENTRY);
    options.params.remove(MSCCL_XML.name);
    options.ccl = Some(ccl.with_algorithm(MSCCL_ENTRY, entry));
    Ok(options)
}

/// What one rank's call needs and returns.
#[derive(Debug, Clone, Copy)]
struct Shape {
    collective: Collective,
    op: ReduceOp,
    dtype: DType,
    cubes: usize,
    endpoints: usize,
    n_elem: usize,
    /// Elements of input per rank asked for (`--size`); `None`: the
    /// blocks' own ([`Shape::rank_elements`]), with no padding.
    count: Option<u64>,
    /// The endpoint a rooted call reads or writes: cube `root_cube` of
    /// [`ROOT_RANK`].
    root: usize,
}

impl Shape {
    /// Blocks per input and per output tile (0: in place).
    fn blocks(&self) -> (usize, usize) {
        let n = self.endpoints;
        match self.collective {
            Collective::AllGather => (1, n),
            Collective::ReduceScatter => (n, 1),
            Collective::AllToAll => (n, n),
            Collective::SendRecv => (1, 1),
            Collective::Gather => (1, self.ranks()),
            Collective::Scatter => (self.ranks(), 1),
            _ => (1, 0),
        }
    }

    /// Ranks (= SIPs).
    fn ranks(&self) -> usize {
        self.endpoints / self.cubes
    }

    /// The `n` of the busbw factor: the ranks for the calls whose every
    /// cube crosses the rank's one port, the endpoints otherwise.
    fn participants(&self) -> usize {
        match self.collective {
            Collective::SendRecv | Collective::Gather | Collective::Scatter => self.ranks(),
            _ => self.endpoints,
        }
    }

    /// Bytes of one block.
    fn block_bytes(&self) -> u128 {
        self.n_elem as u128 * u128::from(self.dtype.size())
    }

    /// Bytes of the tensor a rank gives the call (its input; the rank's
    /// own block tensor for `gather` and `scatter`): what ccl.yaml's size
    /// rules judge a call by (ADR-0113).
    fn rank_input_bytes(&self) -> u64 {
        let blocks = match self.collective {
            Collective::Gather | Collective::Scatter => 1,
            _ => self.blocks().0,
        };
        let bytes = (self.cubes * blocks) as u128 * self.block_bytes();
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    /// Bytes of a cube's input and output tiles.
    fn cube_tile_bytes(&self) -> u128 {
        let (in_blocks, out_blocks) = self.blocks();
        (in_blocks + out_blocks) as u128 * self.block_bytes()
    }

    /// The bytes per participant nccl-tests counts: the output of
    /// `all_gather`, the input otherwise; of an endpoint, or of a rank for
    /// `send_recv`, whose cubes all leave through the rank's one port; the
    /// root's whole list for `gather` and `scatter`.
    fn participant_bytes(&self) -> u64 {
        let (in_blocks, out_blocks) = self.blocks();
        let blocks = match self.collective {
            Collective::AllGather => out_blocks,
            Collective::SendRecv => self.cubes,
            Collective::Gather | Collective::Scatter => self.cubes * self.ranks(),
            _ => in_blocks,
        };
        (blocks * self.n_elem) as u64 * self.dtype.size()
    }

    /// Elements of the input per rank (the blocks', padding included).
    fn rank_elements(&self) -> usize {
        self.cubes * self.blocks().0 * self.n_elem
    }

    /// Elements of input per rank asked for.
    fn count(&self) -> u64 {
        self.count.unwrap_or(self.rank_elements() as u64)
    }

    /// Elements of padding per rank: the blocks' elements beyond the count
    /// asked for (fewer than the blocks per rank; ADR-0045 D1).
    fn padding(&self) -> u64 {
        self.rank_elements() as u64 - self.count()
    }
}

/// One rank's result.
struct RankResult {
    /// When the measured call started (the barrier released the rank).
    start: SimTime,
    time: SimDuration,
    model: Option<SimDuration>,
    /// The rank's result tiles, cube-major, with data on (f32 holds every
    /// f16, bf16 and f32 value exactly).
    values: Option<Vec<f32>>,
}

/// Runs `collective` on every rank (see the module docs).
pub async fn run(
    torch: Torch,
    options: Options,
    collective: Collective,
) -> Result<Outcome, WorkloadError> {
    let dist = torch.distributed.clone();
    match options.get::<String>("algorithm")? {
        Some(name) => dist.init_process_group_with("ahbm", collective, &name)?,
        None => dist.init_process_group("ahbm")?,
    }
    let cubes = torch.device().fabric().machine().cubes_per_sip() as usize;
    let mut shape = Shape {
        collective,
        op: options.get("op")?.unwrap_or(ReduceOp::Sum),
        dtype: options.get("dtype")?.unwrap_or(DType::F16),
        cubes,
        endpoints: dist.endpoints(collective)?,
        n_elem: 0,
        count: None,
        root: 0,
    };
    let size = options.get::<ByteSize>("size")?;
    // Without --size, the tile is ccl.yaml's n_elem of the entry that
    // serves the smallest calls.
    let asked = size.map_or(0, |s| s.0);
    shape.n_elem = dist.n_elem(collective, asked)?;
    shape.root = ROOT_RANK * cubes + dist.root_cube(collective, asked)?;
    if let Some(size) = size {
        shape.n_elem = block_elements(size, &shape)?;
        shape.count = Some(size.0 / shape.dtype.size());
    }
    check_fits(&torch, size, &shape)?;
    check_ranks(&dist, collective)?;
    if torch.device().data_mode() == DataMode::On {
        check_host_memory(dist.get_world_size()?, size, &shape, host_available())?;
    }
    let machine = torch.device().fabric().machine().clone();
    let job_sips: Option<Vec<u32>> = torch.job_sips().map(<[u32]>::to_vec);
    let results = spawn(dist.get_world_size()?, move |_rank| {
        let torch = torch.clone();
        async move { worker(&torch, shape).await }
    })
    .await
    .map_err(|e| WorkloadError::Rank(e.rank, Box::new(e.source)))?;
    let algorithm = dist.algorithm(collective, shape.rank_input_bytes())?;
    let mut outcome = outcome(&algorithm, &shape, &results);
    limit_check(&machine, &shape, job_sips.as_deref(), &mut outcome);
    Ok(outcome)
}

/// The call's physical bound ([`super::limit`], ADR-0086) as the figures
/// `limit_ps` and `limit_pct` (the bound as a share of the time: how
/// close to the limit) and the check `within_physical_limit`, which fails
/// when the time beats the bound.
fn limit_check(
    machine: &crate::topology::Machine,
    shape: &Shape,
    sips: Option<&[u32]>,
    outcome: &mut Outcome,
) {
    let call = super::limit::Call {
        collective: shape.collective,
        ranks: shape.ranks(),
        sips,
        cubes: shape.cubes,
        block_bytes: u64::try_from(shape.block_bytes()).unwrap_or(u64::MAX),
        block_elements: shape.n_elem as u64,
        root: shape.root,
    };
    let limit = super::limit::bound(machine, &call);
    let name = time_figure(shape.collective);
    let Some(time) = outcome.figures.iter().find_map(|f| match f.value {
        super::Value::Int(ps) if f.name == name => Some(ps),
        _ => None,
    }) else {
        return;
    };
    let pct = if time == 0 {
        0.0
    } else {
        limit.ps as f64 * 100.0 / time as f64
    };
    let at = outcome
        .figures
        .iter()
        .position(|f| f.name == name)
        .map_or(0, |i| i + 1);
    outcome
        .figures
        .insert(at, Figure::time("limit_ps", SimDuration::from_ps(limit.ps)));
    outcome
        .figures
        .insert(at + 1, Figure::real("limit_pct", pct));
    let (time_d, limit_d) = (SimDuration::from_ps(time), SimDuration::from_ps(limit.ps));
    let detail = if time >= limit.ps {
        format!(
            "{name} {time_d} >= the physical bound {limit_d} ({pct:.1} % of the limit): {}",
            limit.reason
        )
    } else {
        format!(
            "{name} {time_d} beats the physical bound limit_ps {limit_d}: {}",
            limit.reason
        )
    };
    outcome.checks.push(super::Check::new(
        "within_physical_limit",
        time >= limit.ps,
        detail,
    ));
}

/// `send_recv`'s ring needs a peer: at least 2 ranks.
fn check_ranks(dist: &Distributed, collective: Collective) -> Result<(), WorkloadError> {
    let ranks = dist.get_world_size()?;
    if collective == Collective::SendRecv && ranks < 2 {
        return Err(WorkloadError::BadOption(format!(
            "send_recv needs at least 2 ranks (one sends to the next), the world has {ranks} \
             (set system.sips.count or ccl.yaml world_size)"
        )));
    }
    Ok(())
}

/// Elements per block for `--size` bytes of input per rank: a whole
/// number of elements of the dtype (any count of at least one, refused
/// otherwise naming the element size), over `B = cubes × in_blocks`
/// blocks of `⌈count / B⌉` elements each (ADR-0045 D1). Every endpoint
/// contributes a block of the same length (element `i` of a reduction
/// exists on every endpoint), so a count that does not split into `B`
/// equal blocks is padded up to the next multiple of `B`: at most `B − 1`
/// elements, which move, are filled and are checked like the rest
/// ([`Shape::padding`]). A count that splits is its blocks exactly, as
/// before.
fn block_elements(ByteSize(size): ByteSize, shape: &Shape) -> Result<usize, WorkloadError> {
    let (dtype, elem) = (shape.dtype, shape.dtype.size());
    if size == 0 || size % elem != 0 {
        return Err(WorkloadError::BadOption(format!(
            "--size {size}: must be a positive whole number of {dtype} elements ({elem} B each)"
        )));
    }
    let count = size / elem;
    let blocks = (shape.cubes * shape.blocks().0) as u64;
    usize::try_from(count.div_ceil(blocks)).map_err(|_| {
        WorkloadError::BadOption(format!(
            "--size {size}: {count} {dtype} elements do not fit this host's address space"
        ))
    })
}

/// A cube's tiles fit its HBM and what the algorithm keeps of a block in
/// TCM (the whole block, or the chunks it streams) fits a PE's TCM,
/// checked before anything is allocated.
fn check_fits(torch: &Torch, size: Option<ByteSize>, shape: &Shape) -> Result<(), WorkloadError> {
    let spec = torch.device().fabric().machine().spec();
    let block = u64::try_from(shape.block_bytes()).unwrap_or(u64::MAX);
    let bytes = shape.rank_input_bytes();
    let in_tcm = torch
        .distributed
        .tcm_bytes(shape.collective, bytes, block)?;
    let tiles = shape.cube_tile_bytes();
    let flag = match size {
        Some(size) => format!("--size {size}"),
        None => "ccl.yaml n_elem".to_owned(),
    };
    let limits = [
        (
            "each cube's tiles",
            tiles,
            spec.cube().hbm.capacity,
            "a cube's HBM",
            "cube.hbm.capacity",
        ),
        (
            "a block (in the algorithm's TCM buffers, with any IPCQ slots there)",
            u128::from(in_tcm),
            spec.pe().tcm.capacity,
            "a PE's TCM",
            "pe.tcm.capacity",
        ),
    ];
    for (what, bytes, capacity, memory, key) in limits {
        if bytes > u128::from(capacity.get().bytes()) {
            return Err(WorkloadError::BadOption(format!(
                "{flag}: {what} would take {bytes} B, but {memory} holds {capacity} ({key}): \
                 lower the size or raise {key}"
            )));
        }
    }
    Ok(())
}

/// Host bytes a `--verify-data` run keeps per tensor byte on the device:
/// the live store and the op-log replay's store hold every byte written,
/// and the host holds each element's input and result as `f32` (at most
/// 4 B per element of 2 B: 4 B more per byte).
const HOST_BYTES_PER_DEVICE_BYTE: u128 = 2 + 4;

/// With `--verify-data`, what checking the data needs of host memory
/// (about [`HOST_BYTES_PER_DEVICE_BYTE`] per byte of every rank's tiles)
/// fits in `available` bytes (none known: not checked), checked before
/// anything is allocated.
fn check_host_memory(
    world_size: usize,
    size: Option<ByteSize>,
    shape: &Shape,
    available: Option<u64>,
) -> Result<(), WorkloadError> {
    let Some(available) = available else {
        return Ok(());
    };
    let tiles = shape.cube_tile_bytes();
    let device = tiles * (shape.cubes * world_size) as u128;
    let needed = device * HOST_BYTES_PER_DEVICE_BYTE;
    if needed <= u128::from(available) {
        return Ok(());
    }
    let flag = size.map_or("ccl.yaml n_elem".to_owned(), |s| format!("--size {s}"));
    Err(WorkloadError::BadOption(format!(
        "{flag} --verify-data: checking {device} B of tensors on {world_size} ranks needs \
         about {needed} B of host memory (device stores, replay, inputs and results), but \
         this host has {available} B available: lower the size or run timing-only \
         (without --verify-data)"
    )))
}

/// The host memory available now, if known: Linux `MemAvailable`, or
/// less when the process is capped (cgroup v2 `memory.max`, `ulimit -v`).
pub fn host_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let available = kib.checked_mul(1024)?;
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    let address_space = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits
                .lines()
                .find(|l| l.starts_with("Max address space"))?;
            line.split_whitespace().nth(3)?.parse::<u64>().ok()
        });
    Some(
        [cgroup, address_space]
            .into_iter()
            .flatten()
            .fold(available, u64::min),
    )
}

/// The DDP worker: place, fill, call between barriers, read back.
async fn worker(torch: &Torch, shape: Shape) -> Result<RankResult, WorkloadError> {
    let dist = &torch.distributed;
    dist.init_process_group("ahbm")?;
    let dp = DPPolicy::new(Split::RowWise, Split::Replicate, shape.cubes as u32, 1);
    let (in_blocks, out_blocks) = shape.blocks();
    let input = torch.zeros(&[shape.cubes, in_blocks * shape.n_elem], shape.dtype, &dp)?;
    match torch.device().data_mode() {
        DataMode::On => fill(&input, get_rank(), &shape).await?,
        DataMode::Off => input.copy_timing_only().await?,
    }
    let output = match out_blocks {
        0 => None,
        blocks => Some(torch.zeros(&[shape.cubes, blocks * shape.n_elem], shape.dtype, &dp)?),
    };
    // A collective's model is the whole collective's, the same from any
    // rank's arguments (`CclAlgorithm::model`): one rank states it, not
    // every rank the same O(endpoints) sum (O(ranks²) in all; ADR-0038).
    // A send's model is the calling rank's own.
    let states_model = shape.collective == Collective::SendRecv || get_rank() == ROOT_RANK;
    let model = match (shape.collective, &output) {
        _ if !states_model => None,
        (Collective::AllReduce, _) => dist.all_reduce_model(&input)?,
        (Collective::SendRecv, _) => dist.send_model(&input, ring_peers(dist)?.0)?,
        (Collective::Gather, _) => dist.rooted_model(Collective::Gather, &input, ROOT_RANK)?,
        (Collective::Scatter, Some(out)) => {
            dist.rooted_model(Collective::Scatter, out, ROOT_RANK)?
        }
        (rooted @ (Collective::Broadcast | Collective::Reduce), _) => {
            dist.rooted_model(rooted, &input, ROOT_RANK)?
        }
        (blocked, _) => dist.blocks_model(blocked, &input, in_blocks)?,
    };
    dist.barrier().await?;
    let start = sim::now();
    let marks = get_rank() == 0 && torch.marks_interval();
    if marks {
        explain::mark_start(torch.device());
    }
    call(dist, &shape, &input, output.as_ref()).await?;
    dist.barrier().await?;
    let time = sim::now() - start;
    if marks {
        let what = format!(
            "{}: the {} call on every rank, from the barrier that releases every rank \
             before it to the barrier the last rank reaches after it",
            time_figure(shape.collective),
            shape.collective
        );
        explain::mark_end(torch.device(), &what);
    }
    let values = read(output.as_ref().unwrap_or(&input)).await?;
    input.free()?;
    if let Some(output) = output {
        output.free()?;
    }
    Ok(RankResult {
        start,
        time,
        model,
        values,
    })
}

/// The `torch.distributed` call of `shape.collective`.
async fn call(
    dist: &Distributed,
    shape: &Shape,
    input: &Tensor,
    output: Option<&Tensor>,
) -> Result<(), WorkloadError> {
    let (op, root_rank) = (shape.op, ROOT_RANK);
    match (shape.collective, output) {
        (Collective::AllReduce, None) => dist.all_reduce(input, op).await?,
        (Collective::Broadcast, None) => dist.broadcast(input, root_rank).await?,
        (Collective::Reduce, None) => dist.reduce(input, root_rank, op).await?,
        (Collective::AllGather, Some(out)) => dist.all_gather(out, input).await?,
        (Collective::ReduceScatter, Some(out)) => dist.reduce_scatter(out, input, op).await?,
        (Collective::AllToAll, Some(out)) => dist.all_to_all(out, input).await?,
        (Collective::Gather, Some(out)) => {
            let list = (dist.get_rank()? == root_rank).then_some(out);
            dist.gather(input, list, root_rank).await?
        }
        (Collective::Scatter, Some(out)) => {
            let list = (dist.get_rank()? == root_rank).then_some(input);
            dist.scatter(out, list, root_rank).await?
        }
        (Collective::SendRecv, Some(out)) => {
            let (next, previous) = ring_peers(dist)?;
            let sent = dist.isend(input, next)?;
            dist.recv(out, previous).await?;
            sent.wait().await?;
        }
        (collective, _) => {
            return Err(WorkloadError::BadOption(format!(
                "no collective workload runs {collective}"
            )));
        }
    }
    Ok(())
}

/// The calling rank's ring neighbours for `send_recv`: the rank it sends
/// to and the one it receives from.
fn ring_peers(dist: &Distributed) -> Result<(usize, usize), WorkloadError> {
    let (rank, n) = (dist.get_rank()?, dist.get_world_size()?);
    Ok(((rank + 1) % n, (rank + n - 1) % n))
}

/// The input value of element `i` of endpoint `e`'s tile: a seeded
/// pseudo-random number (splitmix64 of `(e, i)`), rounded to the dtype.
fn input_value(shape: &Shape, e: usize, i: usize) -> f64 {
    let mut z = ((e as u64) << 32 ^ i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let unit = (z >> 11) as f64 / (1u64 << 53) as f64;
    let x = match shape.op {
        ReduceOp::Product => 0.5 + unit,
        _ => 2.0 * unit - 1.0,
    };
    round(shape.dtype, x)
}

/// `x` rounded to `dtype`, as f64.
fn round(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F16 => f16::from_f64(x).to_f64(),
        DType::BF16 => bf16::from_f64(x).to_f64(),
        DType::F32 => f64::from(x as f32),
    }
}

/// Writes rank `rank`'s inputs (H2D, timed).
async fn fill(tensor: &Tensor, rank: usize, shape: &Shape) -> Result<(), WorkloadError> {
    let (cubes, cols) = (shape.cubes, tensor.shape()[1]);
    let value = |(c, i): (usize, usize)| input_value(shape, rank * cubes + c, i);
    match shape.dtype {
        DType::F16 => {
            let a = Array2::from_shape_fn((cubes, cols), |p| f16::from_f64(value(p)));
            tensor.copy_from(&a).await?
        }
        DType::BF16 => {
            let a = Array2::from_shape_fn((cubes, cols), |p| bf16::from_f64(value(p)));
            tensor.copy_from(&a).await?
        }
        DType::F32 => {
            let a = Array2::from_shape_fn((cubes, cols), |p| value(p) as f32);
            tensor.copy_from(&a).await?
        }
    }
    Ok(())
}

/// The tensor's values as f32 (D2H, timed); `None` with data off (no host
/// array is built then).
async fn read(tensor: &Tensor) -> Result<Option<Vec<f32>>, WorkloadError> {
    Ok(match tensor.dtype() {
        DType::F16 => tensor
            .to_ndarray::<f16>()
            .await?
            .map(|a| a.iter().map(|v| v.to_f32()).collect()),
        DType::BF16 => tensor
            .to_ndarray::<bf16>()
            .await?
            .map(|a| a.iter().map(|v| v.to_f32()).collect()),
        DType::F32 => tensor
            .to_ndarray::<f32>()
            .await?
            .map(|a| a.iter().copied().collect()),
    })
}

/// The unit roundoff of `dtype` (half an ulp of 1).
fn unit_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
        DType::F32 => 2f64.powi(-24),
    }
}

/// The largest finite value of `dtype`.
fn max_finite(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => f16::MAX.to_f64(),
        DType::BF16 => bf16::MAX.to_f64(),
        DType::F32 => f64::from(f32::MAX),
    }
}

/// The spacing of `dtype`'s subnormal numbers (its smallest positive
/// value): below the smallest normal number a rounded result keeps this
/// absolute precision, not `unit_roundoff`'s relative one.
fn subnormal_spacing(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2f64.powi(-24),
        DType::BF16 => 2f64.powi(-133),
        DType::F32 => 2f64.powi(-149),
    }
}

/// The error bound of a reduction of `k` dtype values `xs`. Each hop
/// computes in f32 and rounds once to the dtype: a rounding adds a
/// relative error of at most `u`, the dtype's unit roundoff, or, when its
/// result is subnormal, an absolute error of at most `σ/2`, half the
/// subnormal spacing `σ` (the standard model with underflow,
/// `fl(a ∘ b) = (a ∘ b)(1 + δ) + η`, Higham, *Accuracy and Stability of
/// Numerical Algorithms*, §2.1; `γ_m = m u / (1 − m u)`, §3.1 and §4.2):
/// - sum: `γ_{k−1} Σ|x|` (any order of recursive summation; an addition
///   whose result is subnormal is exact, so `σ` does not enter);
/// - avg: the sum's bound scaled by `1/k`, plus the scaling's two roundings
///   (the f32 factor and the dtype result, which may be subnormal):
///   `γ_{k+1} Σ|x| / k + σ/2`;
/// - prod: `γ_{k−1} |Π x| + (k − 1) σ`: one subnormal spacing per combine,
///   twice its rounding error, so that an early partial product that
///   rounded below the normal range may still be scaled up by the later
///   factors (the f16 product of 144 values in `[0.5, 1.5)` is often
///   below 6.1e-5, f16's smallest normal number, where the relative
///   bound alone fails a correct result);
/// - min, max: 0 (exact in every dtype).
pub fn bound(op: ReduceOp, dtype: DType, xs: &[f64]) -> f64 {
    let (u, sigma) = (unit_roundoff(dtype), subnormal_spacing(dtype));
    let gamma = |m: usize| m as f64 * u / (1.0 - m as f64 * u);
    let k = xs.len();
    let abs_sum: f64 = xs.iter().map(|x| x.abs()).sum();
    let combines = k.saturating_sub(1);
    match op {
        ReduceOp::Sum => gamma(combines) * abs_sum,
        ReduceOp::Avg => gamma(k + 1) * abs_sum / k as f64 + sigma / 2.0,
        ReduceOp::Product => gamma(combines) * reference(op, xs).abs() + combines as f64 * sigma,
        ReduceOp::Min | ReduceOp::Max => 0.0,
    }
}

/// The exact (f64) reduction of `xs` with `op`.
fn reference(op: ReduceOp, xs: &[f64]) -> f64 {
    match op {
        ReduceOp::Sum => xs.iter().sum(),
        ReduceOp::Avg => xs.iter().sum::<f64>() / xs.len() as f64,
        ReduceOp::Product => xs.iter().product(),
        ReduceOp::Min => xs.iter().copied().fold(f64::INFINITY, f64::min),
        ReduceOp::Max => xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// What an element should hold: the reference and the allowed distance.
#[derive(Debug, Clone, Copy)]
struct Want {
    value: f64,
    bound: f64,
}

impl Want {
    /// An exact copy of `value`.
    fn exact(value: f64) -> Want {
        Want { value, bound: 0.0 }
    }
}

/// Where the values check first failed.
struct Mismatch {
    endpoint: usize,
    index: usize,
    got: f64,
    want: Want,
}

/// Every endpoint's result against the reference (see the module docs);
/// O(bytes). Empty with data off.
fn check_values(shape: &Shape, results: &[RankResult]) -> Vec<Check> {
    let Some(values): Option<Vec<&[f32]>> = results.iter().map(|r| r.values.as_deref()).collect()
    else {
        return Vec::new();
    };
    let per_endpoint = values[0].len() / shape.cubes;
    let tile = |e: usize| {
        let (rank, cube) = (e / shape.cubes, e % shape.cubes);
        &values[rank][cube * per_endpoint..(cube + 1) * per_endpoint]
    };
    let mut checks = vec![values_check(shape, &tile)];
    let everywhere = matches!(
        shape.collective,
        Collective::AllReduce | Collective::AllGather | Collective::Broadcast
    );
    if everywhere {
        let same_bits = |e: usize| {
            let mut zipped = tile(e).iter().zip(tile(0));
            zipped.all(|(a, b)| a.to_bits() == b.to_bits())
        };
        let differs = (1..shape.endpoints).find(|&e| !same_bits(e));
        let detail = match differs {
            None => format!("all {} endpoints hold the same bits", shape.endpoints),
            Some(e) => format!("endpoint {e} differs from endpoint 0"),
        };
        checks.push(Check::new("bitwise_identical", differs.is_none(), detail));
    }
    checks
}

/// The values check: exact for copies, within [`bound`] for reductions,
/// overflow reported.
fn values_check<'a>(shape: &Shape, tile: &dyn Fn(usize) -> &'a [f32]) -> Check {
    let overflows =
        |got: f64, want: Want| !got.is_finite() || want.value.abs() > max_finite(shape.dtype);
    let mut first: Option<Mismatch> = None;
    for_each_element(shape, &mut |endpoint, index, want| {
        let got = f64::from(tile(endpoint)[index]);
        let wrong = overflows(got, want) || (got - want.value).abs() > want.bound;
        if wrong && first.is_none() {
            first = Some(Mismatch {
                endpoint,
                index,
                got,
                want,
            });
        }
    });
    let Some(m) = first else {
        return Check::new("values", true, values_detail(shape));
    };
    let detail = if overflows(m.got, m.want) {
        format!(
            "overflow: endpoint {} element {} is {} (reference {:e}, {} max {:e})",
            m.endpoint,
            m.index,
            m.got,
            m.want.value,
            shape.dtype,
            max_finite(shape.dtype)
        )
    } else {
        format!(
            "endpoint {} element {}: {} is {:e} from the reference {} (bound {:e})",
            m.endpoint,
            m.index,
            m.got,
            (m.got - m.want.value).abs(),
            m.want.value,
            m.want.bound
        )
    };
    Check::new("values", false, detail)
}

/// Calls `visit(endpoint, index, want)` for every element of every
/// endpoint's result tile; each reduction's reference is computed once,
/// so the whole walk is O(bytes).
fn for_each_element(shape: &Shape, visit: &mut dyn FnMut(usize, usize, Want)) {
    let (n, endpoints, root) = (shape.n_elem, shape.endpoints, shape.root);
    let x = |e: usize, i: usize| input_value(shape, e, i);
    let mut contributions = vec![0.0; endpoints];
    let mut reduced = |i: usize| {
        for (j, c) in contributions.iter_mut().enumerate() {
            *c = x(j, i);
        }
        Want {
            value: reference(shape.op, &contributions),
            bound: bound(shape.op, shape.dtype, &contributions),
        }
    };
    match shape.collective {
        Collective::AllReduce => (0..n).for_each(|i| {
            let want = reduced(i);
            (0..endpoints).for_each(|e| visit(e, i, want));
        }),
        Collective::Reduce => {
            (0..n).for_each(|i| visit(root, i, reduced(i)));
            for e in (0..endpoints).filter(|&e| e != root) {
                (0..n).for_each(|i| visit(e, i, Want::exact(x(e, i))));
            }
        }
        Collective::ReduceScatter => {
            for e in 0..endpoints {
                (0..n).for_each(|i| visit(e, i, reduced(e * n + i)));
            }
        }
        Collective::Broadcast => {
            for e in 0..endpoints {
                (0..n).for_each(|i| visit(e, i, Want::exact(x(root, i))));
            }
        }
        Collective::AllGather | Collective::AllToAll => {
            for e in 0..endpoints {
                for k in 0..endpoints * n {
                    let (j, i) = (k / n, k % n);
                    let source = match shape.collective {
                        Collective::AllGather => i,
                        _ => e * n + i,
                    };
                    visit(e, k, Want::exact(x(j, source)));
                }
            }
        }
        Collective::Gather => {
            let (cubes, ranks) = (shape.cubes, shape.ranks());
            for e in 0..endpoints {
                let on_root = e / cubes == ROOT_RANK;
                for k in 0..ranks * n {
                    let source = (k / n * cubes + e % cubes, k % n);
                    let want = match on_root {
                        true => x(source.0, source.1),
                        false => 0.0,
                    };
                    visit(e, k, Want::exact(want));
                }
            }
        }
        Collective::Scatter => {
            let cubes = shape.cubes;
            for e in 0..endpoints {
                let (rank, root) = (e / cubes, ROOT_RANK * cubes + e % cubes);
                (0..n).for_each(|i| visit(e, i, Want::exact(x(root, rank * n + i))));
            }
        }
        Collective::SendRecv => {
            let cubes = shape.cubes;
            for e in 0..endpoints {
                let source = (e + endpoints - cubes) % endpoints;
                (0..n).for_each(|i| visit(e, i, Want::exact(x(source, i))));
            }
        }
        Collective::Custom => {}
    }
}

fn values_detail(shape: &Shape) -> String {
    match shape.collective.reduces() {
        true => format!(
            "{} of {} endpoints within the {} bound of an f64 reference",
            shape.op.name(),
            shape.endpoints,
            shape.dtype
        ),
        false => format!("exact copies on all {} endpoints", shape.endpoints),
    }
}

/// nccl-tests' busbw factor of `collective` over `n` participants.
pub fn busbw_factor(collective: Collective, n: usize) -> f64 {
    let n = n as f64;
    match collective {
        Collective::AllReduce => 2.0 * (n - 1.0) / n,
        Collective::AllGather
        | Collective::ReduceScatter
        | Collective::AllToAll
        | Collective::Gather
        | Collective::Scatter => (n - 1.0) / n,
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv | Collective::Custom => {
            1.0
        }
    }
}

/// The name of the call's time figure: the call's name without
/// underscores, `_ps` (`allreduce_ps`, `allgather_ps`, …).
fn time_figure(collective: Collective) -> &'static str {
    match collective {
        Collective::AllReduce => "allreduce_ps",
        Collective::AllGather => "allgather_ps",
        Collective::ReduceScatter => "reducescatter_ps",
        Collective::Broadcast => "broadcast_ps",
        Collective::Reduce => "reduce_ps",
        Collective::AllToAll => "alltoall_ps",
        Collective::SendRecv => "sendrecv_ps",
        Collective::Gather => "gather_ps",
        Collective::Scatter => "scatter_ps",
        Collective::Custom => "custom_ps",
    }
}

/// Checks and figures from every rank's result, in rank order.
fn outcome(algorithm: &str, shape: &Shape, results: &[RankResult]) -> Outcome {
    let checks = check_values(shape, results);
    let time = results.iter().map(|r| r.time).max().unwrap_or_default();
    let participant_bytes = shape.participant_bytes();
    let seconds = time.as_ps() as f64 * 1e-12;
    let algbw = participant_bytes as f64 / seconds / 1e9;
    let factor = busbw_factor(shape.collective, shape.participants());
    let count = shape.count();
    let mut figures = vec![
        Figure::text("algorithm", algorithm),
        Figure::text("dtype", shape.dtype.name()),
    ];
    if shape.collective.reduces() {
        figures.push(Figure::text("op", shape.op.name()));
    }
    let rooted = [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Gather,
        Collective::Scatter,
    ];
    if rooted.contains(&shape.collective) {
        figures.push(Figure::int("root", ROOT_RANK as u64));
    }
    figures.extend([
        Figure::int("ranks", results.len() as u64),
        Figure::int("endpoints", shape.endpoints as u64),
        Figure::int("count", count),
        Figure::int("bytes_per_rank", count * shape.dtype.size()),
        Figure::int("bytes_per_participant", participant_bytes),
    ]);
    if shape.padding() > 0 {
        figures.push(Figure::int("padding_per_rank", shape.padding()));
    }
    figures.push(Figure::time(time_figure(shape.collective), time));
    if let Some(model) = results.iter().filter_map(|r| r.model).max() {
        figures.push(Figure::time("model_ps", model));
    }
    figures.extend([
        Figure::real("algbw_gbps", algbw),
        Figure::real("busbw_factor", factor),
        Figure::real("busbw_gbps", algbw * factor),
    ]);
    // Last: the call's time is the first `_ps` figure a table reads.
    let start = results.iter().map(|r| r.start).max().unwrap_or_default();
    figures.push(Figure::int("call_start_ps", start.as_ps()));
    Outcome { checks, figures }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_the_dtype_and_the_participants() {
        let xs = [0.5, -0.25, 1.0, 0.75];
        // γ_3 in f16 = 3 · 2^-11 / (1 − 3 · 2^-11); Σ|x| = 2.5.
        let u = 2f64.powi(-11);
        let want = 3.0 * u / (1.0 - 3.0 * u) * 2.5;
        assert_eq!(bound(ReduceOp::Sum, DType::F16, &xs), want);
        // f32's unit roundoff is 2^13 times smaller.
        assert!(bound(ReduceOp::Sum, DType::F32, &xs) < want / 8000.0);
        assert_eq!(bound(ReduceOp::Max, DType::BF16, &xs), 0.0);
        assert_eq!(reference(ReduceOp::Min, &xs), -0.25);
        assert_eq!(reference(ReduceOp::Avg, &xs), 0.5);
        assert_eq!(reference(ReduceOp::Product, &xs), -0.09375);
    }

    #[test]
    fn products_that_round_below_the_normal_range_stay_within_the_bound() {
        // PE_MATH's combine: an f32 product rounded once to f16. 144
        // factors in [0.5, 1.5) (9 SIPs × 16 cubes), chained as
        // ring_allreduce does and paired as a tree does.
        let mul = |a: f64, b: f64| f16::from_f32((a * b) as f32).to_f64();
        let (mut state, mut below_normal, mut beyond_relative) = (1u64, 0, 0);
        for _ in 0..2000 {
            let xs: Vec<f64> = (0..144)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    f16::from_f64(0.5 + (state >> 11) as f64 / (1u64 << 53) as f64).to_f64()
                })
                .collect();
            let exact = reference(ReduceOp::Product, &xs);
            let chain = xs[1..].iter().fold(xs[0], |p, &x| mul(p, x));
            let mut level = xs.clone();
            while level.len() > 1 {
                let pairs = level.chunks(2);
                level = pairs
                    .map(|p| p.iter().skip(1).fold(p[0], |a, &b| mul(a, b)))
                    .collect();
            }
            let bound = bound(ReduceOp::Product, DType::F16, &xs);
            let relative = bound - 143.0 * 2f64.powi(-24);
            for got in [chain, level[0]] {
                let error = (got - exact).abs();
                assert!(error <= bound, "{got} vs {exact}: {error} > {bound}");
                beyond_relative += usize::from(error > relative);
            }
            below_normal += usize::from(exact < f16::MIN_POSITIVE.to_f64());
        }
        // The case the subnormal term is for occurs, and the relative
        // bound alone would fail a correct result.
        assert!(
            below_normal > 50 && beyond_relative > 0,
            "{below_normal} {beyond_relative}"
        );
        // The term is the dtype's subnormal spacing per combine.
        let xs = [0.5, 0.75, 1.25];
        let sigma_f32 = 2f64.powi(-149);
        let relative = 2.0 * 2f64.powi(-24) / (1.0 - 2.0 * 2f64.powi(-24)) * 0.46875;
        assert_eq!(
            bound(ReduceOp::Product, DType::F32, &xs),
            relative + 2.0 * sigma_f32
        );
        let avg = bound(ReduceOp::Avg, DType::F16, &xs) - bound(ReduceOp::Avg, DType::F32, &xs);
        assert!(
            avg > 2f64.powi(-25),
            "avg's last rounding may be subnormal: {avg}"
        );
    }

    #[test]
    fn verify_data_is_refused_when_the_host_cannot_hold_the_check() {
        let shape = Shape {
            collective: Collective::AllReduce,
            op: ReduceOp::Sum,
            dtype: DType::F16,
            cubes: 16,
            endpoints: 1024,
            n_elem: 1 << 20,
            count: None,
            root: 0,
        };
        // 64 ranks x 16 cubes x 2 MiB tiles = 2 GiB on the device, about
        // 6 x that on the host.
        let needed = 6 * (2u64 << 30);
        let size = Some(ByteSize(32 << 20));
        assert!(check_host_memory(64, size, &shape, Some(needed)).is_ok());
        assert!(check_host_memory(64, size, &shape, None).is_ok());
        let error = check_host_memory(64, size, &shape, Some(needed - 1)).unwrap_err();
        let message = error.to_string();
        assert!(error.is_usage(), "{message}");
        assert!(
            message.contains("--size 33554432 --verify-data")
                && message.contains(&format!("about {needed} B of host memory"))
                && message.contains("without --verify-data"),
            "{message}"
        );
    }

    #[test]
    fn busbw_factors_are_nccl_tests() {
        assert_eq!(busbw_factor(Collective::AllReduce, 4), 1.5);
        assert_eq!(busbw_factor(Collective::AllGather, 4), 0.75);
        assert_eq!(busbw_factor(Collective::AllToAll, 4), 0.75);
        assert_eq!(busbw_factor(Collective::Broadcast, 4), 1.0);
        assert_eq!(time_figure(Collective::ReduceScatter), "reducescatter_ps");
        assert_eq!(time_figure(Collective::AllReduce), "allreduce_ps");
    }
}
