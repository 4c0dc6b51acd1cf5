//! SVG figures of sweep results, drawn with `plotters` (SVG backend only),
//! chosen by the figures the rows report: for collectives (rows with
//! `busbw_gbps`), latency and bus bandwidth against size on log axes,
//! one curve per combination of the other swept values, with the
//! algorithm's `model_ps` dashed beside its curve where the run reports it,
//! and one comparison figure per further swept value (buffer kind,
//! fidelity, dtype, ...) when more than one is swept; for GEMMs (rows with
//! `flops` and `achieved_tflops`), the three of [`super::gemm_figures`].
//!
//! Ticks carry units ([`super::ticks`]: `64 MiB`, `12.5 µs`, `100 GB/s`)
//! and every point has a hover value (an SVG `<title>` on an invisible
//! circle over it: the curve, x and y).

use std::collections::BTreeMap;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use super::gemm_figures;
use super::results::Row;
use super::table::{self, names};
pub use super::ticks::Unit;

/// One SVG document and the file name it is saved under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Svg {
    /// The file name, e.g. `latency_vs_size.svg`.
    pub file: String,
    /// The figure's title.
    pub title: String,
    /// The SVG text.
    pub text: String,
}

/// One curve of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The legend entry.
    pub label: String,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub style: Style,
    /// Its colour, as an index into the palette (a model shares its curve's).
    pub color: usize,
}

/// How a curve is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A solid line with a marker at each point (a measurement).
    Line,
    /// A dashed line (a model or bound beside what it models).
    Dashed,
    /// Markers only (points that do not form a curve).
    Markers,
}

/// A chart's labels and scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axes<'a> {
    /// The title.
    pub title: &'a str,
    /// The x axis label.
    pub x: &'a str,
    /// The y axis label.
    pub y: &'a str,
    /// Logarithmic x.
    pub log_x: bool,
    /// Logarithmic y.
    pub log_y: bool,
    /// What x measures (how its ticks read).
    pub x_unit: Unit,
    /// What y measures.
    pub y_unit: Unit,
    /// Names for the x positions `0, 1, ...` (a categorical axis: one
    /// tick per name, `x_unit` unused); empty for a numeric axis.
    pub x_names: &'a [String],
}

/// The figures of `set`: those of its rows, then its what-if figures
/// ([`super::whatif`]) when it varied configuration keys.
pub fn of_set(set: &super::results::ResultSet) -> Vec<Svg> {
    let rows: Vec<&Row> = set.rows().collect();
    let what_if = !super::sensitivity::varied_keys(set).is_empty();
    let mut svgs = row_figures(&rows, what_if);
    svgs.extend(super::whatif::figures(set));
    svgs
}

