//! The main job: `torch.distributed.all_reduce` on the default machine over
//! a range of sizes, checked, as an nccl-tests style table.
//!
//! ```sh
//! cargo run --release --bin allreduce [-- -b 256 -e 64M -f 4 \
//!     --algorithm NAME --fidelity packet|flow --trace FILE]
//! ```
//!
//! Each size is the `ccl_allreduce` workload (`kernbench run --bench
//! ccl_allreduce --verify-data`): a fresh simulation runs one DDP worker per
//! rank (rank = SIP) that places a cube-mesh tensor, fills it, all-reduces it
//! between two barriers, reads it back and checks it. Sizes are bytes per
//! rank, from `-b` to `-e` (K/M/G suffixes, powers of 1024, as nccl-tests
//! takes them) multiplied by `-f`; the default runs 256 B to 64 MiB in
//! `flow` fidelity (identical to `packet` uncontended, ADR-0012), which takes
//! seconds; `--fidelity packet` is the per-packet reference.
//! Exits 1 if a check fails, 2 on bad arguments.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use kernbench_core::ccl::CclConfig;
use kernbench_core::config::Overrides;
use kernbench_core::topology::{Fidelity, Machine, TopologySpec};
use kernbench_core::trace::ChromeTraceLayer;
use kernbench_core::workloads::{self, ByteSize, Options};
use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The allocator of every binary (ADR-0026), which `main` tells to keep
/// the memory it frees (ADR-0072).
#[global_allocator]
static ALLOCATOR: kernbench_core::allocator::Allocator = kernbench_core::allocator::Allocator;

const USAGE: &str = "usage: allreduce [-b BYTES] [-e BYTES] [-f FACTOR] [--algorithm NAME] \
                     [--fidelity packet|flow] [--trace FILE]";

/// `--help`: what the binary does and its flags.
const HELP: &str = "allreduce: torch.distributed.all_reduce on the default 2-SIP machine, \
                    checked against a reference, as an nccl-tests table (sizes -b, -b·f, ... up to -e)

  -b, --min-bytes BYTES   smallest size (K/M/G suffixes, powers of 1024) [default: 256]
  -e, --max-bytes BYTES   largest size [default: 64M]
  -f, --step-factor N     each size is the last times N, N >= 2 [default: 4]
      --algorithm NAME    a ccl.yaml algorithm instead of the default
      --fidelity MODE     packet or flow [default: flow]
      --trace FILE        write a Chrome/Perfetto trace of the run
  -h, --help              this text

The `kernbench` binary runs every other workload (`kernbench --help`).";

/// Whether the command line asks for `--help` (or `-h`) anywhere.
fn wants_help(args: &[String]) -> bool {
    args.iter().any(|a| a == "-h" || a == "--help")
}

/// What the command line asks for.
struct Args {
    min_bytes: u64,
    max_bytes: u64,
    factor: u64,
    algorithm: Option<String>,
    fidelity: Fidelity,
    trace: Option<PathBuf>,
}

/// A usage error (exit 2).
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n{USAGE}", self.0)
    }
}

impl Error for Usage {}

/// `N`, `NK`, `NM` or `NG` bytes (powers of 1024, [`ByteSize`]), positive.
fn bytes(flag: &str, text: &str) -> Result<u64, Usage> {
    match text.parse::<ByteSize>() {
        Ok(ByteSize(n)) if n > 0 => Ok(n),
        Ok(_) => Err(Usage(format!("{flag} {text}: must be positive"))),
        Err(error) => Err(Usage(format!("{flag} {text}: {error}"))),
    }
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, Usage> {
    let mut parsed = Args {
        min_bytes: 256,
        max_bytes: 64 << 20,
        factor: 4,
        algorithm: None,
        fidelity: Fidelity::Flow,
        trace: None,
    };
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| Usage(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "-b" | "--min-bytes" => parsed.min_bytes = bytes(&flag, &value()?)?,
            "-e" | "--max-bytes" => parsed.max_bytes = bytes(&flag, &value()?)?,
            "-f" | "--step-factor" => {
                let text = value()?;
                parsed.factor = match text.parse() {
                    Ok(f) if f >= 2 => f,
                    _ => return Err(Usage(format!("{flag} {text}: expected a whole number ≥ 2"))),
                };
            }
            "--algorithm" => parsed.algorithm = Some(value()?),
            "--fidelity" => {
                let text = value()?;
                parsed.fidelity = Fidelity::ALL
                    .into_iter()
                    .find(|f| f.name() == text)
                    .ok_or_else(|| Usage(format!("--fidelity {text}: expected packet or flow")))?;
            }
            "--trace" => parsed.trace = Some(value()?.into()),
            other => return Err(Usage(format!("unknown argument `{other}`"))),
        }
    }
    if parsed.min_bytes > parsed.max_bytes {
        let (b, e) = (parsed.min_bytes, parsed.max_bytes);
        return Err(Usage(format!("-b {b} is larger than -e {e}")));
    }
    Ok(parsed)
}

/// `-b`, `-b·f`, ... up to `-e`.
fn sizes(args: &Args) -> Vec<u64> {
    let mut sizes = vec![args.min_bytes];
    while let Some(next) = sizes.last().and_then(|s| s.checked_mul(args.factor)) {
        if next > args.max_bytes {
            break;
        }
        sizes.push(next);
    }
    sizes
}

