//! [`Mcpu`]: a cube's management CPU (M_CPU) and its DMA engine
//! (M_CPU.DMA).
//!
//! The M_CPU handles commands one at a time (each holds it for
//! `dispatch_overhead`, FIFO) and fans work out on three paths:
//!
//! - **(a) kernel commands → PEs** ([`Mcpu::run_kernels`]): after dispatch
//!   the command reaches each participating PE after that PE's delivery
//!   time; every kernel starts at `max(target_start, delivered)`. The
//!   `target_start` stamped by the IO_CPU is passed through untouched, so
//!   when the IO_CPU's reach estimate holds, all PEs of all cubes start at
//!   the same instant.
//! - **(b) DMA on behalf of the host** ([`Mcpu::host_dma`]): a host copy
//!   into or out of the cube's memory is dispatched, then run on
//!   M_CPU.DMA ([`DmaEngine`]); the data stages are the caller's job.
//! - **(c) response aggregation → IO_CPU**: `run_kernels` completes when
//!   every PE kernel has finished; the caller then sends the cube's single
//!   response back over its path (a [`transfer`](super::transfer)).
//!
//! Knows nothing of what kernels compute or of paths: delivery times and
//! data movement are supplied by the caller.

use std::future::Future;

use super::dma::{DmaCompletion, DmaEngine};
use super::explain;
use super::server::{Activity, SerialServer, ServerStats};
use super::{HwError, later};
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::McpuSpec;

/// A kernel command for one PE: how long the command takes from the M_CPU
/// to the PE, and the kernel to run there (not polled before it starts).
pub struct PeCommand<K> {
    /// M_CPU → PE command delivery time.
    pub delivery: SimDuration,
    /// The PE kernel; lazy (an `async` block), polled only once it starts.
    pub kernel: K,
}

/// A cube's kernels, all finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubeCompletion<T> {
    /// When the M_CPU received the command.
    pub received: SimTime,
    /// When it had dispatched it.
    pub dispatched: SimTime,
    /// When each PE kernel started, in command order.
    pub started: Vec<SimTime>,
    /// What each PE kernel returned, in command order.
    pub outputs: Vec<T>,
    /// When the last kernel finished (the response can leave).
    pub end: SimTime,
}

/// A cube's M_CPU and M_CPU.DMA.
pub struct Mcpu {
    dispatch_overhead: SimDuration,
    dispatch: SerialServer,
    dma: DmaEngine,
}

impl Mcpu {
    /// An idle M_CPU named `name` whose DMA engine is named `dma_name`.
    pub fn new(name: &str, dma_name: &str, spec: &McpuSpec) -> Self {
        Mcpu {
            dispatch_overhead: spec.dispatch_overhead,
            dispatch: SerialServer::new(name, Activity::Dispatch),
            dma: DmaEngine::new(dma_name, &spec.dma),
        }
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        self.dispatch.name()
    }

    /// Time to handle one command.
    pub fn dispatch_overhead(&self) -> SimDuration {
        self.dispatch_overhead
    }

    /// Its dispatch loop and its DMA engine's issue stage.
    pub fn servers(&self) -> [&SerialServer; 2] {
        [&self.dispatch, self.dma.server()]
    }

    /// M_CPU.DMA.
    pub fn dma(&self) -> &DmaEngine {
        &self.dma
    }

    /// Path (a) and (c): dispatches a kernel command, delivers it to each
    /// PE, starts every kernel at `max(target_start, delivered)`, and
    /// returns when all have finished.
    pub async fn run_kernels<K: Future>(
        &self,
        target_start: SimTime,
        commands: Vec<PeCommand<K>>,
    ) -> Result<CubeCompletion<K::Output>, HwError> {
        let received = sim::now();
        let dispatched = self.dispatch().await?;
        let runs = commands.into_iter().map(|command| async move {
            let delivered = later(dispatched, command.delivery, self.name())?;
            let starts = delivered.max(target_start);
            if explain::recording() {
                let from = sim::now();
                let wait = starts.saturating_since(delivered.max(from)).as_ps();
                let flight = delivered.saturating_since(from).as_ps();
                explain::push_server(&self.dispatch, explain::TermKind::Latency, flight);
                explain::push_server(&self.dispatch, explain::TermKind::Wait, wait);
            }
            explain::sleep_until(starts).await;
            let started = sim::now();
            Ok::<_, HwError>((started, command.kernel.await))
        });
        let (started, outputs) = futures::future::join_all(runs)
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .unzip();
        Ok(CubeCompletion {
            received,
            dispatched,
            started,
            outputs,
            end: sim::now(),
        })
    }

    /// Path (b): dispatches a host-requested copy, then runs `job` (its
    /// data movement) on M_CPU.DMA.
    pub async fn host_dma<F: Future>(&self, job: F) -> Result<DmaCompletion<F::Output>, HwError> {
        self.dispatch().await?;
        self.dma.run(job).await
    }

    /// Commands handled (`jobs`) and dispatch busy time as of `now`.
    pub fn dispatch_stats(&self, now: SimTime) -> ServerStats {
        self.dispatch.stats(now)
    }

    async fn dispatch(&self) -> Result<SimTime, HwError> {
        let booked = self.dispatch.reserve(self.dispatch_overhead, 0)?;
        if explain::recording() {
            explain::push_booking(&self.dispatch, sim::now(), booked);
        }
        let done = booked.end;
        explain::sleep_until(done).await;
        Ok(done)
    }
}
