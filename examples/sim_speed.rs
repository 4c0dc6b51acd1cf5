//! Measures the simulation core's speed on the W1 and W2 workloads, and W1
//! against its limit.
//!
//! `cargo run --profile perf --example sim_speed -- --json` prints one JSON
//! object per run (workload, events, wall_s, events_per_s, final_time_ps,
//! order_hash): W1 and `W1-heap` (W1's wake-ups in the same order from a
//! bare binary heap of (time, sequence, task), nothing else:
//! `speed::w1_heap_loop`) three times each, alternated, then W2; and last
//! `{"w1_to_heap_ratio": R, ...}`, the median of W1's events per second
//! over the median of the bare loop's (issue 24 item 6: the machine's
//! speed swings between runs; the ratio of runs side by side does not).
//! Without `--json`, one readable line each. `--only W1|W1-heap|W2` runs
//! that workload once and prints its line (for `valgrind --tool=callgrind`
//! and `perf record`, whose counts are exact where walls swing).

use std::io::Write;
use std::process::ExitCode;

use kernbench::sim::SimError;
use kernbench::sim::speed::{self, SpeedResult};

/// The allocator of every binary (ADR-0026), which `main` tells to keep
/// the memory it frees (ADR-0072).
#[global_allocator]
static ALLOCATOR: kernbench::allocator::Allocator = kernbench::allocator::Allocator;

/// Alternated runs of W1 and of the bare loop.
const PAIRS: usize = 3;

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

/// The middle of `rates` (an odd count).
fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// One speed workload, run once.
type Workload = fn() -> Result<SpeedResult, SimError>;

/// The workload named by `--only NAME`, if given; an unknown name is an
/// error naming the ones there are.
fn only() -> Result<Option<Workload>, String> {
    let args: Vec<String> = std::env::args().collect();
    let Some(at) = args.iter().position(|a| a == "--only") else {
        return Ok(None);
    };
    let heap: Workload = || Ok(speed::w1_heap());
    match args.get(at + 1).map(String::as_str) {
        Some("W1") => Ok(Some(speed::w1_sleep_storm)),
        Some("W1-heap") => Ok(Some(heap)),
        Some("W2") => Ok(Some(speed::w2_ring_pingpong)),
        other => Err(format!(
            "--only expects W1, W1-heap or W2, got {}",
            other.map_or("nothing".to_owned(), |o| format!("\"{o}\""))
        )),
    }
}

fn main() -> ExitCode {
    kernbench::allocator::keep_freed_memory();
    let json = std::env::args().any(|a| a == "--json");
    let outcome = match only() {
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
        Ok(Some(workload)) => workload().map(|result| println!("{}", line(&result, json))),
        Ok(None) => run(json),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(json: bool) -> Result<(), SimError> {
    let mut out = std::io::stdout().lock();
    let mut print = |text: String| writeln!(out, "{text}").is_ok();
    let (mut w1, mut heap) = (Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let result = speed::w1_sleep_storm()?;
        w1.push(result.events_per_s);
        let bare = speed::w1_heap();
        heap.push(bare.events_per_s);
        if !print(line(&result, json)) || !print(line(&bare, json)) {
            return Ok(()); // the reader went away (`| head`)
        }
    }
    if !print(line(&speed::w2_ring_pingpong()?, json)) {
        return Ok(());
    }
    let (w1, heap) = (median(w1), median(heap));
    let ratio = w1 / heap;
    print(if json {
        serde_json::json!({
            "w1_to_heap_ratio": ratio,
            "w1_median_events_per_s": w1,
            "heap_median_events_per_s": heap,
            "pairs": PAIRS,
        })
        .to_string()
    } else {
        format!(
            "W1 / bare heap loop: {ratio:.3} (medians of {PAIRS}: {:.2} / {:.2} M events/s)",
            w1 / 1e6,
            heap / 1e6
        )
    });
    Ok(())
}
