//! `kernbench`, the command-line front end.
//!
//! Parses arguments, loads the configuration (embedded defaults, `--topology`
//! / `--ccl` files, `--set` overrides), runs a subcommand and turns errors
//! into `error: <message>` on stderr with exit code 2 for configuration
//! errors and 1 for anything else. All the work lives in the library; this
//! file only wires it to the terminal.

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use kernbench::ccl::CclConfig;
use kernbench::config::units::parse_positive_bytes;
use kernbench::config::{ConfigError, ConfigSource, Overrides};
use kernbench::harness::{
    calibrate, figures, progress, reference, report, results, sweep, table, vary, watch, web,
};
use kernbench::topology::{
    Fidelity, GraphView, Machine, Scope, TopologyError, TopologySpec, ViewError,
};
use kernbench::trace::{
    ChromeTraceLayer, ComponentFilter, TraceFileGuard, TraceOptions, TraceWindow,
};
use kernbench::workloads::{self, Options, WorkloadError};

/// The allocator of every binary (ADR-0026), which `main` tells to keep
/// the memory it frees (ADR-0072).
#[global_allocator]
static ALLOCATOR: kernbench::allocator::Allocator = kernbench::allocator::Allocator;

/// Deterministic discrete-event simulator of the multi-device AHBM accelerator.
#[derive(Debug, Parser)]
#[command(name = "kernbench", version, about)]
struct Cli {
    /// Machine description to use instead of the embedded configs/topology.yaml.
    #[arg(long, global = true, value_name = "FILE")]
    topology: Option<PathBuf>,

    /// Collective-algorithm config to use instead of the embedded configs/ccl.yaml.
    #[arg(long, global = true, value_name = "FILE")]
    ccl: Option<PathBuf>,

    /// With an output folder (`--out`, `calibrate --report`): write into a
    /// folder that already holds files, replacing those of the same names.
    #[arg(long, global = true)]
    force: bool,

    /// Override one value, e.g. `system.sips.count=4`; prefix with `ccl.` to
    /// address ccl.yaml (`ccl.defaults.n_elem=16`). Repeatable; later wins.
    #[arg(long = "set", global = true, value_name = "KEY.PATH=VALUE")]
    set: Vec<String>,

    /// Write a Chrome/Perfetto trace of the run to FILE (as the run goes).
    #[arg(long, global = true, value_name = "FILE")]
    trace: Option<PathBuf>,

    /// Keep only trace events overlapping this window of simulated time,
    /// e.g. `10us..50us`, `..2ms`, `150ns..`.
    #[arg(long, global = true, value_name = "START..END", requires = "trace")]
    trace_window: Option<TraceWindow>,

    /// Keep only trace tracks whose component names match these globs; a
    /// leading `!` drops instead, e.g. `sip0.*,!*->*` (SIP 0 without links).
    #[arg(long, global = true, value_name = "PATTERN[,..]", requires = "trace")]
    trace_filter: Option<ComponentFilter>,

    /// How transfers are simulated: `packet` (every packet at every hop, the
    /// reference) or `flow` (one reservation per hop, same uncontended times,
    /// far fewer events). Overrides topology.yaml `simulation.fidelity`.
    /// `sweep` takes a list (`packet,flow`) and runs each.
    #[arg(
        long,
        global = true,
        value_name = "MODE",
        value_delimiter = ',',
        value_parser = fidelity_names()
    )]
    fidelity: Vec<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check the configuration and print a summary of the configured machine,
    /// or (with --view) a view of its compiled graph.
    Topo(TopoArgs),
    /// Run the traffic-pattern catalogue (H2D, D2H, PE DMA; size and load
    /// sweeps): closed-form formula beside simulated time, with PASS/FAIL
    /// invariant checks (a FAIL exits with code 1).
    Probe(ProbeArgs),
    /// Run a named workload on a fresh simulation and print its simulated
    /// time, figures and checks (a failed check exits with code 1).
    Run(RunArgs),
    /// Run a workload over lists of parameter values (every workload flag
    /// takes a comma-separated list; sizes also as nccl-tests' -b/-e/-f),
    /// in parallel, and print the table; --out DIR writes CSV, JSON and
    /// SVG figures.
    Sweep(SweepArgs),
    /// Merge result folders written by `sweep --out` (shards or separate
    /// sweeps) into DIR: results.csv, results.json, the figures and a
    /// self-contained index.html with the command lines. The same run
    /// found twice is kept once when its results are identical and refused
    /// (exit 2, naming the run and both folders) when they differ.
    Report(ReportArgs),
    /// Fit configuration quantities (--fit KEY[=LOW..HIGH],...) so that a
    /// collective workload's simulated times match a measured log
    /// (nccl-tests' output or a size,time CSV): prints the fitted values,
    /// their sensitivity and the per-size error before and after; --out
    /// FILE writes them as a YAML overlay that `--set @FILE` applies.
    Calibrate(CalibrateArgs),
    /// Write Chakra execution traces OUT.0.et ... OUT.{N-1}.et (and
    /// OUT.comm_groups.json): a collective microbenchmark (--collective
    /// --size --ranks) or one transformer training step (--model --tp --dp
    /// --pp --layers --micro-batches --seq; 1F1B). `run --bench chakra --et
    /// OUT` runs them.
    ChakraGen(ChakraGenArgs),
    /// Serve a local web UI: the machine drawn as SVG, a form that runs a
    /// workload or a small sweep (table, figures, Perfetto trace), and the
    /// report of --results DIR. Prints `listening on URL` first.
    Web(WebArgs),
}

#[derive(Debug, Args)]
struct ChakraGenArgs {
    /// The file prefix to write.
    #[arg(long, value_name = "PREFIX")]
    out: PathBuf,
    /// A microbenchmark of this collective (all_reduce, all_gather, ...).
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with = "model",
        required_unless_present = "model"
    )]
    collective: Option<String>,
    /// Its bytes per rank (K/M/G suffixes).
    #[arg(
        long,
        value_name = "BYTES",
        requires = "collective",
        default_value = "1M"
    )]
    size: workloads::ByteSize,
    /// Its ranks.
    #[arg(long, value_name = "N", requires = "collective", default_value_t = 8)]
    ranks: usize,
    /// A training step of this model (gpt3-125m ... gpt3-175b, llama3-8b,
    /// llama3-70b, mixtral-8x7b).
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// Tensor-parallel degree.
    #[arg(long, value_name = "T", default_value_t = 1)]
    tp: usize,
    /// Data-parallel degree.
    #[arg(long, value_name = "D", default_value_t = 1)]
    dp: usize,
    /// Pipeline stages (1F1B).
    #[arg(long, value_name = "P", default_value_t = 1)]
    pp: usize,
    /// Layers (default: the model's).
    #[arg(long, value_name = "L")]
    layers: Option<usize>,
    /// Micro-batches per step.
    #[arg(long, value_name = "M", default_value_t = 1)]
    micro_batches: usize,
    /// Sequence length.
    #[arg(long, value_name = "S", default_value_t = 2048)]
    seq: u64,
    /// Sequences per micro-batch.
    #[arg(long, value_name = "B", default_value_t = 1)]
    micro_batch_size: u64,
    /// Element type of activations, weights and gradients: f16, bf16, f32.
    #[arg(long, value_name = "TYPE", default_value = "f16")]
    dtype: String,
    /// Pipeline schedule: 1f1b or gpipe.
    #[arg(long, value_name = "NAME", default_value = "1f1b")]
    schedule: String,
    /// Data parallelism: allreduce (DDP) or zero (ZeRO-3 / FSDP).
    #[arg(long, value_name = "MODE", default_value = "allreduce")]
    dp_mode: String,
    /// Expert-parallel degree of a mixture-of-experts model: its experts
    /// sharded over EP neighbouring DP replicas (divides --dp and the
    /// experts).
    #[arg(long, value_name = "EP", default_value_t = 1)]
    ep: usize,
    /// MoE load skew: the busiest EP rank of each layer receives
    /// (1 + SKEW) x the mean tokens (0 to EP − 1).
    #[arg(long, value_name = "SKEW", default_value_t = 0.0)]
    moe_skew: f64,
    /// Write the traces even if a rank's memory exceeds its SIP's HBM
    /// (a warning instead of the error).
    #[arg(long)]
    ignore_memory: bool,
}

