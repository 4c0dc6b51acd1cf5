//! Named runs: what `kernbench run --bench NAME` (and `sweep`, `web`)
//! executes.
//!
//! A workload is one file in `workloads/` (ADR-0011), compiled into this
//! module by `build.rs` and named by its file stem. The file defines
//! `pub const WORKLOAD: Definition` — one line of help, the [`Param`]s it
//! takes (flags the CLI builds from the registry) and its host code: an
//! `async` function of a [`Torch`] and the run's [`Options`] that places
//! tensors, launches kernels, reads results back and returns its checks and
//! figures ([`Outcome`]). [`Workload::run`] refuses parameters the workload
//! does not declare, gives it a fresh device and a fresh [`Simulation`],
//! runs it as rank 0's worker task, and with `--verify-data` adds the
//! op-log replay check (`OpLog::verify`: replaying every op on an empty
//! store reproduces the live memory). Without `--verify-data` the device
//! keeps no bytes and the simulated times are the same.
//!
//! How to add one: `docs/workload-author-guide.md`.
//!
//! Knows the runtime and kernel APIs; nothing below uses it.

pub mod collective;
pub mod et;
pub mod gemm_check;
pub mod jobs;
pub mod limit;
pub mod megatron;
mod options;
mod replay;
mod report;
pub mod tensor_parallel;
pub mod tiled_gemm;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use futures::future::LocalBoxFuture;

pub use options::{ByteSize, GemmDims, Options, Param};
pub use report::{Check, Figure, Outcome, Report, Value};

use crate::device::{Device, DeviceError};
use crate::explain::Explanation;
use crate::mem::{DataMode, VaError};
use crate::runtime::launch::LaunchError;
use crate::runtime::{DistError, TensorError, Torch, scope_rank};
use crate::sim::{JoinError, SimDuration, SimError, SimTime, Simulation};
use crate::topology::Machine;

/// The workload modules (public: their helpers are API, e.g.
/// `ccl_allreduce::pattern`) and the registry table.
mod generated {
    use super::Workload;
    include!(concat!(env!("OUT_DIR"), "/workloads.rs"));
}
pub use generated::*;

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
    /// A parameter the workload does not declare.
    #[error("--{option} does not apply to {workload} (it takes: {takes})")]
    UnusedOption {
        /// The workload.
        workload: &'static str,
        /// The parameter's name.
        option: String,
        /// The parameters it declares, as flags.
        takes: String,
    },
    /// An option value the workload cannot use.
    #[error("{0}")]
    BadOption(String),
    /// A set of Chakra traces cannot be read or run (`--et`).
    #[error(transparent)]
    Trace(#[from] crate::chakra::LoadError),
    /// A training step's traces cannot be generated (`--model`, `--tp`,
    /// ...).
    #[error(transparent)]
    Generate(#[from] crate::chakra::generate::GenError),
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// A `torch.distributed` call failed.
    #[error(transparent)]
    Dist(Box<DistError>),
    /// A job of `run --jobs` failed (named by the job).
    #[error("job {0}: {1}")]
    Job(String, Box<WorkloadError>),
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
    /// The run cannot be explained (`--explain` past its memory budget).
    #[error(transparent)]
    Explain(#[from] crate::explain::ExplainError),
}

impl WorkloadError {
    /// Whether the caller asked for something wrong (an unknown workload,
    /// an undeclared parameter, a value it cannot use, a ccl.yaml entry
    /// `init_process_group` refuses for this machine): a usage error, exit
    /// code 2 on the CLI.
    pub fn is_usage(&self) -> bool {
        match self {
            WorkloadError::Unknown { .. }
            | WorkloadError::UnusedOption { .. }
            | WorkloadError::BadOption(_)
            | WorkloadError::Trace(_)
            | WorkloadError::Generate(_)
            | WorkloadError::Explain(_) => true,
            WorkloadError::Dist(error) => error.is_config(),
            WorkloadError::Job(_, error) => error.is_usage(),
            _ => false,
        }
    }
}

impl From<DistError> for WorkloadError {
    fn from(error: DistError) -> Self {
        WorkloadError::Dist(Box::new(error))
    }
}

/// A workload's host code.
pub type Host = fn(Torch, Options) -> LocalBoxFuture<'static, Result<Outcome, WorkloadError>>;

/// What a workload file defines as `pub const WORKLOAD`.
#[derive(Clone, Copy)]
pub struct Definition {
    /// One line for `--help` and the web form.
    pub about: &'static str,
    /// The parameters it takes, in sweep order (a sweep varies the last
    /// one fastest).
    pub params: &'static [Param],
    /// Its host code.
    pub host: Host,
}

/// A registered workload: a file of `workloads/` and its definition.
#[derive(Clone, Copy)]
pub struct Workload {
    /// The name `--bench` takes: the file stem.
    pub name: &'static str,
    definition: Definition,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("name", &self.name)
            .finish()
    }
}

/// Every registered workload, in name order.
pub fn all() -> &'static [Workload] {
    generated::WORKLOADS
}

