//! `kernbench calibrate` (ADR-0085): fit configuration quantities so that
//! a collective workload's simulated times match a measured log.
//!
//! The log is read as `report --reference` reads it ([`super::reference`]);
//! [`check_log`] refuses, before anything runs, a log of another
//! collective or data type than the workload's, and one with fewer sizes
//! than keys to fit. [`resolve`] turns `--fit KEY[=LOW..HIGH]` into
//! [`FitKey`]s: the key's current value must be a quantity with a unit (a
//! bandwidth, a duration, a size or a frequency); a count, a fraction or
//! a word is refused, and so is a key the configuration does not hold.
//!
//! The error of a set of values is the mean squared natural log of
//! simulated over measured time over the log's sizes (a 10 % miss costs
//! the same at 4 KiB as at 64 MiB). [`Problem::fit`] minimises it with a
//! Nelder–Mead search in the keys' log space, each key scaled to its
//! bounds (default: 100× either side of its configured value) and kept
//! inside them, from the configured values, until the simplex is smaller
//! than 10⁻⁵ of the log range or the evaluations run out. Values are
//! whole base units (B/s, ps, B, Hz), as the configuration holds them, and
//! a value evaluated once is remembered, so the search is deterministic:
//! the same log and configuration give the same fit. Every evaluation is
//! one run per size, spread over `jobs` threads ([`super::sweep::run`]).
//! Then the sensitivity: the error with each fitted value 10 % lower and
//! higher.
//!
//! Knows the configuration mechanics, the sweep and the reference reader;
//! nothing of the CLI or of what a key means.

use std::collections::BTreeMap;

/// The file of a calibration in a result folder (`calibrate --report`).
pub const FILE: &str = "calibration.json";
use std::fmt::Write as _;

use super::reference::{Measured, Reference};
use super::sweep::{Axis, Plan, Variant};
use super::vary::Base;
use crate::config::units::{Bandwidth, Frequency, Size, parse_duration};
use crate::config::{Document, Overrides};
use crate::sim::SimDuration;
use crate::workloads::Workload;

/// What a fitted key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Bytes per second.
    Bandwidth,
    /// Picoseconds.
    Duration,
    /// Bytes.
    Size,
    /// Hertz.
    Frequency,
}

impl Kind {
    /// The kind and base-unit value of `text`, if it is a quantity.
    pub fn of(text: &str) -> Option<(Kind, f64)> {
        [Kind::Bandwidth, Kind::Duration, Kind::Size, Kind::Frequency]
            .into_iter()
            .find_map(|kind| kind.parse(text).ok().map(|v| (kind, v)))
    }

    /// `text` in this kind's base unit.
    pub fn parse(self, text: &str) -> Result<f64, String> {
        let value = match self {
            Kind::Bandwidth => text.parse::<Bandwidth>().map(|b| b.bytes_per_sec()),
            Kind::Duration => parse_duration(text).map(SimDuration::as_ps),
            Kind::Size => text.parse::<Size>().map(Size::bytes),
            Kind::Frequency => text.parse::<Frequency>().map(Frequency::hz),
        };
        value.map(|v| v as f64).map_err(|e| e.to_string())
    }

    /// `value` (base units) rounded to a whole base unit, at least one,
    /// written as the configuration takes it (`37.5 GB/s`, `1.3 us`).
    pub fn format(self, value: f64) -> String {
        let whole = value.round().clamp(1.0, u64::MAX as f64) as u64;
        match self {
            Kind::Bandwidth => Bandwidth::from_bytes_per_sec(whole).map(|b| b.to_string()),
            Kind::Duration => Some(SimDuration::from_ps(whole).to_string()),
            Kind::Size => Some(Size::from_bytes(whole).to_string()),
            Kind::Frequency => Frequency::from_hz(whole).map(|f| f.to_string()),
        }
        .unwrap_or_else(|| whole.to_string())
    }
}

/// One key to fit.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FitKey {
    /// The key path as `--set` takes it.
    pub key: String,
    /// What it holds.
    pub kind: Kind,
    /// Its configured value, base units.
    pub start: f64,
    /// The search's bounds, base units.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

/// Why calibration cannot start or finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrateError {
    /// A flag, key or log that cannot be used (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A simulation that failed (exit 1).
    #[error("calibrate: {0}")]
    Run(String),
}

