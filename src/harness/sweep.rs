//! A sweep: one workload over the cartesian product of parameter values
//! (and configuration variants), each point an independent simulation.
//!
//! [`Plan::points`] orders the points deterministically: variants
//! outermost, then the workload's parameters in the order it declares them,
//! the last varying fastest. [`Shard`] keeps every `N`-th point (round
//! robin, so each shard gets a share of the small and the large sizes).
//! [`run`] spreads the points over worker threads: the simulation is
//! single-threaded and built on `Rc`, so each point builds its own
//! machine, device and [`Simulation`](crate::sim::Simulation) inside the
//! thread that runs it; only plain specs cross threads. Rows come back in
//! point order whatever the thread count, and a point that fails is a row
//! with its reason, not the end of the sweep.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::results::Row;
use crate::ccl::CclConfig;
use crate::topology::{Machine, TopologySpec};
use crate::workloads::{ByteSize, Options, Workload, WorkloadError};

/// One machine and collective configuration of a sweep, with the swept
/// configuration values that produced it (e.g. `fidelity=flow`).
#[derive(Debug, Clone)]
pub struct Variant {
    /// The swept configuration values, as `(name, value)`.
    pub fields: Vec<(String, String)>,
    /// The machine.
    pub topology: TopologySpec,
    /// The collectives' configuration.
    pub ccl: CclConfig,
}

/// A workload parameter and the values a sweep gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    /// The parameter's name (`Param::name`).
    pub name: String,
    /// Its values, in order.
    pub values: Vec<String>,
}

/// What a sweep runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The workload.
    pub workload: &'static Workload,
    /// The configuration variants (at least one).
    pub variants: Vec<Variant>,
    /// The swept parameters, in the workload's declaration order.
    pub axes: Vec<Axis>,
    /// Keep bytes and check results.
    pub verify_data: bool,
    /// Explain every point (`--explain`, ADR-0028).
    pub explain: bool,
}

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// Its position in the whole (unsharded) sweep.
    pub index: usize,
    /// Its variant.
    pub variant: usize,
    /// Its swept values: the variant's, then the parameters'.
    pub fields: Vec<(String, String)>,
}

impl Plan {
    /// A plan over `axes`, put in the order `workload` declares its
    /// parameters; a parameter it does not take is a usage error.
    pub fn new(
        workload: &'static Workload,
        variants: Vec<Variant>,
        mut axes: Vec<Axis>,
        verify_data: bool,
    ) -> Result<Plan, WorkloadError> {
        let probe = Options {
            params: axes
                .iter()
                .map(|a| (a.name.clone(), String::new()))
                .collect(),
            ..Options::default()
        };
        workload.check_params(&probe)?;
        let position = |name: &str| workload.params().iter().position(|p| p.name == name);
        axes.sort_by_key(|axis| position(&axis.name));
        Ok(Plan {
            workload,
            variants,
            axes,
            verify_data,
            explain: false,
        })
    }

    /// This plan, explaining every point when `explain` is set.
    pub fn explained(mut self, explain: bool) -> Plan {
        self.explain = explain;
        self
    }

    /// Every point, in sweep order.
    pub fn points(&self) -> Vec<Point> {
        let mut points = Vec::new();
        for (variant, v) in self.variants.iter().enumerate() {
            let mut combos: Vec<Vec<(String, String)>> = vec![v.fields.clone()];
            for axis in &self.axes {
                combos = combos
                    .into_iter()
                    .flat_map(|combo| {
                        axis.values.iter().map(move |value| {
                            let mut next = combo.clone();
                            next.push((axis.name.clone(), value.clone()));
                            next
                        })
                    })
                    .collect();
            }
            points.extend(combos.into_iter().map(|fields| (variant, fields)));
        }
        points
            .into_iter()
            .enumerate()
            .map(|(index, (variant, fields))| Point {
                index,
                variant,
                fields,
            })
            .collect()
    }

