//! The `tracing` side: turning spans and events into timeline records.

use std::io;
use std::path::Path;
use std::sync::{Arc, MutexGuard};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record as FieldValues};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::CompleteEvent;
use super::output::{TraceFileGuard, TraceHandle};
use super::timeline::{self, Record, SharedTimeline, Stamp, Timeline};
use crate::sim::SimTime;

/// Reads the current virtual time; `None` outside a simulation.
pub type Clock = fn() -> Option<SimTime>;

/// The field that names a span's or event's track.
const COMPONENT: &str = "component";

/// A `tracing-subscriber` layer recording a virtual-time Chrome trace.
///
/// It buffers everything in memory; read it through the [`TraceHandle`] (or
/// [`TraceFileGuard`]) returned with it.
pub struct ChromeTraceLayer {
    clock: Clock,
    timeline: SharedTimeline,
}

/// A span still open: where and when it started, and its fields so far.
struct OpenSpan {
    stamp: Stamp,
    track: String,
    args: Map<String, Value>,
}

impl ChromeTraceLayer {
    /// A layer reading time from `clock`, and the handle to its trace.
    pub fn new(clock: Clock) -> (Self, TraceHandle) {
        let timeline = SharedTimeline::default();
        let handle = TraceHandle::new(Arc::clone(&timeline));
        (ChromeTraceLayer { clock, timeline }, handle)
    }

    /// A layer reading the simulator's clock, [`crate::sim::try_now`].
    pub fn with_sim_clock() -> (Self, TraceHandle) {
        Self::new(crate::sim::try_now)
    }

    /// A layer reading the simulator's clock whose trace is written to `path`
    /// when the guard is finished or dropped. The file is created now, so a
    /// bad path is reported here rather than at the end of the run.
    pub fn to_file(path: impl AsRef<Path>) -> io::Result<(Self, TraceFileGuard)> {
        let (layer, handle) = Self::with_sim_clock();
        Ok((layer, handle.into_file(path)?))
    }

    fn timeline(&self) -> MutexGuard<'_, Timeline> {
        timeline::lock(&self.timeline)
    }

    fn now(&self) -> Option<SimTime> {
        (self.clock)()
    }

    /// Adds an event whose times the caller knows, see [`super::record_complete`].
    pub(super) fn record_complete(&self, event: &CompleteEvent<'_>) {
        let mut timeline = self.timeline();
        let stamp = timeline.stamp_given(event.start);
        let args = event
            .args
            .iter()
            .map(|&(key, value)| (key.to_owned(), value.into()));
        timeline.push(Record {
            stamp,
            dur: Some(event.end.saturating_since(event.start)),
            track: event.track.to_owned(),
            name: event.name.to_owned(),
            category: event.category,
            args: args.collect(),
        });
    }
}

