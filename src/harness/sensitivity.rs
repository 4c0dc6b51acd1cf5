//! The sensitivity table of a what-if sweep (`sweep --vary`, ADR-0029):
//! for each varied configuration key, every run's time at each of the
//! key's values relative to its time at the first value, the other swept
//! values held (one line per combination of them).
//!
//! The time is the workload's timed figure ([`figures::time_us`]: the
//! collective's `time_ps` or `*_ps`), else the whole run's `simulated_ps`.
//! Which keys were varied comes from the rows' sources
//! ([`Source::varied`](super::results::Source::varied)), so merged
//! folders keep their table.
//!
//! Knows rows and their fields; nothing of the CLI.

use std::fmt::Write;

use super::figures;
use super::results::{ResultSet, Row};

/// A row's time, in µs.
pub fn time_us(row: &Row) -> Option<f64> {
    if row.error.is_some() {
        return None;
    }
    figures::time_us(row).or_else(|| row.simulated_ps.map(|ps| ps as f64 / 1e6))
}

/// The keys `set`'s sources varied, in order of first appearance.
pub fn varied_keys(set: &ResultSet) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for key in set.sources.iter().flat_map(|s| &s.varied) {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// The table (one block per varied key taking at least two values), or
/// `None` when nothing was varied.
pub fn table(set: &ResultSet) -> Option<String> {
    let axes = set.axes();
    let rows: Vec<&Row> = set.rows().collect();
    let mut out = String::new();
    for key in varied_keys(set) {
        let Some(values) = axes.get(&key).filter(|v| v.len() > 1) else {
            continue;
        };
        block(&mut out, &key, values, &rows);
    }
    (!out.is_empty()).then_some(out)
}

/// The block of `key`: a header, then one line per combination of the
/// other swept values.
fn block(out: &mut String, key: &str, values: &[String], rows: &[&Row]) {
    let width = |v: &String| v.chars().count().max(8);
    let first = format!("at {} (us)", values[0]);
    let _ = writeln!(
        out,
        "# sensitivity to {key}: time relative to {key}={}",
        values[0]
    );
    let _ = write!(out, "# {first:>14}");
    for value in values {
        let _ = write!(out, "  {value:>w$}", w = width(value));
    }
    let _ = writeln!(out, "  run");
    let mut notes = Vec::new();
    for (others, members) in figures::grouped(rows, |r| others(r, key)) {
        let at = |value: &String| {
            let row = members.iter().find(|r| r.point.get(key) == Some(value))?;
            time_us(row)
        };
        let base = at(&values[0]);
        let shown = base.map_or("-".to_owned(), |us| format!("{us:.3}"));
        let _ = write!(out, "  {shown:>w$}", w = first.chars().count().max(14));
        for value in values {
            let ratio = match (base, at(value)) {
                (Some(b), Some(t)) if b > 0.0 => format!("{:.3}", t / b),
                _ => "-".to_owned(),
            };
            let _ = write!(out, "  {ratio:>w$}", w = width(value));
        }
        let _ = writeln!(out, "  {others}");
        let times: Vec<Option<f64>> = values.iter().map(at).collect();
        for note in unmoved(key, values, &times, &members) {
            notes.push(format!("{note} ({others})"));
        }
    }
    for note in notes {
        let _ = writeln!(out, "# {note}");
    }
}

/// How much a change must move the time to count: 1 %.
const MOVED: f64 = 0.01;

/// For each step from one value of `key` to the next that moved the time
/// (`times`, one per value of `values`) by less than [`MOVED`], a
/// sentence saying so and naming what bounds the time there: the resource
/// class with the most time on the critical path of the later value's run
/// when it was explained, else the α-β model's share of it.
fn unmoved(key: &str, values: &[String], times: &[Option<f64>], members: &[&Row]) -> Vec<String> {
    let mut notes = Vec::new();
    for i in 1..values.len() {
        let (Some(before), Some(after)) = (times[i - 1], times[i]) else {
            continue;
        };
        let change = after / before - 1.0;
        if before <= 0.0 || change.abs() >= MOVED {
            continue;
        }
        let Some(row) = members
            .iter()
            .find(|r| r.point.get(key) == Some(&values[i]))
        else {
            continue;
        };
        let said = format!(
            "{key} {} -> {} moved the time by under 1 % ({:+.2} %)",
            values[i - 1],
            values[i],
            change * 100.0
        );
        notes.push(format!("{said}: {}", bound(row, after)));
    }
    notes
}

/// What bounds `row`'s time (`us`): its largest attribution class when it
/// was explained, else what the α-β model accounts for.
fn bound(row: &Row, us: f64) -> String {
    let largest = row
        .figures
        .0
        .iter()
        .filter_map(|(name, _)| Some((super::attribution::class_of(name)?, row.number(name)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match (
        largest.filter(|(_, ps)| *ps > 0.0),
        row.number(super::table::names::MODEL),
    ) {
        (Some((class, ps)), _) => format!(
            "the time is bound by {class} ({:.1} % of the critical path)",
            ps / 1e6 / us * 100.0
        ),
        (None, Some(model)) => format!(
            "the α-β model accounts for {:.1} % of the time; --explain names the class that bounds the rest",
            model / 1e6 / us * 100.0
        ),
        (None, None) => "--explain names the class that bounds it".to_owned(),
    }
}

/// A row's workload and swept values other than `key`.
pub(super) fn others(row: &Row, key: &str) -> String {
    let rest: Vec<_> = row
        .point
        .0
        .iter()
        .filter(|(name, _)| name != key)
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    format!("{} {}", row.workload, rest.join(" "))
        .trim_end()
        .to_owned()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::harness::results::{Fields, Source};
    use crate::workloads::Value;

    /// Row `index` of workload `w` at an inter-SIP bandwidth and a size,
    /// whose `time_ps` is `time_ps`.
    pub(in crate::harness) fn row(index: usize, gbps: &str, size: &str, time_ps: u64) -> Row {
        Row {
            explain: None,
            index,
            workload: "w".to_owned(),
            point: Fields(vec![
                ("system.inter_sip.bandwidth".to_owned(), gbps.to_owned()),
                ("size".to_owned(), size.to_owned()),
            ]),
            verify_data: false,
            error: None,
            simulated_ps: Some(time_ps * 3),
            checks_passed: 0,
            checks_failed: 0,
            figures: Fields(vec![("time_ps".to_owned(), Value::Int(time_ps))]),
        }
    }

    fn source(varied: &[&str]) -> Source {
        Source {
            command: "c".to_owned(),
            sweep: "c".to_owned(),
            config: String::new(),
            machine: "m".to_owned(),
            shard: None,
            varied: varied.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn each_value_is_relative_to_the_first_per_combination_of_the_others() {
        let rows = vec![
            row(0, "25 GB/s", "1K", 8_000_000),
            row(1, "25 GB/s", "1M", 40_000_000),
            row(2, "100 GB/s", "1K", 6_000_000),
            row(3, "100 GB/s", "1M", 10_000_000),
        ];
        let set = ResultSet::new(source(&["system.inter_sip.bandwidth"]), rows);
        let text = table(&set).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].contains("relative to system.inter_sip.bandwidth=25 GB/s"));
        // 1K: 8 us, then 6 / 8 = 0.75; 1M: 40 us, then 10 / 40 = 0.25.
        let words = |line: &str| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(words(lines[2]), ["8.000", "1.000", "0.750", "w", "size=1K"]);
        assert_eq!(
            words(lines[3]),
            ["40.000", "1.000", "0.250", "w", "size=1M"]
        );
    }

    #[test]
    fn a_key_that_moves_nothing_gets_a_note_naming_what_bounds_the_time() {
        let mut rows = vec![
            row(0, "25 GB/s", "1M", 10_000_000),
            row(1, "100 GB/s", "1M", 9_950_000),
        ];
        let set = |rows: Vec<Row>| ResultSet::new(source(&["system.inter_sip.bandwidth"]), rows);
        rows[1]
            .figures
            .0
            .push(("model_ps".to_owned(), Value::Int(2_000_000)));
        let text = table(&set(rows.clone())).unwrap();
        let note = text.lines().last().unwrap();
        let said = "# system.inter_sip.bandwidth 25 GB/s -> 100 GB/s moved the time by under 1 % (-0.50 %)";
        assert!(note.starts_with(said), "{text}");
        assert!(
            note.contains("the α-β model accounts for 20.1 % of the time"),
            "{note}"
        );
        for (class, ps) in [("noc", 7_000_000), ("inter_sip_link", 3_000_000)] {
            rows[1]
                .figures
                .0
                .push((format!("explain_{class}_ps"), Value::Int(ps)));
        }
        let text = table(&set(rows.clone())).unwrap();
        assert!(
            text.contains("bound by noc (70.4 % of the critical path"),
            "{text}"
        );
        // A change of 1 % or more is not noted.
        rows[1].figures.0[0].1 = Value::Int(9_900_000);
        assert!(!table(&set(rows)).unwrap().contains("under 1 %"));
    }

    #[test]
    fn nothing_varied_gives_no_table() {
        let rows = vec![row(0, "25 GB/s", "1K", 1), row(1, "50 GB/s", "1K", 2)];
        assert_eq!(table(&ResultSet::new(source(&[]), rows.clone())), None);
        // A varied key with one value compares nothing.
        let one = vec![rows[0].clone()];
        let varied = source(&["system.inter_sip.bandwidth"]);
        assert_eq!(table(&ResultSet::new(varied, one)), None);
    }
}
