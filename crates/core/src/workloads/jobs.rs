//! Several workloads at once on one machine (`run --jobs`, ADR-0116).
//!
//! Each [`Job`] is a workload with its flags on its own SIPs, starting at
//! its own time: its host code gets a facade of the job
//! ([`Torch::for_job`]: rank `r` on the job's `r`-th SIP, tracks of its
//! own), and every job runs in one simulation on one device, so jobs meet
//! only where their traffic does, on the fabric. Every job is also run
//! alone on the same SIPs at the same start, in the same invocation: its
//! `slowdown` is its time beside the others over its time alone, measured
//! rather than assumed, and the links its alone run and another job's both
//! carry data over are the links they share. With `--explain`, the jobs
//! run together once per job, each run marking one job's interval (the
//! model is deterministic: every such run is the same run).
//!
//! Knows workloads and the runtime's jobs; nothing of the jobs file or
//! the CLI.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use super::{Figure, Outcome, Ran, Report, Value, Workload, WorkloadError, run_device};
use crate::device::Device;
use crate::runtime::{Torch, scope_rank};
use crate::sim::{self, JoinHandle, SimDuration, SimTime, Simulation};
use crate::topology::Machine;

/// One job of a jobs file, checked: a workload with its options on
/// distinct SIPs of the machine, from `start`.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its name (an identifier, unique in the file).
    pub name: String,
    /// What it runs.
    pub workload: &'static Workload,
    /// Its flags, with the run's (`--verify-data`, `--explain`, ccl.yaml).
    pub options: super::Options,
    /// Its SIPs in rank order.
    pub sips: Vec<u32>,
    /// When its host code starts, in simulated time.
    pub start: SimDuration,
}

/// A job's results: its report beside the others, with the figures
/// `alone_ps`, `slowdown` and `shared_links` added after its time figure.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// The job's name.
    pub name: String,
    /// Its SIPs in rank order.
    pub sips: Vec<u32>,
    /// Its report from the run of every job together.
    pub report: Report,
    /// The links it shares with other jobs, each with those jobs' names.
    pub shared: Vec<(String, Vec<String>)>,
}

/// Runs `jobs` together on `machine` and each alone (see the module docs);
/// the reports in the jobs' order. Every job's options are checked first.
pub fn run_jobs(machine: Arc<Machine>, jobs: &[Job]) -> Result<Vec<JobReport>, WorkloadError> {
    let mut checked = Vec::with_capacity(jobs.len());
    for job in jobs {
        job.workload
            .check_params(&job.options)
            .map_err(in_job(job))?;
        let options = super::collective::with_msccl_entry(&job.options).map_err(in_job(job))?;
        checked.push(Job {
            options,
            ..job.clone()
        });
    }
    let jobs = &checked;
    let mut alone = Vec::with_capacity(jobs.len());
    let mut used = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut set = run_set(&machine, std::slice::from_ref(job), None)?;
        used.push(set.used_links);
        alone.push(set.reports.remove(0));
    }
    let together = match jobs.iter().any(|j| j.options.explain) {
        false => run_set(&machine, jobs, None)?.reports,
        true => explained_runs(&machine, jobs)?,
    };
    let shared = shared_links(jobs, &used);
    Ok(jobs
        .iter()
        .zip(together)
        .zip(alone.iter().zip(shared))
        .map(|((job, mut report), (alone, shared))| {
            add_job_figures(&mut report, alone, shared.len());
            if let Some(explanation) = &mut report.explain {
                let links: Vec<(String, String)> = shared
                    .iter()
                    .map(|(link, with)| (link.clone(), with.join(", ")))
                    .collect();
                explanation.add_shared_links(&links);
            }
            JobReport {
                name: job.name.clone(),
                sips: job.sips.clone(),
                report,
                shared,
            }
        })
        .collect())
}

/// The together run once per job, each explaining that job: the reports,
/// each from the run that explains it.
fn explained_runs(machine: &Arc<Machine>, jobs: &[Job]) -> Result<Vec<Report>, WorkloadError> {
    (0..jobs.len())
        .map(|job| {
            let budget = jobs[job].options.explain_budget();
            let mut set = super::within_explain_budget(budget, |budget| {
                run_set(machine, jobs, Some(Explained { job, budget }))
            })?;
            Ok(set.reports.swap_remove(job))
        })
        .collect()
}

/// The job a run explains, and its causal log's bound in bytes.
#[derive(Debug, Clone, Copy)]
struct Explained {
    job: usize,
    budget: u64,
}

/// A job's error, named by the job.
fn in_job(job: &Job) -> impl Fn(WorkloadError) -> WorkloadError + '_ {
    move |source| WorkloadError::Job(job.name.clone(), Box::new(source))
}

