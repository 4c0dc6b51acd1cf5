//! `torch.distributed` on the AHBM machine: the `ahbm` process group
//! (seed ADR-0047 D1–D8, seed ADR-0024 D1–D5).
//!
//! [`Distributed`] hangs off the facade as `torch.distributed`; every clone
//! of a [`Torch`](super::Torch), so every rank worker, shares one. It starts
//! empty: [`init_process_group("ahbm")`](Distributed::init_process_group)
//! takes the ccl.yaml the runtime was given (or the embedded one) and
//! resolves, all or nothing, one `Plan` (`runtime::plan`) per collective
//! ccl.yaml names (`defaults.algorithm` for `all_reduce`,
//! `defaults.all_gather` ...): the
//! entry, its algorithm (which must declare that collective), the world size
//! (entry > defaults > the topology's SIP count), the algorithm's
//! requirements, `root_cube` and `params`, and its IPCQ wiring. Only then is
//! the group stored, so a failed init leaves nothing behind; every other
//! call before that is [`DistError::NotInitialized`].
//!
//! A collective call (rank = SIP): the calling worker's rank (task-local,
//! [`super::worker`]) picks its SIP; the tensor's cube tiles, dtype, the op
//! and the plan's world become the kernel's `ccl::KernelArgs`
//! (`Plan::kernel_args`); the algorithm's kernel is launched on the SIP's
//! grid with the plan's IPCQ network attached and awaited. Ranks meet
//! inside the kernels, through IPCQ.
//!
//! A straggler of the machine (`faults.stragglers`, ADR-0106) waits its
//! lateness before its launch of the collective and call named; the calls
//! are counted per world rank and collective only when there is one.
//!
//! `all_reduce_async` is `all_reduce(..., async_op=True)`: the same launch
//! in a task of its own, returning a [`Work`] to `wait` on
//! ([`super::work`]).
//!
//! `send` / `recv` (and `isend` / `irecv`, returning a [`Work`]) between
//! two ranks (ADR-0019): the `k`-th send from a rank to another meets the
//! `k`-th recv there from it (`super::p2p`); the receiver posts its tiles,
//! the sender checks that size and dtype match and launches ccl.yaml's
//! `send_recv` kernel on its SIP alone, which writes every cube tile into
//! the receiver's tile of the same cube. Both calls return when the
//! sender's launch has completed (the data has landed); one nobody matches
//! ends the run in a deadlock report naming it.
//!
//! `gather` / `scatter` (ADR-0020) are composed of the same one-sided
//! puts, each pair meeting in a mailbox of their own: for `gather`, every
//! rank launches ccl.yaml's `gather` kernel on its SIP into its block of
//! the root's posted `gather_list` (the root's own block too, a copy inside
//! its cubes); for `scatter`, the root launches the `scatter` kernel once
//! per rank, all at once, from block `r` of its `scatter_list` into rank
//! `r`'s posted tensor. Every rank returns when its data has landed, the
//! root when all of it has.
//!
//! `barrier()` is a real rendezvous of the world's rank tasks in virtual
//! time (ADR-0008); outside a worker it returns at once.
//!
//! The top of the library's collective path: uses `ccl`, `tl`, `device` and
//! the launcher; nothing below knows it.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use std::collections::BTreeMap;

use super::job::JobSips;
use super::launch::{LaunchError, launch, launch_with_ipcq};
use super::p2p::{Exchange, Failure, Mailbox, Rendezvous, Tiles};
use super::plan::{Call, Plan};
use super::tensor::{Tensor, TensorError};
use super::work::Work;
use super::worker;
use crate::ccl::cost::{CostError, Network};
use crate::ccl::registry::UnknownAlgorithm;
use crate::ccl::topology::TopologyError;
use crate::ccl::{CclConfig, Collective, KernelArgs, SizeRule};
use crate::config::ConfigError;
use crate::device::Device;
use crate::hw::explain;
use crate::mem::DType;
use crate::sim::{Barrier, JoinError, SimDuration};
use crate::tl::{Grid, IpcqNetwork, Kernel};
use crate::topology::Machine;

pub use crate::ccl::ReduceOp;

/// The only backend this machine has.
pub const BACKEND: &str = "ahbm";