/// A key to fit and its optional bounds (`KEY=LOW..HIGH`), as written.
pub type FitSpec = (String, Option<(String, String)>);

/// `--fit` arguments (each `KEY` or `KEY=LOW..HIGH`, comma-separated) as
/// keys with their optional bounds' text.
pub fn parse_fit(args: &[String]) -> Result<Vec<FitSpec>, String> {
    let mut keys: Vec<FitSpec> = Vec::new();
    for item in args.iter().flat_map(|a| a.split(',')) {
        let item = item.trim();
        let (key, bounds) = match item.split_once('=') {
            None => (item, None),
            Some((key, range)) => {
                let (low, high) = range.split_once("..").ok_or_else(|| {
                    format!("--fit {item}: expected KEY or KEY=LOW..HIGH, e.g. 'system.inter_sip.bandwidth=10 GB/s..400 GB/s'")
                })?;
                (
                    key.trim(),
                    Some((low.trim().to_owned(), high.trim().to_owned())),
                )
            }
        };
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(format!(
                "--fit {item}: `{key}` is not a key path like system.inter_sip.bandwidth"
            ));
        }
        if keys.iter().any(|(k, _)| k == key) {
            return Err(format!("--fit {key}: given twice"));
        }
        keys.push((key.to_owned(), bounds));
    }
    if keys.is_empty() {
        return Err("--fit: no key given (e.g. --fit system.inter_sip.bandwidth)".to_owned());
    }
    Ok(keys)
}

/// The keys of `specs` on `base`'s configuration (see the module docs).
pub fn resolve(base: &Base<'_>, specs: &[FitSpec]) -> Result<Vec<FitKey>, CalibrateError> {
    let usage = CalibrateError::Usage;
    let overrides = Overrides::parse(base.sets).map_err(|e| usage(e.to_string()))?;
    let topology = Document::load(base.topology, &overrides.topology);
    let ccl = Document::load(base.ccl, &overrides.ccl);
    let (topology, ccl) = (
        topology.map_err(|e| usage(e.to_string()))?,
        ccl.map_err(|e| usage(e.to_string()))?,
    );
    specs
        .iter()
        .map(|(key, bounds)| {
            let text = match key.strip_prefix("ccl.") {
                Some(path) => ccl.scalar_at(path),
                None => topology.scalar_at(key),
            }
            .ok_or_else(|| {
                usage(format!(
                    "--fit {key}: the configuration has no value at this key (fit a quantity \
                     the machine or ccl.yaml holds, e.g. system.inter_sip.bandwidth)"
                ))
            })?;
            let (kind, start) = Kind::of(text).ok_or_else(|| {
                usage(format!(
                    "--fit {key}: `{text}` is not a quantity (a bandwidth, duration, size or \
                     frequency with its unit); counts, fractions and names cannot be fitted"
                ))
            })?;
            let (low, high) = match bounds {
                None => (start / 100.0, start * 100.0),
                Some((low, high)) => {
                    let bound = |t: &str| {
                        kind.parse(t)
                            .map_err(|e| usage(format!("--fit {key}: bound {e}")))
                    };
                    (bound(low)?, bound(high)?)
                }
            };
            if !(low > 0.0 && low < high) {
                return Err(usage(format!(
                    "--fit {key}: the bounds {}..{} are not a range LOW < HIGH",
                    kind.format(low),
                    kind.format(high)
                )));
            }
            Ok(FitKey {
                key: key.clone(),
                kind,
                start: start.clamp(low, high),
                low,
                high,
            })
        })
        .collect()
}

