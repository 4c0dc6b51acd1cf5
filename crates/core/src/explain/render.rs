//! The text form of an [`Explanation`](super::Explanation): the interval,
//! the critical path (merged, repeated patterns folded), the attribution,
//! the utilisation and the model gap.

use std::fmt;

use super::{Explanation, PATH_LINES, PathLine, TOP, percent};
use crate::sim::SimDuration;

fn time(ps: u64) -> SimDuration {
    SimDuration::from_ps(ps)
}

impl fmt::Display for PathLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = &self.steps[0];
        if self.times == 1 && self.steps.len() == 1 {
            let count = match first.count {
                1 => String::new(),
                n => format!("{n} × "),
            };
            return write!(
                f,
                "{:>14} {:>14}  {count}{} {} {}",
                time(first.start_ps).to_string(),
                time(first.duration_ps).to_string(),
                first.class,
                first.kind,
                first.component
            );
        }
        let pattern: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{} {} {}", s.class, s.kind, s.component))
            .collect();
        write!(
            f,
            "{:>14} {:>14}  {} × [{}]",
            time(first.start_ps).to_string(),
            time(self.duration_ps).to_string(),
            self.times,
            pattern.join(" → ")
        )
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.duration_ps;
        writeln!(f, "explain: {}", self.interval)?;
        writeln!(
            f,
            "  interval {} .. {} = {} ({} ps)",
            time(self.start_ps),
            time(self.end_ps),
            time(d),
            d
        )?;
        if let Some(bound) = &self.bound {
            writeln!(f, "  physical bound (ADR-0086): {}", bound.detail)?;
        }
        writeln!(
            f,
            "  critical path ({} steps; earliest first; same classes repeated folded):",
            self.critical_path_steps
        )?;
        writeln!(f, "  {:>14} {:>14}  what", "start", "duration")?;
        self.write_path(f)?;
        writeln!(
            f,
            "  attribution of the critical path by class (sums to the interval):"
        )?;
        for share in self.by_class.iter().filter(|s| s.ps > 0) {
            writeln!(
                f,
                "    {:<16} {:>14} {:>6.1} %",
                share.name,
                time(share.ps).to_string(),
                percent(share.ps, d)
            )?;
        }
        writeln!(f, "  top components on the critical path:")?;
        for component in self.top_components() {
            writeln!(
                f,
                "    {:>14} {:>6.1} %  {} ({})",
                time(component.ps).to_string(),
                percent(component.ps, d),
                component.name,
                component.class
            )?;
        }
        self.write_faults(f)?;
        self.write_shared_links(f)?;
        self.write_usage(f)?;
        self.write_model_gap(f)
    }
}

impl Explanation {
    /// The critical path's lines, the middle elided past [`PATH_LINES`]
    /// (or where the explanation left it out).
    fn write_path(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines = &self.critical_path;
        let (head, hidden, tail) = match &self.critical_path_elided {
            Some(elided) => {
                let half = lines.len() / 2;
                (&lines[..half], (elided.lines, elided.ps), &lines[half..])
            }
            None if lines.len() > PATH_LINES => {
                let half = PATH_LINES / 2;
                let middle = &lines[half..lines.len() - half];
                let ps = middle.iter().map(|l| l.duration_ps).sum();
                (
                    &lines[..half],
                    (middle.len() as u64, ps),
                    &lines[lines.len() - half..],
                )
            }
            None => (&lines[..], (0, 0), &lines[..0]),
        };
        for line in head {
            writeln!(f, "  {line}")?;
        }
        if hidden.0 > 0 {
            writeln!(
                f,
                "  {:>14} {:>14}  ... {} lines more",
                "",
                time(hidden.1).to_string(),
                hidden.0
            )?;
        }
        for line in tail {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }

    /// Each fault's time on the path (a degraded machine only).
    fn write_faults(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.faults.is_empty() {
            return Ok(());
        }
        writeln!(f, "  faults (ADR-0106) on the critical path:")?;
        for share in &self.faults {
            writeln!(
                f,
                "    {:>14} {:>6.1} %  {} ({})",
                time(share.ps).to_string(),
                percent(share.ps, self.duration_ps),
                share.name,
                share.class
            )?;
        }
        Ok(())
    }

    /// The links a job of `run --jobs` shares with others, with their
    /// time on the path (ADR-0116).
    fn write_shared_links(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shared_links.is_empty() {
            return Ok(());
        }
        writeln!(
            f,
            "  links shared with other jobs (ADR-0116), time on the critical path:"
        )?;
        for share in self.shared_links.iter().take(TOP) {
            writeln!(
                f,
                "    {:>14} {:>6.1} %  {}",
                time(share.ps).to_string(),
                percent(share.ps, self.duration_ps),
                share.name
            )?;
        }
        let more = &self.shared_links[self.shared_links.len().min(TOP)..];
        if !more.is_empty() {
            let ps: u64 = more.iter().map(|s| s.ps).sum();
            writeln!(
                f,
                "    {:>14} {:>6.1} %  ... {} links more",
                time(ps).to_string(),
                percent(ps, self.duration_ps),
                more.len()
            )?;
        }
        Ok(())
    }

    /// Utilisation by class and the busiest links and units.
    fn write_usage(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  utilisation over the interval, by class:")?;
        writeln!(
            f,
            "    {:<16} {:>6} {:>14} {:>14} {:>9} {:>14}",
            "class", "busy", "bytes", "busy time", "max busy", "queued (sum)"
        )?;
        for class in &self.utilisation {
            writeln!(
                f,
                "    {:<16} {:>6} {:>14} {:>14} {:>8.1}% {:>14}",
                class.class,
                class.busy_servers,
                class.bytes,
                time(class.busy_ps).to_string(),
                class.max_busy_fraction * 100.0,
                time(class.queue_ps).to_string()
            )?;
        }
        writeln!(
            f,
            "  busiest links and units (busy over the interval; queueing summed over every waiter, so it can pass the interval):"
        )?;
        for usage in &self.busiest {
            writeln!(
                f,
                "    {:>6.1}% {:>14} {:>12} B  waiters queued {:>12} in sum  {} ({})",
                usage.busy_fraction * 100.0,
                time(usage.busy_ps).to_string(),
                usage.bytes,
                time(usage.queue_ps).to_string(),
                usage.name,
                usage.class
            )?;
        }
        Ok(())
    }

    /// The gap to the α-β model, if there is one: its signed terms, which
    /// sum to it.
    fn write_model_gap(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(gap) = &self.model_gap else {
            return Ok(());
        };
        writeln!(
            f,
            "  model gap: simulated {} vs α-β model {} ({}); the path spends {} on link service and latency; the gap's terms (they sum to it):",
            time(self.duration_ps),
            time(gap.model_ps),
            signed(gap.gap_ps),
            time(gap.link_transfer_ps)
        )?;
        for term in &gap.terms {
            writeln!(
                f,
                "    {:>15}  {} (mostly {})",
                signed(term.ps),
                term.what,
                term.mostly
            )?;
        }
        Ok(())
    }
}

/// A signed time, `+` or `−` before its magnitude.
fn signed(ps: i64) -> String {
    let sign = if ps < 0 { '−' } else { '+' };
    format!("{sign}{}", time(ps.unsigned_abs()))
}
