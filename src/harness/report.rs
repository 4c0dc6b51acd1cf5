//! `kernbench report`: result folders written by `sweep --out` merged into
//! one [`ResultSet`], compared with measured results, and rendered as a
//! self-contained `index.html`.
//!
//! **Merging.** A run is identified by its configuration flags, workload,
//! swept values and data mode ([`Row::key`]). Rows of the same run in
//! several folders (a folder given twice, overlapping sweeps) are kept
//! once when their results are identical and refused when they differ,
//! naming the run and both folders. Rows are ordered by sweep (in the
//! order the folders are given) and, within one, by their position in the
//! whole sweep, so the shards of a sweep merge into exactly its rows
//! (ADR-0017).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::figures::{self, Axes, Curve, Style, Svg};
use super::reference::Measured;
use super::results::{Fields, ResultSet, Row, Source, SourcedRow};
use super::table::{self, names};
use crate::config::read_capped;
use crate::explain::Explanation;
use crate::topology::{Machine, TopologySpec};
use crate::workloads::Value;

/// A result folder that cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// `results.json` could not be read.
    #[error("{}: {source} (expected a folder written by `kernbench sweep --out`)", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `results.json` is not what `sweep` writes.
    #[error("{}: not a results.json of `kernbench sweep --out`: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where and why.
        source: serde_json::Error,
    },
    /// A results.json that parses but holds what no sweep writes (a row
    /// naming a missing source, a figure no chart can draw).
    #[error("{}: rows[{row}].{field}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The row, from 0.
        row: usize,
        /// The field, e.g. `source` or `figures.busbw_gbps`.
        field: String,
        /// What was found and expected.
        message: String,
    },
    /// The same run with different results in two folders.
    #[error(
        "conflicting results for the run `{key}`: {} and {} differ (identical duplicates are kept once)",
        first.display(),
        second.display()
    )]
    Conflict {
        /// The run.
        key: String,
        /// The folder it was first found in.
        first: PathBuf,
        /// The folder that disagrees.
        second: PathBuf,
    },
}

/// The result set `dir/results.json`.
pub fn load(dir: &Path) -> Result<ResultSet, ReportError> {
    let path = dir.join("results.json");
    let text =
        read_capped(&path, RESULTS_CAP, "a results.json").map_err(|source| ReportError::Read {
            path: path.clone(),
            source,
        })?;
    let set: ResultSet = serde_json::from_str(&text).map_err(|source| ReportError::Json {
        path: path.clone(),
        source,
    })?;
    validate(&set).map_err(|(row, field, message)| ReportError::Invalid {
        path,
        row,
        field,
        message,
    })?;
    Ok(set)
}

/// The cap of a results.json (a sweep of a hundred thousand points
/// writes about a tenth of it).
pub const RESULTS_CAP: u64 = 64 << 20;

/// A row's problem: its index, the field and what is wrong.
type RowProblem = (usize, String, String);

/// Checks what `sweep` guarantees of its results and the report relies on:
/// every row names an existing source, a row that ran has its simulated
/// time and a size that is a size, and every numeric figure is finite and
/// within [`figures::DRAWABLE`] (or zero).
pub fn validate(set: &ResultSet) -> Result<(), RowProblem> {
    for (index, sourced) in set.rows.iter().enumerate() {
        let problem = |field: &str, message: String| Err((index, field.to_owned(), message));
        if sourced.source >= set.sources.len() {
            return problem(
                "source",
                format!(
                    "{} names no source (the file lists {})",
                    sourced.source,
                    set.sources.len()
                ),
            );
        }
        let row = &sourced.row;
        if row.error.is_none() {
            if row.simulated_ps.is_none() {
                return problem("simulated_ps", "missing in a row without an error".into());
            }
            if let Some(size) = row.point.get("size")
                && size.parse::<crate::workloads::ByteSize>().is_err()
            {
                return problem("point.size", format!("`{size}` is not a size"));
            }
        }
        for (name, value) in &row.figures.0 {
            if let Value::Real(x) = value
                && !figures::drawable(*x)
            {
                return problem(
                    &format!("figures.{name}"),
                    format!(
                        "{x:e} is not a figure a run reports (finite, zero or between {:e} \
                         and {:e} in size)",
                        figures::DRAWABLE.start(),
                        figures::DRAWABLE.end()
                    ),
                );
            }
        }
    }
    Ok(())
}