/// Refuses a log that does not measure what `workload` runs: another
/// collective, another data type than `dtype` (`--dtype`; without it the
/// log's is taken, if the workloads run it), or fewer sizes than `keys`.
pub fn check_log(
    reference: &Reference,
    workload: &Workload,
    dtype: Option<&str>,
    keys: usize,
) -> Result<(), CalibrateError> {
    let usage = |m: String| Err(CalibrateError::Usage(m));
    if !workload.params().iter().any(|p| p.name == "size") {
        return usage(format!(
            "--bench {}: calibrate fits a collective workload over the log's sizes; this one takes no --size",
            workload.name
        ));
    }
    if let Some(collective) = &reference.collective
        && collective != workload.name
    {
        return usage(format!(
            "the log measured {collective} but --bench is {}: calibrate against a log of the same collective",
            workload.name
        ));
    }
    match (&reference.dtype, dtype) {
        (Some(theirs), Some(ours)) if theirs != ours => {
            return usage(format!(
                "the log measured {theirs} but --dtype is {ours}: pass --dtype {theirs} or leave it out"
            ));
        }
        (Some(theirs), None) if !["f16", "bf16", "f32"].contains(&theirs.as_str()) => {
            return usage(format!(
                "the log measured {theirs}, a data type the collective workloads do not run (f16, bf16, f32)"
            ));
        }
        _ => {}
    }
    let sizes = distinct_sizes(&reference.measured).len();
    if sizes < keys {
        return usage(format!(
            "the log has {sizes} size(s) for {keys} key(s) to fit: at least as many sizes as keys are needed"
        ));
    }
    Ok(())
}

/// The log's sizes, the first measurement of each, in size order.
pub fn distinct_sizes(measured: &[Measured]) -> Vec<Measured> {
    let mut out: Vec<Measured> = Vec::new();
    for m in measured {
        if !out.iter().any(|o| o.bytes == m.bytes) {
            out.push(m.clone());
        }
    }
    out.sort_by_key(|m| m.bytes);
    out
}

/// What to fit, against what, how.
pub struct Problem<'a> {
    /// The configuration (files, `--set`).
    pub base: Base<'a>,
    /// The workload.
    pub workload: &'static Workload,
    /// Its fixed parameters (`dtype`, `algorithm`, ...; not `size`).
    pub params: BTreeMap<String, String>,
    /// The log's sizes ([`distinct_sizes`]).
    pub measured: Vec<Measured>,
    /// The keys.
    pub keys: Vec<FitKey>,
    /// Threads for the runs.
    pub jobs: usize,
    /// The most evaluations the search makes.
    pub max_evaluations: usize,
}

/// A finished fit.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fit {
    /// The keys.
    pub keys: Vec<FitKey>,
    /// Their fitted values, base units.
    pub fitted: Vec<f64>,
    /// The log's sizes (bytes per rank).
    pub bytes: Vec<u64>,
    /// Measured times, µs.
    pub measured_us: Vec<f64>,
    /// Simulated times with the configured values, µs.
    pub before_us: Vec<f64>,
    /// Simulated times with the fitted values, µs.
    pub after_us: Vec<f64>,
    /// The error before and after.
    pub error_before: f64,
    /// After.
    pub error_after: f64,
    /// Per key, the error with its value 10 % lower and 10 % higher.
    pub sensitivity: Vec<(f64, f64)>,
    /// Evaluations of the error the search made.
    pub evaluations: usize,
}

/// Times of one set of values, µs per size, or why they could not run.
type Times = Result<Vec<f64>, String>;

