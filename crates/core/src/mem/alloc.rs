//! First-fit allocation over one memory (seed ADR-0048's `PEMemAllocator`).
//!
//! [`FirstFitAllocator`] hands out offsets inside a window `[0, capacity)`
//! (the VA space's window starts at its first page instead).
//! Free space is a `BTreeMap` from block offset to block length, searched in
//! offset order (first fit); a freed block merges with free neighbours on
//! both sides, so freeing everything leaves one block of the whole capacity.
//! Live allocations are kept too, so a bad free is an error, not silent
//! corruption (the original trusted its callers; this does not).
//!
//! Sizes are rounded up to the allocator's *granule* (its base alignment),
//! so every block boundary stays granule-aligned. Zero-size requests are an
//! error: there are no bytes to place, and a caller with an empty tensor
//! needs no memory for it.

use std::collections::{BTreeMap, BTreeSet};

/// What an allocator refused to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// No free block can hold the request.
    #[error(
        "{unit}: out of memory: cannot allocate {size} bytes aligned to {align} \
         ({free} bytes free, largest free block {largest_free} bytes)"
    )]
    OutOfMemory {
        /// The memory (e.g. `sip0.cube3.hbm`).
        unit: String,
        /// Bytes asked for.
        size: u64,
        /// Alignment the block had to meet.
        align: u64,
        /// Free bytes in the unit.
        free: u64,
        /// The largest free block.
        largest_free: u64,
    },
    /// A request for no bytes.
    #[error("{unit}: cannot allocate 0 bytes (an empty buffer needs no memory)")]
    ZeroSize {
        /// The memory.
        unit: String,
    },
    /// An alignment that is not a power of two.
    #[error("{unit}: alignment {align} is not a power of two")]
    BadAlignment {
        /// The memory.
        unit: String,
        /// The alignment given.
        align: u64,
    },
    /// A free of an offset that was never the start of an allocation.
    #[error("{unit}: free of offset {offset:#x}, which is not the start of an allocation")]
    UnknownOffset {
        /// The memory.
        unit: String,
        /// The offset given.
        offset: u64,
    },
    /// A second free of an allocation.
    #[error("{unit}: double free of offset {offset:#x}")]
    DoubleFree {
        /// The memory.
        unit: String,
        /// The offset given.
        offset: u64,
    },
}

/// First-fit allocator with coalescing over one memory of a fixed capacity.
///
/// One instance per sub-unit: each PE's TCM, each cube's HBM, each cube's
/// SRAM (HBM and TCM are never shared). Offsets are relative to the memory;
/// [`DeviceAllocators`](super::DeviceAllocators) turns them into device
/// addresses.
#[doc(alias = "PEMemAllocator")]
#[derive(Debug, Clone)]
pub struct FirstFitAllocator {
    unit: String,
    capacity: u64,
    granule: u64,
    free_blocks: BTreeMap<u64, u64>,
    live: BTreeMap<u64, u64>,
    freed: BTreeSet<u64>,
    free_bytes: u64,
}

impl FirstFitAllocator {
    /// An empty allocator named `unit` over `capacity` bytes whose blocks are
    /// multiples of, and aligned to, `granule` (a power of two).
    pub fn new(unit: impl Into<String>, capacity: u64, granule: u64) -> Result<Self, AllocError> {
        Self::window(unit.into(), 0, capacity, granule)
    }

    /// An allocator over `[base, base + capacity)` instead of `[0, capacity)`
    /// (the VA space keeps page 0 out so that no range starts at 0).
    pub(super) fn window(
        unit: String,
        base: u64,
        capacity: u64,
        granule: u64,
    ) -> Result<Self, AllocError> {
        check_alignment(&unit, granule)?;
        let free_blocks = if capacity == 0 {
            BTreeMap::new()
        } else {
            BTreeMap::from([(base, capacity)])
        };
        Ok(FirstFitAllocator {
            unit,
            capacity,
            granule,
            free_blocks,
            live: BTreeMap::new(),
            freed: BTreeSet::new(),
            free_bytes: capacity,
        })
    }

