//! The mock runtime (seed author guide §6, "Unit testing — Mock runtime"):
//! [`run_kernel_in_mock`] runs an algorithm's kernel for `world_size` ranks
//! on in-memory data and returns every rank's tile, for millisecond unit
//! tests of algorithmic correctness.
//!
//! What "mock" means here. The seeds' mock runs the Python kernel as
//! greenlets with `tl.send`/`tl.recv` served by in-memory FIFOs. Our kernels
//! are `async` functions of a real [`Tl`], so instead of a
//! second, fake `Tl` the mock builds a throw-away machine sized to the
//! world — one SIP, a 1 × 1 cube mesh, `cube.pes = world_size` — and runs
//! the *same* kernel on it with data on:
//!
//! - rank `r` is PE `r` of cube 0 (`program_id(0) = r`; `program_id(1)` is
//!   always 0, as in the seeds' one-cube mock);
//! - the requested builtin table (plus the algorithm's
//!   [`neighbors`](CclAlgorithm::neighbors) hook) is installed over those
//!   PEs with receive slots in each PE's TCM;
//! - rank `r`'s input is written (untimed) to a tile in the cube's HBM and
//!   its [`KernelArgs`] are those of endpoint `r` of a world of `world_size`
//!   single-cube SIPs: `tiles = [its tile]`, `tile =
//!   kernel_args(world_size, n_elem, 1, 1)`, `sip_rank = r`, so
//!   `args.endpoint(0) = r` and `args.endpoints() = world_size`
//!   (`t_ptr` is the tile's device address: there is no VA space here),
//!   `dtype` f16, `call` the algorithm's collective with `op` sum and root
//!   rank 0 (no output tiles), no `params`, and `sip_arrangement` the square grid
//!   of a 2-D table, else a ring;
//! - one launch of `world_size` programs; afterwards each tile is read back
//!   (untimed).
//!
//! So `send`/`recv` go through real IPCQ rings (credits, slots, PE DMA,
//! backpressure) and the bytes move through the real data path; only the
//! times are ignored. It is fast because the machine is tiny, not because
//! anything is skipped. Differences from the seeds' FIFOs: slot size and
//! count are the IPCQ defaults (a `recv` of a tile larger than a slot is a `TooLarge`
//! launch error, an unmatched send is a [`MockError::Simulation`] deadlock
//! with the pointer dump), ranks are PEs rather than cubes or SIPs, and an
//! algorithm's own [`endpoints`](CclAlgorithm::endpoints) and
//! [`grid`](CclAlgorithm::grid) are not used (the mock's rank → PE map and
//! grid replace them; multi-cube or `global_*` wiring such as
//! `intercube_allreduce` needs the full simulation).
//!
//! A test harness for algorithm authors: it uses the kernel launcher
//! (`runtime::launch`) and `ccl`'s install, nothing of torch, tensors or the
//! process group.

use std::rc::Rc;

use half::f16;

use crate::config::{ConfigError, Override};
use crate::device::{Device, DeviceError};
use crate::mem::DataMode;
use crate::runtime::launch::{LaunchError, launch_with_ipcq};
use crate::sim::{JoinError, SimError, Simulation};
use crate::tl::{Grid, IpcqParams, Kernel, KernelError, PeCoord, Tl, pointer_dump};
use crate::topology::{MemSpace, TopologySpec};

use crate::ccl::install::{InstallError, install_endpoints};
use crate::ccl::registry::{self, UnknownAlgorithm};
use crate::ccl::topology::{Builtin, TopologyError};
use crate::ccl::{
    BufferKind, CallArgs, CclAlgorithm, Endpoints, KernelArgs, Params, ReduceOp, Root,
};
use crate::mem::DType;
use crate::topology::SipArrangement;

/// The algorithm a mock run executes: a registered module name or an
/// algorithm value (`&str` and `&dyn CclAlgorithm` convert into it).
#[derive(Clone, Copy)]
pub enum MockAlgorithm<'a> {
    /// A module of `algorithms/`, resolved through the [`registry`].
    Name(&'a str),
    /// An algorithm in hand (e.g. one defined in the test itself).
    Algorithm(&'a dyn CclAlgorithm),
}

impl<'a> From<&'a str> for MockAlgorithm<'a> {
    fn from(name: &'a str) -> Self {
        MockAlgorithm::Name(name)
    }
}

impl<'a> From<&'a dyn CclAlgorithm> for MockAlgorithm<'a> {
    fn from(algorithm: &'a dyn CclAlgorithm) -> Self {
        MockAlgorithm::Algorithm(algorithm)
    }
}

