//! Host-side API: what PyTorch-DDP-like host code calls. For now, the
//! per-worker rank and device registry; the torch facade, tensors,
//! placement and launch build on it.
//!
//! This module may use every layer below it; nothing below may use it.

pub mod ranks;
pub mod worker;

pub use ranks::{RankError, spawn};
pub use worker::{current_device, get_rank, in_worker, scope_rank, set_device};