    /// Refuses, before anything runs, a `size` no rank can hold: more than
    /// a SIP's HBM (its cubes × `cube.hbm.capacity`) in some variant, as
    /// `run` refuses it (a sweep's `-e` can reach 16 EiB).
    pub fn check_sizes(&self) -> Result<(), WorkloadError> {
        let Some(axis) = self.axes.iter().find(|a| a.name == "size") else {
            return Ok(());
        };
        for variant in &self.variants {
            let spec = &variant.topology;
            let hbm = spec.cube().hbm.capacity.get().bytes();
            let capacity = u128::from(hbm) * u128::from(spec.cubes_per_sip());
            for value in &axis.values {
                let Ok(size) = value.parse::<ByteSize>() else {
                    continue;
                };
                if u128::from(size.0) > capacity {
                    return Err(WorkloadError::BadOption(format!(
                        "--size {value}: more than a rank's HBM ({} cubes x {} = {capacity} B, \
                         cube.hbm.capacity): lower the largest size (-e) or raise cube.hbm.capacity",
                        spec.cubes_per_sip(),
                        spec.cube().hbm.capacity
                    )));
                }
            }
        }
        Ok(())
    }

    /// The options of `point`: its parameter values (not the variant's).
    fn options(&self, point: &Point) -> Options {
        let variant = &self.variants[point.variant];
        let params = point.fields[variant.fields.len()..].iter().cloned();
        Options {
            verify_data: self.verify_data,
            params: params.collect(),
            ccl: Some(variant.ccl.clone()),
            explain: self.explain,
            explain_memory: None,
            explain_path: Default::default(),
        }
    }

    /// Runs `point` on a machine built in the calling thread.
    pub fn run_point(&self, point: &Point) -> Row {
        let variant = &self.variants[point.variant];
        let report = Machine::build(&variant.topology)
            .map_err(|error| error.to_string())
            .and_then(|machine| {
                self.workload
                    .run(Arc::new(machine), &self.options(point))
                    .map_err(|error| error.to_string())
            });
        Row::new(self.workload.name, point, self.verify_data, report)
    }
}

/// nccl-tests' sizes: `min`, `min × factor`, ... up to `max` inclusive
/// (`-b`, `-e`, `-f`).
pub fn sizes(min: ByteSize, max: ByteSize, factor: u64) -> Result<Vec<ByteSize>, String> {
    if min.0 == 0 || max < min || factor < 2 {
        return Err(format!(
            "sizes -b {min} -e {max} -f {factor}: need 0 < min <= max and a step factor >= 2"
        ));
    }
    let mut sizes = vec![min];
    while let Some(next) = sizes.last().and_then(|s| s.0.checked_mul(factor)) {
        if next > max.0 {
            break;
        }
        sizes.push(ByteSize(next));
    }
    Ok(sizes)
}

/// `--shard I/N`: the points whose index is `I − 1` modulo `N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which share, from 1.
    pub index: usize,
    /// How many shares.
    pub count: usize,
}

