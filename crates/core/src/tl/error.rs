//! [`KernelError`]: everything a kernel's `tl` call can fail with.

use crate::device::DeviceError;
use crate::hw::HwError;
use crate::mem::StridedError;
use crate::topology::MemSpace;

use super::PeCoord;

/// Why a `tl` call (or a kernel) failed. A launch wraps it with the
/// program's `(sip, cube, pe)`.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A memory access, copy or op the device refused: an unmapped or
    /// foreign address (named in the message), out of TCM, a route or a
    /// timing that does not exist.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Operands that do not fit the op: shapes, element types, an axis.
    #[error("{op}: {reason}")]
    Operands {
        /// The `tl` call.
        op: &'static str,
        /// What does not fit.
        reason: String,
    },
    /// A compute operand outside the PE's own TCM (PE_GEMM and PE_MATH
    /// read and write only there: `load` it first).
    #[error("{op}: the operand at {addr:#018x} is in {space}, not in the TCM of {pe}")]
    NotInTcm {
        /// The `tl` call.
        op: &'static str,
        /// The operand's address.
        addr: u64,
        /// Where it is.
        space: MemSpace,
        /// The PE running the kernel.
        pe: PeCoord,
    },
    /// `free` of something that is not a live scratch allocation.
    #[error("free: {addr:#018x} is not a live scratch allocation of {pe}")]
    NotScratch {
        /// The address given.
        addr: u64,
        /// The PE running the kernel.
        pe: PeCoord,
    },
    /// A strided copy's shape refused, or a side whose runs leave its
    /// memory (ADR-0112).
    #[error("copy_strided on {pe}: {error}")]
    Strided {
        /// The PE running the kernel.
        pe: PeCoord,
        /// What is wrong, naming the argument.
        error: StridedError,
    },
    /// An IPCQ misuse: a direction not installed, a mismatch under strict
    /// validation, a message larger than a slot, ...
    #[error(transparent)]
    Ipcq(#[from] super::IpcqError),
    /// The launch was cancelled because another of its programs failed.
    #[error("cancelled: another program of the launch failed")]
    Cancelled,
    /// The kernel's own failure ([`KernelError::failed`]).
    #[error("{0}")]
    Failed(String),
}

impl KernelError {
    /// A failure the kernel reports itself.
    pub fn failed(message: impl Into<String>) -> Self {
        KernelError::Failed(message.into())
    }

    /// Operands that do not fit `op`.
    pub(super) fn operands(op: &'static str, reason: impl Into<String>) -> Self {
        KernelError::Operands {
            op,
            reason: reason.into(),
        }
    }
}

impl From<HwError> for KernelError {
    fn from(error: HwError) -> Self {
        KernelError::Device(DeviceError::Hw(error))
    }
}
