//! Host-side API: what PyTorch-DDP-like host code calls.
//!
//! - [`worker`]: the per-worker rank and device registry (task-local).
//! - [`torch`]: the [`Torch`] facade (`torch.zeros`, `torch.ahbm.set_device`,
//!   `torch.accelerator.set_device_index`) and the tensors' VA space.
//! - [`placement`]: [`DPPolicy`] → [`ShardSpec`]s in structural
//!   `(sip, cube, pe)` coordinates (seed ADR-0026).
//! - [`tensor`]: [`Tensor`]s in HBM, H2D / D2H through M_CPU.DMA.
//! - [`launch`], [`ranks`]: kernel launch and the rank = SIP launcher.
//! - [`job`]: which SIP each rank of a world runs on (the machine's world,
//!   or a job's SIPs under `run --jobs`).
//! - [`distributed`]: `torch.distributed`, the `ahbm` process group
//!   (`init_process_group`, the collectives, `send` / `recv`, `barrier`);
//!   [`work`]: the [`Work`] handle of an `async_op` collective, `isend`
//!   and `irecv`; `p2p`: the mailbox where sends meet recvs.
//!
//! This module may use every layer below it; nothing below may use it.

pub mod distributed;
pub mod job;
pub mod launch;
mod p2p;
pub mod placement;
mod plan;
pub mod ranks;
pub mod tensor;
pub mod testing;
pub mod torch;
pub mod work;
pub mod worker;

pub use distributed::{DistError, Distributed, ListMismatch, ReduceOp, check_config};
pub use job::JobSips;
pub use placement::{DPPolicy, PlacementError, ShardSpec, Split};
pub use ranks::{RankError, spawn};
pub use tensor::{Element, Shard, Tensor, TensorError};
pub use torch::{Accelerator, Ahbm, TENSOR_PAGE_SIZE, Torch};
pub use work::Work;
pub use worker::{current_device, get_rank, in_worker, scope_rank, set_device};