/// `sets` (each with the folder it came from) merged; see the module docs.
pub fn merge(sets: &[(PathBuf, ResultSet)]) -> Result<ResultSet, ReportError> {
    let mut sources: Vec<Source> = Vec::new();
    let mut sweeps: Vec<&str> = Vec::new();
    let mut kept: BTreeMap<String, (usize, &Path, &SourcedRow)> = BTreeMap::new();
    let mut order = Vec::new();
    for (dir, set) in sets {
        for row in &set.rows {
            let source = &set.sources[row.source];
            let key = row.row.key(&source.config);
            if let Some((_, first, earlier)) = kept.get(&key) {
                if !same_results(&earlier.row, &row.row) {
                    return Err(ReportError::Conflict {
                        key,
                        first: first.to_path_buf(),
                        second: dir.clone(),
                    });
                }
                continue;
            }
            let index = position(&mut sources, source);
            if !sweeps.contains(&source.sweep.as_str()) {
                sweeps.push(&source.sweep);
            }
            let sweep = sweeps.iter().position(|s| *s == source.sweep);
            order.push((sweep, row.row.index, key.clone()));
            kept.insert(key, (index, dir, row));
        }
    }
    order.sort();
    let rows = order
        .into_iter()
        .map(|(_, _, key)| {
            let (source, _, row) = kept[&key];
            SourcedRow {
                source,
                row: row.row.clone(),
            }
        })
        .collect();
    Ok(ResultSet { sources, rows })
}

/// The index of `source` in `sources`, added if new.
fn position(sources: &mut Vec<Source>, source: &Source) -> usize {
    sources.iter().position(|s| s == source).unwrap_or_else(|| {
        sources.push(source.clone());
        sources.len() - 1
    })
}

/// Whether two rows of the same run have the same results (their position
/// in their sweeps and the order of their figures aside).
fn same_results(a: &Row, b: &Row) -> bool {
    let sorted = |row: &Row| {
        let mut figures: Vec<_> = row.figures.0.clone();
        figures.sort_by(|x, y| x.0.cmp(&y.0));
        Row {
            index: 0,
            figures: Fields(figures),
            ..row.clone()
        }
    };
    sorted(a) == sorted(b)
}

/// The figure a reference adds to the rows whose size it measured:
/// the measured time, in µs.
pub const MEASURED: &str = "measured_us";
/// And the simulated time's error against it, in %.
pub const ERROR: &str = "error_pct";

/// Adds [`MEASURED`] and [`ERROR`] to every completed collective row whose
/// `bytes_per_rank` `measured` has, and returns the comparison table.
pub fn compare(set: &mut ResultSet, measured: &[Measured]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {:>10} {:>13} {:>14} {:>9}  run",
        "size(B)", "measured(us)", "simulated(us)", "error(%)"
    );
    for sourced in &mut set.rows {
        let row = &mut sourced.row;
        let Some(bytes) = row.number(names::BYTES) else {
            continue;
        };
        let found = measured.iter().find(|m| m.bytes as f64 == bytes);
        let (Some(m), Some(simulated)) = (found, figures::time_us(row)) else {
            continue;
        };
        let error = (simulated - m.time_us) / m.time_us * 100.0;
        row.figures
            .0
            .push((MEASURED.to_owned(), Value::Real(m.time_us)));
        row.figures.0.push((ERROR.to_owned(), Value::Real(error)));
        let _ = writeln!(
            out,
            "  {:>10} {:>13.3} {:>14.3} {:>+9.2}  {}",
            m.bytes,
            m.time_us,
            simulated,
            error,
            table::group(row)
        );
    }
    out
}

