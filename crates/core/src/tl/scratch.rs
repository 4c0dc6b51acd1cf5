//! [`Scratch`]: a program's TCM temporaries (seed ADR-0046's scratch
//! allocator). Every tensor a `tl` call creates is allocated from the PE's
//! TCM allocator and remembered here; `free` returns one early, and all
//! that are left are freed when the kernel ends (or its launch is
//! cancelled).

use std::cell::RefCell;

use crate::device::{Device, DeviceError};
use crate::topology::MemSpace;

/// The live scratch allocations of one program, oldest first.
pub(super) struct Scratch {
    tcm: MemSpace,
    live: RefCell<Vec<u64>>,
}

impl Scratch {
    /// No allocations yet, in the TCM `tcm`.
    pub(super) fn new(tcm: MemSpace) -> Self {
        Scratch {
            tcm,
            live: RefCell::new(Vec::new()),
        }
    }

    /// Allocates `len` zeroed bytes of TCM.
    pub(super) fn alloc(&self, device: &Device, len: u64) -> Result<u64, DeviceError> {
        let addr = device.alloc(self.tcm, len)?;
        self.live.borrow_mut().push(addr);
        Ok(addr)
    }

    /// Frees `addr`; `false` (nothing done) if it is not live scratch.
    pub(super) fn free(&self, device: &Device, addr: u64) -> Result<bool, DeviceError> {
        let index = self.live.borrow().iter().position(|&a| a == addr);
        let Some(index) = index else {
            return Ok(false);
        };
        self.live.borrow_mut().remove(index);
        device.free(addr)?;
        Ok(true)
    }

    /// Frees every live allocation, newest first.
    pub(super) fn release(&self, device: &Device) -> Result<(), DeviceError> {
        let live = std::mem::take(&mut *self.live.borrow_mut());
        live.into_iter()
            .rev()
            .try_for_each(|addr| device.free(addr))
    }
}