/// Why a mock run gave no outputs.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    /// The module name is not a file of `algorithms/`.
    #[error(transparent)]
    UnknownAlgorithm(#[from] UnknownAlgorithm),
    /// `world_size` 0.
    #[error("mock run: world_size must be at least 1")]
    EmptyWorld,
    /// Not one input per rank.
    #[error("mock run: {inputs} input tile(s) for world_size {world_size} (one per rank)")]
    InputCount {
        /// Ranks.
        world_size: usize,
        /// Inputs given.
        inputs: usize,
    },
    /// Rank 0's input is empty.
    #[error("mock run: input tiles are empty (n_elem must be at least 1)")]
    EmptyTile,
    /// An input whose length differs from rank 0's.
    #[error("mock run: rank {rank}'s input has {len} elements, rank 0's has {expected}")]
    InputLength {
        /// The rank.
        rank: usize,
        /// Its length.
        len: usize,
        /// Rank 0's length (`n_elem`).
        expected: usize,
    },
    /// An unknown topology name, or tables that cannot be built or wired.
    #[error("mock run: {0}")]
    Topology(#[from] TopologyError),
    /// The mock machine's topology.yaml could not be built.
    #[error("mock run: machine for {world_size} ranks: {source}")]
    Machine {
        /// Ranks (PEs of the cube).
        world_size: usize,
        /// Why.
        source: ConfigError,
    },
    /// The IPCQ rings could not be installed.
    #[error("mock run: IPCQ install: {0}")]
    Install(#[from] InstallError),
    /// The device could not be built, or a tile placed or read back.
    #[error("mock run: {0}")]
    Device(#[from] DeviceError),
    /// The kernel failed; the error names the program's PE (= rank).
    #[error("mock run: {0}")]
    Launch(#[from] LaunchError),
    /// The simulation stopped (a deadlock: unmatched send/recv).
    #[error("mock run: {source}\nIPCQ pointers:\n{pointer_dump}")]
    Simulation {
        /// The executor's report.
        source: SimError,
        /// Every ring's pointers when it stopped.
        pointer_dump: String,
    },
    /// The launch did not finish although the simulation did.
    #[error("mock run: {0}")]
    Join(#[from] JoinError),
}

/// Runs `algorithm`'s kernel on `world_size` ranks connected by the
/// builtin `wiring` (`"ring_1d"`, `"mesh_2d"`, ...; 2-D tables on the
/// square grid), rank `r` starting from `inputs[r]`; returns every rank's
/// tile after the kernel, by rank. See the module docs.
///
/// Inputs are anything that views as `[f16]` (`Vec<f16>`, `&[f16]`,
/// arrays; an `ndarray` via `as_slice()`), all of one length, `n_elem`.
pub fn run_kernel_in_mock<'a, I: AsRef<[f16]>>(
    algorithm: impl Into<MockAlgorithm<'a>>,
    world_size: usize,
    topology: &str,
    inputs: &[I],
) -> Result<Vec<Vec<f16>>, MockError> {
    match algorithm.into() {
        MockAlgorithm::Name(name) => {
            let algorithm = registry::find(name)?;
            run(algorithm.as_ref(), world_size, topology, inputs)
        }
        MockAlgorithm::Algorithm(algorithm) => run(algorithm, world_size, topology, inputs),
    }
}

fn run<I: AsRef<[f16]>>(
    algorithm: &dyn CclAlgorithm,
    world_size: usize,
    topology: &str,
    inputs: &[I],
) -> Result<Vec<Vec<f16>>, MockError> {
    let n_elem = check_inputs(world_size, inputs)?;
    let builtin = Builtin::parse(topology)?;
    let ranks: Vec<PeCoord> = (0..world_size as u32)
        .map(|pe| PeCoord {
            sip: 0,
            cube: 0,
            pe,
        })
        .collect();
    let endpoints =
        Endpoints::over(ranks, builtin)?.with_neighbors(|e, n, map| algorithm.neighbors(e, n, map));

    let device = Device::new(&machine(world_size)?, DataMode::On)?;
    let network = install_endpoints(&device, &endpoints, BufferKind::Tcm, IpcqParams::default())?;

    let bytes = (n_elem * 2) as u64;
    let tiles = place_inputs(&device, inputs, bytes)?;
    let sip_arrangement = sip_arrangement_of(builtin, world_size);
    let tile = algorithm.kernel_args(world_size, n_elem, 1, 1);
    let params = Rc::new(Params::default());
    let root = Root::default();
    let call = CallArgs::new(algorithm.collective(), ReduceOp::Sum, root, Rc::from([]));
    let per_rank: Rc<[KernelArgs]> = tiles
        .iter()
        .enumerate()
        .map(|(rank, &addr)| KernelArgs {
            t_ptr: addr,
            tiles: Rc::from([addr]),
            tile,
            dtype: DType::F16,
            call: call.clone(),
            sip_rank: rank as u32,
            sip_arrangement,
            params: params.clone(),
            slot_bytes: IpcqParams::default().slot_bytes,
        })
        .collect();

    let kernel = per_rank_kernel(algorithm.kernel());
    let grid = Grid {
        pes: world_size as u32,
        cubes: 1,
    };
    let mut simulation = Simulation::new();
    let (d, n) = (device.clone(), network.clone());
    let host = simulation.spawn("mock host", async move {
        launch_with_ipcq(&d, &kernel, (0, grid), per_rank, &n).await
    });
    if let Err(source) = simulation.run() {
        let pointer_dump = pointer_dump(&network);
        return Err(MockError::Simulation {
            source,
            pointer_dump,
        });
    }
    host.output()??;

    tiles
        .iter()
        .map(|&addr| Ok(from_bytes(&device.read_untimed(addr, bytes)?)))
        .collect()
}

/// `n_elem`, once every rank has an input of that length.
fn check_inputs<I: AsRef<[f16]>>(world_size: usize, inputs: &[I]) -> Result<usize, MockError> {
    if world_size == 0 {
        return Err(MockError::EmptyWorld);
    }
    if inputs.len() != world_size {
        return Err(MockError::InputCount {
            world_size,
            inputs: inputs.len(),
        });
    }
    let expected = inputs[0].as_ref().len();
    if expected == 0 {
        return Err(MockError::EmptyTile);
    }
    for (rank, input) in inputs.iter().enumerate() {
        let len = input.as_ref().len();
        if len != expected {
            return Err(MockError::InputLength {
                rank,
                len,
                expected,
            });
        }
    }
    Ok(expected)
}

/// The default machine cut down to one SIP of one cube of `world_size` PEs.
fn machine(world_size: usize) -> Result<TopologySpec, MockError> {
    let error = |source| MockError::Machine { world_size, source };
    let sets = [
        "system.sips.count=1".to_owned(),
        "sip.cube_mesh.w=1".to_owned(),
        "sip.cube_mesh.h=1".to_owned(),
        format!("cube.pes={world_size}"),
    ];
    let overrides = sets
        .iter()
        .map(|s| Override::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(error)?;
    TopologySpec::load(&TopologySpec::default_source(), &overrides).map_err(error)
}

/// Each rank's input written to a fresh tile in cube 0's HBM.
fn place_inputs<I: AsRef<[f16]>>(
    device: &Device,
    inputs: &[I],
    bytes: u64,
) -> Result<Vec<u64>, DeviceError> {
    let hbm = MemSpace::Hbm { sip: 0, cube: 0 };
    inputs
        .iter()
        .map(|input| {
            let addr = device.alloc(hbm, bytes)?;
            let data: Vec<u8> = input
                .as_ref()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            device.write_untimed("host", addr, &data)?;
            Ok(addr)
        })
        .collect()
}

/// The SIP grid the kernels see for the mock's builtin table: the square
/// grid of a 2-D table (as a 2-D SIP grid would be), else a ring.
fn sip_arrangement_of(builtin: Builtin, world_size: usize) -> SipArrangement {
    let side = world_size.isqrt() as u32;
    match builtin {
        Builtin::Torus2d => SipArrangement::Torus { w: side, h: side },
        Builtin::Mesh2d => SipArrangement::Mesh { w: side, h: side },
        Builtin::None | Builtin::Ring1d | Builtin::Ring1dUnidir | Builtin::TreeBinary => {
            SipArrangement::Ring {
                n: world_size as u32,
            }
        }
    }
}

/// `inner` under its own name, each program (PE `r`) called with the
/// `r`-th arguments: one launch, per-rank [`KernelArgs`].
fn per_rank_kernel(inner: Kernel<KernelArgs, ()>) -> Kernel<Rc<[KernelArgs]>, ()> {
    let name = inner.name().to_owned();
    Kernel::new(&name, move |tl: Tl, per_rank: Rc<[KernelArgs]>| {
        let inner = inner.clone();
        async move {
            let rank = tl.program_id(0) as usize;
            let Some(args) = per_rank.get(rank).cloned() else {
                let ranks = per_rank.len();
                return Err(KernelError::failed(format!(
                    "no arguments for rank {rank} (the mock world has {ranks} ranks)"
                )));
            };
            inner.call(tl, args).await
        }
    })
}

fn from_bytes(bytes: &[u8]) -> Vec<f16> {
    bytes
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]))
        .collect()
}
