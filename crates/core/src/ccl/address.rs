//! Where a collective's bytes are, in two types that do not mix
//! (ADR-0054): a [`DevAddr`] is a device address (what PE DMAs and every
//! `tl` call take), a [`TileOffset`] a byte offset from a tile's first
//! element (what a [`TileView`](super::helpers::TileView) holds). The
//! only way from one to the other is `addr + offset`: an offset passed
//! where an address is wanted, an address used as a view's start or two
//! addresses added do not compile.
//!
//! Knows `tl`'s `Address` (which a `DevAddr` is); nothing of kernels.

use std::ops::Add;

use crate::tl::{Address, TensorHandle};

/// A device address: a cube's tile ([`KernelArgs::tile_addr`](super::KernelArgs::tile_addr)),
/// a tensor handle's first element ([`DevAddr::of`]), or one of those plus
/// a [`TileOffset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevAddr(pub u64);

impl DevAddr {
    /// The address of `handle`'s first element.
    pub fn of(handle: &TensorHandle) -> DevAddr {
        DevAddr(handle.addr())
    }
}

impl Address for DevAddr {
    fn address(&self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for DevAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

/// A byte offset from a tile's first element (never an address: add it
/// to the tile's [`DevAddr`] to reach memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TileOffset(pub u64);

impl TileOffset {
    /// The tile's first element.
    pub const ZERO: TileOffset = TileOffset(0);
}

/// The byte `offset` into the tile at `self`.
impl Add<TileOffset> for DevAddr {
    type Output = DevAddr;

    fn add(self, offset: TileOffset) -> DevAddr {
        DevAddr(self.0 + offset.0)
    }
}

/// An offset into a part of a tile, from the tile's start.
impl Add for TileOffset {
    type Output = TileOffset;

    fn add(self, other: TileOffset) -> TileOffset {
        TileOffset(self.0 + other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_moves_an_address_and_nests_in_another_offset() {
        let tile = DevAddr(0x4000);
        let part = TileOffset(0x100) + TileOffset(0x20);
        assert_eq!(tile + part, DevAddr(0x4120));
        assert_eq!((tile + part).address(), 0x4120);
        assert_eq!(DevAddr(0x4120).to_string(), "0x0000000000004120");
    }
}
