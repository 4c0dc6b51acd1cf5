//! `MemoryStore`: the bytes of every memory, one sparse buffer per mapped
//! region.
//!
//! Regions are keyed by device address in a `BTreeMap` (never a map per
//! address or element). A region's bytes are pages allocated on the first
//! non-zero write ([`Pages`]): mapping 64 MiB costs a table of 16 Ki page
//! slots, and memory grows with the bytes written, not the bytes mapped. A
//! region lies inside one memory ([`MemSpace`]); an access must lie inside
//! one region.
//!
//! Regions are mapped explicitly ([`MemoryStore::map`], zero-filled), as
//! the runtime does when it allocates; touching an unmapped byte is an
//! error naming the address and its memory, which catches use-after-free
//! and wild pointers instead of inventing memory for them.
//!
//! With data off ([`MemoryStore::timing_only`]) regions keep their extent
//! but no bytes: every mutation checks its addresses exactly as with data
//! on and then does nothing, so callers need no branches, and errors are
//! the same in both modes. Only getting values out ([`MemoryStore::read`])
//! differs: it fails with [`StoreError::DataOff`].

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use super::pages::Pages;
use super::strided::{Strided, StridedError};
use crate::topology::{AddressError, AddressMap, MemSpace};

/// Whether a store holds bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataMode {
    /// Bytes are kept and moved: data verification possible.
    On,
    /// Only extents are kept: timing-only runs, same simulated times.
    Off,
}

/// A memory access the store refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The address is in no memory of the machine.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The address is in a memory but in no mapped region.
    #[error("address {addr:#018x} ({space} offset {offset:#x}) is not mapped")]
    Unmapped {
        /// The address.
        addr: u64,
        /// Its memory.
        space: MemSpace,
        /// Its offset within the memory.
        offset: u64,
    },
    /// An access that starts in a region and runs past its end.
    #[error(
        "{len} bytes at {addr:#018x} ({space}) straddle the end of the region \
         mapped at {region:#018x} ({region_len} bytes)"
    )]
    Straddles {
        /// Start of the access.
        addr: u64,
        /// Length of the access.
        len: u64,
        /// The memory.
        space: MemSpace,
        /// Start of the region holding `addr`.
        region: u64,
        /// Length of that region.
        region_len: u64,
    },
    /// A region of no bytes.
    #[error("cannot map 0 bytes at {addr:#018x}")]
    ZeroLength {
        /// The address.
        addr: u64,
    },
    /// A region that does not fit in the memory it starts in.
    #[error("{len} bytes at {addr:#018x} run past the end of {space} ({capacity} bytes)")]
    OutsideMemory {
        /// Start of the region.
        addr: u64,
        /// Its length.
        len: u64,
        /// The memory it starts in.
        space: MemSpace,
        /// That memory's size.
        capacity: u64,
    },
    /// A region that overlaps one already mapped.
    #[error(
        "cannot map {len} bytes at {addr:#018x}: overlaps the region mapped at \
         {region:#018x} ({region_len} bytes)"
    )]
    Overlaps {
        /// Start of the new region.
        addr: u64,
        /// Its length.
        len: u64,
        /// Start of the existing region.
        region: u64,
        /// Its length.
        region_len: u64,
    },
    /// Unmapping an address that is not the start of a region.
    #[error("address {addr:#018x} is not the start of a mapped region")]
    NotARegion {
        /// The address.
        addr: u64,
    },
    /// A read from a store that keeps no bytes.
    #[error("data is off (timing-only store): the {len} bytes at {addr:#018x} have no values")]
    DataOff {
        /// The address.
        addr: u64,
        /// The length.
        len: u64,
    },
    /// A write whose bytes were not kept (an op recorded with data off),
    /// applied to a store with data on.
    #[error(
        "the {len} bytes written at {addr:#018x} were recorded with data off; \
         replay this log on a timing-only store"
    )]
    PayloadElided {
        /// The address.
        addr: u64,
        /// The length.
        len: u64,
    },
    /// A strided copy's shape refused (ADR-0112).
    #[error(transparent)]
    Strided(#[from] StridedError),
}

/// One mapped region: its length and, with data on, its bytes (with data
/// off, no pages).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Region {
    len: u64,
    bytes: Pages,
}

/// A mapped region as seen from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionView {
    /// Device address of the first byte.
    pub addr: u64,
    /// Bytes in the region.
    pub len: u64,
}

