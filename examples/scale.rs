//! The collective scale benchmark and the fidelity cross-check.
//!
//! ```sh
//! cargo run --profile perf --example scale -- --json              # the scale matrix
//! cargo run --profile perf --example scale -- --compare           # packet vs flow table
//! cargo run --profile perf --example scale -- --per-event         # 256 vs 16 SIPs per event
//! cargo run --profile perf --example scale -- --one 16 torus_2d ring_allreduce 65536 flow
//! cargo run --profile perf --example scale -- --one 9 torus_2d ring_allgather 2097152 flow ccl_allgather
//! ```
//!
//! Every point is a collective workload (`ccl_allreduce` unless a
//! `--compare` row or `--one`'s sixth argument names another) timing-only
//! (no `--verify-data`) on a fresh
//! machine of `S` SIPs (a non-square grid is `S/2 × 2`) × the default 16 cubes,
//! run in a child process of this example so that its wall time and peak
//! RSS are its own, and stopped after `--timeout` seconds (default 300).
//!
//! - the **scale matrix** (default): 4, 16, 64 SIPs × 1 MiB, 64 MiB, 1 GiB per
//!   rank × both fidelities (packet only up to 64 MiB, and at 64 MiB up to
//!   16 SIPs: 64 SIPs takes longer than the timeout; beyond, it runs for
//!   hours), then 256 and 1,024 SIPs (16 × 16, 32 × 32) × 1 MiB, 64 MiB in
//!   flow mode; one JSON object per run with `--json`: wall time split into
//!   set-up (spec, machine, device and every event of simulated time zero:
//!   the process group) and simulation, each also in CPU time and in its
//!   system part (`set_up_sys_s`, `sim_sys_s`: mostly fresh pages cleared,
//!   ADR-0073), resident set after set-up and peak, simulated events, IPCQ
//!   messages, wall µs per message and per event (simulation alone, in wall
//!   and in CPU time: on a loaded machine only the CPU figure means
//!   anything), events per wall second, the simulated all-reduce time
//!   (`allreduce_ps`) and the call's time whatever the workload (`call_ps`);
//! - **`--per-event`**: 16 and 256 SIPs × 64 MiB in flow mode, three
//!   times each, alternated, and the ratio of the medians of their µs per
//!   event without set-up (issue 24: ≤ 1.25);
//! - **`--compare`**: a catalogue of every collective workload (all-reduce
//!   algorithms, all-gather, reduce-scatter, broadcast, reduce, all-to-all,
//!   gather, scatter, send/recv) in both fidelities, a table of workload,
//!   machine, algorithm, size, packet time, flow time and their difference
//!   (the call's time figure: `allreduce_ps`, `allgather_ps`, ...); a row
//!   outside 5 % says so and why, and the run exits 1 (`--quick` keeps the
//!   cases that take seconds and are all inside: the CI gate).
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

/// The allocator of every binary (ADR-0026), which `main` tells to keep
/// the memory it frees (ADR-0072).
#[global_allocator]
static ALLOCATOR: kernbench::allocator::Allocator = kernbench::allocator::Allocator;

/// One simulated run: workload, machine, size, fidelity, algorithm.
#[derive(Debug, Clone)]
struct Point {
    /// The collective workload (`ccl_allreduce`, `ccl_allgather`, ...).
    bench: &'static str,
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
            bench: "ccl_allreduce",
            sips,
            bytes,
            fidelity: "packet",
            algorithm,
            topology,
        }
    }

    /// The same point run by collective workload `bench`.
    fn of(self, bench: &'static str) -> Point {
        Point { bench, ..self }
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
            self.bench.to_owned(),
        ]
    }

    fn parse(args: &[String]) -> Result<Point, Box<dyn Error>> {
        /// `value`, `--one`'s argument `name`, as a whole number.
        fn whole<N: std::str::FromStr>(name: &str, value: &str) -> Result<N, String> {
            value.parse().map_err(|_| {
                format!("--one: {name} `{value}` is not a whole number in range (e.g. 16 or 65536)")
            })
        }
        let (args, bench) = match args {
            [rest @ .., bench] if rest.len() == 5 => (rest, bench.as_str()),
            _ => (args, "ccl_allreduce"),
        };
        let [sips, topology, algorithm, bytes, fidelity] = args else {
            return Err("--one SIPS TOPOLOGY ALGORITHM BYTES FIDELITY [BENCH]".into());
        };
        let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
        Ok(Point {
            bench: leak(bench),
            sips: whole("SIPS", sips)?,
            bytes: whole("BYTES", bytes)?,
            fidelity: leak(fidelity),
            algorithm: leak(algorithm),
            topology: leak(topology),
        })
    }

    fn machine(&self) -> String {
        let noun = if self.sips == 1 { "SIP" } else { "SIPs" };
        format!("{} {noun} {}", self.sips, self.topology)
    }

    /// The workload's figure for the call's time: `ccl_allgather` →
    /// `allgather_ps` (`workloads::collective`).
    fn time_figure(&self) -> String {
        format!("{}_ps", self.bench.trim_start_matches("ccl_"))
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
    for sips in [256, 1024] {
        for bytes in [MIB, 64 * MIB] {
            points.push(Point::new(sips, "torus_2d", "intercube_allreduce", bytes).with("flow"));
        }
    }
    points
}

