//! The three figures of GEMM sweeps (seed ADR-0044's set), drawn from the
//! figures GEMM workloads report (`flops`, `achieved_tflops`,
//! `peak_tflops`, and where the run has a roofline `roofline_ps`,
//! `roofline_tflops`, `hbm_bytes`, `hbm_gbps`; see [`names`]):
//!
//! - `time_vs_shape.svg`: simulated time against the GEMM's size
//!   (`2MKN`), the roofline bound dashed beside it;
//! - `tflops_vs_intensity.svg`: achieved TFLOP/s against arithmetic
//!   intensity (`flops / hbm_bytes`) under the roof
//!   `min(peak, intensity × HBM bandwidth)`, the workload's own roofline
//!   bound as hollow points;
//! - `simulated_vs_theoretical.svg`: simulated against roofline time, with
//!   the line where they would be equal.
//!
//! The simulated time is `flops / achieved_tflops`: the timed part each
//! workload divides by (`program_ps` of `gemm_single_pe`, `kernel_ps` of
//! `gemm`). One curve per combination of the swept values other than the
//! dimensions (`dtype=bf16`, ...). ADR-0017.

use super::figures::{Axes, Curve, Style, Svg, Unit, chart, curve, grouped};
use super::results::Row;
use super::table::names;

/// Whether `rows` report GEMM figures.
pub fn is_gemm(rows: &[&Row]) -> bool {
    rows.iter()
        .any(|r| r.number(names::FLOPS).is_some() && r.number(names::ACHIEVED_TFLOPS).is_some())
}

/// The GEMM figures of `rows` that have something to draw.
pub fn figures(rows: &[&Row]) -> Vec<Svg> {
    let groups = grouped(rows, label);
    [
        time_vs_shape(&groups),
        tflops_vs_intensity(&groups),
        simulated_vs_theoretical(&groups),
    ]
    .into_iter()
    .flatten()
    .collect()
}

type Groups<'r> = [(String, Vec<&'r Row>)];

/// A row's curve: its workload and swept values other than the dimensions.
fn label(row: &Row) -> String {
    let others: Vec<_> = row
        .point
        .0
        .iter()
        .filter(|(name, _)| !names::GEMM_DIMENSIONS.contains(&name.as_str()))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    format!("{} {}", row.workload, others.join(" "))
        .trim_end()
        .to_owned()
}

fn flops(row: &Row) -> Option<f64> {
    row.number(names::FLOPS)
}

/// The simulated time of the timed part, in µs.
fn simulated_us(row: &Row) -> Option<f64> {
    let tflops = row.number(names::ACHIEVED_TFLOPS).filter(|t| *t > 0.0)?;
    Some(flops(row)? / tflops / 1e6)
}

/// The roofline bound, in µs.
fn roofline_us(row: &Row) -> Option<f64> {
    row.number(names::ROOFLINE).map(|ps| ps / 1e6)
}

/// FLOP per byte of HBM traffic.
fn intensity(row: &Row) -> Option<f64> {
    let bytes = row.number(names::HBM_BYTES).filter(|b| *b > 0.0)?;
    Some(flops(row)? / bytes)
}

fn time_vs_shape(groups: &Groups<'_>) -> Option<Svg> {
    let mut curves = Vec::new();
    for (color, (label, members)) in groups.iter().enumerate() {
        let simulated = format!("{label} simulated");
        curves.push(curve(
            &simulated,
            members,
            flops,
            simulated_us,
            Style::Line,
            color,
        ));
        let bound = format!("{label} roofline");
        curves.push(curve(
            &bound,
            members,
            flops,
            roofline_us,
            Style::Dashed,
            color,
        ));
    }
    let axes = Axes {
        title: "GEMM time vs shape",
        x: "GEMM size 2MKN (FLOP)",
        y: "time",
        log_x: true,
        log_y: true,
        x_unit: Unit::Plain,
        y_unit: Unit::TimeUs,
        x_names: &[],
    };
    chart("time_vs_shape.svg", axes, curves)
}

fn tflops_vs_intensity(groups: &Groups<'_>) -> Option<Svg> {
    let achieved = |r: &Row| r.number(names::ACHIEVED_TFLOPS);
    let bound = |r: &Row| r.number(names::ROOFLINE_TFLOPS);
    let mut curves = Vec::new();
    for (color, (label, members)) in groups.iter().enumerate() {
        let name = format!("{label} achieved");
        curves.push(curve(
            &name,
            members,
            intensity,
            achieved,
            Style::Line,
            color,
        ));
        let name = format!("{label} roofline bound");
        curves.push(curve(
            &name,
            members,
            intensity,
            bound,
            Style::Markers,
            color,
        ));
    }
    let rows: Vec<&Row> = groups.iter().flat_map(|(_, m)| m.iter().copied()).collect();
    curves.extend(roofs(&rows, groups.len()));
    let axes = Axes {
        title: "Achieved TFLOP/s vs arithmetic intensity (roofline)",
        x: "arithmetic intensity (FLOP per HBM byte)",
        y: "TFLOP/s",
        log_x: true,
        log_y: true,
        x_unit: Unit::Plain,
        y_unit: Unit::Plain,
        x_names: &[],
    };
    chart("tflops_vs_intensity.svg", axes, curves)
}