/// The workload called `name`.
pub fn find(name: &str) -> Result<&'static Workload, WorkloadError> {
    all()
        .iter()
        .find(|w| w.name == name)
        .ok_or_else(|| WorkloadError::Unknown {
            name: name.to_owned(),
            known: all().iter().map(|w| w.name).collect::<Vec<_>>().join(", "),
        })
}

/// Every parameter some workload declares, by name, with the workloads
/// that take it (the first declaration's help and value name); the CLI
/// makes one flag of each.
pub fn all_params() -> BTreeMap<&'static str, (Param, Vec<&'static str>)> {
    let mut params = BTreeMap::new();
    for workload in all() {
        for param in workload.params() {
            params
                .entry(param.name)
                .or_insert_with(|| (*param, Vec::new()))
                .1
                .push(workload.name);
        }
    }
    params
}

impl Workload {
    /// The registry's entry for file `name` (used by the generated table).
    pub const fn new(name: &'static str, definition: Definition) -> Workload {
        Workload { name, definition }
    }

    /// Its one line of help.
    pub fn about(&self) -> &'static str {
        self.definition.about
    }

    /// The parameters it takes.
    pub fn params(&self) -> &'static [Param] {
        self.definition.params
    }

    /// Whether it takes parameter `name`.
    pub fn takes(&self, name: &str) -> bool {
        self.params().iter().any(|p| p.name == name)
    }

    /// Refuses a parameter the workload does not declare.
    pub fn check_params(&self, options: &Options) -> Result<(), WorkloadError> {
        match options.params.keys().find(|name| !self.takes(name)) {
            None => Ok(()),
            Some(name) => Err(WorkloadError::UnusedOption {
                workload: self.name,
                option: name.clone(),
                takes: match self.params() {
                    [] => "no parameters".to_owned(),
                    params => params
                        .iter()
                        .map(|p| format!("--{}", p.name))
                        .collect::<Vec<_>>()
                        .join(", "),
                },
            }),
        }
    }

    /// Runs the workload on a fresh device of `machine` and a fresh
    /// simulation; see the module docs.
    pub fn run(&self, machine: Arc<Machine>, options: &Options) -> Result<Report, WorkloadError> {
        self.run_marked(machine, options, &mut |_| {})
    }

    /// [`run`](Self::run), calling `set_up_done` with the events so far
    /// once every event of simulated time zero has run: the device built,
    /// the process group initialised, the first tasks spawned. A caller
    /// that measures wall time (`examples/scale`) splits set-up from
    /// simulation there; the run itself is the same event for event.
    pub fn run_marked(
        &self,
        machine: Arc<Machine>,
        options: &Options,
        set_up_done: &mut dyn FnMut(u64),
    ) -> Result<Report, WorkloadError> {
        self.check_params(options)?;
        let options = &collective::with_msccl_entry(options)?;
        match options.explain {
            false => self.run_once(machine, options, None, set_up_done),
            true => within_explain_budget(options.explain_budget(), |budget| {
                self.run_once(machine.clone(), options, Some(budget), set_up_done)
            }),
        }
    }

    /// One run, explained with its causal log bounded to `explain_budget`
    /// bytes if given.
    fn run_once(
        &self,
        machine: Arc<Machine>,
        options: &Options,
        explain_budget: Option<u64>,
        set_up_done: &mut dyn FnMut(u64),
    ) -> Result<Report, WorkloadError> {
        let device = run_device(machine, options.verify_data)?;
        let mut simulation = Simulation::new();
        if let Some(budget) = explain_budget {
            crate::explain::install(&mut simulation, &device, budget);
        }
        let torch = match &options.ccl {
            Some(ccl) => Torch::with_ccl(device.clone(), ccl.clone()),
            None => Torch::new(device.clone()),
        };
        let host = (self.definition.host)(torch.clone(), options.clone());
        let handle = simulation.spawn("host.rank0", scope_rank(0, host));
        simulation.run_until(SimTime::ZERO)?;
        set_up_done(simulation.stats().events);
        let stats = simulation.run();
        let explanation = options
            .explain
            .then(|| crate::explain::finish(&simulation, &device, HOST_SLOT, options.explain_path))
            .transpose();
        // A host that failed (a rank's error cancels the others) can leave
        // tasks of its own behind that wait for ever (a peer's kernel, a
        // `Work` in flight): the stall they make is a consequence, and the
        // host's error is the cause the user must see.
        let stats = match stats {
            Err(stall) if !handle.is_finished() => return Err(stall.into()),
            stats => stats,
        };
        let outcome = handle.output()??;
        let stats = stats?;
        let explanation = explanation?.flatten();
        let simulated = simulation.now().saturating_since(SimTime::ZERO);
        let ran = Ran {
            torch: &torch,
            device: &device,
            events: stats.events,
            simulated,
        };
        Ok(ran.report(self.name, options.verify_data, outcome, explanation))
    }
}