/// `key` as part of a file name: every character but ASCII letters and
/// digits as `_` (`system.inter_sip.bandwidth` → `system_inter_sip_bandwidth`).
pub fn file_slug(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The figures of `rows` (all of one result set, in order, no key
/// varied).
pub fn figures(rows: &[&Row]) -> Vec<Svg> {
    row_figures(rows, false)
}

/// The figures of `rows`; `what_if`: they are a `--vary` sweep's.
fn row_figures(rows: &[&Row], what_if: bool) -> Vec<Svg> {
    let mut svgs = Vec::new();
    if table::is_collective(rows) {
        svgs.extend(collective_figures(rows));
    }
    if gemm_figures::is_gemm(rows) {
        svgs.extend(gemm_figures::figures(rows));
    }
    svgs.extend(super::attribution::figures(rows, what_if));
    svgs
}

/// Latency and busbw vs size (when two sizes or more were swept: one
/// point per curve draws nothing), and the comparisons.
fn collective_figures(rows: &[&Row]) -> Vec<Svg> {
    let mut sizes: Vec<&String> = rows
        .iter()
        .filter_map(|r| r.point.get(names::SIZE))
        .collect();
    sizes.sort();
    sizes.dedup();
    if sizes.len() < 2 {
        return comparisons(rows).into_iter().flatten().collect();
    }
    let mut svgs = vec![
        collective_chart(
            rows,
            "latency_vs_size.svg",
            "Latency vs size",
            ("time", Unit::TimeUs),
            time_us,
        ),
        collective_chart(
            rows,
            "busbw_vs_size.svg",
            "Bus bandwidth vs size",
            ("bus bandwidth", Unit::Gbps),
            |r| r.number(names::BUSBW),
        ),
    ];
    svgs.extend(comparisons(rows));
    svgs.into_iter().flatten().collect()
}

/// The collective's time in µs: `time_ps`, else the first `*_ps` figure
/// other than `model_ps` (`allreduce_ps`).
pub fn time_us(row: &Row) -> Option<f64> {
    let name = row
        .figures
        .0
        .iter()
        .map(|(n, _)| n.as_str())
        .find(|n| *n == names::TIME)
        .or_else(|| {
            row.figures
                .0
                .iter()
                .map(|(n, _)| n.as_str())
                .find(|n| n.ends_with("_ps") && *n != names::MODEL)
        })?;
    row.number(name).map(|ps| ps / 1e6)
}

/// The bytes per rank of a row.
fn bytes(row: &Row) -> Option<f64> {
    row.number(names::BYTES)
}

/// One curve per group (the swept values other than size), plus the
/// dashed model curves for the latency chart.
fn collective_chart(
    rows: &[&Row],
    file: &str,
    title: &str,
    (y, y_unit): (&str, Unit),
    value: fn(&Row) -> Option<f64>,
) -> Option<Svg> {
    let groups = grouped(rows, table::group);
    let mut curves = Vec::new();
    for (color, (label, members)) in groups.iter().enumerate() {
        curves.push(curve(label, members, bytes, value, Style::Line, color));
        if file.starts_with("latency") {
            let model = |r: &Row| r.number(names::MODEL).map(|ps| ps / 1e6);
            let label = format!("{label} model");
            curves.push(curve(&label, members, bytes, model, Style::Dashed, color));
        }
    }
    let axes = Axes {
        title,
        x: "bytes per rank",
        y,
        log_x: true,
        log_y: true,
        x_unit: Unit::Bytes,
        y_unit,
        x_names: &[],
    };
    chart(file, axes, curves)
}

/// For each swept value other than size that takes several values while
/// another one does too, busbw vs size with one curve per value of it
/// (the others at their first value).
fn comparisons(rows: &[&Row]) -> Vec<Option<Svg>> {
    let mut axes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for row in rows {
        for (name, value) in &row.point.0 {
            let values = axes.entry(name).or_default();
            if !values.contains(&value.as_str()) {
                values.push(value);
            }
        }
    }
    axes.remove(names::SIZE);
    let varied: Vec<_> = axes.iter().filter(|(_, v)| v.len() > 1).collect();
    if varied.len() < 2 {
        return Vec::new();
    }
    varied
        .iter()
        .map(|(axis, _)| {
            let fixed = |row: &&Row| {
                axes.iter().all(|(name, values)| {
                    name == *axis || row.point.get(name).map(String::as_str) == Some(values[0])
                })
            };
            let chosen: Vec<&Row> = rows.iter().copied().filter(fixed).collect();
            let by_axis = grouped(&chosen, |r| {
                format!("{axis}={}", r.point.get(axis).cloned().unwrap_or_default())
            });
            let curves = by_axis
                .iter()
                .enumerate()
                .map(|(color, (label, members))| {
                    let busbw = |r: &Row| r.number(names::BUSBW);
                    curve(label, members, bytes, busbw, Style::Line, color)
                })
                .collect();
            let title = format!("Bus bandwidth by {axis}");
            let file = format!("busbw_by_{axis}.svg");
            let axes = Axes {
                title: &title,
                x: "bytes per rank",
                y: "bus bandwidth",
                log_x: true,
                log_y: true,
                x_unit: Unit::Bytes,
                y_unit: Unit::Gbps,
                x_names: &[],
            };
            chart(&file, axes, curves)
        })
        .collect()
}

/// Rows grouped by `label`, groups in order of first appearance.
pub fn grouped<'r>(
    rows: &[&'r Row],
    label: impl Fn(&Row) -> String,
) -> Vec<(String, Vec<&'r Row>)> {
    let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
    for row in rows {
        let key = label(row);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(row),
            None => groups.push((key, vec![row])),
        }
    }
    groups
}

/// The `(x, y)` points of `rows` that completed with both values, in x
/// order.
pub fn curve(
    label: &str,
    rows: &[&Row],
    x: impl Fn(&Row) -> Option<f64>,
    y: impl Fn(&Row) -> Option<f64>,
    style: Style,
    color: usize,
) -> Curve {
    let mut points: Vec<_> = rows
        .iter()
        .filter(|r| r.error.is_none())
        .filter_map(|r| Some((x(r)?, y(r)?)))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    Curve {
        label: label.to_owned(),
        points,
        style,
        color,
    }
}

/// The magnitudes a chart draws: a value outside (non-finite, or nonzero
/// and smaller or larger than these) is left out, so that the axes'
/// ranges, padding and tick marks stay finite and few whatever a results
/// file holds (a figure of 1e308 or 1e-320 would otherwise overflow the
/// padding or ask for hundreds of decades of ticks).
pub const DRAWABLE: std::ops::RangeInclusive<f64> = 1e-30..=1e30;

/// Whether a chart draws `value` ([`DRAWABLE`], or zero).
pub fn drawable(value: f64) -> bool {
    value == 0.0 || DRAWABLE.contains(&value.abs())
}

/// The range of `values`, padded; positive only on a log axis. `None`
/// when there is nothing to draw.
fn range(values: impl Iterator<Item = f64>, log: bool) -> Option<std::ops::Range<f64>> {
    let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| drawable(*v) && (!log || *v > 0.0)) {
        low = low.min(v);
        high = high.max(v);
    }
    if low > high {
        return None;
    }
    Some(if log {
        low / 1.5..high * 1.5
    } else {
        let pad = ((high - low) * 0.05).max(high.abs() * 0.05).max(1e-9);
        (low - pad).min(0.0)..high + pad
    })
}