/// Measured against simulated time per size: the reference (out of place,
/// and in place dashed) and one curve per simulated group.
pub fn measured_vs_simulated(rows: &[&Row], measured: &[Measured]) -> Option<Svg> {
    let points = |time: fn(&Measured) -> Option<f64>| {
        let mut points: Vec<_> = measured
            .iter()
            .filter_map(|m| Some((m.bytes as f64, time(m)?)))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points
    };
    let mut curves = vec![
        Curve {
            label: "measured (out of place)".to_owned(),
            points: points(|m| Some(m.time_us)),
            style: Style::Line,
            color: 0,
        },
        Curve {
            label: "measured (in place)".to_owned(),
            points: points(|m| m.in_place_us),
            style: Style::Dashed,
            color: 0,
        },
    ];
    let bytes = |r: &Row| r.number(names::BYTES);
    for (color, (label, members)) in (1..).zip(figures::grouped(rows, table::group)) {
        let label = format!("{label} simulated");
        curves.push(figures::curve(
            &label,
            &members,
            bytes,
            figures::time_us,
            Style::Line,
            color,
        ));
    }
    let axes = Axes {
        title: "Measured vs simulated time",
        x: "bytes per rank",
        y: "time",
        log_x: true,
        log_y: true,
        x_unit: figures::Unit::Bytes,
        y_unit: figures::Unit::TimeUs,
        x_names: &[],
    };
    figures::chart("measured_vs_simulated.svg", axes, curves)
}

/// The self-contained page: sources (command lines, machines), the
/// printed tables, every column of every row, the figures inline.
pub fn index_html(
    set: &ResultSet,
    comparison: Option<&str>,
    svgs: &[Svg],
    machine_of: Option<MachineOf<'_>>,
) -> String {
    page(
        "kernbench report",
        &format!(
            "<h1>kernbench report</h1>\n{}",
            report_body(set, comparison, svgs, machine_of)
        ),
    )
}

/// The machine an explained row ran on, to draw its heat maps on, or why
/// it cannot be known (then the row's explanation says so instead).
pub type MachineOf<'a> = &'a dyn Fn(&Source, &Row) -> Result<Machine, String>;

/// The explanations of the explained rows (`--explain`), each with its
/// link heat maps when `machine_of` is given (drawn on the machine it
/// names for the row, or a line saying why there is none); empty when no
/// row is explained.
pub fn explanations_html(set: &ResultSet, machine_of: Option<MachineOf<'_>>) -> String {
    let explained: Vec<_> = set
        .rows
        .iter()
        .filter_map(|r| Some((r, r.row.explain.as_ref()?)))
        .collect();
    if explained.is_empty() {
        return String::new();
    }
    let mut html = String::from("<h2>Explanations</h2>\n");
    for (number, (sourced, explanation)) in explained.into_iter().enumerate() {
        let row = &sourced.row;
        let point: Vec<String> = row
            .point
            .0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        let _ = writeln!(
            html,
            "<h3>{} {}</h3>\n<pre>{}</pre>",
            escape(&row.workload),
            escape(&point.join(" ")),
            escape(&explanation.to_string())
        );
        let Some(machine_of) = machine_of else {
            continue;
        };
        match set
            .sources
            .get(sourced.source)
            .ok_or_else(|| {
                format!(
                    "row {} names source {}, which is absent",
                    row.index, sourced.source
                )
            })
            .and_then(|source| machine_of(source, row))
        {
            Ok(machine) => html += &heat_maps_html(number, &machine, explanation),
            Err(why) => {
                let _ = writeln!(html, "<p class=\"note\">no heat map: {}</p>", escape(&why));
            }
        }
    }
    html
}

