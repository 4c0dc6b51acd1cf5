//! [`Tensor`]: a host handle on an array that lives in device HBM, split
//! into shards by a [`DPPolicy`].
//!
//! **Memory.** Each shard is one allocation in its cube's HBM
//! ([`Device::alloc`]), holding its block of the tensor's 2-D view
//! row-major. The shards together are one range of the facade's virtual
//! address space (4 KiB pages): shard `i` starts at
//! `data_ptr() + Σ_{j<i} pages(j)`, so when every shard is a whole number of
//! pages (say 2 KiB × 2 f16 rows) shard `i` of equal shards is at
//! `data_ptr() + i × shard_bytes`, the seeds' `t_ptr + cube × nbytes`. A VA
//! page must be backed by a page-aligned physical page, so each shard is
//! allocated page-aligned ([`Device::alloc_aligned`]). [`Shard::addr`] is the device address kernels' DMAs use;
//! [`Torch::translate`](super::Torch::translate) maps any VA of the tensor.
//!
//! **H2D** ([`Tensor::copy_from`]): per shard, in shard order (one in-order
//! host copy stream), the host packs the shard's block into a staging
//! buffer in host memory (untimed: host CPU work on its own DRAM), then the
//! shard's cube's M_CPU.DMA copies it with [`Device::dma_copy`], initiated
//! by the host as a posted write (no request trip), the same convention as
//! `kernbench probe`:
//!
//! ```text
//! M_CPU.DMA issue  ─►  host ─PCIe─► PCIe EP (IO cube) ─NoC/UCIe─► HBM ctrl ─► HBM PCs
//! ```
//!
//! so a shard of `b` bytes costs exactly
//! `dma_copy_formula(mcpu.dma.issue_overhead, host, staging, addr, b)`
//! (issue + packetised data path + HBM stage) when nothing else runs, and a
//! tensor the sum over its shards. Replicas are each written.
//!
//! **D2H** ([`Tensor::to_ndarray`]): per primary shard, the host requests a
//! read (a header crossing PCIe to the HBM), the cube's M_CPU.DMA moves the
//! bytes HBM → PCIe → host staging, and the host unpacks them (untimed).
//! With data off the copies are timed the same and no values come back.
//!
//! Knows placement, the device and the VA space; nothing of kernels.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use half::{bf16, f16};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use tracing::Instrument;

use super::placement::{DPPolicy, PlacementError, ShardSpec};
use super::torch::{Runtime, TENSOR_PAGE_SIZE};
use super::worker;
use crate::device::{CopyJob, Device, DeviceError};
use crate::hw::Mcpu;
use crate::mem::{DType, DataMode, Extent, VaError};
use crate::topology::{MemSpace, NodeId, naming};

/// A Rust element type a tensor can hold: `f32`, `half::f16`, `half::bf16`.
pub trait Element: Copy + 'static {
    /// The tensor dtype of this type.
    const DTYPE: DType;
    /// Appends the little-endian bytes of `self`.
    fn put_le(self, out: &mut Vec<u8>);
    /// The value of `DTYPE.size()` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $dtype:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("an element-sized chunk"))
            }
        }
    };
}

element!(f32, DType::F32);
element!(f16, DType::F16);
element!(bf16, DType::BF16);

/// What a tensor operation could not do; every variant names the tensor.
#[derive(Debug, thiserror::Error)]
pub enum TensorError {
    /// The placement cannot be made on this machine.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// The array's shape is not the tensor's.
    #[error("tensor {name} has shape {tensor:?} but the array has shape {array:?}")]
    ShapeMismatch {
        /// The tensor.
        name: String,
        /// Its shape.
        tensor: Vec<usize>,
        /// The array's shape.
        array: Vec<usize>,
    },
    /// The array's element type is not the tensor's dtype.
    #[error("tensor {name} holds {} but the array holds {}", .tensor.name(), .array.name())]
    DTypeMismatch {
        /// The tensor.
        name: String,
        /// Its dtype.
        tensor: DType,
        /// The array's element dtype.
        array: DType,
    },
    /// The tensor was freed: it has no shards.
    #[error("tensor {name} is not deployed: it was freed and has no shards")]
    NotDeployed {
        /// The tensor.
        name: String,
    },
    /// Allocating, copying or freeing on the device failed.
    #[error("tensor {name}: {source}")]
    Device {
        /// The tensor.
        name: String,
        /// What the device refused.
        source: DeviceError,
    },
    /// The virtual address space refused the tensor's range.
    #[error("tensor {name}: {source}")]
    Va {
        /// The tensor.
        name: String,
        /// What the VA space refused.
        source: VaError,
    },
}

