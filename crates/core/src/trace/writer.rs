//! The streaming Chrome trace writer: each finished event becomes one line
//! of the output at once, and a track or process is announced (metadata
//! events) just before its first event. Nothing but the track table grows
//! with the run, so memory does not depend on the trace's length.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};

use super::options::TraceOptions;
use crate::sim::{PS_PER_US, SimDuration, SimTime};

/// The writer shared by the layer and its handles.
pub(super) type SharedWriter = Arc<Mutex<Writer>>;

/// Locks the writer; a panic elsewhere while it was held leaves it usable.
pub(super) fn lock(writer: &SharedWriter) -> MutexGuard<'_, Writer> {
    writer.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The process of tracks whose names have no hierarchy.
const CATCH_ALL_PROCESS: &str = "kernbench";

/// One finished trace event, borrowed from whoever produced it.
pub(super) struct Entry<'a> {
    pub track: &'a str,
    pub name: &'a str,
    pub category: &'a str,
    pub start: SimTime,
    /// `None` for an instant.
    pub dur: Option<SimDuration>,
    pub args: Args<'a>,
}

/// An event's arguments: a span's or event's fields, or a caller's integers.
pub(super) enum Args<'a> {
    Fields(&'a Map<String, Value>),
    Integers(&'a [(&'a str, u64)]),
}

/// Chrome ids of a track: its process and its thread.
#[derive(Clone, Copy)]
struct TrackIds {
    pid: u64,
    tid: u64,
}

/// A track seen before: its ids if the filter keeps it.
type Track = Option<TrackIds>;

/// Writes the trace to `out` as events arrive; see the module docs.
pub(super) struct Writer {
    out: Box<dyn Write + Send>,
    options: TraceOptions,
    tracks: HashMap<String, Track>,
    processes: HashMap<String, u64>,
    announced_tracks: u64,
    /// The line being built (reused, so writing allocates nothing).
    line: Vec<u8>,
    lines: u64,
    last_seen: Option<SimTime>,
    untimed_dropped: u64,
    filtered_out: u64,
    error: Option<io::Error>,
    finished: bool,
}

impl Writer {
    /// A writer to `out` keeping what `options` keep; the document's head is
    /// written now.
    pub fn new(out: Box<dyn Write + Send>, options: TraceOptions) -> Self {
        let mut writer = Writer {
            out,
            options,
            tracks: HashMap::new(),
            processes: HashMap::new(),
            announced_tracks: 0,
            line: Vec::with_capacity(256),
            lines: 0,
            last_seen: None,
            untimed_dropped: 0,
            filtered_out: 0,
            error: None,
            finished: false,
        };
        let head = writer
            .out
            .write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        writer.keep_error(head);
        writer
    }

    /// Takes a clock reading for a new span or event; `None` (outside a
    /// simulation) counts it as dropped.
    pub fn reading(&mut self, now: Option<SimTime>) -> Option<SimTime> {
        match now {
            Some(at) => self.last_seen = Some(at),
            None => self.untimed_dropped += 1,
        }
        now
    }

    /// The end of a span that started at `start`, closed when the clock read
    /// `now`; without a reading, the last time seen (never before `start`).
    pub fn end_time(&mut self, now: Option<SimTime>, start: SimTime) -> SimTime {
        if now.is_some() {
            self.last_seen = now;
        }
        now.or(self.last_seen).unwrap_or(start).max(start)
    }

    /// Writes `entry` if the options keep it; counts it otherwise.
    pub fn write(&mut self, entry: &Entry<'_>) {
        if self.finished || self.error.is_some() {
            return;
        }
        let end = entry.start + entry.dur.unwrap_or(SimDuration::ZERO);
        let kept = self.options.window.overlaps(entry.start, end);
        let ids = if kept { self.track(entry.track) } else { None };
        let Some(ids) = ids else {
            self.filtered_out += 1;
            return;
        };
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        event_line(&mut line, entry, ids);
        self.emit(&line);
        self.line = line;
    }

