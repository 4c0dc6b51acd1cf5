//! Virtual time: integer picoseconds, never floating point, never wall-clock.
//!
//! [`SimTime`] is a point on the simulated timeline, [`SimDuration`] a span of
//! it. Both wrap a `u64` of picoseconds (enough for 213 days). Arithmetic that
//! would overflow or go negative is reported as a [`TimeError`] by the
//! `checked_*` methods; the operator forms (`+`, `-`) panic with a clear
//! message instead of wrapping, because an overflowing clock is always a bug.

use std::fmt;
use std::ops::{Add, AddAssign, Mul, Sub};

/// Picoseconds per nanosecond.
pub const PS_PER_NS: u64 = 1_000;
/// Picoseconds per microsecond.
pub const PS_PER_US: u64 = 1_000_000;
/// Picoseconds per millisecond.
pub const PS_PER_MS: u64 = 1_000_000_000;
/// Picoseconds per second.
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// Virtual-time arithmetic that left the representable range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// A sum or product exceeded `u64::MAX` picoseconds.
    #[error("virtual time overflow: {0} does not fit in u64 picoseconds")]
    Overflow(String),
    /// A subtraction would have produced a negative span.
    #[error("negative virtual duration: {later} is before {earlier}")]
    Negative {
        /// The operand that was expected to be the later one.
        later: SimTime,
        /// The operand that was expected to be the earlier one.
        earlier: SimTime,
    },
}

/// A span of virtual time in integer picoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(u64);

/// A point in virtual time, in integer picoseconds since the start of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

fn scaled(value: u64, ps_per_unit: u64, unit: &str) -> u64 {
    value
        .checked_mul(ps_per_unit)
        .unwrap_or_else(|| panic!("{value} {unit} overflows u64 picoseconds"))
}

impl SimDuration {
    /// The empty span.
    pub const ZERO: SimDuration = SimDuration(0);
    /// The largest representable span.
    pub const MAX: SimDuration = SimDuration(u64::MAX);

    /// A span of `ps` picoseconds.
    pub const fn from_ps(ps: u64) -> Self {
        SimDuration(ps)
    }
    /// A span of `ns` nanoseconds. Panics if it overflows.
    pub fn from_ns(ns: u64) -> Self {
        SimDuration(scaled(ns, PS_PER_NS, "ns"))
    }
    /// A span of `us` microseconds. Panics if it overflows.
    pub fn from_us(us: u64) -> Self {
        SimDuration(scaled(us, PS_PER_US, "us"))
    }
    /// A span of `ms` milliseconds. Panics if it overflows.
    pub fn from_ms(ms: u64) -> Self {
        SimDuration(scaled(ms, PS_PER_MS, "ms"))
    }
    /// The span in picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// The span in (fractional) nanoseconds, for reports only.
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / PS_PER_NS as f64
    }
    /// The span in (fractional) seconds, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }
    /// `self + rhs`, or an error on overflow.
    pub fn checked_add(self, rhs: SimDuration) -> Result<SimDuration, TimeError> {
        self.0
            .checked_add(rhs.0)
            .map(SimDuration)
            .ok_or_else(|| TimeError::Overflow(format!("{self} + {rhs}")))
    }
    /// `self * n`, or an error on overflow.
    pub fn checked_mul(self, n: u64) -> Result<SimDuration, TimeError> {
        self.0
            .checked_mul(n)
            .map(SimDuration)
            .ok_or_else(|| TimeError::Overflow(format!("{self} * {n}")))
    }
}

