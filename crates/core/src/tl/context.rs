//! [`Tl`]: one program's view of its PE — who it is in the grid, and the
//! PE's units (PE_DMA, PE_GEMM, PE_MATH, its TCM) it drives.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::rc::Rc;

use crate::device::{CopyJob, CopyRequest, CopyStart, Device, DeviceError, RouteMemo};
use crate::hw::{DmaEngine, GemmEngine, MathEngine, explain};
use crate::mem::{DType, RegionMemo, Strided};
use crate::sim::Event;
use crate::topology::{MemSpace, NodeId, naming};

use super::gemm::PendingJob;
use super::handle::checked_bytes;
use super::ipcq::{IpcqNetwork, IpcqPort};
use super::scratch::Scratch;
use super::{Address, KernelError, TensorHandle};

/// A PE's structural coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeCoord {
    /// SIP index.
    pub sip: u32,
    /// Cube index within the SIP.
    pub cube: u32,
    /// PE index within the cube.
    pub pe: u32,
}

impl fmt::Display for PeCoord {
    /// The PE's node name, e.g. `sip0.cube1.pe2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&naming::pe(self.sip, self.cube, self.pe))
    }
}

/// A launch grid on one SIP: `pes` programs per cube (axis 0) on cubes
/// `0..cubes` (axis 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grid {
    /// Programs per cube: PEs `0..pes` (axis 0).
    pub pes: u32,
    /// Cubes `0..cubes` (axis 1).
    pub cubes: u32,
}

impl Grid {
    /// Number of programs.
    pub fn programs(&self) -> u64 {
        u64::from(self.pes) * u64::from(self.cubes)
    }
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.pes, self.cubes)
    }
}

/// The `tl` context of one program: cheap to clone (all clones are the same
/// program). See the [module docs](super) for the API.
#[derive(Clone)]
pub struct Tl {
    pub(super) program: Rc<Program>,
}

/// What a program owns and drives.
pub(super) struct Program {
    pub(super) device: Rc<Device>,
    pub(super) coord: PeCoord,
    grid: Grid,
    pub(super) node: NodeId,
    pub(super) dma: Rc<DmaEngine>,
    pub(super) gemm: Rc<GemmEngine>,
    pub(super) math: Rc<MathEngine>,
    scratch: Scratch,
    /// Pipeline jobs submitted and not yet drained.
    pub(super) jobs: RefCell<Vec<Rc<PendingJob>>>,
    /// Set when the launch is cancelled: pipeline jobs stop.
    pub(super) cancel: Event,
    /// The IPCQ network the program was launched with, and its slots.
    pub(super) ipcq: Option<IpcqPort>,
    /// The routes of this program's last local copy (ADR-0057).
    copy_routes: RouteMemo,
    /// Where this program's last PE_MATH op found its operands (ADR-0064).
    pub(super) math_regions: Cell<RegionMemo>,
    /// [`Tl::space_of`]'s last memory: its first address, size and name.
    last_space: Cell<(u64, u64, MemSpace)>,
}

impl Tl {
    /// The context of the program at `coord` in `grid`, whose pipeline jobs
    /// stop when `cancel` is set, attached to `ipcq` if given; `None` if the
    /// machine has no such PE.
    pub(crate) fn new(
        device: Rc<Device>,
        (coord, grid): (PeCoord, Grid),
        cancel: Event,
        ipcq: Option<Rc<IpcqNetwork>>,
    ) -> Option<Tl> {
        let PeCoord { sip, cube, pe } = coord;
        let node = device.fabric().machine().pe(sip, cube, pe)?;
        let fabric = device.fabric().clone();
        let program = Program {
            coord,
            grid,
            node,
            dma: fabric.pe_dma(sip, cube, pe).clone(),
            gemm: fabric.pe_gemm(sip, cube, pe).clone(),
            math: fabric.pe_math(sip, cube, pe).clone(),
            scratch: Scratch::new(MemSpace::Tcm { sip, cube, pe }),
            jobs: RefCell::new(Vec::new()),
            cancel,
            ipcq: ipcq.map(|network| IpcqPort::new(network, coord)),
            copy_routes: RouteMemo::default(),
            math_regions: Cell::default(),
            last_space: Cell::new((0, 0, MemSpace::Host)),
            device,
        };
        Some(Tl {
            program: Rc::new(program),
        })
    }