    /// The memory's name, used in every error.
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// Bytes managed.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The base alignment and size granule.
    pub fn granule(&self) -> u64 {
        self.granule
    }

    /// Bytes not allocated.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// The length of the largest free block (0 when full).
    pub fn largest_free_block(&self) -> u64 {
        self.free_blocks.values().copied().max().unwrap_or(0)
    }

    /// Free blocks as `(offset, len)`, in offset order.
    pub fn free_blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.free_blocks.iter().map(|(&o, &l)| (o, l))
    }

    /// Live allocations as `(offset, reserved len)`, in offset order.
    pub fn allocations(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.live.iter().map(|(&o, &l)| (o, l))
    }

    /// Allocates `size` bytes at the granule alignment; returns the offset.
    pub fn alloc(&mut self, size: u64) -> Result<u64, AllocError> {
        self.alloc_aligned(size, self.granule)
    }

    /// Allocates `size` bytes at an offset that is a multiple of `align`
    /// (a power of two; never less than the granule). Returns the offset.
    pub fn alloc_aligned(&mut self, size: u64, align: u64) -> Result<u64, AllocError> {
        check_alignment(&self.unit, align)?;
        if size == 0 {
            return Err(AllocError::ZeroSize {
                unit: self.unit.clone(),
            });
        }
        let align = align.max(self.granule);
        let found = size
            .checked_next_multiple_of(self.granule)
            .and_then(|len| Some((self.first_fit(len, align)?, len)));
        let Some((fit, len)) = found else {
            return Err(self.out_of_memory(size, align));
        };
        self.take(fit, len);
        Ok(fit.at)
    }

    /// Returns the allocation starting at `offset` to the free space.
    pub fn free(&mut self, offset: u64) -> Result<(), AllocError> {
        let Some(len) = self.live.remove(&offset) else {
            return Err(self.bad_free(offset));
        };
        self.freed.insert(offset);
        self.free_bytes += len;
        self.insert_free(offset, len);
        Ok(())
    }

    /// The first free block that holds `len` bytes at `align`.
    fn first_fit(&self, len: u64, align: u64) -> Option<Fit> {
        self.free_blocks.iter().find_map(|(&block, &block_len)| {
            let at = block.checked_next_multiple_of(align)?;
            let end = at.checked_add(len)?;
            (end <= block + block_len).then_some(Fit {
                block,
                block_len,
                at,
            })
        })
    }

    /// Carves `[at, at + len)` out of the free block that `fit` found.
    fn take(&mut self, fit: Fit, len: u64) {
        let Fit {
            block,
            block_len,
            at,
        } = fit;
        self.free_blocks.remove(&block);
        if at > block {
            self.free_blocks.insert(block, at - block);
        }
        let (end, block_end) = (at + len, block + block_len);
        if block_end > end {
            self.free_blocks.insert(end, block_end - end);
        }
        self.live.insert(at, len);
        self.freed.remove(&at);
        self.free_bytes -= len;
    }

    /// Inserts a free block, merging it with adjacent free blocks.
    fn insert_free(&mut self, mut offset: u64, mut len: u64) {
        if let Some((&prev, &prev_len)) = self.free_blocks.range(..offset).next_back() {
            if prev + prev_len == offset {
                self.free_blocks.remove(&prev);
                offset = prev;
                len += prev_len;
            }
        }
        if let Some(next_len) = self.free_blocks.remove(&(offset + len)) {
            len += next_len;
        }
        self.free_blocks.insert(offset, len);
    }

    fn out_of_memory(&self, size: u64, align: u64) -> AllocError {
        AllocError::OutOfMemory {
            unit: self.unit.clone(),
            size,
            align,
            free: self.free_bytes,
            largest_free: self.largest_free_block(),
        }
    }

    fn bad_free(&self, offset: u64) -> AllocError {
        let unit = self.unit.clone();
        if self.freed.contains(&offset) {
            AllocError::DoubleFree { unit, offset }
        } else {
            AllocError::UnknownOffset { unit, offset }
        }
    }
}