/// The first difference between two stores (see [`MemoryStore::diff`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDiff {
    /// A region present in one store only, or with different lengths.
    Layout {
        /// Start of the region.
        addr: u64,
        /// Its length in the left store, if mapped there.
        left: Option<u64>,
        /// Its length in the right store, if mapped there.
        right: Option<u64>,
    },
    /// The first byte that differs.
    Byte {
        /// Its address.
        addr: u64,
        /// Its memory.
        space: MemSpace,
        /// Its value in the left store.
        left: u8,
        /// Its value in the right store.
        right: u8,
    },
}

impl fmt::Display for StoreDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = |l: Option<u64>| l.map_or("unmapped".to_owned(), |l| format!("{l} bytes"));
        match self {
            StoreDiff::Layout { addr, left, right } => write!(
                f,
                "region at {addr:#018x}: {} on the left, {} on the right",
                len(*left),
                len(*right)
            ),
            StoreDiff::Byte {
                addr,
                space,
                left,
                right,
            } => write!(
                f,
                "byte at {addr:#018x} ({space}): {left:#04x} on the left, {right:#04x} on the right"
            ),
        }
    }
}

/// The bytes of a machine's memories, one buffer per mapped region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryStore {
    map: AddressMap,
    mode: DataMode,
    regions: BTreeMap<u64, Region>,
    /// `(start, len)` of every region, by memory: what
    /// [`locate`](Self::locate) searches, on every access. Changed only
    /// with `regions`, by `map` and `unmap`.
    extents: Extents,
    /// Renewed whenever a region may have left: what a [`RegionMemo`]
    /// was filled under.
    epoch: Epoch,
}

/// A store's history as [`RegionMemo`]s see it: a number no other store
/// or earlier state of this one had, renewed at every unmap (a region
/// mapped stays mapped until then) and at every clone. Not part of what
/// a store holds: two stores of the same regions and bytes are equal
/// whatever their epochs.
#[derive(Debug)]
struct Epoch(u64);