fn main() -> ExitCode {
    kernbench_core::allocator::keep_freed_memory();
    kernbench_core::allocator::small_pages_for_a_short_run();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if wants_help(&argv) {
        println!("{HELP}\n\n{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse(argv) {
        Ok(args) => args,
        Err(usage) => {
            eprintln!("error: {usage}");
            return ExitCode::from(2);
        }
    };
    let ccl = match checked_ccl(&args) {
        Ok(ccl) => ccl,
        Err(usage) => {
            eprintln!("error: {usage}");
            return ExitCode::from(2);
        }
    };
    match run(&args, ccl) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("error: a check failed (see the #wrong column)");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The embedded ccl.yaml, refusing an `--algorithm` it does not name
/// before any size runs.
fn checked_ccl(args: &Args) -> Result<CclConfig, String> {
    let ccl = CclConfig::load(&CclConfig::default_source(), &[]).map_err(|e| e.to_string())?;
    match &args.algorithm {
        Some(name) if ccl.algorithm(name).is_none() => {
            let known: Vec<&str> = ccl.algorithm_names().collect();
            Err(format!(
                "--algorithm {name}: ccl.yaml has no such algorithm (one of {})",
                known.join(", ")
            ))
        }
        _ => Ok(ccl),
    }
}

fn run(args: &Args, ccl: CclConfig) -> Result<bool, Box<dyn Error>> {
    let guard = match &args.trace {
        Some(path) => {
            let (layer, guard) = ChromeTraceLayer::to_file(path)
                .map_err(|e| format!("cannot write trace file {}: {e}", path.display()))?;
            tracing_subscriber::registry().with(layer).init();
            Some(guard)
        }
        None => None,
    };
    let fidelity = format!("simulation.fidelity={}", args.fidelity);
    let overrides = Overrides::parse(&[fidelity])?;
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology)?;
    let machine = Arc::new(Machine::build(&spec)?);
    let algorithm = args
        .algorithm
        .clone()
        .unwrap_or_else(|| ccl.default_algorithm().name.to_owned());
    let default = match args.fidelity {
        Fidelity::Flow => " (this job's default; `kernbench` defaults to packet)",
        _ => "",
    };
    println!(
        "# all_reduce, algorithm {algorithm}, {} SIPs x {} cubes, {} fidelity{default}",
        machine.sip_count(),
        machine.cubes_per_sip(),
        args.fidelity
    );
    let row = |cells: [&str; 8]| {
        let [a, b, c, d, e, f, g, h] = cells;
        let line = format!("#{a:>11} {b:>10} {c:>6} {d:>6} {e:>12} {f:>9} {g:>9} {h:>7}");
        println!("{}", line.trim_end());
    };
    row([
        "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong",
    ]);
    row(["(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", ""]);
    let workload = workloads::find("ccl_allreduce")?;
    let mut all_ok = true;
    for size in sizes(args) {
        let options = Options {
            verify_data: true,
            ccl: Some(ccl.clone()),
            ..Options::default()
        }
        .with("algorithm", &algorithm)
        .with("size", size);
        let report = match workload.run(machine.clone(), &options) {
            Ok(report) => serde_json::to_value(&report)?,
            Err(error) => {
                println!(" {size:>11}  {error}");
                all_ok = false;
                continue;
            }
        };
        let figure = |name: &str| report["figures"][name].clone();
        let real = |name: &str| figure(name).as_f64().unwrap_or(0.0);
        let wrong = report["checks_failed"].as_u64().unwrap_or(0);
        all_ok &= wrong == 0;
        let us = figure("allreduce_ps").as_u64().unwrap_or(0) as f64 / 1e6;
        let text = |name: &str| match figure(name) {
            Value::String(text) => text,
            _ => "-".to_owned(),
        };
        println!(
            " {size:>11} {:>10} {:>6} {:>6} {us:>12.3} {:>9.3} {:>9.3} {wrong:>7}",
            figure("count").as_u64().unwrap_or(0),
            text("dtype"),
            text("op"),
            real("algbw_gbps"),
            real("busbw_gbps"),
        );
    }
    if let Some(guard) = guard {
        guard.finish()?;
    }
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Result<Args, Usage> {
        parse(text.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn sizes_follow_the_nccl_tests_flags() {
        let a = args("-b 1K -e 1M -f 4").unwrap();
        assert_eq!(sizes(&a), vec![1024, 4096, 16384, 65536, 262144, 1048576]);
        assert_eq!(sizes(&args("").unwrap()).last(), Some(&(64 << 20)));
    }

    /// Issue 42: `allreduce --help` prints its flags instead of an error.
    #[test]
    fn help_is_asked_for_by_either_spelling_anywhere() {
        let argv = |text: &str| {
            text.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert!(wants_help(&argv("--help")));
        assert!(wants_help(&argv("-b 1K -h")));
        assert!(!wants_help(&argv("-b 1K --trace help")));
        for flag in ["-b", "-e", "-f", "--algorithm", "--fidelity", "--trace"] {
            assert!(HELP.contains(flag), "{flag}");
        }
    }

    #[test]
    fn bad_arguments_name_the_flag() {
        for (input, part) in [
            ("-b -256", "-b -256"),
            ("-b 0", "must be positive"),
            ("-f 1", "-f 1"),
            ("--fidelity fluid", "packet or flow"),
            ("--bogus", "unknown argument `--bogus`"),
            ("-b 2M -e 1M", "larger than"),
        ] {
            let error = args(input).err().unwrap().to_string();
            assert!(error.contains(part), "{input}: {error}");
        }
    }
}