#[derive(Debug, Args)]
struct CalibrateArgs {
    /// The measured log: nccl-tests' output pasted as-is, or a .csv with
    /// `size` (bytes) and `time` (us) columns (as `report --reference`).
    #[arg(long, value_name = "FILE")]
    reference: PathBuf,
    /// The collective workload the log measured (ccl_allreduce, ...).
    #[arg(long, value_name = "NAME")]
    bench: String,
    /// The quantities to fit, each KEY or KEY=LOW..HIGH (default bounds:
    /// 100x either side of the configured value); comma-separated or
    /// repeated, e.g. 'system.inter_sip.bandwidth,system.inter_sip.latency'.
    #[arg(long, value_name = "KEY[=LOW..HIGH][,..]", required = true)]
    fit: Vec<String>,
    /// Worker threads for the simulations (default: the available cores).
    #[arg(long, value_name = "N")]
    jobs: Option<NonZeroUsize>,
    /// The most evaluations of the error the search makes.
    #[arg(long, value_name = "N", default_value_t = 120)]
    max_evaluations: usize,
    /// Write the fitted values as a YAML overlay (`--set @FILE`).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write a result folder of the fitted runs with calibration.json and
    /// calibration.svg, which `kernbench report` shows.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct WebArgs {
    /// The port to listen on (0: any free port; the URL is printed).
    #[arg(long, value_name = "PORT")]
    port: u16,

    /// The address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: std::net::IpAddr,

    /// A result folder (written by `sweep --out` or `report --out`) shown
    /// on the front page.
    #[arg(long, value_name = "DIR")]
    results: Option<PathBuf>,

    /// The folder the form's file fields (msccl-xml, et, et-comm-groups)
    /// may name files in (default: the --results folder; without either,
    /// none).
    #[arg(long, value_name = "DIR")]
    inputs: Option<PathBuf>,

    /// Wall-time limit of one request's simulations, in seconds; a run that
    /// reaches it is cancelled and its page says so.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    run_limit: u64,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// Result folders written by `kernbench sweep --out`.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,

    /// Where to write the merged results, figures and index.html.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,

    /// Measured results to compare with: nccl-tests' text output pasted
    /// as-is (out-of-place time), or a .csv with `size` (bytes) and `time`
    /// (us) columns. Adds measured_us and error_pct per size and a
    /// measured_vs_simulated figure, and prints the error per size.
    #[arg(long, value_name = "FILE")]
    reference: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SweepArgs {
    /// The workload (listed below with the flags each takes).
    #[arg(long, value_name = "NAME")]
    bench: String,

    /// Smallest size (nccl-tests -b; K/M/G suffixes), for workloads taking --size.
    #[arg(
        short = 'b',
        long,
        value_name = "BYTES",
        requires = "max_bytes",
        allow_hyphen_values = true
    )]
    min_bytes: Option<workloads::ByteSize>,

    /// Largest size (nccl-tests -e).
    #[arg(
        short = 'e',
        long,
        value_name = "BYTES",
        requires = "min_bytes",
        allow_hyphen_values = true
    )]
    max_bytes: Option<workloads::ByteSize>,

    /// Size multiplier between points (nccl-tests -f).
    #[arg(
        short = 'f',
        long,
        value_name = "FACTOR",
        default_value_t = 2,
        allow_negative_numbers = true
    )]
    step_factor: u64,

    /// Keep and move real bytes and check the results (#wrong).
    #[arg(long)]
    verify_data: bool,

    /// Where the IPCQ slots live, as a list to compare (collectives): every
    /// algorithm's `buffer_kind` set to each in turn, e.g. `tcm,hbm,sram`.
    #[arg(long, value_name = "KIND[,..]", value_delimiter = ',')]
    buffer_kind: Vec<kernbench::ccl::BufferKind>,

    /// What if: sweep a topology.yaml or ccl.yaml key (`ccl.` prefix) over
    /// values, in its YAML units, e.g. 'system.inter_sip.bandwidth=50 GB/s,100 GB/s'.
    /// Repeatable (every combination runs); each key becomes a column.
    #[arg(long, value_name = "KEY=V1,V2,..")]
    vary: Vec<String>,

    /// Run only share I of N of the points (round robin), e.g. 1/4.
    #[arg(long, value_name = "I/N")]
    shard: Option<sweep::Shard>,

    /// Worker threads (default: the available cores).
    #[arg(long, value_name = "N")]
    jobs: Option<NonZeroUsize>,

    /// Write results.csv, results.json and the SVG figures into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// Explain every point (docs/explain.md): `explain_<class>_ps`
    /// columns, and the explanations in results.json and the report.
    #[arg(long)]
    explain: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The workload (listed below with the flags each takes).
    #[arg(long, value_name = "NAME", required_unless_present = "jobs")]
    bench: Option<String>,

    /// Run the jobs of FILE at once on the machine, each on its SIPs,
    /// with each job's slowdown against itself alone (docs/jobs.md).
    #[arg(long, value_name = "FILE", conflicts_with = "bench")]
    jobs: Option<PathBuf>,

    /// Keep and move real bytes, check the results and replay the op log
    /// (without it: timing only, same simulated times).
    #[arg(long)]
    verify_data: bool,

    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,

    /// Explain the measured interval: critical path, time by resource
    /// class, link utilisation, model gap (docs/explain.md).
    #[arg(long)]
    explain: bool,

    /// With --explain: write explain.json and the link heat maps
    /// (topology-heat.svg, cube-heat.svg) into DIR.
    #[arg(long, value_name = "DIR", requires = "explain")]
    out: Option<PathBuf>,

    /// With --explain: the most memory its causal log may take, e.g.
    /// `512M` (default: a quarter of the host's available memory); a run
    /// whose first 64 MiB of log estimate more is refused with the
    /// estimate (ADR-0122).
    #[arg(long, value_name = "BYTES", requires = "explain")]
    explain_memory: Option<workloads::ByteSize>,

    /// With --explain: which of the critical path's lines explain.json,
    /// --json and the text keep: `ends` (the first and last 12, and a
    /// count of the rest) or `whole` (every line; can be hundreds of MB).
    #[arg(long, value_enum, default_value = "ends", requires = "explain")]
    explain_path: ExplainPath,
}

/// `--explain-path`'s values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ExplainPath {
    /// The first and last lines, and a count of the rest.
    Ends,
    /// Every line.
    Whole,
}

#[derive(Debug, Args)]
struct ProbeArgs {
    /// Print the cases and checks as JSON.
    #[arg(long)]
    json: bool,

    /// Reference transfer size: a number of bytes or a size such as "32 KiB".
    #[arg(long, default_value_t = kernbench::probe::REFERENCE_BYTES, allow_hyphen_values = true, value_parser = parse_positive_bytes)]
    size: u64,
}

#[derive(Debug, Args)]
struct TopoArgs {
    /// Print as JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    json: bool,

    /// Show the compiled graph: the system (SIPs collapsed), one SIP (cubes
    /// collapsed) or one cube (routers and attachments).
    #[arg(long, value_enum)]
    view: Option<TopoView>,

    /// Output format; dot needs --view.
    #[arg(long, value_enum, default_value_t = TopoFormat::Text)]
    format: TopoFormat,

    /// The SIP of a sip or cube view.
    #[arg(long, default_value_t = 0)]
    sip: u32,