    /// This program's index along `axis`: 0 → its PE within the cube,
    /// 1 → its cube. Higher axes have extent 1 (Triton's third grid
    /// dimension), so they give 0.
    pub fn program_id(&self, axis: u32) -> u32 {
        match axis {
            0 => self.program.coord.pe,
            1 => self.program.coord.cube,
            _ => 0,
        }
    }

    /// The grid's extent along `axis` (topology slots, not a collective's
    /// world size): 0 → PEs per cube, 1 → cubes; 1 beyond.
    pub fn num_programs(&self, axis: u32) -> u32 {
        match axis {
            0 => self.program.grid.pes,
            1 => self.program.grid.cubes,
            _ => 1,
        }
    }

    /// The PE this program runs on.
    pub fn coord(&self) -> PeCoord {
        self.program.coord
    }

    /// This PE's TCM.
    pub fn tcm(&self) -> MemSpace {
        let PeCoord { sip, cube, pe } = self.program.coord;
        MemSpace::Tcm { sip, cube, pe }
    }

    /// This PE's TCM capacity in bytes (`pe.tcm.capacity`).
    pub fn tcm_capacity(&self) -> u64 {
        let spec = self.program.device.fabric().machine().spec();
        spec.pe().tcm.capacity.get().bytes()
    }

    /// A handle on a tensor already in memory at `addr`, without moving it
    /// (seed ADR-0046's `ref`). Errors if the address is not on the machine.
    pub fn view(
        &self,
        addr: impl Address,
        shape: &[usize],
        dtype: DType,
    ) -> Result<TensorHandle, KernelError> {
        let addr = addr.address();
        TensorHandle::new("view", (addr, self.space_of(addr)?), shape, dtype)
    }

    /// The memory `addr` is in; an error if it is not on the machine.
    /// The last memory found is remembered (a kernel's addresses are
    /// mostly in its own TCM): an address inside it is in it, with no
    /// decoding (the address map never changes; ADR-0061).
    pub(crate) fn space_of(&self, addr: u64) -> Result<MemSpace, KernelError> {
        let (base, len, space) = self.program.last_space.get();
        if addr.wrapping_sub(base) < len {
            return Ok(space);
        }
        let map = self.program.device.fabric().machine().address_map();
        let (space, offset) = map.decode(addr).map_err(crate::device::DeviceError::from)?;
        let remembered = (addr - offset, map.capacity(space), space);
        self.program.last_space.set(remembered);
        Ok(space)
    }

    /// A zero-filled scratch tensor in this PE's TCM (untimed: allocation
    /// is bookkeeping), freed at the latest when the kernel ends.
    pub fn alloc(&self, shape: &[usize], dtype: DType) -> Result<TensorHandle, KernelError> {
        self.scratch_tensor("alloc", shape, dtype)
    }

    /// Frees a scratch tensor early.
    pub fn free(&self, handle: &TensorHandle) -> Result<(), KernelError> {
        let p = &self.program;
        match p.scratch.free(&p.device, handle.addr())? {
            true => Ok(()),
            false => Err(KernelError::NotScratch {
                addr: handle.addr(),
                pe: p.coord,
            }),
        }
    }

    /// Copies `shape` elements of `dtype` at `src` into new scratch in this
    /// PE's TCM with PE_DMA ([`Device::dma_copy`]: timed, moved, logged);
    /// the future ends when the last byte has landed. The scratch is
    /// allocated at the call; the future borrows neither `self` nor
    /// `shape`, so loads can be joined (`futures::try_join!`).
    pub fn load<S: Address>(
        &self,
        src: S,
        shape: &[usize],
        dtype: DType,
    ) -> impl Future<Output = Result<TensorHandle, KernelError>> + use<S> {
        let (tl, src) = (self.clone(), src.address());
        let dst = self.scratch_tensor("load", shape, dtype);
        async move {
            let dst = dst?;
            tl.copy(src, dst.addr(), dst.bytes()).await?;
            Ok(dst)
        }
    }

