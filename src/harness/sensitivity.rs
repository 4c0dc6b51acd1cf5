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
    }
}

/// A row's workload and swept values other than `key`.
fn others(row: &Row, key: &str) -> String {
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
mod tests {
    use super::*;
    use crate::harness::results::{Fields, Source};
    use crate::workloads::Value;

    fn row(index: usize, gbps: &str, size: &str, time_ps: u64) -> Row {
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
    fn nothing_varied_gives_no_table() {
        let rows = vec![row(0, "25 GB/s", "1K", 1), row(1, "50 GB/s", "1K", 2)];
        assert_eq!(table(&ResultSet::new(source(&[]), rows.clone())), None);
        // A varied key with one value compares nothing.
        let one = vec![rows[0].clone()];
        let varied = source(&["system.inter_sip.bandwidth"]);
        assert_eq!(table(&ResultSet::new(varied, one)), None);
    }
}