    /// The cube of a cube view (row * mesh width + column).
    #[arg(long, default_value_t = 0)]
    cube: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TopoView {
    System,
    Sip,
    Cube,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TopoFormat {
    Text,
    Dot,
    Json,
}

/// Why a command failed, and so which exit code it gets.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    View(#[from] ViewError),
    #[error("--format dot needs --view system, sip or cube")]
    DotWithoutView,
    #[error(
        "the machine would take about {} MiB of host memory to {} (system.sips.count x \
         sip.cube_mesh x cube.pes), but {} MiB are available: lower one of those keys",
        needed >> 20,
        footprint.verb(),
        available >> 20
    )]
    MachineTooBig {
        needed: u128,
        available: u64,
        footprint: Footprint,
    },
    #[error("cannot write output: {0}")]
    Output(#[from] io::Error),
    #[error("cannot write output to {}: {source}", path.display())]
    OutputPath { path: PathBuf, source: io::Error },
    #[error(
        "output folder {} already holds files ({files}): give --force to replace those of the same names, or name another folder",
        path.display()
    )]
    OutFolderHeld { path: PathBuf, files: String },
    #[error("web --inputs {}: {source}", path.display())]
    InputFolder { path: PathBuf, source: io::Error },
    #[error(
        "sweep: {failed} of {points} point(s) failed ({errors} could not run, {checks} failed \
         a check); the table and any --out files have every row"
    )]
    SweepFailed {
        points: usize,
        failed: usize,
        errors: usize,
        checks: usize,
    },
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write trace file {}: {source}", path.display())]
    Trace { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Probe(#[from] kernbench::probe::ProbeError),
    #[error("probe: {0} check(s) failed")]
    ProbeFailed(usize),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Ccl(kernbench::runtime::DistError),
    #[error("{bench}: {failed} check(s) failed{names}")]
    ChecksFailed {
        bench: &'static str,
        failed: usize,
        names: String,
    },
    #[error(transparent)]
    Report(#[from] report::ReportError),
    #[error(transparent)]
    Reference(#[from] reference::ReferenceError),
    #[error(transparent)]
    Web(#[from] web::WebError),
    #[error(transparent)]
    ChakraGen(#[from] kernbench::chakra::generate::GenError),
    #[error(transparent)]
    Calibrate(#[from] calibrate::CalibrateError),
}

impl CliError {
    fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Config(_)
            | CliError::Ccl(_)
            | CliError::Probe(kernbench::probe::ProbeError::SizeTooLarge { .. })
            | CliError::Probe(kernbench::probe::ProbeError::SizeTooSmall { .. })
            | CliError::Topology(_)
            | CliError::View(_)
            | CliError::DotWithoutView
            | CliError::MachineTooBig { .. }
            | CliError::Report(_)
            | CliError::Reference(_)
            | CliError::ChakraGen(_)
            | CliError::OutFolderHeld { .. }
            | CliError::Calibrate(calibrate::CalibrateError::Usage(_)) => ExitCode::from(2),
            CliError::Workload(error) if error.is_usage() => ExitCode::from(2),
            CliError::Output(_)
            | CliError::OutputPath { .. }
            | CliError::InputFolder { .. }
            | CliError::SweepFailed { .. }
            | CliError::Json(_)
            | CliError::Trace { .. }
            | CliError::Probe(_)
            | CliError::ProbeFailed(_)
            | CliError::Workload(_)
            | CliError::Web(_)
            | CliError::Calibrate(_)
            | CliError::ChecksFailed { .. } => ExitCode::FAILURE,
        }
    }
}

/// Makes every check `init_process_group` would make on this pair of
/// files, so that `topo` and `probe` refuse what `run` refuses, with the
/// same message.
fn check_pair(
    topology: &TopologySpec,
    ccl: &CclConfig,
    footprint: Footprint,
) -> Result<(), CliError> {
    check_machine_fits(topology, footprint, workloads::collective::host_available())?;
    let machine = Machine::build(topology)?;
    kernbench::runtime::check_config(&machine, ccl).map_err(CliError::Ccl)
}

/// What a command holds of the machine at its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Footprint {
    /// The compiled graph and the collectives' wiring on it (`topo`,
    /// `report`, `web` before a run).
    Graph,
    /// The graph and a simulation on it: the links its routes cross, its
    /// cubes' and PEs' units, kernel tasks and IPCQ rings (`run`, `probe`,
    /// `sweep`).
    Simulation,
}

impl Footprint {
    fn of(command: &Command) -> Footprint {
        match command {
            Command::Run(_) | Command::Probe(_) | Command::Sweep(_) | Command::Calibrate(_) => {
                Footprint::Simulation
            }
            Command::Topo(_) | Command::Report(_) | Command::Web(_) | Command::ChakraGen(_) => {
                Footprint::Graph
            }
        }
    }

    /// Host bytes the command peaks at on `topology`, estimated from its
    /// counts before anything is built: the graph's estimate
    /// ([`Machine::estimated_bytes`]) and, for a simulation, 500 B per PE
    /// and 80 KiB per cube more (ADR-0050: the peak RSS of a flow-mode
    /// 1 MiB `run` less `topo`'s, release build, was 223 MB at 4 SIPs of
    /// 16 x 16 cubes of 240 PEs (this gives 207 MB), 760 MB at 16 such
    /// SIPs (828 MB), 1,290 MB at 64 SIPs of 16 x 16 cubes of 16 PEs
    /// (1,473 MB)).
    fn estimated_bytes(self, topology: &TopologySpec) -> u128 {
        let graph = Machine::estimated_bytes(topology);
        let cubes =
            u128::from(topology.system().sips.count()) * u128::from(topology.cubes_per_sip());
        let pes = cubes * u128::from(topology.cube().pes.get());
        match self {
            Footprint::Graph => graph,
            Footprint::Simulation => graph + pes * 500 + cubes * (80 << 10),
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Footprint::Graph => "build",
            Footprint::Simulation => "build and simulate",
        }
    }
}

/// A `--vary` with more machines than this is warned about before it runs.
const MANY_VARIANTS: usize = 1000;

/// Refuses a sweep, before its first point runs, when one variant's
/// machine would not fit the host as `run` refuses it, naming the
/// variant's assignment (issue 40 item 10).
fn check_variants_fit(variants: &[sweep::Variant]) -> Result<(), CliError> {
    let available = workloads::collective::host_available();
    for variant in variants {
        if let Err(error) = check_machine_fits(&variant.topology, Footprint::Simulation, available)
        {
            let assignment = kernbench::harness::vary::assignment(&variant.fields);
            let message = format!("--vary {assignment}: {error}");
            return Err(CliError::Workload(WorkloadError::BadOption(message)));
        }
    }
    Ok(())
}

/// Refuses, before building it, a machine that `footprint` of it would not
/// fit the host's available memory (none known: not checked).
fn check_machine_fits(
    topology: &TopologySpec,
    footprint: Footprint,
    available: Option<u64>,
) -> Result<(), CliError> {
    let needed = footprint.estimated_bytes(topology);
    match available {
        Some(available) if needed > u128::from(available) => Err(CliError::MachineTooBig {
            needed,
            available,
            footprint,
        }),
        _ => Ok(()),
    }
}

/// Loads and checks both configuration files, so every subcommand (`topo`
/// included) rejects a bad ccl.yaml as well as a bad topology.yaml.
fn load_config(cli: &Cli) -> Result<(TopologySpec, CclConfig), ConfigError> {
    let (topology_source, ccl_source, sets) = config_sources(cli);
    let overrides = Overrides::parse(&sets)?;
    Ok((
        TopologySpec::load(&topology_source, &overrides.topology)?,
        CclConfig::load(&ccl_source, &overrides.ccl)?,
    ))
}

/// The two configuration sources and the overrides (`--set`, then the
/// first `--fidelity`) every command loads.
fn config_sources(cli: &Cli) -> (ConfigSource, ConfigSource, Vec<String>) {
    let fidelity = cli
        .fidelity
        .first()
        .map(|f| format!("simulation.fidelity={f}"));
    let topology_source = cli
        .topology
        .clone()
        .map_or_else(TopologySpec::default_source, ConfigSource::File);
    let ccl_source = cli
        .ccl
        .clone()
        .map_or_else(CclConfig::default_source, ConfigSource::File);
    let sets = cli.set.iter().cloned().chain(fidelity).collect();
    (topology_source, ccl_source, sets)
}

/// The values `--fidelity` accepts.
fn fidelity_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(Fidelity::ALL.map(Fidelity::name))
}

/// The console log's filter from `RUST_LOG`: a default level and
/// `target=level` pairs, comma-separated (`warn`, `kernbench::ccl=debug,info`);
/// `warn` when unset. A value that does not parse is reported on stderr and
/// `warn` used, so a stray variable does not stop a run. (Span and field
/// filters and regular expressions are not supported: ADR-0055.)
fn log_filter(rust_log: Option<&str>) -> Targets {
    let warn = Targets::new().with_default(tracing::Level::WARN);
    match rust_log.map(str::parse::<Targets>) {
        None => warn,
        Some(Ok(targets)) => targets,
        Some(Err(e)) => {
            eprintln!(
                "warning: RUST_LOG={:?} is not a log filter ({e}); using `warn`",
                rust_log.unwrap_or_default()
            );
            warn
        }
    }
}

/// Installs the log output: a `fmt` layer on stderr filtered by `RUST_LOG`
/// (default `warn`), without wall-clock timestamps so that runs compare
/// equal, and, with `--trace FILE`, the virtual-time Chrome trace layer.
/// The filter sits on the `fmt` layer only, so `RUST_LOG` does not thin out
/// the timeline.
fn init_tracing(cli: &Cli) -> Result<Option<TraceFileGuard>, CliError> {
    let trace = cli.trace.as_deref();
    let options = TraceOptions {
        window: cli.trace_window.unwrap_or_default(),
        filter: cli.trace_filter.clone().unwrap_or_default(),
    };
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
    let log = tracing_subscriber::fmt::layer()
        .without_time()
        .with_writer(io::stderr)
        .with_filter(filter);
    let (chrome, guard) = trace
        .map(|path| ChromeTraceLayer::to_file_with(path, options))
        .transpose()
        .map_err(|source| CliError::Trace {
            path: trace.unwrap_or(Path::new("")).to_path_buf(),
            source,
        })?
        .unzip();
    tracing_subscriber::registry().with(log).with(chrome).init();
    Ok(guard)
}

fn topo(topology: &TopologySpec, args: &TopoArgs) -> Result<(), CliError> {
    let format = if args.json {
        TopoFormat::Json
    } else {
        args.format
    };
    let text = match args.view {
        None => summary(topology, format)?,
        Some(view) => graph_view(topology, args, view, format)?,
    };
    print_out(&text)
}

/// The summary of the spec, as text or JSON.
fn summary(topology: &TopologySpec, format: TopoFormat) -> Result<String, CliError> {
    let summary = topology.summary();
    match format {
        TopoFormat::Text => Ok(summary.to_string()),
        TopoFormat::Json => Ok(serde_json::to_string_pretty(&summary)? + "\n"),
        TopoFormat::Dot => Err(CliError::DotWithoutView),
    }
}

/// A view of the compiled machine.
fn graph_view(
    topology: &TopologySpec,
    args: &TopoArgs,
    view: TopoView,
    format: TopoFormat,
) -> Result<String, CliError> {
    let machine = Machine::build(topology)?;
    let scope = match view {
        TopoView::System => Scope::System,
        TopoView::Sip => Scope::Sip(args.sip),
        TopoView::Cube => Scope::Cube {
            sip: args.sip,
            cube: args.cube,
        },
    };
    let graph = GraphView::new(&machine, scope)?;
    Ok(match format {
        TopoFormat::Text => graph.to_string(),
        TopoFormat::Dot => graph.to_dot(),
        TopoFormat::Json => serde_json::to_string_pretty(&graph)? + "\n",
    })
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an
/// error.
fn print_out(text: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(()),
    }
}

fn run(cli: &Cli, matches: &ArgMatches) -> Result<(), CliError> {
    if cli.fidelity.len() > 1 && !matches!(cli.command, Command::Sweep(_)) {
        let list = cli.fidelity.join(",");
        return Err(WorkloadError::BadOption(format!(
            "--fidelity {list}: only `sweep` runs a list of fidelities; give one"
        ))
        .into());
    }
    let (topology, ccl) = load_config(cli)?;
    check_pair(&topology, &ccl, Footprint::of(&cli.command))?;
    match cli.command {
        Command::Topo(ref args) => topo(&topology, args),
        Command::Probe(ref args) => probe(&topology, args),
        Command::Sweep(ref args) => {
            let axes = matches
                .subcommand_matches("sweep")
                .map(workload_flags::lists)
                .unwrap_or_default();
            run_sweep(cli, topology, ccl, args, axes)
        }
        Command::Report(ref args) => run_report(cli, args, &topology),
        Command::Web(ref args) => serve(topology, ccl, args),
        Command::ChakraGen(ref args) => chakra_gen(&topology, args),
        Command::Calibrate(ref args) => {
            let params = matches
                .subcommand_matches("calibrate")
                .map(workload_flags::values)
                .unwrap_or_default();
            run_calibrate(cli, args, params)
        }
        Command::Run(ref args) => {
            let params = matches
                .subcommand_matches("run")
                .map(workload_flags::values)
                .unwrap_or_default();
            let out = OutFolder { force: cli.force };
            bench(&topology, ccl, args, params, out)
        }
    }
}

/// The training step `chakra-gen --model NAME ...` describes.
fn generated_step(
    name: &str,
    args: &ChakraGenArgs,
) -> Result<kernbench::chakra::generate::step::Step, CliError> {
    use kernbench::chakra::generate::step::{self, DataParallel, Dtype, Schedule, Step};
    let model = step::model(name)?;
    Ok(Step {
        tp: args.tp,
        dp: args.dp,
        pp: args.pp,
        layers: args.layers.unwrap_or(model.layers),
        micro_batches: args.micro_batches,
        seq: args.seq,
        micro_batch: args.micro_batch_size,
        dtype: Dtype::parse(&args.dtype)?,
        schedule: Schedule::parse(&args.schedule)?,
        data_parallel: DataParallel::parse(&args.dp_mode)?,
        ep: args.ep,
        moe_skew: args.moe_skew,
        ..Step::new(model)
    })
}

/// Refuses, before any work, an output prefix whose folder is missing or
/// is not a folder (issue 40 item 14).
fn check_out_folder(prefix: &Path) -> Result<(), CliError> {
    let folder = match prefix.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let problem = match std::fs::metadata(folder) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => "is not a folder",
        Err(_) => "no such folder",
    };
    Err(CliError::OutputPath {
        path: folder.to_path_buf(),
        source: io::Error::new(io::ErrorKind::NotFound, problem),
    })
}

/// Checks that the file `path` can be written before any work: its
/// folder exists and it is not a folder itself.
fn check_out_file(path: &Path) -> Result<(), CliError> {
    check_out_folder(path)?;
    if path.is_dir() {
        return Err(CliError::OutputPath {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::AlreadyExists, "is a folder, not a file"),
        });
    }
    Ok(())
}

