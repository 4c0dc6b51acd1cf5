//! "Where does the time go as size grows": a stacked bar per sweep point
//! of the time split by resource class, drawn whenever rows carry
//! attribution figures (ADR-0029).
//!
//! The contract with `--explain`: an explained row's figures include
//! integer figures named `explain_<class>_ps` ([`PREFIX`], [`SUFFIX`];
//! classes such as `inter_sip_link`, `ucie`, `noc`, `hbm`, `sram_tcm`,
//! `pe_math`, `dma_issue`, `launch`, `credit_wait`, `peer_wait`, `other`)
//! that sum to the row's time figure. One chart per combination of the
//! swept values other than the size (as the table's blocks), one bar per
//! row in order, one colour per class (the same class, the same colour in
//! every chart: [`CLASSES`] order, then any other class by first
//! appearance), a legend, time ticks with units and a hover value on every
//! segment.
//!
//! Knows rows and their figure names; nothing of how the attribution is
//! computed.

use plotters::prelude::*;

use super::figures::{Area, DrawResult, Hover, Svg, Ticked, draw_legend, grouped, with_hovers};
use super::results::Row;
use super::table::{self, names};
use super::ticks::Unit;

/// The prefix of an attribution figure.
pub const PREFIX: &str = "explain_";
/// Its suffix (integer picoseconds).
pub const SUFFIX: &str = "_ps";

/// The resource classes in drawing order (bottom up).
pub const CLASSES: [&str; 11] = [
    "inter_sip_link",
    "ucie",
    "noc",
    "hbm",
    "sram_tcm",
    "pe_math",
    "dma_issue",
    "launch",
    "credit_wait",
    "peer_wait",
    "other",
];

/// The class of an attribution figure's name, if it is one.
pub fn class_of(figure: &str) -> Option<&str> {
    figure
        .strip_prefix(PREFIX)?
        .strip_suffix(SUFFIX)
        .filter(|c| !c.is_empty())
}

/// The classes `rows` report, in [`CLASSES`] order, then the others by
/// first appearance.
pub fn classes(rows: &[&Row]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for row in rows {
        for (name, _) in &row.figures.0 {
            if let Some(class) = class_of(name)
                && !found.iter().any(|c| c == class)
            {
                found.push(class.to_owned());
            }
        }
    }
    let known = CLASSES.iter().filter(|c| found.iter().any(|f| f == *c));
    let mut ordered: Vec<String> = known.map(|c| c.to_string()).collect();
    ordered.extend(found.into_iter().filter(|f| !CLASSES.contains(&f.as_str())));
    ordered
}

/// The stacked-bar charts of `rows`, none when no row is explained;
/// `what_if`: the rows are a `--vary` sweep's.
pub fn figures(rows: &[&Row], what_if: bool) -> Vec<Svg> {
    let classes = classes(rows);
    if classes.is_empty() {
        return Vec::new();
    }
    let groups = grouped(&explained(rows), table::group);
    // A what-if sweep's groups of one bar each (one size) are drawn by
    // value instead (`by_value`).
    let one_bar_each = groups.len() > 1 && groups.iter().all(|(_, m)| m.len() == 1);
    if what_if && one_bar_each {
        return Vec::new();
    }
    groups
        .iter()
        .enumerate()
        .filter_map(|(i, (label, members))| {
            let file = match i {
                0 => "time_by_class.svg".to_owned(),
                _ => format!("time_by_class_{i}.svg"),
            };
            let title = format!("Where the time goes: {label}");
            chart(
                &file,
                &title,
                &classes,
                members,
                ("sweep point", &bar_label),
            )
        })
        .collect()
}

