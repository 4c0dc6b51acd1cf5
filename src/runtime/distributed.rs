//! `torch.distributed` on the AHBM machine: the `ahbm` process group (seed
//! ADR-0047 D1–D8, ADR-0024 D1–D5).
//!
//! [`Distributed`] hangs off the facade as `torch.distributed`; every clone
//! of a [`Torch`](super::Torch), so every rank worker, shares one. It starts
//! empty: [`init_process_group("ahbm")`](Distributed::init_process_group)
//! creates the backend in four all-or-nothing steps — take the ccl.yaml the
//! runtime was given (or the embedded one), resolve the algorithm from the
//! registry, resolve the world size (algorithm entry > defaults > the
//! topology's SIP count) and install the IPCQ network (`ccl::install`) —
//! and only then stores it, so a failed init leaves nothing behind. Every
//! other call before that is [`DistError::NotInitialized`].
//!
//! `all_reduce(&t, ReduceOp::Sum).await` (rank = SIP): the calling worker's
//! rank (task-local, [`super::worker`]) picks its SIP; the tensor's cube
//! tiles, `kernel_args(world_size, n_elem, cube_w, cube_h)` and `(sip_rank,
//! sip_topo_kind, sip_topo_w, sip_topo_h)` become the kernel's
//! [`KernelArgs`]; the algorithm's kernel is launched on the SIP's grid with
//! the network attached and awaited. Ranks meet inside the kernels, through
//! IPCQ.
//!
//! `barrier()` is a real rendezvous of the world's rank tasks in virtual
//! time (ADR-0008); outside a worker it returns at once. The other
//! `torch.distributed` calls (broadcast, reduce, all_gather, ...) return
//! [`DistError::Unsupported`] (ADR-0047 D8).
//!
//! The top of the library's collective path: uses `ccl`, `tl`, `device` and
//! the launcher; nothing below knows it.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use super::launch::{LaunchError, launch_with_ipcq};
use super::tensor::{Tensor, TensorError};
use super::worker;
use crate::ccl::cost::{CostError, Network};
use crate::ccl::install::install;
use crate::ccl::registry::{self, UnknownAlgorithm};
use crate::ccl::topology::TopologyError;
use crate::ccl::topology::{Builtin, Wiring};
use crate::ccl::{
    BufferKind, CclAlgorithm, CclConfig, Endpoints, KernelArgs, WorldShape, wired_endpoints,
};
use crate::config::ConfigError;
use crate::config::units::Count;
use crate::device::Device;
use crate::sim::{Barrier, SimDuration};
use crate::tl::{IpcqNetwork, IpcqParams, PeCoord};
use crate::topology::Machine;

/// The only backend this machine has.
pub const BACKEND: &str = "ahbm";

/// The `torch.distributed` calls the `ahbm` backend implements (ADR-0047 D8).
pub const SUPPORTED: &str = "init_process_group, is_initialized, get_rank, get_world_size, \
                             get_backend, all_reduce (sum), barrier";