/// `chakra-gen`: writes the traces and says what it wrote.
fn chakra_gen(topology: &TopologySpec, args: &ChakraGenArgs) -> Result<(), CliError> {
    use kernbench::chakra::{self, generate};
    check_out_folder(&args.out)?;
    let (traces, groups) = match (&args.collective, &args.model) {
        (Some(name), _) => {
            let comm = generate::comm_type(name)?;
            (
                generate::collective(comm, args.size.0, args.ranks),
                BTreeMap::new(),
            )
        }
        (None, Some(name)) => {
            let step = generated_step(name, args)?;
            step.check()?;
            let capacity = topology.cube().hbm.capacity.get().bytes() * topology.cubes_per_sip();
            if let Err(error) = step.check_memory(capacity) {
                match args.ignore_memory {
                    true => eprintln!("warning: {error}"),
                    false => return Err(error.into()),
                }
            }
            step.generate()?
        }
        (None, None) => {
            let usage = "chakra-gen needs --collective or --model".to_owned();
            return Err(CliError::Workload(WorkloadError::BadOption(usage)));
        }
    };
    let written =
        chakra::write(&args.out, &traces, &groups).map_err(|source| CliError::OutputPath {
            path: args.out.clone(),
            source,
        })?;
    let nodes: usize = traces.iter().map(|t| t.nodes.len()).sum();
    let text = format!(
        "wrote {} files ({} ranks, {nodes} nodes): {} ... {}\n",
        written.len(),
        traces.len(),
        written
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        written
            .last()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    print_out(&text)
}

fn probe(topology: &TopologySpec, args: &ProbeArgs) -> Result<(), CliError> {
    let machine = std::sync::Arc::new(kernbench::topology::Machine::build(topology)?);
    let report = kernbench::probe::run(&machine, args.size)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        report.to_string()
    };
    print_out(&text)?;
    match report
        .checks
        .iter()
        .filter(|c| c.passed == Some(false))
        .count()
    {
        0 => Ok(()),
        failed => Err(CliError::ProbeFailed(failed)),
    }
}

