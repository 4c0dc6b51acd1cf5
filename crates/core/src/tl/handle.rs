//! [`TensorHandle`]: where a tensor is and what it holds; [`Address`]:
//! anything `load` and `store` accept as a device address.

use smallvec::SmallVec;

use crate::mem::DType;
use crate::topology::MemSpace;

use super::KernelError;

/// A tensor's dimensions, outermost first. Up to four are kept inline:
/// kernels make several handles per IPCQ message, and making one then
/// allocates nothing.
pub type Shape = SmallVec<[usize; 4]>;

/// A tensor in device memory: its address, memory, shape (row-major) and
/// element type. It carries no values: with data on they are in the
/// device's store (read them with `Device::read_untimed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorHandle {
    addr: u64,
    space: MemSpace,
    shape: Shape,
    dtype: DType,
}

impl TensorHandle {
    /// A handle; errors (naming `op`) for a shape of no elements or one
    /// whose size does not fit in 64 bits.
    pub(super) fn new(
        op: &'static str,
        (addr, space): (u64, MemSpace),
        shape: &[usize],
        dtype: DType,
    ) -> Result<Self, KernelError> {
        checked_bytes(op, shape, dtype)?;
        Ok(TensorHandle {
            addr,
            space,
            shape: shape_of(shape),
            dtype,
        })
    }

    /// A handle whose size [`checked_bytes`] has already accepted.
    pub(super) fn checked((addr, space): (u64, MemSpace), shape: &[usize], dtype: DType) -> Self {
        TensorHandle {
            addr,
            space,
            shape: shape_of(shape),
            dtype,
        }
    }

    /// The `n_elem` elements of this tensor's type at `addr`, if they lie
    /// within it: then they are in its memory, whose decode is not
    /// repeated. `None` for no elements or any byte outside.
    pub(crate) fn within(&self, addr: u64, n_elem: usize) -> Option<TensorHandle> {
        let bytes = (n_elem as u64).checked_mul(self.dtype.size())?;
        let end = addr.checked_add(bytes)?;
        let inside =
            bytes > 0 && addr >= self.addr && end <= self.addr.saturating_add(self.bytes());
        inside.then(|| Self::checked((addr, self.space), &[n_elem], self.dtype))
    }

    /// Device address of the first element.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The memory holding it.
    pub fn space(&self) -> MemSpace {
        self.space
    }

    /// Dimensions, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn elements(&self) -> u64 {
        match *self.shape {
            // A message or a part of a tile: no loop.
            [n] => n as u64,
            _ => self.shape.iter().map(|&d| d as u64).product(),
        }
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.elements() * self.dtype.size()
    }

    /// This tensor with another element type (same address and shape).
    pub(super) fn retyped(&self, dtype: DType) -> TensorHandle {
        TensorHandle {
            dtype,
            ..self.clone()
        }
    }
}

/// `shape` as a [`Shape`]; one dimension (a message, a part of a tile)
/// with no `memcpy` (a slice copy of unknown length calls it).
#[inline(always)]
fn shape_of(shape: &[usize]) -> Shape {
    match *shape {
        [n] => smallvec::smallvec![n],
        _ => Shape::from_slice(shape),
    }
}

/// The size of a `shape` tensor of `dtype`; errors (naming `op`) for no
/// elements or more bytes than 64 bits count.
pub(super) fn checked_bytes(
    op: &'static str,
    shape: &[usize],
    dtype: DType,
) -> Result<u64, KernelError> {
    let bytes = match *shape {
        // A message or a part of a tile: no loop.
        [n] => dtype.size().checked_mul(n as u64),
        _ => shape
            .iter()
            .try_fold(dtype.size(), |n, &d| n.checked_mul(d as u64)),
    };
    match bytes {
        Some(0) => Err(KernelError::operands(
            op,
            format!("shape {shape:?} has no elements"),
        )),
        None => Err(KernelError::operands(
            op,
            format!("shape {shape:?} is too large"),
        )),
        Some(bytes) => Ok(bytes),
    }
}

/// A device address: a plain `u64` or a [`TensorHandle`] (its first
/// element).
pub trait Address {
    /// The device address.
    fn address(&self) -> u64;
}

impl Address for u64 {
    fn address(&self) -> u64 {
        *self
    }
}

impl Address for TensorHandle {
    fn address(&self) -> u64 {
        self.addr
    }
}

impl<T: Address + ?Sized> Address for &T {
    fn address(&self) -> u64 {
        (**self).address()
    }
}