/// Draws `curves` (empty ones skipped); `None` when none has a point.
pub fn chart(file: &str, axes: Axes<'_>, curves: Vec<Curve>) -> Option<Svg> {
    let on_chart = |&(x, y): &(f64, f64)| {
        drawable(x) && drawable(y) && (!axes.log_x || x > 0.0) && (!axes.log_y || y > 0.0)
    };
    let curves: Vec<_> = curves
        .into_iter()
        .map(|mut c| {
            c.points.retain(on_chart);
            c
        })
        .filter(|c| !c.points.is_empty())
        .collect();
    let xs = range(
        curves.iter().flat_map(|c| c.points.iter().map(|p| p.0)),
        axes.log_x,
    )?;
    let ys = range(
        curves.iter().flat_map(|c| c.points.iter().map(|p| p.1)),
        axes.log_y,
    )?;
    let mut text = String::new();
    let hovers = {
        let root = SVGBackend::with_string(&mut text, (900, 560)).into_drawing_area();
        let hovers = draw(&root, axes, xs, ys, &curves).ok()?;
        root.present().ok()?;
        hovers
    };
    with_hovers(&mut text, &hovers);
    Some(Svg {
        file: file.to_owned(),
        title: axes.title.to_owned(),
        text,
    })
}

/// A linear f64 axis with the ticks given (plotters' own linear axis
/// cannot take given ticks and a label formatter together).
pub struct Ticked {
    /// The axis range.
    pub range: std::ops::Range<f64>,
    /// The tick positions.
    pub ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let share = (value - self.range.start) / span;
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        match hint.weight().allow_light_points() {
            true => Vec::new(),
            false => self.ticks.clone(),
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// A figure's drawing area.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
/// What drawing on an [`Area`] returns.
pub type DrawResult<T = ()> = Result<T, DrawingAreaErrorKind<std::io::Error>>;

/// A point's hover value: where it is drawn and what its `<title>` says.
#[derive(Debug, Clone, PartialEq)]
pub struct Hover {
    /// The pixel it is drawn at.
    pub at: (i32, i32),
    /// The text shown on hover.
    pub text: String,
}

/// `svg` with an invisible, hoverable circle and `<title>` per hover,
/// just before its end.
pub fn with_hovers(svg: &mut String, hovers: &[Hover]) {
    let mut group = String::from("<g class=\"hover\">\n");
    for hover in hovers {
        group += &format!(
            "<circle cx=\"{}\" cy=\"{}\" r=\"6\" fill=\"#000\" fill-opacity=\"0\"><title>{}</title></circle>\n",
            hover.at.0,
            hover.at.1,
            super::report::escape(&hover.text)
        );
    }
    group += "</g>\n";
    match svg.rfind("</svg>") {
        Some(end) => svg.insert_str(end, &group),
        None => svg.push_str(&group),
    }
}

/// The chart on `root`, with linear or log scales per axis.
fn draw(
    root: &Area<'_>,
    axes: Axes<'_>,
    xs: std::ops::Range<f64>,
    ys: std::ops::Range<f64>,
    curves: &[Curve],
) -> DrawResult<Vec<Hover>> {
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(axes.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72);
    let x_ticks = match axes.x_names.len() {
        0 => axes.x_unit.ticks(&xs, axes.log_x),
        n => (0..n).map(|i| i as f64).collect(),
    };
    let y_ticks = axes.y_unit.ticks(&ys, axes.log_y);
    let (x_log, y_log) = (
        xs.clone().log_scale().with_key_points(x_ticks.clone()),
        ys.clone().log_scale().with_key_points(y_ticks.clone()),
    );
    let x_lin = Ticked {
        range: xs,
        ticks: x_ticks,
    };
    let y_lin = Ticked {
        range: ys,
        ticks: y_ticks,
    };
    match (axes.log_x, axes.log_y) {
        (true, true) => plot(builder.build_cartesian_2d(x_log, y_log)?, axes, curves),
        (true, false) => plot(builder.build_cartesian_2d(x_log, y_lin)?, axes, curves),
        (false, true) => plot(builder.build_cartesian_2d(x_lin, y_log)?, axes, curves),
        (false, false) => plot(builder.build_cartesian_2d(x_lin, y_lin)?, axes, curves),
    }
}

/// Mesh, curves (solid with markers, or dashed) and legend; returns the
/// points' hover values.
fn plot<'a, X, Y>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    axes: Axes<'_>,
    curves: &[Curve],
) -> DrawResult<Vec<Hover>>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_label = |x: &f64| match axes.x_names {
        [] => axes.x_unit.label(*x),
        names => names.get(x.round() as usize).cloned().unwrap_or_default(),
    };
    let y_label = |y: &f64| axes.y_unit.label(*y);
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .label_style(("sans-serif", 13))
        .draw()?;
    let mut hovers = Vec::new();
    for curve in curves {
        for &(x, y) in &curve.points {
            hovers.push(Hover {
                at: chart.backend_coord(&(x, y)),
                text: format!("{}: {}, {}", curve.label, x_label(&x), y_label(&y)),
            });
        }
    }
    for curve in curves {
        let color = Palette99::pick(curve.color).to_rgba();
        let style = color.stroke_width(2);
        let points = curve.points.iter().copied();
        let label = curve.label.as_str();
        // Each legend sample drawn as its curve is (20 px from its anchor).
        match curve.style {
            Style::Line => {
                chart
                    .draw_series(LineSeries::new(points, style).point_size(3))?
                    .label(label)
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (20, 0)], style)
                            + Circle::new((10, 0), 3, style.filled())
                    });
            }
            Style::Dashed => {
                chart
                    .draw_series(DashedLineSeries::new(points, 6, 4, style))?
                    .label(label)
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (6, 0)], style)
                            + PathElement::new(vec![(10, 0), (16, 0)], style)
                    });
            }
            Style::Markers => {
                chart
                    .draw_series(points.map(|p| Circle::new(p, 4, style.filled())))?
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 10, y), 4, style.filled()));
            }
        }
    }
    let points: Vec<(i32, i32)> = hovers.iter().map(|h| h.at).collect();
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let corner = emptiest_corner(&points, (xs, ys), legend_size(curves));
    draw_legend(&mut chart, corner)?;
    Ok(hovers)
}