/// `run --explain --out DIR`: the explanation as JSON and the heat maps.
fn write_explanation(
    dir: &std::path::Path,
    machine: &Machine,
    explanation: &kernbench::explain::Explanation,
) -> Result<(), CliError> {
    use kernbench::harness::heat::Heat;
    use kernbench::harness::web::{cube_heat_svg, topology_heat_svg};
    let write = |name: &str, text: String| write_file(&dir.join(name), text);
    prepare_out(dir)?;
    write(
        "explain.json",
        serde_json::to_string_pretty(explanation)? + "\n",
    )?;
    let heat = Heat::of(explanation);
    write("topology-heat.svg", topology_heat_svg(machine, Some(&heat)))?;
    write("cube-heat.svg", cube_heat_svg(machine, Some(&heat)))?;
    Ok(())
}

/// Runs one workload and prints its report.
fn bench(
    topology: &TopologySpec,
    ccl: CclConfig,
    args: &RunArgs,
    params: BTreeMap<String, String>,
    out: OutFolder,
) -> Result<(), CliError> {
    if args.explain_memory.is_some_and(|b| b.0 < 1 << 10) {
        let message = "--explain-memory: at least 1K (the causal log needs room to record)";
        return Err(CliError::Workload(WorkloadError::BadOption(
            message.to_owned(),
        )));
    }
    if let Some(dir) = &args.out {
        claim_out(dir, out.force)?;
    }
    let machine = std::sync::Arc::new(Machine::build(topology)?);
    let options = Options {
        verify_data: args.verify_data,
        params,
        ccl: Some(ccl),
        explain: args.explain,
        explain_memory: args.explain_memory.map(|b| b.0),
        explain_path: match args.explain_path {
            ExplainPath::Ends => kernbench::explain::PathKept::Ends,
            ExplainPath::Whole => kernbench::explain::PathKept::Whole,
        },
    };
    if let Some(file) = &args.jobs {
        return run_jobs_file(&machine, args, options, file);
    }
    let workload = workloads::find(args.bench.as_deref().unwrap_or_default())?;
    // For a person at a terminal, like the progress line: scripts and
    // tests read stderr's one `error:` line.
    let hint = progress::packet_hint(topology.simulation().fidelity, &options);
    if let Some(hint) = hint.filter(|_| io::stderr().is_terminal()) {
        eprintln!("{hint}");
    }
    let report = if io::stderr().is_terminal() {
        let shown = progress::RunProgress::start();
        let report = workload.run(machine.clone(), &options);
        drop(shown);
        report?
    } else {
        let beat = |elapsed: std::time::Duration| {
            eprintln!(
                "run {}: running for {:.0} s",
                workload.name,
                elapsed.as_secs_f64()
            );
        };
        watch::heartbeat(watch::LINE_EVERY, &beat, || {
            workload.run(machine.clone(), &options)
        })?
    };
    if let (Some(dir), Some(explanation)) = (&args.out, &report.explain) {
        write_explanation(dir, &machine, explanation)?;
    }
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        report.to_string()
    };
    print_out(&text)?;
    match report.checks_failed {
        0 => Ok(()),
        failed => Err(CliError::ChecksFailed {
            bench: workload.name,
            failed,
            names: failed_limit(&report),
        }),
    }
}

/// `run --jobs FILE`: every job of the file together on `machine`, each
/// alone too; the summary table (or JSON), each job's explanation in
/// `--out DIR/JOB/`.
fn run_jobs_file(
    machine: &std::sync::Arc<Machine>,
    args: &RunArgs,
    base: Options,
    file: &Path,
) -> Result<(), CliError> {
    if let Some(flag) = base.params.keys().next() {
        let message =
            format!("--{flag} with --jobs: give a job's flags in the jobs file (jobs.NAME.flags)");
        return Err(CliError::Workload(WorkloadError::BadOption(message)));
    }
    let source = kernbench::config::ConfigSource::File(file.to_owned());
    let jobs = kernbench::harness::jobs::load(&source, machine.sip_count(), &base)?;
    let reports = workloads::jobs::run_jobs(machine.clone(), &jobs)?;
    if let Some(dir) = &args.out {
        for job in &reports {
            if let Some(explanation) = &job.report.explain {
                write_explanation(&dir.join(&job.name), machine, explanation)?;
            }
        }
    }
    let text = match args.json {
        true => serde_json::to_string_pretty(&kernbench::harness::jobs::json(&reports))? + "\n",
        false => kernbench::harness::jobs::render(&reports),
    };
    print_out(&text)?;
    let failed: usize = reports.iter().map(|j| j.report.checks_failed).sum();
    match reports.iter().find(|j| j.report.checks_failed > 0) {
        None => Ok(()),
        Some(job) => Err(CliError::ChecksFailed {
            bench: job.report.name,
            failed,
            names: format!(" (job {}){}", job.name, failed_limit(&job.report)),
        }),
    }
}

/// The physical-bound check's verdict when it failed (`: within_physical_limit:
/// allreduce_ps ... beats the physical bound limit_ps ...`), so the error
/// line names the figure and the bound (ADR-0086); empty otherwise.
fn failed_limit(report: &workloads::Report) -> String {
    report
        .checks
        .iter()
        .find(|c| !c.passed && c.name == "within_physical_limit")
        .map(|c| format!(": {}: {}", c.name, c.detail))
        .unwrap_or_default()
}

