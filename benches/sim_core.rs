//! Speed of the simulation core on the W1 (sleep storm) and W2 (ring
//! ping-pong) workloads: `cargo bench --bench sim_core` runs each ten times
//! (after one warm-up run) and prints the median, fastest and slowest wall
//! time and the median's events per second. `examples/sim_speed` is one run
//! of each, for scripts. (A plain harness, not criterion: the measurement
//! is a median of whole runs, and criterion with the crates only it needs
//! was 12 % of the CPU time of a fresh clone's first build; ADR-0032.)

use kernbench::sim::SimError;
use kernbench::sim::speed::{self, SpeedResult};

/// The allocator of every binary (ADR-0026), which `main` tells to keep
/// the memory it frees (ADR-0072).
#[global_allocator]
static ALLOCATOR: kernbench::allocator::Allocator = kernbench::allocator::Allocator;

/// Timed runs per workload.
const RUNS: usize = 10;

/// Runs `workload` once to warm up, then [`RUNS`] times; prints one line.
fn bench(workload: fn() -> Result<SpeedResult, SimError>) -> Result<(), SimError> {
    workload()?;
    let mut runs = (0..RUNS)
        .map(|_| workload())
        .collect::<Result<Vec<_>, _>>()?;
    runs.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let median = &runs[RUNS / 2];
    println!(
        "sim_core/{}: median {:.4} s ({:.2} M events/s), fastest {:.4} s, slowest {:.4} s, {} runs",
        median.workload,
        median.wall_s,
        median.events_per_s / 1e6,
        runs[0].wall_s,
        runs[RUNS - 1].wall_s,
        RUNS
    );
    Ok(())
}

fn main() -> Result<(), SimError> {
    kernbench::allocator::keep_freed_memory();
    // `cargo test --benches` passes `--test`-style flags; a bench run is
    // `--bench`. Only a bench run measures.
    if !std::env::args().any(|a| a == "--bench") {
        return Ok(());
    }
    bench(speed::w1_sleep_storm)?;
    bench(speed::w2_ring_pingpong)
}