    /// The ids of `name`, announcing it first if it is new; `None` if the
    /// filter drops it.
    fn track(&mut self, name: &str) -> Track {
        if let Some(track) = self.tracks.get(name) {
            return *track;
        }
        let track = self.options.filter.keeps(name).then(|| self.announce(name));
        self.tracks.insert(name.to_owned(), track);
        track
    }

    /// Gives `name` the next thread id, in its process (announced if new).
    fn announce(&mut self, name: &str) -> TrackIds {
        let process = process_of(name);
        let pid = match self.processes.get(process) {
            Some(&pid) => pid,
            None => {
                let pid = self.processes.len() as u64 + 1;
                self.processes.insert(process.to_owned(), pid);
                self.metadata(pid, 0, "process_name", "name", process.into());
                self.metadata(pid, 0, "process_sort_index", "sort_index", pid.into());
                pid
            }
        };
        self.announced_tracks += 1;
        let tid = self.announced_tracks;
        self.metadata(pid, tid, "thread_name", "name", name.into());
        self.metadata(pid, tid, "thread_sort_index", "sort_index", tid.into());
        TrackIds { pid, tid }
    }

    fn metadata(&mut self, pid: u64, tid: u64, name: &str, key: &str, value: Value) {
        let line = format!(
            "{{\"name\":\"{name}\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"{key}\":{value}}}}}"
        );
        self.emit(line.as_bytes());
    }

    /// Writes one line of the event array.
    fn emit(&mut self, line: &[u8]) {
        let separator: &[u8] = if self.lines == 0 { b"" } else { b",\n" };
        self.lines += 1;
        let written = self
            .out
            .write_all(separator)
            .and_then(|()| self.out.write_all(line));
        self.keep_error(written);
    }

    fn keep_error(&mut self, result: io::Result<()>) {
        if let Err(error) = result {
            self.error.get_or_insert(error);
        }
    }

    /// How many spans and events were dropped for lack of a virtual time.
    pub fn untimed_dropped(&self) -> u64 {
        self.untimed_dropped
    }

    /// The end of the document: what was left out, and why.
    pub fn tail(&self) -> String {
        let other = serde_json::json!({
            "clock": "virtual",
            "order": "completion",
            "untimed_dropped": self.untimed_dropped,
            "filtered_out": self.filtered_out,
            "window": self.options.window.to_string(),
            "filter": self.options.filter.to_string(),
        });
        format!("\n],\"otherData\":{other}}}\n")
    }

