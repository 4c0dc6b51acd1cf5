//! The Chrome trace written by `kernbench::trace` for spans and events at
//! known (fake) virtual times: structure, exact times, args, tracks and
//! processes, completion order and byte-for-byte determinism.

use std::cell::Cell;

use kernbench::sim::SimTime;
use kernbench::trace::{ChromeTraceLayer, TraceHandle, TraceOptions};
use serde_json::Value;
use tracing::{info, info_span};
use tracing_subscriber::layer::SubscriberExt;

thread_local! {
    static NOW: Cell<Option<SimTime>> = const { Cell::new(None) };
}

fn fake_now() -> Option<SimTime> {
    NOW.with(Cell::get)
}

fn set_ps(ps: u64) {
    NOW.with(|now| now.set(Some(SimTime::from_ps(ps))));
}

/// Two PEs: pe0 runs a kernel with a nested DMA and a send event, pe1 a short
/// op; one event happens before the simulation starts.
fn scenario() -> TraceHandle {
    NOW.with(|now| now.set(None));
    let (layer, handle) = ChromeTraceLayer::new(fake_now);
    play(layer);
    handle
}

fn play(layer: ChromeTraceLayer) {
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        info!("configuring");
        set_ps(0);
        let kernel = info_span!(
            "kernel",
            component = "sip0.cube0.pe0",
            algo = "ring",
            n = 4_u64
        );
        set_ps(1_000_000);
        let other = info_span!("gemm", component = "sip0.cube0.pe1", m = -2_i64);
        set_ps(1_234_567);
        let dma = kernel.in_scope(|| info_span!("dma", nbytes = 64_u64, ratio = 0.5));
        set_ps(1_500_000);
        drop(other);
        set_ps(2_000_000);
        dma.in_scope(|| info!(dir = "E", ok = true, "send"));
        set_ps(3_000_064);
        drop(dma);
        set_ps(5_000_000);
        drop(kernel);
    });
}

fn events(doc: &Value) -> &[Value] {
    doc["traceEvents"]
        .as_array()
        .expect("traceEvents is an array")
}

fn find<'a>(doc: &'a Value, ph: &str, name: &str) -> &'a Value {
    let found = events(doc)
        .iter()
        .find(|e| e["ph"] == ph && e["name"] == name);
    found.unwrap_or_else(|| panic!("no {ph} event named {name}"))
}

fn track_tid<'a>(doc: &'a Value, track: &str) -> &'a Value {
    let named = events(doc)
        .iter()
        .find(|e| e["name"] == "thread_name" && e["args"]["name"] == track);
    &named.unwrap_or_else(|| panic!("no track {track}"))["tid"]
}

#[test]
fn metadata_names_the_process_and_one_track_per_component() {
    let doc = scenario().to_value();
    let process = find(&doc, "M", "process_name");
    assert_eq!(
        (&process["pid"], &process["args"]["name"]),
        (&1.into(), &"sip0".into())
    );
    assert_eq!(track_tid(&doc, "sip0.cube0.pe1"), 1, "its gemm ends first");
    assert_eq!(track_tid(&doc, "sip0.cube0.pe0"), 2);
    let threads = events(&doc).iter().filter(|e| e["name"] == "thread_name");
    assert!(threads.clone().all(|t| t["pid"] == 1), "both in sip0");
    assert_eq!(threads.count(), 2);
}

#[test]
fn spans_are_complete_events_at_exact_virtual_times() {
    let handle = scenario();
    let doc = handle.to_value();
    let cases = [
        ("kernel", 0, 5_000_000, "0", "5"),
        ("gemm", 1_000_000, 500_000, "1", "0.5"),
        ("dma", 1_234_567, 1_765_497, "1.234567", "1.765497"),
    ];
    let json = handle.to_json();
    for (name, start_ps, dur_ps, ts, dur) in cases {
        let span = find(&doc, "X", name);
        assert_eq!(span["args"]["start_ps"], start_ps, "{name}");
        assert_eq!(span["args"]["dur_ps"], dur_ps, "{name}");
        assert_eq!(span["ts"].as_f64(), ts.parse().ok(), "{name}");
        assert_eq!(span["dur"].as_f64(), dur.parse().ok(), "{name}");
        let text = format!(r#""name":"{name}","cat":"it::trace_json","ph":"X","dur":{dur},"#);
        assert!(json.contains(&text), "{text} not in {json}");
        assert!(
            json.contains(&format!(r#""ts":{ts},"#)),
            "{ts} not in {json}"
        );
    }
}

#[test]
fn fields_become_typed_args_and_tracks() {
    let doc = scenario().to_value();
    let kernel = find(&doc, "X", "kernel");
    assert_eq!(kernel["args"]["algo"], "ring");
    assert_eq!(kernel["args"]["n"], 4);
    assert!(kernel["args"].get("component").is_none());
    assert_eq!(find(&doc, "X", "gemm")["args"]["m"], -2);
    let dma = find(&doc, "X", "dma");
    assert_eq!(
        (&dma["args"]["nbytes"], &dma["args"]["ratio"]),
        (&64.into(), &0.5.into())
    );
    let send = find(&doc, "i", "send");
    assert_eq!(send["s"], "t");
    assert_eq!(send["args"]["start_ps"], 2_000_000);
    assert_eq!(send["args"]["dir"], "E");
    assert_eq!(send["args"]["ok"], true);
    assert_eq!(send["args"]["message"], "send");
    let pe0 = track_tid(&doc, "sip0.cube0.pe0");
    for event in [kernel, dma, send] {
        assert_eq!(&event["tid"], pe0, "{event}");
    }
}

#[test]
fn events_come_in_the_order_they_finish_and_untimed_ones_are_counted() {
    let handle = scenario();
    let doc = handle.to_value();
    let timed = events(&doc).iter().filter(|e| e["ph"] != "M");
    let starts: Vec<u64> = timed
        .map(|e| e["args"]["start_ps"].as_u64().unwrap())
        .collect();
    // gemm ends at 1.5 us, the send is at 2 us, dma ends at 3 us, kernel at 5.
    assert_eq!(starts, [1_000_000, 2_000_000, 1_234_567, 0]);
    assert_eq!(handle.untimed_dropped(), 1, "the configuring event");
    assert_eq!(doc["otherData"]["untimed_dropped"], 1);
}

#[test]
fn a_file_written_as_the_run_goes_has_the_same_bytes_as_memory() {
    let path =
        std::env::temp_dir().join(format!("kernbench-trace-json-{}.json", std::process::id()));
    NOW.with(|now| now.set(None));
    let options = TraceOptions::default();
    let (layer, guard) = ChromeTraceLayer::to_file_with_clock(&path, fake_now, options).unwrap();
    play(layer);
    guard.finish().unwrap();
    let written = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(written, scenario().to_json().into_bytes());
    assert_eq!(scenario().to_json(), scenario().to_json());
}

#[test]
fn options_keep_a_window_and_matching_tracks() {
    NOW.with(|now| now.set(None));
    let options = TraceOptions {
        window: "1.4us..2.5us".parse().unwrap(),
        filter: "!*.pe1".parse().unwrap(),
    };
    let (layer, handle) = ChromeTraceLayer::in_memory(fake_now, options);
    play(layer);
    let doc = handle.to_value();
    let names: Vec<&str> = events(&doc)
        .iter()
        .filter(|e| e["ph"] != "M")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // gemm (1 to 1.5 us) overlaps but is on pe1.
    assert_eq!(names, ["send", "dma", "kernel"]);
    assert_eq!(doc["otherData"]["filtered_out"], 1);
}
