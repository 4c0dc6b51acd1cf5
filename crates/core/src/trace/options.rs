//! What a trace keeps: a window of virtual time and a filter on component
//! (track) names, so that a long or wide run still gives a file a viewer
//! can open. Both parse from the text a user types (`--trace-window`,
//! `--trace-filter`).

use std::fmt;
use std::str::FromStr;

use glob::Pattern;

use crate::config::units::{UnitError, parse_duration};
use crate::sim::SimTime;

/// Which events a trace keeps; the default keeps everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// Keep only events that overlap this window of virtual time.
    pub window: TraceWindow,
    /// Keep only events on tracks this filter accepts.
    pub filter: ComponentFilter,
}

impl TraceOptions {
    /// Whether an event on `track` from `start` to `end` is kept.
    pub fn keeps(&self, track: &str, start: SimTime, end: SimTime) -> bool {
        self.window.overlaps(start, end) && self.filter.keeps(track)
    }
}

/// A closed window of virtual time, `START..END`, either end open.
///
/// Written with units, as durations since time zero: `10us..25.5us`,
/// `..2ms` (from the start), `150ns..` (to the end). An event is kept if it
/// overlaps the window, and is written whole (not clipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceWindow {
    start: Option<SimTime>,
    end: Option<SimTime>,
}

impl TraceWindow {
    /// The window from `start` to `end` (`None`: unbounded on that side).
    pub fn new(start: Option<SimTime>, end: Option<SimTime>) -> Result<Self, TraceOptionError> {
        if let (Some(start), Some(end)) = (start, end)
            && start > end
        {
            return Err(TraceOptionError::ReversedWindow { start, end });
        }
        Ok(TraceWindow { start, end })
    }

    /// Whether `[start, end]` and the window share an instant.
    pub fn overlaps(&self, start: SimTime, end: SimTime) -> bool {
        self.start.is_none_or(|from| end >= from) && self.end.is_none_or(|to| start <= to)
    }
}

impl FromStr for TraceWindow {
    type Err = TraceOptionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (start, end) = text
            .split_once("..")
            .ok_or_else(|| TraceOptionError::WindowSyntax(text.to_owned()))?;
        let bound = |side: &str| -> Result<Option<SimTime>, TraceOptionError> {
            let side = side.trim();
            if side.is_empty() {
                return Ok(None);
            }
            let since_zero = parse_duration(side).map_err(|source| TraceOptionError::Bound {
                window: text.to_owned(),
                source,
            })?;
            Ok(Some(SimTime::ZERO + since_zero))
        };
        TraceWindow::new(bound(start)?, bound(end)?)
    }
}

impl fmt::Display for TraceWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let since_zero = |at: Option<SimTime>| at.map(|t| t.saturating_since(SimTime::ZERO));
        if let Some(start) = since_zero(self.start) {
            write!(f, "{start}")?;
        }
        f.write_str("..")?;
        if let Some(end) = since_zero(self.end) {
            write!(f, "{end}")?;
        }
        Ok(())
    }
}

/// Which tracks (component names) a trace keeps: comma-separated glob
/// patterns (`*`, `?`, `[...]`), e.g. `sip0.*,host*`. A track is kept if it
/// matches one of the plain patterns (or there are none) and none of the
/// patterns written with a leading `!`: `!*->*` drops every link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentFilter {
    keep: Vec<Pattern>,
    drop: Vec<Pattern>,
}

impl ComponentFilter {
    /// Whether events on `track` are kept.
    pub fn keeps(&self, track: &str) -> bool {
        let matches = |patterns: &[Pattern]| patterns.iter().any(|p| p.matches(track));
        (self.keep.is_empty() || matches(&self.keep)) && !matches(&self.drop)
    }
}

impl FromStr for ComponentFilter {
    type Err = TraceOptionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut filter = ComponentFilter::default();
        for item in text.split(',').map(str::trim) {
            let (list, glob) = match item.strip_prefix('!') {
                Some(glob) => (&mut filter.drop, glob),
                None => (&mut filter.keep, item),
            };
            if glob.is_empty() {
                return Err(TraceOptionError::EmptyPattern(text.to_owned()));
            }
            let pattern = Pattern::new(glob).map_err(|e| TraceOptionError::Pattern {
                pattern: glob.to_owned(),
                reason: e.msg,
            })?;
            list.push(pattern);
        }
        Ok(filter)
    }
}