impl Epoch {
    fn fresh() -> Epoch {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Epoch(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Clone for Epoch {
    fn clone(&self) -> Epoch {
        Epoch::fresh()
    }
}

impl PartialEq for Epoch {
    fn eq(&self, _: &Epoch) -> bool {
        true
    }
}

impl Eq for Epoch {}

/// Up to two mapped regions a caller found its last op's operands in,
/// and the store's epoch then (ADR-0064): while the epoch holds, neither
/// has been unmapped, so an operand inside one of them passes the
/// store's check without a look-up. Kept by the caller (an IPCQ ring's
/// sends, a program's copies and math), whose ops touch the same few
/// regions again and again. The default remembers nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegionMemo {
    /// 0: nothing (no store's epoch is 0).
    epoch: u64,
    /// `(start, len)` of each region; `len` 0 for none.
    regions: [(u64, u64); 2],
}

impl RegionMemo {
    /// Whether `len` bytes at `addr` lie inside a remembered region (the
    /// condition of [`MemoryStore::locate`]).
    #[inline(always)]
    fn holds(&self, addr: u64, len: u64) -> bool {
        self.regions.iter().any(|&(start, region_len)| {
            let at = addr.wrapping_sub(start);
            at < region_len && len <= region_len - at
        })
    }

    /// Remembers `extent` unless it is remembered already (the first two
    /// distinct are kept).
    fn note(&mut self, extent: (u64, u64)) {
        if self.regions.contains(&extent) {
            return;
        }
        if let Some(free) = self.regions.iter_mut().find(|(_, len)| *len == 0) {
            *free = extent;
        }
    }
}

/// The extents `(start, len)` of the mapped regions, by the memory they
/// are in (a region never spans two), each memory's sorted by start. An
/// access finds its memory by its address's fields
/// ([`AddressMap::memory_slot`]: a cube's memories, allocated when the
/// cube's first region is mapped), then searches that memory's few
/// regions.
#[derive(Clone, PartialEq, Eq)]
struct Extents {
    /// By [`AddressMap::memory_slot`]: the cube, then the memory.
    cubes: Vec<Option<CubeExtents>>,
    /// Memories per cube.
    memories: usize,
}

/// The extents in each memory of one cube, by memory. A deque: a memory
/// whose regions are freed oldest first (a trace's thousands of pending
/// transfers) loses its front extent in constant time, not by moving all
/// the others (issue 40 item 12); insertion and removal move the shorter
/// side.
type CubeExtents = Box<[VecDeque<(u64, u64)>]>;

/// A memory without regions.
static NO_EXTENTS: VecDeque<(u64, u64)> = VecDeque::new();

impl Extents {
    fn new(map: &AddressMap) -> Self {
        Extents {
            cubes: vec![None; map.cube_slots()],
            memories: map.memory_slots(),
        }
    }

    /// The extents of the memory `addr` is in.
    #[inline(always)]
    fn of(&self, map: &AddressMap, addr: u64) -> &VecDeque<(u64, u64)> {
        let Some((cube, memory)) = map.memory_slot(addr) else {
            return &NO_EXTENTS;
        };
        let memories = self.cubes[cube].as_deref().unwrap_or_default();
        memories.get(memory).unwrap_or(&NO_EXTENTS)
    }

    /// The extent that starts last at or before `addr`, in its memory.
    #[inline(always)]
    fn at_or_before(&self, map: &AddressMap, addr: u64) -> Option<(u64, u64)> {
        let extents = self.of(map, addr);
        // A memory holds a few regions (a kernel's tensors, an IPCQ's
        // slots): a scan from the top beats a binary search over them.
        if extents.len() <= 4 {
            return extents
                .iter()
                .rev()
                .find(|&&(start, _)| start <= addr)
                .copied();
        }
        let after = extents.partition_point(|&(start, _)| start <= addr);
        after.checked_sub(1).map(|index| extents[index])
    }

    /// The extent that starts last before `end`, in the memory of `addr`
    /// (`addr < end`, both in one memory).
    fn last_before(&self, map: &AddressMap, addr: u64, end: u64) -> Option<(u64, u64)> {
        let extents = self.of(map, addr);
        let below_end = extents.partition_point(|&(start, _)| start < end);
        below_end.checked_sub(1).map(|index| extents[index])
    }

    /// Adds the extent of a region of a memory of the machine (checked by
    /// [`MemoryStore::map`]).
    fn insert(&mut self, map: &AddressMap, addr: u64, len: u64) {
        let (cube, memory) = map.memory_slot(addr).expect("mapped in a memory");
        let memories = self.cubes[cube]
            .get_or_insert_with(|| vec![VecDeque::new(); self.memories].into_boxed_slice());
        let extents = &mut memories[memory];
        let at = extents.partition_point(|&(start, _)| start < addr);
        extents.insert(at, (addr, len));
    }

    fn remove(&mut self, map: &AddressMap, addr: u64) {
        let Some((cube, memory)) = map.memory_slot(addr) else {
            return;
        };
        if let Some(memories) = self.cubes[cube].as_deref_mut() {
            let extents = &mut memories[memory];
            let at = extents.partition_point(|&(start, _)| start < addr);
            extents.remove(at);
        }
    }
}

impl fmt::Debug for Extents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots = self.cubes.iter().enumerate();
        let memories = slots.filter_map(|(cube, m)| Some((cube, m.as_deref()?)));
        let extents = memories.flat_map(|(cube, memories)| {
            let memories = memories.iter().enumerate();
            memories
                .filter(|(_, e)| !e.is_empty())
                .map(move |(m, e)| ((cube, m), e))
        });
        f.debug_map().entries(extents).finish()
    }
}

impl MemoryStore {
    /// An empty store that keeps bytes.
    pub fn new(map: AddressMap) -> Self {
        Self::with_mode(map, DataMode::On)
    }

    /// An empty store that keeps no bytes (timing-only runs).
    pub fn timing_only(map: AddressMap) -> Self {
        Self::with_mode(map, DataMode::Off)
    }

    /// An empty store in `mode`.
    pub fn with_mode(map: AddressMap, mode: DataMode) -> Self {
        MemoryStore {
            extents: Extents::new(&map),
            map,
            mode,
            regions: BTreeMap::new(),
            epoch: Epoch::fresh(),
        }
    }

    /// An empty store with this one's address map and mode (for replay).
    pub fn fresh(&self) -> Self {
        Self::with_mode(self.map.clone(), self.mode)
    }

    /// Whether bytes are kept.
    pub fn mode(&self) -> DataMode {
        self.mode
    }

    /// The machine's address map.
    pub fn address_map(&self) -> &AddressMap {
        &self.map
    }

    /// Bytes held in allocated pages (0 with data off).
    pub fn resident_bytes(&self) -> u64 {
        self.regions
            .values()
            .map(|r| r.bytes.resident() as u64)
            .sum()
    }

    /// Mapped regions in address order.
    pub fn regions(&self) -> impl Iterator<Item = RegionView> {
        self.regions.iter().map(|(&addr, region)| RegionView {
            addr,
            len: region.len,
        })
    }