impl Problem<'_> {
    /// The values of `values` as `--set` overrides.
    fn overrides(&self, values: &[f64]) -> Vec<(String, String)> {
        self.keys
            .iter()
            .zip(values)
            .map(|(k, &v)| (k.key.clone(), k.kind.format(v)))
            .collect()
    }

    /// Runs every size for each of `sets` (in parallel over `jobs`).
    pub fn times(&self, sets: &[Vec<f64>]) -> Vec<Times> {
        let mut variants = Vec::new();
        let mut loaded: Vec<Result<usize, String>> = Vec::new();
        for values in sets {
            let extra = self.overrides(values);
            match self.base.load(&extra) {
                Ok((topology, ccl)) => {
                    loaded.push(Ok(variants.len()));
                    let fields = vec![("set".to_owned(), variants.len().to_string())];
                    variants.push(Variant {
                        fields,
                        topology,
                        ccl,
                    });
                }
                Err(e) => loaded.push(Err(e)),
            }
        }
        let rows = if variants.is_empty() {
            Vec::new()
        } else {
            self.run(variants)
        };
        let per = self.measured.len();
        loaded
            .into_iter()
            .map(|l| {
                let v = l?;
                rows[v * per..(v + 1) * per]
                    .iter()
                    .zip(&self.measured)
                    .map(
                        |(row, m)| match (&row.error, super::figures::time_us(row)) {
                            (Some(e), _) => Err(format!("{} B: {e}", m.bytes)),
                            (None, Some(t)) => Ok(t),
                            (None, None) => Err(format!("{} B: the run reports no time", m.bytes)),
                        },
                    )
                    .collect()
            })
            .collect()
    }

    /// The rows of every size of every variant, variant-major.
    fn run(&self, variants: Vec<Variant>) -> Vec<super::results::Row> {
        let mut axes: Vec<Axis> = self
            .params
            .iter()
            .map(|(name, value)| Axis {
                name: name.clone(),
                values: vec![value.clone()],
            })
            .collect();
        axes.push(Axis {
            name: "size".to_owned(),
            values: self.measured.iter().map(|m| m.bytes.to_string()).collect(),
        });
        match Plan::new(self.workload, variants, axes, false) {
            Ok(plan) => {
                let points = plan.points();
                super::sweep::run(&plan, &points, self.jobs, &|| {})
            }
            Err(_) => Vec::new(),
        }
    }

    /// The rows of every size with `overrides` (the fitted values, for a
    /// result folder) and the machine's summary.
    pub fn rows(
        &self,
        overrides: &[(String, String)],
    ) -> Result<(Vec<super::results::Row>, String), String> {
        let (topology, ccl) = self.base.load(overrides)?;
        let machine = topology.summary().to_string();
        let variant = Variant {
            fields: Vec::new(),
            topology,
            ccl,
        };
        Ok((self.run(vec![variant]), machine))
    }

    /// The error of `times` against the log (see the module docs).
    pub fn error(&self, times: &Times) -> f64 {
        match times {
            Ok(times) if times.len() == self.measured.len() => {
                let sum: f64 = times
                    .iter()
                    .zip(&self.measured)
                    .map(|(t, m)| (t / m.time_us).ln().powi(2))
                    .sum();
                sum / times.len() as f64
            }
            _ => f64::INFINITY,
        }
    }
}

/// `x` in `[0, 1]` per key (its place in the log of its bounds) and back.
fn to_unit(key: &FitKey, value: f64) -> f64 {
    (value.ln() - key.low.ln()) / (key.high.ln() - key.low.ln())
}

fn from_unit(key: &FitKey, y: f64) -> f64 {
    (key.low.ln() + y.clamp(0.0, 1.0) * (key.high.ln() - key.low.ln())).exp()
}

/// The search's memory: every evaluated set of values (as the
/// configuration text it becomes) and its error.
struct Evaluator<'p, 'a> {
    problem: &'p Problem<'a>,
    seen: BTreeMap<Vec<String>, f64>,
    evaluations: usize,
    progress: &'p mut dyn FnMut(&str),
}

impl Evaluator<'_, '_> {
    /// The error at unit point `y`.
    fn at(&mut self, y: &[f64]) -> f64 {
        let values: Vec<f64> = self
            .problem
            .keys
            .iter()
            .zip(y)
            .map(|(k, &y)| from_unit(k, y))
            .collect();
        let texts: Vec<String> = self
            .problem
            .overrides(&values)
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        if let Some(&error) = self.seen.get(&texts) {
            return error;
        }
        let times = self.problem.times(std::slice::from_ref(&values));
        let error = times
            .first()
            .map_or(f64::INFINITY, |t| self.problem.error(t));
        self.evaluations += 1;
        let shown: Vec<String> = self
            .problem
            .keys
            .iter()
            .zip(&texts)
            .map(|(k, v)| format!("{}={v}", k.key))
            .collect();
        (self.progress)(&format!(
            "calibrate: evaluation {}: error {error:.3e} at {}",
            self.evaluations,
            shown.join(" ")
        ));
        self.seen.insert(texts, error);
        error
    }
}

/// The simplex's size below which the search stops (unit coordinates).
const TOLERANCE: f64 = 1e-5;

