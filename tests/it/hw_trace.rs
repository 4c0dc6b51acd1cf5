//! Hardware busy periods on the virtual-time timeline. Run in a process of
//! its own: the `tracing` callsites of the hardware models are shared
//! process-wide, and a test without a subscriber running on another thread
//! of the same binary could change their cached interest mid-run.

use std::num::NonZeroU64;
use std::rc::Rc;

use kernbench::config::units::{Bandwidth, Fraction, Size};
use kernbench::hw::{HopParams, Link, TransferReport, transfer};
use kernbench::sim::{SimDuration, SimTime, Simulation};
use kernbench::trace::ChromeTraceLayer;
use tracing_subscriber::layer::SubscriberExt;

/// Two 1 GB/s hops with 5 ns latency.
fn links() -> Vec<Rc<Link>> {
    let params = HopParams::new(
        Bandwidth::from_bytes_per_sec(1_000_000_000).unwrap(),
        Fraction::from_ppm(1_000_000).unwrap(),
        SimDuration::from_ps(5_000),
        Size::from_bytes(0),
    );
    (0..2)
        .map(|i| Rc::new(Link::new(&format!("link{i}"), params)))
        .collect()
}

/// 200 bytes in packets of 100 over the two hops.
fn run() -> TransferReport {
    let mut simulation = Simulation::new();
    let path = links();
    let done = simulation.spawn("transfer", async move {
        transfer(&path, 200, NonZeroU64::new(100).unwrap()).await
    });
    simulation.run().unwrap();
    done.output().unwrap().unwrap()
}

#[test]
fn packets_are_spans_on_their_links_tracks_and_tracing_changes_no_time() {
    if crate::own_process::elsewhere(
        "hw_trace::packets_are_spans_on_their_links_tracks_and_tracing_changes_no_time",
    ) {
        return; // alone in its own process (see the module doc)
    }
    let (layer, handle) = ChromeTraceLayer::with_sim_clock();
    let subscriber = tracing_subscriber::registry().with(layer);
    let traced = tracing::subscriber::with_default(subscriber, run);
    // 100 B at 1 GB/s = 100 ns per packet, 5 ns latency per hop.
    assert_eq!(
        handle.spans("link0", "packet"),
        vec![(0, 100_000), (100_000, 100_000)]
    );
    assert_eq!(
        handle.spans("link1", "packet"),
        vec![(105_000, 100_000), (205_000, 100_000)]
    );
    assert_eq!(traced.end, SimTime::from_ps(310_000));
    assert_eq!(run(), traced, "tracing changed simulated time");
}
