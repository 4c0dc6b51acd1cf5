//! [`IoCpu`]: a SIP's IO_CPU, which turns one kernel launch from the host
//! into commands for its cubes and collects their responses.
//!
//! A launch arriving at `t` holds the IO_CPU for `dispatch_overhead`
//! (FIFO across launches), ending at `dispatched`. The IO_CPU then stamps
//! one **common start time**
//!
//! `target_start = dispatched + max_c reach_c`,
//!
//! where `reach_c` is the caller's (uncontended, formula) time for cube `c`
//! to become ready to start its kernels after dispatch: the command's
//! transit to the cube, the M_CPU's dispatch and the delivery to its PEs.
//! So `target_start` is when the command has reached the farthest cube,
//! and every cube's kernels start exactly then, near and far cubes alike.
//! It fans out to all cubes at once, passing `target_start`; each cube's
//! work ends when its response is back at the IO_CPU. The launch completes
//! when every response is in (aggregation costs no extra time).
//!
//! If contention makes a cube later than its reach, that cube starts late
//! (the M_CPU starts kernels at `max(target_start, delivered)`); the
//! per-cube start times show it.
//!
//! Knows nothing of paths or kernels: reaches and per-cube work come from
//! the caller.

use std::future::Future;

use super::explain;
use super::server::{Activity, SerialServer, ServerStats};
use super::{HwError, later};
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::IoCpuSpec;

/// One cube's part of a launch.
pub struct CubeFanout<F> {
    /// Time from the end of the IO_CPU's dispatch until the cube can start
    /// its kernels, uncontended.
    pub reach: SimDuration,
    /// Given `target_start`, the cube's work: command transit, M_CPU, PE
    /// kernels and the response's transit back. Its output is the response.
    pub run: F,
}

/// A finished launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchReport<T> {
    /// When the IO_CPU received the launch.
    pub received: SimTime,
    /// When it had dispatched it (fan-out begins).
    pub dispatched: SimTime,
    /// The common start time given to every cube.
    pub target_start: SimTime,
    /// Each cube's response, in fan-out order.
    pub responses: Vec<T>,
    /// When the last response arrived.
    pub end: SimTime,
}

/// A SIP's IO_CPU.
pub struct IoCpu {
    dispatch_overhead: SimDuration,
    dispatch: SerialServer,
}

impl IoCpu {
    /// An idle IO_CPU named `name`.
    pub fn new(name: &str, spec: &IoCpuSpec) -> Self {
        IoCpu {
            dispatch_overhead: spec.dispatch_overhead,
            dispatch: SerialServer::new(name, Activity::Dispatch),
        }
    }

    /// The name given at creation.
    /// Its dispatch loop.
    pub fn server(&self) -> &SerialServer {
        &self.dispatch
    }

    pub fn name(&self) -> &str {
        self.dispatch.name()
    }

    /// Handles one launch: dispatch, stamp `target_start`, fan out to every
    /// cube, return when all responses are in.
    pub async fn launch<F, Fut>(
        &self,
        cubes: Vec<CubeFanout<F>>,
    ) -> Result<LaunchReport<Fut::Output>, HwError>
    where
        F: FnOnce(SimTime) -> Fut,
        Fut: Future,
    {
        let received = sim::now();
        let booked = self.dispatch.reserve(self.dispatch_overhead, 0)?;
        if explain::recording() {
            explain::push_booking(&self.dispatch, received, booked);
        }
        let dispatched = booked.end;
        explain::sleep_until(dispatched).await;
        let farthest = cubes.iter().map(|cube| cube.reach).max();
        let target_start = later(dispatched, farthest.unwrap_or_default(), self.name())?;
        let runs = cubes.into_iter().map(|cube| (cube.run)(target_start));
        let responses = futures::future::join_all(runs).await;
        Ok(LaunchReport {
            received,
            dispatched,
            target_start,
            responses,
            end: sim::now(),
        })
    }

    /// Launches handled (`jobs`) and dispatch busy time as of `now`.
    pub fn dispatch_stats(&self, now: SimTime) -> ServerStats {
        self.dispatch.stats(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Simulation;

    type NoWork = fn(SimTime) -> std::future::Ready<()>;

    #[test]
    fn launches_queue_behind_each_other_and_empty_fanout_ends_at_dispatch() {
        let spec = IoCpuSpec {
            dispatch_overhead: SimDuration::from_ns(1000),
        };
        let io_cpu = std::rc::Rc::new(IoCpu::new("io_cpu", &spec));
        let mut simulation = Simulation::new();
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let io_cpu = io_cpu.clone();
                simulation.spawn(&format!("launch{i}"), async move {
                    io_cpu
                        .launch(Vec::<CubeFanout<NoWork>>::new())
                        .await
                        .unwrap()
                })
            })
            .collect();
        simulation.run().unwrap();
        let ends: Vec<_> = handles
            .into_iter()
            .map(|h| {
                let report = h.output().unwrap();
                assert_eq!(report.target_start, report.dispatched);
                assert_eq!(report.end, report.dispatched);
                report.end.as_ps()
            })
            .collect();
        assert_eq!(ends, vec![1_000_000, 2_000_000]);
        assert_eq!(io_cpu.dispatch_stats(SimTime::from_us(2)).jobs, 2);
    }
}