impl Shard {
    /// The points of this share.
    pub fn select(&self, points: Vec<Point>) -> Vec<Point> {
        points
            .into_iter()
            .filter(|p| p.index % self.count == self.index - 1)
            .collect()
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let parsed = text
            .split_once('/')
            .and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)));
        match parsed {
            Some((index, count)) if 1 <= index && index <= count => Ok(Shard { index, count }),
            _ => Err(format!("`{text}` is not I/N with 1 <= I <= N")),
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Runs `points` of `plan` on `jobs` threads (at least one) and returns
/// their rows in the order of `points`; `done` is called after each point
/// (from the worker threads).
pub fn run(plan: &Plan, points: &[Point], jobs: usize, done: &(dyn Fn() + Sync)) -> Vec<Row> {
    let never = Arc::new(AtomicBool::new(false));
    run_cancellable(plan, points, jobs, &never, done)
}

/// The error of a point that did not start because its sweep was
/// cancelled.
pub const NOT_RUN: &str = "not run: the sweep was stopped at its limit";

/// Whether `row` is a point stopped or skipped by a cancellation
/// ([`run_cancellable`]).
pub fn was_cancelled(row: &Row) -> bool {
    row.error
        .as_deref()
        .is_some_and(|e| e == NOT_RUN || e.contains(crate::sim::cancel::MARK))
}

/// [`run`], stopped when `cancel` is raised: the running points' simulations
/// end with a cancellation error ([`crate::sim::cancel`]) and the points not
/// started become rows with [`NOT_RUN`].
pub fn run_cancellable(
    plan: &Plan,
    points: &[Point],
    jobs: usize,
    cancel: &Arc<AtomicBool>,
    done: &(dyn Fn() + Sync),
) -> Vec<Row> {
    let next = AtomicUsize::new(0);
    let rows: Mutex<Vec<Option<Row>>> = Mutex::new(vec![None; points.len()]);
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, points.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(point) = points.get(i) else { break };
                    let row = if cancel.load(Ordering::Relaxed) {
                        let not_run = Err(NOT_RUN.to_owned());
                        Row::new(plan.workload.name, point, plan.verify_data, not_run)
                    } else {
                        crate::sim::cancel::with_cancel(cancel.clone(), || plan.run_point(point))
                    };
                    rows.lock().expect("no worker panics holding the lock")[i] = Some(row);
                    done();
                }
            });
        }
    });
    rows.into_inner()
        .expect("no worker panics holding the lock")
        .into_iter()
        .map(|row| row.expect("every point ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads;

    fn variant() -> Variant {
        Variant {
            fields: Vec::new(),
            topology: TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap(),
            ccl: CclConfig::load(&CclConfig::default_source(), &[]).unwrap(),
        }
    }

    fn axis(name: &str, values: &[&str]) -> Axis {
        Axis {
            name: name.to_owned(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn sizes_follow_nccl_tests() {
        let got = sizes(ByteSize(1024), ByteSize(1 << 20), 4).unwrap();
        let want: Vec<_> = (0..6).map(|i| ByteSize(1024 << (2 * i))).collect();
        assert_eq!(got, want);
        assert_eq!(sizes(ByteSize(8), ByteSize(100), 2).unwrap().len(), 4);
        assert!(sizes(ByteSize(0), ByteSize(8), 2).is_err());
        assert!(sizes(ByteSize(8), ByteSize(4), 2).is_err());
        assert!(sizes(ByteSize(8), ByteSize(64), 1).is_err());
    }

    #[test]
    fn points_nest_in_declaration_order_and_shards_partition_them() {
        let ccl = workloads::find("ccl_allreduce").unwrap();
        let axes = vec![
            axis("size", &["1K", "4K", "16K"]),
            axis("algorithm", &["a", "b"]),
        ];
        let plan = Plan::new(ccl, vec![variant()], axes, false).unwrap();
        let points = plan.points();
        let fields: Vec<_> = points
            .iter()
            .map(|p| format!("{}:{}", p.fields[0].1, p.fields[1].1))
            .collect();
        assert_eq!(fields, ["a:1K", "a:4K", "a:16K", "b:1K", "b:4K", "b:16K"]);
        let (one, two): (Vec<_>, Vec<_>) = (
            Shard::from_str("1/2").unwrap().select(points.clone()),
            Shard::from_str("2/2").unwrap().select(points.clone()),
        );
        let mut union: Vec<_> = one.iter().chain(&two).map(|p| p.index).collect();
        union.sort();
        assert_eq!(union, (0..6).collect::<Vec<_>>());
        assert_eq!(one.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 2, 4]);
        for bad in ["0/2", "3/2", "1", "a/b"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_undeclared_axis_is_a_usage_error() {
        let va = workloads::find("va_offset_verify").unwrap();
        let error = Plan::new(va, vec![variant()], vec![axis("size", &["1K"])], false).unwrap_err();
        assert!(error.is_usage(), "{error}");
    }

    #[test]
    fn threads_give_the_rows_of_one_thread_in_the_same_order() {
        let ccl = workloads::find("ccl_allreduce").unwrap();
        let axes = vec![axis("size", &["1K", "101", "2K"])]; // 101 B: half an f16 element over
        let plan = Plan::new(ccl, vec![variant()], axes, false).unwrap();
        let points = plan.points();
        let serial = run(&plan, &points, 1, &|| {});
        let parallel = run(&plan, &points, 3, &|| {});
        assert_eq!(serial, parallel);
        assert!(serial[1].error.as_deref().unwrap().contains("--size 101"));
        assert!(serial[0].error.is_none() && serial[2].error.is_none());
    }
}
