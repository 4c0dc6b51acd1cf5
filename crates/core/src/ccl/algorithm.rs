//! The collective-algorithm contract (seed ADR-0050 D1–D7 in Rust): what
//! one file in `algorithms/` implements so that the process group can run
//! it.
//!
//! An algorithm is a [`CclAlgorithm`]: the [`Collective`] it implements
//! (the process group runs it for that call only), its PE
//! [`kernel`](CclAlgorithm::kernel) (an `async` function of a
//! [`Tl`](crate::tl::Tl) and the standard [`KernelArgs`]), the per-tensor
//! scalars it wants ([`kernel_args`](CclAlgorithm::kernel_args), D2), what
//! it needs of the machine and ccl.yaml
//! ([`requirements`](CclAlgorithm::requirements),
//! [`supports`](CclAlgorithm::supports)), the ccl.yaml `params` it reads
//! ([`params`](CclAlgorithm::params)) and, optionally, an edit of its
//! neighbour tables ([`neighbors`](CclAlgorithm::neighbors), seed author
//! guide §3) or its own IPCQ endpoints
//! ([`endpoints`](CclAlgorithm::endpoints), e.g. seed ADR-0032's intercube
//! wiring). All of it is checked at `init_process_group`.
//!
//! Endpoints: a collective runs one program on PE 0 of every cube of every
//! SIP ([`Endpoints::flat`]); endpoint `e = sip × cubes + cube` is the
//! "rank" the IPCQ tables speak of (D7's flat mode), while the process
//! group's rank stays the SIP (seed ADR-0024). Every endpoint's tile is
//! one contribution (seed ADR-0032).
//!
//! Knows kernels, neighbour tables and shapes; nothing of torch or tensors.

use std::rc::Rc;

use crate::mem::DType;
use crate::sim::SimDuration;
use crate::tl::{Grid, Kernel, KernelError, TensorHandle, Tl};
use crate::topology::SipArrangement;

use super::address::{DevAddr, TileOffset};
use super::collective::{Collective, ParamSpec, Params, ReduceOp, Requirements};
use super::cost::{CostError, Network};
use super::endpoints::{Endpoints, WorldShape};
use super::helpers::{CHUNK_PARAMS, ChunkDefault, streamed_tcm_bytes};
use super::topology::{NeighborMap, TopologyError};

/// The per-tensor scalars [`CclAlgorithm::kernel_args`] returns (D2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileArgs {
    /// Elements per cube tile (of the input; of each block for the
    /// collectives whose tiles hold one block per endpoint).
    pub n_elem: usize,
    /// Cube-mesh width (1 on a single-cube machine).
    pub cube_w: u32,
    /// Cube-mesh height (1 on a single-cube machine).
    pub cube_h: u32,
    /// SIPs taking part (= world size, rank = SIP).
    pub n_sips: u32,
}

/// The root endpoint of a rooted call: cube `cube` of rank `rank`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Root {
    /// The root rank (a SIP of the group).
    pub rank: u32,
    /// ccl.yaml's `root_cube` of the entry (0 if unset).
    pub cube: u32,
}

/// What one call adds to the standard arguments, by collective: each
/// variant holds only what its collective has, so a kernel cannot read
/// a root, a reduce op or output tiles its collective has no use for
/// (ADR-0054). `out` holds the device address of each cube's output tile,
/// by cube index: for a put (`send`, `gather`, `scatter`) the tiles it
/// writes on the other side.
#[derive(Debug, Clone, PartialEq)]
pub enum CallArgs {
    /// `all_reduce` (in place).
    AllReduce {
        /// How partial results combine.
        op: ReduceOp,
    },
    /// `all_gather`: one output block per endpoint.
    AllGather {
        /// The output tiles.
        out: Rc<[u64]>,
    },
    /// `reduce_scatter`: one input block per endpoint.
    ReduceScatter {
        /// How partial results combine.
        op: ReduceOp,
        /// The output tiles.
        out: Rc<[u64]>,
    },
    /// `broadcast` (in place).
    Broadcast {
        /// Whose tile everyone gets.
        root: Root,
    },
    /// `reduce` (in place at the root).
    Reduce {
        /// Where the result lands.
        root: Root,
        /// How partial results combine.
        op: ReduceOp,
    },
    /// `all_to_all`: one block per endpoint in and out.
    AllToAll {
        /// The output tiles.
        out: Rc<[u64]>,
    },
    /// `send` / `recv`, run on the sender's SIP.
    SendRecv {
        /// The receiving rank.
        peer: u32,
        /// The receiver's tiles.
        out: Rc<[u64]>,
    },
    /// `gather`, run on every rank's SIP.
    Gather {
        /// The rank that gathers.
        root: Root,
        /// This rank's block of the root's list.
        out: Rc<[u64]>,
    },
    /// `scatter`, run on the root's SIP once per rank.
    Scatter {
        /// The rank that scatters.
        root: Root,
        /// The receiving rank's tiles.
        out: Rc<[u64]>,
    },
    /// A teaching or test kernel: nothing beyond the tiles.
    Custom,
}

