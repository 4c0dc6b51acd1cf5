//! What a workload run produces: its checks and figures, readable as text
//! and as JSON (`kernbench run --json`).

use std::fmt;

use serde::ser::{SerializeMap, Serializer};

use crate::explain::Explanation;
use crate::sim::SimDuration;

/// One verdict of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// What is checked, e.g. `c_matches_reference`.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// The figures behind the verdict.
    pub detail: String,
}

impl Check {
    /// A check named `name`.
    pub fn new(name: &str, passed: bool, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_owned(),
            passed,
            detail: detail.into(),
        }
    }
}

/// The value of a figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A count, a size or a time in ps.
    Int(u64),
    /// A rate or a ratio.
    Real(f64),
    /// A word, e.g. a dtype or a PE's name.
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Real(x) => write!(f, "{x:.4}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

impl Value {
    /// The value in full (reals in their shortest exact form), for CSV.
    pub fn to_string_exact(&self) -> String {
        match self {
            Value::Real(x) => x.to_string(),
            other => other.to_string(),
        }
    }
}

/// A named figure of a run; the name carries its unit (`kernel_ps`,
/// `achieved_tflops`).
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Name with unit suffix.
    pub name: &'static str,
    /// Value.
    pub value: Value,
}

impl Figure {
    /// A count or size.
    pub fn int(name: &'static str, value: u64) -> Figure {
        Figure {
            name,
            value: Value::Int(value),
        }
    }

    /// A rate or ratio.
    pub fn real(name: &'static str, value: f64) -> Figure {
        Figure {
            name,
            value: Value::Real(value),
        }
    }

    /// A word.
    pub fn text(name: &'static str, value: impl Into<String>) -> Figure {
        Figure {
            name,
            value: Value::Text(value.into()),
        }
    }

    /// A duration, in ps.
    pub fn time(name: &'static str, value: SimDuration) -> Figure {
        Figure::int(name, value.as_ps())
    }
}

/// What a workload's host code returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Its checks (data checks only when data is on).
    pub checks: Vec<Check>,
    /// Its figures, in the order to show them.
    pub figures: Vec<Figure>,
}

/// One finished run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    /// The workload.
    pub name: &'static str,
    /// Whether data was kept (`--verify-data`).
    pub verify_data: bool,
    /// Virtual time when the run ended, in ps.
    pub simulated_ps: u64,
    /// Checks that held.
    pub checks_passed: usize,
    /// Checks that failed.
    pub checks_failed: usize,
    /// Every check, the op-log replay last.
    pub checks: Vec<Check>,
    /// The workload's figures, as a JSON object in order.
    #[serde(serialize_with = "figures_as_map")]
    pub figures: Vec<Figure>,
    /// Why the measured interval took its time (`--explain`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explanation>,
}

impl Report {
    /// A report of `outcome` for workload `name`.
    pub fn new(
        name: &'static str,
        verify_data: bool,
        simulated: SimDuration,
        outcome: Outcome,
    ) -> Report {
        let passed = outcome.checks.iter().filter(|c| c.passed).count();
        Report {
            name,
            verify_data,
            simulated_ps: simulated.as_ps(),
            checks_passed: passed,
            checks_failed: outcome.checks.len() - passed,
            checks: outcome.checks,
            figures: outcome.figures,
            explain: None,
        }
    }
}

/// The figures that time a collective.
const CALL_TIMES: [&str; 10] = [
    "allreduce_ps",
    "allgather_ps",
    "reducescatter_ps",
    "broadcast_ps",
    "reduce_ps",
    "alltoall_ps",
    "sendrecv_ps",
    "gather_ps",
    "scatter_ps",
    "custom_ps",
];

/// What a figure covers, for the figures whose name does not say: the
/// collectives' call times and their model. In a trace's summary
/// (`traced`: the report has `et_ps`) a collective's time is the sum over
/// its calls, not one measured call.
fn figure_note(name: &str, traced: bool) -> Option<&'static str> {
    match name {
        "model_ps" => Some("ps, the algorithm's α-β model: a lower bound of the call"),
        "call_start_ps" => Some(
            "ps of simulated time, when the measured call starts: where a window of \
             faults.down falls inside it",
        ),
        _ if !CALL_TIMES.contains(&name) => None,
        _ if traced => Some(
            "ps, summed over its calls, each from its group's first start to its last end: \
             calls that overlap each count",
        ),
        _ => Some(
            "ps, the measured call: from the barrier that releases every rank before it \
             to the barrier the last rank reaches after it",
        ),
    }
}

fn figures_as_map<S: Serializer>(figures: &[Figure], serializer: S) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(figures.len()))?;
    for figure in figures {
        map.serialize_entry(figure.name, &figure.value)?;
    }
    map.end()
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let data = if self.verify_data { "on" } else { "off" };
        writeln!(f, "{} (data {data})", self.name)?;
        let simulated = SimDuration::from_ps(self.simulated_ps);
        writeln!(
            f,
            "  {:<22} {simulated} (the whole run: setup, data in, the measured call, data out)",
            "simulated time"
        )?;
        let traced = self.figures.iter().any(|f| f.name == "et_ps");
        for figure in &self.figures {
            match figure_note(figure.name, traced) {
                Some(note) => writeln!(f, "  {:<22} {} ({note})", figure.name, figure.value)?,
                None => writeln!(f, "  {:<22} {}", figure.name, figure.value)?,
            }
        }
        writeln!(
            f,
            "checks: {} passed, {} failed",
            self.checks_passed, self.checks_failed
        )?;
        for check in &self.checks {
            let verdict = if check.passed { "PASS" } else { "FAIL" };
            writeln!(f, "  {verdict} {}: {}", check.name, check.detail)?;
        }
        if let Some(explain) = &self.explain {
            write!(f, "{explain}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text line of `figure` in a report of `figures`.
    fn line(figures: Vec<Figure>, figure: &str) -> String {
        let outcome = Outcome {
            figures,
            ..Outcome::default()
        };
        let report = Report::new("w", false, SimDuration::ZERO, outcome);
        let text = report.to_string();
        let found = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(figure));
        found.unwrap().to_owned()
    }

    #[test]
    fn a_traces_collective_time_is_labelled_a_sum_and_a_calls_a_call() {
        let call = line(vec![Figure::int("allreduce_ps", 5)], "allreduce_ps");
        assert!(call.ends_with("(ps, the measured call: from the barrier that releases every rank before it to the barrier the last rank reaches after it)"), "{call}");
        let trace = vec![Figure::int("et_ps", 3), Figure::int("allreduce_ps", 5)];
        let summed = line(trace, "allreduce_ps");
        assert!(summed.contains("(ps, summed over its calls"), "{summed}");
        assert_eq!(
            line(vec![Figure::int("et_ps", 3)], "et_ps"),
            "  et_ps                  3"
        );
    }
}
