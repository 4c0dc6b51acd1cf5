//! The collective scale benchmark and the fidelity cross-check.
//!
//! ```sh
//! cargo run --release --example scale -- --json              # the scale matrix
//! cargo run --release --example scale -- --compare           # packet vs flow table
//! cargo run --release --example scale -- --one 16 65536 flow ring_allreduce
//! ```
//!
//! Every point is `ccl_allreduce` timing-only (no `--verify-data`) on a fresh
//! machine of `S` SIPs (a non-square grid is `S/2 × 2`) × the default 16 cubes,
//! run in a child process of this example so that its wall time and peak
//! RSS are its own, and stopped after `--timeout` seconds (default 300).
//!
//! - the **scale matrix** (default): 4, 16, 64 SIPs × 1 MiB, 64 MiB, 1 GiB per
//!   rank × both fidelities (packet only up to 64 MiB, and at 64 MiB up to
//!   16 SIPs: 64 SIPs takes longer than the timeout; beyond, it runs for
//!   hours); one JSON object per run with `--json`: wall time, peak RSS,
//!   simulated events, IPCQ messages, wall µs per message, events per wall
//!   second and the simulated all-reduce time;
//! - **`--compare`**: the all-reduce catalogue in both fidelities, a table of
//!   machine, algorithm, size, packet time, flow time and their difference;
//!   a row outside 5 % says so and why, and the run exits 1 (`--quick`
//!   keeps the cases that take seconds and are all inside: the CI gate).
//!
//! A case that fails or reaches its timeout is a failure: the table says
//! so and the example exits 1, with `--json` too.

use std::error::Error;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kernbench::ccl::CclConfig;
use kernbench::config::Overrides;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, Options};
use serde_json::{Value, json};

/// The allocator of every binary (ADR-0026): the simulator makes and
/// frees millions of small objects; mimalloc keeps them closer together.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One simulated run: machine, size, fidelity, algorithm.
#[derive(Debug, Clone)]
struct Point {
    sips: u32,
    bytes: u64,
    fidelity: &'static str,
    algorithm: &'static str,
    /// `system.sips.topology`.
    topology: &'static str,
}

impl Point {
    fn new(sips: u32, topology: &'static str, algorithm: &'static str, bytes: u64) -> Point {
        Point {
            sips,
            bytes,
            fidelity: "packet",
            algorithm,
            topology,
        }
    }

    fn with(&self, fidelity: &'static str) -> Point {
        Point {
            fidelity,
            ..self.clone()
        }
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.sips.to_string(),
            self.topology.to_owned(),
            self.algorithm.to_owned(),
            self.bytes.to_string(),
            self.fidelity.to_owned(),
        ]
    }

    fn parse(args: &[String]) -> Result<Point, Box<dyn Error>> {
        let [sips, topology, algorithm, bytes, fidelity] = args else {
            return Err("--one SIPS TOPOLOGY ALGORITHM BYTES FIDELITY".into());
        };
        let leak = |s: &String| -> &'static str { Box::leak(s.clone().into_boxed_str()) };
        Ok(Point {
            sips: sips.parse()?,
            bytes: bytes.parse()?,
            fidelity: leak(fidelity),
            algorithm: leak(algorithm),
            topology: leak(topology),
        })
    }

    fn machine(&self) -> String {
        format!("{} SIPs {}", self.sips, self.topology)
    }
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The scale matrix of issue 8.
fn matrix() -> Vec<Point> {
    let mut points = Vec::new();
    for sips in [4, 16, 64] {
        for bytes in [MIB, 64 * MIB, GIB] {
            let point = Point::new(sips, "torus_2d", "intercube_allreduce", bytes);
            // Packet mode is the reference up to 64 MiB, but 64 SIPs x
            // 64 MiB takes longer than the default timeout on a laptop.
            if bytes < 64 * MIB || (bytes == 64 * MIB && sips <= 16) {
                points.push(point.with("packet"));
            }
            points.push(point.with("flow"));
        }
    }
    points.push(Point::new(16, "torus_2d", "ring_allreduce", 64 * KIB).with("flow"));
    points.push(Point::new(16, "torus_2d", "ring_allreduce", 64 * KIB).with("packet"));
    points
}