    /// Copies `value` to `dst` with PE_DMA; returns when the last byte has
    /// landed.
    pub async fn store(&self, dst: impl Address, value: &TensorHandle) -> Result<(), KernelError> {
        self.copy(value.addr(), dst.address(), value.bytes()).await
    }

    /// Copies `len` bytes from `src` to `dst` with PE_DMA (what `load` and
    /// `store` do; a caller holding only addresses awaits it directly). A
    /// copy booked whole (within a TCM, flow mode: `Device::start_copy`,
    /// ADR-0057) is slept for once; any other awaits the rest of the
    /// device's copy, boxed so that this future stays small (ADR-0060).
    pub(crate) async fn copy(&self, src: u64, dst: u64, len: u64) -> Result<(), KernelError> {
        self.copy_job(CopyJob::contiguous(src, dst, len)).await
    }

    /// Copies the `layout.rows` runs of `layout.run` bytes from `src` to
    /// `dst` with PE_DMA, run `i` read at `src + i × src_stride` and
    /// written at `dst + i × dst_stride`, as one DMA job (ADR-0112): one
    /// booking in flow mode, timed as a contiguous copy of the rows over
    /// the same route (each run rounded up to whole 64-byte lines unless
    /// both sides are contiguous: `CopyJob::timed_len`). A shape of zero
    /// rows, run or stride, a stride shorter than the run, or a side
    /// whose runs leave the memory its first byte is in is refused naming
    /// this PE and the argument ([`KernelError::Strided`]); every run must
    /// lie in a mapped region (the store's error names the first that
    /// does not). Returns when the last byte has landed.
    pub async fn copy_strided(
        &self,
        src: impl Address,
        dst: impl Address,
        layout: Strided,
    ) -> Result<(), KernelError> {
        let (src, dst, pe) = (src.address(), dst.address(), self.program.coord);
        let refused = |error| KernelError::Strided { pe, error };
        layout.check(src, dst).map_err(refused)?;
        match self.copy_job(CopyJob::strided(src, dst, layout)).await {
            Err(KernelError::Device(DeviceError::Strided(error))) => Err(refused(error)),
            done => done,
        }
    }

    /// `job` with PE_DMA: see [`copy`](Self::copy).
    async fn copy_job(&self, job: CopyJob) -> Result<(), KernelError> {
        let p = &self.program;
        let request = CopyRequest {
            memo: Some(&p.copy_routes),
            ..CopyRequest::plain(&p.dma, p.node, job)
        };
        match p.device.start_copy(request)? {
            CopyStart::Booked(booked) => {
                explain::sleep_until(booked.done).await;
                booked.finish(&p.device)?;
            }
            CopyStart::Pending(rest) => {
                Box::pin(rest.run()).await?;
            }
        }
        Ok(())
    }

    /// A new scratch tensor for `op`.
    pub(super) fn scratch_tensor(
        &self,
        op: &'static str,
        shape: &[usize],
        dtype: DType,
    ) -> Result<TensorHandle, KernelError> {
        let len = checked_bytes(op, shape, dtype)?;
        let p = &self.program;
        let addr = p.scratch.alloc(&p.device, len)?;
        TensorHandle::new(op, (addr, self.tcm()), shape, dtype)
    }

    /// Errors unless `handle` is in this PE's TCM (where PE_GEMM and
    /// PE_MATH work).
    pub(super) fn check_local(
        &self,
        op: &'static str,
        handle: &TensorHandle,
    ) -> Result<(), KernelError> {
        if handle.space() == self.tcm() {
            return Ok(());
        }
        Err(KernelError::NotInTcm {
            op,
            addr: handle.addr(),
            space: handle.space(),
            pe: self.program.coord,
        })
    }

    /// Ends the program: waits for its pipeline jobs (failing with the
    /// first error none waited for), then frees its scratch.
    pub(crate) async fn finish(&self) -> Result<(), KernelError> {
        let drained = self.drain_jobs().await;
        self.release_all()?;
        drained
    }

    /// Releases every IPCQ slot the program holds and frees every scratch
    /// tensor still live.
    pub(crate) fn release_all(&self) -> Result<(), KernelError> {
        self.release_slots();
        let p = &self.program;
        Ok(p.scratch.release(&p.device)?)
    }
}