/// The corner of the plotting area (pixels `xs` × `ys`) where the
/// legend (`legend`: its box's width and height in pixels) covers the
/// fewest of `points`; of equals, the one whose quarter holds fewest, then
/// upper left, upper right, lower left, lower right.
fn emptiest_corner(
    points: &[(i32, i32)],
    (xs, ys): (std::ops::Range<i32>, std::ops::Range<i32>),
    (width, height): (i32, i32),
) -> SeriesLabelPosition {
    let (mid_x, mid_y) = ((xs.start + xs.end) / 2, (ys.start + ys.end) / 2);
    let corners = [
        (SeriesLabelPosition::UpperLeft, true, true),
        (SeriesLabelPosition::UpperRight, false, true),
        (SeriesLabelPosition::LowerLeft, true, false),
        (SeriesLabelPosition::LowerRight, false, false),
    ];
    let covered = |left: bool, upper: bool| {
        let x = match left {
            true => xs.start..xs.start + width,
            false => xs.end - width..xs.end,
        };
        let y = match upper {
            true => ys.start..ys.start + height,
            false => ys.end - height..ys.end,
        };
        points
            .iter()
            .filter(|(px, py)| x.contains(px) && y.contains(py))
            .count()
    };
    let quarter = |left: bool, upper: bool| {
        let inside = |&&(x, y): &&(i32, i32)| (x < mid_x) == left && (y < mid_y) == upper;
        points.iter().filter(inside).count()
    };
    let (mut best, mut fewest) = (SeriesLabelPosition::UpperLeft, (usize::MAX, usize::MAX));
    for (corner, left, upper) in corners {
        let n = (covered(left, upper), quarter(left, upper));
        if n < fewest {
            (best, fewest) = (corner, n);
        }
    }
    best
}

