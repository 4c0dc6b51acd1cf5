//! [`DmaEngine`]: a DMA engine (a PE's PE_DMA, a cube's M_CPU.DMA).
//!
//! A job's life, from the moment [`DmaEngine::run`] is called:
//!
//! 1. **issue**: the descriptor is written and the doorbell rung. Issuing is
//!    serial on the engine, FIFO: each job holds the issue stage for
//!    `issue_overhead`;
//! 2. **slot**: the engine keeps at most `max_outstanding` transfers in
//!    flight; an issued job waits (FIFO) for a free slot. Issuing the next
//!    descriptor overlaps with this wait, as with a descriptor ring;
//! 3. **data**: the caller's job future runs: it is the data movement (a
//!    [`transfer`](super::transfer) over a path, memory accesses...), so
//!    its timing is whatever those stages take;
//! 4. the slot is freed when the job's future completes.
//!
//! Uncontended, a job takes `issue_overhead + (job's own time)`.
//!
//! Knows nothing of what the job moves, nor of paths: the caller composes
//! the data stages.

use std::future::Future;

use super::HwError;
use super::explain;
use super::server::{Activity, SerialServer, ServerStats};
use crate::sim::{self, Resource, ResourceGuard, SimDuration, SimTime};
use crate::topology::DmaSpec;

/// A DMA engine: a serial issue stage and `max_outstanding` slots.
pub struct DmaEngine {
    issue_overhead: SimDuration,
    descriptor: u64,
    issue: SerialServer,
    slots: Resource,
}

/// A finished DMA job: its output and when each stage happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaCompletion<T> {
    /// What the job future returned.
    pub output: T,
    /// When [`DmaEngine::run`] was called.
    pub requested: SimTime,
    /// When the descriptor had been issued.
    pub issued: SimTime,
    /// When the job got a slot and its data movement started.
    pub started: SimTime,
    /// When the data movement finished.
    pub end: SimTime,
}

/// A DMA job whose descriptor is issued and which holds one of the
/// engine's slots ([`DmaEngine::start`]) until dropped.
pub struct DmaSlot {
    /// When the job was asked for.
    pub requested: SimTime,
    /// When its descriptor had been issued.
    pub issued: SimTime,
    /// When it got the slot: its data phase starts.
    pub started: SimTime,
    _guard: ResourceGuard,
}

impl DmaSlot {
    /// The completion of the job that held this slot and produced
    /// `output`, ending now; the slot is freed.
    pub fn finish<T>(self, output: T) -> DmaCompletion<T> {
        DmaCompletion {
            output,
            requested: self.requested,
            issued: self.issued,
            started: self.started,
            end: sim::now(),
        }
    }
}

impl DmaEngine {
    /// An idle engine named `name` (trace track of its issue stage).
    pub fn new(name: &str, spec: &DmaSpec) -> Self {
        DmaEngine {
            issue_overhead: spec.issue_overhead,
            descriptor: spec.descriptor.get().bytes(),
            issue: SerialServer::new(name, Activity::DmaIssue),
            slots: Resource::new(name, spec.max_outstanding.get() as usize),
        }
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        self.issue.name()
    }

    /// Bytes of one descriptor, for a caller that sends descriptors over a
    /// path (for example the host programming M_CPU.DMA).
    pub fn descriptor_bytes(&self) -> u64 {
        self.descriptor
    }

    /// Its issue stage.
    pub fn server(&self) -> &SerialServer {
        &self.issue
    }

    /// Jobs whose data movement is running now.
    pub fn in_flight(&self) -> usize {
        self.slots.in_use()
    }

    /// Issues `job`, waits for a slot, runs it; see the module
    /// documentation for the timing. `job` is not polled before its data
    /// phase starts, so it must be lazy: an `async` block or `async fn`
    /// (a bare `sim::sleep(d)` fixes its deadline when it is created).
    pub async fn run<F: Future>(&self, job: F) -> Result<DmaCompletion<F::Output>, HwError> {
        let slot = self.start().await?;
        let output = job.await;
        Ok(slot.finish(output))
    }

    /// Issues a descriptor and waits for a slot: stages 1 and 2 of
    /// [`run`](Self::run), for a caller that runs the data phase itself.
    /// The slot is held until the returned [`DmaSlot`] is dropped.
    pub async fn start(&self) -> Result<DmaSlot, HwError> {
        let requested = sim::now();
        let issue = self.issue.reserve(self.issue_overhead, 0)?;
        if explain::recording() {
            explain::push_booking(&self.issue, requested, issue);
        }
        explain::sleep_until(issue.end).await;
        let guard = self.slots.acquire().await;
        Ok(DmaSlot {
            requested,
            issued: issue.end,
            started: sim::now(),
            _guard: guard,
        })
    }

    /// Issues a descriptor now and takes a slot now, without waiting, if
    /// one is free and nobody queues for one: for a flow-mode copy that
    /// works out its next stages from here (ADR-0027). `None`, with
    /// nothing booked, otherwise. The slot is held from now; the data
    /// phase starts when the descriptor has been issued.
    pub fn start_now(&self) -> Result<Option<DmaSlot>, HwError> {
        let Some(guard) = self.slots.try_acquire() else {
            return Ok(None);
        };
        let requested = sim::now();
        let issue = self.issue.reserve_at(requested, self.issue_overhead, 0)?;
        if explain::recording() {
            explain::push_booking(&self.issue, requested, issue);
        }
        Ok(Some(DmaSlot {
            requested,
            issued: issue.end,
            started: issue.end,
            _guard: guard,
        }))
    }

    /// Descriptors issued (`jobs`) and issue-stage busy time as of `now`.
    pub fn issue_stats(&self, now: SimTime) -> ServerStats {
        self.issue.stats(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::units::Count;
    use std::rc::Rc;

    #[test]
    fn issue_is_serial_even_with_free_slots() {
        let spec = DmaSpec {
            descriptor: "64 B".parse().unwrap(),
            issue_overhead: SimDuration::from_ns(32),
            max_outstanding: Count::new(8).unwrap(),
        };
        let engine = Rc::new(DmaEngine::new("pe_dma", &spec));
        let mut simulation = sim::Simulation::new();
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let engine = engine.clone();
                simulation.spawn(&format!("job{i}"), async move {
                    engine.run(async {}).await.unwrap().end.as_ps()
                })
            })
            .collect();
        simulation.run().unwrap();
        let ends: Vec<_> = handles.into_iter().map(|h| h.output().unwrap()).collect();
        assert_eq!(ends, vec![32_000, 64_000, 96_000]);
        assert_eq!(engine.in_flight(), 0);
    }
}
