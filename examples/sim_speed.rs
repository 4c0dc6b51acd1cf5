//! Measures the simulation core's speed on the W1 and W2 workloads.
//!
//! `cargo run --profile perf --example sim_speed -- --json` prints one JSON object
//! per workload (workload, events, wall_s, events_per_s, final_time_ps,
//! order_hash); without `--json`, one readable line each.

use std::io::Write;
use std::process::ExitCode;

use kernbench::sim::SimError;
use kernbench::sim::speed::{self, SpeedResult};

/// The allocator of every binary (ADR-0026): the simulator makes and
/// frees millions of small objects; mimalloc keeps them closer together.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn line(result: &SpeedResult, json: bool) -> String {
    if json {
        return serde_json::to_string(result).expect("a SpeedResult always serialises");
    }
    format!(
        "{}: {} events in {:.3} s = {:.2} M events/s, final time {} ps",
        result.workload,
        result.events,
        result.wall_s,
        result.events_per_s / 1e6,
        result.final_time_ps
    )
}

fn main() -> ExitCode {
    let json = std::env::args().any(|a| a == "--json");
    let workloads: [fn() -> Result<SpeedResult, SimError>; 2] =
        [speed::w1_sleep_storm, speed::w2_ring_pingpong];
    let mut out = std::io::stdout().lock();
    for run in workloads {
        let text = match run() {
            Ok(result) => line(&result, json),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        };
        if writeln!(out, "{text}").is_err() {
            break; // the reader went away (`| head`)
        }
    }
    ExitCode::SUCCESS
}
