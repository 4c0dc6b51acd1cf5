//! What the algorithms of `algorithms/` share, so that a new one is short
//! (author guide §5):
//!
//! - **tile views**: [`split_tile`] splits a tile into [`TileView`]s
//!   (a [`TileOffset`], never a [`DevAddr`]): pipelining chunks, reduce-scatter /
//!   all-gather parts, put pieces; [`chunk_count`] turns a ccl.yaml
//!   `chunk` size into a number of chunks;
//! - **reduce-then-broadcast trees**: an endpoint's [`TreeLinks`] (the
//!   direction of its parent and of its children) built from a binary tree
//!   ([`binary_tree`]) or from lines ([`Line`], [`hierarchy`]: a row of
//!   cubes, then a column, then SIP dimensions), and [`reduce_broadcast`],
//!   which runs any such tree chunk by chunk, pipelined;
//! - **rings**: [`Ring`] reduce-scatter and all-gather steps
//!   ([`ring_step`]);
//! - **one-sided puts** (`p2p_copy`, `p2p_gather`, `p2p_scatter`;
//!   ADR-0019, ADR-0020): [`put_tile`] copies a cube's tile into its
//!   `out_tiles` address in DMA pieces of at most `params.piece`
//!   ([`PIECE_PARAMS`]).
//!
//! - **two levels** (ADR-0090): [`cube_tree`], [`sip_lines`],
//!   [`line_allgather`], [`line_reduce_scatter`], [`spread_down`]: inside
//!   each SIP towards one leader cube, then between the SIPs' leaders.
//!
//! One file per theme: `tiles` (views and the tile an endpoint owns),
//! `chunking` (pipelining), `trees`, `rings` (and pairwise exchanges),
//! `doubling`, `puts`, `leaders`; everything is re-exported here, so algorithms name
//! `ccl::helpers::X` whatever file holds it.
//!
//! Every helper computes each element's sum exactly once, at one endpoint,
//! and moves those bytes to the others, so every endpoint ends with the
//! same bits (floating-point addition is commutative but not associative:
//! two endpoints adding the same values in different orders would differ).

use std::future::Future;

use crate::mem::DType;
use crate::sim::SimDuration;
use crate::tl::{Dir, KernelError, TensorHandle, Tl};

use crate::topology::{GridPos, SipArrangement};

use super::address::{DevAddr, TileOffset};
use super::algorithm::{ArgError, KernelArgs, Unsupported, finish, reduce_received};
use super::collective::{ParamKind, ParamSpec, Params, ReduceOp};
use super::cost::{CostError, Network};
use super::topology::NeighborMap;

mod chunking;
mod doubling;
mod leaders;
mod puts;
mod rings;
mod tiles;
mod trees;

pub use chunking::*;
pub use doubling::*;
pub use leaders::*;
pub use puts::*;
pub use rings::*;
pub use tiles::*;
pub use trees::*;