/// What a `torch.distributed` call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// `init_process_group` with another backend name.
    #[error("Unsupported backend \"{0}\": the only backend is \"ahbm\"")]
    UnsupportedBackend(String),
    /// A call before `init_process_group`.
    #[error(
        "Default process group has not been initialized, please make sure to call \
         init_process_group(\"ahbm\") first ({call})"
    )]
    NotInitialized {
        /// The call made too early.
        call: &'static str,
    },
    /// The embedded ccl.yaml could not be read.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// ccl.yaml has no entry of that name.
    #[error("ccl.yaml has no algorithm `{name}` (known: {known})")]
    NoSuchEntry {
        /// The name asked for.
        name: String,
        /// ccl.yaml's entries, comma-separated, in name order.
        known: String,
    },
    /// ccl.yaml names a module with no file in `algorithms/`.
    #[error(transparent)]
    Algorithm(#[from] UnknownAlgorithm),
    /// The entry's algorithm implements another collective.
    #[error(
        "ccl.yaml entry `{entry}` implements {implements}, not {call}: choose an algorithm \
         that declares {call}"
    )]
    WrongCollective {
        /// The ccl.yaml entry.
        entry: String,
        /// What its algorithm declares.
        implements: Collective,
        /// The call it was asked to serve.
        call: Collective,
    },
    /// The entry cannot serve this machine or configuration (requirements,
    /// world shape, `root_cube`, `params`).
    #[error("ccl.yaml entry `{entry}`: {reason}")]
    Refused {
        /// The ccl.yaml entry.
        entry: String,
        /// What it requires.
        reason: String,
    },
    /// Two collectives' entries resolve different world sizes.
    #[error(
        "ccl.yaml: {call}'s entry `{entry}` resolves world_size {world_size}, but all_reduce's \
         resolves {expected}: one process group has one world size"
    )]
    WorldSizeDiffers {
        /// The collective.
        call: Collective,
        /// Its entry.
        entry: String,
        /// Its world size.
        world_size: usize,
        /// all_reduce's.
        expected: usize,
    },
    /// No ccl.yaml entry serves the collective.
    #[error(
        "torch.distributed.{0}: ccl.yaml names no algorithm for it (set defaults.{0}, or \
         init_process_group_with an entry that implements it)"
    )]
    NoAlgorithm(Collective),
    /// The size rules of one collective's default resolve different
    /// endpoint sets (a call's block layout must not depend on its size).
    #[error(
        "ccl.yaml: defaults.{call}'s entries `{entry}` and `{other}` run on different endpoints \
         ({endpoints} and {other_endpoints}): the size rules of one collective must share them"
    )]
    EndpointsDiffer {
        /// The collective.
        call: Collective,
        /// Its first rule's entry and endpoints.
        entry: String,
        endpoints: usize,
        /// The rule that differs.
        other: String,
        other_endpoints: usize,
    },
    /// More ranks than SIPs (rank = SIP).
    #[error("world_size {world_size} needs {world_size} SIPs, but the machine has {sips}")]
    WorldTooLarge {
        /// The resolved world size.
        world_size: usize,
        /// SIPs in topology.yaml.
        sips: u32,
    },
    /// The neighbour tables cannot be built or wired.
    #[error("IPCQ wiring: {0}")]
    Wiring(#[from] TopologyError),
    /// The IPCQ network cannot be installed.
    #[error("IPCQ install: {0}")]
    Install(String),
    /// The tensor has no deployment (it was freed).
    #[error("tensor `{0}` is not deployed")]
    NotDeployed(String),
    /// The tensor's tiles do not match the algorithm's grid.
    #[error(
        "tensor `{tensor}` has {tiles} tile(s) on SIP {sip}, but `{algorithm}` runs on \
         {cubes} cube(s) (place it with DPPolicy(cube=row_wise, pe=replicate, num_cubes={cubes}, \
         num_pes=1) on the rank's SIP)"
    )]
    TileMismatch {
        /// The tensor.
        tensor: String,
        /// The rank's SIP.
        sip: u32,
        /// Its tiles on that SIP.
        tiles: usize,
        /// The algorithm.
        algorithm: String,
        /// Cubes of the grid.
        cubes: u32,
    },
    /// Cube tiles of different sizes (e.g. a row-wise split of rows that
    /// the cubes do not divide).
    #[error(
        "tensor `{tensor}`: its cube tiles on SIP {sip} differ in size ({bytes:?} B); collectives \
         need equal tiles (make the rows a multiple of the cube count)"
    )]
    UnequalShards {
        /// The tensor.
        tensor: String,
        /// The rank's SIP.
        sip: u32,
        /// Bytes of each tile, by cube.
        bytes: Vec<u64>,
    },
    /// A tile that does not split into one block per endpoint.
    #[error(
        "tensor `{tensor}`: a tile of {elements} elements does not split into {blocks} equal \
         blocks (one per endpoint)"
    )]
    BlockMismatch {
        /// The tensor.
        tensor: String,
        /// Elements per tile.
        elements: usize,
        /// Blocks it must hold.
        blocks: usize,
    },
    /// An output tensor whose tiles do not fit the call.
    #[error(
        "output tensor `{tensor}`: a cube tile of {elements} elements, the call writes {expected}"
    )]
    OutputSize {
        /// The output tensor.
        tensor: String,
        /// Elements per tile.
        elements: usize,
        /// Elements the call writes per tile.
        expected: usize,
    },
    /// An output tensor of another dtype than the input.
    #[error("output tensor `{tensor}`: its dtype differs from the input's")]
    OutputDType {
        /// The output tensor.
        tensor: String,
    },
    /// A root or peer rank outside the world.
    #[error("rank {rank} does not exist: the world has ranks 0 to {}", world_size - 1)]
    NoSuchRank {
        /// The rank named.
        rank: usize,
        /// The world size.
        world_size: usize,
    },
    /// A `send` / `recv` peer, or a `gather` / `scatter` root, outside
    /// the world.
    #[error(
        "dist.{call} on rank {rank}: rank {peer} does not exist (the world has ranks 0 to {})",
        world_size - 1
    )]
    NoSuchPeer {
        /// `send` or `recv` (or `isend`, `irecv`, `gather`, `scatter`).
        call: &'static str,
        /// The calling rank.
        rank: usize,
        /// The peer (or root) named.
        peer: usize,
        /// The world size.
        world_size: usize,
    },
    /// A `send` / `recv` whose peer is the calling rank.
    #[error(
        "dist.{call} on rank {rank}: the peer is rank {rank} itself (send and recv need two \
         ranks)"
    )]
    SelfPeer {
        /// `send` or `recv` (or `isend`, `irecv`).
        call: &'static str,
        /// The calling rank.
        rank: usize,
    },
    /// A `send` and its matching `recv` name tensors of different tile
    /// sizes or dtypes; both calls fail with it.
    #[error(
        "send from rank {src} to rank {dst} does not match its recv: the sent tensor `{sent}` \
         has cube tiles of {sent_elements} {sent_dtype} elements, the receiving tensor \
         `{received}` of {received_elements} {received_dtype} (send and recv need the same tile \
         size and dtype)"
    )]
    P2pMismatch {
        /// The sending rank.
        src: usize,
        /// The receiving rank.
        dst: usize,
        /// The sent tensor.
        sent: String,
        /// Elements per cube tile sent.
        sent_elements: usize,
        /// Their dtype.
        sent_dtype: DType,
        /// The receiving tensor.
        received: String,
        /// Elements per cube tile it holds.
        received_elements: usize,
        /// Their dtype.
        received_dtype: DType,
    },
    /// The sender's copy failed (the receiver's error; the sender returns
    /// its own).
    #[error("{call} on rank {dst} from rank {src}: the matching send failed: {reason}")]
    SendFailed {
        /// The receiver's call: `recv`, `gather` (on the root) or `scatter`.
        call: &'static str,
        /// The sending rank.
        src: usize,
        /// The receiving rank.
        dst: usize,
        /// The sender's error.
        reason: String,
    },
    /// The root of a `gather` / `scatter` called without its list.
    #[error(
        "dist.{call} on the root rank {rank}: {list} is missing (the root passes a tensor whose \
         cube tiles hold one block per rank)"
    )]
    ListMissing {
        /// `gather` or `scatter`.
        call: &'static str,
        /// `gather_list` or `scatter_list`.
        list: &'static str,
        /// The root.
        rank: usize,
    },
    /// A rank other than the root passed a `gather_list` / `scatter_list`.
    #[error(
        "dist.{call} on rank {rank}: {list} is given, but only the root rank {root} takes one \
         (pass None)"
    )]
    ListNotOnRoot {
        /// `gather` or `scatter`.
        call: &'static str,
        /// `gather_list` or `scatter_list`.
        list: &'static str,
        /// The calling rank.
        rank: usize,
        /// The root.
        root: usize,
    },
    /// A rank's tensor that does not fit its block of the root's list
    /// (both ranks fail with it; the root alone when its own does not).
    #[error(transparent)]
    ListMismatch(Box<ListMismatch>),
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// The collective's kernel failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The algorithm's cost model could not be evaluated.
    #[error(transparent)]
    Cost(#[from] CostError),
    /// A collective of a sub-group called on a rank outside it.
    #[error("rank {rank} is not in the process group of ranks {members:?}")]
    NotInGroup {
        /// The calling rank.
        rank: usize,
        /// The group's ranks.
        members: Vec<usize>,
    },
    /// `new_group` with a list it cannot use.
    #[error("new_group({ranks:?}): {reason}")]
    BadGroup {
        /// The ranks given.
        ranks: Vec<usize>,
        /// What is wrong.
        reason: String,
    },
    /// A call a sub-group does not offer (point-to-point and rooted
    /// puts name world ranks: call them on the world group).
    #[error("dist.{call} on a sub-group: call it on the default (world) process group")]
    SubgroupCall {
        /// The call.
        call: &'static str,
    },
    /// A put whose plan's collective has no output tiles.
    #[error(transparent)]
    Args(#[from] crate::ccl::ArgError),
    /// An asynchronous collective's task did not finish.
    #[error("async collective: {0}")]
    Work(JoinError),
}

/// A `gather` / `scatter` rank's tensor that is no block of the root's
/// list: what [`DistError::ListMismatch`] names.
#[derive(Debug, thiserror::Error)]
#[error(
    "dist.{call}: rank {rank}'s tensor `{tensor}` has cube tiles of {elements} {dtype} \
     elements, but the root rank {root}'s {list} `{list_tensor}` has cube tiles of \
     {list_elements} {list_dtype} (it needs {world_size} blocks of {elements} {dtype}, one \
     per rank: {} elements)",
    world_size * elements
)]
pub struct ListMismatch {
    /// `gather` or `scatter`.
    pub call: &'static str,
    /// The rank whose tensor does not fit.
    pub rank: usize,
    /// The root.
    pub root: usize,
    /// The rank's tensor.
    pub tensor: String,
    /// Elements per cube tile of it.
    pub elements: usize,
    /// Their dtype.
    pub dtype: DType,
    /// `gather_list` or `scatter_list`.
    pub list: &'static str,
    /// The root's list tensor.
    pub list_tensor: String,
    /// Elements per cube tile of it.
    pub list_elements: usize,
    /// Their dtype.
    pub list_dtype: DType,
    /// The world size (blocks the list needs).
    pub world_size: usize,
}