    /// Maps `len` zeroed bytes at `addr`; the range must lie in one memory
    /// and overlap no mapped region.
    pub fn map(&mut self, addr: u64, len: u64) -> Result<(), StoreError> {
        if len == 0 {
            return Err(StoreError::ZeroLength { addr });
        }
        self.check_inside_memory(addr, len)?;
        if let Some((region, region_len)) = self.extents.last_before(&self.map, addr, addr + len)
            && region + region_len > addr
        {
            return Err(StoreError::Overlaps {
                addr,
                len,
                region,
                region_len,
            });
        }
        let bytes = match self.mode {
            DataMode::On => Pages::zeroed(buffer_len(len)),
            DataMode::Off => Pages::zeroed(0),
        };
        self.regions.insert(addr, Region { len, bytes });
        self.extents.insert(&self.map, addr, len);
        Ok(())
    }

    /// Unmaps the region that starts at `addr`; returns its length.
    pub fn unmap(&mut self, addr: u64) -> Result<u64, StoreError> {
        let region = self
            .regions
            .remove(&addr)
            .ok_or(StoreError::NotARegion { addr })?;
        self.extents.remove(&self.map, addr);
        self.epoch = Epoch::fresh();
        Ok(region.len)
    }

    /// Errors unless `[addr, addr + len)` lies in one mapped region. An
    /// empty range touches nothing and always passes.
    pub fn check(&self, addr: u64, len: u64) -> Result<(), StoreError> {
        self.locate(addr, len).map(|_| ())
    }

