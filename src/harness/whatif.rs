//! The figures of a what-if sweep (`sweep --vary`, ADR-0029; issue 42):
//! for each varied key taking several values, the time and the bus
//! bandwidth against the key's value, one series per combination of the
//! other swept values (each size), the algorithm's α-β model dashed
//! beside its series; and, when the rows are explained, the time split by
//! resource class as one stacked bar per value
//! ([`attribution::by_value`]).
//!
//! A value axis is numeric when every value reads as one kind of quantity
//! (a plain number, a bandwidth, a time or a size; log-scaled when the
//! values span 8× or more); values of no one kind (link names, say) get
//! one named place each, in the order given, with the points unjoined.
//!
//! Knows rows, their figures and the sweep's varied keys; nothing of how
//! they were run.

use super::attribution;
use super::figures::{self, Axes, Style, Svg, Unit};
use super::results::{ResultSet, Row};
use super::sensitivity;
use super::table::names;
use crate::config::units::{Bandwidth, Size, parse_duration};

/// The what-if figures of `set`.
pub fn figures(set: &ResultSet) -> Vec<Svg> {
    let rows: Vec<&Row> = set.rows().collect();
    let axes = set.axes();
    let mut svgs = Vec::new();
    for key in sensitivity::varied_keys(set) {
        let Some(values) = axes.get(&key).filter(|v| v.len() > 1) else {
            continue;
        };
        let place = |row: &Row| {
            let value = row.point.get(&key)?;
            values.iter().position(|v| v == value)
        };
        match numeric(values) {
            Some((unit, xs)) => {
                let at = |row: &Row| Some(xs[place(row)?]);
                svgs.extend(against(&rows, &key, XAxis::Numeric(unit), &at));
            }
            None => {
                let at = |row: &Row| Some(place(row)? as f64);
                svgs.extend(against(&rows, &key, XAxis::Named(values), &at));
            }
        }
        svgs.extend(attribution::by_value(&rows, &key, values));
    }
    svgs
}

/// How a varied key's values lie along the x axis.
#[derive(Debug, Clone, Copy)]
enum XAxis<'a> {
    /// Numbers of one kind, in this unit.
    Numeric(Unit),
    /// Values of no one kind (link names, say): one place per value, in
    /// the order given, the points unjoined.
    Named(&'a [String]),
}

/// `values` as numbers of one kind, with the unit their axis reads in.
fn numeric(values: &[String]) -> Option<(Unit, Vec<f64>)> {
    type Reader = fn(&str) -> Option<f64>;
    let readers: [(Unit, Reader); 4] = [
        (Unit::Plain, |v| v.trim().parse::<f64>().ok()),
        (Unit::Gbps, |v| {
            let bandwidth = v.parse::<Bandwidth>().ok()?;
            Some(bandwidth.bytes_per_sec() as f64 / 1e9)
        }),
        (Unit::TimeUs, |v| {
            parse_duration(v).ok().map(|d| d.as_ps() as f64 / 1e6)
        }),
        (Unit::Bytes, |v| {
            v.parse::<Size>().ok().map(|s| s.bytes() as f64)
        }),
    ];
    readers.iter().find_map(|(unit, read)| {
        let xs = values
            .iter()
            .map(|v| read(v))
            .collect::<Option<Vec<f64>>>()?;
        Some((*unit, xs))
    })
}

