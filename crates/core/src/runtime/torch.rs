//! [`Torch`]: the facade host code holds, as PyTorch host code holds
//! `torch`.
//!
//! ```ignore
//! let torch = Torch::new(device);
//! torch.ahbm.set_device(rank);                 // or torch.accelerator.set_device_index(rank)
//! let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 4, 1);
//! let t = torch.zeros(&[1024, 64], DType::F16, &dp)?;
//! t.copy_from(&array).await?;                  // H2D, timed
//! let back = t.to_ndarray::<f16>().await?;     // D2H, timed
//! t.free()?;
//! ```
//!
//! Host code runs as a task of a [`Simulation`](crate::sim::Simulation);
//! everything that moves bytes is `async` and advances virtual time.
//! Creating a tensor is untimed bookkeeping (allocation).
//!
//! The SIP a tensor lands on is the caller's device: the one bound with
//! `torch.ahbm.set_device` / `torch.accelerator.set_device_index` (one shared
//! task-local registry, [`super::worker`]), or SIP 0 when none is bound
//! (single driver, seed ADR-0024 D4).
//!
//! The facade also owns the virtual address space tensors live in
//! ([`VirtualAllocator`], pages of [`TENSOR_PAGE_SIZE`]): each tensor is one
//! VA range over its shards (see [`Tensor`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ndarray::{ArrayBase, Data, Dimension};

use super::distributed::Distributed;
use super::job::JobSips;
use super::placement::{DPPolicy, MachineBounds, PlacementError};
use super::tensor::{Element, Tensor, TensorError};
use super::worker;
use crate::ccl::CclConfig;
use crate::device::Device;
use crate::mem::{DType, DataMode, Segment, VaError, VirtualAllocator};

/// Bytes per page of the tensors' virtual address space: 4 KiB, seed
/// ADR-0048's runtime page.
pub const TENSOR_PAGE_SIZE: u64 = 4 << 10;

/// `torch.ahbm`: binds the calling worker to a SIP.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ahbm;

impl Ahbm {
    /// Binds the calling worker (or the single driver) to SIP `device`.
    pub fn set_device(&self, device: usize) {
        worker::set_device(device);
    }

    /// The SIP the caller bound, if any.
    pub fn current_device(&self) -> Option<usize> {
        worker::current_device()
    }
}

/// `torch.accelerator`: the device-agnostic names of [`Ahbm`]'s calls, on
/// the same registry.
#[derive(Debug, Clone, Copy, Default)]
pub struct Accelerator;

impl Accelerator {
    /// Same as [`Ahbm::set_device`].
    pub fn set_device_index(&self, device: usize) {
        worker::set_device(device);
    }

    /// Same as [`Ahbm::current_device`].
    pub fn current_device_index(&self) -> Option<usize> {
        worker::current_device()
    }
}

/// The host-side handle on one simulated machine. Cheap to clone; clones
/// share the device and the address space.
#[derive(Clone)]
pub struct Torch {
    runtime: Rc<Runtime>,
    /// `torch.ahbm`.
    pub ahbm: Ahbm,
    /// `torch.accelerator`.
    pub accelerator: Accelerator,
    /// `torch.distributed`: the `ahbm` process group, shared by all clones.
    pub distributed: Distributed,
}

/// What tensors share: the device, the VA space and the job they serve.
pub(super) struct Runtime {
    pub(super) device: Rc<Device>,
    pub(super) va: RefCell<VirtualAllocator>,
    next_id: Cell<u64>,
    job: Job,
}

/// The job a facade serves (ADR-0116): the machine's world, or one job of
/// `run --jobs` with its name, its SIPs and whether its workload marks the
/// interval `--explain` explains.
#[derive(Debug, Clone)]
struct Job {
    name: Option<Rc<str>>,
    sips: JobSips,
    marks: bool,
}

impl Job {
    /// The machine's world, whose workload marks the interval.
    fn machine() -> Job {
        Job {
            name: None,
            sips: JobSips::machine(),
            marks: true,
        }
    }
}

impl Runtime {
    /// The trace track of the calling rank's host copies: `host.rank{r}`,
    /// or `{job}.host.rank{r}` in a job, so each job has tracks of its own.
    pub(super) fn host_track(&self, rank: usize) -> String {
        match &self.job.name {
            Some(job) => format!("{job}.host.rank{rank}"),
            None => format!("host.rank{rank}"),
        }
    }

    /// A fresh default tensor name: `tensor0`, `tensor1`, ...
    pub(super) fn next_name(&self) -> String {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        format!("tensor{id}")
    }

    /// The counts placements are checked against.
    pub(super) fn bounds(&self) -> MachineBounds {
        MachineBounds::from(&**self.device.fabric().machine())
    }
}

impl Torch {
    /// A facade over `device`; `torch.distributed` reads the embedded
    /// ccl.yaml.
    pub fn new(device: Rc<Device>) -> Torch {
        Torch::build(device, None, Job::machine())
    }

    /// A facade over `device` whose `torch.distributed` reads `ccl`.
    pub fn with_ccl(device: Rc<Device>, ccl: CclConfig) -> Torch {
        Torch::build(device, Some(ccl), Job::machine())
    }