impl CallArgs {
    /// `collective`'s arguments out of what a call gives: `op`, `root`
    /// (the root of a rooted call, whose `rank` is the peer of `send`)
    /// and the output tiles `out` (empty until a put knows them); each
    /// collective keeps only what it has.
    pub fn new(collective: Collective, op: ReduceOp, root: Root, out: Rc<[u64]>) -> CallArgs {
        match collective {
            Collective::AllReduce => CallArgs::AllReduce { op },
            Collective::AllGather => CallArgs::AllGather { out },
            Collective::ReduceScatter => CallArgs::ReduceScatter { op, out },
            Collective::Broadcast => CallArgs::Broadcast { root },
            Collective::Reduce => CallArgs::Reduce { root, op },
            Collective::AllToAll => CallArgs::AllToAll { out },
            Collective::SendRecv => CallArgs::SendRecv {
                peer: root.rank,
                out,
            },
            Collective::Gather => CallArgs::Gather { root, out },
            Collective::Scatter => CallArgs::Scatter { root, out },
            Collective::Custom => CallArgs::Custom,
        }
    }

    /// The collective these are the arguments of.
    pub fn collective(&self) -> Collective {
        match self {
            CallArgs::AllReduce { .. } => Collective::AllReduce,
            CallArgs::AllGather { .. } => Collective::AllGather,
            CallArgs::ReduceScatter { .. } => Collective::ReduceScatter,
            CallArgs::Broadcast { .. } => Collective::Broadcast,
            CallArgs::Reduce { .. } => Collective::Reduce,
            CallArgs::AllToAll { .. } => Collective::AllToAll,
            CallArgs::SendRecv { .. } => Collective::SendRecv,
            CallArgs::Gather { .. } => Collective::Gather,
            CallArgs::Scatter { .. } => Collective::Scatter,
            CallArgs::Custom => Collective::Custom,
        }
    }

    fn missing(&self, arg: &'static str) -> ArgError {
        ArgError {
            collective: self.collective(),
            arg,
        }
    }

    fn out_mut(&mut self) -> Option<&mut Rc<[u64]>> {
        match self {
            CallArgs::AllGather { out }
            | CallArgs::ReduceScatter { out, .. }
            | CallArgs::AllToAll { out }
            | CallArgs::SendRecv { out, .. }
            | CallArgs::Gather { out, .. }
            | CallArgs::Scatter { out, .. } => Some(out),
            CallArgs::AllReduce { .. }
            | CallArgs::Broadcast { .. }
            | CallArgs::Reduce { .. }
            | CallArgs::Custom => None,
        }
    }
}

/// A kernel asked for an argument its collective does not have (a root
/// of `all_reduce`, the output tiles of an in-place call): a bug of the
/// kernel, which fails with this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{collective} has no {arg}: its kernel arguments carry only what the call has")]
pub struct ArgError {
    /// The call's collective.
    pub collective: Collective,
    /// What was asked for (`root`, `reduce op`, `output tiles`, `peer`).
    pub arg: &'static str,
}

impl From<ArgError> for KernelError {
    fn from(error: ArgError) -> Self {
        KernelError::failed(error.to_string())
    }
}