/// `kernbench sweep`: plan, run in parallel, print, write.
fn run_sweep(
    cli: &Cli,
    topology: TopologySpec,
    ccl: CclConfig,
    args: &SweepArgs,
    mut axes: Vec<sweep::Axis>,
) -> Result<(), CliError> {
    let workload = workloads::find(&args.bench)?;
    if let (Some(min), Some(max)) = (args.min_bytes, args.max_bytes) {
        let sizes = sweep::sizes(min, max, args.step_factor).map_err(WorkloadError::BadOption)?;
        axes.retain(|a| a.name != "size");
        axes.push(sweep::Axis {
            name: "size".to_owned(),
            values: sizes.iter().map(ToString::to_string).collect(),
        });
    }
    let bases = vary_variants(cli, args, topology, ccl)?;
    if let Some(dir) = &args.out {
        claim_out(dir, cli.force)?;
    }
    let variants = sweep_variants(&cli.fidelity, &args.buffer_kind, bases);
    let plan =
        sweep::Plan::new(workload, variants, axes, args.verify_data)?.explained(args.explain);
    let mut points = plan.points();
    if let Some(shard) = args.shard {
        points = shard.select(points);
    }
    let jobs = args
        .jobs
        .map(NonZeroUsize::get)
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(NonZeroUsize::get)
        })
        .unwrap_or(1);
    plan.check_sizes().map_err(CliError::Workload)?;
    check_variants_fit(&plan.variants)?;
    let rows = run_points(&plan, &points, jobs);
    let source = results::Source {
        command: command_line(),
        sweep: command_line_without(&["--shard", "--out", "--jobs"]),
        config: config_flags(cli),
        machine: plan.variants[0].topology.summary().to_string(),
        shard: args.shard.map(|s| s.to_string()),
        varied: plan.variants[0]
            .fields
            .iter()
            .map(|f| f.0.clone())
            .take(args.vary.len())
            .collect(),
    };
    let set = results::ResultSet::new(source, rows);
    let rows: Vec<_> = set.rows().collect();
    print_out(&table::render(&rows))?;
    for row in rows.iter().filter(|r| r.explain.is_some()) {
        let point: Vec<String> = row
            .point
            .0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        print_out(&format!("\n[{}]\n", point.join(" ")))?;
        print_out(
            &row.explain
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        )?;
    }
    print_out(&kernbench::harness::sensitivity::table(&set).unwrap_or_default())?;
    if let Some(dir) = &args.out {
        write_results(dir, &set)?;
    }
    sweep_outcome(&rows)
}