/// The configuration with a row's varied `(key, value)`s applied.
pub type Varied<'a> = &'a dyn Fn(&[(String, String)]) -> Result<TopologySpec, String>;

/// The machine of `topology` for a row of `source`, checked to be the one
/// the row ran on: with the row's values of the keys its sweep varied
/// applied by `vary` (`None`: nothing can be applied, so a varied row has
/// no heat map), and its summary equal to the source's for an unvaried
/// sweep.
pub fn machine_for_row(
    topology: &TopologySpec,
    vary: Option<Varied<'_>>,
    source: &Source,
    row: &Row,
) -> Result<Machine, String> {
    let varied: Vec<(String, String)> = row
        .point
        .0
        .iter()
        .filter(|(name, _)| source.varied.contains(name))
        .cloned()
        .collect();
    let spec = match (varied.is_empty(), vary) {
        (true, _) => topology.clone(),
        (false, Some(vary)) => vary(&varied)?,
        (false, None) => {
            return Err(format!(
                "the row varies {}; `kernbench report` with the sweep's flags draws it",
                source.varied.join(", ")
            ));
        }
    };
    if varied.is_empty() && spec.summary().to_string() != source.machine {
        return Err(format!(
            "the row ran on another machine than this command's; give it the sweep's flags ({})",
            source.config
        ));
    }
    Machine::build(&spec).map_err(|e| e.to_string())
}

/// One explanation's two heat maps (the machine, the busiest cube) on
/// `machine`, as the figure `#heatmap-{number}`; link names absent from it
/// stay grey.
fn heat_maps_html(number: usize, machine: &Machine, explanation: &Explanation) -> String {
    use super::heat::Heat;
    use super::web::{cube_heat_svg, topology_heat_svg};
    let heat = Heat::of(explanation);
    format!(
        "<figure class=\"heatmap\" id=\"heatmap-{number}\">\n{}\n{}\n<figcaption>each link's share of the critical path \
         (its tooltip: also its busy fraction over the interval): the machine, and the cube holding the NoC link \
         with the most time on the path</figcaption>\n</figure>\n",
        topology_heat_svg(machine, Some(&heat)),
        cube_heat_svg(machine, Some(&heat))
    )
}