    /// The bytes at `[addr, addr + len)`; [`StoreError::DataOff`] with data
    /// off (after the addresses are checked).
    pub fn read(&self, addr: u64, len: u64) -> Result<Cow<'_, [u8]>, StoreError> {
        self.bytes(addr, len)?
            .ok_or(StoreError::DataOff { addr, len })
    }

    /// Writes `data` at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), StoreError> {
        if let Some((region, at)) = self.located_mut(addr, data.len() as u64)? {
            region.bytes.write(at, data);
        }
        Ok(())
    }

    /// Sets `len` bytes at `addr` to `value`.
    pub fn fill(&mut self, addr: u64, len: u64, value: u8) -> Result<(), StoreError> {
        if let Some((region, at)) = self.located_mut(addr, len)? {
            region.bytes.fill(at, buffer_len(len), value);
        }
        Ok(())
    }

    /// Copies `len` bytes from `src` to `dst`, within a memory or across
    /// memories. Overlapping ranges behave as if the source were read
    /// whole first.
    pub fn copy(&mut self, src: u64, dst: u64, len: u64) -> Result<(), StoreError> {
        let (from, from_at) = self.locate(src, len)?;
        let (to, to_at) = self.locate(dst, len)?;
        if self.mode == DataMode::Off || len == 0 {
            return Ok(());
        }
        let data = self.regions[&from].bytes.read(from_at, buffer_len(len));
        let data = data.into_owned();
        let region = self.regions.get_mut(&to).expect("located regions exist");
        region.bytes.write(to_at, &data);
        Ok(())
    }

    /// Copies the runs of `shape` from `src` to `dst` (ADR-0112): the
    /// shape is checked, then every run of both sides (all at once when a
    /// side's span lies in one region, else run by run, the first refused
    /// run's address named), and with data on every source run is read
    /// before any is written (overlapping sides behave as
    /// [`copy`](Self::copy)'s do).
    pub fn copy_strided(&mut self, src: u64, dst: u64, shape: &Strided) -> Result<(), StoreError> {
        shape.check(src, dst)?;
        let sides = [
            (src, shape.src_stride, shape.src_span()),
            (dst, shape.dst_stride, shape.dst_span()),
        ];
        for (base, stride, span) in sides {
            if self.check(base, span).is_err() {
                for start in shape.starts(base, stride) {
                    self.check(start, shape.run)?;
                }
            }
        }
        if self.mode == DataMode::Off {
            return Ok(());
        }
        let mut data = Vec::with_capacity(buffer_len(shape.bytes()));
        for start in shape.starts(src, shape.src_stride) {
            let (from, at) = self.locate(start, shape.run)?;
            data.extend_from_slice(&self.regions[&from].bytes.read(at, buffer_len(shape.run)));
        }
        let runs = data.chunks_exact(buffer_len(shape.run));
        for (start, run) in shape.starts(dst, shape.dst_stride).zip(runs) {
            self.write(start, run)?;
        }
        Ok(())
    }

    /// [`check`](Self::check) of `len` bytes at each of `addrs`, in
    /// order; an address given twice (an in-place op's operand and
    /// result) is checked once.
    pub(super) fn check_each(&self, addrs: &[u64], len: u64) -> Result<(), StoreError> {
        for (index, &addr) in addrs.iter().enumerate() {
            if !addrs[..index].contains(&addr) {
                self.check(addr, len)?;
            }
        }
        Ok(())
    }

    /// [`check_each`](Self::check_each) by a caller that remembers where
    /// its last op's operands were (`memo`): operands inside those regions
    /// are not looked up, while no region has been unmapped since. Any
    /// other is checked in full, as `check_each` does, errors included,
    /// and `memo` then remembers the regions found.
    #[inline(always)]
    pub(super) fn check_remembered(
        &self,
        addrs: &[u64],
        len: u64,
        memo: &Cell<RegionMemo>,
    ) -> Result<(), StoreError> {
        let known = memo.get();
        if known.epoch == self.epoch.0 && addrs.iter().all(|&addr| known.holds(addr, len)) {
            return Ok(());
        }
        self.check_and_remember(addrs, len, memo)
    }

    /// [`check_remembered`](Self::check_remembered) when `memo` does not
    /// answer: every operand looked up, out of its inlined fast path.
    #[inline(never)]
    fn check_and_remember(
        &self,
        addrs: &[u64],
        len: u64,
        memo: &Cell<RegionMemo>,
    ) -> Result<(), StoreError> {
        let mut found = RegionMemo {
            epoch: self.epoch.0,
            ..RegionMemo::default()
        };
        for &addr in addrs {
            if let Some(extent) = self.extent_of(addr, len)? {
                found.note(extent);
            }
        }
        memo.set(found);
        Ok(())
    }

    /// The first difference from `other`: regions (addresses and lengths)
    /// always, bytes when both stores keep them. `None` if they agree.
    pub fn diff(&self, other: &MemoryStore) -> Option<StoreDiff> {
        let mut left = self.regions.iter();
        let mut right = other.regions.iter();
        loop {
            let (l, r) = (left.next(), right.next());
            if l.is_none() && r.is_none() {
                return None;
            }
            let bytes_kept = self.mode == DataMode::On && other.mode == DataMode::On;
            if let Some(diff) = self.diff_regions(l, r, bytes_kept) {
                return Some(diff);
            }
        }
    }

    /// The bytes at `[addr, addr + len)` after checking them; `None` with
    /// data off.
    pub(super) fn bytes(&self, addr: u64, len: u64) -> Result<Option<Cow<'_, [u8]>>, StoreError> {
        let (region, at) = self.locate(addr, len)?;
        match self.mode {
            DataMode::Off => Ok(None),
            DataMode::On if len == 0 => Ok(Some(Cow::Borrowed(&[]))),
            DataMode::On => Ok(Some(self.regions[&region].bytes.read(at, buffer_len(len)))),
        }
    }

    /// The region holding `[addr, addr + len)` and `addr`'s offset in it,
    /// after checking them; `None` with data off or nothing to touch.
    fn located_mut(
        &mut self,
        addr: u64,
        len: u64,
    ) -> Result<Option<(&mut Region, usize)>, StoreError> {
        let (region, at) = self.locate(addr, len)?;
        if self.mode == DataMode::Off || len == 0 {
            return Ok(None);
        }
        let region = self
            .regions
            .get_mut(&region)
            .expect("located regions exist");
        Ok(Some((region, at)))
    }

    /// The region holding `[addr, addr + len)` and `addr`'s index in it.
    #[inline(always)]
    fn locate(&self, addr: u64, len: u64) -> Result<(u64, usize), StoreError> {
        Ok(match self.extent_of(addr, len)? {
            Some((region, _)) => (region, buffer_len(addr - region)),
            None => (addr, 0),
        })
    }

    /// The extent `(start, len)` of the region holding `[addr, addr +
    /// len)`; `None` for an empty range outside every region.
    #[inline(always)]
    fn extent_of(&self, addr: u64, len: u64) -> Result<Option<(u64, u64)>, StoreError> {
        match self.extents.at_or_before(&self.map, addr) {
            Some((region, region_len))
                if addr - region < region_len && len <= region_len - (addr - region) =>
            {
                Ok(Some((region, region_len)))
            }
            _ if len == 0 => Ok(None),
            found => Err(self.locate_error(addr, len, found)),
        }
    }

    /// Why `[addr, addr + len)` is not in one region, `found` being the
    /// region that starts last at or before `addr`.
    #[cold]
    fn locate_error(&self, addr: u64, len: u64, found: Option<(u64, u64)>) -> StoreError {
        let (space, offset) = match self.map.decode(addr) {
            Ok(decoded) => decoded,
            Err(error) => return error.into(),
        };
        match found.filter(|&(start, region_len)| addr - start < region_len) {
            Some((region, region_len)) => StoreError::Straddles {
                addr,
                len,
                space,
                region,
                region_len,
            },
            None => StoreError::Unmapped {
                addr,
                space,
                offset,
            },
        }
    }

    fn check_inside_memory(&self, addr: u64, len: u64) -> Result<(), StoreError> {
        let (space, offset) = self.map.decode(addr)?;
        let capacity = self.map.capacity(space);
        if len > capacity - offset {
            return Err(StoreError::OutsideMemory {
                addr,
                len,
                space,
                capacity,
            });
        }
        Ok(())
    }

    /// The difference between the `n`th regions of two stores, if any.
    fn diff_regions(
        &self,
        left: Option<(&u64, &Region)>,
        right: Option<(&u64, &Region)>,
        bytes_kept: bool,
    ) -> Option<StoreDiff> {
        let layout = |addr, left: Option<u64>, right: Option<u64>| {
            Some(StoreDiff::Layout { addr, left, right })
        };
        match (left, right) {
            (Some((&l, lr)), Some((&r, rr))) if (l, lr.len) == (r, rr.len) => {
                bytes_kept.then(|| self.diff_bytes(l, lr, rr)).flatten()
            }
            (Some((&l, lr)), Some((&r, rr))) if l == r => layout(l, Some(lr.len), Some(rr.len)),
            (Some((&l, lr)), Some((&r, _))) if l < r => layout(l, Some(lr.len), None),
            (_, Some((&r, rr))) => layout(r, None, Some(rr.len)),
            (Some((&l, lr)), None) => layout(l, Some(lr.len), None),
            (None, None) => None,
        }
    }

    /// The first byte that differs between two regions mapped at `addr`.
    fn diff_bytes(&self, addr: u64, left: &Region, right: &Region) -> Option<StoreDiff> {
        let (at, left, right) = left.bytes.first_difference(&right.bytes)?;
        let addr = addr + at as u64;
        let (space, _) = self.map.decode(addr).ok()?;
        Some(StoreDiff::Byte {
            addr,
            space,
            left,
            right,
        })
    }
}