impl SimTime {
    /// The start of every simulation.
    pub const ZERO: SimTime = SimTime(0);
    /// The last representable instant.
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// The instant `ps` picoseconds after the start.
    pub const fn from_ps(ps: u64) -> Self {
        SimTime(ps)
    }
    /// The instant `ns` nanoseconds after the start. Panics if it overflows.
    pub fn from_ns(ns: u64) -> Self {
        SimTime(scaled(ns, PS_PER_NS, "ns"))
    }
    /// The instant `us` microseconds after the start. Panics if it overflows.
    pub fn from_us(us: u64) -> Self {
        SimTime(scaled(us, PS_PER_US, "us"))
    }
    /// The instant `ms` milliseconds after the start. Panics if it overflows.
    pub fn from_ms(ms: u64) -> Self {
        SimTime(scaled(ms, PS_PER_MS, "ms"))
    }
    /// Picoseconds since the start.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Microseconds since the start, as a float (Chrome trace `ts` unit).
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / PS_PER_US as f64
    }
    /// `self + d`, or an error on overflow.
    pub fn checked_add(self, d: SimDuration) -> Result<SimTime, TimeError> {
        self.0
            .checked_add(d.0)
            .map(SimTime)
            .ok_or_else(|| TimeError::Overflow(format!("{self} + {d}")))
    }
    /// The span from `earlier` to `self`, or an error if `earlier` is later.
    pub fn checked_since(self, earlier: SimTime) -> Result<SimDuration, TimeError> {
        self.0
            .checked_sub(earlier.0)
            .map(SimDuration)
            .ok_or(TimeError::Negative {
                later: self,
                earlier,
            })
    }
    /// The span from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, d: SimDuration) -> SimTime {
        self.checked_add(d).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        *self = *self + d;
    }
}

impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    fn sub(self, earlier: SimTime) -> SimDuration {
        self.checked_since(earlier)
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, rhs: SimDuration) -> SimDuration {
        self.checked_add(rhs).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl AddAssign for SimDuration {
    fn add_assign(&mut self, rhs: SimDuration) {
        *self = *self + rhs;
    }
}

impl Mul<u64> for SimDuration {
    type Output = SimDuration;
    fn mul(self, n: u64) -> SimDuration {
        self.checked_mul(n).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Writes `ps` with the largest unit that keeps it at or above 1, keeping
/// every picosecond: `1.5 us`, `64 ps`, `228 us`, `1.040796 ms`.
fn fmt_ps(ps: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    const UNITS: [(u64, &str); 4] = [
        (PS_PER_S, "s"),
        (PS_PER_MS, "ms"),
        (PS_PER_US, "us"),
        (PS_PER_NS, "ns"),
    ];
    for (scale, unit) in UNITS {
        if ps >= scale {
            let whole = ps / scale;
            let frac = ps % scale;
            if frac == 0 {
                return write!(f, "{whole} {unit}");
            }
            let digits = scale.ilog10() as usize;
            let frac = format!("{frac:0digits$}");
            return write!(f, "{whole}.{} {unit}", frac.trim_end_matches('0'));
        }
    }
    write!(f, "{ps} ps")
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ps(self.0, f)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("t=")?;
        fmt_ps(self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_scale_to_picoseconds() {
        assert_eq!(SimDuration::from_ns(8).as_ps(), 8_000);
        assert_eq!(SimDuration::from_us(3).as_ps(), 3_000_000);
        assert_eq!(SimDuration::from_ms(2).as_ps(), 2_000_000_000);
        assert_eq!(SimTime::from_us(1).as_ps(), 1_000_000);
    }

    #[test]
    fn display_keeps_every_picosecond() {
        assert_eq!(SimDuration::from_ps(64).to_string(), "64 ps");
        assert_eq!(SimDuration::from_ps(1_500_000).to_string(), "1.5 us");
        assert_eq!(
            SimDuration::from_ps(1_040_796_000).to_string(),
            "1.040796 ms"
        );
        assert_eq!(SimDuration::from_ps(1_000_001).to_string(), "1.000001 us");
        assert_eq!(SimTime::from_ns(228).to_string(), "t=228 ns");
        assert_eq!(SimDuration::ZERO.to_string(), "0 ps");
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        let late = SimTime::from_ps(u64::MAX - 1);
        assert!(matches!(
            late.checked_add(SimDuration::from_ps(2)),
            Err(TimeError::Overflow(_))
        ));
        assert!(SimDuration::MAX.checked_mul(2).is_err());
    }

    #[test]
    fn negative_span_is_an_error() {
        let err = SimTime::from_ns(1)
            .checked_since(SimTime::from_ns(2))
            .unwrap_err();
        assert!(err.to_string().contains("t=1 ns is before t=2 ns"), "{err}");
        assert_eq!(
            SimTime::from_ns(1).saturating_since(SimTime::from_ns(2)),
            SimDuration::ZERO
        );
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn operator_add_panics_on_overflow() {
        let _ = SimTime::MAX + SimDuration::from_ps(1);
    }
}