impl DistError {
    /// Whether the configuration (ccl.yaml, the machine, the algorithm
    /// chosen) is at fault rather than the run: `init_process_group`'s
    /// refusals.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            DistError::Config(_)
                | DistError::NoSuchEntry { .. }
                | DistError::Algorithm(_)
                | DistError::WrongCollective { .. }
                | DistError::Refused { .. }
                | DistError::WorldSizeDiffers { .. }
                | DistError::NoAlgorithm(_)
                | DistError::EndpointsDiffer { .. }
                | DistError::WorldTooLarge { .. }
                | DistError::Wiring(_)
                | DistError::BadGroup { .. }
        )
    }
}

/// `torch.distributed`: see the module docs. Cheap to clone; clones share
/// the process group.
#[derive(Clone)]
pub struct Distributed {
    inner: Rc<Inner>,
}

struct Inner {
    device: Rc<Device>,
    ccl: Option<CclConfig>,
    /// Where the world's ranks run.
    sips: JobSips,
    group: RefCell<Option<Rc<Group>>>,
    /// Calls so far per (world rank, collective), for the machine's
    /// stragglers; shared with every sub-group (a rank's `n`-th call is
    /// its `n`-th in any group). Counted only when there are stragglers.
    calls: Rc<RefCell<BTreeMap<(u32, Collective), u32>>>,
}

/// The installed process group: one plan per collective ccl.yaml serves.
struct Group {
    world_size: usize,
    /// Each collective's plans by size (ccl.yaml's size rules, ADR-0113).
    plans: BTreeMap<Collective, Vec<SizedPlan>>,
    barrier: Barrier,
    /// Where `send`s meet `recv`s.
    mailbox: Mailbox,
    /// Where the puts of `gather` meet the root's blocks.
    gathers: Mailbox,
    /// Where the puts of `scatter` meet the ranks' tensors.
    scatters: Mailbox,
    /// The SIPs of the group's ranks, in group-rank order (a sub-group's,
    /// or a job's world: ADR-0116); `None` for the machine's world.
    members: Option<Rc<[u32]>>,
    /// Whether it is a `new_group` (which offers no point-to-point or
    /// rooted puts) rather than a world.
    subgroup: bool,
}

impl Distributed {
    /// The process group of `device`, reading `ccl` at init (the embedded
    /// ccl.yaml when `None`).
    /// `sips` places the world's ranks (the machine's, or a job's:
    /// ADR-0116).
    pub fn new(device: Rc<Device>, ccl: Option<CclConfig>, sips: JobSips) -> Distributed {
        let inner = Inner {
            device,
            ccl,
            sips,
            group: RefCell::new(None),
            calls: Rc::default(),
        };
        Distributed {
            inner: Rc::new(inner),
        }
    }

    /// Creates the `ahbm` backend running ccl.yaml's default algorithm
    /// (see the module docs); a second call is a no-op.
    pub fn init_process_group(&self, backend: &str) -> Result<(), DistError> {
        self.init(backend, None)
    }

    /// Like [`init_process_group`](Self::init_process_group), with the
    /// ccl.yaml entry `algorithm` serving `collective` (its algorithm must
    /// declare that collective: [`DistError::WrongCollective`]).
    pub fn init_process_group_with(
        &self,
        backend: &str,
        collective: Collective,
        algorithm: &str,
    ) -> Result<(), DistError> {
        self.init(backend, Some((collective, algorithm)))
    }

