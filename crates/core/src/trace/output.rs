//! Where the trace goes: a file, written as the run goes and closed by a
//! [`TraceFileGuard`], or a buffer in memory read through a [`TraceHandle`]
//! (for tests and small runs).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::writer::{self, SharedWriter};

/// A byte buffer shared between the writer and the handles reading it.
pub(super) struct SharedBuffer(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut buffer = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A reader of a trace recorded in memory. Cheap to clone; every read is a
/// complete document of the events written so far (spans still open are not
/// in it).
#[derive(Clone)]
pub struct TraceHandle {
    writer: SharedWriter,
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl TraceHandle {
    pub(super) fn new(writer: SharedWriter, buffer: Arc<Mutex<Vec<u8>>>) -> Self {
        TraceHandle { writer, buffer }
    }

    /// The trace as Chrome trace JSON text; identical inputs give identical
    /// bytes.
    pub fn to_json(&self) -> String {
        let writer = writer::lock(&self.writer);
        let buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&buffer).into_owned() + &writer.tail()
    }

    /// The trace as a parsed JSON document (numbers become `f64`; use
    /// `args.start_ps` / `args.dur_ps` for exact times).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.to_json()).expect("the trace writer writes valid JSON")
    }

    /// `(start_ps, dur_ps)` of every span called `name` on track `track`,
    /// by start time: what a test asserts on. Empty if the track does not
    /// exist.
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
        let mut spans: Vec<(u64, u64)> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name && e["tid"] == tid)
            .filter_map(|e| {
                Some((
                    e["args"]["start_ps"].as_u64()?,
                    e["args"]["dur_ps"].as_u64()?,
                ))
            })
            .collect();
        spans.sort();
        spans
    }

    /// How many spans and events were dropped because the clock read `None`.
    pub fn untimed_dropped(&self) -> u64 {
        writer::lock(&self.writer).untimed_dropped()
    }
}

/// Closes a trace file once: on [`finish`](Self::finish), which reports
/// errors, or else on drop, which prints them to stderr. Events recorded
/// after that are ignored.
#[must_use = "the trace file is complete only when the guard is finished or dropped"]
pub struct TraceFileGuard {
    writer: SharedWriter,
    path: PathBuf,
    finished: bool,
}

impl TraceFileGuard {
    pub(super) fn new(writer: SharedWriter, path: PathBuf) -> Self {
        TraceFileGuard {
            writer,
            path,
            finished: false,
        }
    }

    /// Completes the trace file now; the first write error of the whole
    /// trace, if there was one.
    pub fn finish(mut self) -> io::Result<()> {
        self.close()
    }

    /// The file the trace goes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn close(&mut self) -> io::Result<()> {
        self.finished = true;
        writer::lock(&self.writer).finish()
    }
}

impl Drop for TraceFileGuard {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Err(err) = self.close() {
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
    use crate::trace::{ChromeTraceLayer, TraceOptions};

    fn at_one_us() -> Option<SimTime> {
        Some(SimTime::from_us(1))
    }

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("kernbench-{}-{name}.json", std::process::id()))
    }

    fn say_hello(layer: ChromeTraceLayer) {
        tracing::subscriber::with_default(
            tracing_subscriber::layer::SubscriberExt::with(tracing_subscriber::registry(), layer),
            || tracing::info!("hello"),
        );
    }

    #[test]
    fn the_file_holds_what_memory_holds_once_the_guard_drops() {
        let path = temp_path("guard-drop");
        let options = TraceOptions::default();
        let (layer, guard) =
            ChromeTraceLayer::to_file_with_clock(&path, at_one_us, options).unwrap();
        say_hello(layer);
        drop(guard);
        let written = fs::read_to_string(&path).unwrap();
        fs::remove_file(&path).unwrap();
        let (layer, handle) = ChromeTraceLayer::new(at_one_us);
        say_hello(layer);
        assert_eq!(written, handle.to_json());
        assert!(written.contains(r#""name":"hello""#), "{written}");
    }

    #[test]
    fn bad_path_fails_at_creation() {
        // A folder is made for the file, but not under a file.
        let err = ChromeTraceLayer::to_file("/dev/null/sub/trace.json").err();
        assert!(err.is_some(), "a trace under /dev/null");
        let err = ChromeTraceLayer::to_file("/dev/null/trace.json").err();
        assert_eq!(err.map(|e| e.kind()), Some(io::ErrorKind::NotADirectory));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn write_errors_are_reported_by_finish() {
        let options = TraceOptions::default();
        let (layer, guard) =
            ChromeTraceLayer::to_file_with_clock("/dev/full", at_one_us, options).unwrap();
        say_hello(layer);
        assert!(guard.finish().is_err());
    }
}
