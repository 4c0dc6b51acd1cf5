//! The kernel-side API (seed ADR-0046): what one PE program calls.
//!
//! A kernel ([`Kernel`]) is an `async` function of a [`Tl`] and typed
//! arguments, returning `Result<T, KernelError>`; a launch
//! (`runtime::launch`) runs one program per PE of its grid, each with its
//! own `Tl`. Everything a `Tl` call does happens on the program's PE, is
//! timed by the machine model, moves real bytes when data is on, and is
//! recorded in the device's op log:
//!
//! | call | unit | time |
//! |---|---|---|
//! | `program_id(axis)`, `num_programs(axis)`, `coord()` | — | — |
//! | `view(addr, shape, dtype)`: a handle, nothing moves | — | — |
//! | `alloc(shape, dtype)`, `free(&h)`: TCM scratch | allocator | untimed |
//! | `load(src, shape, dtype)` → TCM, `store(dst, &h)` | PE_DMA | `Device::dma_copy_formula` |
//! | `copy_strided(src, dst, Strided)`: rows of runs, one job (ADR-0112) | PE_DMA | `Device::dma_copy_formula` of `CopyJob::timed_len` |
//! | `dot(&a, &b)`, `dot_acc(&acc, &a, &b)` | PE_GEMM | `hw::gemm_formula` |
//! | `composite(&a, &b, &[Epilogue])` → token, `token.wait()` | PE_GEMM → PE_MATH | `hw::pipeline_formula` |
//! | `add`, `sub`, `mul`, `maximum`, `add_assign`, `exp`, `relu`, `gelu`, `scale`, `cast` | PE_MATH | `hw::math_formula` |
//! | `sum(&x, axis)`, `max(&x, axis)` | PE_MATH | `hw::math_formula` |
//! | `phase(name)` → guard: a named span on the PE's trace track | — | — |
//!
//! Results of `load` and of compute calls are new scratch tensors in the
//! PE's TCM ([`TensorHandle`]); PE_GEMM and PE_MATH work only on this
//! PE's TCM. Scratch still live when the kernel ends is freed then, after
//! any composite nobody waited for has finished.
//!
//! IPCQ ([`ipcq`]): `send(dir, &h)` / `send_raw` (PE_DMA into the peer's
//! slot plus a doorbell), `recv` (the slot itself), `recv_into`,
//! `recv_any`, `recv_async` / `wait`, `release`, on the network the launch
//! attached ([`IpcqNetwork`]).
//!
//! Knows the PE side only: nothing of torch, host tensors or placement, and
//! nothing of collective algorithms or neighbour tables.

mod context;
mod error;
mod gemm;
mod handle;
pub mod ipcq;
mod kernel;
mod math;
mod phase;
mod scratch;

pub use context::{Grid, PeCoord, Tl};
pub use error::KernelError;
pub use gemm::{CompositeToken, Epilogue};
pub use handle::{Address, Shape, TensorHandle};
pub use ipcq::{
    Backpressure, Dir, IpcqError, IpcqNetwork, IpcqParams, RecvFuture, RingSpec, SendArgs,
    pointer_dump,
};
pub use kernel::{Kernel, KernelRegistry, RegistryError};
pub use phase::Phase;