impl fmt::Display for ComponentFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keep = self.keep.iter().map(|p| p.as_str().to_owned());
        let drop = self.drop.iter().map(|p| format!("!{}", p.as_str()));
        f.write_str(&keep.chain(drop).collect::<Vec<_>>().join(","))
    }
}

/// A `--trace-window` or `--trace-filter` value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TraceOptionError {
    /// No `..` between the two ends.
    #[error(
        "trace window `{0}`: expected START..END with units, e.g. 10us..25us (either end may be left out)"
    )]
    WindowSyntax(String),
    /// One end is not a duration.
    #[error("trace window `{window}`: {source}")]
    Bound { window: String, source: UnitError },
    /// The end comes before the start.
    #[error("trace window: start {start} is after end {end}")]
    ReversedWindow { start: SimTime, end: SimTime },
    /// `a,,b` or a lone `!`.
    #[error(
        "trace filter `{0}`: empty pattern (expected comma-separated globs such as sip0.*,!*->*)"
    )]
    EmptyPattern(String),
    /// Not a glob.
    #[error("trace filter pattern `{pattern}`: {reason}")]
    Pattern {
        pattern: String,
        reason: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_ns(ns: u64) -> SimTime {
        SimTime::from_ns(ns)
    }

    #[test]
    fn windows_parse_with_units_and_open_ends() {
        let window: TraceWindow = "10us..25.5 us".parse().unwrap();
        assert_eq!(window.start, Some(SimTime::from_us(10)));
        assert_eq!(window.end, Some(SimTime::from_ps(25_500_000)));
        let open: TraceWindow = "..2ms".parse().unwrap();
        assert_eq!((open.start, open.end), (None, Some(SimTime::from_ms(2))));
        let to_end: TraceWindow = "150ns..".parse().unwrap();
        assert_eq!((to_end.start, to_end.end), (Some(at_ns(150)), None));
        assert_eq!(to_end.to_string().parse::<TraceWindow>().unwrap(), to_end);
    }

    #[test]
    fn events_are_kept_when_they_overlap_the_window() {
        let window: TraceWindow = "100ns..200ns".parse().unwrap();
        assert!(window.overlaps(at_ns(50), at_ns(100)), "touches the start");
        assert!(window.overlaps(at_ns(150), at_ns(150)), "an instant inside");
        assert!(window.overlaps(at_ns(0), at_ns(1_000)), "covers it");
        assert!(!window.overlaps(at_ns(50), at_ns(99)));
        assert!(!window.overlaps(at_ns(201), at_ns(300)));
        assert!(TraceWindow::default().overlaps(at_ns(7), at_ns(9)));
    }

    #[test]
    fn bad_windows_say_what_was_expected() {
        let error = |text: &str| text.parse::<TraceWindow>().unwrap_err().to_string();
        assert!(
            error("10us").contains("expected START..END"),
            "{}",
            error("10us")
        );
        assert!(error("10..20us").starts_with("trace window `10..20us`: "));
        assert!(
            error("3 GB..").contains("`GB` is a unit of"),
            "{}",
            error("3 GB..")
        );
        assert_eq!(
            error("20us..10us"),
            "trace window: start t=20 us is after end t=10 us"
        );
    }

    #[test]
    fn filters_keep_matches_and_drop_negations() {
        let filter: ComponentFilter = "sip0.*, host*,!*->*".parse().unwrap();
        assert!(filter.keeps("sip0.cube3.pe0"));
        assert!(filter.keeps("host.rank0"));
        assert!(!filter.keeps("sip1.cube0.pe0"));
        assert!(!filter.keeps("sip0.cube0.r0c0->sip0.cube0.r0c1"));
        assert!(!filter.keeps("host->sip0.pcie_ep"));
        let only_drop: ComponentFilter = "!*.hbm.pc*".parse().unwrap();
        assert!(only_drop.keeps("sip1.cube0.pe0"));
        assert!(!only_drop.keeps("sip1.cube0.hbm.pc3"));
        assert_eq!(filter.to_string(), "sip0.*,host*,!*->*");
        assert!(ComponentFilter::default().keeps("anything"));
    }

    #[test]
    fn bad_filters_name_the_pattern() {
        let error = |text: &str| text.parse::<ComponentFilter>().unwrap_err().to_string();
        assert!(error("a,,b").contains("empty pattern"), "{}", error("a,,b"));
        assert!(error("!").contains("empty pattern"));
        assert!(error("sip[0").starts_with("trace filter pattern `sip[0`: "));
    }
}