/// One deployed shard: its placement and where its bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Where it lives and which block it holds.
    pub spec: ShardSpec,
    /// Device address of its first byte (in the cube's HBM, page-aligned).
    pub addr: u64,
    /// Virtual address of its first byte.
    pub va: u64,
    /// Bytes of data (`rows × cols × dtype size`).
    pub bytes: u64,
}

/// The shards of a live tensor and its VA range.
struct Deployment {
    va: u64,
    shards: Vec<Shard>,
}

/// A tensor on the device; see the module docs. Not freed on drop: call
/// [`free`](Self::free).
pub struct Tensor {
    runtime: Rc<Runtime>,
    name: String,
    shape: Vec<usize>,
    dtype: DType,
    policy: DPPolicy,
    deployment: RefCell<Option<Deployment>>,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("name", &self.name)
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("policy", &self.policy)
            .field("deployed", &self.is_deployed())
            .finish()
    }
}

/// `(rows, cols)` of the 2-D view of `shape`: the last dimension is the
/// columns, the others multiply into rows.
pub fn view_2d(shape: &[usize]) -> (usize, usize) {
    match shape.split_last() {
        Some((&cols, rest)) => (rest.iter().product(), cols),
        None => (1, 1),
    }
}

impl Tensor {
    /// Places a tensor on `sip` and allocates its shards (untimed).
    pub(super) fn allocate(
        runtime: Rc<Runtime>,
        shape: &[usize],
        dtype: DType,
        policy: DPPolicy,
        sip: u32,
    ) -> Result<Tensor, TensorError> {
        let (rows, cols) = view_2d(shape);
        let specs = policy.resolve(rows, cols, sip, runtime.bounds())?;
        let name = runtime.next_name();
        let deployment = deploy(&runtime, &specs, dtype).map_err(|e| e.named(&name))?;
        Ok(Tensor {
            runtime,
            name,
            shape: shape.to_vec(),
            dtype,
            policy,
            deployment: RefCell::new(Some(deployment)),
        })
    }

    /// The same tensor under another name (errors and traces show it).
    pub fn named(mut self, name: &str) -> Tensor {
        name.clone_into(&mut self.name);
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Its element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// How it is placed.
    pub fn policy(&self) -> &DPPolicy {
        &self.policy
    }

    /// Elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it still has its shards (it was not freed).
    pub fn is_deployed(&self) -> bool {
        self.deployment.borrow().is_some()
    }

    /// Its shards, cube-major then by PE.
    pub fn shards(&self) -> Result<Vec<Shard>, TensorError> {
        self.with_deployment(|d| d.shards.clone())
    }

    /// The virtual address of its first byte (`t_ptr`).
    pub fn data_ptr(&self) -> Result<u64, TensorError> {
        self.with_deployment(|d| d.va)
    }

    fn with_deployment<R>(&self, f: impl FnOnce(&Deployment) -> R) -> Result<R, TensorError> {
        let deployment = self.deployment.borrow();
        deployment
            .as_ref()
            .map(f)
            .ok_or_else(|| TensorError::NotDeployed {
                name: self.name.clone(),
            })
    }

    /// Frees its shards and its VA range; later use is a
    /// [`TensorError::NotDeployed`].
    pub fn free(&self) -> Result<(), TensorError> {
        let deployment = self.deployment.borrow_mut().take();
        let deployment = deployment.ok_or_else(|| TensorError::NotDeployed {
            name: self.name.clone(),
        })?;
        undeploy(&self.runtime, &deployment).map_err(|e| e.named(&self.name))
    }

    /// Copies `array` into the tensor (H2D, timed; see the module docs).
    pub async fn copy_from<T, S, D>(&self, array: &ArrayBase<S, D>) -> Result<(), TensorError>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        self.check_dtype(T::DTYPE)?;
        if array.shape() != self.shape.as_slice() {
            return Err(TensorError::ShapeMismatch {
                name: self.name.clone(),
                tensor: self.shape.clone(),
                array: array.shape().to_vec(),
            });
        }
        let shards = self.shards()?;
        let mut bytes = Vec::with_capacity(self.numel() * self.element_size());
        array.iter().for_each(|&x| x.put_le(&mut bytes));
        let span = self.span("h2d", &shards);
        self.upload(&shards, &bytes).instrument(span).await
    }