/// Nelder–Mead over `[0, 1]^k` from `start` (see the module docs).
fn nelder_mead(eval: &mut Evaluator<'_, '_>, start: Vec<f64>, max: usize) -> Vec<f64> {
    let k = start.len();
    let mut simplex: Vec<(Vec<f64>, f64)> = Vec::with_capacity(k + 1);
    let first = eval.at(&start);
    simplex.push((start.clone(), first));
    for i in 0..k {
        let mut y = start.clone();
        y[i] = if y[i] + 0.05 <= 1.0 {
            y[i] + 0.05
        } else {
            y[i] - 0.05
        };
        let f = eval.at(&y);
        simplex.push((y, f));
    }
    while eval.evaluations < max {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let size = simplex[1..]
            .iter()
            .flat_map(|(y, _)| y.iter().zip(&simplex[0].0).map(|(a, b)| (a - b).abs()))
            .fold(0.0, f64::max);
        if size < TOLERANCE {
            break;
        }
        let worst = simplex[k].clone();
        let centroid: Vec<f64> = (0..k)
            .map(|d| simplex[..k].iter().map(|(y, _)| y[d]).sum::<f64>() / k as f64)
            .collect();
        let toward = |t: f64| -> Vec<f64> {
            centroid
                .iter()
                .zip(&worst.0)
                .map(|(c, w)| (c + t * (c - w)).clamp(0.0, 1.0))
                .collect()
        };
        let reflected = toward(1.0);
        let fr = eval.at(&reflected);
        if fr < simplex[0].1 {
            let expanded = toward(2.0);
            let fe = eval.at(&expanded);
            simplex[k] = if fe < fr {
                (expanded, fe)
            } else {
                (reflected, fr)
            };
        } else if fr < simplex[k - 1].1 {
            simplex[k] = (reflected, fr);
        } else {
            let contracted = if fr < worst.1 {
                toward(0.5)
            } else {
                toward(-0.5)
            };
            let fc = eval.at(&contracted);
            if fc < worst.1.min(fr) {
                simplex[k] = (contracted, fc);
            } else {
                shrink(eval, &mut simplex);
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0).0
}

/// Every vertex but the best halfway towards it.
fn shrink(eval: &mut Evaluator<'_, '_>, simplex: &mut [(Vec<f64>, f64)]) {
    let best = simplex[0].0.clone();
    for vertex in simplex.iter_mut().skip(1) {
        let y: Vec<f64> = vertex
            .0
            .iter()
            .zip(&best)
            .map(|(v, b)| b + 0.5 * (v - b))
            .collect();
        let f = eval.at(&y);
        *vertex = (y, f);
    }
}

impl Problem<'_> {
    /// Fits the keys (see the module docs); `progress` gets one line per
    /// evaluation.
    pub fn fit(&self, progress: &mut dyn FnMut(&str)) -> Result<Fit, CalibrateError> {
        let start: Vec<f64> = self.keys.iter().map(|k| k.start).collect();
        let before = self.times(std::slice::from_ref(&start)).remove(0);
        let before =
            before.map_err(|e| CalibrateError::Run(format!("the configured machine: {e}")))?;
        let mut eval = Evaluator {
            problem: self,
            seen: BTreeMap::new(),
            evaluations: 0,
            progress,
        };
        let unit: Vec<f64> = self.keys.iter().map(|k| to_unit(k, k.start)).collect();
        let best = nelder_mead(
            &mut eval,
            unit,
            self.max_evaluations.max(self.keys.len() + 1),
        );
        let evaluations = eval.evaluations;
        let fitted: Vec<f64> = self
            .keys
            .iter()
            .zip(&best)
            .map(|(k, &y)| {
                k.kind
                    .parse(&k.kind.format(from_unit(k, y)))
                    .unwrap_or(k.start)
            })
            .collect();
        let mut sets = vec![fitted.clone()];
        for i in 0..self.keys.len() {
            for scale in [0.9, 1.1] {
                let mut values = fitted.clone();
                values[i] *= scale;
                sets.push(values);
            }
        }
        let mut runs = self.times(&sets).into_iter();
        let after = runs.next().unwrap_or_else(|| Err("not run".to_owned()));
        let error_after = self.error(&after);
        let after = after.map_err(|e| CalibrateError::Run(format!("the fitted machine: {e}")))?;
        let errors: Vec<f64> = runs.map(|t| self.error(&t)).collect();
        let sensitivity = errors.chunks(2).map(|p| (p[0], p[1])).collect();
        Ok(Fit {
            keys: self.keys.clone(),
            fitted,
            bytes: self.measured.iter().map(|m| m.bytes).collect(),
            measured_us: self.measured.iter().map(|m| m.time_us).collect(),
            error_before: self.error(&Ok(before.clone())),
            before_us: before,
            after_us: after,
            error_after,
            sensitivity,
            evaluations,
        })
    }
}

impl Fit {
    /// The fitted values as a YAML overlay (`--set @FILE`): each key's
    /// path as nested mappings, `ccl.` keys under `ccl:`.
    pub fn overlay(&self, header: &str) -> String {
        let mut out = String::new();
        for line in header.lines() {
            let _ = writeln!(out, "# {line}");
        }
        let mut open: Vec<&str> = Vec::new();
        // Sorted by path, so that every section is written once.
        let mut order: Vec<(&FitKey, f64)> =
            self.keys.iter().zip(self.fitted.iter().copied()).collect();
        order.sort_by(|a, b| a.0.key.cmp(&b.0.key));
        for (key, value) in order {
            let path: Vec<&str> = key.key.split('.').collect();
            let (leaf, sections) = path.split_last().unwrap_or((&"", &[]));
            let common = open
                .iter()
                .zip(sections)
                .take_while(|(a, b)| a == b)
                .count();
            open.truncate(common);
            for (depth, section) in sections.iter().enumerate().skip(common) {
                let _ = writeln!(out, "{}{section}:", "  ".repeat(depth));
                open.push(section);
            }
            let indent = "  ".repeat(sections.len());
            let _ = writeln!(out, "{indent}{leaf}: \"{}\"", key.kind.format(value));
        }
        out
    }

    /// The fitted values, sensitivity and per-size table as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "fitted {} key(s) over {} size(s) in {} evaluation(s): error (mean squared log ratio) {:.3e} -> {:.3e}",
            self.keys.len(),
            self.bytes.len(),
            self.evaluations,
            self.error_before,
            self.error_after
        );
        let _ = writeln!(
            out,
            "  {:<34} {:>16} {:>16} {:>12} {:>12}",
            "key", "configured", "fitted", "error -10%", "error +10%"
        );
        for ((key, &value), (down, up)) in self.keys.iter().zip(&self.fitted).zip(&self.sensitivity)
        {
            let _ = writeln!(
                out,
                "  {:<34} {:>16} {:>16} {:>12.3e} {:>12.3e}",
                key.key,
                key.kind.format(key.start),
                key.kind.format(value),
                down,
                up
            );
        }
        out.push_str(&self.table());
        out
    }

    /// Percent errors of `simulated` against the log.
    pub fn errors_pct(&self, simulated: &[f64]) -> Vec<f64> {
        simulated
            .iter()
            .zip(&self.measured_us)
            .map(|(s, m)| (s - m) / m * 100.0)
            .collect()
    }

    /// The per-size table: measured, before, after, errors.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {:>10} {:>13} {:>13} {:>13} {:>11} {:>11}",
            "size(B)", "measured(us)", "before(us)", "after(us)", "before(%)", "after(%)"
        );
        let (before, after) = (
            self.errors_pct(&self.before_us),
            self.errors_pct(&self.after_us),
        );
        for i in 0..self.bytes.len() {
            let _ = writeln!(
                out,
                "  {:>10} {:>13.3} {:>13.3} {:>13.3} {:>+11.2} {:>+11.2}",
                self.bytes[i],
                self.measured_us[i],
                self.before_us[i],
                self.after_us[i],
                before[i],
                after[i]
            );
        }
        out
    }
}

