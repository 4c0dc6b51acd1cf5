//! Named phases of a kernel on its PE's timeline track (`Tl::phase`): what
//! a reader of the trace sees as "reduce", "exchange", "broadcast" spans
//! above the hardware's busy periods.

use std::borrow::Cow;

use super::Tl;
use crate::sim::{self, SimTime};
use crate::trace::{self, CompleteEvent};

/// A phase that lasts from [`Tl::phase`] until this guard is dropped. It
/// changes nothing in the model: without a trace being recorded it is empty.
#[must_use = "the phase ends when the guard is dropped"]
pub struct Phase(Option<OpenPhase>);

struct OpenPhase {
    track: String,
    name: Cow<'static, str>,
    start: SimTime,
}

impl Tl {
    /// Starts the phase `name` on this PE's track (the track of its `kernel`
    /// span, e.g. `sip0.cube1.pe0`); it ends when the returned guard is
    /// dropped. Phases may nest.
    pub fn phase(&self, name: impl Into<Cow<'static, str>>) -> Phase {
        let open = trace::is_recording().then(|| OpenPhase {
            track: self.coord().to_string(),
            name: name.into(),
            start: sim::now(),
        });
        Phase(open)
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        let (Some(open), Some(end)) = (&self.0, sim::try_now()) else {
            return;
        };
        trace::record_complete(&CompleteEvent {
            track: &open.track,
            name: &open.name,
            category: "kernbench::tl::phase",
            start: open.start,
            end,
            args: &[],
        });
    }
}