impl<S> Layer<S> for ChromeTraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let Some(stamp) = self.timeline().stamp(self.now()) else {
            return;
        };
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let track = fields
            .component
            .or_else(|| span.parent().and_then(|p| inherited_track(p.scope())))
            .unwrap_or_else(|| span.metadata().target().to_owned());
        let args = fields.args;
        span.extensions_mut()
            .replace(OpenSpan { stamp, track, args });
    }

    fn on_record(&self, id: &Id, values: &FieldValues<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let Some(open) = extensions.get_mut::<OpenSpan>() else {
            return;
        };
        let mut fields = Fields {
            args: std::mem::take(&mut open.args),
            ..Fields::default()
        };
        values.record(&mut fields);
        open.args = fields.args;
        if let Some(component) = fields.component {
            open.track = component;
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(stamp) = self.timeline().stamp(self.now()) else {
            return;
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let track = fields
            .component
            .or_else(|| ctx.event_scope(event).and_then(inherited_track))
            .unwrap_or_else(|| meta.target().to_owned());
        self.timeline().push(Record {
            stamp,
            dur: None,
            track,
            name: fields.message.unwrap_or_else(|| meta.name().to_owned()),
            category: meta.target(),
            args: fields.args,
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<OpenSpan>() else {
            return;
        };
        let now = self.now();
        let mut timeline = self.timeline();
        let end = timeline.end_time(now, open.stamp.at);
        let meta = span.metadata();
        timeline.push(Record {
            stamp: open.stamp,
            dur: Some(end.saturating_since(open.stamp.at)),
            track: open.track,
            name: meta.name().to_owned(),
            category: meta.target(),
            args: open.args,
        });
    }
}

/// The track of the nearest span in `scope` (innermost first) that is open in
/// the timeline.
fn inherited_track<'a, R>(scope: impl IntoIterator<Item = SpanRef<'a, R>>) -> Option<String>
where
    R: LookupSpan<'a> + 'a,
{
    scope
        .into_iter()
        .find_map(|span| Some(span.extensions().get::<OpenSpan>()?.track.clone()))
}

/// The fields of one span or event: its track, its message, the rest as args.
#[derive(Default)]
struct Fields {
    component: Option<String>,
    message: Option<String>,
    args: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let text = || match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match field.name() {
            COMPONENT => self.component = Some(text()),
            name => {
                if name == "message" {
                    self.message = Some(text());
                }
                self.args.insert(name.to_owned(), value);
            }
        }
    }
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use tracing::{debug, info, info_span};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    thread_local! {
        static NOW: Cell<Option<SimTime>> = const { Cell::new(None) };
    }

    fn fake_now() -> Option<SimTime> {
        NOW.with(Cell::get)
    }

    fn set_ps(ps: u64) {
        NOW.with(|now| now.set(Some(SimTime::from_ps(ps))));
    }

    fn leave_simulation() {
        NOW.with(|now| now.set(None));
    }

    /// Runs `body` under a fresh layer on the fake clock; returns the
    /// non-metadata events and the handle.
    fn record(body: impl FnOnce()) -> (Vec<Value>, TraceHandle) {
        leave_simulation();
        let (layer, handle) = ChromeTraceLayer::new(fake_now);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), body);
        let doc = handle.to_value();
        let events = doc["traceEvents"].as_array().unwrap().iter();
        let events = events.filter(|e| e["ph"] != "M").cloned().collect();
        (events, handle)
    }

    #[test]
    fn layer_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ChromeTraceLayer>();
    }

    #[test]
    fn span_lasts_from_creation_to_close_not_enter_to_exit() {
        let (events, _) = record(|| {
            set_ps(100);
            let span = info_span!("op", component = "pe0");
            set_ps(150);
            span.in_scope(|| set_ps(170));
            set_ps(400);
            span.in_scope(|| set_ps(420));
            set_ps(1_000);
        });
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["args"]["start_ps"], 100);
        assert_eq!(events[0]["args"]["dur_ps"], 900);
    }

    #[test]
    fn children_and_events_inherit_the_component_track() {
        let (events, _) = record(|| {
            set_ps(0);
            let _op = info_span!("op", component = "pe0").entered();
            let _inner = info_span!("inner").entered();
            info!(bytes = 64_u64, "sent");
            debug!(component = "link0", "elsewhere");
        });
        let tid = |name: &str| events.iter().find(|e| e["name"] == name).unwrap()["tid"].clone();
        assert_eq!(tid("inner"), tid("op"));
        assert_eq!(tid("sent"), tid("op"));
        assert_ne!(tid("elsewhere"), tid("op"));
        let sent = events.iter().find(|e| e["name"] == "sent").unwrap();
        assert_eq!(sent["args"]["bytes"], 64);
        assert_eq!(sent["args"]["message"], "sent");
    }

    #[test]
    fn untimed_spans_and_events_are_dropped_and_counted() {
        let (events, handle) = record(|| {
            info!("before the simulation");
            let _outside = info_span!("outside").entered();
            set_ps(5);
            let started = info_span!("started");
            info!("inside");
            leave_simulation();
            drop(started);
        });
        let names: Vec<&str> = events.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["started", "inside"]);
        assert_eq!(events[0]["args"]["dur_ps"], 0, "ends at the last time seen");
        assert_eq!(handle.untimed_dropped(), 2);
    }

    fn complete(track: &str, start: u64, end: u64) -> CompleteEvent<'_> {
        CompleteEvent {
            track,
            name: "busy",
            category: "test",
            start: SimTime::from_ps(start),
            end: SimTime::from_ps(end),
            args: &[("bytes", 64)],
        }
    }

    #[test]
    fn complete_events_keep_the_given_times_and_args() {
        let (events, _) = record(|| {
            assert!(crate::trace::is_recording());
            set_ps(10);
            crate::trace::record_complete(&complete("link0", 40, 45));
            let _span = info_span!("later", component = "pe0");
            set_ps(20);
        });
        let named = |name: &str| events.iter().find(|e| e["name"] == name).unwrap();
        let busy = named("busy");
        assert_eq!(busy["args"]["start_ps"], 40);
        assert_eq!(busy["args"]["dur_ps"], 5);
        assert_eq!(busy["args"]["bytes"], 64);
        let later = named("later");
        assert_eq!(
            later["args"]["dur_ps"], 10,
            "given times are not clock readings"
        );
    }

    #[test]
    fn complete_events_reach_the_layer_inside_a_layered_subscriber() {
        leave_simulation();
        let (layer, handle) = ChromeTraceLayer::new(fake_now);
        let quiet = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing_subscriber::EnvFilter::new("warn"));
        let subscriber = tracing_subscriber::registry().with(quiet).with(Some(layer));
        tracing::subscriber::with_default(subscriber, || {
            crate::trace::record_complete(&complete("link0", 1, 2));
        });
        assert_eq!(handle.spans("link0", "busy"), [(1, 1)]);
    }

    #[test]
    fn without_a_layer_nothing_is_recorded() {
        assert!(!crate::trace::is_recording());
        crate::trace::record_complete(&complete("link0", 1, 2));
    }

    #[test]
    fn recorded_fields_join_the_args_and_may_move_the_track() {
        let (events, _) = record(|| {
            set_ps(1);
            let span = info_span!("op", bytes = tracing::field::Empty, component = "a");
            span.record("bytes", 128_u64);
            span.record("component", "b");
            info!(component = "a", "marker");
        });
        assert_eq!(events[0]["args"]["bytes"], 128);
        assert_ne!(events[0]["tid"], events[1]["tid"]);
    }
}