/// The per-event comparison of issue 24: the same all-reduce on 16 and on
/// 256 SIPs.
fn per_event_points() -> [Point; 2] {
    [16, 256].map(|sips| Point::new(sips, "torus_2d", "intercube_allreduce", 64 * MIB).with("flow"))
}

/// The catalogue both fidelities are compared on: the all-reduce
/// algorithms, then every other collective workload with its default
/// algorithm (configs/ccl.yaml); `quick` keeps the cases that take
/// seconds in packet mode.
fn catalogue(quick: bool) -> Vec<Point> {
    let mut points = vec![
        Point::new(2, "ring_1d", "intercube_allreduce", 64 * KIB),
        Point::new(2, "ring_1d", "intercube_allreduce", MIB),
        Point::new(4, "torus_2d", "intercube_allreduce", MIB),
        Point::new(4, "mesh_2d_no_wrap", "intercube_allreduce", MIB),
        Point::new(6, "torus_2d", "intercube_allreduce", 192 * KIB),
        Point::new(2, "ring_1d", "ring_allreduce", 64 * KIB),
        Point::new(4, "ring_1d", "ring_allreduce", 64 * KIB),
        Point::new(4, "torus_2d", "ring_allgather", 64 * KIB).of("ccl_allgather"),
        Point::new(4, "torus_2d", "ring_reducescatter", MIB).of("ccl_reducescatter"),
        Point::new(4, "torus_2d", "chain_broadcast", MIB).of("ccl_broadcast"),
        Point::new(4, "torus_2d", "chain_reduce", MIB).of("ccl_reduce"),
        Point::new(1, "ring_1d", "ring_alltoall", MIB).of("ccl_alltoall"),
        Point::new(4, "torus_2d", "p2p_gather", MIB).of("ccl_gather"),
        Point::new(4, "torus_2d", "p2p_scatter", MIB).of("ccl_scatter"),
        Point::new(4, "torus_2d", "p2p_copy", MIB).of("ccl_sendrecv"),
    ];
    if !quick {
        points.push(Point::new(2, "ring_1d", "intercube_allreduce", 16 * MIB));
        points.push(Point::new(16, "torus_2d", "ring_allreduce", 64 * KIB));
        points.push(Point::new(16, "torus_2d", "intercube_allreduce", 16 * MIB));
        // The smallest case of the saturation gap (docs/performance.md).
        points.push(Point::new(1, "ring_1d", "intercube_allreduce", 64 * MIB));
        points.push(Point::new(16, "torus_2d", "ring_rsag_allreduce", 64 * KIB));
        // Issue 24 item 5: three of 30 contended cases a user tried.
        points.push(Point::new(9, "torus_2d", "tree_allreduce", MIB));
        points.push(Point::new(
            4,
            "torus_2d",
            "lrab_hierarchical_allreduce",
            2 * MIB,
        ));
        points.push(Point::new(9, "torus_2d", "ring_allgather", 2 * MIB).of("ccl_allgather"));
        // The smallest machine with the all-gather's gap.
        points.push(Point::new(1, "ring_1d", "ring_allgather", 2 * MIB).of("ccl_allgather"));
        let larger = [
            ("ccl_reducescatter", "ring_reducescatter", 4, "torus_2d"),
            ("ccl_broadcast", "chain_broadcast", 4, "torus_2d"),
            ("ccl_reduce", "chain_reduce", 4, "torus_2d"),
            ("ccl_alltoall", "ring_alltoall", 1, "ring_1d"),
            ("ccl_gather", "p2p_gather", 4, "torus_2d"),
            ("ccl_scatter", "p2p_scatter", 4, "torus_2d"),
            ("ccl_sendrecv", "p2p_copy", 2, "ring_1d"),
        ];
        for (bench, algorithm, sips, topology) in larger {
            points.push(Point::new(sips, topology, algorithm, 8 * MIB).of(bench));
        }
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
    let (start, cpu_start, sys_start) = (Instant::now(), cpu_seconds(), system_seconds());
    let overrides = Overrides::parse(&sets)?;
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology)?;
    let machine = Arc::new(Machine::build(&spec)?);
    let options = Options {
        ccl: Some(CclConfig::load(&CclConfig::default_source(), &[])?),
        ..Options::default()
    }
    .with("algorithm", point.algorithm)
    .with("size", point.bytes);
    let (mut set_up, mut cpu_set_up, mut set_up_rss) = ((start, 0), cpu_start, 0.0);
    let mut sys_set_up = sys_start;
    let report = workloads::find(point.bench)?.run_marked(machine, &options, &mut |events| {
        set_up = (Instant::now(), events);
        (cpu_set_up, sys_set_up) = (cpu_seconds(), system_seconds());
        set_up_rss = status_mib("VmRSS:");
    })?;
    let (end, cpu_end, sys_end) = (Instant::now(), cpu_seconds(), system_seconds());
    let wall = (end - start).as_secs_f64();
    let (set_up_s, sim_s) = (
        (set_up.0 - start).as_secs_f64(),
        (end - set_up.0).as_secs_f64(),
    );
    let report = serde_json::to_value(&report)?;
    let figure = |name: &str| report["figures"][name].as_u64();
    let events = figure("sim_events").unwrap_or(0);
    let sim_events = events.saturating_sub(set_up.1);
    let messages = figure("ipcq_messages").unwrap_or(0);
    let line = json!({
        "machine": point.machine(),
        "bench": point.bench,
        "sips": point.sips,
        "cubes": spec.cubes_per_sip(),
        "algorithm": point.algorithm,
        "bytes_per_rank": point.bytes,
        "fidelity": point.fidelity,
        "allreduce_ps": figure("allreduce_ps"),
        "call_ps": figure(&point.time_figure()),
        "wall_s": wall,
        "set_up_s": set_up_s,
        "sim_s": sim_s,
        "set_up_cpu_s": cpu_set_up - cpu_start,
        "sim_cpu_s": cpu_end - cpu_set_up,
        "set_up_sys_s": sys_set_up - sys_start,
        "sim_sys_s": sys_end - sys_set_up,
        "peak_rss_mib": peak_rss_mib(),
        "set_up_rss_mib": set_up_rss,
        "sim_events": events,
        "ipcq_messages": messages,
        "wall_us_per_message": if messages > 0 { wall * 1e6 / messages as f64 } else { 0.0 },
        "sim_us_per_event": if sim_events > 0 { sim_s * 1e6 / sim_events as f64 } else { 0.0 },
        "sim_cpu_us_per_event": if sim_events > 0 {
            (cpu_end - cpu_set_up) * 1e6 / sim_events as f64
        } else {
            0.0
        },
        "events_per_s": events as f64 / wall,
    });
    println!("{line}");
    Ok(())
}