/// The standard kernel arguments (D3): the tensor, [`TileArgs`], the
/// element type, where this SIP sits (seed ADR-0047 D5's trailing SIP
/// values, as one [`SipArrangement`]) and what the call adds by
/// collective ([`CallArgs`]: `op`, `root`, output tiles).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelArgs {
    /// Virtual address of the tensor's first byte on this SIP.
    pub t_ptr: u64,
    /// Device address of each cube's tile, by cube index (PE DMAs take
    /// device addresses): the input, and the output of in-place calls.
    pub tiles: Rc<[u64]>,
    /// Elements per tile, cube mesh and SIP count.
    pub tile: TileArgs,
    /// The element type of every tile.
    pub dtype: DType,
    /// What this call adds, by collective.
    pub call: CallArgs,
    /// This SIP's rank.
    pub sip_rank: u32,
    /// How the SIPs are connected.
    pub sip_arrangement: SipArrangement,
    /// ccl.yaml's `params` of the entry, checked against
    /// [`CclAlgorithm::params`].
    pub params: Rc<Params>,
    /// Bytes per IPCQ slot (`ipcq.slot_size`): the largest message one
    /// `recv` takes whole.
    pub slot_bytes: u64,
}

impl KernelArgs {
    /// The device address of `cube`'s tile.
    pub fn tile_addr(&self, cube: u32) -> Result<DevAddr, KernelError> {
        tile_of(&self.tiles, cube, "input")
    }

    /// The device address of `cube`'s output tile (the out-of-place
    /// calls and the puts).
    pub fn out_addr(&self, cube: u32) -> Result<DevAddr, KernelError> {
        let out = match &self.call {
            CallArgs::AllGather { out }
            | CallArgs::ReduceScatter { out, .. }
            | CallArgs::AllToAll { out }
            | CallArgs::SendRecv { out, .. }
            | CallArgs::Gather { out, .. }
            | CallArgs::Scatter { out, .. } => out,
            _ => return Err(self.call.missing("output tiles").into()),
        };
        tile_of(out, cube, "output")
    }

    /// Replaces the output tiles (a put's, once the other side has
    /// posted them).
    pub fn set_output(&mut self, tiles: Rc<[u64]>) -> Result<(), ArgError> {
        let missing = self.call.missing("output tiles");
        *self.call.out_mut().ok_or(missing)? = tiles;
        Ok(())
    }

    /// How partial results combine (`all_reduce`, `reduce_scatter`,
    /// `reduce`).
    pub fn op(&self) -> Result<ReduceOp, ArgError> {
        match self.call {
            CallArgs::AllReduce { op }
            | CallArgs::ReduceScatter { op, .. }
            | CallArgs::Reduce { op, .. } => Ok(op),
            _ => Err(self.call.missing("reduce op")),
        }
    }

    /// The root of a rooted call (`broadcast`, `reduce`, `gather`,
    /// `scatter`).
    pub fn root(&self) -> Result<Root, ArgError> {
        match self.call {
            CallArgs::Broadcast { root }
            | CallArgs::Reduce { root, .. }
            | CallArgs::Gather { root, .. }
            | CallArgs::Scatter { root, .. } => Ok(root),
            _ => Err(self.call.missing("root")),
        }
    }

    /// The receiving rank of `send`.
    pub fn peer(&self) -> Result<u32, ArgError> {
        match self.call {
            CallArgs::SendRecv { peer, .. } => Ok(peer),
            _ => Err(self.call.missing("peer")),
        }
    }

    /// The shape of one tile: `[n_elem]`.
    pub fn shape(&self) -> [usize; 1] {
        [self.tile.n_elem]
    }

    /// Cubes per SIP.
    pub fn cubes(&self) -> u32 {
        self.tile.cube_w * self.tile.cube_h
    }

    /// The flat endpoint index of `cube` on this SIP
    /// (`sip_rank × cubes + cube`).
    pub fn endpoint(&self, cube: u32) -> usize {
        (self.sip_rank * self.cubes() + cube) as usize
    }

    /// Endpoints in the whole collective (`n_sips × cubes`).
    pub fn endpoints(&self) -> usize {
        (self.tile.n_sips * self.cubes()) as usize
    }

    /// The endpoint of a rooted call: cube `root_cube` (0 if unset) of
    /// the root rank.
    pub fn root_endpoint(&self) -> Result<usize, ArgError> {
        let root = self.root()?;
        Ok((root.rank * self.cubes() + root.cube) as usize)
    }

