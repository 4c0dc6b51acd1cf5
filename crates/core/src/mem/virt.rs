//! Virtual address ranges backed by physical pages (seed ADR-0048's
//! `VirtualAllocator`).
//!
//! A VA range is what a tensor's pointer (`t_ptr`) holds: one contiguous
//! range whose pages may live in different memories, e.g. a row-wise
//! sharded tensor whose slice `c` sits in cube `c`'s HBM, so that
//! `t_ptr + c * shard_bytes` is cube `c`'s slice.
//!
//! The design:
//!
//! - VA ranges come from a [`FirstFitAllocator`] over the window
//!   `[page_size, 2^48)`: page-aligned, a whole number of pages, never 0
//!   (so 0 stays a null pointer), and never overlapping device addresses'
//!   meaning: a VA is not a device address and must be translated.
//! - The backing of a range is a list of [`Extent`]s, each a run of whole
//!   pages in one memory (`(MemSpace, offset, len)`). A list of single page
//!   frames is the finest case; runs keep a 64 GiB tensor at a handful of
//!   entries instead of one per page. The range's pages map to the extents
//!   in order.
//! - The caller owns the physical memory: it allocates the extents (e.g.
//!   with [`DeviceAllocators::alloc_aligned`](super::DeviceAllocators::alloc_aligned)
//!   at page alignment), maps them here, and gets them back from
//!   [`VirtualAllocator::unmap`] to free them.
//! - Translation gives device addresses ([`AddressMap::encode`]):
//!   [`VirtualAllocator::translate`] for one byte, [`VirtualAllocator::segments`]
//!   for a range split where the backing changes (what a DMA walks).
//!
//! Pages are 2 MiB by default ([`DEFAULT_PAGE_SIZE`]); any power of two up
//! to 2^47 may be configured.

use std::collections::BTreeMap;

use crate::topology::{AddressError, AddressMap, MemSpace};

use super::alloc::{AllocError, FirstFitAllocator};

/// The default page size: 2 MiB.
pub const DEFAULT_PAGE_SIZE: u64 = 2 << 20;
/// The end (exclusive) of the VA window.
const VA_LIMIT: u64 = 1 << 48;
/// The allocator name VA errors carry.
const VA_UNIT: &str = "virtual address space";

/// A run of whole pages in one memory that backs part of a VA range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The memory.
    pub space: MemSpace,
    /// Offset of the first byte within the memory (page-aligned).
    pub offset: u64,
    /// Bytes (whole pages).
    pub len: u64,
}

/// A piece of a VA range that is contiguous in one memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Virtual address of the first byte.
    pub va: u64,
    /// Device address of the first byte.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// What the [`VirtualAllocator`] refused to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaError {
    /// A page size that is not a power of two up to 2^47.
    #[error("page size {page_size} is not a power of two up to 2^47")]
    PageSize {
        /// The page size given.
        page_size: u64,
    },
    /// A mapping with no backing.
    #[error("a VA range needs at least one extent of backing")]
    NoBacking,
    /// An extent that is not whole pages.
    #[error(
        "extent of {len:#x} bytes at {space} offset {offset:#x} is not whole \
         {page_size}-byte pages"
    )]
    NotPages {
        /// The memory.
        space: MemSpace,
        /// Offset given.
        offset: u64,
        /// Length given.
        len: u64,
        /// The page size.
        page_size: u64,
    },
    /// An extent outside its memory, or in a memory the machine lacks.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The VA window is full, or an unmap of a range that is not mapped.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// A virtual address in no mapped range.
    #[error("virtual address {va:#x} is not mapped")]
    Unmapped {
        /// The address given.
        va: u64,
    },
    /// A virtual range that runs past the end of its mapped range.
    #[error(
        "virtual range of {len:#x} bytes at {va:#x} runs past the end of the \
         range mapped at {base:#x} ({mapped:#x} bytes)"
    )]
    Straddles {
        /// Start given.
        va: u64,
        /// Length given.
        len: u64,
        /// Start of the mapped range holding `va`.
        base: u64,
        /// Length of that range.
        mapped: u64,
    },
}

