//! The probe's results: the invariant checks over the cases, a readable
//! table and the JSON form.

use std::fmt;

use super::CaseResult;
use crate::sim::SimDuration;

/// One automatic invariant check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// Whether it held (`None`: not applicable to this machine).
    pub passed: Option<bool>,
    /// The figures behind the verdict.
    pub detail: String,
}

/// All cases and checks of one probe run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProbeReport {
    /// Every case, in catalogue order.
    pub cases: Vec<CaseResult>,
    /// Every check.
    pub checks: Vec<Check>,
    /// Whether no check failed.
    pub passed: bool,
}

impl ProbeReport {
    /// Judges `cases`.
    pub fn new(cases: Vec<CaseResult>) -> ProbeReport {
        let checks = vec![
            formula_matches(&cases),
            grows(&cases, "time grows with size", "size/"),
            grows(&cases, "time grows with load", "load/"),
            at_least(
                &cases,
                "D2H >= H2D",
                &[("d2h_best", "h2d_best"), ("d2h_worst", "h2d_worst")],
            ),
            best_below_worst(&cases),
            grows_with_distance(&cases),
        ];
        let passed = checks.iter().all(|c| c.passed != Some(false));
        ProbeReport {
            cases,
            checks,
            passed,
        }
    }

    /// The case named `name`.
    pub fn case(&self, name: &str) -> Option<&CaseResult> {
        find(&self.cases, name)
    }
}

fn find<'a>(cases: &'a [CaseResult], name: &str) -> Option<&'a CaseResult> {
    cases.iter().find(|c| c.name == name)
}

fn check(name: &str, passed: Option<bool>, detail: String) -> Check {
    Check {
        name: name.to_owned(),
        passed,
        detail,
    }
}

fn formula_matches(cases: &[CaseResult]) -> Check {
    let uncontended: Vec<_> = cases.iter().filter(|c| !c.contended).collect();
    let off: Vec<String> = uncontended
        .iter()
        .filter(|c| c.actual_ps != c.formula_ps)
        .map(|c| {
            format!(
                "{}: formula {} ps, actual {} ps",
                c.name, c.formula_ps, c.actual_ps
            )
        })
        .collect();
    let detail = if off.is_empty() {
        format!(
            "{} uncontended cases agree to the picosecond",
            uncontended.len()
        )
    } else {
        off.join("; ")
    };
    check(
        "formula = actual (uncontended)",
        Some(off.is_empty()),
        detail,
    )
}

/// The cases whose names start with `prefix` (in catalogue order, which
/// is ascending size or load) take strictly longer one after another.
fn grows(cases: &[CaseResult], name: &str, prefix: &str) -> Check {
    let series: Vec<&CaseResult> = cases
        .iter()
        .filter(|c| c.name.starts_with(prefix))
        .collect();
    if series.len() < 2 {
        return check(
            name,
            None,
            "fewer than two points on this machine".to_owned(),
        );
    }
    let ok = series.windows(2).all(|w| w[1].actual_ps > w[0].actual_ps);
    let points: Vec<String> = series
        .iter()
        .map(|c| format!("{}={}", c.name, SimDuration::from_ps(c.actual_ps)))
        .collect();
    check(name, Some(ok), points.join(", "))
}

/// `later` takes at least as long as `earlier` for every pair present.
fn at_least(cases: &[CaseResult], name: &str, pairs: &[(&str, &str)]) -> Check {
    let mut results = Vec::new();
    for &(longer, shorter) in pairs {
        if let (Some(a), Some(b)) = (find(cases, longer), find(cases, shorter)) {
            let ok = a.actual_ps >= b.actual_ps;
            results.push((ok, format!("{longer} {} vs {shorter} {}", ps(a), ps(b))));
        }
    }
    verdict(name, results)
}

fn best_below_worst(cases: &[CaseResult]) -> Check {
    let pairs = [
        ("h2d_best", "h2d_worst"),
        ("d2h_best", "d2h_worst"),
        ("pe_dma_local", "pe_dma_far"),
    ];
    let mut results = Vec::new();
    for (best, worst) in pairs {
        if let (Some(b), Some(w)) = (find(cases, best), find(cases, worst))
            && b.route != w.route
        {
            let ok = b.actual_ps < w.actual_ps;
            results.push((ok, format!("{best} {} < {worst} {}", ps(b), ps(w))));
        }
    }
    verdict("best < worst", results)
}

/// PE DMA reads take longer the farther the HBM: local, neighbour, far,
/// other SIP (the ones the machine has).
fn grows_with_distance(cases: &[CaseResult]) -> Check {
    let names = [
        "pe_dma_local",
        "pe_dma_neighbour",
        "pe_dma_far",
        "pe_dma_other_sip",
    ];
    let series: Vec<&CaseResult> = names.iter().filter_map(|n| find(cases, n)).collect();
    let results = series
        .windows(2)
        .map(|w| {
            let ok = w[0].actual_ps < w[1].actual_ps;
            (
                ok,
                format!("{} {} < {} {}", w[0].name, ps(w[0]), w[1].name, ps(w[1])),
            )
        })
        .collect();
    verdict("PE DMA time grows with distance", results)
}

fn verdict(name: &str, results: Vec<(bool, String)>) -> Check {
    if results.is_empty() {
        return check(name, None, "no pair on this machine".to_owned());
    }
    let ok = results.iter().all(|(ok, _)| *ok);
    let detail: Vec<String> = results.into_iter().map(|(_, d)| d).collect();
    check(name, Some(ok), detail.join("; "))
}

fn ps(case: &CaseResult) -> SimDuration {
    SimDuration::from_ps(case.actual_ps)
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<18} {:>9} {:>4} {:>14} {:>14} {:>9}  {:<28} bottleneck",
            "case", "bytes", "load", "formula", "actual", "GB/s", "route"
        )?;
        for c in &self.cases {
            writeln!(
                f,
                "{:<18} {:>9} {:>4} {:>14} {:>14} {:>9.2}  {:<28} {}",
                c.name,
                c.bytes,
                c.load,
                SimDuration::from_ps(c.formula_ps).to_string(),
                SimDuration::from_ps(c.actual_ps).to_string(),
                c.bandwidth_gbps,
                c.route,
                c.bottleneck
            )?;
        }
        writeln!(f)?;
        for check in &self.checks {
            let verdict = match check.passed {
                Some(true) => "PASS",
                Some(false) => "FAIL",
                None => "SKIP",
            };
            writeln!(f, "{verdict}  {}: {}", check.name, check.detail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Category;

    fn case(name: &str, formula: u64, actual: u64, load: u32) -> CaseResult {
        CaseResult {
            name: name.to_owned(),
            category: Category::PeDma,
            bytes: 64,
            load,
            contended: load > 1,
            formula_ps: formula,
            actual_ps: actual,
            bandwidth_gbps: 0.0,
            bottleneck: "-".to_owned(),
            route: name.to_owned(),
        }
    }

    #[test]
    fn a_formula_mismatch_fails_the_report() {
        let report = ProbeReport::new(vec![case("pe_dma_local", 100, 101, 1)]);
        assert!(!report.passed);
        assert!(report.to_string().contains("FAIL  formula = actual"));
    }

    #[test]
    fn shrinking_with_load_fails_and_missing_pairs_skip() {
        let report = ProbeReport::new(vec![
            case("load/1", 100, 100, 1),
            case("load/2", 100, 90, 2),
        ]);
        assert!(!report.passed);
        let skipped = report.checks.iter().filter(|c| c.passed.is_none()).count();
        assert_eq!(
            skipped, 4,
            "size, D2H/H2D, best/worst and distance have no data"
        );
    }
}
