//! Getting the trace out: in memory through a [`TraceHandle`], or into a file
//! through a [`TraceFileGuard`].

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::timeline::{self, SharedTimeline};

/// A reader of the trace a [`ChromeTraceLayer`](super::ChromeTraceLayer)
/// records. Cheap to clone; every read is a snapshot of the spans closed and
/// events recorded so far (spans still open are not in it).
#[derive(Clone)]
pub struct TraceHandle {
    timeline: SharedTimeline,
}

impl TraceHandle {
    pub(super) fn new(timeline: SharedTimeline) -> Self {
        TraceHandle { timeline }
    }

    /// The trace as Chrome trace JSON text; identical inputs give identical
    /// bytes.
    pub fn to_json(&self) -> String {
        timeline::lock(&self.timeline).to_json()
    }

    /// The trace as a parsed JSON document (numbers become `f64`; use
    /// `args.start_ps` / `args.dur_ps` for exact times).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.to_json()).expect("the trace renderer writes valid JSON")
    }

    /// `(start_ps, dur_ps)` of every span called `name` on track `track`,
    /// in timeline order: what a test asserts on. Empty if the track does
    /// not exist.
    pub fn spans(&self, track: &str, name: &str) -> Vec<(u64, u64)> {
        let doc = self.to_value();
        let events = doc["traceEvents"].as_array().cloned().unwrap_or_default();
        let Some(tid) = events
            .iter()
            .find(|e| e["name"] == "thread_name" && e["args"]["name"] == track)
            .map(|e| e["tid"].clone())
        else {
            return Vec::new();
        };
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name && e["tid"] == tid)
            .filter_map(|e| {
                Some((
                    e["args"]["start_ps"].as_u64()?,
                    e["args"]["dur_ps"].as_u64()?,
                ))
            })
            .collect()
    }

    /// How many spans and events were dropped because the clock read `None`.
    pub fn untimed_dropped(&self) -> u64 {
        timeline::lock(&self.timeline).untimed_dropped()
    }

    /// Creates `path` now and writes the trace into it when the returned
    /// guard is finished or dropped.
    pub fn into_file(self, path: impl AsRef<Path>) -> io::Result<TraceFileGuard> {
        let path = path.as_ref().to_owned();
        let file = File::create(&path)?;
        Ok(TraceFileGuard {
            handle: self,
            path,
            file: Some(file),
        })
    }
}

/// Writes the trace to its file once: on [`finish`](Self::finish), which
/// reports errors, or else on drop, which prints them to stderr.
#[must_use = "the trace file is written when the guard is finished or dropped"]
pub struct TraceFileGuard {
    handle: TraceHandle,
    path: PathBuf,
    file: Option<File>,
}

impl TraceFileGuard {
    /// Writes the trace file now.
    pub fn finish(mut self) -> io::Result<()> {
        self.write()
    }

    /// The file the trace goes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&mut self) -> io::Result<()> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        file.write_all(self.handle.to_json().as_bytes())?;
        file.flush()
    }
}

impl Drop for TraceFileGuard {
    fn drop(&mut self) {
        if let Err(err) = self.write() {
            eprintln!(
                "kernbench: cannot write trace {}: {err}",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::sim::SimTime;
    use crate::trace::ChromeTraceLayer;

    fn at_one_us() -> Option<SimTime> {
        Some(SimTime::from_us(1))
    }

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("kernbench-{}-{name}.json", std::process::id()))
    }

    #[test]
    fn guard_writes_the_trace_on_drop() {
        let path = temp_path("guard-drop");
        let (layer, handle) = ChromeTraceLayer::new(at_one_us);
        let guard = handle.clone().into_file(&path).unwrap();
        tracing::subscriber::with_default(
            tracing_subscriber::layer::SubscriberExt::with(tracing_subscriber::registry(), layer),
            || tracing::info!("hello"),
        );
        drop(guard);
        let written = fs::read_to_string(&path).unwrap();
        fs::remove_file(&path).unwrap();
        assert_eq!(written, handle.to_json());
        assert!(written.contains(r#""name":"hello""#), "{written}");
    }

    #[test]
    fn bad_path_fails_at_creation() {
        let err = ChromeTraceLayer::to_file("/nonexistent-dir/trace.json").err();
        assert_eq!(err.map(|e| e.kind()), Some(io::ErrorKind::NotFound));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn write_errors_are_reported_by_finish() {
        let (_layer, handle) = ChromeTraceLayer::new(at_one_us);
        let guard = handle.into_file("/dev/full").unwrap();
        assert!(guard.finish().is_err());
    }
}