/// A whole HTML page titled `title` around `body`, with the report's
/// style sheet (`kernbench report` and `kernbench web` share it).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>\n\
         body{{font-family:sans-serif;margin:2em;max-width:1200px}}\
         table{{border-collapse:collapse;font-size:13px}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}\
         pre{{background:#f6f6f6;padding:8px;overflow-x:auto}}\
         label{{display:inline-block;margin:4px 12px 4px 0}}\n\
         </style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// The report's sections: sources (command lines, machines), the printed
/// tables, the comparison with measurements if any, the figures inline and
/// every column of every row.
pub fn report_body(
    set: &ResultSet,
    comparison: Option<&str>,
    svgs: &[Svg],
    machine_of: Option<MachineOf<'_>>,
) -> String {
    let mut html = String::from("<h2>Sources</h2>\n");
    for (index, source) in set.sources.iter().enumerate() {
        let shard = source.shard.as_deref().unwrap_or("whole sweep");
        let _ = writeln!(
            html,
            "<h3>Source {index} ({})</h3>\n<pre>{}</pre>\n<details><summary>machine</summary><pre>{}</pre></details>",
            escape(shard),
            escape(&source.command),
            escape(&source.machine)
        );
    }
    let rows: Vec<&Row> = set.rows().collect();
    let _ = writeln!(
        html,
        "<h2>Results</h2>\n<pre>{}</pre>",
        escape(&table::render(&rows))
    );
    if let Some(sensitivity) = super::sensitivity::table(set) {
        let _ = writeln!(
            html,
            "<h2>Sensitivity</h2>\n<pre>{}</pre>",
            escape(&sensitivity)
        );
    }
    if let Some(comparison) = comparison {
        let _ = writeln!(
            html,
            "<h2>Measured vs simulated</h2>\n<pre>{}</pre>",
            escape(comparison)
        );
    }
    html += "<h2>Figures</h2>\n";
    for svg in svgs {
        let _ = writeln!(
            html,
            "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>",
            svg.text,
            escape(&svg.title)
        );
    }
    html += &explanations_html(set, machine_of);
    html += "<h2>All columns</h2>\n<table>\n";
    for (number, record) in set.records().iter().enumerate() {
        let (cell, source) = if number == 0 {
            ("th", "source".to_owned())
        } else {
            ("td", set.rows[number - 1].source.to_string())
        };
        html += "<tr>";
        for field in std::iter::once(&source).chain(record) {
            let _ = write!(html, "<{cell}>{}</{cell}>", escape(field));
        }
        html += "</tr>\n";
    }
    html += "</table>\n";
    html
}

/// `text` with HTML's special characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(sweep: &str, shard: Option<&str>) -> Source {
        Source {
            command: format!("{sweep} {}", shard.unwrap_or_default()),
            sweep: sweep.to_owned(),
            config: String::new(),
            machine: "m".to_owned(),
            shard: shard.map(str::to_owned),
            varied: Vec::new(),
        }
    }

    fn row(index: usize, size: &str, ps: u64) -> Row {
        Row {
            explain: None,
            index,
            workload: "w".to_owned(),
            point: Fields(vec![("size".to_owned(), size.to_owned())]),
            verify_data: false,
            error: None,
            simulated_ps: Some(ps),
            checks_passed: 0,
            checks_failed: 0,
            figures: Fields(Vec::new()),
        }
    }

    fn set(source: Source, rows: Vec<Row>) -> ResultSet {
        ResultSet::new(source, rows)
    }

    #[test]
    fn sweeps_keep_their_order_shards_interleave_and_a_repeated_folder_adds_nothing() {
        let b = set(source("sweep B", None), vec![row(0, "8", 5)]);
        let a2 = set(source("sweep A", Some("2/2")), vec![row(1, "2", 2)]);
        let a1 = set(
            source("sweep A", Some("1/2")),
            vec![row(0, "1", 1), row(2, "3", 3)],
        );
        let sets: Vec<_> = [("a2", &a2), ("b", &b), ("a1", &a1), ("a1", &a1)]
            .into_iter()
            .map(|(dir, set)| (PathBuf::from(dir), set.clone()))
            .collect();
        let merged = merge(&sets).unwrap();
        let sizes: Vec<_> = merged.rows().map(|r| r.point.0[0].1.as_str()).collect();
        assert_eq!(sizes, ["1", "2", "3", "8"]);
        assert_eq!(merged.sources.len(), 3);
        let shards: Vec<_> = merged
            .rows
            .iter()
            .map(|r| merged.sources[r.source].shard.clone())
            .collect();
        assert_eq!(shards[1].as_deref(), Some("2/2"));
        assert_eq!(shards[3], None);
    }

    #[test]
    fn the_same_run_with_another_result_is_a_conflict() {
        let one = set(source("s", None), vec![row(0, "1", 1)]);
        let other = set(source("t", None), vec![row(4, "1", 2)]);
        let sets = vec![
            (PathBuf::from("x"), one.clone()),
            (PathBuf::from("y"), other),
        ];
        let error = merge(&sets).unwrap_err().to_string();
        assert!(
            error.contains("`w size=1 (data off)`: x and y differ"),
            "{error}"
        );
        let again = set(source("t", None), vec![row(4, "1", 1)]);
        let sets = vec![(PathBuf::from("x"), one), (PathBuf::from("y"), again)];
        assert_eq!(merge(&sets).unwrap().rows.len(), 1);
    }

    #[test]
    fn html_special_characters_are_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