    /// The ccl.yaml this was given, or the embedded default.
    fn ccl_config(&self) -> Result<std::borrow::Cow<'_, CclConfig>, DistError> {
        Ok(match &self.inner.ccl {
            Some(ccl) => std::borrow::Cow::Borrowed(ccl),
            None => std::borrow::Cow::Owned(CclConfig::load(&CclConfig::default_source(), &[])?),
        })
    }

    fn init(&self, backend: &str, chosen: Option<(Collective, &str)>) -> Result<(), DistError> {
        if backend != BACKEND {
            return Err(DistError::UnsupportedBackend(backend.to_owned()));
        }
        if self.is_initialized() {
            tracing::debug!(target: "kernbench::runtime::distributed", "init_process_group: already initialized");
            return Ok(());
        }
        let ccl = self.ccl_config()?;
        let members = self.inner.sips.listed();
        let machine = self.inner.device.fabric().machine();
        let group = Group::build(machine, &ccl, chosen, (members, false))?;
        *self.inner.group.borrow_mut() = Some(Rc::new(group));
        Ok(())
    }

    /// `new_group(ranks)`: a process group of the world ranks `ranks`
    /// (group rank `g` is world rank `ranks[g]`), with ccl.yaml's default
    /// algorithms resolved for a world of `ranks.len()` on a logical ring
    /// of those SIPs. Its collectives (`all_reduce`, `all_gather`,
    /// `reduce_scatter`, `broadcast`, `reduce`, `all_to_all`, `barrier`)
    /// run only on those ranks, over IPCQ networks of their own, so
    /// collectives of different groups may run at the same time; roots are
    /// group ranks. Point-to-point calls and `gather` / `scatter` stay on
    /// the world group ([`DistError::SubgroupCall`]). Needs
    /// `init_process_group` first.
    pub fn new_group(&self, ranks: &[usize]) -> Result<Distributed, DistError> {
        let world = self.group("new_group")?;
        let bad = |reason: String| DistError::BadGroup {
            ranks: ranks.to_vec(),
            reason,
        };
        if ranks.is_empty() {
            return Err(bad("a group needs at least one rank".to_owned()));
        }
        if let Some(&r) = ranks.iter().find(|&&r| r >= world.world_size) {
            return Err(bad(format!(
                "rank {r} does not exist (the world has ranks 0 to {})",
                world.world_size - 1
            )));
        }
        let mut sorted = ranks.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != ranks.len() {
            return Err(bad("a rank appears twice".to_owned()));
        }
        let members: Vec<u32> = ranks.iter().map(|&r| self.sip_of(r)).collect();
        let ccl = self.ccl_config()?;
        let machine = self.inner.device.fabric().machine();
        let group = Group::build(machine, &ccl, None, (Some(&members), true))?;
        let inner = Inner {
            device: self.inner.device.clone(),
            ccl: self.inner.ccl.clone(),
            sips: self.inner.sips.clone(),
            group: RefCell::new(Some(Rc::new(group))),
            calls: self.inner.calls.clone(),
        };
        Ok(Distributed {
            inner: Rc::new(inner),
        })
    }

    /// Whether `init_process_group` has run.
    pub fn is_initialized(&self) -> bool {
        self.inner.group.borrow().is_some()
    }

    /// The SIP of world rank `rank` (`u32::MAX` past a job's ranks: no
    /// tensor lives there, so a call from it is refused by its tiles).
    fn sip_of(&self, rank: usize) -> u32 {
        self.inner.sips.sip_of(rank).unwrap_or(u32::MAX)
    }

    /// The calling worker's SIP.
    fn caller_sip(&self) -> u32 {
        self.sip_of(worker::get_rank())
    }

    fn group(&self, call: &'static str) -> Result<Rc<Group>, DistError> {
        let group = self.inner.group.borrow();
        group.clone().ok_or(DistError::NotInitialized { call })
    }

    /// The calling worker's rank (0 outside any worker).
    pub fn get_rank(&self) -> Result<usize, DistError> {
        let group = self.group("get_rank")?;
        group.group_rank(self.caller_sip())
    }

    /// The resolved world size.
    pub fn get_world_size(&self) -> Result<usize, DistError> {
        Ok(self.group("get_world_size")?.world_size)
    }

    /// Always `"ahbm"`.
    pub fn get_backend(&self) -> Result<&'static str, DistError> {
        self.group("get_backend")?;
        Ok(BACKEND)
    }

    /// The ccl.yaml entry that serves a call of `collective` with `bytes`
    /// of input per rank (its size rule, ADR-0113).
    pub fn algorithm(&self, collective: Collective, bytes: u64) -> Result<String, DistError> {
        let group = self.group("algorithm")?;
        Ok(group.plan(collective, bytes)?.entry.clone())
    }

    /// ccl.yaml's `n_elem` (elements per tile) of the entry that serves a
    /// call of `collective` with `bytes` of input per rank.
    pub fn n_elem(&self, collective: Collective, bytes: u64) -> Result<usize, DistError> {
        Ok(self.group("n_elem")?.plan(collective, bytes)?.n_elem)
    }

    /// TCM bytes one endpoint needs for a tile of `tile_bytes` (its whole
    /// tile, or less if it streams it), in the algorithm that serves a call
    /// of `collective` with `bytes` of input per rank.
    pub fn tcm_bytes(
        &self,
        collective: Collective,
        bytes: u64,
        tile_bytes: u64,
    ) -> Result<u64, DistError> {
        let group = self.group("tcm_bytes")?;
        Ok(group.plan(collective, bytes)?.tcm_bytes(tile_bytes))
    }

    /// Endpoints taking part in `collective` (PE 0 of every cube of every
    /// rank): the participants that exchange data.
    /// (The same at every size: a collective's size rules share them.)
    pub fn endpoints(&self, collective: Collective) -> Result<usize, DistError> {
        Ok(self.group("endpoints")?.plan(collective, 0)?.endpoints())
    }

    /// The cube of `collective`'s root endpoint on the root rank of a
    /// rooted call (`broadcast`, `reduce`): ccl.yaml's `root_cube`, 0 if
    /// unset.
    /// In the entry that serves a call with `bytes` of input per rank.
    pub fn root_cube(&self, collective: Collective, bytes: u64) -> Result<usize, DistError> {
        Ok(self
            .group("root_cube")?
            .plan(collective, bytes)?
            .root_cube())
    }

    /// The IPCQ network of the entry that serves a call of `collective`
    /// with `bytes` of input per rank (e.g. for `tl::pointer_dump`),
    /// installed if it was not yet.
    pub fn network(
        &self,
        collective: Collective,
        bytes: u64,
    ) -> Result<Rc<IpcqNetwork>, DistError> {
        let group = self.group("network")?;
        group.plan(collective, bytes)?.network(&self.inner.device)
    }

    /// IPCQ messages (slot-sized segments) sent so far over every network
    /// this process group installed; 0 before `init_process_group`.
    pub fn ipcq_messages(&self) -> u64 {
        let group = self.inner.group.borrow();
        let plans = group.iter().flat_map(|g| g.plans.values().flatten());
        plans.map(|sized| sized.plan.ipcq_messages()).sum()
    }

    /// Reduces `tensor` across the ranks in place with `op`: every cube
    /// tile of every rank ends holding the reduction of all of them (seed
    /// ADR-0032: each tile is one contribution; `Avg` divides by their
    /// number).
    pub async fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<(), DistError> {
        let call = Call::in_place(tensor, op, 0, self.caller_sip());
        self.run(Collective::AllReduce, &call, (1, 0)).await
    }

    /// `all_gather_into_tensor(output, input)`: block `j` of every cube
    /// tile of `output` (one block per endpoint, endpoint `j = rank × cubes
    /// + cube`) becomes endpoint `j`'s `input` tile.
    pub async fn all_gather(&self, output: &Tensor, input: &Tensor) -> Result<(), DistError> {
        let call = Call::out_of_place(input, output, ReduceOp::Sum, self.caller_sip());
        let blocks = self.endpoints(Collective::AllGather)?;
        self.run(Collective::AllGather, &call, (1, blocks)).await
    }

    /// `reduce_scatter_tensor(output, input, op)`: each `input` tile holds
    /// one block per endpoint; endpoint `e`'s `output` tile becomes the
    /// reduction of block `e` of every endpoint's input.
    pub async fn reduce_scatter(
        &self,
        output: &Tensor,
        input: &Tensor,
        op: ReduceOp,
    ) -> Result<(), DistError> {
        let call = Call::out_of_place(input, output, op, self.caller_sip());
        let blocks = self.endpoints(Collective::ReduceScatter)?;
        self.run(Collective::ReduceScatter, &call, (blocks, 1))
            .await
    }

    /// `broadcast(tensor, src)`: every cube tile of every rank becomes the
    /// tile of the root endpoint (cube `root_cube`, default 0, of `src`).
    pub async fn broadcast(&self, tensor: &Tensor, src: usize) -> Result<(), DistError> {
        let call = Call::in_place(tensor, ReduceOp::Sum, src as u32, self.caller_sip());
        self.run(Collective::Broadcast, &call, (1, 0)).await
    }

    /// `reduce(tensor, dst, op)`: the root endpoint's tile (cube
    /// `root_cube`, default 0, of `dst`) becomes the reduction of every
    /// tile of every rank; the others keep theirs.
    pub async fn reduce(&self, tensor: &Tensor, dst: usize, op: ReduceOp) -> Result<(), DistError> {
        let call = Call::in_place(tensor, op, dst as u32, self.caller_sip());
        self.run(Collective::Reduce, &call, (1, 0)).await
    }

    /// `all_to_all_single(output, input)`: tiles hold one block per
    /// endpoint; block `j` of endpoint `e`'s `output` becomes block `e` of
    /// endpoint `j`'s `input`.
    pub async fn all_to_all(&self, output: &Tensor, input: &Tensor) -> Result<(), DistError> {
        let call = Call::out_of_place(input, output, ReduceOp::Sum, self.caller_sip());
        let blocks = self.endpoints(Collective::AllToAll)?;
        self.run(Collective::AllToAll, &call, (blocks, blocks))
            .await
    }

    /// `all_reduce(tensor, op, async_op=True)`: starts the all-reduce and
    /// returns its [`Work`] at once; the caller goes on and `wait`s for it.
    /// Argument errors are returned here, failures of the collective by
    /// `wait`. `tensor` must not be touched until then.
    pub fn all_reduce_async(&self, tensor: &Tensor, op: ReduceOp) -> Result<Work, DistError> {
        let call = Call::in_place(tensor, op, 0, self.caller_sip());
        let launch = self.launch(Collective::AllReduce, &call, (1, 0))?;
        Ok(Work::spawn("all_reduce", launch))
    }

    /// Runs the process group's [`Collective::Custom`] kernel (e.g.
    /// `hello_send`) over `tensor`'s tiles: a kernbench extension for
    /// teaching and test kernels that are no `torch.distributed` call.
    pub async fn run_custom(&self, tensor: &Tensor) -> Result<(), DistError> {
        let call = Call::in_place(tensor, ReduceOp::Sum, 0, self.caller_sip());
        self.run(Collective::Custom, &call, (1, 0)).await
    }

    /// Launches `collective`'s kernel on the caller's SIP for `call`, whose
    /// input and output tiles hold `blocks` = (input, output) blocks each.
    async fn run(
        &self,
        collective: Collective,
        call: &Call<'_>,
        blocks: (usize, usize),
    ) -> Result<(), DistError> {
        self.launch(collective, call, blocks)?.await
    }

    /// The launch of `collective`'s kernel on the caller's SIP for `call`,
    /// owning everything it needs (so it can run in a task of its own).
    fn launch(
        &self,
        collective: Collective,
        call: &Call<'_>,
        (in_blocks, out_blocks): (usize, usize),
    ) -> Result<impl Future<Output = Result<(), DistError>> + 'static, DistError> {
        let group = self.group(collective.name())?;
        let plan = group.plan(collective, bytes_of(call.input))?;
        let args = plan.kernel_args(call, in_blocks, out_blocks)?;
        let network = plan.network(&self.inner.device)?;
        let kernel = plan.algorithm().kernel();
        let (device, target) = (self.inner.device.clone(), (call.sip, plan.grid()));
        let late = self.lateness(collective, call.sip);
        Ok(async move {
            if late > SimDuration::ZERO {
                straggle(target.0, late).await;
            }
            launch_with_ipcq(&device, &kernel, target, args, &network).await?;
            Ok(())
        })
    }

    /// How late `rank` starts this call of `collective`
    /// (`faults.stragglers`, ADR-0106), counting the call; zero at once on
    /// a machine without stragglers.
    fn lateness(&self, collective: Collective, rank: u32) -> SimDuration {
        let faults = self.inner.device.fabric().machine().spec().faults();
        if faults.stragglers.is_empty() {
            return SimDuration::ZERO;
        }
        let mut calls = self.inner.calls.borrow_mut();
        let call = calls.entry((rank, collective)).or_insert(0);
        *call += 1;
        faults.lateness(rank, collective.name(), *call)
    }

    /// The algorithm's α-β cost model of `all_reduce(tensor)` on this
    /// machine ([`CclAlgorithm::model`](crate::ccl::CclAlgorithm::model)),
    /// `None` when it states none.
    pub fn all_reduce_model(&self, tensor: &Tensor) -> Result<Option<SimDuration>, DistError> {
        let call = Call::in_place(tensor, ReduceOp::Sum, 0, self.caller_sip());
        self.model(Collective::AllReduce, &call, 1)
    }

    /// The `send_recv` algorithm's α-β cost model of `send(tensor, dst)`
    /// from the calling rank, `None` when it states none.
    pub fn send_model(
        &self,
        tensor: &Tensor,
        dst: usize,
    ) -> Result<Option<SimDuration>, DistError> {
        let call = Call::in_place(tensor, ReduceOp::Sum, dst as u32, self.caller_sip());
        self.model(Collective::SendRecv, &call, 1)
    }

    /// The α-β cost model of the rooted `collective` (`Gather`,
    /// `Scatter`, `Broadcast`, `Reduce`) with root `root`, for `tensor` one
    /// block (a rank's tiles), `None` when its algorithm states none.
    pub fn rooted_model(
        &self,
        collective: Collective,
        tensor: &Tensor,
        root: usize,
    ) -> Result<Option<SimDuration>, DistError> {
        let call = Call::in_place(tensor, ReduceOp::Sum, root as u32, self.caller_sip());
        self.model(collective, &call, 1)
    }

    /// The α-β cost model of `collective` (`AllGather`, `ReduceScatter`,
    /// `AllToAll`) whose input `tensor` holds `blocks` blocks per cube
    /// tile, `None` when its algorithm states none.
    pub fn blocks_model(
        &self,
        collective: Collective,
        tensor: &Tensor,
        blocks: usize,
    ) -> Result<Option<SimDuration>, DistError> {
        let call = Call::in_place(tensor, ReduceOp::Sum, 0, self.caller_sip());
        self.model(collective, &call, blocks)
    }

    fn model(
        &self,
        collective: Collective,
        call: &Call<'_>,
        in_blocks: usize,
    ) -> Result<Option<SimDuration>, DistError> {
        let group = self.group("model")?;
        let plan = group.plan(collective, bytes_of(call.input))?;
        let args = plan.kernel_args(call, in_blocks, 0)?;
        let net = Network::new(self.inner.device.fabric(), plan.wired());
        Ok(plan.algorithm().model(&args, &net)?)
    }

    /// Waits until every rank of the world has called `barrier` (in virtual
    /// time, at no modelled cost; ADR-0008). Outside a worker: returns.
    pub async fn barrier(&self) -> Result<(), DistError> {
        let group = self.group("barrier")?;
        if !worker::in_worker() {
            tracing::debug!(target: "kernbench::runtime::distributed", "barrier() outside a rank worker: nothing to wait for");
            return Ok(());
        }
        group.barrier.wait().await;
        Ok(())
    }

    /// `gather(tensor, gather_list, dst)`: every rank's `tensor` lands in
    /// the root's `gather_list`, block `r` of every cube tile holding rank
    /// `r`'s tile of that cube (`gather_list` tiles of `world_size` blocks,
    /// on rank `dst` only: [`DistError::ListMissing`],
    /// [`DistError::ListNotOnRoot`]; a rank's tensor of another tile size
    /// or dtype than a block fails it and the root with
    /// [`DistError::ListMismatch`]). Each rank returns when its tiles have
    /// landed, the root when every rank's have (see the module docs).
    pub async fn gather(
        &self,
        tensor: &Tensor,
        gather_list: Option<&Tensor>,
        dst: usize,
    ) -> Result<(), DistError> {
        let (group, rank) = self.rooted(Collective::Gather, dst, gather_list)?;
        let plan = group.plan(Collective::Gather, bytes_of(tensor))?;
        let (mine, mut args) = self.tiles(plan, tensor, dst)?;
        let put = Put::new(&self.inner, plan);
        let transfer = |src| Transfer::new(Exchange::Gather, src, dst, group.world_size);
        let Some(list) = gather_list else {
            let rendezvous = group.gathers.send(rank, dst);
            return put.run(rendezvous, mine, args, transfer(rank)).await;
        };
        let list = self.list_tiles(plan, list, &mine, transfer(dst))?;
        let world = group.world_size;
        let landed = (0..world).filter(|&r| r != dst).map(|src| {
            let rendezvous = group.gathers.recv(src, dst);
            rendezvous.post(list.block(src, world));
            transfer(src).landed(rendezvous)
        });
        let landed = futures::future::join_all(landed.collect::<Vec<_>>());
        args.set_output(list.block(dst, world).addrs)?;
        let (own, landed) = futures::join!(put.launch(dst, args), landed);
        own?;
        landed.into_iter().collect()
    }

    /// `scatter(tensor, scatter_list, src)`: block `r` of every cube tile
    /// of the root's `scatter_list` lands in rank `r`'s `tensor` tile of
    /// that cube (`scatter_list` tiles of `world_size` blocks, on rank
    /// `src` only; errors as [`gather`](Self::gather)). The root puts every
    /// block at once; each rank returns when its tiles have landed, the
    /// root when all have.
    pub async fn scatter(
        &self,
        tensor: &Tensor,
        scatter_list: Option<&Tensor>,
        src: usize,
    ) -> Result<(), DistError> {
        let (group, rank) = self.rooted(Collective::Scatter, src, scatter_list)?;
        let plan = group.plan(Collective::Scatter, bytes_of(tensor))?;
        let (mine, mut args) = self.tiles(plan, tensor, src)?;
        let transfer = |dst| Transfer::new(Exchange::Scatter, src, dst, group.world_size);
        let Some(list) = scatter_list else {
            let rendezvous = group.scatters.recv(src, rank);
            rendezvous.post(mine);
            return transfer(rank).landed(rendezvous).await;
        };
        let list = self.list_tiles(plan, list, &mine, transfer(src))?;
        let (world, put) = (group.world_size, Put::new(&self.inner, plan));
        let sent = (0..world).filter(|&r| r != src).map(|dst| {
            let rendezvous = group.scatters.send(src, dst);
            put.run(
                rendezvous,
                list.block(dst, world),
                args.clone(),
                transfer(dst),
            )
        });
        let sent = futures::future::join_all(sent.collect::<Vec<_>>());
        args.tiles = list.block(src, world).addrs;
        args.set_output(mine.addrs)?;
        let (own, sent) = futures::join!(put.launch(src, args), sent);
        own?;
        sent.into_iter().collect()
    }

    /// The process group and the calling rank of a rooted call
    /// (`gather`, `scatter`): `root` is a rank of the world, and the
    /// caller passes `list` if and only if it is the root.
    fn rooted(
        &self,
        collective: Collective,
        root: usize,
        list: Option<&Tensor>,
    ) -> Result<(Rc<Group>, usize), DistError> {
        let call = collective.name();
        let group = self.group(call)?;
        if group.subgroup {
            return Err(DistError::SubgroupCall { call });
        }
        let (rank, world_size) = (worker::get_rank(), group.world_size);
        if root >= world_size {
            return Err(DistError::NoSuchPeer {
                call,
                rank,
                peer: root,
                world_size,
            });
        }
        let list_name = list_name(collective);
        match (rank == root, list.is_some()) {
            (true, false) => Err(DistError::ListMissing {
                call,
                list: list_name,
                rank,
            }),
            (false, true) => Err(DistError::ListNotOnRoot {
                call,
                list: list_name,
                rank,
                root,
            }),
            _ => Ok((group, rank)),
        }
    }

    /// The root's `list` tiles, which must hold one block of the root's
    /// own tiles (`mine`) per rank.
    fn list_tiles(
        &self,
        plan: &Plan,
        list: &Tensor,
        mine: &Tiles,
        transfer: Transfer,
    ) -> Result<Tiles, DistError> {
        let (tiles, _) = self.tiles(plan, list, transfer.root())?;
        let fits = tiles.n_elem == mine.n_elem * transfer.world_size && tiles.dtype == mine.dtype;
        match fits {
            true => Ok(tiles),
            false => Err(transfer.list_mismatch(mine.clone(), tiles)),
        }
    }

    /// `send(tensor, dst)`: every cube tile of `tensor` on the calling
    /// rank is copied into the same cube's tile of the tensor the matching
    /// `recv(tensor, src)` on rank `dst` names (same tile size and dtype,
    /// else [`DistError::P2pMismatch`] on both sides). Returns when the
    /// data has landed (see the module docs).
    pub async fn send(&self, tensor: &Tensor, dst: usize) -> Result<(), DistError> {
        self.send_transfer("send", tensor, dst)?.await
    }

    /// `isend(tensor, dst)`: [`send`](Self::send) as a [`Work`]; its place
    /// in the order of sends to `dst` is taken at the call.
    pub fn isend(&self, tensor: &Tensor, dst: usize) -> Result<Work, DistError> {
        let transfer = self.send_transfer("isend", tensor, dst)?;
        Ok(Work::spawn("isend", transfer))
    }

    /// `recv(tensor, src)`: `tensor`'s cube tiles on the calling rank
    /// receive those of the matching `send` from rank `src`; returns when
    /// they have landed.
    pub async fn recv(&self, tensor: &Tensor, src: usize) -> Result<(), DistError> {
        self.recv_transfer("recv", tensor, src)?.await
    }

    /// `irecv(tensor, src)`: [`recv`](Self::recv) as a [`Work`]; the tiles
    /// are posted at the call.
    pub fn irecv(&self, tensor: &Tensor, src: usize) -> Result<Work, DistError> {
        let transfer = self.recv_transfer("irecv", tensor, src)?;
        Ok(Work::spawn("irecv", transfer))
    }

    /// The process group and the calling rank of a point-to-point `call`
    /// with `peer`, which must be another rank of the world.
    fn peer(&self, call: &'static str, peer: usize) -> Result<(Rc<Group>, usize), DistError> {
        let group = self.group(call)?;
        if group.subgroup {
            return Err(DistError::SubgroupCall { call });
        }
        let rank = worker::get_rank();
        if peer >= group.world_size {
            let world_size = group.world_size;
            return Err(DistError::NoSuchPeer {
                call,
                rank,
                peer,
                world_size,
            });
        }
        if peer == rank {
            return Err(DistError::SelfPeer { call, rank });
        }
        Ok((group, rank))
    }

    /// The calling rank's tiles of `tensor` for a transfer with `peer`,
    /// and the kernel arguments of sending them.
    fn tiles(
        &self,
        plan: &Plan,
        tensor: &Tensor,
        peer: usize,
    ) -> Result<(Tiles, KernelArgs), DistError> {
        let args = plan.kernel_args(
            &Call::in_place(tensor, ReduceOp::Sum, peer as u32, self.caller_sip()),
            1,
            0,
        )?;
        let tiles = Tiles {
            tensor: tensor.name().to_owned(),
            addrs: args.tiles.clone(),
            n_elem: args.tile.n_elem,
            dtype: args.dtype,
        };
        Ok((tiles, args))
    }

    /// The send of `tensor` to `dst`, its ticket taken now: it waits for
    /// the matching recv's tiles, then launches the `send_recv` kernel on
    /// the caller's SIP into them.
    fn send_transfer(
        &self,
        call: &'static str,
        tensor: &Tensor,
        dst: usize,
    ) -> Result<impl Future<Output = Result<(), DistError>> + 'static, DistError> {
        let (group, src) = self.peer(call, dst)?;
        let plan = group.plan(Collective::SendRecv, bytes_of(tensor))?;
        let (sent, args) = self.tiles(plan, tensor, dst)?;
        let transfer = Transfer::new(Exchange::SendRecv, src, dst, group.world_size);
        let rendezvous = group.mailbox.send(src, dst);
        Ok(Put::new(&self.inner, plan).run(rendezvous, sent, args, transfer))
    }

    /// The recv of `tensor` from `src`, its tiles posted now: it waits
    /// until the matching send has finished.
    fn recv_transfer(
        &self,
        call: &'static str,
        tensor: &Tensor,
        src: usize,
    ) -> Result<impl Future<Output = Result<(), DistError>> + 'static, DistError> {
        let (group, dst) = self.peer(call, src)?;
        let (tiles, _) = self.tiles(
            group.plan(Collective::SendRecv, bytes_of(tensor))?,
            tensor,
            src,
        )?;
        let transfer = Transfer::new(Exchange::SendRecv, src, dst, group.world_size);
        let rendezvous = group.mailbox.recv(src, dst);
        rendezvous.post(tiles);
        Ok(transfer.landed(rendezvous))
    }
}

