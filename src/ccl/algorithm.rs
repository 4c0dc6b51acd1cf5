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

/// The standard kernel arguments (D3): the tensor, [`TileArgs`], what to
/// compute (`dtype`, `op`, `root`) and where this SIP sits (seed ADR-0047
/// D5's trailing SIP values, as one [`SipArrangement`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelArgs {
    /// Virtual address of the tensor's first byte on this SIP.
    pub t_ptr: u64,
    /// Device address of each cube's tile, by cube index (PE DMAs take
    /// device addresses): the input, and the output of in-place calls.
    pub tiles: Rc<[u64]>,
    /// Device address of each cube's output tile for the out-of-place
    /// calls (`all_gather`, `reduce_scatter`, `all_to_all`; for `send`,
    /// run on the sender's SIP only, the receiver's tiles); empty
    /// otherwise.
    pub out_tiles: Rc<[u64]>,
    /// Elements per tile, cube mesh and SIP count.
    pub tile: TileArgs,
    /// The element type of every tile.
    pub dtype: DType,
    /// How partial results combine (`Sum` for calls that do not reduce).
    pub op: ReduceOp,
    /// The root rank of `broadcast` / `reduce` (the peer of `send` /
    /// `recv`); 0 otherwise.
    pub root: u32,
    /// This SIP's rank.
    pub sip_rank: u32,
    /// How the SIPs are connected.
    pub sip_arrangement: SipArrangement,
    /// ccl.yaml's `root_cube` of the entry, if set.
    pub root_cube: Option<u32>,
    /// ccl.yaml's `params` of the entry, checked against
    /// [`CclAlgorithm::params`].
    pub params: Rc<Params>,
    /// Bytes per IPCQ slot (`ipcq.slot_size`): the largest message one
    /// `recv` takes whole.
    pub slot_bytes: u64,
}

impl KernelArgs {
    /// The device address of `cube`'s tile.
    pub fn tile_addr(&self, cube: u32) -> Result<u64, KernelError> {
        tile_of(&self.tiles, cube, "input")
    }

    /// The device address of `cube`'s output tile.
    pub fn out_addr(&self, cube: u32) -> Result<u64, KernelError> {
        tile_of(&self.out_tiles, cube, "output")
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
    /// rank `root`.
    pub fn root_endpoint(&self) -> usize {
        (self.root * self.cubes() + self.root_cube.unwrap_or(0)) as usize
    }
}

fn tile_of(tiles: &[u64], cube: u32, what: &str) -> Result<u64, KernelError> {
    tiles.get(cube as usize).copied().ok_or_else(|| {
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
        return tl.apply_assign(op.binary(), acc, received).await;
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
