//! The text table a sweep prints: nccl-tests' columns for collective
//! workloads (those reporting `busbw_gbps`), a compact one otherwise.
//!
//! nccl-tests prints `size count type redop root time algbw busbw #wrong`
//! per size; here one block per combination of the other swept values
//! (`# algorithm=ring_allreduce`), `#wrong` is the number of failed checks
//! (`N/A` when data was off, as nccl-tests prints with `-c 0`), and a point
//! that failed shows its reason in place of its figures.

use std::fmt::Write;

use super::results::Row;
use crate::workloads::Value;

/// The figure names collective workloads report (see the workload author
/// guide): bytes per rank, the collective's time, nccl-tests' bandwidths.
pub mod names {
    /// Bytes per rank.
    pub const BYTES: &str = "bytes_per_rank";
    /// Elements per rank.
    pub const COUNT: &str = "count";
    /// Element type.
    pub const DTYPE: &str = "dtype";
    /// Reduction.
    pub const OP: &str = "op";
    /// The root rank of a rooted call (`broadcast`, `reduce`).
    pub const ROOT: &str = "root";
    /// The collective's time, in ps (else the first other `*_ps` figure).
    pub const TIME: &str = "time_ps";
    /// An algorithm's cost model of that time, in ps.
    pub const MODEL: &str = "model_ps";
    /// nccl-tests' algorithm bandwidth, GB/s.
    pub const ALGBW: &str = "algbw_gbps";
    /// nccl-tests' bus bandwidth, GB/s.
    pub const BUSBW: &str = "busbw_gbps";
    /// The swept size parameter.
    pub const SIZE: &str = "size";
    /// GEMM: floating-point operations, `2MKN`.
    pub const FLOPS: &str = "flops";
    /// GEMM: `flops` over the simulated time of the timed part, TFLOP/s.
    pub const ACHIEVED_TFLOPS: &str = "achieved_tflops";
    /// GEMM: the compute units' peak, TFLOP/s.
    pub const PEAK_TFLOPS: &str = "peak_tflops";
    /// GEMM: the roofline's lower bound of the timed part, in ps.
    pub const ROOFLINE: &str = "roofline_ps";
    /// GEMM: `flops` over `roofline_ps`, TFLOP/s.
    pub const ROOFLINE_TFLOPS: &str = "roofline_tflops";
    /// GEMM: bytes read from and written to HBM.
    pub const HBM_BYTES: &str = "hbm_bytes";
    /// GEMM: the HBM bandwidth the roofline assumes, GB/s.
    pub const HBM_GBPS: &str = "hbm_gbps";
    /// The swept parameters that set a GEMM's dimensions.
    pub const GEMM_DIMENSIONS: [&str; 4] = ["shape", "m", "k", "n"];
}

/// Whether `rows` are of a collective workload.
pub fn is_collective(rows: &[&Row]) -> bool {
    rows.iter().any(|r| r.figures.get(names::BUSBW).is_some())
}

/// The table of `rows`, in their order.
pub fn render(rows: &[&Row]) -> String {
    if is_collective(rows) {
        collective(rows)
    } else {
        compact(rows)
    }
}

/// The block label of a row: its swept values except the size.
pub fn group(row: &Row) -> String {
    let others: Vec<_> = row
        .point
        .0
        .iter()
        .filter(|(name, _)| name != names::SIZE)
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    format!("{} {}", row.workload, others.join(" "))
        .trim_end()
        .to_owned()
}

fn collective(rows: &[&Row]) -> String {
    let mut out = String::new();
    let mut current = None;
    for row in rows {
        let label = group(row);
        if current.as_ref() != Some(&label) {
            let _ = writeln!(out, "# {label}");
            let _ = writeln!(
                out,
                "#{:>11} {:>12} {:>6} {:>6} {:>5} {:>11} {:>8} {:>8} {:>7}",
                "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"
            );
            let _ = writeln!(
                out,
                "#{:>11} {:>12} {:>6} {:>6} {:>5} {:>11} {:>8} {:>8} {:>7}",
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""
            );
            current = Some(label);
        }
        let size = row
            .figures
            .get(names::BYTES)
            .map(Value::to_string)
            .or_else(|| row.point.get(names::SIZE).cloned())
            .unwrap_or_else(|| "-".to_owned());
        if let Some(error) = &row.error {
            let _ = writeln!(out, " {size:>11}  error: {error}");
            continue;
        }
        let text = |name| {
            row.figures
                .get(name)
                .map_or_else(|| "-".to_owned(), Value::to_string)
        };
        let gbps = |name| {
            row.number(name)
                .map_or("-".to_owned(), |x| format!("{x:.3}"))
        };
        let _ = writeln!(
            out,
            " {size:>11} {:>12} {:>6} {:>6} {:>5} {:>11} {:>8} {:>8} {:>7}",
            text(names::COUNT),
            text(names::DTYPE),
            text(names::OP),
            row.figures
                .get(names::ROOT)
                .map_or_else(|| "-1".to_owned(), Value::to_string),
            super::figures::time_us(row).map_or("-".to_owned(), |us| format!("{us:.3}")),
            gbps(names::ALGBW),
            gbps(names::BUSBW),
            wrong(row),
        );
    }
    out
}

/// nccl-tests' `#wrong`: failed checks, `N/A` when nothing was checked.
fn wrong(row: &Row) -> String {
    if row.verify_data {
        row.checks_failed.to_string()
    } else {
        "N/A".to_owned()
    }
}

/// Swept values, simulated time, checks and the rate figures.
fn compact(rows: &[&Row]) -> String {
    const RATES: [&str; 4] = [
        names::ACHIEVED_TFLOPS,
        names::ROOFLINE_TFLOPS,
        names::PEAK_TFLOPS,
        "efficiency",
    ];
    let mut out = String::new();
    let shown: Vec<_> = RATES
        .into_iter()
        .filter(|name| rows.iter().any(|r| r.figures.get(name).is_some()))
        .collect();
    let mut header = format!("# {:<32} {:>14} {:>7}", "run", "simulated(us)", "#wrong");
    shown.iter().for_each(|name| {
        let _ = write!(header, " {name:>16}");
    });
    let _ = writeln!(out, "{header}");
    for row in rows {
        let point: Vec<_> = row
            .point
            .0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        let run = format!("{} {}", row.workload, point.join(" "));
        if let Some(error) = &row.error {
            let _ = writeln!(out, "  {run:<32} error: {error}");
            continue;
        }
        let us = row.simulated_ps.map_or(0.0, |ps| ps as f64 / 1e6);
        let _ = write!(out, "  {run:<32} {us:>14.3} {:>7}", wrong(row));
        for name in &shown {
            let value = row
                .number(name)
                .map_or("-".to_owned(), |x| format!("{x:.3}"));
            let _ = write!(out, " {value:>16}");
        }
        out.push('\n');
    }
    out
}