/// The legend box's size in pixels for `curves`: a 13 px font, a 20 px
/// sample and margins (an estimate: plotters lays it out when drawing).
fn legend_size(curves: &[Curve]) -> (i32, i32) {
    let longest = curves.iter().map(|c| c.label.chars().count()).max();
    let width = 48 + 7 * longest.unwrap_or(0) as i32;
    let height = 12 + 17 * curves.len() as i32;
    (width + LEGEND_MARGIN, height + LEGEND_MARGIN)
}

/// Pixels between the legend box and the plotting area's edges.
const LEGEND_MARGIN: i32 = 10;

/// The series' legend, boxed in the chart's `corner` (every figure draws
/// it the same way).
pub fn draw_legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    corner: SeriesLabelPosition,
) -> DrawResult<()> {
    chart
        .configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_goes_where_it_covers_fewest_points() {
        let check = |points: &[(i32, i32)], expect: SeriesLabelPosition| {
            let got = emptiest_corner(points, (0..800, 0..500), (300, 50));
            assert_eq!(got, expect, "{points:?}");
        };
        // Points high on the left and the right, a model line through the
        // middle: every quarter holds two, the lower boxes cover none.
        let high = [(10, 20), (270, 40), (530, 45), (790, 45)];
        let middle = [(10, 250), (270, 260), (530, 270), (790, 270)];
        check(&[high, middle].concat(), SeriesLabelPosition::LowerLeft);
        // Nothing under any box: the emptier quarter wins.
        check(
            &[(100, 100), (100, 300), (600, 100)],
            SeriesLabelPosition::LowerRight,
        );
        check(
            &[(100, 100), (100, 300), (600, 300)],
            SeriesLabelPosition::UpperRight,
        );
        check(&[], SeriesLabelPosition::UpperLeft);
    }

    use crate::harness::results::Fields;
    use crate::workloads::Value;

    /// A collective row of `bytes` per rank taking `ps`.
    fn row(bytes: u64, ps: u64) -> Row {
        let busbw = bytes as f64 / ps as f64 * 1e3;
        Row {
            explain: None,
            index: 0,
            workload: "ccl_allreduce".to_owned(),
            point: Fields(vec![("size".to_owned(), bytes.to_string())]),
            verify_data: false,
            error: None,
            simulated_ps: Some(ps),
            checks_passed: 0,
            checks_failed: 0,
            figures: Fields(vec![
                ("bytes_per_rank".to_owned(), Value::Int(bytes)),
                ("allreduce_ps".to_owned(), Value::Int(ps)),
                ("model_ps".to_owned(), Value::Int(ps / 3)),
                ("busbw_gbps".to_owned(), Value::Real(busbw)),
            ]),
        }
    }

    /// The text lines of `svg`'s `<text>` elements.
    fn labels(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| t.split('\n').nth(1))
            .collect()
    }

    #[test]
    fn ticks_carry_units_and_points_hover_their_values() {
        let rows = [row(1 << 10, 3_000_000), row(64 << 20, 700_000_000)];
        let rows: Vec<&Row> = rows.iter().collect();
        let svgs = figures(&rows);
        let latency = &svgs
            .iter()
            .find(|s| s.file == "latency_vs_size.svg")
            .unwrap()
            .text;
        let shown = labels(latency);
        for tick in ["1 KiB", "64 MiB", "10 µs", "100 µs"] {
            assert!(shown.contains(&tick), "{tick} not in {shown:?}");
        }
        // Two points measured, two modelled: four hover values.
        assert_eq!(latency.matches("<title>").count(), 4);
        assert!(latency.contains("<title>ccl_allreduce: 64 MiB, 700 µs</title>"));
        assert!(latency.contains("<title>ccl_allreduce model: 1 KiB, 1 µs</title>"));
        let busbw = &svgs
            .iter()
            .find(|s| s.file == "busbw_vs_size.svg")
            .unwrap()
            .text;
        assert!(labels(busbw).iter().any(|l| l.ends_with(" GB/s")));
    }

    /// The two-point horizontal segments of `svg` as (x1, x2, y).
    fn flat_segments(svg: &str) -> Vec<(i64, i64, i64)> {
        let point = |p: &str| -> Option<(i64, i64)> {
            let (x, y) = p.split_once(',')?;
            Some((x.trim().parse().ok()?, y.trim().parse().ok()?))
        };
        svg.split("points=\"")
            .skip(1)
            .filter_map(|rest| {
                let list: Vec<&str> = rest.split('"').next()?.split_whitespace().collect();
                let [a, b] = list[..] else { return None };
                let ((x1, y1), (x2, y2)) = (point(a)?, point(b)?);
                (y1 == y2).then_some((x1, x2, y1))
            })
            .collect()
    }

    #[test]
    fn the_legend_draws_the_model_dashed_as_the_plot_does() {
        let rows = [row(1 << 10, 3_000_000), row(64 << 20, 700_000_000)];
        let rows: Vec<&Row> = rows.iter().collect();
        let svgs = figures(&rows);
        let latency = &svgs
            .iter()
            .find(|s| s.file == "latency_vs_size.svg")
            .unwrap()
            .text;
        let flat = flat_segments(latency);
        let dash =
            |&(x1, x2, y): &(i64, i64, i64)| x2 - x1 == 6 && flat.contains(&(x1 + 10, x1 + 16, y));
        assert!(flat.iter().any(dash), "a dashed sample: {flat:?}");
        assert!(
            flat.iter().any(|&(x1, x2, _)| x2 - x1 == 20),
            "a solid one: {flat:?}"
        );
    }

    #[test]
    fn a_single_point_chart_has_ticks_on_both_axes() {
        let one = row(1 << 20, 30_300_000);
        for svg in figures(&[&one]) {
            let shown = labels(&svg.text);
            let x = shown.iter().filter(|l| l.ends_with("iB")).count();
            let y = shown
                .iter()
                .filter(|l| l.ends_with(" µs") || l.ends_with(" GB/s"))
                .count();
            assert!(x >= 1 && y >= 2, "{}: {shown:?}", svg.file);
        }
    }
}