/// The all-reduce catalogue both fidelities are compared on; `quick`
/// keeps the cases that take seconds in packet mode.
fn catalogue(quick: bool) -> Vec<Point> {
    let mut points = vec![
        Point::new(2, "ring_1d", "intercube_allreduce", 64 * KIB),
        Point::new(2, "ring_1d", "intercube_allreduce", MIB),
        Point::new(4, "torus_2d", "intercube_allreduce", MIB),
        Point::new(4, "mesh_2d_no_wrap", "intercube_allreduce", MIB),
        Point::new(6, "torus_2d", "intercube_allreduce", 192 * KIB),
        Point::new(2, "ring_1d", "ring_allreduce", 64 * KIB),
        Point::new(4, "ring_1d", "ring_allreduce", 64 * KIB),
    ];
    if !quick {
        points.push(Point::new(2, "ring_1d", "intercube_allreduce", 16 * MIB));
        points.push(Point::new(16, "torus_2d", "ring_allreduce", 64 * KIB));
        points.push(Point::new(16, "torus_2d", "intercube_allreduce", 16 * MIB));
        // The smallest case of the saturation gap (docs/performance.md).
        points.push(Point::new(1, "ring_1d", "intercube_allreduce", 64 * MIB));
        points.push(Point::new(16, "torus_2d", "ring_rsag_allreduce", 64 * KIB));
    }
    points
}

/// Runs `point` in this process and prints its JSON line.
fn run_one(point: &Point) -> Result<(), Box<dyn Error>> {
    let mut sets = vec![
        format!("system.sips.count={}", point.sips),
        format!("system.sips.topology={}", point.topology),
        format!("simulation.fidelity={}", point.fidelity),
    ];
    let side = point.sips.isqrt();
    if point.topology != "ring_1d" && side * side != point.sips {
        // A non-square grid: w × 2 (6 SIPs: 3 × 2).
        sets.push(format!("system.sips.w={}", point.sips / 2));
        sets.push("system.sips.h=2".to_owned());
    }
    let overrides = Overrides::parse(&sets)?;
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology)?;
    let machine = Arc::new(Machine::build(&spec)?);
    let options = Options {
        ccl: Some(CclConfig::load(&CclConfig::default_source(), &[])?),
        ..Options::default()
    }
    .with("algorithm", point.algorithm)
    .with("size", point.bytes);
    let wall = Instant::now();
    let report = workloads::find("ccl_allreduce")?.run(machine, &options)?;
    let wall = wall.elapsed().as_secs_f64();
    let report = serde_json::to_value(&report)?;
    let figure = |name: &str| report["figures"][name].as_u64();
    let events = figure("sim_events").unwrap_or(0);
    let messages = figure("ipcq_messages").unwrap_or(0);
    let line = json!({
        "machine": point.machine(),
        "sips": point.sips,
        "cubes": spec.cubes_per_sip(),
        "algorithm": point.algorithm,
        "bytes_per_rank": point.bytes,
        "fidelity": point.fidelity,
        "allreduce_ps": figure("allreduce_ps"),
        "wall_s": wall,
        "peak_rss_mib": peak_rss_mib(),
        "sim_events": events,
        "ipcq_messages": messages,
        "wall_us_per_message": if messages > 0 { wall * 1e6 / messages as f64 } else { 0.0 },
        "events_per_s": events as f64 / wall,
    });
    println!("{line}");
    Ok(())
}

