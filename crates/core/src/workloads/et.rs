//! Runs a set of Chakra execution traces on the machine (ADR-0034): every
//! rank's graph on its SIP (rank = SIP), each node as soon as its
//! dependencies have ended.
//!
//! How each node runs:
//! - `COMP_NODE`: the rank's compute stream, one at a time, for the
//!   roofline of the `gemm` workload spread over every PE of the SIP:
//!   `max(num_ops` on the PE_GEMM arrays at peak, `tensor_size` over the
//!   cubes' HBM pseudo-channels`)` (`tiled_gemm::compute_bound`,
//!   `hbm_bound`); with `--et-compute measured`, or when the node gives
//!   neither, its `duration_micros`. A host op (`is_cpu_op`) takes its
//!   `duration_micros` on the rank's host stream.
//! - `MEM_LOAD_NODE` / `MEM_STORE_NODE`: `tensor_size` over the cubes'
//!   HBM, on the rank's memory stream, one at a time.
//! - `COMM_COLL_NODE`: the `ahbm` process group's call (ccl.yaml's default
//!   algorithm for it) on a tensor of `comm_size` bytes (f16) per rank,
//!   placed one tile per cube as the `ccl_*` workloads place it, in the
//!   process group of its `pg_name` (`Distributed::new_group`); a group's
//!   collectives run one at a time per rank, in file order.
//! - `COMM_SEND_NODE` / `COMM_RECV_NODE`: `isend` / `irecv` of `comm_size`
//!   bytes, matched by (peer, tag) in order; any number at once.
//!
//! Reported: the time from the first node to the last rank's last node
//! (`et_ps`); per rank its compute, communication and exposed
//! communication (communication while no compute runs); per collective
//! type the count, bytes and time; per pipeline stage (the ranks the
//! process groups join, [`stages`]) its busiest rank's compute and the
//! stage with the most. `--trace` gets one slice per node on
//! its rank's `sip{s}.et.*` tracks (`s` its SIP: the rank, but in a job
//! of `run --jobs`), named by the node's name.
//!
//! A client of `runtime`; knows the `chakra` graphs, nothing of the CLI.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::str::FromStr;

pub use super::replay::ReplayCounts;
use super::replay::{CallId, Kind, Replays, Shape, Symmetry, Turn};
use super::tiled_gemm::{compute_bound, hbm_bound};
use super::{Figure, WorkloadError};
use crate::chakra::world::comm_name;
use crate::chakra::{CommType, Op, TraceSet};
use crate::config::units::Slowdown;
use crate::hw::explain::{self, Class};
use crate::mem::DType;
use crate::runtime::{DPPolicy, Distributed, ReduceOp, Split, Tensor, Torch, spawn};
use crate::sim::{self, Event, Resource, SimDuration, SimTime};
use crate::topology::{Machine, Repeats};
use crate::trace::{self, CompleteEvent};

/// How compute nodes are timed (`--et-compute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ComputeMode {
    /// The roofline of `num_ops` and `tensor_size` on the rank's SIP.
    #[default]
    Roofline,
    /// The node's `duration_micros`.
    Measured,
}

impl FromStr for ComputeMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "roofline" => Ok(ComputeMode::Roofline),
            "measured" => Ok(ComputeMode::Measured),
            _ => Err(format!("expected roofline or measured, got `{text}`")),
        }
    }
}

/// Where a node runs on its rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stream {
    Compute,
    Memory,
    Host,
    Comm,
    None,
}

impl Stream {
    fn of(op: &Op) -> Stream {
        match op {
            Op::Compute { cpu: true, .. } => Stream::Host,
            Op::Compute { .. } => Stream::Compute,
            Op::Memory { .. } => Stream::Memory,
            Op::Collective { .. } | Op::Send { .. } | Op::Recv { .. } => Stream::Comm,
            Op::Nop => Stream::None,
        }
    }

    fn track(self) -> &'static str {
        match self {
            Stream::Compute => "compute",
            Stream::Memory => "memory",
            Stream::Host => "host",
            Stream::Comm => "comm",
            Stream::None => "other",
        }
    }
}

/// When one node ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Its start (its dependencies and its stream free).
    pub start: SimTime,
    /// Its end.
    pub end: SimTime,
}

/// One rank's node times, in file order.
pub type RankSpans = Vec<Span>;

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct EtResult {
    /// When the first node could start.
    pub start: SimTime,
    /// Every rank's node times.
    pub spans: Vec<RankSpans>,
    /// Under `simulation.repeats: replay`, how many collective calls ran
    /// and how many were replayed.
    pub replays: Option<ReplayCounts>,
}