/// The list argument of a rooted `collective`.
fn list_name(collective: Collective) -> &'static str {
    match collective {
        Collective::Scatter => "scatter_list",
        _ => "gather_list",
    }
}

/// How a plan's one-sided put is launched: its kernel over its grid, on
/// one SIP of the device.
#[derive(Clone)]
struct Put {
    device: Rc<Device>,
    kernel: Kernel<KernelArgs, ()>,
    grid: Grid,
    sips: JobSips,
}

impl Put {
    fn new(inner: &Inner, plan: &Plan) -> Put {
        Put {
            device: inner.device.clone(),
            kernel: plan.algorithm().kernel(),
            grid: plan.grid(),
            sips: inner.sips.clone(),
        }
    }

    /// Launches the kernel on `rank`'s SIP: `args.tiles` into
    /// `args.out_tiles`, cube by cube.
    fn launch(
        &self,
        rank: usize,
        args: KernelArgs,
    ) -> impl Future<Output = Result<(), DistError>> + use<> {
        let put = self.clone();
        let sip = self.sips.sip_of(rank).unwrap_or(u32::MAX);
        async move {
            launch(&put.device, &put.kernel, sip, put.grid, args).await?;
            Ok(())
        }
    }

    /// The sender's side of `transfer` (its ticket `rendezvous` taken):
    /// waits for the receiver's post, checks that it fits `sent`, puts
    /// `sent` into it with `args`, and finishes the rendezvous with the
    /// outcome, which both sides return.
    fn run(
        &self,
        rendezvous: Rc<Rendezvous>,
        sent: Tiles,
        mut args: KernelArgs,
        transfer: Transfer,
    ) -> impl Future<Output = Result<(), DistError>> + use<> {
        let put = self.clone();
        async move {
            let posted = rendezvous.posted().await;
            if (posted.n_elem, posted.dtype) != (sent.n_elem, sent.dtype) {
                let failure = Failure::Mismatch(Box::new((sent, posted)));
                rendezvous.finish(Err(failure.clone()));
                return Err(transfer.error(failure));
            }
            args.tiles = sent.addrs;
            // Boxed: a put waiting for its receiver's post does not hold
            // the launch's state.
            let launched = match args.set_output(posted.addrs) {
                Ok(()) => Box::pin(put.launch(transfer.src, args)).await,
                Err(error) => Err(error.into()),
            };
            let failure = launched.as_ref().map_err(|e| Failure::Send(e.to_string()));
            rendezvous.finish(failure.map(drop));
            launched
        }
    }
}