/// Payload bytes by link name (`from->to`), of the links that carried
/// any.
type LinkBytes = BTreeMap<String, u64>;

/// What one simulation of a set of jobs gives: each job's report, and the
/// links that carried data.
struct SetRun {
    reports: Vec<Report>,
    used_links: LinkBytes,
}

/// A job's host task: its outcome and when it ended.
type HostHandle = JoinHandle<(Result<Outcome, WorkloadError>, SimTime)>;

/// `jobs` in one simulation on one fresh device, job `explained` (if
/// any, with its causal log's bound) marking the interval `--explain`
/// explains. Job `j`'s host is the
/// `j`-th task spawned (slot `j`).
fn run_set(
    machine: &Arc<Machine>,
    jobs: &[Job],
    explained: Option<Explained>,
) -> Result<SetRun, WorkloadError> {
    let verify_data = jobs.iter().any(|j| j.options.verify_data);
    let device = run_device(machine.clone(), verify_data)?;
    let mut simulation = Simulation::new();
    if let Some(Explained { budget, .. }) = explained {
        crate::explain::install(&mut simulation, &device, budget);
    }
    let explained = explained.map(|e| e.job);
    let hosts: Vec<(Torch, HostHandle)> = jobs
        .iter()
        .enumerate()
        .map(|(j, job)| spawn_host(&mut simulation, &device, job, explained == Some(j)))
        .collect();
    let stats = simulation.run();
    let explanation = explained
        .map(|k| {
            crate::explain::finish(&simulation, &device, k as u32, jobs[k].options.explain_path)
        })
        .transpose();
    // As in a single run: a host's error, not the stall its orphaned
    // tasks make, is the cause; the first job's that failed.
    let mut ended = Vec::with_capacity(jobs.len());
    for ((torch, handle), job) in hosts.into_iter().zip(jobs) {
        let output = handle.is_finished().then(|| handle.output());
        if let Some(Ok((Err(error), ..))) = output {
            return Err(in_job(job)(error));
        }
        ended.push((torch, output));
    }
    let stats = stats?;
    let mut explanation = explanation?.flatten();
    let mut reports = Vec::with_capacity(jobs.len());
    for (j, ((torch, output), job)) in ended.into_iter().zip(jobs).enumerate() {
        let Some(output) = output else {
            let name = format!("{}.host.rank0", job.name);
            return Err(sim::JoinError::NotFinished(name).into());
        };
        let (outcome, end) = output?;
        let ran = Ran {
            torch: &torch,
            device: &device,
            events: stats.events,
            simulated: end.saturating_since(SimTime::ZERO),
        };
        let explained = match explained == Some(j) {
            true => explanation.take(),
            false => None,
        };
        let outcome = outcome.map_err(in_job(job))?;
        reports.push(ran.report(job.workload.name, verify_data, outcome, explained));
    }
    Ok(SetRun {
        reports,
        used_links: used_links(&device, simulation.now()),
    })
}

/// Spawns `job`'s host code on `device`, waiting for its start; `marks`:
/// its workload marks the explained interval.
fn spawn_host(
    simulation: &mut Simulation,
    device: &Rc<Device>,
    job: &Job,
    marks: bool,
) -> (Torch, HostHandle) {
    let ccl = job.options.ccl.clone();
    let torch = Torch::for_job(device.clone(), ccl, &job.name, &job.sips, marks);
    let host = (job.workload.definition.host)(torch.clone(), job.options.clone());
    let start = job.start;
    let task = async move {
        if start > SimDuration::ZERO {
            sim::sleep(start).await;
        }
        let outcome = host.await;
        (outcome, sim::now())
    };
    let name = format!("{}.host.rank0", job.name);
    let handle = simulation.spawn(&name, scope_rank(0, task));
    (torch, handle)
}

/// The links that carried payload bytes by `now`, with their bytes.
fn used_links(device: &Device, now: SimTime) -> LinkBytes {
    device
        .fabric()
        .links()
        .made_links()
        .map(|link| (link.name().to_owned(), link.stats(now).bytes))
        .filter(|&(_, bytes)| bytes > 0)
        .collect()
}