/// The most bytes an explained run records before it knows how many it
/// needs (ADR-0122): a run whose causal log outgrows them runs again
/// within its budget if the estimate fits, and is refused if not, having
/// held no more than this.
pub const EXPLAIN_PROBE_BYTES: u64 = 64 << 20;

/// `run`, an explained run given its causal log's bound, within `budget`
/// bytes: first within [`EXPLAIN_PROBE_BYTES`] (or the budget, if
/// smaller); a run whose log outgrows the probe runs again within the
/// budget when the probe's estimate fits it, and is refused, told against
/// the budget, when it does not.
pub(crate) fn within_explain_budget<T>(
    budget: u64,
    mut run: impl FnMut(u64) -> Result<T, WorkloadError>,
) -> Result<T, WorkloadError> {
    let probe = budget.min(EXPLAIN_PROBE_BYTES);
    match run(probe) {
        Err(WorkloadError::Explain(refused)) if probe < budget && refused.needed() <= budget => {
            run(budget)
        }
        Err(WorkloadError::Explain(refused)) => Err(refused.against(budget).into()),
        result => result,
    }
}

/// A fresh device of `machine` for one run: keeping every byte and
/// replaying ops as applied with `--verify-data`, keeping none otherwise.
fn run_device(machine: Arc<Machine>, verify_data: bool) -> Result<Rc<Device>, WorkloadError> {
    let data = if verify_data {
        DataMode::On
    } else {
        DataMode::Off
    };
    let device = Device::from_machine(machine, data)?;
    match verify_data {
        true => device.replay_ops_as_applied(),
        false => device.stop_recording_ops(),
    }
    Ok(device)
}

/// What a finished host ran on: its facade, the device, the run's events
/// and the simulated time its report gives.
struct Ran<'a> {
    torch: &'a Torch,
    device: &'a Device,
    events: u64,
    simulated: SimDuration,
}

impl Ran<'_> {
    /// The report of workload `name`'s `outcome`: the run's figures added,
    /// the op-log replay check with `--verify-data`, and the explanation
    /// with the model's and the physical bound's figures beside it.
    fn report(
        &self,
        name: &'static str,
        verify_data: bool,
        mut outcome: Outcome,
        explanation: Option<Explanation>,
    ) -> Report {
        outcome.figures.extend(run_figures(self.torch, self.events));
        if verify_data {
            outcome.checks.push(replay_check(self.device));
        }
        let mut report = Report::new(name, verify_data, self.simulated, outcome);
        if let Some(explanation) = explanation {
            attach_explanation(&mut report, explanation);
        }
        report
    }
}

/// `explanation` in `report`, with the gap to `model_ps` and the physical
/// bound when the report has them, and its figures added.
fn attach_explanation(report: &mut Report, mut explanation: Explanation) {
    let model = report.figures.iter().find(|f| f.name == "model_ps");
    if let Some(Figure {
        value: Value::Int(model),
        ..
    }) = model
    {
        explanation.add_model(*model);
    }
    if let Some((figure, time, limit, detail)) = physical_bound(report) {
        explanation.add_bound(figure, time, limit, detail);
    }
    let figures = explanation.figures();
    report
        .figures
        .extend(figures.into_iter().map(|(n, ps)| Figure::int(n, ps)));
    report.explain = Some(explanation);
}

/// The task slot of a run's host task (the first spawned).
const HOST_SLOT: u32 = 0;