/// A length already checked against a region, as `usize`.
fn buffer_len(len: u64) -> usize {
    usize::try_from(len).expect("a region's length fits in memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySpec;

    fn map() -> AddressMap {
        AddressMap::new(&TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()).unwrap()
    }

    fn at(space: MemSpace, offset: u64) -> u64 {
        map().encode(space, offset).unwrap()
    }

    const HBM: MemSpace = MemSpace::Hbm { sip: 0, cube: 1 };
    const TCM: MemSpace = MemSpace::Tcm {
        sip: 1,
        cube: 0,
        pe: 3,
    };

    /// Issue 40 item 12: 400,000 regions of one memory freed oldest first
    /// (a trace's independent transfers) moved every later extent at each
    /// unmap: 30 s in a debug build; now 0.3 s. The bound only catches the
    /// quadratic case.
    #[test]
    fn regions_freed_oldest_first_cost_no_move_of_the_others() {
        let (map, started) = (map(), std::time::Instant::now());
        let base = map.encode(HBM, 0).unwrap();
        let mut store = MemoryStore::timing_only(map);
        let count = 400_000;
        for i in 0..count {
            store.map(base + i * 64, 64).unwrap();
        }
        for i in 0..count {
            assert_eq!(store.unmap(base + i * 64).unwrap(), 64);
        }
        assert!(store.check(base, 1).is_err());
        let took = started.elapsed();
        assert!(took.as_secs() < 10, "{count} regions took {took:?}");
    }

    #[test]
    fn regions_are_zeroed_and_disjoint() {
        let mut store = MemoryStore::new(map());
        store.map(at(HBM, 0x100), 0x100).unwrap();
        assert_eq!(&*store.read(at(HBM, 0x1f0), 16).unwrap(), [0; 16]);
        assert_eq!(store.resident_bytes(), 0, "no page until a non-zero write");
        store.write(at(HBM, 0x1f0), &[1]).unwrap();
        assert_eq!(store.resident_bytes(), 0x100, "one (short) page");
        let err = store.map(at(HBM, 0x80), 0x81).unwrap_err();
        assert!(matches!(err, StoreError::Overlaps { region, .. } if region == at(HBM, 0x100)));
        store.map(at(HBM, 0x80), 0x80).unwrap();
        store.map(at(HBM, 0x200), 1).unwrap();
        assert!(matches!(
            store.map(at(HBM, 0), 0),
            Err(StoreError::ZeroLength { .. })
        ));
        let capacity = map().capacity(TCM);
        let err = store.map(at(TCM, capacity - 4), 8).unwrap_err();
        assert!(
            matches!(err, StoreError::OutsideMemory { space: TCM, .. }),
            "{err}"
        );
    }

    #[test]
    fn unmapped_and_straddling_accesses_name_address_and_memory() {
        let mut store = MemoryStore::new(map());
        store.map(at(TCM, 0), 64).unwrap();
        let err = store.write(at(TCM, 64), &[1]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "address 0x0100130000000040 (sip1.cube0.pe3.tcm offset 0x40) is not mapped"
        );
        let err = store.read(at(TCM, 60), 8).unwrap_err();
        assert_eq!(
            err.to_string(),
            "8 bytes at 0x010013000000003c (sip1.cube0.pe3.tcm) straddle the end of the \
             region mapped at 0x0100130000000000 (64 bytes)"
        );
        assert!(matches!(
            store.read(0x0000_0200_0000_0000, 1),
            Err(StoreError::Address(_))
        ));
        assert_eq!(store.unmap(at(TCM, 0)).unwrap(), 64);
        assert!(matches!(
            store.unmap(at(TCM, 0)),
            Err(StoreError::NotARegion { .. })
        ));
    }

    #[test]
    fn a_region_memo_answers_as_the_checks_until_a_region_is_unmapped() {
        let mut store = MemoryStore::timing_only(map());
        let (slots, tile) = (at(TCM, 0), at(TCM, 0x100));
        store.map(slots, 64).unwrap();
        store.map(tile, 0x100).unwrap();
        let memo = Cell::new(RegionMemo::default());
        store
            .check_remembered(&[tile + 8, slots], 16, &memo)
            .unwrap();
        // Both regions remembered: another copy between them is not looked up.
        assert!(memo.get().holds(tile + 0xf0, 16) && memo.get().holds(slots + 48, 16));
        store
            .check_remembered(&[tile + 0xf0, slots + 48], 16, &memo)
            .unwrap();
        // Past a region's end: refused as `check` refuses it.
        let err = store.check_remembered(&[tile, slots + 56], 16, &memo);
        assert_eq!(err, store.check(slots + 56, 16));
        assert!(matches!(err, Err(StoreError::Straddles { .. })));
        store.check_remembered(&[tile, slots], 16, &memo).unwrap();
        // Unmapped since: a use after free is refused, memo or not.
        store.unmap(slots).unwrap();
        let err = store
            .check_remembered(&[tile, slots], 16, &memo)
            .unwrap_err();
        assert!(matches!(err, StoreError::Unmapped { addr, .. } if addr == slots));
        // A clone has an epoch of its own; it equals its original.
        let clone = store.clone();
        assert_eq!(clone, store);
        assert_ne!(clone.epoch.0, store.epoch.0);
    }

    #[test]
    fn accesses_find_their_region_among_regions_mapped_in_any_order() {
        let mut store = MemoryStore::timing_only(map());
        for offset in [0x300, 0x100, 0x500, 0x200] {
            store.map(at(HBM, offset), 0x80).unwrap();
        }
        store.unmap(at(HBM, 0x300)).unwrap();
        // 16 bytes at each offset: inside a region, or not.
        let expect = [
            (0x0f8, false),
            (0x100, true),
            (0x170, true),
            (0x171, false),
            (0x180, false),
            (0x200, true),
            (0x300, false),
            (0x370, false),
            (0x500, true),
            (0x570, true),
            (0x580, false),
        ];
        for (offset, inside) in expect {
            let found = store.check(at(HBM, offset), 16).is_ok();
            assert_eq!(found, inside, "{offset:#x}");
        }
    }

    #[test]
    fn a_region_is_found_only_in_its_own_memory() {
        let mut store = MemoryStore::timing_only(map());
        let sram = MemSpace::Sram { sip: 0, cube: 1 };
        // The same offsets in two memories; a third memory has none.
        for space in [HBM, TCM] {
            store.map(at(space, 0x100), 0x80).unwrap();
        }
        let expect = [(HBM, true), (TCM, true), (sram, false)];
        for (space, inside) in expect {
            let found = store.check(at(space, 0x140), 16);
            assert_eq!(found.is_ok(), inside, "{space}: {found:?}");
        }
        store.unmap(at(HBM, 0x100)).unwrap();
        assert!(store.check(at(HBM, 0x140), 16).is_err());
        assert!(store.check(at(TCM, 0x140), 16).is_ok());
        // Overlaps are looked for in the region's own memory.
        assert!(store.map(at(TCM, 0x80), 0x100).is_err());
        assert!(store.map(at(HBM, 0x80), 0x100).is_ok());
    }

    #[test]
    fn a_freed_or_remapped_region_is_checked_anew() {
        let mut store = MemoryStore::timing_only(map());
        let hbm = at(HBM, 0x1000);
        store.map(hbm, 0x100).unwrap();
        store.copy(hbm, hbm + 0x80, 0x80).unwrap();
        store.unmap(hbm).unwrap();
        assert!(matches!(
            store.copy(hbm, hbm + 0x80, 0x80),
            Err(StoreError::Unmapped { .. })
        ));
        store.map(hbm, 0x80).unwrap();
        assert!(matches!(
            store.check(hbm + 0x40, 0x80),
            Err(StoreError::Straddles { .. })
        ));
        let host = map().encode(MemSpace::Host, 0x40).unwrap();
        assert!(store.check(host, 8).is_err());
        store.map(host, 8).unwrap();
        store.check(host, 8).unwrap();
        assert!(matches!(
            store.check(0x0001_0800_0000_0000, 1),
            Err(StoreError::Address(_))
        ));
    }

    #[test]
    fn copy_within_and_across_memories() {
        let mut store = MemoryStore::new(map());
        let (hbm, tcm) = (at(HBM, 0), at(TCM, 0));
        store.map(hbm, 8).unwrap();
        store.map(tcm, 8).unwrap();
        store.write(hbm, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        store.copy(hbm, hbm + 2, 6).unwrap();
        assert_eq!(&*store.read(hbm, 8).unwrap(), [1, 2, 1, 2, 3, 4, 5, 6]);
        store.copy(hbm + 4, tcm + 1, 4).unwrap();
        store.fill(tcm + 5, 3, 9).unwrap();
        assert_eq!(&*store.read(tcm, 8).unwrap(), [0, 3, 4, 5, 6, 9, 9, 9]);
        store.copy(hbm, tcm, 0).unwrap();
    }

    #[test]
    fn timing_only_checks_the_same_addresses_and_keeps_no_bytes() {
        let mut store = MemoryStore::timing_only(map());
        let hbm = at(HBM, 0);
        store.map(hbm, 64 << 20).unwrap();
        store.write(hbm, &[1; 16]).unwrap();
        store.copy(hbm, hbm + 16, 16).unwrap();
        assert_eq!(store.resident_bytes(), 0);
        assert_eq!(
            store.read(hbm, 4).unwrap_err(),
            StoreError::DataOff { addr: hbm, len: 4 }
        );
        assert!(matches!(
            store.copy(hbm, hbm + (64 << 20) - 8, 16),
            Err(StoreError::Straddles { .. })
        ));
        assert_eq!(store.regions().next().unwrap().len, 64 << 20);
    }

    #[test]
    fn diff_reports_the_first_difference() {
        let mut left = MemoryStore::new(map());
        left.map(at(HBM, 0), 4).unwrap();
        let mut right = left.clone();
        assert_eq!(left.diff(&right), None);
        right.write(at(HBM, 2), &[7]).unwrap();
        assert_eq!(
            left.diff(&right).unwrap().to_string(),
            "byte at 0x0001000000000002 (sip0.cube1.hbm): 0x00 on the left, 0x07 on the right"
        );
        right.map(at(TCM, 0), 4).unwrap();
        left.map(at(HBM, 8), 4).unwrap();
        left.write(at(HBM, 2), &[7]).unwrap();
        assert_eq!(
            left.diff(&right),
            Some(StoreDiff::Layout {
                addr: at(HBM, 8),
                left: Some(4),
                right: None
            })
        );
        let timing = MemoryStore::timing_only(map());
        assert!(matches!(
            timing.diff(&right),
            Some(StoreDiff::Layout { left: None, .. })
        ));
    }
}
