//! Axis ticks a person reads (ADR-0029): where the ticks of a figure's axis
//! go and how their labels and hover values are written, by the
//! [`Unit`] the axis measures: sizes in binary units (`1 KiB`, `64 MiB`,
//! `1 GiB`, ticks at powers of two), times from µs values in the unit that
//! fits (`800 ns`, `12.5 µs`, `3 ms`), bandwidths in `GB/s`, and plain
//! counts with SI prefixes (`2 G`). Every non-empty range gets at least
//! one tick, so a single-point chart has ticks on both axes.
//!
//! Knows numbers and units; nothing of rows or drawing.

use std::ops::Range;

/// What an axis measures, and so how its ticks are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// A time given in µs.
    TimeUs,
    /// A bandwidth given in GB/s.
    Gbps,
    /// A number without unit (FLOP, FLOP per byte, TFLOP/s).
    Plain,
}

impl Unit {
    /// `value` as a label, e.g. `64 MiB`, `12.5 µs`, `100 GB/s`.
    pub fn label(self, value: f64) -> String {
        match self {
            Unit::Bytes => scaled(value, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB", "PiB"]),
            Unit::TimeUs => time_us(value),
            Unit::Gbps => format!("{} GB/s", significant(value)),
            Unit::Plain => si(value),
        }
    }

    /// The tick positions over `range` (of the padded axis): on a log
    /// axis, powers of two for bytes and 1-2-5 (or denser) decades for the
    /// others; on a linear one, a 1-2-5 step; never empty.
    pub fn ticks(self, range: &Range<f64>, log: bool) -> Vec<f64> {
        let ticks = match (log, self) {
            (true, Unit::Bytes) => powers_of_two(range),
            (true, _) => decades(range),
            (false, _) => linear(range),
        };
        if ticks.is_empty() {
            vec![(range.start + range.end) / 2.0]
        } else {
            ticks
        }
    }
}

/// The most ticks an axis gets before they are thinned.
const MOST: usize = 10;

/// Powers of two in `range`, every `s`-th exponent so that at most
/// [`MOST`] remain (`s` = 10 gives 1 KiB, 1 MiB, 1 GiB).
fn powers_of_two(range: &Range<f64>) -> Vec<f64> {
    if range.start <= 0.0 || range.end <= range.start {
        return Vec::new();
    }
    let (low, high) = (
        range.start.log2().ceil() as i32,
        range.end.log2().floor() as i32,
    );
    for step in [1, 2, 10, 20] {
        let exps: Vec<i32> = (low..=high).filter(|e| e.rem_euclid(step) == 0).collect();
        if exps.len() <= MOST {
            return exps.into_iter().map(|e| 2f64.powi(e)).collect();
        }
    }
    Vec::new()
}

/// Decades in `range` with mantissas 1, else 1-2-5, else 1 to 9: the
/// sparsest set giving at least three ticks (or the densest's), so a
/// curve spanning less than three decades still reads at 2 and 5.
fn decades(range: &Range<f64>) -> Vec<f64> {
    if range.start <= 0.0 || range.end <= range.start {
        return Vec::new();
    }
    let (low, high) = (
        range.start.log10().floor() as i32,
        range.end.log10().ceil() as i32,
    );
    let sets: [&[f64]; 3] = [
        &[1.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ];
    let mut ticks = Vec::new();
    for mantissas in sets {
        ticks = (low..=high)
            .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|t| range.contains(t))
            .collect();
        if ticks.len() >= 3 {
            break;
        }
    }
    if ticks.len() > MOST * 2 {
        let keep = ticks.len().div_ceil(MOST);
        ticks = ticks.into_iter().step_by(keep).collect();
    }
    ticks
}

/// Multiples of a 1-2-5 step in `range`, at most [`MOST`].
fn linear(range: &Range<f64>) -> Vec<f64> {
    let span = range.end - range.start;
    if !(span > 0.0 && span.is_finite()) {
        return Vec::new();
    }
    let mut unit = 10f64.powf((span / MOST as f64).log10().floor());
    let step = loop {
        if let Some(m) = [1.0, 2.0, 5.0]
            .iter()
            .find(|m| span / (*m * unit) <= MOST as f64)
        {
            break m * unit;
        }
        unit *= 10.0;
    };
    let first = (range.start / step).ceil() as i64;
    let last = (range.end / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// `value` with three significant digits at most, trailing zeros dropped
/// (`1`, `1.5`, `977`, `0.125`).
pub fn significant(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = (2 - value.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{value:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// `value` in the largest of `units` (each `base` times the last) it
/// reaches.
fn scaled(value: f64, base: f64, units: &[&str]) -> String {
    let mut at = 0;
    let mut shown = value;
    while at + 1 < units.len() && shown.abs() >= base {
        shown /= base;
        at += 1;
    }
    format!("{} {}", significant(shown), units[at])
}

/// A time given in µs, in ps, ns, µs, ms or s.
fn time_us(us: f64) -> String {
    let ps = us * 1e6;
    if ps == 0.0 {
        return "0".to_owned();
    }
    let units = [(1e12, "s"), (1e9, "ms"), (1e6, "µs"), (1e3, "ns")];
    match units.iter().find(|(scale, _)| ps.abs() >= *scale) {
        Some((scale, unit)) => format!("{} {unit}", significant(ps / scale)),
        None => format!("{} ps", significant(ps)),
    }
}

/// A plain number with an SI prefix (`k`, `M`, `G`, `T`, `P`).
fn si(value: f64) -> String {
    if value.abs() < 1000.0 {
        return significant(value);
    }
    scaled(value, 1000.0, &["", "k", "M", "G", "T", "P"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_carry_the_unit_that_fits() {
        assert_eq!(Unit::Bytes.label(1024.0), "1 KiB");
        assert_eq!(Unit::Bytes.label(64.0 * 1024.0 * 1024.0), "64 MiB");
        assert_eq!(Unit::Bytes.label(1024f64.powi(3)), "1 GiB");
        assert_eq!(Unit::Bytes.label(1536.0), "1.5 KiB");
        assert_eq!(Unit::Bytes.label(100.0), "100 B");
        assert_eq!(Unit::TimeUs.label(0.8), "800 ns");
        assert_eq!(Unit::TimeUs.label(12.5), "12.5 µs");
        assert_eq!(Unit::TimeUs.label(3000.0), "3 ms");
        assert_eq!(Unit::TimeUs.label(0.000_5), "500 ps");
        assert_eq!(Unit::TimeUs.label(0.0), "0");
        assert_eq!(Unit::Gbps.label(12.345), "12.3 GB/s");
        assert_eq!(Unit::Plain.label(2e9), "2 G");
        assert_eq!(Unit::Plain.label(0.25), "0.25");
    }

    #[test]
    fn byte_ticks_are_powers_of_two_thinned_to_ten() {
        let kib_to_mib = 1024.0..1024.0 * 1024.0;
        let ticks = Unit::Bytes.ticks(&kib_to_mib, true);
        // 2^10 .. 2^20: 11 exponents, every second one kept.
        assert_eq!(ticks.len(), 6);
        assert_eq!(ticks[0], 1024.0);
        assert_eq!(ticks[5], 1024.0 * 1024.0);
        let wide = Unit::Bytes.ticks(&(1.0..2f64.powi(40)), true);
        let labels: Vec<_> = wide.iter().map(|t| Unit::Bytes.label(*t)).collect();
        assert_eq!(labels, ["1 B", "1 KiB", "1 MiB", "1 GiB", "1 TiB"]);
    }

    #[test]
    fn a_single_point_axis_still_has_ticks() {
        // One point at 30.3 µs, padded ×1.5 each way as a chart does.
        let range = 30.3 / 1.5..30.3 * 1.5;
        let ticks = Unit::TimeUs.ticks(&range, true);
        assert!(ticks.len() >= 2, "{ticks:?}");
        assert!(ticks.iter().all(|t| range.contains(t)));
        let one_size = 1024.0 / 1.5..1024.0 * 1.5;
        assert_eq!(Unit::Bytes.ticks(&one_size, true), [1024.0]);
        // A range with no tick of its own gets its middle.
        assert_eq!(Unit::Plain.ticks(&(5.0..5.0), false), [5.0]);
    }

    #[test]
    fn a_log_axis_of_under_three_decades_reads_at_two_and_five() {
        // 62 µs to 2 ms (a sweep's latencies, padded): the decades alone
        // are 100 µs and 1 ms; 1-2-5 gives five ticks.
        let ticks = Unit::TimeUs.ticks(&(40.0..3000.0), true);
        assert_eq!(ticks, [50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0]);
        // Three decades or more keep the decades.
        let wide = Unit::TimeUs.ticks(&(0.5..20_000.0), true);
        assert_eq!(wide, [1.0, 10.0, 100.0, 1000.0, 10_000.0]);
    }

    #[test]
    fn linear_ticks_step_by_one_two_or_five() {
        assert_eq!(
            Unit::Plain.ticks(&(0.0..10.0), false),
            (0..=10).map(f64::from).collect::<Vec<_>>()
        );
        assert_eq!(Unit::Plain.ticks(&(-1.0..42.0), false).len(), 9);
    }
}