/// The physical bound of a collective run (ADR-0086): the time figure
/// (the one before `limit_ps`), its time, the bound and the check's
/// sentence; `None` for a run without one.
fn physical_bound(report: &Report) -> Option<(&'static str, u64, u64, &str)> {
    let figures = &report.figures;
    let at = figures.iter().position(|f| f.name == "limit_ps")?;
    let int = |f: &Figure| match f.value {
        Value::Int(ps) => Some(ps),
        _ => None,
    };
    let time = figures.get(at.checked_sub(1)?)?;
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "within_physical_limit")?;
    Some((time.name, int(time)?, int(&figures[at])?, &check.detail))
}

/// What every run reports about the simulation itself: its events and,
/// when a process group was used, the IPCQ messages it sent.
fn run_figures(torch: &Torch, events: u64) -> Vec<Figure> {
    let messages = torch.distributed.ipcq_messages();
    let mut figures = vec![Figure::int("sim_events", events)];
    if messages > 0 {
        figures.push(Figure::int("ipcq_messages", messages));
    }
    figures
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for an explained run whose causal log needs `needs`
    /// bytes: it fits a bound of at least that, and is refused with the
    /// exact estimate under a smaller one.
    fn explained_run(needs: u64, bound: u64) -> Result<(), WorkloadError> {
        match needs <= bound {
            true => Ok(()),
            false => Err(crate::explain::ExplainError::OverBudget {
                needed: needs,
                budget: bound,
                recorded: bound,
                at: crate::sim::SimDuration::ZERO,
                events: 1,
                total: 1,
            }
            .into()),
        }
    }

    /// The bounds an explained run is tried with, and the budget its
    /// refusal names (`None`: explained), for a log of `needs` bytes
    /// under `budget`.
    fn probed(needs: u64, budget: u64) -> (Vec<u64>, Option<u64>) {
        let mut bounds = Vec::new();
        let result = within_explain_budget(budget, |bound| {
            bounds.push(bound);
            explained_run(needs, bound)
        });
        let refused = result.err().map(|error| match error {
            WorkloadError::Explain(crate::explain::ExplainError::OverBudget { budget, .. }) => {
                budget
            }
            other => panic!("{other}"),
        });
        (bounds, refused)
    }

    #[test]
    fn an_explained_run_probes_its_log_before_taking_its_budget() {
        const MIB: u64 = 1 << 20;
        const GIB: u64 = 1 << 30;
        let probe = EXPLAIN_PROBE_BYTES;
        let check = |needs: u64, budget: u64, expect: (Vec<u64>, Option<u64>)| {
            assert_eq!(
                probed(needs, budget),
                expect,
                "needs {needs}, budget {budget}"
            );
        };
        // Fits the probe: one run.
        check(MIB, GIB, (vec![probe], None));
        // Outgrows the probe, fits the budget: run again within it.
        check(100 * MIB, GIB, (vec![probe, GIB], None));
        // Outgrows the budget: refused after the probe, naming the budget.
        check(2 * GIB, GIB, (vec![probe], Some(GIB)));
        // A budget under the probe is the only bound.
        check(MIB, 32 * MIB, (vec![32 * MIB], None));
        check(100 * MIB, 32 * MIB, (vec![32 * MIB], Some(32 * MIB)));
    }

    #[test]
    fn the_registry_holds_every_file_with_well_formed_flags() {
        let names: Vec<_> = all().iter().map(|w| w.name).collect();
        for name in ["ccl_allreduce", "gemm_single_pe", "va_offset_verify"] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        assert!(names.is_sorted(), "{names:?}");
        for workload in all() {
            let mut seen = std::collections::BTreeSet::new();
            for param in workload.params() {
                let well_formed = param.name.starts_with(|c: char| c.is_ascii_lowercase())
                    && param
                        .name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                assert!(well_formed, "{}: --{}", workload.name, param.name);
                assert!(
                    seen.insert(param.name),
                    "{}: --{} twice",
                    workload.name,
                    param.name
                );
            }
        }
    }

    #[test]
    fn undeclared_parameters_are_usage_errors() {
        let va = find("va_offset_verify").unwrap();
        let options = Options::default().with("shape", "1x1x1");
        let error = va.check_params(&options).unwrap_err();
        assert!(error.is_usage());
        assert_eq!(
            error.to_string(),
            "--shape does not apply to va_offset_verify (it takes: no parameters)"
        );
        let unknown = find("nope").unwrap_err();
        assert!(unknown.is_usage());
        assert!(
            unknown
                .to_string()
                .starts_with("no workload named `nope` (known: ")
        );
    }
}