/// This process's CPU time so far: what a run costs whatever else the
/// machine runs, where wall time counts the waits for a core too. Read
/// in nanoseconds from `/proc/self/schedstat` (the main thread, which
/// runs the simulation; user and system time alike), else in clock ticks
/// of 10 ms from `/proc/self/stat` (user + system): a tick is 7 % of the
/// 16-SIP point's simulation.
fn cpu_seconds() -> f64 {
    let schedstat = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    let on_cpu_ns = schedstat
        .split_whitespace()
        .next()
        .and_then(|ns| ns.parse::<u64>().ok());
    on_cpu_ns.map_or_else(cpu_seconds_in_ticks, |ns| ns as f64 * 1e-9)
}

/// The system part of the main thread's CPU time so far (`getrusage`,
/// microseconds; the kernel splits its exact total by where its clock
/// ticks fell): mostly the clearing of fresh pages, which on this VM
/// moves a small run's figures by a third (ADR-0073). 0 where the call
/// fails.
fn system_seconds() -> f64 {
    // The main thread (which runs the simulation) where the kernel can
    // tell threads apart, else the process.
    #[cfg(target_os = "linux")]
    let who = libc::RUSAGE_THREAD;
    #[cfg(not(target_os = "linux"))]
    let who = libc::RUSAGE_SELF;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes one `rusage` into the pointer it is
    // given, which points at one, zeroed.
    let ok = unsafe { libc::getrusage(who, usage.as_mut_ptr()) } == 0;
    if !ok {
        return 0.0;
    }
    // SAFETY: zeroed, then written by the call; every field is an integer.
    let stime = unsafe { usage.assume_init() }.ru_stime;
    stime.tv_sec as f64 + stime.tv_usec as f64 * 1e-6
}