    /// Where block `b` starts in a tile of blocks of `tile.n_elem`
    /// elements (the collectives whose tiles hold one block per endpoint).
    pub fn block(&self, b: usize) -> TileOffset {
        TileOffset((b * self.tile.n_elem) as u64 * self.dtype.size())
    }
}

fn tile_of(tiles: &[u64], cube: u32, what: &str) -> Result<DevAddr, KernelError> {
    tiles
        .get(cube as usize)
        .copied()
        .map(DevAddr)
        .ok_or_else(|| {
            let n = tiles.len();
            KernelError::failed(format!(
                "the {what} tensor has {n} cube tiles, none for cube {cube}"
            ))
        })
}

/// Why an algorithm cannot serve a world or a `params` value: what it
/// requires ([`CclAlgorithm::supports`], [`check_chunk`](super::helpers::check_chunk),
/// [`Doubling::new`](super::helpers::Doubling::new)). The process group
/// reports it as "`module` requires: {this}" naming the entry. An
/// algorithm with a new kind of refusal adds a variant here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    /// Recursive doubling needs one IPCQ direction per step and one for
    /// the fold.
    #[error(
        "recursive doubling over {endpoints} endpoints needs {dirs} IPCQ directions; there are {available}"
    )]
    DoublingDirections {
        /// Endpoints in the world.
        endpoints: usize,
        /// IPCQ directions they need.
        dirs: usize,
        /// IPCQ directions there are.
        available: usize,
    },
    /// ccl.yaml's `root_cube` is not the cube the algorithm roots at.
    #[error("its root cube is {place} of the cube mesh (root_cube: {own}), not {asked}")]
    RootCube {
        /// Where the algorithm's root is, in words.
        place: &'static str,
        /// That cube's index in this world.
        own: u32,
        /// ccl.yaml's `root_cube`.
        asked: u32,
    },
    /// `params.chunk` is not a whole number of elements of every dtype.
    #[error(
        "params.chunk: {chunk} B is not a whole number of elements of every dtype \
         (a multiple of 4 B: f32 elements are 4 B, f16 and bf16 2 B)"
    )]
    ChunkNotElements {
        /// `params.chunk` in bytes.
        chunk: u64,
    },
}

/// Why an algorithm whose schedule comes from its `params` cannot serve
/// its entry ([`CclAlgorithm::configure`]); the process group reports it
/// naming the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigureError {
    /// A `params` key it needs is not set.
    #[error("params.{name}: {what}")]
    MissingParam {
        /// The key.
        name: &'static str,
        /// What it names and how to set it.
        what: &'static str,
    },
    /// Its schedule file (MSCCL XML) cannot run here: `file:line:
    /// message`.
    #[error(transparent)]
    Schedule(#[from] super::msccl::XmlError),
}

/// A collective algorithm: one file in `algorithms/` (see the module docs
/// and `docs/algorithm-author-guide.md`).
pub trait CclAlgorithm {
    /// The `torch.distributed` call it implements.
    fn collective(&self) -> Collective;

    /// The PE program every endpoint runs.
    fn kernel(&self) -> Kernel<KernelArgs, ()>;

    /// The per-tensor scalars (D2); the default is the standard
    /// `(n_elem, cube_w, cube_h, n_sips = world_size)`.
    fn kernel_args(&self, world_size: usize, n_elem: usize, cube_w: u32, cube_h: u32) -> TileArgs {
        TileArgs {
            n_elem,
            cube_w,
            cube_h,
            n_sips: world_size as u32,
        }
    }

    /// What it needs (IPCQ slots, SIP grid kinds); the default needs one
    /// slot and serves any SIP grid.
    fn requirements(&self) -> Requirements {
        Requirements::default()
    }

    /// Any further check of the world it would run in (e.g. a `root_cube`
    /// it cannot use, a `params` value that does not fit the machine):
    /// `Err(what it requires)` refuses it at `init_process_group`.
    fn supports(&self, _shape: &WorldShape, _params: &Params) -> Result<(), Unsupported> {
        Ok(())
    }

