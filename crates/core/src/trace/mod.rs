//! Timelines: a `tracing` layer that stamps spans and events with **virtual**
//! time and writes them as Chrome trace JSON (the Trace Event Format, opened
//! by Perfetto and `chrome://tracing`) while the run goes (ADR-0013).
//!
//! This module owns the mapping from `tracing` data to trace events:
//!
//! - A span becomes a complete event (`"ph":"X"`) from the virtual time of its
//!   creation to the virtual time of its close. Entering and exiting a span
//!   (each `.await` of an instrumented future) does not matter.
//! - An event becomes an instant event (`"ph":"i"`) named by its message.
//! - [`record_complete`] writes a complete event whose times the caller
//!   already knows (a server's reservation, a kernel's phase) without a span.
//! - Fields become `args` (numbers stay numbers). The field `component`
//!   instead names the track: one Chrome thread per component. Without it a
//!   span or event inherits the track of its nearest recorded ancestor span,
//!   and failing that uses its `tracing` target.
//! - Tracks are grouped into Chrome processes by the first level of their
//!   dotted names (`sip3.cube0.pe1` and `sip3.cube0.r0c0->...` in `sip3`,
//!   `host.rank0` in `host`; names without a dot share `kernbench`).
//! - Times are written in microseconds as exact decimals of the integer
//!   picoseconds (`1234567` ps is `"ts":1.234567`); `args.start_ps` and
//!   `args.dur_ps` repeat them as integers.
//! - Spans and events seen while the clock reads `None` (outside a
//!   simulation) are dropped and counted (`otherData.untimed_dropped`). A
//!   span created in virtual time but closed outside it ends at the last
//!   virtual time the layer saw.
//! - Events are written when they finish, in that order (viewers sort by
//!   time); a track or process is announced just before its first event.
//!   Memory does not grow with the trace's length, only with the number of
//!   tracks and open spans. The same run gives the same bytes.
//! - [`TraceOptions`] keep only a window of virtual time and tracks matching
//!   name patterns; what they leave out is counted (`otherData.filtered_out`).
//!
//! It must not know any hardware: it knows virtual time, read through an
//! injectable [`Clock`], and component names, which are opaque strings.
//!
//! Wiring, e.g. for a CLI `--trace FILE` flag next to a `RUST_LOG` console
//! log. The filter sits on the `fmt` layer only, so `RUST_LOG` does not thin
//! out the timeline:
//!
//! ```no_run
//! use kernbench_core::trace::{ChromeTraceLayer, TraceOptions};
//! use tracing_subscriber::{Layer, filter::Targets, fmt, layer::SubscriberExt};
//!
//! let trace_file: Option<&str> = Some("trace.json"); // from `--trace FILE`
//! let options = TraceOptions {
//!     window: "10us..50us".parse()?,     // from `--trace-window`
//!     filter: "sip0.*,!*->*".parse()?, // from `--trace-filter`
//! };
//! let (chrome, guard) = trace_file
//!     .map(|path| ChromeTraceLayer::to_file_with(path, options))
//!     .transpose()?
//!     .unzip();
//! let subscriber = tracing_subscriber::registry()
//!     .with(fmt::layer().with_filter("warn".parse::<Targets>()?))
//!     .with(chrome);
//! tracing::subscriber::with_default(subscriber, || {
//!     // run the simulation
//! });
//! guard.map(|g| g.finish()).transpose()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod layer;
mod options;
mod output;
mod writer;

pub use layer::{ChromeTraceLayer, Clock};
pub use options::{ComponentFilter, TraceOptionError, TraceOptions, TraceWindow};
pub use output::{TraceFileGuard, TraceHandle};

use crate::sim::SimTime;

/// A busy period whose start and end the caller already knows, e.g. a
/// reservation on a server's calendar or a phase of a kernel.
#[derive(Debug, Clone, Copy)]
pub struct CompleteEvent<'a> {
    /// The track (component name) it goes on.
    pub track: &'a str,
    /// What it is called on the timeline.
    pub name: &'a str,
    /// Its category (`cat`), by convention the recording module's path.
    pub category: &'static str,
    /// When it starts (may be in the future of the current virtual time).
    pub start: SimTime,
    /// When it ends (not before `start`).
    pub end: SimTime,
    /// Integer arguments, shown beside it (`args`).
    pub args: &'a [(&'a str, u64)],
}

/// Records `event` in the [`ChromeTraceLayer`] of the current `tracing`
/// dispatcher, if there is one; otherwise does nothing.
///
/// This is the cheap way to trace a period whose times are known up front:
/// no span is opened and no task waits for its end, so one call costs one
/// write, at the moment the caller knows the times.
pub fn record_complete(event: &CompleteEvent<'_>) {
    if !ChromeTraceLayer::any_alive() {
        return;
    }
    tracing::dispatcher::get_default(|dispatch| {
        if let Some(layer) = dispatch.downcast_ref::<ChromeTraceLayer>() {
            layer.record_complete(event);
        }
    });
}

/// Whether [`record_complete`] would record anything now: callers can skip
/// building an event's name or arguments when it is `false`. Costs one
/// atomic load while no [`ChromeTraceLayer`] exists.
pub fn is_recording() -> bool {
    ChromeTraceLayer::any_alive()
        && tracing::dispatcher::get_default(|dispatch| dispatch.is::<ChromeTraceLayer>())
}
