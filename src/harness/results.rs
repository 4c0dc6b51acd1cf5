//! The results of sweeps: one [`Row`] per run, gathered with the command
//! lines and machines that produced them into a [`ResultSet`], written as
//! JSON (read back by `kernbench report`) and CSV (one row per run, every
//! swept value and every figure a column).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::sweep::Point;
use crate::explain::Explanation;
use crate::workloads::{Report, Value};

/// Name → value pairs kept in their order (a JSON object on disk).
#[derive(Debug, Clone, PartialEq)]
pub struct Fields<V>(pub Vec<(String, V)>);

impl<V> Fields<V> {
    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

impl<V: Serialize> Serialize for Fields<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Fields<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for InOrder<V> {
            type Value = Fields<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<V>, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(InOrder(std::marker::PhantomData))
    }
}

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Its position in its sweep (before sharding).
    pub index: usize,
    /// The workload.
    pub workload: String,
    /// The swept values (`algorithm`, `size`, `fidelity`, ...).
    pub point: Fields<String>,
    /// Whether data was kept and checked.
    pub verify_data: bool,
    /// Why the run could not complete; `None` when it did.
    pub error: Option<String>,
    /// Virtual time at the end of the run, in ps.
    pub simulated_ps: Option<u64>,
    /// Checks that held.
    pub checks_passed: usize,
    /// Checks that failed.
    pub checks_failed: usize,
    /// The workload's figures.
    pub figures: Fields<Value>,
    /// Why the measured interval took its time (`--explain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explanation>,
}

impl Row {
    /// The row of `point`, from its report or its error.
    pub fn new(
        workload: &str,
        point: &Point,
        verify_data: bool,
        report: Result<Report, String>,
    ) -> Row {
        let mut row = Row {
            index: point.index,
            workload: workload.to_owned(),
            point: Fields(point.fields.clone()),
            verify_data,
            error: None,
            simulated_ps: None,
            checks_passed: 0,
            checks_failed: 0,
            figures: Fields(Vec::new()),
            explain: None,
        };
        match report {
            Ok(report) => {
                row.simulated_ps = Some(report.simulated_ps);
                row.checks_passed = report.checks_passed;
                row.checks_failed = report.checks_failed;
                row.explain = report.explain;
                row.figures = Fields(
                    report
                        .figures
                        .into_iter()
                        .map(|f| (f.name.to_owned(), f.value))
                        .collect(),
                );
            }
            Err(error) => row.error = Some(error),
        }
        row
    }

    /// A numeric figure (ints and reals alike).
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.figures.get(name)? {
            Value::Int(n) => Some(*n as f64),
            Value::Real(x) => Some(*x),
            Value::Text(_) => None,
        }
    }

    /// What identifies the run across result folders: its configuration
    /// flags (when any), workload, swept values and data mode.
    pub fn key(&self, config: &str) -> String {
        let point: Vec<_> = self
            .point
            .0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        let data = if self.verify_data { "on" } else { "off" };
        let run = format!("{} {} (data {data})", self.workload, point.join(" "));
        match config {
            "" => run,
            flags => format!("{flags} {run}"),
        }
    }
}

/// Where rows came from: the command line, its configuration and machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// The exact command line.
    pub command: String,
    /// The sweep it belongs to: the command without `--shard`, `--out` and
    /// `--jobs`, so the shards of one sweep share it.
    pub sweep: String,
    /// The configuration flags (`--topology`, `--ccl`, `--set`,
    /// `--fidelity`), which with a row's point identify a run.
    pub config: String,
    /// The machine summary (`kernbench topo`).
    pub machine: String,
    /// Its share of the sweep, `I/N`, if sharded.
    pub shard: Option<String>,
    /// The configuration keys it varied (`sweep --vary`), which are
    /// swept values of its rows: what `report`'s sensitivity table is of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub varied: Vec<String>,
}

/// Rows and their sources: what `sweep` and `report` write as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultSet {
    /// The commands that produced the rows.
    pub sources: Vec<Source>,
    /// The rows, each with the index of its source.
    pub rows: Vec<SourcedRow>,
}

/// A row and the index of its source in [`ResultSet::sources`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourcedRow {
    /// The source's index.
    pub source: usize,
    /// The row.
    #[serde(flatten)]
    pub row: Row,
}

impl ResultSet {
    /// The rows of one command.
    pub fn new(source: Source, rows: Vec<Row>) -> ResultSet {
        ResultSet {
            sources: vec![source],
            rows: rows
                .into_iter()
                .map(|row| SourcedRow { source: 0, row })
                .collect(),
        }
    }

    /// The rows alone.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().map(|r| &r.row)
    }

    /// As pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("rows serialise") + "\n"
    }

    /// As CSV: [`ResultSet::records`].
    pub fn to_csv(&self) -> String {
        let mut writer = csv::Writer::from_writer(Vec::new());
        for record in self.records() {
            writer.write_record(record).expect("CSV into memory");
        }
        String::from_utf8(writer.into_inner().expect("CSV into memory")).expect("UTF-8 fields")
    }

    /// The header and one record per row: `workload`, the swept values,
    /// `verify_data`, `error`, `simulated_ps`, the checks, then every
    /// figure (columns in order of first appearance; empty where a row
    /// lacks one).
    pub fn records(&self) -> Vec<Vec<String>> {
        let mut point_columns = Columns::default();
        let mut figure_columns = Columns::default();
        for row in self.rows() {
            row.point.0.iter().for_each(|(n, _)| point_columns.add(n));
            row.figures
                .0
                .iter()
                .for_each(|(n, _)| figure_columns.add(n));
        }
        let fixed = ["workload", "verify_data", "error", "simulated_ps"];
        let checks = ["checks_passed", "checks_failed"];
        let header = fixed[..1]
            .iter()
            .map(|s| s.to_string())
            .chain(point_columns.0.iter().cloned())
            .chain(fixed[1..].iter().chain(&checks).map(|s| s.to_string()))
            .chain(figure_columns.0.iter().cloned());
        let mut records = vec![header.collect()];
        for row in self.rows() {
            let text = |v: Option<&Value>| v.map(Value::to_string_exact).unwrap_or_default();
            let record = std::iter::once(row.workload.clone())
                .chain(
                    point_columns
                        .0
                        .iter()
                        .map(|c| row.point.get(c).cloned().unwrap_or_default()),
                )
                .chain([
                    row.verify_data.to_string(),
                    row.error.clone().unwrap_or_default(),
                    row.simulated_ps
                        .map(|ps| ps.to_string())
                        .unwrap_or_default(),
                    row.checks_passed.to_string(),
                    row.checks_failed.to_string(),
                ])
                .chain(figure_columns.0.iter().map(|c| text(row.figures.get(c))));
            records.push(record.collect());
        }
        records
    }

    /// The values each swept field takes, in order of first appearance.
    pub fn axes(&self) -> BTreeMap<String, Vec<String>> {
        let mut axes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in self.rows() {
            for (name, value) in &row.point.0 {
                let values = axes.entry(name.clone()).or_default();
                if !values.contains(value) {
                    values.push(value.clone());
                }
            }
        }
        axes
    }
}

/// Column names in order of first appearance.
#[derive(Default)]
struct Columns(Vec<String>);

impl Columns {
    fn add(&mut self, name: &str) {
        if !self.0.iter().any(|c| c == name) {
            self.0.push(name.to_owned());
        }
    }
}