/// The backing of one VA range.
#[derive(Debug, Clone)]
struct Mapping {
    len: u64,
    extents: Vec<Extent>,
    /// Offset within the range where each extent starts (prefix sums).
    starts: Vec<u64>,
}

impl Mapping {
    /// The extent holding range offset `rel`, and `rel`'s offset within it.
    fn locate(&self, rel: u64) -> (usize, u64) {
        let index = self.starts.partition_point(|&start| start <= rel) - 1;
        (index, rel - self.starts[index])
    }
}

/// Page-granular virtual address space over a machine's memories.
#[derive(Debug, Clone)]
pub struct VirtualAllocator {
    map: AddressMap,
    page_size: u64,
    ranges: FirstFitAllocator,
    mappings: BTreeMap<u64, Mapping>,
}

impl VirtualAllocator {
    /// An empty VA space with 2 MiB pages.
    pub fn new(map: AddressMap) -> Self {
        Self::with_page_size(map, DEFAULT_PAGE_SIZE).expect("the default page size is valid")
    }

    /// An empty VA space with `page_size`-byte pages.
    pub fn with_page_size(map: AddressMap, page_size: u64) -> Result<Self, VaError> {
        if !page_size.is_power_of_two() || page_size > VA_LIMIT / 2 {
            return Err(VaError::PageSize { page_size });
        }
        let window = VA_LIMIT - page_size;
        let ranges = FirstFitAllocator::window(VA_UNIT.to_owned(), page_size, window, page_size)?;
        Ok(VirtualAllocator {
            map,
            page_size,
            ranges,
            mappings: BTreeMap::new(),
        })
    }

    /// Bytes per page.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Maps a new VA range onto `backing`, in order; returns its start.
    pub fn map(&mut self, backing: Vec<Extent>) -> Result<u64, VaError> {
        if backing.is_empty() {
            return Err(VaError::NoBacking);
        }
        let mut starts = Vec::with_capacity(backing.len());
        let mut len = 0u64;
        for extent in &backing {
            self.check_extent(extent)?;
            starts.push(len);
            len = len
                .checked_add(extent.len)
                .ok_or_else(|| self.full(u64::MAX))?;
        }
        let va = self.ranges.alloc(len)?;
        let mapping = Mapping {
            len,
            extents: backing,
            starts,
        };
        self.mappings.insert(va, mapping);
        Ok(va)
    }

    /// Unmaps the range that starts at `va`; returns its backing for the
    /// caller to free.
    pub fn unmap(&mut self, va: u64) -> Result<Vec<Extent>, VaError> {
        self.ranges.free(va)?;
        let mapping = self.mappings.remove(&va).ok_or(VaError::Unmapped { va })?;
        Ok(mapping.extents)
    }

    /// The device address of the byte at `va`.
    pub fn translate(&self, va: u64) -> Result<u64, VaError> {
        let (base, mapping) = self.mapping_at(va)?;
        let (index, within) = mapping.locate(va - base);
        let extent = mapping.extents[index];
        Ok(self.map.encode(extent.space, extent.offset + within)?)
    }