/// Where a request fits: a free block and the aligned start within it.
#[derive(Debug, Clone, Copy)]
struct Fit {
    block: u64,
    block_len: u64,
    at: u64,
}

fn check_alignment(unit: &str, align: u64) -> Result<(), AllocError> {
    if align.is_power_of_two() {
        Ok(())
    } else {
        Err(AllocError::BadAlignment {
            unit: unit.to_owned(),
            align,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcm() -> FirstFitAllocator {
        FirstFitAllocator::new("sip0.cube0.pe0.tcm", 1024, 64).unwrap()
    }

    #[test]
    fn first_fit_takes_the_lowest_hole() {
        let mut a = tcm();
        let x = a.alloc(100).unwrap();
        let y = a.alloc(64).unwrap();
        let z = a.alloc(64).unwrap();
        assert_eq!((x, y, z), (0, 128, 192), "sizes round up to the granule");
        a.free(y).unwrap();
        assert_eq!(a.alloc(10).unwrap(), 128, "the freed hole is reused first");
    }

    #[test]
    fn free_coalesces_both_neighbours() {
        let mut a = tcm();
        let offsets: Vec<u64> = (0..4).map(|_| a.alloc(64).unwrap()).collect();
        a.free(offsets[0]).unwrap();
        a.free(offsets[2]).unwrap();
        a.free(offsets[1]).unwrap();
        assert_eq!(a.free_blocks().collect::<Vec<_>>(), [(0, 192), (256, 768)]);
        a.free(offsets[3]).unwrap();
        assert_eq!(a.free_blocks().collect::<Vec<_>>(), [(0, 1024)]);
        assert_eq!(a.free_bytes(), 1024);
    }

    #[test]
    fn alignment_leaves_the_gap_free() {
        let mut a = tcm();
        a.alloc(64).unwrap();
        assert_eq!(a.alloc_aligned(64, 256).unwrap(), 256);
        assert_eq!(a.free_blocks().collect::<Vec<_>>(), [(64, 192), (320, 704)]);
        assert_eq!(
            a.alloc_aligned(64, 8).unwrap(),
            64,
            "never below the granule"
        );
    }

    #[test]
    fn out_of_memory_names_unit_request_and_free_space() {
        let mut a = tcm();
        a.alloc(512).unwrap();
        a.alloc(64).unwrap();
        let err = a.alloc(512).unwrap_err();
        assert_eq!(
            err.to_string(),
            "sip0.cube0.pe0.tcm: out of memory: cannot allocate 512 bytes aligned to 64 \
             (448 bytes free, largest free block 448 bytes)"
        );
        assert!(matches!(
            a.alloc(u64::MAX).unwrap_err(),
            AllocError::OutOfMemory { .. }
        ));
    }

    #[test]
    fn bad_frees_are_typed_errors() {
        let mut a = tcm();
        let x = a.alloc(64).unwrap();
        a.free(x).unwrap();
        assert_eq!(
            a.free(x).unwrap_err().to_string(),
            "sip0.cube0.pe0.tcm: double free of offset 0x0"
        );
        assert!(matches!(
            a.free(0x40).unwrap_err(),
            AllocError::UnknownOffset { offset: 0x40, .. }
        ));
        let again = a.alloc(64).unwrap();
        assert_eq!(again, x);
        a.free(again).unwrap();
    }

    #[test]
    fn zero_size_and_bad_alignment_are_errors() {
        let mut a = tcm();
        assert!(matches!(a.alloc(0), Err(AllocError::ZeroSize { .. })));
        assert!(matches!(
            a.alloc_aligned(8, 48),
            Err(AllocError::BadAlignment { align: 48, .. })
        ));
        assert!(FirstFitAllocator::new("x", 64, 0).is_err());
    }
}