/// For each job, the links its alone run used that another's did too,
/// those it moved most bytes over first (ties by name), each with those
/// jobs' names in the jobs' order.
fn shared_links(jobs: &[Job], used: &[LinkBytes]) -> Vec<Vec<(String, Vec<String>)>> {
    used.iter()
        .enumerate()
        .map(|(j, mine)| {
            let mut shared: Vec<(u64, String, Vec<String>)> = mine
                .iter()
                .filter_map(|(link, &bytes)| {
                    let with: Vec<String> = (0..jobs.len())
                        .filter(|&k| k != j && used[k].contains_key(link))
                        .map(|k| jobs[k].name.clone())
                        .collect();
                    (!with.is_empty()).then(|| (bytes, link.clone(), with))
                })
                .collect();
            shared.sort_by_key(|(bytes, ..)| std::cmp::Reverse(*bytes));
            shared
                .into_iter()
                .map(|(_, link, with)| (link, with))
                .collect()
        })
        .collect()
}

/// A report's time figure: its first `*_ps` figure other than the model
/// and the physical bound (what a sweep's table shows as the time).
pub fn time_figure(report: &Report) -> Option<(&'static str, u64)> {
    report.figures.iter().find_map(|f| match f.value {
        Value::Int(ps) if f.name.ends_with("_ps") && !matches!(f.name, "model_ps" | "limit_ps") => {
            Some((f.name, ps))
        }
        _ => None,
    })
}

/// Adds to `report`, after its time figure, the time of the job `alone`
/// (`alone_ps`), the ratio of the two (`slowdown`: 1.0 when the others
/// cost it nothing) and the count of links it shares.
fn add_job_figures(report: &mut Report, alone: &Report, shared: usize) {
    let (Some((name, together)), Some((_, alone))) = (time_figure(report), time_figure(alone))
    else {
        report
            .figures
            .push(Figure::int("shared_links", shared as u64));
        return;
    };
    let slowdown = match alone {
        0 => 1.0,
        alone => together as f64 / alone as f64,
    };
    let at = report
        .figures
        .iter()
        .position(|f| f.name == name)
        .map_or(0, |i| i + 1);
    let added = [
        Figure::time("alone_ps", SimDuration::from_ps(alone)),
        Figure::real("slowdown", slowdown),
        Figure::int("shared_links", shared as u64),
    ];
    report.figures.splice(at..at, added);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{Check, Outcome};

    fn report(figures: Vec<Figure>) -> Report {
        let outcome = Outcome {
            checks: Vec::<Check>::new(),
            figures,
        };
        Report::new("ccl_allreduce", false, SimDuration::ZERO, outcome)
    }

    #[test]
    fn the_time_figure_is_the_first_ps_figure_but_the_model_and_the_bound() {
        let r = report(vec![
            Figure::time("model_ps", SimDuration::from_ps(5)),
            Figure::int("bytes_per_rank", 8),
            Figure::time("allreduce_ps", SimDuration::from_ps(9)),
            Figure::time("limit_ps", SimDuration::from_ps(4)),
        ]);
        assert_eq!(time_figure(&r), Some(("allreduce_ps", 9)));
        assert_eq!(time_figure(&report(vec![])), None);
    }

    #[test]
    fn a_job_s_figures_follow_its_time_and_its_slowdown_is_the_ratio() {
        let time = |ps| Figure::time("allreduce_ps", SimDuration::from_ps(ps));
        let mut together = report(vec![time(300), Figure::int("sim_events", 1)]);
        add_job_figures(&mut together, &report(vec![time(200)]), 2);
        let names: Vec<_> = together.figures.iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            [
                "allreduce_ps",
                "alone_ps",
                "slowdown",
                "shared_links",
                "sim_events"
            ]
        );
        assert_eq!(together.figures[2].value, Value::Real(1.5));
        assert_eq!(together.figures[3].value, Value::Int(2));
    }

    #[test]
    fn a_link_is_shared_when_another_job_s_alone_run_used_it() {
        let set = |links: &[(&str, u64)]| links.iter().map(|&(l, b)| (l.to_owned(), b)).collect();
        let used = vec![
            set(&[("a->b", 9), ("b->c", 1), ("c->d", 5)]),
            set(&[("b->c", 3)]),
            set(&[("c->d", 1)]),
        ];
        let jobs: Vec<Job> = ["x", "y", "z"]
            .iter()
            .map(|name| Job {
                name: name.to_string(),
                workload: crate::workloads::find("ccl_allreduce").unwrap(),
                options: crate::workloads::Options::default(),
                sips: vec![],
                start: SimDuration::ZERO,
            })
            .collect();
        let shared = shared_links(&jobs, &used);
        let one = |link: &str, with: &str| (link.to_owned(), vec![with.to_owned()]);
        assert_eq!(
            shared[0],
            [one("c->d", "z"), one("b->c", "y")],
            "most bytes first"
        );
        assert_eq!(shared[1], [one("b->c", "x")]);
        assert_eq!(shared[2], [one("c->d", "x")]);
    }
}