/// A reduction operator (`torch.distributed.ReduceOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReduceOp {
    /// Elementwise sum: the only one the kernels implement.
    Sum,
    /// Elementwise product.
    Product,
    /// Elementwise minimum.
    Min,
    /// Elementwise maximum.
    Max,
    /// Elementwise mean.
    Avg,
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
            ReduceOp::Avg => "AVG",
        };
        write!(f, "ReduceOp.{name}")
    }
}

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
    #[error("ccl.yaml has no algorithm `{0}`")]
    NoSuchEntry(String),
    /// ccl.yaml names a module with no file in `algorithms/`.
    #[error(transparent)]
    Algorithm(#[from] UnknownAlgorithm),
    /// The algorithm has no branch for the machine's SIP topology.
    #[error(
        "algorithm `{algorithm}` does not support SIP topology {topology} (supports: {supported})"
    )]
    UnsupportedTopology {
        /// The algorithm entry.
        algorithm: String,
        /// `system.sips.topology`.
        topology: &'static str,
        /// The names it maps.
        supported: String,
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
    /// A reduce op the kernels do not implement.
    #[error("all_reduce: {0} is not implemented by the ahbm backend (only ReduceOp.SUM)")]
    UnsupportedOp(ReduceOp),
    /// The tensor has no deployment (it was freed).
    #[error("all_reduce: tensor `{0}` is not deployed")]
    NotDeployed(String),
    /// The tensor has no shards.
    #[error("all_reduce: tensor `{0}` has no shards")]
    NoShards(String),
    /// The tensor's tiles do not match the algorithm's grid.
    #[error(
        "all_reduce: tensor `{tensor}` has {tiles} tile(s) on SIP {sip}, but `{algorithm}` runs on \
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
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// The collective's kernel failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The algorithm's cost model could not be evaluated.
    #[error(transparent)]
    Cost(#[from] CostError),
    /// A `torch.distributed` call the backend does not implement.
    #[error("torch.distributed.{0} is not supported by the ahbm backend (supported: {SUPPORTED})")]
    Unsupported(&'static str),
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
    backend: RefCell<Option<Rc<Backend>>>,
}

/// The installed process group.
struct Backend {
    entry: String,
    n_elem: usize,
    algorithm: Box<dyn CclAlgorithm>,
    world_size: usize,
    shape: WorldShape,
    sip_topo_kind: u32,
    network: Rc<IpcqNetwork>,
    /// Where each IPCQ endpoint runs (for the cost model).
    coords: Vec<PeCoord>,
    barrier: Barrier,
}

impl Distributed {
    /// The process group of `device`, reading `ccl` at init (the embedded
    /// ccl.yaml when `None`).
    pub fn new(device: Rc<Device>, ccl: Option<CclConfig>) -> Distributed {
        let inner = Inner {
            device,
            ccl,
            backend: RefCell::new(None),
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

    /// Like [`init_process_group`](Self::init_process_group), running the
    /// ccl.yaml entry `algorithm`.
    pub fn init_process_group_with(&self, backend: &str, algorithm: &str) -> Result<(), DistError> {
        self.init(backend, Some(algorithm))
    }

    fn init(&self, backend: &str, algorithm: Option<&str>) -> Result<(), DistError> {
        if backend != BACKEND {
            return Err(DistError::UnsupportedBackend(backend.to_owned()));
        }
        if self.is_initialized() {
            tracing::debug!("init_process_group: already initialized");
            return Ok(());
        }
        let loaded;
        let ccl = match &self.inner.ccl {
            Some(ccl) => ccl,
            None => {
                loaded = CclConfig::load(&CclConfig::default_source(), &[])?;
                &loaded
            }
        };
        let built = Backend::build(&self.inner.device, ccl, algorithm)?;
        *self.inner.backend.borrow_mut() = Some(Rc::new(built));
        Ok(())
    }

    /// Whether `init_process_group` has run.
    pub fn is_initialized(&self) -> bool {
        self.inner.backend.borrow().is_some()
    }

    fn backend(&self, call: &'static str) -> Result<Rc<Backend>, DistError> {
        let backend = self.inner.backend.borrow();
        backend.clone().ok_or(DistError::NotInitialized { call })
    }

    /// The calling worker's rank (0 outside any worker).
    pub fn get_rank(&self) -> Result<usize, DistError> {
        self.backend("get_rank")?;
        Ok(worker::get_rank())
    }

    /// The resolved world size.
    pub fn get_world_size(&self) -> Result<usize, DistError> {
        Ok(self.backend("get_world_size")?.world_size)
    }

    /// Always `"ahbm"`.
    pub fn get_backend(&self) -> Result<&'static str, DistError> {
        self.backend("get_backend")?;
        Ok(BACKEND)
    }

    /// The ccl.yaml entry the process group runs.
    pub fn algorithm(&self) -> Result<String, DistError> {
        Ok(self.backend("algorithm")?.entry.clone())
    }

    /// ccl.yaml's `n_elem` (elements per tile) for that algorithm.
    pub fn n_elem(&self) -> Result<usize, DistError> {
        Ok(self.backend("n_elem")?.n_elem)
    }

    /// The installed IPCQ network (e.g. for `tl::pointer_dump`).
    pub fn network(&self) -> Result<Rc<IpcqNetwork>, DistError> {
        Ok(self.backend("network")?.network.clone())
    }

    /// Reduces `tensor` across the ranks in place (see the module docs).
    pub async fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<(), DistError> {
        let backend = self.backend("all_reduce")?;
        if op != ReduceOp::Sum {
            return Err(DistError::UnsupportedOp(op));
        }
        let rank = worker::get_rank();
        let args = backend.kernel_args(tensor, rank as u32)?;
        let kernel = backend.algorithm.kernel();
        let grid = backend
            .algorithm
            .grid(backend.shape.cube_w, backend.shape.cube_h);
        let device = &self.inner.device;
        launch_with_ipcq(
            device,
            &kernel,
            (args.sip_rank, grid),
            args,
            &backend.network,
        )
        .await?;
        Ok(())
    }

    /// The algorithm's α-β cost model of `all_reduce(tensor)` on this
    /// machine ([`CclAlgorithm::model`]), `None` when it states none.
    pub fn all_reduce_model(&self, tensor: &Tensor) -> Result<Option<SimDuration>, DistError> {
        let backend = self.backend("all_reduce_model")?;
        let args = backend.kernel_args(tensor, worker::get_rank() as u32)?;
        let net = Network::new(self.inner.device.fabric(), &backend.coords);
        Ok(backend.algorithm.model(&args, &net)?)
    }

    /// Waits until every rank of the world has called `barrier` (in virtual
    /// time, at no modelled cost; ADR-0008). Outside a worker: returns.
    pub async fn barrier(&self) -> Result<(), DistError> {
        let backend = self.backend("barrier")?;
        if !worker::in_worker() {
            tracing::debug!("barrier() outside a rank worker: nothing to wait for");
            return Ok(());
        }
        backend.barrier.wait().await;
        Ok(())
    }

    /// `broadcast`: not supported (ADR-0047 D8).
    pub fn broadcast(&self, _tensor: &Tensor, _src: usize) -> Result<(), DistError> {
        Err(DistError::Unsupported("broadcast"))
    }

    /// `reduce`: not supported.
    pub fn reduce(&self, _tensor: &Tensor, _dst: usize, _op: ReduceOp) -> Result<(), DistError> {
        Err(DistError::Unsupported("reduce"))
    }

    /// `all_gather`: not supported.
    pub fn all_gather(&self, _outputs: &[Tensor], _input: &Tensor) -> Result<(), DistError> {
        Err(DistError::Unsupported("all_gather"))
    }

    /// `reduce_scatter`: not supported.
    pub fn reduce_scatter(&self, _output: &Tensor, _inputs: &[Tensor]) -> Result<(), DistError> {
        Err(DistError::Unsupported("reduce_scatter"))
    }

    /// `gather`: not supported.
    pub fn gather(&self, _tensor: &Tensor, _dst: usize) -> Result<(), DistError> {
        Err(DistError::Unsupported("gather"))
    }

    /// `scatter`: not supported.
    pub fn scatter(&self, _tensor: &Tensor, _src: usize) -> Result<(), DistError> {
        Err(DistError::Unsupported("scatter"))
    }

    /// Point-to-point `send`: not supported (kernels use `tl.send`).
    pub fn send(&self, _tensor: &Tensor, _dst: usize) -> Result<(), DistError> {
        Err(DistError::Unsupported("send"))
    }

    /// Point-to-point `recv`: not supported (kernels use `tl.recv`).
    pub fn recv(&self, _tensor: &Tensor, _src: usize) -> Result<(), DistError> {
        Err(DistError::Unsupported("recv"))
    }
}

impl Backend {
    /// ADR-0047 D3's four steps; nothing is kept unless all succeed.
    fn build(device: &Device, ccl: &CclConfig, entry: Option<&str>) -> Result<Backend, DistError> {
        let entry = entry.unwrap_or(&ccl.defaults().algorithm);
        let config = ccl
            .algorithm(entry)
            .ok_or_else(|| DistError::NoSuchEntry(entry.to_owned()))?;
        let algorithm = registry::find(config.module)?;
        let machine = device.fabric().machine();
        let world_size = world_size(machine, config.world_size_or(sip_count(machine)))?;
        let shape = world_shape(machine, world_size, config.topology);
        let sip_topo_kind = topo_kind(entry, algorithm.as_ref(), &shape)?;
        let endpoints = wired_endpoints(algorithm.as_ref(), &shape, machine.spec())?;
        let network = install_network(device, &endpoints, config.buffer_kind, config.ipcq)?;
        tracing::debug!(target: "kernbench::ccl", "process group: {entry}, world_size {world_size}");
        Ok(Backend {
            entry: entry.to_owned(),
            n_elem: config.n_elem.get() as usize,
            algorithm,
            world_size,
            shape,
            sip_topo_kind,
            network,
            coords: endpoints.coords,
            barrier: Barrier::new("dist.barrier", world_size),
        })
    }

    /// The kernel arguments of `rank`'s all_reduce of `tensor`.
    fn kernel_args(&self, tensor: &Tensor, rank: u32) -> Result<KernelArgs, DistError> {
        let name = || tensor.name().to_owned();
        if !tensor.is_deployed() {
            return Err(DistError::NotDeployed(name()));
        }
        let shards = tensor.shards()?;
        let first = shards.first().ok_or_else(|| DistError::NoShards(name()))?;
        let n_elem = (first.bytes / tensor.dtype().size()) as usize;
        let tiles: Rc<[u64]> = shards
            .iter()
            .filter(|s| s.spec.sip == rank)
            .map(|s| s.addr)
            .collect();
        let cubes = self.shape.cube_w * self.shape.cube_h;
        if tiles.len() != cubes as usize {
            return Err(DistError::TileMismatch {
                tensor: name(),
                sip: rank,
                tiles: tiles.len(),
                algorithm: self.entry.clone(),
                cubes,
            });
        }
        let (w, h) = self.shape.sip_grid.unwrap_or((0, 0));
        let tile = self.algorithm.kernel_args(
            self.world_size,
            n_elem,
            self.shape.cube_w,
            self.shape.cube_h,
        );
        Ok(KernelArgs {
            t_ptr: tensor.data_ptr()?,
            tiles,
            tile,
            sip_rank: rank,
            sip_topo_kind: self.sip_topo_kind,
            sip_topo_w: w,
            sip_topo_h: h,
        })
    }
}

fn sip_count(machine: &Machine) -> Count {
    machine.spec().system.sips.count()
}

/// Checks the world fits the machine (rank = SIP).
fn world_size(machine: &Machine, resolved: Count) -> Result<usize, DistError> {
    let (world_size, sips) = (resolved.get() as usize, machine.sip_count());
    if world_size > sips as usize {
        return Err(DistError::WorldTooLarge { world_size, sips });
    }
    Ok(world_size)
}

/// The world's shape: `world_size` SIPs of the machine's cube mesh.
fn world_shape(machine: &Machine, world_size: usize, builtin: Builtin) -> WorldShape {
    let spec = machine.spec();
    let mesh = spec.sip.cube_mesh;
    let sips = spec.system.sips;
    WorldShape {
        n_sips: world_size as u32,
        cube_w: mesh.w.get(),
        cube_h: mesh.h.get(),
        sip_topology: sips.topology(),
        sip_grid: sips.grid().map(|g| (g.w.get(), g.h.get())),
        builtin,
    }
}

/// The algorithm's kind for the machine's SIP topology (ADR-0050 D1/D5).
fn topo_kind(
    entry: &str,
    algorithm: &dyn CclAlgorithm,
    shape: &WorldShape,
) -> Result<u32, DistError> {
    let map = algorithm.topo_name_to_kind();
    if map.is_empty() {
        return Ok(0);
    }
    let name = shape.sip_topology.name();
    map.iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, kind)| kind)
        .ok_or_else(|| DistError::UnsupportedTopology {
            algorithm: entry.to_owned(),
            topology: name,
            supported: map.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        })
}

/// Installs the IPCQ rings of `endpoints` with slots in `buffer_kind`.
fn install_network(
    device: &Device,
    endpoints: &Endpoints,
    buffer_kind: BufferKind,
    params: IpcqParams,
) -> Result<Rc<IpcqNetwork>, DistError> {
    let wiring = Wiring::install(&endpoints.tables)?;
    install(device, &wiring, &endpoints.coords, buffer_kind, params)
        .map_err(|e| DistError::Install(e.to_string()))
}