/// This process's peak resident set (VmHWM), in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs `point` in a child process with a timeout; its JSON line, or an
/// object saying why it has none.
fn run_child(point: &Point, timeout: Duration) -> Result<Value, Box<dyn Error>> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--one")
        .args(point.args())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let start = Instant::now();
    while child.try_wait()?.is_none() {
        if start.elapsed() > timeout {
            child.kill()?;
            child.wait()?;
            return Ok(failed(
                point,
                &format!("timeout after {} s", timeout.as_secs()),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    match serde_json::from_str(text.trim()) {
        Ok(value) if output.status.success() => Ok(value),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Ok(failed(point, stderr.trim()))
        }
    }
}

fn failed(point: &Point, reason: &str) -> Value {
    json!({
        "machine": point.machine(),
        "sips": point.sips,
        "algorithm": point.algorithm,
        "bytes_per_rank": point.bytes,
        "fidelity": point.fidelity,
        "error": reason,
    })
}

fn scale(points: &[Point], timeout: Duration, as_json: bool) -> Result<Outcome, Box<dyn Error>> {
    if !as_json {
        println!(
            "{:<18} {:<20} {:>11} {:>7} {:>9} {:>9} {:>12} {:>10} {:>9} {:>9}",
            "machine",
            "algorithm",
            "bytes/rank",
            "mode",
            "wall(s)",
            "rss(MiB)",
            "events",
            "messages",
            "us/msg",
            "Mev/s"
        );
    }
    let mut failed = 0;
    for point in points {
        let line = run_child(point, timeout)?;
        failed += usize::from(line["error"].is_string());
        if as_json {
            println!("{line}");
            continue;
        }
        if let Some(error) = line["error"].as_str() {
            let bytes = point.bytes;
            let (machine, algorithm, mode) = (point.machine(), point.algorithm, point.fidelity);
            println!("{machine:<18} {algorithm:<20} {bytes:>11} {mode:>7}  {error}");
            continue;
        }
        println!(
            "{:<18} {:<20} {:>11} {:>7} {:>9.2} {:>9.0} {:>12} {:>10} {:>9.2} {:>9.2}",
            point.machine(),
            point.algorithm,
            point.bytes,
            point.fidelity,
            line["wall_s"].as_f64().unwrap_or(0.0),
            line["peak_rss_mib"].as_f64().unwrap_or(0.0),
            line["sim_events"],
            line["ipcq_messages"],
            line["wall_us_per_message"].as_f64().unwrap_or(0.0),
            line["events_per_s"].as_f64().unwrap_or(0.0) / 1e6,
        );
    }
    Ok(match failed {
        0 => None,
        n => Some(format!(
            "{n} of {} case(s) failed or timed out",
            points.len()
        )),
    })
}

/// `None` when every case held; else what did not.
type Outcome = Option<String>;

/// The rows known to be outside the 5 % bound, with the reason the table
/// prints beside them (docs/performance.md, "Packet vs flow"; issue 24
/// item 5 is to bring them inside).
fn known_gap(point: &Point) -> Option<&'static str> {
    let saturated = point.algorithm == "intercube_allreduce" && point.bytes >= 16 * MIB;
    saturated.then_some(
        "every link saturated: flow serves one-packet flows between booked flows' packets \
         without delaying their computed ends, so it is optimistic (issue 24 item 5)",
    )
}

/// Packet vs flow on the catalogue; false if a case differs by more than
/// 5 % or fails.
fn compare(points: &[Point], timeout: Duration) -> Result<Outcome, Box<dyn Error>> {
    println!(
        "{:<22} {:<20} {:>10} {:>14} {:>14} {:>8}  note",
        "machine", "algorithm", "bytes/rank", "packet(us)", "flow(us)", "diff"
    );
    let (mut outside, mut failed) = (0, 0);
    for point in points {
        let time = |fidelity| -> Result<Option<f64>, Box<dyn Error>> {
            let line = run_child(&point.with(fidelity), timeout)?;
            Ok(line["allreduce_ps"].as_u64().map(|ps| ps as f64 / 1e6))
        };
        let (packet, flow) = (time("packet")?, time("flow")?);
        let (packet_text, flow_text, diff, note) = match (packet, flow) {
            (Some(p), Some(f)) => {
                let diff = (f - p) / p * 100.0;
                let note = if diff.abs() <= 5.0 {
                    String::new()
                } else {
                    outside += 1;
                    let why = known_gap(point).unwrap_or("not a known gap: a regression?");
                    format!("OUTSIDE 5 %: {why}")
                };
                (
                    format!("{p:.3}"),
                    format!("{f:.3}"),
                    format!("{diff:+.2}%"),
                    note,
                )
            }
            (p, f) => {
                failed += 1;
                let show = |t: Option<f64>| t.map_or("failed".to_owned(), |t| format!("{t:.3}"));
                (show(p), show(f), "-".to_owned(), "FAILED".to_owned())
            }
        };
        println!(
            "{:<22} {:<20} {:>10} {packet_text:>14} {flow_text:>14} {diff:>8}  {note}",
            point.machine(),
            point.algorithm,
            point.bytes,
        );
    }
    Ok(match (outside, failed) {
        (0, 0) => None,
        _ => Some(format!(
            "{outside} of {} row(s) outside the 5 % bound and {failed} failed or timed out",
            points.len()
        )),
    })
}

fn main() -> ExitCode {
    match run() {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(what)) => {
            eprintln!("error: {what}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

const USAGE: &str = "usage: scale [--json] [--compare [--quick]] [--timeout SECONDS] \
                     | --one SIPS TOPOLOGY ALGORITHM BYTES FIDELITY";

fn run() -> Result<Outcome, Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        run_one(&Point::parse(&args[1..])?)?;
        return Ok(None);
    }
    let (mut as_json, mut comparing, mut quick) = (false, false, false);
    let mut timeout = Duration::from_secs(300);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--json" => as_json = true,
            "--compare" => comparing = true,
            "--quick" => quick = true,
            "--timeout" => {
                let value = rest.next().ok_or(USAGE)?;
                let seconds: u64 = value
                    .parse()
                    .map_err(|_| format!("--timeout {value}: expected whole seconds\n{USAGE}"))?;
                timeout = Duration::from_secs(seconds);
            }
            other => return Err(format!("unknown argument `{other}`\n{USAGE}").into()),
        }
    }
    if comparing {
        compare(&catalogue(quick), timeout)
    } else {
        scale(&matrix(), timeout, as_json)
    }
}