/// One transfer from rank `src` to rank `dst`, part of `exchange` in a
/// world of `world_size`: what its errors name.
#[derive(Debug, Clone, Copy)]
struct Transfer {
    exchange: Exchange,
    src: usize,
    dst: usize,
    world_size: usize,
}

impl Transfer {
    fn new(exchange: Exchange, src: usize, dst: usize, world_size: usize) -> Transfer {
        Transfer {
            exchange,
            src,
            dst,
            world_size,
        }
    }

    /// The call and its list argument of a rooted exchange, with the
    /// rank whose tensor is one block of the root's list and the root.
    fn rooted(self) -> (Collective, usize, usize) {
        match self.exchange {
            Exchange::Scatter => (Collective::Scatter, self.dst, self.src),
            _ => (Collective::Gather, self.src, self.dst),
        }
    }

    /// The root of a rooted exchange.
    fn root(self) -> usize {
        self.rooted().2
    }

    /// Waits until `rendezvous` (this transfer's) has finished; its
    /// failure becomes this transfer's error.
    async fn landed(self, rendezvous: Rc<Rendezvous>) -> Result<(), DistError> {
        let outcome = rendezvous.outcome().await;
        outcome.map_err(|failure| self.error(failure))
    }

    /// The error both sides report for `failure`.
    fn error(self, failure: Failure) -> DistError {
        let (src, dst) = (self.src, self.dst);
        let pair = match failure {
            Failure::Send(reason) => {
                let call = match self.exchange {
                    Exchange::SendRecv => "recv",
                    _ => self.rooted().0.name(),
                };
                return DistError::SendFailed {
                    call,
                    src,
                    dst,
                    reason,
                };
            }
            Failure::Mismatch(pair) => *pair,
        };
        let (sent, received) = pair;
        let whole = |block: Tiles| Tiles {
            n_elem: block.n_elem * self.world_size,
            ..block
        };
        match self.exchange {
            Exchange::SendRecv => DistError::P2pMismatch {
                src,
                dst,
                sent: sent.tensor,
                sent_elements: sent.n_elem,
                sent_dtype: sent.dtype,
                received: received.tensor,
                received_elements: received.n_elem,
                received_dtype: received.dtype,
            },
            Exchange::Gather => self.list_mismatch(sent, whole(received)),
            Exchange::Scatter => self.list_mismatch(received, whole(sent)),
        }
    }