    /// Writes the tail and flushes; later events are ignored. Reports the
    /// first write error of the whole trace, if any.
    pub fn finish(&mut self) -> io::Result<()> {
        if !self.finished {
            self.finished = true;
            let tail = self.tail();
            let written = self
                .out
                .write_all(tail.as_bytes())
                .and_then(|()| self.out.flush());
            self.keep_error(written);
        }
        match self.error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// The process a track belongs to: the first level of its dotted name, up
/// to the first `.` or `->` (`sip3.cube0.pe1` and `sip3.cube0.r0c0->...` in
/// `sip3`, `host.rank0` in `host`); names without one share a catch-all.
fn process_of(track: &str) -> &str {
    let end = [track.find('.'), track.find("->")]
        .into_iter()
        .flatten()
        .min();
    match end {
        Some(end) if end > 0 => &track[..end],
        _ => CATCH_ALL_PROCESS,
    }
}

/// Appends `entry` as one Chrome trace event.
fn event_line(line: &mut Vec<u8>, entry: &Entry<'_>, ids: TrackIds) {
    line.extend_from_slice(b"{\"name\":");
    push_json(line, entry.name);
    line.extend_from_slice(b",\"cat\":");
    push_json(line, entry.category);
    match entry.dur {
        Some(dur) => {
            line.extend_from_slice(b",\"ph\":\"X\",\"dur\":");
            push_micros(line, dur.as_ps());
        }
        None => line.extend_from_slice(b",\"ph\":\"i\",\"s\":\"t\""),
    }
    line.extend_from_slice(b",\"pid\":");
    push_u64(line, ids.pid);
    line.extend_from_slice(b",\"tid\":");
    push_u64(line, ids.tid);
    line.extend_from_slice(b",\"ts\":");
    push_micros(line, entry.start.as_ps());
    line.extend_from_slice(b",\"args\":{");
    match entry.args {
        Args::Fields(fields) => {
            for (key, value) in fields {
                if !matches!(key.as_str(), "start_ps" | "dur_ps") {
                    push_json(line, key);
                    line.push(b':');
                    push_json(line, value);
                    line.push(b',');
                }
            }
        }
        Args::Integers(args) => {
            for (key, value) in args {
                push_json(line, key);
                line.push(b':');
                push_u64(line, *value);
                line.push(b',');
            }
        }
    }
    line.extend_from_slice(b"\"start_ps\":");
    push_u64(line, entry.start.as_ps());
    if let Some(dur) = entry.dur {
        line.extend_from_slice(b",\"dur_ps\":");
        push_u64(line, dur.as_ps());
    }
    line.extend_from_slice(b"}}");
}

/// A value as JSON (writing into a `Vec` cannot fail).
fn push_json(line: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    serde_json::to_writer(line, value).expect("a Vec accepts every write");
}

fn push_u64(line: &mut Vec<u8>, n: u64) {
    line.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Digits after the point of a microsecond written in picoseconds.
const FRAC_DIGITS: usize = PS_PER_US.ilog10() as usize;

/// Picoseconds as an exact decimal number of microseconds: `1234567` is
/// `1.234567`, `1500000` is `1.5`.
fn push_micros(line: &mut Vec<u8>, ps: u64) {
    push_u64(line, ps / PS_PER_US);
    let mut frac = ps % PS_PER_US;
    if frac == 0 {
        return;
    }
    let mut digits = [b'0'; FRAC_DIGITS];
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (frac % 10) as u8;
        frac /= 10;
    }
    let significant = FRAC_DIGITS - digits.iter().rev().take_while(|&&d| d == b'0').count();
    line.push(b'.');
    line.extend_from_slice(&digits[..significant]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::options::{ComponentFilter, TraceWindow};

    /// A writer into a buffer the test reads back.
    fn writer(options: TraceOptions) -> (Writer, Arc<Mutex<Vec<u8>>>) {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let out = super::super::output::SharedBuffer(buffer.clone());
        (Writer::new(Box::new(out), options), buffer)
    }

    fn put(writer: &mut Writer, ps: u64, track: &str, dur: Option<u64>) {
        writer.write(&Entry {
            track,
            name: &format!("at {ps}"),
            category: "test",
            start: SimTime::from_ps(ps),
            dur: dur.map(SimDuration::from_ps),
            args: Args::Integers(&[("n", 1)]),
        });
    }

    fn finished(mut writer: Writer, buffer: &Mutex<Vec<u8>>) -> Value {
        writer.finish().unwrap();
        serde_json::from_slice(&buffer.lock().unwrap()).unwrap()
    }

    fn timed(doc: &Value) -> Vec<&Value> {
        let events = doc["traceEvents"].as_array().unwrap();
        events.iter().filter(|e| e["ph"] != "M").collect()
    }

    #[test]
    fn micros_are_exact_decimals_of_picoseconds() {
        let cases = [
            (0, "0"),
            (64, "0.000064"),
            (1_000_000, "1"),
            (1_500_000, "1.5"),
            (1_234_567, "1.234567"),
            (u64::MAX, "18446744073709.551615"),
        ];
        for (ps, text) in cases {
            let mut line = Vec::new();
            push_micros(&mut line, ps);
            assert_eq!(String::from_utf8(line).unwrap(), text);
        }
    }

    #[test]
    fn events_are_written_in_arrival_order_with_tracks_announced_first() {
        let (mut writer, buffer) = writer(TraceOptions::default());
        put(&mut writer, 30, "sip0.a", Some(5));
        put(&mut writer, 10, "sip1.b", None);
        put(&mut writer, 10, "sip0.c", None);
        let doc = finished(writer, &buffer);
        let events = timed(&doc);
        let names: Vec<&str> = events.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["at 30", "at 10", "at 10"]);
        let ids: Vec<(u64, u64)> = events
            .iter()
            .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
            .collect();
        assert_eq!(ids, [(1, 1), (2, 2), (1, 3)], "sip0 is process 1, sip1 2");
        let all = doc["traceEvents"].as_array().unwrap();
        assert_eq!(all[0]["name"], "process_name");
        assert_eq!(all[0]["args"]["name"], "sip0");
        assert_eq!(all[2]["name"], "thread_name");
        assert_eq!(all[2]["args"]["name"], "sip0.a");
        assert_eq!(all[4]["name"], "at 30", "announced just before its event");
        assert_eq!(events[0]["args"]["n"], 1);
        assert_eq!(events[0]["args"]["dur_ps"], 5);
    }

    #[test]
    fn processes_are_the_first_level_of_track_names() {
        let cases = [
            ("sip3.cube0.pe1", "sip3"),
            ("sip3.cube0.r0c0->sip3.cube0.r0c1", "sip3"),
            ("host->sip0.pcie_ep", "host"),
            ("host.rank0", "host"),
            ("kernbench::ccl", CATCH_ALL_PROCESS),
            ("link0", CATCH_ALL_PROCESS),
            (".odd", CATCH_ALL_PROCESS),
        ];
        for (track, process) in cases {
            assert_eq!(process_of(track), process, "{track}");
        }
    }

    #[test]
    fn the_window_and_filter_leave_events_out_and_count_them() {
        let options = TraceOptions {
            window: "100ps..200ps".parse::<TraceWindow>().unwrap(),
            filter: "!*.hidden".parse::<ComponentFilter>().unwrap(),
        };
        let (mut writer, buffer) = writer(options);
        put(&mut writer, 50, "sip0.a", Some(49)); // ends before the window
        put(&mut writer, 50, "sip0.a", Some(50)); // touches it
        put(&mut writer, 150, "sip0.hidden", None); // filtered
        put(&mut writer, 201, "sip0.b", None); // after it
        let doc = finished(writer, &buffer);
        let starts: Vec<u64> = timed(&doc)
            .iter()
            .map(|e| e["args"]["start_ps"].as_u64().unwrap())
            .collect();
        assert_eq!(starts, [50]);
        let threads = doc["traceEvents"].as_array().unwrap().iter();
        let threads = threads.filter(|e| e["name"] == "thread_name").count();
        assert_eq!(threads, 1, "tracks without a kept event are not announced");
        assert_eq!(doc["otherData"]["filtered_out"], 3);
        assert_eq!(doc["otherData"]["window"], "100 ps..200 ps");
        assert_eq!(doc["otherData"]["filter"], "!*.hidden");
    }

    #[test]
    fn untimed_readings_are_counted_and_spans_end_at_last_seen() {
        let (mut writer, buffer) = writer(TraceOptions::default());
        assert_eq!(writer.reading(None), None);
        let start = writer.reading(Some(SimTime::from_ps(7))).unwrap();
        assert_eq!(writer.end_time(None, start), start);
        writer.end_time(Some(SimTime::from_ps(20)), start);
        assert_eq!(writer.end_time(None, start), SimTime::from_ps(20));
        let doc = finished(writer, &buffer);
        assert_eq!(doc["otherData"]["untimed_dropped"], 1);
        assert!(timed(&doc).is_empty());
    }

    #[test]
    fn nothing_is_written_after_finish() {
        let (mut writer, buffer) = writer(TraceOptions::default());
        writer.finish().unwrap();
        let before = buffer.lock().unwrap().len();
        put(&mut writer, 1, "sip0.a", None);
        writer.finish().unwrap();
        assert_eq!(buffer.lock().unwrap().len(), before);
    }
}