/// Runs the sweep's points with progress on stderr: a bar on a terminal,
/// else a line every few seconds (a log or a batch job sees it going).
fn run_points(plan: &sweep::Plan, points: &[sweep::Point], jobs: usize) -> Vec<results::Row> {
    let total = points.len();
    let terminal = io::stderr().is_terminal();
    let bar = if terminal {
        indicatif::ProgressBar::new(total as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut next_line = watch::LINE_EVERY;
    let every = if terminal {
        std::time::Duration::from_millis(200)
    } else {
        watch::LINE_EVERY
    };
    let watched = watch::sweep(plan, points, jobs, None, every, &mut |done, elapsed| {
        bar.set_position(done as u64);
        if !terminal && elapsed >= next_line && done < total {
            eprintln!("{}", watch::sweep_line(done, total, elapsed));
            next_line = elapsed + watch::LINE_EVERY;
        }
    });
    bar.finish_and_clear();
    watched.rows
}

/// A sweep succeeds only when every point ran and passed its checks (CI
/// jobs and Slurm arrays read the exit code).
fn sweep_outcome(rows: &[&results::Row]) -> Result<(), CliError> {
    let errors = rows.iter().filter(|r| r.error.is_some()).count();
    let checks = rows.iter().filter(|r| r.checks_failed > 0).count();
    match errors + checks {
        0 => Ok(()),
        failed => Err(CliError::SweepFailed {
            points: rows.len(),
            failed,
            errors,
            checks,
        }),
    }
}

/// Makes sure `dir` can take the results before the first point runs:
/// created if missing, a writable directory.
/// How a command may use an output folder that already holds files.
#[derive(Debug, Clone, Copy)]
struct OutFolder {
    /// `--force`: replace the files of the same names.
    force: bool,
}

/// [`prepare_out`] for a folder a command is about to fill: refused when
/// it already holds files, unless `force` (`--force`).
fn claim_out(dir: &Path, force: bool) -> Result<(), CliError> {
    let mut held: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    if !force && !held.is_empty() {
        held.sort();
        let shown = held.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        let more = if held.len() > 3 { ", ..." } else { "" };
        return Err(CliError::OutFolderHeld {
            path: dir.to_owned(),
            files: format!("{shown}{more}"),
        });
    }
    prepare_out(dir)
}

fn prepare_out(dir: &Path) -> Result<(), CliError> {
    let error = |source| CliError::OutputPath {
        path: dir.to_owned(),
        source,
    };
    if dir.exists() && !dir.is_dir() {
        let source = io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a folder");
        return Err(error(source));
    }
    std::fs::create_dir_all(dir).map_err(error)?;
    let check = dir.join(".kernbench-write-check");
    std::fs::write(&check, b"").map_err(error)?;
    std::fs::remove_file(&check).map_err(error)
}

/// The configurations of the `--vary` lists (the configured one alone
/// without any), every value checked before anything runs (exit 2).
fn vary_variants(
    cli: &Cli,
    args: &SweepArgs,
    topology: TopologySpec,
    ccl: CclConfig,
) -> Result<Vec<sweep::Variant>, CliError> {
    if args.vary.is_empty() {
        let fields = Vec::new();
        return Ok(vec![sweep::Variant {
            fields,
            topology,
            ccl,
        }]);
    }
    let bad = |e: vary::VaryError| WorkloadError::BadOption(e.to_string());
    let varies = args
        .vary
        .iter()
        .map(|text| text.parse::<vary::Vary>().map_err(bad))
        .collect::<Result<Vec<_>, _>>()?;
    let machines: usize = varies.iter().map(|v| v.values.len()).product();
    if machines > MANY_VARIANTS {
        eprintln!(
            "warning: --vary gives {machines} machines (more than {MANY_VARIANTS}); each is \
             loaded and checked, then run at every size, so the sweep takes about as many runs"
        );
    }
    let (topology, ccl, sets) = config_sources(cli);
    let base = vary::Base {
        topology: &topology,
        ccl: &ccl,
        sets: &sets,
    };
    Ok(vary::configurations(&base, &varies).map_err(bad)?)
}

/// The configurations a sweep runs: each of `bases` (the `--vary`
/// combinations) × every fidelity of a `--fidelity` list (more than one)
/// × every `--buffer-kind`, each named by the values that made it.
fn sweep_variants(
    fidelities: &[String],
    kinds: &[kernbench::ccl::BufferKind],
    bases: Vec<sweep::Variant>,
) -> Vec<sweep::Variant> {
    let mut variants = bases;
    if fidelities.len() > 1 {
        let by_fidelity = |v: &sweep::Variant| {
            Fidelity::ALL
                .into_iter()
                .filter(|f| fidelities.iter().any(|name| name == f.name()))
                .map(|fidelity| {
                    let mut variant = v.clone();
                    variant.topology = variant.topology.with_fidelity(fidelity);
                    let field = ("fidelity".to_owned(), fidelity.name().to_owned());
                    variant.fields.push(field);
                    variant
                })
                .collect::<Vec<_>>()
        };
        variants = variants.iter().flat_map(by_fidelity).collect();
    }
    if !kinds.is_empty() {
        let by_kind = |v: &sweep::Variant| {
            kinds
                .iter()
                .map(|&kind| {
                    let mut variant = v.clone();
                    variant.ccl = v.ccl.with_buffer_kind(kind);
                    let field = ("buffer_kind".to_owned(), kind.name().to_owned());
                    variant.fields.push(field);
                    variant
                })
                .collect::<Vec<_>>()
        };
        variants = variants.iter().flat_map(by_kind).collect();
    }
    variants
}

/// Writes `results.csv`, `results.json` and the figures into `dir`, and
/// returns the figures.
fn write_results(dir: &Path, set: &results::ResultSet) -> Result<Vec<figures::Svg>, CliError> {
    prepare_out(dir)?;
    write_file(&dir.join("results.json"), set.to_json())?;
    write_file(&dir.join("results.csv"), set.to_csv())?;
    let svgs = figures::of_set(set);
    for svg in &svgs {
        write_file(&dir.join(&svg.file), &svg.text)?;
    }
    Ok(svgs)
}

/// `std::fs::write`, with the path in the error.
fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), CliError> {
    std::fs::write(path, contents).map_err(|source| CliError::OutputPath {
        path: path.to_owned(),
        source,
    })
}

/// `kernbench report`: merge, compare with the reference, write.
fn run_report(cli: &Cli, args: &ReportArgs, topology: &TopologySpec) -> Result<(), CliError> {
    claim_out(&args.out, cli.force)?;
    let sets = args
        .dirs
        .iter()
        .map(|dir| Ok((dir.clone(), report::load(dir)?)))
        .collect::<Result<Vec<_>, CliError>>()?;
    let mut set = report::merge(&sets)?;
    let reference = args.reference.as_deref().map(reference::load).transpose()?;
    if let (Some(reference), Some(path)) = (&reference, &args.reference) {
        let rows: Vec<_> = set.rows().collect();
        let path = path.clone();
        match reference.check(&rows) {
            Err(message) => {
                return Err(reference::ReferenceError::Mismatch { path, message }.into());
            }
            Ok(Some(warning)) => eprintln!("warning: --reference {}: {warning}", path.display()),
            Ok(None) => {}
        }
    }
    let measured = reference.map(|r| r.measured);
    let mut comparison = measured.as_ref().map(|m| report::compare(&mut set, m));
    let mut svgs = write_results(&args.out, &set)?;
    for dir in &args.dirs {
        let fit = calibrate::load(dir).map_err(calibrate::CalibrateError::Usage)?;
        for svg in fit.iter().flat_map(calibrate::figures) {
            write_file(&args.out.join(&svg.file), &svg.text)?;
            svgs.push(svg);
        }
        if let Some(fit) = fit {
            let text = format!("calibration ({}):\n{}", dir.display(), fit.render());
            comparison = Some(comparison.map_or(text.clone(), |c| c + "\n" + &text));
        }
    }
    if let Some(measured) = &measured {
        let rows: Vec<_> = set.rows().collect();
        if let Some(svg) = report::measured_vs_simulated(&rows, measured) {
            write_file(&args.out.join(&svg.file), &svg.text)?;
            svgs.push(svg);
        }
    }
    // Heat maps are drawn on this command's machine, with a row's varied
    // values applied, when it is the machine the row ran on.
    let (topology_source, ccl_source, sets) = config_sources(cli);
    let base = vary::Base {
        topology: &topology_source,
        ccl: &ccl_source,
        sets: &sets,
    };
    let varied = |extra: &[(String, String)]| base.load(extra).map(|(spec, _)| spec);
    let machine_of =
        |source: &_, row: &_| report::machine_for_row(topology, Some(&varied), source, row);
    let html = report::index_html(&set, comparison.as_deref(), &svgs, Some(&machine_of));
    write_file(&args.out.join("index.html"), html)?;
    let rows: Vec<_> = set.rows().collect();
    print_out(&table::render(&rows))?;
    print_out(&kernbench::harness::sensitivity::table(&set).unwrap_or_default())?;
    comparison.map_or(Ok(()), |text| print_out(&text))
}

/// `kernbench calibrate`: check everything, fit, print, write.
fn run_calibrate(
    cli: &Cli,
    args: &CalibrateArgs,
    params: BTreeMap<String, String>,
) -> Result<(), CliError> {
    let usage = |m: String| CliError::Calibrate(calibrate::CalibrateError::Usage(m));
    let workload = workloads::find(&args.bench)?;
    if let Some(size) = params.get("size") {
        return Err(usage(format!(
            "--size {size}: calibrate runs the log's sizes"
        )));
    }
    workload.check_params(&Options {
        params: params.clone(),
        ..Options::default()
    })?;
    let reference = reference::load(&args.reference)?;
    let specs = calibrate::parse_fit(&args.fit).map_err(usage)?;
    let dtype = params.get("dtype").cloned();
    calibrate::check_log(&reference, workload, dtype.as_deref(), specs.len())?;
    let mut params = params;
    if let (None, Some(theirs)) = (dtype, &reference.dtype) {
        params.insert("dtype".to_owned(), theirs.clone());
    }
    let (topology, ccl, sets) = config_sources(cli);
    let base = vary::Base {
        topology: &topology,
        ccl: &ccl,
        sets: &sets,
    };
    let problem = calibrate::Problem {
        keys: calibrate::resolve(&base, &specs)?,
        base: base.clone(),
        workload,
        params,
        measured: calibrate::distinct_sizes(&reference.measured),
        jobs: args.jobs.map_or_else(default_jobs, NonZeroUsize::get),
        max_evaluations: args.max_evaluations,
    };
    if let Some(path) = &args.out {
        check_out_file(path)?;
    }
    if let Some(dir) = &args.report {
        claim_out(dir, cli.force)?;
    }
    let fit = problem.fit(&mut |line: &str| eprintln!("{line}"))?;
    print_out(&fit.render())?;
    if let Some(path) = &args.out {
        let header = format!(
            "kernbench calibrate: fitted against {}\n{}",
            args.reference.display(),
            command_line()
        );
        write_file(path, fit.overlay(&header))?;
    }
    if let Some(dir) = &args.report {
        write_calibration(dir, &problem, &fit, config_flags(cli))?;
    }
    Ok(())
}

/// The available cores (at least one).
fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// `calibrate --report DIR`: the fitted runs as a result folder, with
/// calibration.json and its figure.
fn write_calibration(
    dir: &Path,
    problem: &calibrate::Problem<'_>,
    fit: &calibrate::Fit,
    config: String,
) -> Result<(), CliError> {
    write_file(
        &dir.join(calibrate::FILE),
        serde_json::to_string_pretty(fit)? + "\n",
    )?;
    let overrides = fit
        .keys
        .iter()
        .zip(&fit.fitted)
        .map(|(k, &v)| (k.key.clone(), k.kind.format(v)))
        .collect::<Vec<_>>();
    let (rows, machine) = problem
        .rows(&overrides)
        .map_err(calibrate::CalibrateError::Run)?;
    let source = results::Source {
        command: command_line(),
        sweep: command_line_without(&["--out", "--jobs", "--report"]),
        config,
        machine,
        shard: None,
        varied: Vec::new(),
    };
    write_results(dir, &results::ResultSet::new(source, rows))?;
    for svg in calibrate::figures(fit) {
        write_file(&dir.join(&svg.file), &svg.text)?;
    }
    Ok(())
}

/// `kernbench web`: bind, print the URL, serve until killed.
fn serve(topology: TopologySpec, ccl: CclConfig, args: &WebArgs) -> Result<(), CliError> {
    let results = args.results.as_deref().map(report::load).transpose()?;
    let settings = web::Settings {
        topology,
        ccl,
        results,
        limits: web::Limits {
            run_time: std::time::Duration::from_secs(args.run_limit),
        },
        inputs: match args.inputs.as_ref().or(args.results.as_ref()) {
            Some(dir) => Some(dir.canonicalize().map_err(|source| CliError::InputFolder {
                path: dir.clone(),
                source,
            })?),
            None => None,
        },
    };
    let server = web::Server::bind(std::net::SocketAddr::new(args.bind, args.port), settings)?;
    print_out(&format!("listening on {}\n", server.url()))?;
    server.run()?;
    Ok(())
}

/// The command line as typed (arguments with spaces quoted).
fn command_line() -> String {
    command_line_without(&[])
}

/// The command line without the flags in `skip` and their values.
fn command_line_without(skip: &[&str]) -> String {
    let mut words = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let flag = arg.split('=').next().unwrap_or_default();
        if skip.contains(&flag) {
            if !arg.contains('=') {
                args.next();
            }
            continue;
        }
        words.push(if arg.contains(' ') {
            format!("'{arg}'")
        } else {
            arg
        });
    }
    std::iter::once("kernbench".to_owned())
        .chain(words)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The configuration flags of the command line, which identify a run's
/// machine beside its swept values.
fn config_flags(cli: &Cli) -> String {
    let mut flags = Vec::new();
    if let Some(path) = &cli.topology {
        flags.push(format!("--topology {}", path.display()));
    }
    if let Some(path) = &cli.ccl {
        flags.push(format!("--ccl {}", path.display()));
    }
    flags.extend(cli.set.iter().map(|s| format!("--set {s}")));
    flags.extend(cli.fidelity.iter().map(|f| format!("--fidelity {f}")));
    flags.join(" ")
}

/// The clap command: the derived one with the workloads' flags added.
fn command() -> clap::Command {
    Cli::command()
        .mut_subcommand("run", workload_flags::add)
        .mut_subcommand("calibrate", workload_flags::add)
        .mut_subcommand("sweep", |c| {
            workload_flags::add(c).mut_args(workload_flags::as_list)
        })
}

fn main() -> ExitCode {
    kernbench::allocator::keep_freed_memory();
    let matches = command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    cli.set = every_value(std::env::args_os(), "--set");
    cli.fidelity = every_value(std::env::args_os(), "--fidelity")
        .iter()
        .flat_map(|list| list.split(',').map(str::to_owned))
        .collect();
    let outcome = init_tracing(&cli).and_then(|guard| {
        run(&cli, &matches)?;
        finish_trace(guard)
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            error.exit_code()
        }
    }
}

/// Every value of the repeatable global option `flag` (`--set`,
/// `--fidelity`) in the order given, before the subcommand and after it:
/// clap keeps only the subcommand's when both have some, and a user means
/// all of them. Values are UTF-8 and valid (clap has parsed each one).
fn every_value(args: impl Iterator<Item = std::ffi::OsString>, flag: &str) -> Vec<String> {
    let mut args = args.skip(1).map(|a| a.to_string_lossy().into_owned());
    let joined = format!("{flag}=");
    let mut values = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if arg == flag {
            values.extend(args.next());
        } else if let Some(value) = arg.strip_prefix(&joined) {
            values.push(value.to_owned());
        }
    }
    values
}