/// For a what-if sweep over `key` (taking `values`): one chart per
/// combination of the other swept values, one bar per value of `key` in
/// the sweep's order, labelled with it; none when no row is explained.
pub fn by_value(rows: &[&Row], key: &str, values: &[String]) -> Vec<Svg> {
    let classes = classes(rows);
    if classes.is_empty() {
        return Vec::new();
    }
    let slug = super::figures::file_slug(key);
    let explained = explained(rows);
    let label = |row: &Row| row.point.get(key).cloned().unwrap_or_default();
    grouped(&explained, |r| super::sensitivity::others(r, key))
        .iter()
        .enumerate()
        .filter_map(|(i, (others, members))| {
            let mut members = members.clone();
            let place = |r: &&Row| values.iter().position(|v| Some(v) == r.point.get(key));
            members.sort_by_key(place);
            let file = match i {
                0 => format!("time_by_class_vs_{slug}.svg"),
                _ => format!("time_by_class_vs_{slug}_{i}.svg"),
            };
            let title = format!("Where the time goes, by {key}: {others}");
            chart(&file, &title, &classes, &members, (key, &label))
        })
        .collect()
}

/// The rows that completed with attribution figures.
fn explained<'r>(rows: &[&'r Row]) -> Vec<&'r Row> {
    rows.iter()
        .copied()
        .filter(|r| r.error.is_none() && r.figures.0.iter().any(|(n, _)| class_of(n).is_some()))
        .collect()
}

/// A bar's label: its size, else its swept values.
fn bar_label(row: &Row) -> String {
    if let Some(size) = row.point.get(names::SIZE) {
        return size.clone();
    }
    let values: Vec<_> = row.point.0.iter().map(|(_, v)| v.as_str()).collect();
    values.join(" ")
}

/// One bar's segments: `(class index, bottom, top)` in µs.
fn segments(row: &Row, classes: &[String]) -> Vec<(usize, f64, f64)> {
    let mut bottom = 0.0;
    let mut out = Vec::new();
    for (i, class) in classes.iter().enumerate() {
        let name = format!("{PREFIX}{class}{SUFFIX}");
        let Some(ps) = row.number(&name).filter(|ps| *ps > 0.0) else {
            continue;
        };
        let top = bottom + ps / 1e6;
        out.push((i, bottom, top));
        bottom = top;
    }
    out
}

/// The chart of one group's rows, each bar labelled by `label`, the x
/// axis by `x_desc`.
fn chart(
    file: &str,
    title: &str,
    classes: &[String],
    rows: &[&Row],
    (x_desc, label): (&str, &dyn Fn(&Row) -> String),
) -> Option<Svg> {
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| (label(r), segments(r, classes)))
        .collect();
    let high = bars
        .iter()
        .flat_map(|(_, s)| s.last().map(|s| s.2))
        .fold(0.0, f64::max);
    if high <= 0.0 {
        return None;
    }
    let mut text = String::new();
    let hovers = {
        let root = SVGBackend::with_string(&mut text, (900, 560)).into_drawing_area();
        let hovers = draw(&root, (title, x_desc), classes, &bars, high).ok()?;
        root.present().ok()?;
        hovers
    };
    with_hovers(&mut text, &hovers);
    Some(Svg {
        file: file.to_owned(),
        title: title.to_owned(),
        text,
    })
}

/// A bar: its label and segments `(class index, bottom, top)`.
type Bar = (String, Vec<(usize, f64, f64)>);
type Bars = [Bar];