/// The calibration's figures: measured, simulated (configured) and
/// fitted time per size on one chart, and each size's error before and
/// after.
pub fn figures(fit: &Fit) -> Vec<super::figures::Svg> {
    use super::figures::{Axes, Curve, Style, Unit, chart};
    let curve = |label: &str, ys: &[f64], style, color| Curve {
        label: label.to_owned(),
        points: fit
            .bytes
            .iter()
            .map(|&b| b as f64)
            .zip(ys.iter().copied())
            .collect(),
        style,
        color,
    };
    let times = chart(
        "calibration.svg",
        Axes {
            title: "Calibration: measured, simulated and fitted time",
            x: "bytes per rank",
            y: "time",
            log_x: true,
            log_y: true,
            x_unit: Unit::Bytes,
            y_unit: Unit::TimeUs,
            x_names: &[],
        },
        vec![
            curve("measured", &fit.measured_us, Style::Line, 0),
            curve("simulated (configured)", &fit.before_us, Style::Dashed, 1),
            curve("simulated (fitted)", &fit.after_us, Style::Line, 2),
        ],
    );
    let errors = chart(
        "calibration_error.svg",
        Axes {
            title: "Calibration: error per size (simulated vs measured, %)",
            x: "bytes per rank",
            y: "error (%)",
            log_x: true,
            log_y: false,
            x_unit: Unit::Bytes,
            y_unit: Unit::Plain,
            x_names: &[],
        },
        vec![
            curve(
                "configured",
                &fit.errors_pct(&fit.before_us),
                Style::Dashed,
                1,
            ),
            curve("fitted", &fit.errors_pct(&fit.after_us), Style::Line, 2),
        ],
    );
    times.into_iter().chain(errors).collect()
}