    /// The device-contiguous pieces of `[va, va + len)`, in order. The
    /// range must lie within one mapped range; an empty range has none.
    pub fn segments(&self, va: u64, len: u64) -> Result<Vec<Segment>, VaError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let (base, mapping) = self.mapping_at(va)?;
        let rel = va - base;
        if len > mapping.len - rel {
            return Err(VaError::Straddles {
                va,
                len,
                base,
                mapped: mapping.len,
            });
        }
        let (mut index, mut within) = mapping.locate(rel);
        let (mut va, mut left, mut pieces) = (va, len, Vec::new());
        while left > 0 {
            let extent = mapping.extents[index];
            let take = left.min(extent.len - within);
            let addr = self.map.encode(extent.space, extent.offset + within)?;
            pieces.push(Segment {
                va,
                addr,
                len: take,
            });
            (va, left, index, within) = (va + take, left - take, index + 1, 0);
        }
        Ok(pieces)
    }

    /// The mapped range holding `va`: its start and backing.
    fn mapping_at(&self, va: u64) -> Result<(u64, &Mapping), VaError> {
        self.mappings
            .range(..=va)
            .next_back()
            .filter(|(base, mapping)| va - **base < mapping.len)
            .map(|(&base, mapping)| (base, mapping))
            .ok_or(VaError::Unmapped { va })
    }

    /// Errors unless `extent` is whole pages inside its memory.
    fn check_extent(&self, extent: &Extent) -> Result<(), VaError> {
        let Extent { space, offset, len } = *extent;
        let page = self.page_size;
        if len == 0 || offset % page != 0 || len % page != 0 {
            return Err(VaError::NotPages {
                space,
                offset,
                len,
                page_size: page,
            });
        }
        let last = offset.saturating_add(len - 1);
        self.map.encode(space, last)?;
        Ok(())
    }

    /// The error for a range too large for the VA window.
    fn full(&self, size: u64) -> VaError {
        VaError::Alloc(AllocError::OutOfMemory {
            unit: VA_UNIT.to_owned(),
            size,
            align: self.page_size,
            free: self.ranges.free_bytes(),
            largest_free: self.ranges.largest_free_block(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySpec;

    const PAGE: u64 = 4096;

    fn va_space() -> VirtualAllocator {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        VirtualAllocator::with_page_size(AddressMap::new(&spec).unwrap(), PAGE).unwrap()
    }

    fn hbm(cube: u32, offset: u64, pages: u64) -> Extent {
        Extent {
            space: MemSpace::Hbm { sip: 0, cube },
            offset,
            len: pages * PAGE,
        }
    }

    #[test]
    fn ranges_are_page_aligned_and_never_zero() {
        let mut va = va_space();
        let a = va.map(vec![hbm(0, 0, 1)]).unwrap();
        let b = va.map(vec![hbm(0, PAGE, 2)]).unwrap();
        assert_eq!((a, b), (PAGE, 2 * PAGE));
        assert_eq!(VirtualAllocator::new(va.map.clone()).page_size(), 2 << 20);
    }

    #[test]
    fn a_range_spans_cubes_in_backing_order() {
        let mut va = va_space();
        let base = va.map(vec![hbm(0, 8 * PAGE, 2), hbm(1, 0, 2)]).unwrap();
        let map = va.map.clone();
        let cube1 = map.encode(MemSpace::Hbm { sip: 0, cube: 1 }, 0).unwrap();
        assert_eq!(va.translate(base + 2 * PAGE).unwrap(), cube1);
        let cube0 = map.encode(MemSpace::Hbm { sip: 0, cube: 0 }, 0).unwrap();
        assert_eq!(va.translate(base + 5).unwrap(), cube0 + 8 * PAGE + 5);
        let pieces = va.segments(base + PAGE, 2 * PAGE).unwrap();
        assert_eq!(
            pieces,
            [
                Segment {
                    va: base + PAGE,
                    addr: cube0 + 9 * PAGE,
                    len: PAGE
                },
                Segment {
                    va: base + 2 * PAGE,
                    addr: cube1,
                    len: PAGE
                },
            ]
        );
    }

    #[test]
    fn misuse_is_reported() {
        let mut va = va_space();
        assert_eq!(va.map(vec![]), Err(VaError::NoBacking));
        assert!(matches!(
            va.map(vec![Extent {
                len: 100,
                ..hbm(0, 0, 1)
            }]),
            Err(VaError::NotPages { len: 100, .. })
        ));
        let past_end = hbm(0, (16 << 30) - PAGE, 2);
        assert!(matches!(va.map(vec![past_end]), Err(VaError::Address(_))));
        let base = va.map(vec![hbm(0, 0, 1)]).unwrap();
        assert!(matches!(
            va.segments(base, PAGE + 1),
            Err(VaError::Straddles { .. })
        ));
        assert_eq!(
            va.translate(base + PAGE),
            Err(VaError::Unmapped { va: base + PAGE })
        );
        assert_eq!(va.unmap(base).unwrap(), [hbm(0, 0, 1)]);
        let err = va.unmap(base).unwrap_err();
        assert_eq!(
            err.to_string(),
            "virtual address space: double free of offset 0x1000"
        );
        assert!(VirtualAllocator::with_page_size(va.map.clone(), 3000).is_err());
    }
}