/// [`cpu_seconds`] where there is no `/proc/self/schedstat`.
fn cpu_seconds_in_ticks() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the
    // first, utime the 12th, stime the 13th.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// This process's peak resident set (VmHWM), in MiB.
fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// A figure of `/proc/self/status` given in kB (`VmHWM:`, `VmRSS:`), in
/// MiB; 0 where there is none.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
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
        "bench": point.bench,
        "sips": point.sips,
        "algorithm": point.algorithm,
        "bytes_per_rank": point.bytes,
        "fidelity": point.fidelity,
        "error": reason,
    })
}

/// Runs `points`, printing a table row or a JSON line for each; their
/// JSON lines.
fn scale(points: &[Point], timeout: Duration, as_json: bool) -> Result<Vec<Value>, Box<dyn Error>> {
    let mut results = Vec::new();
    if !as_json {
        println!(
            "{:<18} {:<20} {:>11} {:>7} {:>9} {:>9} {:>10} {:>9} {:>12} {:>10} {:>9} {:>9} {:>9}",
            "machine",
            "algorithm",
            "bytes/rank",
            "mode",
            "setup(s)",
            "sim(s)",
            "sim sys(s)",
            "rss(MiB)",
            "events",
            "messages",
            "us/msg",
            "us/event",
            "cpu us/ev"
        );
    }
    for point in points {
        let line = run_child(point, timeout)?;
        if as_json {
            println!("{line}");
            results.push(line);
            continue;
        }
        if let Some(error) = line["error"].as_str() {
            let bytes = point.bytes;
            let (machine, algorithm, mode) = (point.machine(), point.algorithm, point.fidelity);
            println!("{machine:<18} {algorithm:<20} {bytes:>11} {mode:>7}  {error}");
            results.push(line);
            continue;
        }
        let float = |key: &str| line[key].as_f64().unwrap_or(0.0);
        println!(
            "{:<18} {:<20} {:>11} {:>7} {:>9.2} {:>9.2} {:>10.2} {:>9.0} {:>12} {:>10} {:>9.2} {:>9.2} {:>9.2}",
            point.machine(),
            point.algorithm,
            point.bytes,
            point.fidelity,
            float("set_up_s"),
            float("sim_s"),
            float("sim_sys_s"),
            float("peak_rss_mib"),
            line["sim_events"],
            line["ipcq_messages"],
            float("wall_us_per_message"),
            float("sim_us_per_event"),
            float("sim_cpu_us_per_event"),
        );
        results.push(line);
    }
    Ok(results)
}

/// How many times `--per-event` runs each of its two points, alternated
/// (16, 256, 16, ...): runs on this VM swing by 10-20 %, so the ratio is
/// of the medians.
const PER_EVENT_ROUNDS: usize = 3;