/// Time and bus bandwidth against `key`'s value (`at`, on `x`).
fn against(rows: &[&Row], key: &str, x: XAxis, at: &dyn Fn(&Row) -> Option<f64>) -> Vec<Svg> {
    let groups = figures::grouped(rows, |r| sensitivity::others(r, key));
    let xs: Vec<f64> = rows.iter().filter_map(|r| at(r)).collect();
    let positive = xs.iter().all(|x| *x > 0.0);
    let (low, high) = xs
        .iter()
        .fold((f64::INFINITY, 0.0_f64), |(l, h), x| (l.min(*x), h.max(*x)));
    let (unit, names, measured) = match x {
        XAxis::Numeric(unit) => (unit, &[][..], Style::Line),
        XAxis::Named(names) => (Unit::Plain, names, Style::Markers),
    };
    let log_x = names.is_empty() && positive && high >= 8.0 * low;
    let slug = super::figures::file_slug(key);
    let series = |value: &dyn Fn(&Row) -> Option<f64>, model: bool| {
        let mut curves = Vec::new();
        for (color, (label, members)) in groups.iter().enumerate() {
            curves.push(figures::curve(label, members, at, value, measured, color));
            if model {
                let model = |r: &Row| r.number(names::MODEL).map(|ps| ps / 1e6);
                let label = format!("{label} model");
                curves.push(figures::curve(
                    &label,
                    members,
                    at,
                    model,
                    Style::Dashed,
                    color,
                ));
            }
        }
        curves
    };
    let axes = |title: &'static str, y: &'static str, y_unit: Unit| Axes {
        title,
        x: key,
        y,
        log_x,
        log_y: false,
        x_unit: unit,
        y_unit,
        x_names: names,
    };
    let time = figures::chart(
        &format!("time_vs_{slug}.svg"),
        axes("Time vs the varied value", "time", Unit::TimeUs),
        series(&sensitivity::time_us, true),
    );
    let busbw = figures::chart(
        &format!("busbw_vs_{slug}.svg"),
        axes(
            "Bus bandwidth vs the varied value",
            "bus bandwidth",
            Unit::Gbps,
        ),
        series(&|r: &Row| r.number(names::BUSBW), false),
    );
    [time, busbw].into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::results::Source;
    use crate::workloads::Value;

    /// A row of sensitivity's tests with a model at half its time.
    fn row(gbps: &str, size: &str, time_ps: u64) -> Row {
        let mut row = crate::harness::sensitivity::tests::row(0, gbps, size, time_ps);
        let model = ("model_ps".to_owned(), Value::Int(time_ps / 2));
        row.figures.0.push(model);
        row
    }

    fn set(rows: Vec<Row>) -> ResultSet {
        let source = Source {
            command: "c".to_owned(),
            sweep: "c".to_owned(),
            config: String::new(),
            machine: "m".to_owned(),
            shard: None,
            varied: vec!["system.inter_sip.bandwidth".to_owned()],
        };
        ResultSet::new(source, rows)
    }

    #[test]
    fn values_of_one_kind_read_as_numbers_in_its_unit() {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (unit, xs) = numeric(&strings(&["25 GB/s", "400 GB/s"])).unwrap();
        assert_eq!((unit, xs), (Unit::Gbps, vec![25.0, 400.0]));
        let (unit, xs) = numeric(&strings(&["500 ns", "2 us"])).unwrap();
        assert_eq!((unit, xs), (Unit::TimeUs, vec![0.5, 2.0]));
        assert_eq!(numeric(&strings(&["0.5", "1"])).unwrap().1, [0.5, 1.0]);
        assert_eq!(numeric(&strings(&["sip0->sip1", "25 GB/s"])), None);
    }

    #[test]
    fn values_of_no_one_kind_get_a_named_place_each() {
        let rows = vec![
            row("sip0->sip1", "1K", 8_000_000),
            row("sip1->sip2", "1K", 6_000_000),
            row("25 GB/s", "1K", 7_000_000),
        ];
        let svgs = figures(&set(rows));
        let time = svgs
            .iter()
            .find(|s| s.file == "time_vs_system_inter_sip_bandwidth.svg");
        let text = &time.expect("a time figure").text;
        // One tick per value, left to right in the order given.
        let at = |tick: &str| text.find(&format!("{tick}\n</text>"));
        let ticks = ["sip0-&gt;sip1", "sip1-&gt;sip2", "25 GB/s"].map(at);
        assert!(ticks.iter().all(Option::is_some), "{ticks:?}");
        assert!(ticks.is_sorted(), "{ticks:?}");
    }

    #[test]
    fn the_time_is_drawn_against_the_varied_value_one_series_per_size() {
        let rows = vec![
            row("25 GB/s", "1K", 8_000_000),
            row("100 GB/s", "1K", 6_000_000),
            row("25 GB/s", "1M", 40_000_000),
            row("100 GB/s", "1M", 10_000_000),
        ];
        let svgs = figures(&set(rows));
        let files: Vec<&str> = svgs.iter().map(|s| s.file.as_str()).collect();
        // No row has a bus bandwidth, none is explained: the time only.
        assert_eq!(files, ["time_vs_system_inter_sip_bandwidth.svg"]);
        let text = &svgs[0].text;
        for label in [
            "w size=1K",
            "w size=1M model",
            "25 GB/s",
            "100 GB/s",
            "system.inter_sip.bandwidth",
        ] {
            assert!(text.contains(label), "{label}");
        }
    }
}
