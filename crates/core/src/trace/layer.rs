//! The `tracing` side: turning spans and events into trace events.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record as FieldValues};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::output::{SharedBuffer, TraceFileGuard, TraceHandle};
use super::writer::{self, Args, Entry, SharedWriter, Writer};
use super::{CompleteEvent, TraceOptions};
use crate::sim::SimTime;

/// Reads the current virtual time; `None` outside a simulation.
pub type Clock = fn() -> Option<SimTime>;

/// The field that names a span's or event's track.
const COMPONENT: &str = "component";

/// How much of a trace file is buffered before it is written.
const FILE_BUFFER_BYTES: usize = 1 << 20;

/// A `tracing-subscriber` layer writing a virtual-time Chrome trace as the
/// run goes: to a file ([`TraceFileGuard`]) or to memory ([`TraceHandle`]).
pub struct ChromeTraceLayer {
    clock: Clock,
    writer: SharedWriter,
}

/// Layers created and not yet dropped, process-wide.
static LIVE_LAYERS: AtomicUsize = AtomicUsize::new(0);

impl Drop for ChromeTraceLayer {
    fn drop(&mut self) {
        LIVE_LAYERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A span still open: where and when it started, and its fields so far.
struct OpenSpan {
    start: SimTime,
    track: String,
    args: Map<String, Value>,
}

impl ChromeTraceLayer {
    /// A layer reading time from `clock`, recording everything in memory,
    /// and the handle to its trace.
    pub fn new(clock: Clock) -> (Self, TraceHandle) {
        Self::in_memory(clock, TraceOptions::default())
    }

    /// A layer reading time from `clock`, recording in memory what
    /// `options` keep, and the handle to its trace.
    pub fn in_memory(clock: Clock, options: TraceOptions) -> (Self, TraceHandle) {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let out = Box::new(SharedBuffer(Arc::clone(&buffer)));
        let layer = Self::writing(clock, out, options);
        let handle = TraceHandle::new(Arc::clone(&layer.writer), buffer);
        (layer, handle)
    }

    /// A layer reading the simulator's clock, [`crate::sim::try_now`],
    /// recording everything in memory.
    pub fn with_sim_clock() -> (Self, TraceHandle) {
        Self::new(crate::sim::try_now)
    }

    /// A layer reading the simulator's clock and writing everything to
    /// `path`; see [`to_file_with_clock`](Self::to_file_with_clock).
    pub fn to_file(path: impl AsRef<Path>) -> io::Result<(Self, TraceFileGuard)> {
        Self::to_file_with(path, TraceOptions::default())
    }

    /// A layer reading the simulator's clock and writing what `options`
    /// keep to `path`; see [`to_file_with_clock`](Self::to_file_with_clock).
    pub fn to_file_with(
        path: impl AsRef<Path>,
        options: TraceOptions,
    ) -> io::Result<(Self, TraceFileGuard)> {
        Self::to_file_with_clock(path, crate::sim::try_now, options)
    }

    /// A layer reading time from `clock` and writing what `options` keep to
    /// `path` as events finish; the guard completes the file. The file is
    /// created now (its folder too, as `--out` folders are), so a bad path
    /// is reported here rather than at the end of the run.
    pub fn to_file_with_clock(
        path: impl AsRef<Path>,
        clock: Clock,
        options: TraceOptions,
    ) -> io::Result<(Self, TraceFileGuard)> {
        let path = path.as_ref().to_owned();
        // A folder that exists (or a file in its place) is left for
        // `File::create` to judge, so its error names what is wrong.
        if let Some(folder) = path
            .parent()
            .filter(|f| !f.as_os_str().is_empty() && !f.exists())
        {
            std::fs::create_dir_all(folder)?;
        }
        let file = BufWriter::with_capacity(FILE_BUFFER_BYTES, File::create(&path)?);
        let layer = Self::writing(clock, Box::new(file), options);
        let guard = TraceFileGuard::new(Arc::clone(&layer.writer), path);
        Ok((layer, guard))
    }

    fn writing(clock: Clock, out: Box<dyn Write + Send>, options: TraceOptions) -> Self {
        let writer = Arc::new(Mutex::new(Writer::new(out, options)));
        LIVE_LAYERS.fetch_add(1, Ordering::Relaxed);
        ChromeTraceLayer { clock, writer }
    }

    /// Whether any layer exists in the process: when none does, nothing
    /// can be recorded and [`super::is_recording`] need not ask the
    /// dispatcher (a thread-local look-up and a downcast, at every hop of
    /// every transfer).
    pub(super) fn any_alive() -> bool {
        LIVE_LAYERS.load(Ordering::Relaxed) > 0
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        writer::lock(&self.writer)
    }

    /// A clock reading, counted as dropped if there is none.
    fn reading(&self) -> Option<SimTime> {
        let now = (self.clock)();
        self.writer().reading(now)
    }

    /// Writes an event whose times the caller knows, see
    /// [`super::record_complete`].
    pub(super) fn record_complete(&self, event: &CompleteEvent<'_>) {
        self.writer().write(&Entry {
            track: event.track,
            name: event.name,
            category: event.category,
            start: event.start,
            dur: Some(event.end.saturating_since(event.start)),
            args: Args::Integers(event.args),
        });
    }
}

impl<S> Layer<S> for ChromeTraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let Some(start) = self.reading() else {
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
            .replace(OpenSpan { start, track, args });
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
        let Some(start) = self.reading() else {
            return;
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let track = fields
            .component
            .or_else(|| ctx.event_scope(event).and_then(inherited_track))
            .unwrap_or_else(|| meta.target().to_owned());
        let name = fields.message.as_deref().unwrap_or_else(|| meta.name());
        self.writer().write(&Entry {
            track: &track,
            name,
            category: meta.target(),
            start,
            dur: None,
            args: Args::Fields(&fields.args),
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<OpenSpan>() else {
            return;
        };
        let now = (self.clock)();
        let mut writer = self.writer();
        let end = writer.end_time(now, open.start);
        let meta = span.metadata();
        writer.write(&Entry {
            track: &open.track,
            name: meta.name(),
            category: meta.target(),
            start: open.start,
            dur: Some(end.saturating_since(open.start)),
            args: Args::Fields(&open.args),
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
        assert_eq!(names, ["inside", "started"], "in the order they finish");
        assert_eq!(events[1]["args"]["dur_ps"], 0, "ends at the last time seen");
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
    fn a_file_trace_is_the_memory_trace_and_valid_json() {
        let path =
            std::env::temp_dir().join(format!("kernbench-layer-{}.json", std::process::id()));
        let scenario = || {
            set_ps(3);
            let _span = info_span!("op", component = "sip0.pe0");
            info!(component = "host.rank0", "hello");
        };
        leave_simulation();
        let (layer, guard) =
            ChromeTraceLayer::to_file_with_clock(&path, fake_now, TraceOptions::default()).unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), scenario);
        guard.finish().unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        leave_simulation();
        let (layer, handle) = ChromeTraceLayer::new(fake_now);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), scenario);
        assert_eq!(written, handle.to_json());
        let doc: Value = serde_json::from_str(&written).unwrap();
        assert_eq!(doc["traceEvents"].as_array().unwrap().len(), 2 * 4 + 2);
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
            .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
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
        let (marker, op) = (&events[0], &events[1]);
        assert_eq!(op["args"]["bytes"], 128);
        assert_ne!(op["tid"], marker["tid"]);
    }
}