/// Everything a rank's node tasks share.
struct RankContext {
    rank: usize,
    /// The SIP the rank runs on (its own number but in a job).
    sip: u32,
    torch: Torch,
    set: Rc<TraceSet>,
    groups: Rc<BTreeMap<String, Distributed>>,
    mode: ComputeMode,
    /// The slowest of the SIP's PEs (`faults.compute`, ADR-0106): a
    /// compute node spread over them all ends when that one does.
    slowdown: Slowdown,
    done: Vec<Event>,
    /// The previous collective of the same group on this rank.
    previous: Vec<Option<usize>>,
    /// Under `simulation.repeats: replay`, the run's meetings and first
    /// times, and this rank's count of calls per group so far.
    replays: Option<Rc<Replays>>,
    calls: RefCell<BTreeMap<String, usize>>,
    compute: Resource,
    memory: Resource,
    host: Resource,
    /// Trace lanes per stream: when each becomes free.
    lanes: RefCell<BTreeMap<Stream, Vec<SimTime>>>,
}

/// Runs `set` on the machine of `torch` (see the module docs); every rank
/// must have a SIP (the caller checks).
pub async fn run(
    torch: Torch,
    set: Rc<TraceSet>,
    mode: ComputeMode,
) -> Result<EtResult, WorkloadError> {
    let dist = torch.distributed.clone();
    dist.init_process_group("ahbm")?;
    let n = set.graphs.len();
    let world_ranks: Vec<usize> = (0..n).collect();
    let mut groups = BTreeMap::new();
    for (name, ranks) in &set.world.groups {
        let group = match (ranks == &world_ranks, dist.get_world_size()? == n) {
            (true, true) => dist.clone(),
            _ => dist.new_group(ranks)?,
        };
        groups.insert(name.clone(), group);
    }
    check_collectives(&torch, &set, &groups)?;
    let groups = Rc::new(groups);
    let repeats = torch
        .device()
        .fabric()
        .machine()
        .spec()
        .simulation()
        .repeats;
    // A job's ranks are not the machine's SIPs: only the very same
    // members replay a call (ADR-0116).
    let symmetry = match torch.job_sips() {
        None => Symmetry::of(torch.device().fabric().machine().spec().system().sips),
        Some(_) => Symmetry::None,
    };
    let replays = (repeats == Repeats::Replay).then(|| Rc::new(Replays::new(symmetry)));
    let start = sim::now();
    let shared = (torch, set, groups, replays.clone());
    let spans = spawn(n, move |rank| {
        let (torch, set, groups, replays) = shared.clone();
        let context = RankContext::new(rank, torch, set, groups, mode, replays);
        async move { context.run().await }
    })
    .await
    .map_err(|e| WorkloadError::Rank(e.rank, Box::new(e.source)))?;
    let replays = replays.map(|r| r.counts());
    Ok(EtResult {
        start,
        spans,
        replays,
    })
}

/// Refuses, before anything runs, a collective its group cannot run: one
/// no ccl.yaml entry serves, a rooted one on a sub-group, a block larger
/// than the algorithm's TCM buffers (with any IPCQ slots in TCM).
fn check_collectives(
    torch: &Torch,
    set: &TraceSet,
    groups: &BTreeMap<String, Distributed>,
) -> Result<(), WorkloadError> {
    let machine = torch.device().fabric().machine();
    let tcm = machine.spec().pe().tcm.capacity.get().bytes();
    let cubes = machine.cubes_per_sip() as usize;
    let mut seen = std::collections::BTreeSet::new();
    for (rank, graph) in set.graphs.iter().enumerate() {
        for node in &graph.nodes {
            let Op::Collective { comm, bytes, group } = &node.op else {
                continue;
            };
            let name = group_key(set, group.as_deref());
            if !seen.insert((name.clone(), *comm as i32, *bytes)) {
                continue;
            }
            let at = || format!("{}: node {}", set.files[rank], node.id);
            let Some(collective) = collective_of(*comm) else {
                continue;
            };
            let dist = &groups[&name];
            let rooted = matches!(comm, CommType::Gather | CommType::Scatter);
            if rooted && set.world.groups[&name].len() != set.graphs.len() {
                return Err(WorkloadError::BadOption(format!(
                    "{}: {} on the sub-group `{name}` is not supported (gather and scatter run \
                     on every rank)",
                    at(),
                    comm_name(*comm)
                )));
            }
            let endpoints = dist
                .endpoints(collective)
                .map_err(|e| WorkloadError::BadOption(format!("{}: {e}", at())))?;
            let layout = Layout::new(*comm, *bytes, cubes, endpoints);
            let block = layout.n_elem as u64 * DType::F16.size();
            let need = dist.tcm_bytes(collective, layout.input_bytes(cubes), block)?;
            if need > tcm {
                return Err(WorkloadError::BadOption(format!(
                    "{}: a {} of {bytes} B per rank needs {need} B of TCM per endpoint for its \
                     algorithm and the IPCQ slots there, but a PE's TCM holds {tcm} B (pe.tcm.capacity)",
                    at(),
                    comm_name(*comm)
                )));
            }
        }
    }
    Ok(())
}