    /// An algorithm whose schedule comes from its `params` (`msccl`'s
    /// XML file) reads it here, once, when its entry is resolved to serve
    /// `collective` in the world `shape` (before any other hook but
    /// [`params`](Self::params) is asked): `Ok(Some(configured))` replaces
    /// this instance for everything after; `Err(what is wrong)` refuses
    /// the entry. The default: `Ok(None)`, nothing to read.
    fn configure(
        &self,
        _collective: Collective,
        _shape: &WorldShape,
        _params: &Params,
    ) -> Result<Option<Box<dyn CclAlgorithm>>, ConfigureError> {
        Ok(None)
    }

    /// How it cuts a tile into pipelined pieces: `Some(default)` for an
    /// algorithm that moves its tile chunk by chunk (`helpers::tile_chunks`
    /// with this default). It then reads ccl.yaml `params.chunk` (checked
    /// when the config is loaded: whole elements, at most one IPCQ slot)
    /// and needs the TCM of [`streamed_tcm_bytes`], not the whole tile.
    /// The default: `None`, no chunks.
    fn chunking(&self) -> Option<ChunkDefault> {
        None
    }

    /// The TCM bytes one endpoint needs for a tile of `tile_bytes` (what
    /// a workload checks against `pe.tcm.capacity` before it runs); the
    /// default is the whole tile, loaded at once, or what streaming it
    /// needs if it has a [`chunking`](Self::chunking).
    fn tcm_bytes(&self, tile_bytes: u64, params: &Params) -> u64 {
        match self.chunking() {
            Some(default) => streamed_tcm_bytes(tile_bytes, params, default),
            None => tile_bytes,
        }
    }

    /// The ccl.yaml `params` keys it reads; any other key is an error. The
    /// default: `chunk` if it has a [`chunking`](Self::chunking), else
    /// none.
    fn params(&self) -> &'static [ParamSpec] {
        match self.chunking() {
            Some(_) => CHUNK_PARAMS,
            None => &[],
        }
    }

    /// Edits the builtin table `map` of endpoint `endpoint` of `endpoints`
    /// (an index and a count of IPCQ endpoints, not ranks; seed author
    /// guide §3): return a new table, or edit `map` in place and return
    /// `None`.
    fn neighbors(
        &self,
        _endpoint: usize,
        _endpoints: usize,
        _map: &mut NeighborMap,
    ) -> Option<NeighborMap> {
        None
    }

    /// The IPCQ endpoints and tables of the world `shape`, before
    /// [`neighbors`](Self::neighbors) is applied; the default is
    /// [`Endpoints::flat`].
    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::flat(shape)
    }

    /// The α-β (Hockney) cost of one collective with `args` (any rank's)
    /// over the endpoints of `net` ([`super::cost`]): a documented lower
    /// bound of the simulated time. `None` (the default): the algorithm
    /// states no model.
    fn model(&self, _args: &KernelArgs, _net: &Network) -> Result<Option<SimDuration>, CostError> {
        Ok(None)
    }

    /// The launch grid on each SIP; the default is PE 0 of every cube.
    fn grid(&self, cube_w: u32, cube_h: u32) -> Grid {
        Grid {
            pes: 1,
            cubes: cube_w * cube_h,
        }
    }
}

/// `acc = op(acc, received)` on PE_MATH (`Avg` adds; see [`finish`]), for
/// a received IPCQ slot in any buffer kind: a slot outside this PE's TCM
/// (ccl.yaml `buffer_kind: hbm | sram`) is first loaded into TCM scratch
/// with PE_DMA, which is freed after.
pub async fn reduce_received(
    tl: &Tl,
    op: ReduceOp,
    acc: &TensorHandle,
    received: &TensorHandle,
) -> Result<(), KernelError> {
    if received.space() == tl.tcm() {
        let (op, elements) = tl.assign_op(op.binary(), acc, received)?;
        return tl.run_math(op, elements).await;
    }
    let local = tl
        .load(received, received.shape(), received.dtype())
        .await?;
    tl.apply_assign(op.binary(), acc, &local).await?;
    tl.free(&local)
}