    /// The H2D copy [`copy_from`](Self::copy_from) makes, timed the same,
    /// with no values: what a timing-only run (device data off) does
    /// instead of building a host array of the tensor's size. With data on
    /// the tensor ends zero-filled.
    pub async fn copy_timing_only(&self) -> Result<(), TensorError> {
        let shards = self.shards()?;
        let span = self.span("h2d", &shards);
        async {
            for shard in &shards {
                h2d(&self.runtime.device, shard, None)
                    .await
                    .map_err(|source| self.device_error(source))?;
            }
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Reads the tensor back (D2H, timed; see the module docs). `None` when
    /// the device keeps no data (a timing-only run).
    pub async fn to_ndarray<T: Element>(&self) -> Result<Option<ArrayD<T>>, TensorError> {
        self.check_dtype(T::DTYPE)?;
        let shards = self.shards()?;
        let primaries: Vec<Shard> = shards.into_iter().filter(|s| s.spec.is_primary()).collect();
        let span = self.span("d2h", &primaries);
        let bytes = self.download(&primaries).instrument(span).await?;
        Ok(bytes.map(|bytes| {
            let values = bytes
                .chunks_exact(self.element_size())
                .map(T::from_le)
                .collect();
            ArrayD::from_shape_vec(IxDyn(&self.shape), values)
                .expect("the shards cover every element of the shape")
        }))
    }

    fn check_dtype(&self, array: DType) -> Result<(), TensorError> {
        if array == self.dtype {
            return Ok(());
        }
        Err(TensorError::DTypeMismatch {
            name: self.name.clone(),
            tensor: self.dtype,
            array,
        })
    }

    fn element_size(&self) -> usize {
        self.dtype.size() as usize
    }

    fn span(&self, what: &'static str, shards: &[Shard]) -> tracing::Span {
        let bytes: u64 = shards.iter().map(|s| s.bytes).sum();
        let component = self.runtime.host_track(worker::get_rank());
        tracing::info_span!(target: "kernbench::runtime::tensor", "copy", component, direction = what, tensor = %self.name, bytes)
    }

    /// H2D of every shard from `bytes`, the whole tensor row-major.
    async fn upload(&self, shards: &[Shard], bytes: &[u8]) -> Result<(), TensorError> {
        let cols = view_2d(&self.shape).1;
        for shard in shards {
            let block = pack(bytes, cols, shard.spec, self.element_size());
            h2d(&self.runtime.device, shard, Some(&block))
                .await
                .map_err(|source| self.device_error(source))?;
        }
        Ok(())
    }

    /// D2H of `shards` (the primaries) into the whole tensor row-major, or
    /// `None` with data off.
    async fn download(&self, shards: &[Shard]) -> Result<Option<Vec<u8>>, TensorError> {
        let device = &self.runtime.device;
        let keep = device.data_mode() == DataMode::On;
        let mut out = vec![
            0u8;
            if keep {
                self.numel() * self.element_size()
            } else {
                0
            }
        ];
        let cols = view_2d(&self.shape).1;
        for shard in shards {
            let block = d2h(device, shard)
                .await
                .map_err(|source| self.device_error(source))?;
            if let Some(block) = block {
                unpack(&mut out, cols, shard.spec, self.element_size(), &block);
            }
        }
        Ok(keep.then_some(out))
    }

    fn device_error(&self, source: DeviceError) -> TensorError {
        TensorError::Device {
            name: self.name.clone(),
            source,
        }
    }
}

/// A deployment error before the tensor's name is attached.
enum Unnamed {
    Device(DeviceError),
    Va(VaError),
}

impl Unnamed {
    fn named(self, name: &str) -> TensorError {
        let name = name.to_owned();
        match self {
            Unnamed::Device(source) => TensorError::Device { name, source },
            Unnamed::Va(source) => TensorError::Va { name, source },
        }
    }
}

impl From<DeviceError> for Unnamed {
    fn from(error: DeviceError) -> Self {
        Unnamed::Device(error)
    }
}

/// `bytes` rounded up to whole tensor pages (at least one).
fn pages(bytes: u64) -> u64 {
    bytes.div_ceil(TENSOR_PAGE_SIZE).max(1) * TENSOR_PAGE_SIZE
}

/// Allocates every shard page-aligned in its HBM and maps one VA range over
/// them; on failure frees what it allocated.
fn deploy(runtime: &Runtime, specs: &[ShardSpec], dtype: DType) -> Result<Deployment, Unnamed> {
    let mut shards = Vec::with_capacity(specs.len());
    let mut extents = Vec::with_capacity(specs.len());
    for spec in specs {
        match allocate_shard(&runtime.device, *spec, dtype) {
            Ok((shard, extent)) => {
                shards.push(shard);
                extents.push(extent);
            }
            Err(error) => return Err(release(runtime, &shards, error.into())),
        }
    }
    let va = match runtime.va.borrow_mut().map(extents) {
        Ok(va) => va,
        Err(error) => return Err(release(runtime, &shards, Unnamed::Va(error))),
    };
    let mut next = va;
    for shard in &mut shards {
        shard.va = next;
        next += pages(shard.bytes);
    }
    Ok(Deployment { va, shards })
}

/// Frees `shards` after a failed deployment; returns `error`.
fn release(runtime: &Runtime, shards: &[Shard], error: Unnamed) -> Unnamed {
    for shard in shards {
        // The deployment already failed; a second failure would hide the first.
        let _ = runtime.device.free(shard.addr);
    }
    error
}

/// One shard's HBM allocation and the page-aligned extent it backs.
fn allocate_shard(
    device: &Device,
    spec: ShardSpec,
    dtype: DType,
) -> Result<(Shard, Extent), DeviceError> {
    let bytes = (spec.rows * spec.cols) as u64 * dtype.size();
    let len = pages(bytes);
    let space = MemSpace::Hbm {
        sip: spec.sip,
        cube: spec.cube,
    };
    let addr = device.alloc_aligned(space, len, TENSOR_PAGE_SIZE)?;
    let (_, offset) = device.fabric().machine().address_map().decode(addr)?;
    let shard = Shard {
        spec,
        addr,
        va: 0,
        bytes,
    };
    Ok((shard, Extent { space, offset, len }))
}

/// Unmaps the VA range and frees every shard.
fn undeploy(runtime: &Runtime, deployment: &Deployment) -> Result<(), Unnamed> {
    runtime
        .va
        .borrow_mut()
        .unmap(deployment.va)
        .map_err(Unnamed::Va)?;
    for shard in &deployment.shards {
        runtime.device.free(shard.addr)?;
    }
    Ok(())
}

/// The block of `spec` cut out of a row-major `bytes` with `cols` columns.
fn pack(bytes: &[u8], cols: usize, spec: ShardSpec, size: usize) -> Vec<u8> {
    let mut block = Vec::with_capacity(spec.rows * spec.cols * size);
    for row in spec.row_offset..spec.row_offset + spec.rows {
        let start = (row * cols + spec.col_offset) * size;
        block.extend_from_slice(&bytes[start..start + spec.cols * size]);
    }
    block
}

/// Writes `block` (the block of `spec`) into a row-major `out`.
fn unpack(out: &mut [u8], cols: usize, spec: ShardSpec, size: usize, block: &[u8]) {
    let width = spec.cols * size;
    for (i, row) in block.chunks_exact(width).enumerate() {
        let start = ((spec.row_offset + i) * cols + spec.col_offset) * size;
        out[start..start + width].copy_from_slice(row);
    }
}

/// The M_CPU.DMA engine, and the host as initiator, of a host copy to or
/// from `shard`.
fn host_copy_engine(device: &Device, shard: &Shard) -> (Rc<Mcpu>, NodeId) {
    let fabric = device.fabric();
    let mcpu = fabric.mcpu(shard.spec.sip, shard.spec.cube).clone();
    (mcpu, fabric.machine().host())
}

/// H2D of one shard through a host staging buffer holding `block` (`None`:
/// nothing written to it, for timing-only copies).
async fn h2d(device: &Device, shard: &Shard, block: Option<&[u8]>) -> Result<(), DeviceError> {
    let staging = device.alloc(MemSpace::Host, shard.bytes)?;
    if let Some(block) = block {
        device.write_untimed(naming::HOST, staging, block)?;
    }
    let (mcpu, host) = host_copy_engine(device, shard);
    let copied = device
        .dma_copy(
            mcpu.dma(),
            host,
            CopyJob::contiguous(staging, shard.addr, shard.bytes),
        )
        .await;
    device.free(staging)?;
    copied.map(|_| ())
}

/// D2H of one shard through a host staging buffer; its bytes with data on.
async fn d2h(device: &Device, shard: &Shard) -> Result<Option<Vec<u8>>, DeviceError> {
    let staging = device.alloc(MemSpace::Host, shard.bytes)?;
    let (mcpu, host) = host_copy_engine(device, shard);
    let copied = device
        .dma_copy(
            mcpu.dma(),
            host,
            CopyJob::contiguous(shard.addr, staging, shard.bytes),
        )
        .await;
    let bytes = match (&copied, device.data_mode()) {
        (Ok(_), DataMode::On) => Some(device.read_untimed(staging, shard.bytes)?),
        _ => None,
    };
    device.free(staging)?;
    copied.map(|_| bytes)
}