/// Writes the trace file, if one was asked for.
fn finish_trace(guard: Option<TraceFileGuard>) -> Result<(), CliError> {
    let Some(guard) = guard else { return Ok(()) };
    let path = guard.path().to_path_buf();
    guard
        .finish()
        .map_err(|source| CliError::Trace { path, source })
}

/// The flags of the workloads' parameters, built from the registry
/// (`workloads::all_params`), so a new workload file brings its flags with
/// it.
mod workload_flags {
    use std::collections::BTreeMap;

    use clap::{Arg, ArgMatches, Command};
    use kernbench::harness::sweep;
    use kernbench::workloads;

    /// `command` with one `--NAME VALUE` flag per workload parameter and
    /// the workloads listed after the help.
    pub fn add(command: Command) -> Command {
        let flags = workloads::all_params()
            .into_values()
            .map(|(param, takers)| {
                Arg::new(param.name)
                    .long(param.name)
                    .value_name(param.value_name)
                    // `--size -256` reaches the workload's own message
                    // rather than clap's "unexpected argument '-2'".
                    .allow_hyphen_values(matches!(param.value_name, "BYTES" | "N"))
                    .help(format!("{} [{}]", param.help, takers.join(", ")))
                    .help_heading("Workload parameters")
            });
        command.args(flags).after_help(listing())
    }

    /// A workload flag of `sweep`: a comma-separated list.
    pub fn as_list(arg: Arg) -> Arg {
        if workloads::all_params().contains_key(arg.get_id().as_str()) {
            arg.value_delimiter(',').action(clap::ArgAction::Append)
        } else {
            arg
        }
    }

    /// The lists given for workload parameters (`sweep`).
    pub fn lists(matches: &ArgMatches) -> Vec<sweep::Axis> {
        workloads::all_params()
            .into_keys()
            .filter_map(|name| {
                let values = matches.get_many::<String>(name)?;
                Some(sweep::Axis {
                    name: name.to_owned(),
                    values: values.cloned().collect(),
                })
            })
            .collect()
    }

    /// The values given for workload parameters.
    pub fn values(matches: &ArgMatches) -> BTreeMap<String, String> {
        workloads::all_params()
            .into_keys()
            .filter_map(|name| {
                let value = matches.get_one::<String>(name)?;
                Some((name.to_owned(), value.clone()))
            })
            .collect()
    }

    /// "Workloads:" and one line per workload with its flags.
    fn listing() -> String {
        let mut text = String::from("Workloads:\n");
        for workload in workloads::all() {
            let flags: Vec<_> = workload
                .params()
                .iter()
                .map(|p| format!("--{}", p.name))
                .collect();
            text += &format!("  {:<18} {}", workload.name, workload.about());
            if !flags.is_empty() {
                text += &format!(" ({})", flags.join(" "));
            }
            text += "\n";
        }
        text
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn the_cli_with_every_workload_flag_is_well_formed() {
            super::super::command().debug_assert();
        }

        #[test]
        fn a_machine_larger_than_the_host_is_refused_with_its_estimate() {
            let sets = [
                "system.sips.count=254",
                "sip.cube_mesh={w: 16, h: 16}",
                "cube.pes=240",
            ]
            .map(String::from);
            let overrides = kernbench::config::Overrides::parse(&sets).unwrap();
            let source = kernbench::topology::TopologySpec::default_source();
            let spec =
                kernbench::topology::TopologySpec::load(&source, &overrides.topology).unwrap();
            // 254 x 256 cubes x 240 PEs: 15.6 M PEs at 1200 B and 65,024 cubes at
            // 27 KiB (ADR-0045 D4): about 20.5 GB, the 19.2 GB measured and more.
            let needed = 254u128 * 256 * 240 * 1200 + 254 * 256 * (27 << 10);
            assert!(needed > 19_200_000_000 && needed < 21_000_000_000);
            assert_eq!(kernbench::topology::Machine::estimated_bytes(&spec), needed);
            use super::super::{Footprint, check_machine_fits};
            let refusal = |footprint, available: u64| {
                check_machine_fits(&spec, footprint, Some(available))
                    .unwrap_err()
                    .to_string()
            };
            let text = refusal(Footprint::Graph, 4 << 30);
            let says = format!("about {} MiB of host memory to build (", needed >> 20);
            assert!(text.contains(&says), "{text}");
            assert!(
                text.contains("cube.pes") && text.contains("4096 MiB are available"),
                "{text}"
            );
            // Its measured peak, 19.2 GB, does not fit 16 GiB; 24 GiB holds it.
            assert!(check_machine_fits(&spec, Footprint::Graph, Some(16 << 30)).is_err());
            assert!(check_machine_fits(&spec, Footprint::Graph, Some(24 << 30)).is_ok());
            // A run adds 500 B per PE and 80 KiB per cube: 7.8 GB and 5.3 GB.
            let run = needed + 254 * 256 * 240 * 500 + 254 * 256 * (80 << 10);
            assert!(run > 33_000_000_000 && run < 34_000_000_000);
            let text = refusal(Footprint::Simulation, 24 << 30);
            let says = format!(
                "about {} MiB of host memory to build and simulate",
                run >> 20
            );
            assert!(text.contains(&says), "{text}");
            assert!(check_machine_fits(&spec, Footprint::Simulation, Some(30 << 30)).is_err());
            assert!(check_machine_fits(&spec, Footprint::Simulation, Some(32 << 30)).is_ok());
            assert!(check_machine_fits(&spec, Footprint::Graph, None).is_ok());
            assert!(check_machine_fits(&spec, Footprint::Simulation, None).is_ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::log_filter;
    use tracing::Level;

    #[test]
    fn rust_log_sets_the_console_level_by_target_and_defaults_to_warn() {
        let unset = log_filter(None);
        assert!(unset.would_enable("kernbench::ccl", &Level::WARN));
        assert!(!unset.would_enable("kernbench::ccl", &Level::INFO));
        let set = log_filter(Some("kernbench::ccl=debug,error"));
        assert!(set.would_enable("kernbench::ccl::ring", &Level::DEBUG));
        assert!(!set.would_enable("kernbench::hw", &Level::WARN));
        assert!(set.would_enable("kernbench::hw", &Level::ERROR));
        // Not a filter: reported, and the default kept.
        let bad = log_filter(Some("kernbench=loud"));
        assert!(bad.would_enable("kernbench", &Level::WARN));
        assert!(!bad.would_enable("kernbench", &Level::INFO));
    }
}
