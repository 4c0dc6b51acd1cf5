//! kernbench-core: the simulator without its front end. Everything a run
//! needs, from the executor to the named workloads, and the main job
//! (`src/bin/allreduce.rs`). The `kernbench` crate above it adds the CLI,
//! the harness (sweeps, reports, figures, the web server) and `probe`, and
//! re-exports every module here under the same name: `kernbench::sim` is
//! this crate's `sim` (ADR-0120).
//!
//! The layers, from the top down to the bedrock (dependencies point
//! downwards only):
//!
//! - [`chakra`]: Chakra execution traces read, checked and replayed as
//!   workloads.
//! - [`workloads`]: the named runs of `kernbench run --bench NAME`, one file
//!   each in `workloads/` (`ccl_allreduce`, `gemm_single_pe`,
//!   `va_offset_verify`, ...), their parameters and their reports.
//! - [`runtime`]: host-side API for PyTorch-DDP-like code: the [`runtime::Torch`]
//!   facade, tensors and their placement ([`runtime::DPPolicy`]), kernel
//!   launch, the per-worker rank and device registry (task-local storage),
//!   and `torch.distributed` ([`runtime::Distributed`], the `ahbm` process group).
//! - [`tl`]: the kernel-side API: the [`tl::Tl`] context of one PE
//!   program (`load`, `store`, `dot`, `composite`, math, reductions),
//!   [`tl::Kernel`]s and their registry.
//! - [`ccl`]: collective communication: the typed `ccl.yaml`
//!   ([`ccl::CclConfig`]), neighbour tables and endpoints, the algorithm
//!   contract ([`ccl::CclAlgorithm`]) and the registry of `algorithms/`.
//! - [`device`]: the timed hardware joined with the bytes it moves: DMA
//!   copies that are timed, applied to memory and logged together.
//! - [`mem`]: allocators (physical and virtual), the byte store and the op
//!   log whose replay verifies the final memory.
//! - [`hw`]: hardware components and their latency models: links and
//!   packetised transfers, HBM, SRAM/TCM, DMA engines, M_CPU, IO_CPU,
//!   PE_GEMM and PE_MATH.
//! - [`topology`]: the machine description: the validated `topology.yaml`
//!   ([`topology::TopologySpec`]), the compiled node/edge graph
//!   ([`topology::Machine`]) and its routes ([`topology::PathRouter`]).
//! - [`config`]: YAML with positioned errors, `--set` overrides and the
//!   quantity types (`"256 GB/s"`, `"8 ns"`, `"1 MiB"`).
//! - [`explain`]: `--explain`: the critical path of a run's interval and
//!   its attribution, from what the hardware recorded.
//! - [`trace`]: a `tracing` layer writing Chrome/Perfetto JSON stamped with
//!   virtual time.
//! - [`sim`]: the core: a single-threaded executor with a picosecond virtual
//!   clock, and `Resource`, `channel`, `Event`, `Barrier`. It knows nothing of
//!   hardware.
//!
//! Beside the layers, [`allocator`]: the global allocator the binaries
//! declare and its setting.
//!
//! `docs/ARCHITECTURE.md` gives one paragraph per module with what it owns
//! and what it must not know.

// `unsafe` only where a module allows it, each named in docs/ARCHITECTURE.md
// ("Unsafe code") and listed in tests/it/tidy.rs.
#![deny(unsafe_code)]

// Lets the files of `algorithms/` and `workloads/` (compiled into this crate,
// ADR-0009, ADR-0011) name the library `kernbench::`, as code outside it does.
extern crate self as kernbench;

#[allow(unsafe_code)] // mimalloc's option calls
pub mod allocator;
pub mod ccl;
pub mod chakra;
pub mod config;
pub mod device;
pub mod explain;
pub mod hw;
pub mod mem;
pub mod runtime;
pub mod sim;
pub mod tl;
pub mod topology;
pub mod trace;
pub mod workloads;