/// 16 vs 256 SIPs × 64 MiB, [`PER_EVENT_ROUNDS`] times each: every run,
/// then the medians of their µs per event without set-up and the ratio
/// of the medians; a failure if any run failed.
fn per_event(timeout: Duration, as_json: bool) -> Result<Outcome, Box<dyn Error>> {
    let points: Vec<Point> = (0..PER_EVENT_ROUNDS)
        .flat_map(|_| per_event_points())
        .collect();
    let lines = scale(&points, timeout, as_json)?;
    if let Some(failure) = failures(&lines) {
        return Ok(Some(failure));
    }
    // The median over the rounds of `key` at point `which` (0: 16 SIPs).
    let median = |which: usize, key: &str| {
        let mut values: Vec<f64> = lines
            .iter()
            .skip(which)
            .step_by(2)
            .filter_map(|line| line[key].as_f64())
            .collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let [wall, cpu, sys] = ["sim_us_per_event", "sim_cpu_us_per_event", "sim_sys_s"]
        .map(|key| [median(0, key), median(1, key)]);
    if as_json {
        println!(
            "{}",
            json!({
                "rounds": PER_EVENT_ROUNDS,
                "median_us_per_event_16": wall[0], "median_us_per_event_256": wall[1],
                "median_cpu_us_per_event_16": cpu[0], "median_cpu_us_per_event_256": cpu[1],
                "per_event_ratio_256_to_16": wall[1] / wall[0],
                "per_event_cpu_ratio_256_to_16": cpu[1] / cpu[0],
                "median_sim_sys_s_16": sys[0], "median_sim_sys_s_256": sys[1],
            })
        );
    } else {
        println!(
            "µs per event without set-up, medians of {PER_EVENT_ROUNDS}: 16 SIPs wall {:.3}, CPU {:.3}; \
             256 SIPs wall {:.3}, CPU {:.3}; 256 / 16: wall {:.3}, CPU {:.3} \
             (system time in the simulation, medians: 16 SIPs {:.3} s, 256 SIPs {:.3} s)",
            wall[0],
            cpu[0],
            wall[1],
            cpu[1],
            wall[1] / wall[0],
            cpu[1] / cpu[0],
            sys[0],
            sys[1]
        );
    }
    Ok(None)
}

/// What failed or timed out among `lines` (the children's JSON).
fn failures(lines: &[Value]) -> Outcome {
    match lines
        .iter()
        .filter(|line| line["error"].is_string())
        .count()
    {
        0 => None,
        n => Some(format!(
            "{n} of {} case(s) failed or timed out",
            lines.len()
        )),
    }
}

/// `None` when every case held; else what did not.
type Outcome = Option<String>;

/// The rows known to be outside the 5 % bound, with the reason the table
/// prints beside them (docs/performance.md, "Packet vs flow"; ADR-0053
/// says where flow and packet diverge; issue 24 item 5 is to bring them
/// inside).
fn known_gap(point: &Point) -> Option<&'static str> {
    let overlapping = match point.algorithm {
        "intercube_allreduce" => point.bytes >= 16 * MIB,
        "ring_allgather" => point.bytes >= 2 * MIB,
        "tree_allreduce" => point.bytes >= MIB,
        _ => false,
    };
    overlapping.then_some(
        "flows overlapping on a hop are served one after another where their packets \
         interleave; the first-booked ends early and the work waiting on it starts early, \
         so flow is optimistic (ADR-0053)",
    )
}

/// Packet vs flow on the catalogue; false if a case differs by more than
/// 5 % or fails.
fn compare(points: &[Point], timeout: Duration) -> Result<Outcome, Box<dyn Error>> {
    println!(
        "{:<18} {:<22} {:<28} {:>10} {:>14} {:>14} {:>8}  note",
        "workload", "machine", "algorithm", "bytes/rank", "packet(us)", "flow(us)", "diff"
    );
    let (mut outside, mut failed) = (0, 0);
    for point in points {
        let time = |fidelity| -> Result<Option<f64>, Box<dyn Error>> {
            let line = run_child(&point.with(fidelity), timeout)?;
            Ok(line["call_ps"].as_u64().map(|ps| ps as f64 / 1e6))
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
            "{:<18} {:<22} {:<28} {:>10} {packet_text:>14} {flow_text:>14} {diff:>8}  {note}",
            point.bench,
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
    kernbench::allocator::keep_freed_memory();
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

const USAGE: &str = "usage: scale [--json] [--compare [--quick] | --per-event] [--timeout SECONDS] \
                     | --one SIPS TOPOLOGY ALGORITHM BYTES FIDELITY [BENCH]";

fn run() -> Result<Outcome, Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        run_one(&Point::parse(&args[1..])?)?;
        return Ok(None);
    }
    let (mut as_json, mut comparing, mut quick, mut per_event_only) = (false, false, false, false);
    let mut timeout = Duration::from_secs(300);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--json" => as_json = true,
            "--compare" => comparing = true,
            "--quick" => quick = true,
            "--per-event" => per_event_only = true,
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
    } else if per_event_only {
        per_event(timeout, as_json)
    } else {
        Ok(failures(&scale(&matrix(), timeout, as_json)?))
    }
}
