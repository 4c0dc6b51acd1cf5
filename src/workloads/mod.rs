//! Named runs: what `kernbench run --bench NAME` executes.
//!
//! A [`Workload`] is host code — an `async` function of a [`Torch`] and the
//! run's [`Options`] that places tensors, launches kernels, reads results
//! back and returns its checks and figures ([`Outcome`]). [`Workload::run`]
//! gives it a fresh device and a fresh [`Simulation`], runs it as rank 0's
//! worker task, and with `--verify-data` adds the op-log replay check
//! (`OpLog::verify`: replaying every op on an empty store reproduces the
//! live memory). Without `--verify-data` the device keeps no bytes and the
//! simulated times are the same.
//!
//! | name | what |
//! |---|---|
//! | `ccl_allreduce` | `torch.distributed.all_reduce` on every rank (rank = SIP); time, algbw, busbw, results checked |
//! | `gemm_single_pe` | `C = A × B` (f16, `M×K×N`) on one PE; achieved vs peak TFLOP/s |
//! | `va_offset_verify` | windows at odd VA offsets across pages and cubes, copied by kernels; every byte checked |
//!
//! Knows the runtime and kernel APIs; nothing below uses it.

pub mod ccl_allreduce;
pub mod gemm_single_pe;
mod report;
pub mod va_offset_verify;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use futures::future::LocalBoxFuture;

pub use report::{Check, Figure, Outcome, Report, Value};

use crate::ccl::CclConfig;
use crate::device::{Device, DeviceError};
use crate::mem::{DataMode, VaError};
use crate::runtime::launch::LaunchError;
use crate::runtime::{DistError, TensorError, Torch, scope_rank};
use crate::sim::{JoinError, SimError, SimTime, Simulation};
use crate::topology::Machine;

/// The dimensions of a GEMM: `A` is `M×K`, `B` is `K×N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmDims {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Columns of `A`, rows of `B`.
    pub k: usize,
    /// Columns of `B` and `C`.
    pub n: usize,
}

impl fmt::Display for GemmDims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.k, self.n)
    }
}

impl FromStr for GemmDims {
    type Err = String;

    /// `MxKxN`, each a positive integer.
    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<_> = text.split('x').map(str::parse::<usize>).collect();
        match parts.as_slice() {
            [Ok(m), Ok(k), Ok(n)] if *m > 0 && *k > 0 && *n > 0 => Ok(GemmDims {
                m: *m,
                k: *k,
                n: *n,
            }),
            _ => Err(format!(
                "`{text}` is not MxKxN with three positive integers"
            )),
        }
    }
}

/// What the command line asks of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Keep bytes, check results and replay the op log.
    pub verify_data: bool,
    /// GEMM dimensions, for workloads that take them.
    pub shape: Option<GemmDims>,
    /// The ccl.yaml entry to run instead of the default (collectives).
    pub algorithm: Option<String>,
    /// Bytes per rank (collectives).
    pub size: Option<u64>,
    /// The ccl.yaml `torch.distributed` reads (the embedded one if `None`).
    pub ccl: Option<CclConfig>,
}

/// Why a run could not complete (a failed check is not an error: it is in
/// the [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// No workload of that name.
    #[error("no workload named `{name}` (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names.
        known: String,
    },
    /// An option the workload does not take.
    #[error("{option} does not apply to {workload}")]
    UnusedOption {
        /// The workload.
        workload: &'static str,
        /// The option.
        option: &'static str,
    },
    /// An option value the workload cannot use.
    #[error("{0}")]
    BadOption(String),
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// A `torch.distributed` call failed.
    #[error(transparent)]
    Dist(Box<DistError>),
    /// A rank worker failed (the others were cancelled).
    #[error("rank {0} failed: {1}")]
    Rank(usize, Box<WorkloadError>),
    /// A kernel launch failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A virtual address could not be translated.
    #[error(transparent)]
    Va(#[from] VaError),
    /// The device could not be built.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The simulation stopped with an error (deadlock, panic).
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The host task did not finish.
    #[error(transparent)]
    Join(#[from] JoinError),
}

impl From<DistError> for WorkloadError {
    fn from(error: DistError) -> Self {
        WorkloadError::Dist(Box::new(error))
    }
}

/// A workload's host code.
type Host = fn(Torch, Options) -> LocalBoxFuture<'static, Result<Outcome, WorkloadError>>;

/// A named run.
pub struct Workload {
    /// The name `--bench` takes.
    pub name: &'static str,
    /// Whether it takes `--shape` / `--m --k --n`.
    pub takes_shape: bool,
    /// Whether it takes `--algorithm` and `--size`.
    pub takes_collective: bool,
    host: Host,
}

/// Every workload, by name.
pub static WORKLOADS: [Workload; 3] = [
    Workload {
        name: ccl_allreduce::NAME,
        takes_shape: false,
        takes_collective: true,
        host: ccl_allreduce::host,
    },
    Workload {
        name: gemm_single_pe::NAME,
        takes_shape: true,
        takes_collective: false,
        host: gemm_single_pe::host,
    },
    Workload {
        name: va_offset_verify::NAME,
        takes_shape: false,
        takes_collective: false,
        host: va_offset_verify::host,
    },
];

/// The workload called `name`.
pub fn find(name: &str) -> Result<&'static Workload, WorkloadError> {
    WORKLOADS
        .iter()
        .find(|w| w.name == name)
        .ok_or_else(|| WorkloadError::Unknown {
            name: name.to_owned(),
            known: WORKLOADS
                .iter()
                .map(|w| w.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

impl Workload {
    /// Runs the workload on a fresh device of `machine` and a fresh
    /// simulation; see the module docs.
    pub fn run(&self, machine: Arc<Machine>, options: &Options) -> Result<Report, WorkloadError> {
        if options.shape.is_some() && !self.takes_shape {
            return Err(WorkloadError::UnusedOption {
                workload: self.name,
                option: "--shape / --m --k --n",
            });
        }
        if (options.algorithm.is_some() || options.size.is_some()) && !self.takes_collective {
            return Err(WorkloadError::UnusedOption {
                workload: self.name,
                option: "--algorithm / --size",
            });
        }
        let data = if options.verify_data {
            DataMode::On
        } else {
            DataMode::Off
        };
        let device = Device::from_machine(machine, data)?;
        let mut simulation = Simulation::new();
        let torch = match &options.ccl {
            Some(ccl) => Torch::with_ccl(device.clone(), ccl.clone()),
            None => Torch::new(device.clone()),
        };
        let host = (self.host)(torch, options.clone());
        let handle = simulation.spawn("host.rank0", scope_rank(0, host));
        let stats = simulation.run()?;
        let mut outcome = handle.output()??;
        outcome
            .figures
            .push(Figure::int("sim_events", stats.events));
        if options.verify_data {
            outcome.checks.push(replay_check(&device));
        }
        let simulated = simulation.now().saturating_since(SimTime::ZERO);
        Ok(Report::new(
            self.name,
            options.verify_data,
            simulated,
            outcome,
        ))
    }
}

/// `OpLog::verify` as a check.
fn replay_check(device: &Device) -> Check {
    let ops = device.oplog().len();
    match device.oplog().verify(&device.store()) {
        Ok(()) => Check::new(
            "oplog_replay",
            true,
            format!("{ops} ops replayed: memory identical"),
        ),
        Err(error) => Check::new("oplog_replay", false, error.to_string()),
    }
}
