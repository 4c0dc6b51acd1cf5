//! Measures the simulation core's speed on the W1 and W2 workloads.
//!
//! `cargo run --release --example sim_speed -- --json` prints one JSON object
//! per workload (workload, events, wall_s, events_per_s, final_time_ps).

use kernbench::sim::speed::{self, SpeedResult};

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let runs: [fn() -> Result<SpeedResult, kernbench::sim::SimError>; 2] =
        [speed::w1_sleep_storm, speed::w2_ring_pingpong];
    for run in runs {
        match run() {
            Ok(result) if json => {
                println!("{}", serde_json::to_string(&result).expect("serialisable"))
            }
            Ok(r) => println!(
                "{}: {} events in {:.3} s = {:.2} M events/s, final time {} ps",
                r.workload,
                r.events,
                r.wall_s,
                r.events_per_s / 1e6,
                r.final_time_ps
            ),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
}