/// The final value of a reduction of `contributions` tiles whose combined
/// value is `acc`: `acc` itself, or for `Avg` `acc × (1 / contributions)`
/// (one PE_MATH pass, rounded once to the dtype) in new scratch.
pub async fn finish(
    tl: &Tl,
    op: ReduceOp,
    acc: TensorHandle,
    contributions: usize,
) -> Result<TensorHandle, KernelError> {
    match op {
        ReduceOp::Avg => tl.scale(&acc, 1.0 / contributions as f32).await,
        ReduceOp::Sum | ReduceOp::Product | ReduceOp::Min | ReduceOp::Max => Ok(acc),
    }
}

/// `algorithm`'s endpoints on the world `shape` with its `neighbors` hook
/// applied to every table (the one place the hook is applied).
pub fn wired_endpoints(
    algorithm: &dyn CclAlgorithm,
    shape: &WorldShape,
) -> Result<Endpoints, TopologyError> {
    let endpoints = algorithm.endpoints(shape)?;
    Ok(endpoints.with_neighbors(|e, n, map| algorithm.neighbors(e, n, map)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(call: CallArgs) -> KernelArgs {
        KernelArgs {
            t_ptr: 0,
            tiles: Rc::from([0x1000, 0x2000, 0x3000, 0x4000]),
            tile: TileArgs {
                n_elem: 8,
                cube_w: 2,
                cube_h: 2,
                n_sips: 2,
            },
            dtype: DType::F16,
            call,
            sip_rank: 0,
            sip_arrangement: SipArrangement::Ring { n: 2 },
            params: Rc::new(Params::default()),
            slot_bytes: 64 << 10,
        }
    }

    #[test]
    fn each_collective_keeps_only_its_own_arguments() {
        let root = Root { rank: 1, cube: 3 };
        let out: Rc<[u64]> = Rc::from([0x9000, 0xa000, 0xb000, 0xc000]);
        for collective in Collective::ALL {
            let call = CallArgs::new(collective, ReduceOp::Max, root, out.clone());
            assert_eq!(call.collective(), collective);
            let a = args(call);
            let reduces = matches!(
                collective,
                Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce
            );
            assert_eq!(
                a.op().ok(),
                reduces.then_some(ReduceOp::Max),
                "{collective}"
            );
            let rooted = matches!(
                collective,
                Collective::Broadcast
                    | Collective::Reduce
                    | Collective::Gather
                    | Collective::Scatter
            );
            assert_eq!(a.root().ok(), rooted.then_some(root), "{collective}");
            let peer = (collective == Collective::SendRecv).then_some(1);
            assert_eq!(a.peer().ok(), peer, "{collective}");
            let has_out = matches!(
                collective,
                Collective::AllGather
                    | Collective::ReduceScatter
                    | Collective::AllToAll
                    | Collective::SendRecv
                    | Collective::Gather
                    | Collective::Scatter
            );
            assert_eq!(
                a.out_addr(2).ok(),
                has_out.then_some(DevAddr(0xb000)),
                "{collective}"
            );
        }
    }

    #[test]
    fn a_missing_argument_is_an_error_naming_the_collective() {
        let a = args(CallArgs::AllReduce { op: ReduceOp::Sum });
        assert_eq!(
            a.root(),
            Err(ArgError {
                collective: Collective::AllReduce,
                arg: "root"
            })
        );
        assert_eq!(
            a.root_endpoint().unwrap_err().to_string(),
            "all_reduce has no root: its kernel arguments carry only what the call has"
        );
        let error = a.out_addr(0).unwrap_err().to_string();
        assert!(error.contains("all_reduce has no output tiles"), "{error}");
        let mut a = a;
        assert!(a.set_output(Rc::from([1])).is_err());
    }

    #[test]
    fn the_root_endpoint_is_the_root_cube_of_the_root_rank() {
        // 4 cubes per SIP: cube 3 of rank 1 is endpoint 1 × 4 + 3.
        let root = Root { rank: 1, cube: 3 };
        let a = args(CallArgs::Broadcast { root });
        assert_eq!(a.root_endpoint(), Ok(7));
        let mut put = args(CallArgs::new(
            Collective::Gather,
            ReduceOp::Sum,
            root,
            Rc::from([]),
        ));
        assert!(put.out_addr(0).is_err(), "no output tiles yet");
        put.set_output(Rc::from([0x5000])).unwrap();
        assert_eq!(put.out_addr(0).unwrap(), DevAddr(0x5000));
    }
}