/// Bars, legend and mesh on `root`; returns the segments' hover values.
fn draw(
    root: &Area<'_>,
    (title, x_desc): (&str, &str),
    classes: &[String],
    bars: &Bars,
    high: f64,
) -> DrawResult<Vec<Hover>> {
    root.fill(&WHITE)?;
    let n = bars.len();
    let xs = -0.5..n as f64 + 1.5;
    let ys = 0.0..high * 1.08;
    let y_ticks = Unit::TimeUs.ticks(&ys, false);
    let x_ticks: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            Ticked {
                range: xs,
                ticks: x_ticks,
            },
            Ticked {
                range: ys,
                ticks: y_ticks,
            },
        )?;
    let x_label = |x: &f64| {
        let i = x.round();
        let found = (i >= 0.0).then(|| bars.get(i as usize)).flatten();
        found.map(|(label, _)| label.clone()).unwrap_or_default()
    };
    let y_label = |y: &f64| Unit::TimeUs.label(*y);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(x_desc)
        .y_desc("time")
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .label_style(("sans-serif", 13))
        .draw()?;
    let mut hovers = Vec::new();
    for (c, class) in classes.iter().enumerate() {
        let color = Palette99::pick(c).to_rgba();
        let mut rects = Vec::new();
        for (i, (label, segments)) in bars.iter().enumerate() {
            for &(_, bottom, top) in segments.iter().filter(|s| s.0 == c) {
                let x = i as f64;
                rects.push(Rectangle::new(
                    [(x - 0.35, bottom), (x + 0.35, top)],
                    color.filled(),
                ));
                hovers.push(Hover {
                    at: chart.backend_coord(&(x, (bottom + top) / 2.0)),
                    text: format!("{label}: {class} {}", Unit::TimeUs.label(top - bottom)),
                });
            }
        }
        if rects.is_empty() {
            // No time in this class here: no legend entry either.
            continue;
        }
        chart
            .draw_series(rects)?
            .label(class.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    // In the two empty slots right of the bars.
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    Ok(hovers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::results::Fields;
    use crate::workloads::Value;

    /// A row of `size` whose time splits as `parts` (class, ps).
    fn row(algorithm: &str, size: &str, parts: &[(&str, u64)]) -> Row {
        let mut figures = vec![(
            "time_ps".to_owned(),
            Value::Int(parts.iter().map(|p| p.1).sum()),
        )];
        figures.extend(
            parts
                .iter()
                .map(|(c, ps)| (format!("explain_{c}_ps"), Value::Int(*ps))),
        );
        Row {
            explain: None,
            index: 0,
            workload: "w".to_owned(),
            point: Fields(vec![
                ("algorithm".to_owned(), algorithm.to_owned()),
                ("size".to_owned(), size.to_owned()),
            ]),
            verify_data: false,
            error: None,
            simulated_ps: Some(1),
            checks_passed: 0,
            checks_failed: 0,
            figures: Fields(figures),
        }
    }

    #[test]
    fn classes_keep_the_known_order_then_the_others() {
        let a = row("a", "1K", &[("other", 1), ("hbm", 2), ("zeta", 3)]);
        let b = row("a", "2K", &[("inter_sip_link", 4)]);
        assert_eq!(
            classes(&[&a, &b]),
            ["inter_sip_link", "hbm", "other", "zeta"]
        );
        assert_eq!(class_of("explain__ps"), None);
        assert_eq!(class_of("model_ps"), None);
    }

    #[test]
    fn one_stacked_chart_per_group_with_a_bar_per_point() {
        let rows = [
            row(
                "a",
                "1K",
                &[("inter_sip_link", 3_000_000), ("noc", 1_000_000)],
            ),
            row(
                "a",
                "64M",
                &[("inter_sip_link", 900_000_000), ("noc", 100_000_000)],
            ),
            row("b", "1K", &[("launch", 500_000)]),
        ];
        let rows: Vec<&Row> = rows.iter().collect();
        let svgs = figures(&rows, false);
        let files: Vec<_> = svgs.iter().map(|s| s.file.as_str()).collect();
        assert_eq!(files, ["time_by_class.svg", "time_by_class_1.svg"]);
        let svg = &svgs[0].text;
        // Two bars of two classes: four segments, each with its hover.
        assert_eq!(svg.matches("<title>").count(), 4);
        assert_eq!(svgs[1].text.matches("<title>").count(), 1);
        assert!(
            svg.contains("<title>64M: inter_sip_link 900 µs</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>1K: noc 1 µs</title>"));
        assert!(
            svg.contains("\ninter_sip_link\n") && svg.contains("\nnoc\n"),
            "legend: {svg}"
        );
        // Bars named by their size, times on the y axis with units.
        assert!(svg.contains("\n64M\n") && svg.contains("\n1K\n"));
        assert!(
            svg.contains("\n200 µs\n") && svg.contains("\n1 ms\n"),
            "{svg}"
        );
        assert!(svgs[0].title.ends_with("w algorithm=a"));
    }

    #[test]
    fn rows_without_attribution_draw_nothing() {
        let mut plain = row("a", "1K", &[]);
        plain
            .figures
            .0
            .push(("busbw_gbps".to_owned(), Value::Real(1.0)));
        assert!(figures(&[&plain], false).is_empty());
    }
}