/// The key of `group` in `set.world.groups`.
fn group_key(set: &TraceSet, group: Option<&str>) -> String {
    match (group, set.world.names_as_world) {
        (Some(name), false) => name.to_owned(),
        _ => String::new(),
    }
}

/// The process-group call of `comm` (`None`: a barrier).
fn collective_of(comm: CommType) -> Option<crate::ccl::Collective> {
    use crate::ccl::Collective as C;
    Some(match comm {
        CommType::AllReduce => C::AllReduce,
        CommType::Reduce => C::Reduce,
        CommType::AllGather => C::AllGather,
        CommType::Gather => C::Gather,
        CommType::Scatter => C::Scatter,
        CommType::Broadcast => C::Broadcast,
        CommType::AllToAll => C::AllToAll,
        CommType::ReduceScatter | CommType::ReduceScatterBlock => C::ReduceScatter,
        CommType::Barrier => return None,
    })
}

/// A collective's tensors: `in_blocks` and `out_blocks` blocks of `n_elem`
/// f16 elements per cube tile (the `ccl_*` workloads' layout; 0 output
/// blocks: in place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    in_blocks: usize,
    out_blocks: usize,
    n_elem: usize,
}

impl Layout {
    /// `bytes` of input per rank over `cubes` tiles, in a group of
    /// `endpoints` endpoints; blocks are rounded up to whole elements.
    fn new(comm: CommType, bytes: u64, cubes: usize, endpoints: usize) -> Layout {
        let ranks = endpoints / cubes;
        let (in_blocks, out_blocks) = match comm {
            CommType::AllGather => (1, endpoints),
            CommType::ReduceScatter | CommType::ReduceScatterBlock => (endpoints, 1),
            CommType::AllToAll => (endpoints, endpoints),
            CommType::Gather => (1, ranks),
            CommType::Scatter => (ranks, 1),
            _ => (1, 0),
        };
        let elements = bytes.div_ceil(DType::F16.size());
        let n_elem = elements.div_ceil((cubes * in_blocks) as u64).max(1) as usize;
        Layout {
            in_blocks,
            out_blocks,
            n_elem,
        }
    }

    /// Bytes of the input tensor a rank gives the call (`cubes` tiles of
    /// `in_blocks` blocks): what ccl.yaml's size rules judge it by.
    fn input_bytes(&self, cubes: usize) -> u64 {
        (cubes * self.in_blocks * self.n_elem) as u64 * DType::F16.size()
    }
}

