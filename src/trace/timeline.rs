//! The recorded timeline and its rendering as Chrome trace JSON.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};

use crate::sim::{PS_PER_US, SimDuration, SimTime};

/// The timeline shared by the layer and its handles.
pub(super) type SharedTimeline = Arc<Mutex<Timeline>>;

/// Locks the timeline; a panic elsewhere while it was held leaves it usable.
pub(super) fn lock(timeline: &SharedTimeline) -> MutexGuard<'_, Timeline> {
    timeline.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When something was recorded: virtual time, then recording order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Stamp {
    pub at: SimTime,
    pub seq: u64,
}

/// One finished trace event: a complete span (with a duration) or an instant.
pub(super) struct Record {
    pub stamp: Stamp,
    pub dur: Option<SimDuration>,
    pub track: String,
    pub name: String,
    pub category: &'static str,
    pub args: Map<String, Value>,
}

/// Everything recorded so far, plus the bookkeeping for stamping.
#[derive(Default)]
pub(super) struct Timeline {
    records: Vec<Record>,
    next_seq: u64,
    last_seen: Option<SimTime>,
    untimed_dropped: u64,
}

impl Timeline {
    /// Stamps a new span or event read at `now`; `None` counts it as dropped.
    pub fn stamp(&mut self, now: Option<SimTime>) -> Option<Stamp> {
        let Some(at) = now else {
            self.untimed_dropped += 1;
            return None;
        };
        self.last_seen = Some(at);
        self.next_seq += 1;
        Some(Stamp {
            at,
            seq: self.next_seq,
        })
    }

    /// Stamps an event whose time the caller gives (it is not a clock
    /// reading, so it does not count as the last time seen).
    pub fn stamp_given(&mut self, at: SimTime) -> Stamp {
        self.next_seq += 1;
        Stamp {
            at,
            seq: self.next_seq,
        }
    }

    /// The end of a span that started at `start`, closed when the clock read
    /// `now`; without a reading, the last time seen (never before `start`).
    pub fn end_time(&mut self, now: Option<SimTime>, start: SimTime) -> SimTime {
        if now.is_some() {
            self.last_seen = now;
        }
        now.or(self.last_seen).unwrap_or(start).max(start)
    }

    /// Adds a finished event, putting its exact times into its args.
    pub fn push(&mut self, mut record: Record) {
        let args = &mut record.args;
        args.insert("start_ps".into(), record.stamp.at.as_ps().into());
        if let Some(dur) = record.dur {
            args.insert("dur_ps".into(), dur.as_ps().into());
        }
        self.records.push(record);
    }

    /// How many spans and events were dropped for lack of a virtual time.
    pub fn untimed_dropped(&self) -> u64 {
        self.untimed_dropped
    }

    /// The whole trace as a Chrome trace JSON document, one event a line.
    pub fn to_json(&self) -> String {
        let mut events: Vec<&Record> = self.records.iter().collect();
        events.sort_by_key(|r| r.stamp);
        let tracks = Tracks::in_order_of(&events);
        let mut lines = vec![metadata_line(0, "process_name", "name", "kernbench".into())];
        for (tid, name) in tracks.names.iter().enumerate() {
            let tid = tid as u64 + 1;
            lines.push(metadata_line(tid, "thread_name", "name", (*name).into()));
            lines.push(metadata_line(
                tid,
                "thread_sort_index",
                "sort_index",
                tid.into(),
            ));
        }
        lines.extend(events.iter().map(|r| event_line(r, tracks.tid(&r.track))));
        format!(
            "{{\"displayTimeUnit\":\"ns\",\"otherData\":{},\"traceEvents\":[\n{}\n]}}\n",
            serde_json::json!({"clock": "virtual", "untimed_dropped": self.untimed_dropped}),
            lines.join(",\n")
        )
    }
}

/// Chrome thread ids for tracks, numbered from 1 in order of first appearance.
struct Tracks<'a> {
    names: Vec<&'a str>,
    tids: HashMap<&'a str, u64>,
}

impl<'a> Tracks<'a> {
    fn in_order_of(events: &[&'a Record]) -> Self {
        let mut tracks = Tracks {
            names: Vec::new(),
            tids: HashMap::new(),
        };
        for record in events {
            let name = record.track.as_str();
            if !tracks.tids.contains_key(name) {
                tracks.names.push(name);
                tracks.tids.insert(name, tracks.names.len() as u64);
            }
        }
        tracks
    }

    fn tid(&self, track: &str) -> u64 {
        self.tids[track]
    }
}

fn metadata_line(tid: u64, name: &str, key: &str, value: Value) -> String {
    format!(
        "{{\"name\":\"{name}\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"{key}\":{value}}}}}"
    )
}

fn event_line(record: &Record, tid: u64) -> String {
    let phase = match record.dur {
        Some(dur) => format!("\"ph\":\"X\",\"dur\":{}", Micros(dur.as_ps())),
        None => "\"ph\":\"i\",\"s\":\"t\"".to_owned(),
    };
    format!(
        "{{\"name\":{},\"cat\":{},{phase},\"pid\":1,\"tid\":{tid},\"ts\":{},\"args\":{}}}",
        Value::from(record.name.as_str()),
        Value::from(record.category),
        Micros(record.stamp.at.as_ps()),
        serde_json::to_string(&record.args).expect("a JSON map always serialises"),
    )
}

/// Picoseconds written as an exact decimal number of microseconds.
struct Micros(u64);

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / PS_PER_US;
        let mut frac = self.0 % PS_PER_US;
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let mut digits = PS_PER_US.ilog10() as usize;
        while frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        write!(f, "{whole}.{frac:0digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(timeline: &mut Timeline, ps: u64, track: &str, dur: Option<u64>) {
        let stamp = timeline.stamp(Some(SimTime::from_ps(ps))).unwrap();
        timeline.push(Record {
            stamp,
            dur: dur.map(SimDuration::from_ps),
            track: track.into(),
            name: format!("at {ps}"),
            category: "test",
            args: Map::new(),
        });
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
            assert_eq!(Micros(ps).to_string(), text);
        }
    }

    #[test]
    fn events_sort_by_time_then_recording_order() {
        let mut timeline = Timeline::default();
        record(&mut timeline, 30, "b", Some(5));
        record(&mut timeline, 10, "a", None);
        record(&mut timeline, 10, "c", None);
        let doc: Value = serde_json::from_str(&timeline.to_json()).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] != "M")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["at 10", "at 10", "at 30"]);
        let tids: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] != "M")
            .map(|e| e["tid"].as_u64().unwrap())
            .collect();
        assert_eq!(
            tids,
            [1, 2, 3],
            "tracks a, c, b numbered by first appearance"
        );
    }

    #[test]
    fn untimed_records_are_counted_and_spans_end_at_last_seen() {
        let mut timeline = Timeline::default();
        assert_eq!(timeline.stamp(None), None);
        let start = timeline.stamp(Some(SimTime::from_ps(7))).unwrap().at;
        assert_eq!(timeline.end_time(None, start), start);
        timeline.end_time(Some(SimTime::from_ps(20)), start);
        assert_eq!(timeline.end_time(None, start), SimTime::from_ps(20));
        assert_eq!(timeline.untimed_dropped(), 1);
        let doc: Value = serde_json::from_str(&timeline.to_json()).unwrap();
        assert_eq!(doc["otherData"]["untimed_dropped"], 1);
    }
}