    /// A facade for the job `name` of `run --jobs` on `device`, its rank
    /// `r` on `sips[r]` (ADR-0116); `marks` says whether its workload
    /// marks the interval `--explain` explains (one job's per run).
    pub fn for_job(
        device: Rc<Device>,
        ccl: Option<CclConfig>,
        name: &str,
        sips: &[u32],
        marks: bool,
    ) -> Torch {
        let job = Job {
            name: Some(Rc::from(name)),
            sips: JobSips::job(sips),
            marks,
        };
        Torch::build(device, ccl, job)
    }

    fn build(device: Rc<Device>, ccl: Option<CclConfig>, job: Job) -> Torch {
        let distributed = Distributed::new(device.clone(), ccl, job.sips.clone());
        let map = device.fabric().machine().address_map().clone();
        let va = VirtualAllocator::with_page_size(map, TENSOR_PAGE_SIZE)
            .expect("TENSOR_PAGE_SIZE is a power of two");
        Torch {
            runtime: Rc::new(Runtime {
                device,
                va: RefCell::new(va),
                next_id: Cell::new(0),
                job,
            }),
            ahbm: Ahbm,
            accelerator: Accelerator,
            distributed,
        }
    }

    /// The simulated machine.
    pub fn device(&self) -> &Rc<Device> {
        &self.runtime.device
    }

    /// Whether bytes are kept (data verification) or only timed.
    pub fn data_mode(&self) -> DataMode {
        self.runtime.device.data_mode()
    }

    /// The SIP new tensors go to: the caller's bound device, else 0 (in
    /// a job, device `d` is the job's `d`-th SIP).
    pub fn target_sip(&self) -> Result<u32, PlacementError> {
        let device = self.ahbm.current_device().unwrap_or(0);
        let machine = self.runtime.bounds().sips;
        let sips = &self.runtime.job.sips;
        let count = sips.listed().map_or(machine, |listed| listed.len() as u32);
        sips.sip_of(device)
            .filter(|&sip| sip < machine)
            .ok_or(PlacementError::NoSuchSip {
                sip: u32::try_from(device).unwrap_or(u32::MAX),
                sips: count,
            })
    }

    /// The SIPs of the job this facade serves, in rank order; `None` for
    /// the machine's world (rank = SIP).
    pub fn job_sips(&self) -> Option<&[u32]> {
        self.runtime.job.sips.listed()
    }

    /// The SIPs of this facade's world: the job's, or the machine's.
    pub fn world_sips(&self) -> usize {
        let machine = self.runtime.bounds().sips as usize;
        self.job_sips().map_or(machine, <[u32]>::len)
    }

    /// The SIP rank `rank` of this facade's world runs on (`rank` itself
    /// past a job's ranks: there is none).
    pub fn sip_of_rank(&self, rank: usize) -> u32 {
        let sip = self.runtime.job.sips.sip_of(rank);
        sip.unwrap_or_else(|| u32::try_from(rank).unwrap_or(u32::MAX))
    }

    /// The job's name under `run --jobs`; `None` for the machine's world.
    pub fn job_name(&self) -> Option<&str> {
        self.runtime.job.name.as_deref()
    }

    /// Whether this facade's workload marks the interval `--explain`
    /// explains: when explain records, and (under `run --jobs`) it is the
    /// explained job.
    pub fn marks_interval(&self) -> bool {
        self.runtime.job.marks && crate::hw::explain::recording()
    }

    /// A tensor of zeros placed by `dp` on the caller's SIP (untimed:
    /// fresh device memory reads as zeros).
    pub fn zeros(
        &self,
        shape: &[usize],
        dtype: DType,
        dp: &DPPolicy,
    ) -> Result<Tensor, TensorError> {
        self.empty(shape, dtype, dp)
    }

    /// A tensor placed by `dp` on the caller's SIP whose contents are not
    /// to be relied on (untimed).
    pub fn empty(
        &self,
        shape: &[usize],
        dtype: DType,
        dp: &DPPolicy,
    ) -> Result<Tensor, TensorError> {
        let sip = self.target_sip()?;
        Tensor::allocate(self.runtime.clone(), shape, dtype, *dp, sip)
    }

    /// A tensor placed by `dp` holding `array` (allocation, then a timed
    /// H2D copy; see [`Tensor::copy_from`]).
    pub async fn from_ndarray<T, S, D>(
        &self,
        array: &ArrayBase<S, D>,
        dp: &DPPolicy,
    ) -> Result<Tensor, TensorError>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        let tensor = self.empty(array.shape(), T::DTYPE, dp)?;
        tensor.copy_from(array).await?;
        Ok(tensor)
    }

    /// The device address of the byte at virtual address `va`.
    pub fn translate(&self, va: u64) -> Result<u64, VaError> {
        self.runtime.va.borrow().translate(va)
    }

    /// The device-contiguous pieces of `[va, va + len)`.
    pub fn segments(&self, va: u64, len: u64) -> Result<Vec<Segment>, VaError> {
        self.runtime.va.borrow().segments(va, len)
    }
}
