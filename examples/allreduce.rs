//! The main job: `torch.distributed.all_reduce` on the default machine,
//! written like a PyTorch DDP worker.
//!
//! ```sh
//! cargo run --release --example allreduce [-- --trace FILE]
//! ```
//!
//! For each size, a fresh simulation runs one worker per rank (rank = SIP):
//! `set_device(rank)`, `init_process_group("ahbm")`, a cube-mesh tensor
//! (`DPPolicy(cube=row_wise, pe=replicate, num_cubes, num_pes=1)`, ADR-0032
//! D2) filled with rank-dependent values, `all_reduce` between two
//! barriers, read back and checked. Prints one OK line per rank and an
//! nccl-tests-style table; exits non-zero on a wrong result.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use half::f16;
use kernbench::ccl::CclConfig;
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::{DPPolicy, ReduceOp, Split, Torch, spawn};
use kernbench::sim::{self, SimDuration, Simulation};
use kernbench::topology::{Machine, TopologySpec};
use kernbench::trace::ChromeTraceLayer;
use kernbench::workloads::WorkloadError;
use kernbench::workloads::ccl_allreduce::{bandwidths, expected, pattern};
use ndarray::ArrayD;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Elements per cube tile, per row of the table.
const TILE_ELEMENTS: [usize; 5] = [8, 64, 512, 4096, 16384];

/// What one rank saw.
struct RankLine {
    rank: usize,
    time: SimDuration,
    ok: bool,
}

/// The DDP worker (author guide §1 step 3, in Rust).
async fn worker(torch: Torch, n_elem: usize) -> Result<RankLine, WorkloadError> {
    let dist = &torch.distributed;
    let rank = dist.get_rank().unwrap_or(0);
    torch.ahbm.set_device(rank);
    dist.init_process_group("ahbm")?;
    let world_size = dist.get_world_size()?;
    let cubes = torch.device().fabric().machine().cubes_per_sip() as usize;
    let dp = DPPolicy::new(Split::RowWise, Split::Replicate, cubes as u32, 1);
    let tensor = torch.zeros(&[cubes, n_elem], DType::F16, &dp)?;
    tensor.copy_from(&pattern(rank, cubes, n_elem)).await?;
    dist.barrier().await?;
    let start = sim::now();
    dist.all_reduce(&tensor, ReduceOp::Sum).await?;
    dist.barrier().await?;
    let time = sim::now() - start;
    let back: Option<ArrayD<f16>> = tensor.to_ndarray().await?;
    let ok = back == Some(expected(world_size, cubes, n_elem).into_dyn());
    tensor.free()?;
    Ok(RankLine { rank, time, ok })
}

/// One size on a fresh simulation: every rank's line.
fn run_size(
    machine: &Arc<Machine>,
    ccl: &CclConfig,
    n_elem: usize,
) -> Result<Vec<RankLine>, Box<dyn Error>> {
    let device = Device::from_machine(machine.clone(), DataMode::On)?;
    let torch = Torch::with_ccl(device, ccl.clone());
    let mut simulation = Simulation::new();
    let handle = simulation.spawn("driver", async move {
        torch.distributed.init_process_group("ahbm")?;
        let world_size = torch.distributed.get_world_size()?;
        spawn(world_size, move |_rank| worker(torch.clone(), n_elem))
            .await
            .map_err(|e| WorkloadError::Rank(e.rank, Box::new(e.source)))
    });
    simulation.run()?;
    Ok(handle.output()??)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("error: a rank holds a wrong result");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `--trace FILE`, if given.
fn trace_path() -> Result<Option<PathBuf>, Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (None, _) => Ok(None),
        (Some("--trace"), Some(path)) => Ok(Some(path.into())),
        _ => Err("usage: allreduce [--trace FILE]".into()),
    }
}

fn run() -> Result<bool, Box<dyn Error>> {
    let guard = match trace_path()? {
        Some(path) => {
            let (layer, guard) = ChromeTraceLayer::to_file(&path)?;
            tracing_subscriber::registry().with(layer).init();
            Some(guard)
        }
        None => None,
    };
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[])?;
    let machine = Arc::new(Machine::build(&spec)?);
    let ccl = CclConfig::load(&CclConfig::default_source(), &[])?;
    let algorithm = ccl.default_algorithm().name.to_owned();
    let cubes = machine.cubes_per_sip() as usize;
    println!(
        "# all_reduce, algorithm {algorithm}, {} SIPs x {cubes} cubes",
        machine.sip_count()
    );
    println!(
        "#{:>11} {:>10} {:>6} {:>6} {:>12} {:>9} {:>9}",
        "size(B)", "count", "type", "redop", "time(us)", "algbw", "busbw"
    );
    let mut all_ok = true;
    for n_elem in TILE_ELEMENTS {
        let lines = run_size(&machine, &ccl, n_elem)?;
        for line in &lines {
            let verdict = if line.ok { "OK" } else { "WRONG" };
            println!(
                "  rank {}: {} elements {verdict}",
                line.rank,
                cubes * n_elem
            );
            all_ok &= line.ok;
        }
        let time = lines.iter().map(|l| l.time).max().unwrap_or_default();
        let bytes = (cubes * n_elem * 2) as u64;
        let (algbw, busbw) = bandwidths(bytes, time, lines.len());
        let us = time.as_ps() as f64 / 1e6;
        println!(
            " {bytes:>11} {:>10} {:>6} {:>6} {us:>12.3} {algbw:>9.3} {busbw:>9.3}",
            cubes * n_elem,
            "half",
            "sum"
        );
    }
    if let Some(guard) = guard {
        guard.finish()?;
    }
    Ok(all_ok)
}