    /// A rank's `tensor` that is no block of the root's `list`.
    fn list_mismatch(self, tensor: Tiles, list: Tiles) -> DistError {
        let (collective, rank, root) = self.rooted();
        DistError::ListMismatch(Box::new(ListMismatch {
            call: collective.name(),
            rank,
            root,
            tensor: tensor.tensor,
            elements: tensor.n_elem,
            dtype: tensor.dtype,
            list: list_name(collective),
            list_tensor: list.tensor,
            list_elements: list.n_elem,
            list_dtype: list.dtype,
            world_size: self.world_size,
        }))
    }
}

/// Every check `init_process_group` makes for the default group on
/// `machine` (each collective's default entry resolved for it), and the
/// machine-independent checks of every other entry (module, `params`). Run
/// when a configuration is loaded, so that every command refuses what a
/// run would, with the same message. An entry that is not a default and
/// cannot serve this machine (e.g. recursive doubling beyond its IPCQ
/// directions) is refused when a run selects it, not at load: a catalogue
/// is valid on machines some of its entries do not fit. So is a default
/// other than all_reduce's whose IPCQ slots do not fit the machine's
/// memory: refused by the call that needs it (ADR-0113).
pub fn check_config(machine: &Machine, ccl: &CclConfig) -> Result<(), DistError> {
    for name in ccl.algorithm_names() {
        Plan::check_entry(ccl, name)?;
    }
    Group::build(machine, ccl, None, (None, false)).map(drop)
}