impl RankContext {
    fn new(
        rank: usize,
        torch: Torch,
        set: Rc<TraceSet>,
        groups: Rc<BTreeMap<String, Distributed>>,
        mode: ComputeMode,
        replays: Option<Rc<Replays>>,
    ) -> Rc<RankContext> {
        let graph = &set.graphs[rank];
        let sip = torch.sip_of_rank(rank);
        let slowdown = slowest_pe(torch.device().fabric().machine(), sip);
        let done = graph
            .nodes
            .iter()
            .map(|n| Event::new(&format!("rank{rank}.et.node{}", n.id)))
            .collect();
        let mut last: BTreeMap<String, usize> = BTreeMap::new();
        let previous = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| match &node.op {
                Op::Collective { group, .. } => last.insert(group_key(&set, group.as_deref()), i),
                _ => None,
            })
            .collect();
        Rc::new(RankContext {
            rank,
            sip,
            torch,
            done,
            previous,
            replays,
            calls: RefCell::new(BTreeMap::new()),
            compute: Resource::new(&format!("rank{rank}.et.compute"), 1),
            memory: Resource::new(&format!("rank{rank}.et.memory"), 1),
            host: Resource::new(&format!("rank{rank}.et.host"), 1),
            lanes: RefCell::new(BTreeMap::new()),
            set,
            groups,
            mode,
            slowdown,
        })
    }

    /// Every node at once (each waits for its own dependencies), polled by
    /// the rank's task so that a failure cancels the rank; their times in
    /// file order, or the first failure, naming the node.
    async fn run(self: Rc<Self>) -> Result<RankSpans, WorkloadError> {
        let count = self.set.graphs[self.rank].nodes.len();
        let nodes = (0..count).map(|i| self.clone().node(i));
        futures::future::try_join_all(nodes).await
    }

    /// Node `i`: waits for its dependencies and its stream, runs, marks
    /// itself done.
    async fn node(self: Rc<Self>, i: usize) -> Result<Span, WorkloadError> {
        let node = &self.set.graphs[self.rank].nodes[i];
        for &d in &node.deps {
            self.done[d].wait().await;
        }
        if let Some(previous) = self.previous[i] {
            self.done[previous].wait().await;
        }
        let stream = Stream::of(&node.op);
        let _guard = match stream {
            Stream::Compute => Some(self.compute.acquire().await),
            Stream::Memory => Some(self.memory.acquire().await),
            Stream::Host => Some(self.host.acquire().await),
            Stream::Comm | Stream::None => None,
        };
        let start = sim::now();
        // Boxed: every node's future exists from the start (a step of a
        // thousand ranks has millions), and a collective's state inline
        // would make each of them as large as the largest.
        Box::pin(self.execute(&node.op, node.duration_micros))
            .await
            .map_err(|error| {
                WorkloadError::BadOption(format!(
                    "{}: node {} (`{}`): {error}",
                    self.set.files[self.rank], node.id, node.name
                ))
            })?;
        let span = Span {
            start,
            end: sim::now(),
        };
        self.done[i].set();
        self.record(stream, &node.name, span);
        Ok(span)
    }

    /// A node's modelled time, `time` from now, labelled for `--explain`
    /// as `what` of this rank's trace (class `class`): a trace's compute
    /// and memory nodes are not unexplained time.
    async fn timed(&self, class: Class, what: &str, time: SimDuration) {
        if explain::recording() {
            let name = format!("rank{}.trace {what}", self.rank);
            explain::push_named(&name, class, explain::TermKind::Service, time.as_ps());
        }
        explain::sleep_until(sim::now() + time).await;
    }

    async fn execute(&self, op: &Op, micros: u64) -> Result<(), WorkloadError> {
        let measured = SimDuration::from_ps(micros.saturating_mul(sim::PS_PER_US));
        match op {
            Op::Compute { cpu: true, .. } => self.timed(Class::Launch, "host", measured).await,
            Op::Compute {
                num_ops,
                tensor_size,
                ..
            } => {
                let time = match (self.mode, num_ops, tensor_size) {
                    (ComputeMode::Measured, ..) | (_, 0, 0) => measured,
                    _ => self.roofline(*num_ops, *tensor_size)?,
                };
                let time = self.slowdown.stretch(time).map_err(|error| {
                    WorkloadError::BadOption(format!("rank {}: {error}", self.rank))
                })?;
                self.timed(Class::PeMath, "compute", time).await;
            }
            Op::Memory { bytes, .. } => {
                let time = self.roofline(0, *bytes)?;
                self.timed(Class::Hbm, "memory", time).await;
            }
            Op::Collective { comm, bytes, group } => {
                let key = group_key(&self.set, group.as_deref());
                let dist = &self.groups[&key];
                match (&self.replays, collective_of(*comm)) {
                    (Some(replays), Some(_)) => {
                        let shape = Shape {
                            kind: Kind::Collective(*comm),
                            bytes: *bytes,
                        };
                        let ranks = self.set.world.groups[&key].as_slice().into();
                        let call = self.next_call(key);
                        let run = Box::pin(self.collective(dist, *comm, *bytes));
                        self.replayed(replays, (call, ranks), shape, run).await?
                    }
                    _ => Box::pin(self.collective(dist, *comm, *bytes)).await?,
                }
            }
            Op::Send { peer, bytes, .. } | Op::Recv { peer, bytes, .. } => {
                let send = matches!(op, Op::Send { .. });
                let run = Box::pin(self.p2p(send, *peer, *bytes));
                match &self.replays {
                    Some(replays) => {
                        let shape = Shape {
                            kind: Kind::SendRecv,
                            bytes: *bytes,
                        };
                        let (src, dst) = match send {
                            true => (self.rank, *peer),
                            false => (*peer, self.rank),
                        };
                        let call = self.next_call(format!("send {src}->{dst}"));
                        let ranks: Rc<[usize]> = Rc::new([src, dst]);
                        self.replayed(replays, (call, ranks), shape, run).await?
                    }
                    None => run.await?,
                }
            }
            Op::Nop => {}
        }
        Ok(())
    }

    /// `num_ops` and `bytes` spread over every PE and cube of the SIP: the
    /// larger of the GEMM arrays' and the HBMs' bound.
    fn roofline(&self, num_ops: u64, bytes: u64) -> Result<SimDuration, WorkloadError> {
        let machine = self.torch.device().fabric().machine();
        let spec = machine.spec();
        let cubes = u64::from(machine.cubes_per_sip());
        let pes = cubes * u64::from(machine.pes_per_cube());
        let compute = compute_bound(spec.pe(), num_ops.div_ceil(pes))?;
        let memory = hbm_bound(spec, bytes.div_ceil(cubes))?;
        Ok(compute.max(memory))
    }

    /// A tensor of `elements` f16 per cube tile, one tile per cube.
    fn tensor(&self, name: &str, elements: usize) -> Result<Tensor, WorkloadError> {
        let cubes = self.torch.device().fabric().machine().cubes_per_sip();
        let dp = DPPolicy::new(Split::RowWise, Split::Replicate, cubes, 1);
        Ok(self
            .torch
            .empty(&[cubes as usize, elements], DType::F16, &dp)?
            .named(name))
    }

    async fn collective(
        &self,
        dist: &Distributed,
        comm: CommType,
        bytes: u64,
    ) -> Result<(), WorkloadError> {
        let Some(collective) = collective_of(comm) else {
            dist.barrier().await?;
            return Ok(());
        };
        let cubes = self.torch.device().fabric().machine().cubes_per_sip() as usize;
        let layout = Layout::new(comm, bytes, cubes, dist.endpoints(collective)?);
        let input = self.tensor("et.input", layout.in_blocks * layout.n_elem)?;
        let output = match layout.out_blocks {
            0 => None,
            blocks => Some(self.tensor("et.output", blocks * layout.n_elem)?),
        };
        let root = 0;
        let is_root = dist.get_rank()? == root;
        let (op, out) = (ReduceOp::Sum, output.as_ref());
        match (comm, out) {
            (CommType::AllReduce, _) => dist.all_reduce(&input, op).await?,
            (CommType::Reduce, _) => dist.reduce(&input, root, op).await?,
            (CommType::Broadcast, _) => dist.broadcast(&input, root).await?,
            (CommType::AllGather, Some(out)) => dist.all_gather(out, &input).await?,
            (CommType::AllToAll, Some(out)) => dist.all_to_all(out, &input).await?,
            (CommType::Gather, Some(out)) => {
                dist.gather(&input, is_root.then_some(out), root).await?
            }
            (CommType::Scatter, Some(out)) => {
                dist.scatter(out, is_root.then_some(&input), root).await?
            }
            (_, Some(out)) => dist.reduce_scatter(out, &input, op).await?,
            (_, None) => unreachable!("every out-of-place layout has an output"),
        }
        input.free()?;
        if let Some(output) = output {
            output.free()?;
        }
        Ok(())
    }

    /// This rank's next call of `group` (a group's key, or a send's pair):
    /// the group and the call's place in the order this rank makes them.
    fn next_call(&self, group: String) -> CallId {
        let mut calls = self.calls.borrow_mut();
        let k = calls.entry(group.clone()).or_default();
        *k += 1;
        (group, *k - 1)
    }

    /// A call of `shape` among `ranks` under `simulation.repeats:
    /// replay`: its members meet, then it runs (`run`) or takes the time
    /// its first call took (module `replay`).
    async fn replayed(
        &self,
        replays: &Replays,
        (call, ranks): (CallId, Rc<[usize]>),
        shape: Shape,
        run: impl Future<Output = Result<(), WorkloadError>>,
    ) -> Result<(), WorkloadError> {
        // The world check lists every group called (the world's as "") and
        // refuses a caller that is not a member (`CheckError::NotMember`);
        // a send's pair has both ranks.
        let member = (ranks.iter().position(|&r| r == self.rank))
            .expect("the world check makes every caller a member of its group");
        match replays.meet(&call, &shape, &ranks, member).await {
            Turn::Simulate => run.await?,
            Turn::Replay(time) => {
                // Named by the call's group (a send by its pair), so that
                // the critical path says which collective it went through.
                let what = match (shape.kind, call.0.as_str()) {
                    (Kind::SendRecv, pair) => format!("replayed {pair}"),
                    (Kind::Collective(comm), "") => {
                        format!("replayed {} of the world", comm_name(comm))
                    }
                    (Kind::Collective(comm), group) => {
                        format!("replayed {} of {group}", comm_name(comm))
                    }
                };
                let what = format!("{what} (ADR-0107)");
                self.timed(Class::Other, &what, time).await;
            }
        }
        replays.leave(&call, member);
        Ok(())
    }

    async fn p2p(&self, send: bool, peer: usize, bytes: u64) -> Result<(), WorkloadError> {
        let cubes = self.torch.device().fabric().machine().cubes_per_sip() as usize;
        let elements = bytes
            .div_ceil(DType::F16.size())
            .div_ceil(cubes as u64)
            .max(1) as usize;
        let dist = &self.torch.distributed;
        let tensor = self.tensor("et.p2p", elements)?;
        // Awaited in the node's own future, not in a `Work` task of its
        // own: a failing rank cancels the others, and with them their
        // pending transfers (a detached `irecv` would wait for ever).
        // Boxed apart: a recv waiting for its send (or a send for its
        // recv) holds only its own side's state.
        match send {
            true => Box::pin(dist.send(&tensor, peer)).await?,
            false => Box::pin(dist.recv(&tensor, peer)).await?,
        }
        tensor.free()?;
        Ok(())
    }

    /// The node's slice on the first free lane of its stream's track.
    fn record(&self, stream: Stream, name: &str, span: Span) {
        if !trace::is_recording() {
            return;
        }
        let lane = {
            let mut lanes = self.lanes.borrow_mut();
            let lanes = lanes.entry(stream).or_default();
            let lane = lanes
                .iter()
                .position(|&free| free <= span.start)
                .unwrap_or(lanes.len());
            if lane == lanes.len() {
                lanes.push(span.end);
            }
            lanes[lane] = span.end;
            lane
        };
        let track = match lane {
            0 => format!("sip{}.et.{}", self.sip, stream.track()),
            lane => format!("sip{}.et.{}{lane}", self.sip, stream.track()),
        };
        trace::record_complete(&CompleteEvent {
            track: &track,
            name,
            category: "kernbench::workloads::et",
            start: span.start,
            end: span.end,
            args: &[],
        });
    }
}

