//! Memory: who owns which bytes, what the bytes are, and what happened to
//! them.
//!
//! - [`FirstFitAllocator`] (seed ADR-0048's `PEMemAllocator`): first-fit with
//!   coalescing over one memory; [`DeviceAllocators`] holds one per
//!   [`MemSpace`](crate::topology::MemSpace) of a machine and speaks device
//!   addresses.
//! - [`VirtualAllocator`]: page-aligned virtual ranges whose pages map to
//!   runs of physical pages ([`Extent`]) in any memories.
//! - [`MemoryStore`]: the bytes, one contiguous buffer per mapped region;
//!   with data off it keeps extents only.
//! - [`Op`] and [`OpLog`] (seed ADR-0052): typed operations on memory, logged
//!   in the order they took effect, and the replay that verifies the final
//!   memory; [`Strided`], the shape of a strided copy and its checks
//!   (ADR-0112).
//!
//! Addresses are the device addresses of [`AddressMap`](crate::topology::AddressMap).
//! This module knows nothing of latency models, routing, links, kernels or
//! torch: callers decide *when* an op happens and which unit runs it; this
//! module only says what it does to memory. Everything is deterministic
//! (`BTreeMap`s where anything is iterated, no clocks; the store finds an
//! address's memory by the address's fields, never by a hash).

mod alloc;
mod compute;
mod device;
mod op;
mod oplog;
mod pages;
mod store;
mod strided;
mod virt;

pub use alloc::{AllocError, FirstFitAllocator};
pub use device::{DeviceAllocError, DeviceAllocators};
pub use op::{AddrRange, BinaryFn, DType, Op, Payload, ReduceFn, Scalar, UnaryFn};
pub use oplog::{OpId, OpLog, OpLogError, OpRecord, ReplayError, VerifyError};
pub use store::{DataMode, MemoryStore, RegionMemo, RegionView, StoreDiff, StoreError};
pub use strided::{Strided, StridedError};
pub use virt::{DEFAULT_PAGE_SIZE, Extent, Segment, VaError, VirtualAllocator};