impl Group {
    /// Resolves a plan for every collective ccl.yaml serves (`chosen`
    /// replaces the default entry of its collective) for the world, or for
    /// the sub-group `members`; nothing is kept unless all succeed.
    fn build(
        machine: &Machine,
        ccl: &CclConfig,
        chosen: Option<(Collective, &str)>,
        (members, subgroup): (Option<&[u32]>, bool),
    ) -> Result<Group, DistError> {
        let mut plans = BTreeMap::new();
        for collective in Collective::ALL {
            let rules = match chosen {
                Some((c, entry)) if c == collective => Some(vec![SizeRule {
                    up_to: None,
                    entry: entry.to_owned(),
                }]),
                _ => ccl.defaults().rules_for(collective),
            };
            let Some(rules) = rules else { continue };
            let mut sized = Vec::with_capacity(rules.len());
            for rule in rules {
                let plan = Plan::resolve_in(machine, ccl, (collective, &rule.entry), members)?;
                sized.push(SizedPlan { rule, plan });
            }
            same_endpoints(collective, &sized)?;
            let named = chosen.is_some_and(|(c, _)| c == collective);
            if named || collective == Collective::AllReduce {
                // The entry asked for by name and all_reduce's must fit this
                // machine's memory now; another default's slots only when a
                // call needs them (ADR-0113).
                sized.iter().try_for_each(|s| s.plan.usable().map(drop))?;
            }
            plans.insert(collective, sized);
        }
        let mut all = plans
            .iter()
            .flat_map(|(&c, sized)| sized.iter().map(move |s| (c, &s.plan)));
        let world_size = all.clone().next().map_or(
            members.map_or(machine.sip_count() as usize, <[u32]>::len),
            |(_, p)| p.world_size,
        );
        if let Some((call, plan)) = all.find(|(_, p)| p.world_size != world_size) {
            return Err(DistError::WorldSizeDiffers {
                call,
                entry: plan.entry.clone(),
                world_size: plan.world_size,
                expected: world_size,
            });
        }
        tracing::debug!(target: "kernbench::ccl", "process group: world_size {world_size}");
        Ok(Group {
            world_size,
            plans,
            barrier: Barrier::new("dist.barrier", world_size),
            mailbox: Mailbox::new(Exchange::SendRecv),
            gathers: Mailbox::new(Exchange::Gather),
            scatters: Mailbox::new(Exchange::Scatter),
            members: members.map(Rc::from),
            subgroup,
        })
    }

    /// The group rank of the caller on SIP `sip`.
    fn group_rank(&self, sip: u32) -> Result<usize, DistError> {
        let Some(members) = &self.members else {
            return Ok(sip as usize);
        };
        let position = members.iter().position(|&s| s == sip);
        position.ok_or_else(|| DistError::NotInGroup {
            rank: sip as usize,
            members: members.iter().map(|&s| s as usize).collect(),
        })
    }

    /// The plan of a call of `collective` with `bytes` of input per rank:
    /// the first of its size rules that serves it.
    fn plan(&self, collective: Collective, bytes: u64) -> Result<&Plan, DistError> {
        let sized = self.plans.get(&collective);
        let sized = sized.ok_or(DistError::NoAlgorithm(collective))?;
        let chosen = sized.iter().find(|s| s.rule.serves(bytes));
        chosen
            .ok_or(DistError::NoAlgorithm(collective))?
            .plan
            .usable()
    }
}

/// The bytes of `tensor` on one rank: what a size rule is judged by.
fn bytes_of(tensor: &Tensor) -> u64 {
    tensor.numel() as u64 * tensor.dtype().size()
}

/// One size rule and the plan of its entry.
struct SizedPlan {
    rule: SizeRule,
    plan: Plan,
}

/// The size rules of `collective` run on one set of endpoints
/// ([`DistError::EndpointsDiffer`]).
fn same_endpoints(collective: Collective, sized: &[SizedPlan]) -> Result<(), DistError> {
    let Some((first, rest)) = sized.split_first() else {
        return Ok(());
    };
    let endpoints = first.plan.endpoints();
    match rest.iter().find(|s| s.plan.endpoints() != endpoints) {
        Some(other) => Err(DistError::EndpointsDiffer {
            call: collective,
            entry: first.plan.entry.clone(),
            endpoints,
            other: other.plan.entry.clone(),
            other_endpoints: other.plan.endpoints(),
        }),
        None => Ok(()),
    }
}

/// A straggler's wait before its launch: `late` of virtual time, named
/// `sip{rank}.straggler` for `--explain` (ADR-0106).
async fn straggle(rank: u32, late: SimDuration) {
    if explain::recording() {
        let name = format!("{}.straggler", crate::topology::naming::sip(rank));
        explain::push_named(
            &name,
            explain::Class::Launch,
            explain::TermKind::Wait,
            late.as_ps(),
        );
    }
    explain::sleep_until(crate::sim::now() + late).await;
}