/// A calibration read back from a result folder (`report`): its figures
/// and its per-size table, `None` when the folder has none.
pub fn load(dir: &std::path::Path) -> Result<Option<Fit>, String> {
    let path = dir.join(FILE);
    if !path.exists() {
        return Ok(None);
    }
    let text = crate::config::read_capped(&path, 16 << 20, "a calibration (calibration.json)")
        .map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_told_from_counts_and_round_trip_in_base_units() {
        assert_eq!(Kind::of("100 GB/s"), Some((Kind::Bandwidth, 1e11)));
        assert_eq!(Kind::of("500 ns"), Some((Kind::Duration, 5e5)));
        assert_eq!(Kind::of("256 B"), Some((Kind::Size, 256.0)));
        assert_eq!(Kind::of("1 GHz"), Some((Kind::Frequency, 1e9)));
        assert_eq!(Kind::of("8"), None);
        assert_eq!(Kind::of("0.8"), None);
        assert_eq!(Kind::of("ring_1d"), None);
        assert_eq!(
            Kind::Bandwidth.format(37_512_345_678.4),
            "37.512345678 GB/s"
        );
        assert_eq!(Kind::Duration.format(1_300_000.0), "1.3 us");
        let text = Kind::Duration.format(1_234_567.0);
        assert_eq!(Kind::Duration.parse(&text), Ok(1_234_567.0));
    }

    #[test]
    fn fit_flags_take_keys_bounds_and_refuse_repeats() {
        let args = ["a.b,c.d=1 ns..2 ns".to_owned()];
        let got = parse_fit(&args).unwrap();
        assert_eq!(got[0], ("a.b".to_owned(), None));
        assert_eq!(
            got[1],
            (
                "c.d".to_owned(),
                Some(("1 ns".to_owned(), "2 ns".to_owned()))
            )
        );
        assert!(
            parse_fit(&["a.b,a.b".to_owned()])
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            parse_fit(&["a.b=1 ns".to_owned()])
                .unwrap_err()
                .contains("LOW..HIGH")
        );
        assert!(parse_fit(&["a..b".to_owned()]).is_err());
    }

    #[test]
    fn unit_coordinates_span_the_bounds_in_log_space() {
        let key = FitKey {
            key: "k".to_owned(),
            kind: Kind::Bandwidth,
            start: 1e10,
            low: 1e9,
            high: 1e11,
        };
        assert!((to_unit(&key, 1e10) - 0.5).abs() < 1e-12);
        assert!((from_unit(&key, 0.5) - 1e10).abs() < 1e-2);
        assert!((from_unit(&key, 2.0) - 1e11).abs() < 1.0);
    }

    #[test]
    fn the_overlay_nests_the_keys_and_reads_back_as_sets() {
        let key = |k: &str, kind| FitKey {
            key: k.to_owned(),
            kind,
            start: 1.0,
            low: 0.5,
            high: 2.0,
        };
        let fit = Fit {
            keys: vec![
                key("system.inter_sip.bandwidth", Kind::Bandwidth),
                key("system.inter_sip.latency", Kind::Duration),
                key("system.host_link.latency", Kind::Duration),
            ],
            fitted: vec![4e10, 1.3e6, 2e5],
            bytes: vec![],
            measured_us: vec![],
            before_us: vec![],
            after_us: vec![],
            error_before: 0.0,
            error_after: 0.0,
            sensitivity: vec![],
            evaluations: 0,
        };
        let text = fit.overlay("fitted");
        let document = Document::parse(&text, "o.yaml").unwrap();
        assert_eq!(
            document.as_sets(),
            [
                "system.host_link.latency=200 ns",
                "system.inter_sip.bandwidth=40 GB/s",
                "system.inter_sip.latency=1.3 us",
            ]
        );
    }
}