/// One roof per distinct `(peak_tflops, hbm_gbps)` of `rows`: the
/// bandwidth slope `intensity × GB/s / 1000` up to the ridge, then the
/// peak, over the rows' intensities widened 4× each way.
fn roofs(rows: &[&Row], first_color: usize) -> Vec<Curve> {
    let intensities: Vec<f64> = rows.iter().filter_map(|r| intensity(r)).collect();
    let low = intensities.iter().copied().fold(f64::INFINITY, f64::min) / 4.0;
    let high = intensities.iter().copied().fold(0.0, f64::max) * 4.0;
    let mut machines: Vec<(f64, f64)> = Vec::new();
    let machine = |row: &&Row| {
        let peak = row.number(names::PEAK_TFLOPS).filter(|p| *p > 0.0)?;
        Some((peak, row.number(names::HBM_GBPS).filter(|g| *g > 0.0)?))
    };
    for found in rows.iter().filter_map(machine) {
        if !machines.contains(&found) {
            machines.push(found);
        }
    }
    (first_color..)
        .zip(machines)
        .filter(|_| low < high)
        .map(|(color, (peak, gbps))| {
            let roof = |x: f64| (x * gbps / 1e3).min(peak);
            let ridge = peak * 1e3 / gbps;
            let mut xs = vec![low, high];
            if low < ridge && ridge < high {
                xs.insert(1, ridge);
            }
            Curve {
                label: format!("roof: peak {peak:.1} TFLOP/s, HBM {gbps:.1} GB/s"),
                points: xs.into_iter().map(|x| (x, roof(x))).collect(),
                style: Style::Dashed,
                color,
            }
        })
        .collect()
}

fn simulated_vs_theoretical(groups: &Groups<'_>) -> Option<Svg> {
    let mut curves: Vec<Curve> = groups
        .iter()
        .enumerate()
        .map(|(color, (label, members))| {
            curve(
                label,
                members,
                roofline_us,
                simulated_us,
                Style::Markers,
                color,
            )
        })
        .collect();
    let times = curves
        .iter()
        .flat_map(|c| c.points.iter().flat_map(|p| [p.0, p.1]));
    let (low, high) = times.fold((f64::INFINITY, 0.0f64), |(l, h), t| (l.min(t), h.max(t)));
    if low < high {
        curves.push(Curve {
            label: "simulated = theoretical".to_owned(),
            points: vec![(low, low), (high, high)],
            style: Style::Dashed,
            color: groups.len(),
        });
    }
    let axes = Axes {
        title: "GEMM simulated vs theoretical (roofline) time",
        x: "roofline bound",
        y: "simulated",
        log_x: true,
        log_y: true,
        x_unit: Unit::TimeUs,
        y_unit: Unit::TimeUs,
        x_names: &[],
    };
    chart("simulated_vs_theoretical.svg", axes, curves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::results::Fields;
    use crate::workloads::Value;

    /// A GEMM row of `shape` with `flops`, `time_ps` and a roofline bound.
    fn row(shape: &str, flops: u64, time_ps: f64, bound_ps: u64, hbm_bytes: u64) -> Row {
        let tflops = |ps: f64| flops as f64 / ps;
        Row {
            explain: None,
            index: 0,
            workload: "gemm".to_owned(),
            point: Fields(vec![("shape".to_owned(), shape.to_owned())]),
            verify_data: false,
            error: None,
            simulated_ps: Some(1),
            checks_passed: 0,
            checks_failed: 0,
            figures: Fields(vec![
                ("flops".to_owned(), Value::Int(flops)),
                ("achieved_tflops".to_owned(), Value::Real(tflops(time_ps))),
                ("peak_tflops".to_owned(), Value::Real(10.0)),
                ("roofline_ps".to_owned(), Value::Int(bound_ps)),
                (
                    "roofline_tflops".to_owned(),
                    Value::Real(tflops(bound_ps as f64)),
                ),
                ("hbm_bytes".to_owned(), Value::Int(hbm_bytes)),
                ("hbm_gbps".to_owned(), Value::Real(1000.0)),
            ]),
        }
    }

    #[test]
    fn gemm_rows_give_three_figures_with_derived_points() {
        let rows = [
            row("8x8x8", 1024, 2000.0, 1000, 64),
            row("16x16x16", 8192, 4000.0, 1000, 128),
        ];
        let rows: Vec<&Row> = rows.iter().collect();
        assert!(is_gemm(&rows));
        let files: Vec<_> = figures(&rows).into_iter().map(|s| s.file).collect();
        assert_eq!(
            files,
            [
                "time_vs_shape.svg",
                "tflops_vs_intensity.svg",
                "simulated_vs_theoretical.svg"
            ]
        );
        // 1024 FLOP at 1024 / 2000 TFLOP/s: 2000 ps = 0.002 us.
        let simulated = simulated_us(rows[0]).unwrap();
        assert!((simulated - 0.002).abs() < 1e-12, "{simulated}");
        assert_eq!(intensity(rows[1]), Some(64.0));
        // Peak 10 TFLOP/s at 1000 GB/s: ridge at 10 FLOP/B; intensities 16
        // and 64 widened to 4..256, so the roof is 4, then flat at 10.
        let roof = &roofs(&rows, 1)[0];
        assert_eq!(roof.points, [(4.0, 4.0), (10.0, 10.0), (256.0, 10.0)]);
    }

    #[test]
    fn rows_without_gemm_figures_are_not_gemm() {
        let mut plain = row("8x8x8", 1024, 2000.0, 1000, 64);
        plain.figures = Fields(vec![("flops".to_owned(), Value::Int(1))]);
        assert!(!is_gemm(&[&plain]));
    }
}