/// The largest `faults.compute` slowdown of SIP `sip`'s PEs.
fn slowest_pe(machine: &Machine, sip: u32) -> Slowdown {
    let (cubes, pes) = (machine.cubes_per_sip(), machine.pes_per_cube());
    let faults = machine.spec().faults();
    (0..cubes)
        .flat_map(|cube| (0..pes).map(move |pe| faults.pe_slowdown(sip, cube, pe)))
        .max()
        .unwrap_or(Slowdown::NONE)
}

/// `text` as a figure name: figure names are `&'static str`, and these
/// are made per rank and per collective type, so each distinct name is
/// kept once for the life of the process (a bounded set: five per rank
/// and three per collective type).
fn figure_name(text: String) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(text.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(text.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// The measure of the union of `spans`.
fn union(mut spans: Vec<(SimTime, SimTime)>) -> Vec<(SimTime, SimTime)> {
    spans.sort();
    let mut merged: Vec<(SimTime, SimTime)> = Vec::new();
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

fn measure(spans: &[(SimTime, SimTime)]) -> SimDuration {
    spans
        .iter()
        .fold(SimDuration::ZERO, |sum, &(s, e)| sum + (e - s))
}

/// The part of `a` (a union) that `b` (a union) does not cover.
fn uncovered(a: &[(SimTime, SimTime)], b: &[(SimTime, SimTime)]) -> SimDuration {
    let mut total = SimDuration::ZERO;
    for &(s, e) in a {
        let mut at = s;
        for &(bs, be) in b.iter().filter(|&&(bs, be)| be > s && bs < e) {
            if bs > at {
                total += bs - at;
            }
            at = at.max(be);
        }
        if e > at {
            total += e - at;
        }
    }
    total
}

/// One rank's split of its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankSplit {
    /// First node's start to last node's end.
    pub span: SimDuration,
    /// Time some compute node ran.
    pub compute: SimDuration,
    /// Time some communication node ran.
    pub comm: SimDuration,
    /// Communication while no compute ran.
    pub exposed: SimDuration,
}

/// The split of rank `rank`'s time.
pub fn split(set: &TraceSet, result: &EtResult, rank: usize) -> RankSplit {
    let nodes = &set.graphs[rank].nodes;
    let spans = &result.spans[rank];
    let pick = |want: Stream| {
        let chosen = nodes
            .iter()
            .zip(spans)
            .filter(|(n, _)| Stream::of(&n.op) == want);
        union(chosen.map(|(_, s)| (s.start, s.end)).collect())
    };
    let (compute, comm) = (pick(Stream::Compute), pick(Stream::Comm));
    let end = spans.iter().map(|s| s.end).max().unwrap_or(result.start);
    RankSplit {
        span: end - result.start,
        compute: measure(&compute),
        comm: measure(&comm),
        exposed: uncovered(&comm, &compute),
    }
}

/// The time from the first node to the last rank's last node.
pub fn step_time(set: &TraceSet, result: &EtResult) -> SimDuration {
    let ranks = 0..set.graphs.len();
    ranks
        .map(|r| split(set, result, r).span)
        .max()
        .unwrap_or_default()
}

/// The figures of a run: `et_ps`, the per-rank split (and its largest),
/// per collective type its count, bytes and time (the `k`-th collective of
/// a group timed from its first member's start to its last member's end,
/// summed over its calls), and what was skipped.
pub fn figures(set: &TraceSet, result: &EtResult) -> Vec<Figure> {
    let n = set.graphs.len();
    let splits: Vec<RankSplit> = (0..n).map(|r| split(set, result, r)).collect();
    let et = splits.iter().map(|s| s.span).max().unwrap_or_default();
    let largest = |f: fn(&RankSplit) -> SimDuration| splits.iter().map(f).max().unwrap_or_default();
    let mut figures = vec![
        Figure::int("ranks", n as u64),
        Figure::int(
            "nodes",
            set.graphs.iter().map(|g| g.nodes.len() as u64).sum(),
        ),
        Figure::time("et_ps", et),
        Figure::time("compute_ps", largest(|s| s.compute)),
        Figure::time("comm_ps", largest(|s| s.comm)),
        Figure::time("exposed_comm_ps", largest(|s| s.exposed)),
    ];
    figures.extend(collective_figures(set, result));
    if let Some(counts) = result.replays {
        figures.push(Figure::int("collectives_simulated", counts.simulated));
        figures.push(Figure::int("collectives_replayed", counts.replayed));
    }
    figures.push(Figure::int("skipped_nodes", set.warnings.skipped_nodes()));
    figures.push(Figure::int(
        "ignored_attributes",
        set.warnings.ignored_attributes(),
    ));
    for (r, s) in splits.iter().enumerate() {
        figures.extend([
            Figure::time(figure_name(format!("rank{r}_ps")), s.span),
            Figure::time(figure_name(format!("rank{r}_compute_ps")), s.compute),
            Figure::time(figure_name(format!("rank{r}_comm_ps")), s.comm),
            Figure::time(figure_name(format!("rank{r}_exposed_comm_ps")), s.exposed),
        ]);
    }
    figures.extend(stage_figures(&stages(set), &splits));
    figures
}

/// The pipeline stages a trace implies, each its ranks, ordered by their
/// lowest rank: the connected components of the process groups its
/// collectives name (tensor- and data-parallel groups lie within a stage;
/// a pipeline joins its stages by sends only). A rank in no group is a
/// stage of its own (ADR-0119).
pub fn stages(set: &TraceSet) -> Vec<Vec<usize>> {
    let groups = set.world.groups.values().map(Vec::as_slice);
    components(set.graphs.len(), groups)
}

/// The ranks `0..n` joined by `groups`, each component ordered, the
/// components by their lowest rank.
fn components<'a>(n: usize, groups: impl Iterator<Item = &'a [usize]>) -> Vec<Vec<usize>> {
    fn root(parent: &mut [usize], mut r: usize) -> usize {
        while parent[r] != r {
            parent[r] = parent[parent[r]];
            r = parent[r];
        }
        r
    }
    let mut parent: Vec<usize> = (0..n).collect();
    for ranks in groups {
        for pair in ranks.windows(2) {
            let (a, b) = (root(&mut parent, pair[0]), root(&mut parent, pair[1]));
            // The lower root stays: a component's root is its lowest rank.
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut stages: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for rank in 0..n {
        stages
            .entry(root(&mut parent, rank))
            .or_default()
            .push(rank);
    }
    stages.into_values().collect()
}

/// Per stage the busiest compute stream of its ranks
/// (`stage{s}_compute_ps`: a pipeline runs at its slowest stage's pace)
/// and `bottleneck_stage`, the stage with the most (the first of equals):
/// where a slow SIP shows.
fn stage_figures(stages: &[Vec<usize>], splits: &[RankSplit]) -> Vec<Figure> {
    let busiest: Vec<SimDuration> = stages
        .iter()
        .map(|ranks| {
            let compute = ranks.iter().map(|&r| splits[r].compute);
            compute.max().unwrap_or_default()
        })
        .collect();
    let bottleneck = (0..busiest.len()).fold(0, |b, s| match busiest[s] > busiest[b] {
        true => s,
        false => b,
    });
    let mut figures: Vec<Figure> = busiest
        .iter()
        .enumerate()
        .map(|(s, &ps)| Figure::time(figure_name(format!("stage{s}_compute_ps")), ps))
        .collect();
    figures.push(Figure::int("bottleneck_stage", bottleneck as u64));
    figures
}

/// Per collective type: count (collectives, not rank nodes), bytes per
/// rank summed, and time.
fn collective_figures(set: &TraceSet, result: &EtResult) -> Vec<Figure> {
    // (group, k) -> (comm, bytes, first start, last end)
    let mut calls: BTreeMap<(String, usize), (CommType, u64, SimTime, SimTime)> = BTreeMap::new();
    for (rank, graph) in set.graphs.iter().enumerate() {
        let mut seq: BTreeMap<String, usize> = BTreeMap::new();
        for (node, span) in graph.nodes.iter().zip(&result.spans[rank]) {
            let Op::Collective { comm, bytes, group } = &node.op else {
                continue;
            };
            let key = group_key(set, group.as_deref());
            let k = seq.entry(key.clone()).or_default();
            let entry = calls
                .entry((key, *k))
                .or_insert((*comm, *bytes, span.start, span.end));
            entry.2 = entry.2.min(span.start);
            entry.3 = entry.3.max(span.end);
            *k += 1;
        }
    }
    let mut by_type: BTreeMap<&str, (u64, u64, SimDuration)> = BTreeMap::new();
    for (comm, bytes, start, end) in calls.into_values() {
        let entry = by_type.entry(comm_name(comm)).or_default();
        entry.0 += 1;
        entry.1 += bytes;
        entry.2 += end - start;
    }
    by_type
        .into_iter()
        .flat_map(|(name, (count, bytes, time))| {
            let name = name.replace('_', "");
            [
                Figure::int(figure_name(format!("{name}_count")), count),
                Figure::int(figure_name(format!("{name}_bytes")), bytes),
                Figure::time(figure_name(format!("{name}_ps")), time),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ps: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_ps(ps)
    }

    #[test]
    fn exposed_communication_is_what_compute_does_not_cover() {
        let comm = union(vec![(t(0), t(10)), (t(5), t(20)), (t(30), t(40))]);
        assert_eq!(comm, [(t(0), t(20)), (t(30), t(40))]);
        let compute = union(vec![(t(2), t(8)), (t(15), t(35))]);
        // Uncovered: 0-2, 8-15, 35-40.
        assert_eq!(uncovered(&comm, &compute), SimDuration::from_ps(2 + 7 + 5));
        assert_eq!(measure(&comm), SimDuration::from_ps(30));
    }

    #[test]
    fn stages_are_the_components_of_the_process_groups() {
        let check = |n: usize, groups: &[&[usize]], expect: &[&[usize]]| {
            let got = components(n, groups.iter().copied());
            assert_eq!(got, expect, "{n} ranks, groups {groups:?}");
        };
        // tp 2, dp 2, pp 2 (ranks tp-fastest): tp {0,1} {2,3} {4,5} {6,7},
        // dp {0,2} {1,3} {4,6} {5,7}.
        let step: &[&[usize]] = &[
            &[0, 1],
            &[2, 3],
            &[4, 5],
            &[6, 7],
            &[0, 2],
            &[1, 3],
            &[4, 6],
            &[5, 7],
        ];
        check(8, step, &[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
        // Pipeline only: no group, every rank a stage.
        check(3, &[], &[&[0], &[1], &[2]]);
        // One group of every rank (pg_names taken as the world).
        check(4, &[&[0, 1, 2, 3]], &[&[0, 1, 2, 3]]);
        // Groups listed high rank first still give lowest-rank order.
        check(5, &[&[4, 1], &[3, 0]], &[&[0, 3], &[1, 4], &[2]]);
    }

    #[test]
    fn layouts_follow_the_ccl_workloads() {
        // 1 MiB per rank, 16 cubes, 8 ranks: 32768 f16 per cube tile.
        let all_reduce = Layout::new(CommType::AllReduce, 1 << 20, 16, 128);
        assert_eq!(
            (
                all_reduce.in_blocks,
                all_reduce.out_blocks,
                all_reduce.n_elem
            ),
            (1, 0, 32768)
        );
        let rs = Layout::new(CommType::ReduceScatter, 1 << 20, 16, 128);
        assert_eq!((rs.in_blocks, rs.out_blocks, rs.n_elem), (128, 1, 256));
        // Rounded up to a whole element per block.
        let tiny = Layout::new(CommType::AllToAll, 3, 16, 128);
        assert_eq!(tiny.n_elem, 1);
    }
}
