//! Physical quantities written the way people write them: `"256 GB/s"`,
//! `"8 ns"`, `"1.5 us"`, `"1 MiB"`, `"1 GHz"`, `"0.9"`.
//!
//! Every quantity is an integer in its base unit (bytes, bytes per second,
//! hertz, picoseconds, parts per million), parsed from decimal digits without
//! floating point: `"25.6 GB/s"` is exactly 25 600 000 000 B/s and
//! `"1.5 us"` exactly 1 500 000 ps. A value that is not a whole number of the
//! base unit (`"0.5 ps"`, `"0.3 B"`) is an error, never rounded.
//!
//! Numbers may use `_` between digits (`16_000 MiB`) and a decimal exponent
//! (`1e9 B/s`, `2.5e-3 s`); the result must still be exact. A leading `-`
//! is refused as negative rather than misread.
//!
//! Decimal prefixes are powers of ten (`GB` = 10^9 B), binary prefixes powers
//! of two (`GiB` = 2^30 B). Units are case-sensitive, so a bit rate such as
//! `Gb/s` is rejected rather than misread as bytes.
//!
//! This module owns the parsing, arithmetic and display of quantities. It
//! knows nothing of YAML files, key paths or the machine being described.

use std::fmt;
use std::marker::PhantomData;
use std::num::{NonZeroU32, NonZeroU64};
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};

use crate::sim::{PS_PER_S, SimDuration, TimeError};

/// A quantity string that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a non-negative decimal number followed by a unit.
    #[error("{text:?} is not {what}: write a number and a unit, e.g. {example:?}")]
    Malformed {
        /// The text as written.
        text: String,
        /// What was expected, e.g. "a bandwidth".
        what: &'static str,
        /// An example of a valid value.
        example: &'static str,
    },
    /// A number without a unit where a unit is required.
    #[error("{text:?} has no unit: expected {what} in {units}")]
    MissingUnit {
        /// The text as written.
        text: String,
        /// What was expected.
        what: &'static str,
        /// The accepted units, comma separated.
        units: String,
    },
    /// A unit of another kind (`"8 GB"` where a time is expected) or none known.
    #[error("{text:?}: {found}; expected {what} in {units}")]
    WrongUnit {
        /// The text as written.
        text: String,
        /// What the unit turned out to be, e.g. "`GB` is a size unit".
        found: String,
        /// What was expected.
        what: &'static str,
        /// The accepted units, comma separated.
        units: String,
    },
    /// Not a whole number of the base unit (`"0.5 ps"`).
    #[error("{text:?} is not a whole number of {base}")]
    Inexact {
        /// The text as written.
        text: String,
        /// The base unit, e.g. "picoseconds".
        base: &'static str,
    },
    /// Too large for the 64-bit base representation.
    #[error("{text:?} is too large (at most {max} {base})")]
    TooLarge {
        /// The text as written.
        text: String,
        /// The largest representable value.
        max: u64,
        /// The base unit.
        base: &'static str,
    },
    /// A minus sign: no quantity here is negative.
    #[error("{text:?} is negative: {what} must be positive")]
    Negative {
        /// The text as written.
        text: String,
        /// What was expected.
        what: &'static str,
    },
    /// Zero (or out of range) where only positive values make sense.
    #[error("{text:?} is out of range: {what} must be {range}")]
    OutOfRange {
        /// The text as written.
        text: String,
        /// What was expected.
        what: &'static str,
        /// The accepted range, in words.
        range: &'static str,
    },
}

/// The units of one kind of quantity and their scale to the base unit.
struct UnitTable {
    what: &'static str,
    base: &'static str,
    example: &'static str,
    units: &'static [(&'static str, u64)],
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

const DURATION: UnitTable = UnitTable {
    what: "a duration",
    base: "picoseconds",
    example: "8 ns",
    units: &[
        ("ps", 1),
        ("ns", 1_000),
        ("us", 1_000_000),
        ("µs", 1_000_000),
        ("ms", 1_000_000_000),
        ("s", PS_PER_S),
    ],
};

const SIZE: UnitTable = UnitTable {
    what: "a size",
    base: "bytes",
    example: "1 MiB",
    units: &[
        ("B", 1),
        ("KB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
        ("TB", 1_000_000_000_000),
        ("KiB", KIB),
        ("MiB", MIB),
        ("GiB", GIB),
        ("TiB", TIB),
    ],
};

const BANDWIDTH: UnitTable = UnitTable {
    what: "a bandwidth",
    base: "bytes per second",
    example: "256 GB/s",
    units: &[
        ("B/s", 1),
        ("KB/s", 1_000),
        ("MB/s", 1_000_000),
        ("GB/s", 1_000_000_000),
        ("TB/s", 1_000_000_000_000),
        ("KiB/s", KIB),
        ("MiB/s", MIB),
        ("GiB/s", GIB),
    ],
};

const FREQUENCY: UnitTable = UnitTable {
    what: "a frequency",
    base: "hertz",
    example: "1 GHz",
    units: &[
        ("Hz", 1),
        ("kHz", 1_000),
        ("MHz", 1_000_000),
        ("GHz", 1_000_000_000),
    ],
};

const TABLES: [&UnitTable; 4] = [&DURATION, &SIZE, &BANDWIDTH, &FREQUENCY];

impl UnitTable {
    fn unit_list(&self) -> String {
        let names: Vec<&str> = self.units.iter().map(|(name, _)| *name).collect();
        names.join(", ")
    }

    fn scale_of(&self, unit: &str) -> Option<u64> {
        self.units
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
    }

    /// Parses `text` into a whole number of this table's base unit.
    fn parse(&self, text: &str) -> Result<u64, UnitError> {
        let (number, unit) = split_number(text.trim());
        let unit = unit.trim();
        let decimal = Decimal::parse(number).map_err(|f| self.failure(text, f))?;
        if unit.is_empty() {
            return Err(UnitError::MissingUnit {
                text: text.to_owned(),
                what: self.what,
                units: self.unit_list(),
            });
        }
        let scale = self
            .scale_of(unit)
            .ok_or_else(|| self.wrong_unit(text, unit))?;
        decimal.times(scale).map_err(|f| self.failure(text, f))
    }

    fn failure(&self, text: &str, failure: Failure) -> UnitError {
        let text = text.to_owned();
        match failure {
            Failure::Syntax => UnitError::Malformed {
                text,
                what: self.what,
                example: self.example,
            },
            Failure::Inexact => UnitError::Inexact {
                text,
                base: self.base,
            },
            Failure::TooLarge => UnitError::TooLarge {
                text,
                max: u64::MAX,
                base: self.base,
            },
            Failure::Negative => UnitError::Negative {
                text,
                what: self.what,
            },
        }
    }

    fn wrong_unit(&self, text: &str, unit: &str) -> UnitError {
        let owner = TABLES.iter().find(|table| table.scale_of(unit).is_some());
        let found = match owner {
            Some(table) => format!("`{unit}` is a unit of {}", table.what),
            None => format!("`{unit}` is not a known unit"),
        };
        UnitError::WrongUnit {
            text: text.to_owned(),
            found,
            what: self.what,
            units: self.unit_list(),
        }
    }
}

/// Splits `text` after its leading number: digits, `_`, `.`, a sign and an
/// exponent (`-1_000.5e-3 GB` gives `-1_000.5e-3` and ` GB`). No unit
/// starts with `e` or `E`, so an exponent is never part of a unit.
fn split_number(text: &str) -> (&str, &str) {
    let bytes = text.as_bytes();
    let mantissa = |i: usize| {
        bytes
            .get(i)
            .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'.' | b'_'))
    };
    let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let mut end = usize::from(matches!(bytes.first(), Some(b'-' | b'+')));
    while mantissa(end) {
        end += 1;
    }
    if end > 0 && matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut exponent = end + 1;
        if matches!(bytes.get(exponent), Some(b'+' | b'-')) {
            exponent += 1;
        }
        if digit(exponent) {
            end = exponent;
            while digit(end) {
                end += 1;
            }
        }
    }
    text.split_at(end)
}

/// A non-negative decimal number held exactly: `digits × 10^exponent`.
struct Decimal {
    digits: u128,
    exponent: i64,
}

/// Why a decimal could not become a whole number of base units.
#[derive(Clone, Copy)]
enum Failure {
    Syntax,
    Inexact,
    TooLarge,
    Negative,
}

/// Exponents beyond this are refused outright (no quantity needs them).
const MAX_EXPONENT: i64 = 1_000;

impl Decimal {
    /// Reads `123`, `25.6`, `.5`, `1.`, `16_000` or `1.5e-3`: digits (with
    /// `_` between two of them) and at most one point, then optionally
    /// `e`/`E`, a sign and decimal digits.
    fn parse(number: &str) -> Result<Decimal, Failure> {
        if number.starts_with('-') {
            return Err(Failure::Negative);
        }
        let number = number.strip_prefix('+').unwrap_or(number);
        let (mantissa, exponent) = match number.split_once(['e', 'E']) {
            Some((mantissa, exponent)) => (mantissa, parse_exponent(exponent)?),
            None => (number, 0),
        };
        let (whole, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let (whole, frac) = (without_separators(whole)?, without_separators(frac)?);
        if whole.len() + frac.len() == 0 {
            return Err(Failure::Syntax);
        }
        let frac = frac.trim_end_matches('0');
        let mut digits: u128 = 0;
        for b in whole.bytes().chain(frac.bytes()) {
            digits = digits
                .checked_mul(10)
                .and_then(|d| d.checked_add(u128::from(b - b'0')))
                .ok_or(Failure::TooLarge)?;
        }
        let frac_len = i64::try_from(frac.len()).map_err(|_| Failure::Inexact)?;
        Ok(Decimal {
            digits,
            exponent: exponent - frac_len,
        })
    }

    /// `self × scale` as an exact whole number.
    fn times(&self, scale: u64) -> Result<u64, Failure> {
        let product = self
            .digits
            .checked_mul(u128::from(scale))
            .ok_or(Failure::TooLarge)?;
        if product == 0 {
            return Ok(0);
        }
        let power = |n: i64| u32::try_from(n).ok().and_then(|n| 10u128.checked_pow(n));
        let whole = if self.exponent >= 0 {
            let factor = power(self.exponent).ok_or(Failure::TooLarge)?;
            product.checked_mul(factor).ok_or(Failure::TooLarge)?
        } else {
            let divisor = power(-self.exponent).ok_or(Failure::Inexact)?;
            if product % divisor != 0 {
                return Err(Failure::Inexact);
            }
            product / divisor
        };
        u64::try_from(whole).map_err(|_| Failure::TooLarge)
    }
}

/// `-12`, `+3`, `7`: an exponent within ±[`MAX_EXPONENT`].
fn parse_exponent(text: &str) -> Result<i64, Failure> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Failure::Syntax);
    }
    let magnitude = digits.parse::<i64>().ok().filter(|n| *n <= MAX_EXPONENT);
    match (magnitude, negative) {
        (Some(n), true) => Ok(-n),
        (Some(n), false) => Ok(n),
        (None, true) => Err(Failure::Inexact),
        (None, false) => Err(Failure::TooLarge),
    }
}

/// `digits` without the `_` separators, which may only stand between two
/// digits (`16_000`, not `_16` or `1__6`).
fn without_separators(digits: &str) -> Result<String, Failure> {
    let bytes = digits.as_bytes();
    let separated = bytes.iter().enumerate().all(|(i, b)| match b {
        b'_' => {
            i > 0
                && bytes[i - 1].is_ascii_digit()
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
        }
        b => b.is_ascii_digit(),
    });
    if !separated {
        return Err(Failure::Syntax);
    }
    Ok(digits.replace('_', ""))
}

/// `value / scale` written exactly, without trailing zeros: `25.6`, `1`.
/// `scale` is a power of ten.
fn exact_quotient(value: u64, scale: u64) -> String {
    let (whole, frac) = (value / scale, value % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let frac = format!("{frac:0width$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// Writes `value` in the largest of `units` (largest first, powers of ten)
/// that it reaches, exactly: `25.6 GB/s`.
fn fmt_decimal(value: u64, units: &[(u64, &str)], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let (scale, unit) = units
        .iter()
        .find(|(scale, _)| value >= *scale)
        .or(units.last())
        .copied()
        .unwrap_or((1, ""));
    write!(f, "{} {unit}", exact_quotient(value, scale))
}

/// `value` with an SI prefix before `unit`, exactly:
/// `fmt_si(32_768_000_000_000, "FLOP/s")` is `32.768 TFLOP/s`.
pub fn fmt_si(value: u64, unit: &str) -> String {
    const PREFIXES: [(u64, &str); 6] = [
        (1_000_000_000_000_000, "P"),
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "k"),
        (1, ""),
    ];
    let (scale, prefix) = PREFIXES
        .iter()
        .find(|(scale, _)| value >= *scale)
        .copied()
        .unwrap_or((1, ""));
    format!("{} {prefix}{unit}", exact_quotient(value, scale))
}

/// Bytes moved per second. Never zero, so a transfer time always exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bandwidth(NonZeroU64);

impl Bandwidth {
    /// `bytes_per_sec` B/s, or `None` for zero.
    pub const fn from_bytes_per_sec(bytes_per_sec: u64) -> Option<Self> {
        match NonZeroU64::new(bytes_per_sec) {
            Some(rate) => Some(Bandwidth(rate)),
            None => None,
        }
    }

    /// The rate in bytes per second.
    pub const fn bytes_per_sec(self) -> u64 {
        self.0.get()
    }

    /// The time `bytes` take at this rate, rounded up to a whole picosecond
    /// (exact whenever the division is): 64 B at 1 TB/s is 64 ps.
    pub fn transfer_time(self, bytes: u64) -> Result<SimDuration, TimeError> {
        let ps = (u128::from(bytes) * u128::from(PS_PER_S)).div_ceil(u128::from(self.0.get()));
        u64::try_from(ps)
            .map(SimDuration::from_ps)
            .map_err(|_| TimeError::Overflow(format!("{bytes} B at {self}")))
    }

    /// `n` links of this rate side by side, or `None` past `u64::MAX` B/s.
    pub fn checked_mul(self, n: Count) -> Option<Self> {
        self.0.checked_mul(NonZeroU64::from(n.0)).map(Bandwidth)
    }

    /// The rate of `width` bytes moved every cycle of `clock`, or `None`
    /// past `u64::MAX` B/s.
    pub fn per_cycle(width: NonZeroSize, clock: Frequency) -> Option<Self> {
        let width = NonZeroU64::new(width.get().bytes())?;
        width.checked_mul(clock.0).map(Bandwidth)
    }
}

impl FromStr for Bandwidth {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let rate = BANDWIDTH.parse(text)?;
        Bandwidth::from_bytes_per_sec(rate).ok_or_else(|| UnitError::OutOfRange {
            text: text.to_owned(),
            what: "a bandwidth",
            range: "greater than zero",
        })
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 5] = [
            (1_000_000_000_000, "TB/s"),
            (1_000_000_000, "GB/s"),
            (1_000_000, "MB/s"),
            (1_000, "KB/s"),
            (1, "B/s"),
        ];
        fmt_decimal(self.0.get(), &UNITS, f)
    }
}

/// A number of bytes (zero allowed; see [`NonZeroSize`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(u64);

impl Size {
    /// `bytes` bytes.
    pub const fn from_bytes(bytes: u64) -> Self {
        Size(bytes)
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// `self × n`, or `None` on overflow.
    pub fn checked_mul(self, n: u64) -> Option<Self> {
        self.0.checked_mul(n).map(Size)
    }
}

impl FromStr for Size {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        SIZE.parse(text).map(Size)
    }
}

impl fmt::Display for Size {
    /// The largest binary unit that divides the size (`16 GiB`), else the
    /// largest decimal one (`1 GB`), else bytes (`1536 B`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 8] = [
            (TIB, "TiB"),
            (GIB, "GiB"),
            (MIB, "MiB"),
            (KIB, "KiB"),
            (1_000_000_000_000, "TB"),
            (1_000_000_000, "GB"),
            (1_000_000, "MB"),
            (1_000, "KB"),
        ];
        let exact = UNITS
            .iter()
            .find(|(scale, _)| self.0 >= *scale && self.0 % scale == 0);
        match exact {
            Some((scale, unit)) => write!(f, "{} {unit}", self.0 / scale),
            None => write!(f, "{} B", self.0),
        }
    }
}

/// A number of bytes that is greater than zero (capacities, packet sizes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NonZeroSize(Size);

impl NonZeroSize {
    /// `size`, or `None` if it is zero.
    pub const fn new(size: Size) -> Option<Self> {
        if size.0 == 0 {
            None
        } else {
            Some(NonZeroSize(size))
        }
    }

    /// The size.
    pub const fn get(self) -> Size {
        self.0
    }
}

impl FromStr for NonZeroSize {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let size: Size = text.parse()?;
        NonZeroSize::new(size).ok_or_else(|| UnitError::OutOfRange {
            text: text.to_owned(),
            what: "this size",
            range: "greater than zero",
        })
    }
}

impl fmt::Display for NonZeroSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A clock rate in hertz. Never zero, so a cycle always has a length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frequency(NonZeroU64);

impl Frequency {
    /// `hz` hertz, or `None` for zero.
    pub const fn from_hz(hz: u64) -> Option<Self> {
        match NonZeroU64::new(hz) {
            Some(hz) => Some(Frequency(hz)),
            None => None,
        }
    }

    /// The rate in hertz.
    pub const fn hz(self) -> u64 {
        self.0.get()
    }

    /// The length of `n` cycles, rounded up to a whole picosecond (exact for
    /// clocks whose period is a whole number of picoseconds, e.g. 1 GHz).
    pub fn cycles(self, n: u64) -> Result<SimDuration, TimeError> {
        let ps = (u128::from(n) * u128::from(PS_PER_S)).div_ceil(u128::from(self.0.get()));
        u64::try_from(ps)
            .map(SimDuration::from_ps)
            .map_err(|_| TimeError::Overflow(format!("{n} cycles at {self}")))
    }
}

impl FromStr for Frequency {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let hz = FREQUENCY.parse(text)?;
        Frequency::from_hz(hz).ok_or_else(|| UnitError::OutOfRange {
            text: text.to_owned(),
            what: "a frequency",
            range: "greater than zero",
        })
    }
}

impl fmt::Display for Frequency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1_000_000_000, "GHz"),
            (1_000_000, "MHz"),
            (1_000, "kHz"),
            (1, "Hz"),
        ];
        fmt_decimal(self.0.get(), &UNITS, f)
    }
}

/// Reads a byte count given on a command line: a plain number of bytes
/// (`4096`, `64_000`, `1e6`) or a size with a unit (`"64 KiB"`). Zero and
/// negative values are refused ("must be positive"), so every `--size`
/// flag, the CLI's and the examples', reads the same way.
pub fn parse_positive_bytes(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split_number(text.trim());
    let bytes = if unit.trim().is_empty() {
        Decimal::parse(number)
            .and_then(|decimal| decimal.times(1))
            .map_err(|f| SIZE.failure(text, f))?
    } else {
        SIZE.parse(text)?
    };
    match bytes {
        0 => Err(UnitError::OutOfRange {
            text: text.to_owned(),
            what: "a size",
            range: "positive",
        }),
        bytes => Ok(bytes),
    }
}

/// Reads a duration such as `"8 ns"` or `"1.5 us"` into exact picoseconds.
pub fn parse_duration(text: &str) -> Result<SimDuration, UnitError> {
    DURATION.parse(text).map(SimDuration::from_ps)
}

/// A fraction in (0, 1], such as a link efficiency, held exactly in parts
/// per million. Written `0.9` or `90%`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fraction(NonZeroU32);

impl Fraction {
    /// Parts per million in one whole.
    pub const PPM_PER_ONE: u32 = 1_000_000;
    /// One whole: 1 (100 %).
    pub const ONE: Fraction = match NonZeroU32::new(Self::PPM_PER_ONE) {
        Some(ppm) => Fraction(ppm),
        // 1 000 000 is not zero.
        None => Fraction(NonZeroU32::MIN),
    };
    /// `ppm` parts per million, or `None` outside (0, 1 000 000].
    pub const fn from_ppm(ppm: u32) -> Option<Self> {
        match NonZeroU32::new(ppm) {
            Some(ppm) if ppm.get() <= Self::PPM_PER_ONE => Some(Fraction(ppm)),
            _ => None,
        }
    }

    /// The fraction in parts per million.
    pub const fn ppm(self) -> u32 {
        self.0.get()
    }

    /// `bandwidth × self`, rounded down to a whole byte per second (at
    /// least 1 B/s).
    pub fn of(self, bandwidth: Bandwidth) -> Bandwidth {
        let scaled = u128::from(bandwidth.bytes_per_sec()) * u128::from(self.ppm())
            / u128::from(Self::PPM_PER_ONE);
        let scaled = u64::try_from(scaled).unwrap_or(u64::MAX);
        Bandwidth(NonZeroU64::new(scaled).unwrap_or(NonZeroU64::MIN))
    }
}

impl FromStr for Fraction {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let trimmed = text.trim();
        let (number, ppm_per_unit) = match trimmed.strip_suffix('%') {
            Some(percent) => (percent.trim(), 10_000),
            None => (trimmed, u64::from(Self::PPM_PER_ONE)),
        };
        let out_of_range = || UnitError::OutOfRange {
            text: text.to_owned(),
            what: "a fraction",
            range: "greater than 0 and at most 1 (or 100%)",
        };
        let failure = |failure| match failure {
            Failure::Syntax => UnitError::Malformed {
                text: text.to_owned(),
                what: "a fraction",
                example: "0.9",
            },
            Failure::Inexact => UnitError::Inexact {
                text: text.to_owned(),
                base: "parts per million",
            },
            Failure::TooLarge => out_of_range(),
            Failure::Negative => UnitError::Negative {
                text: text.to_owned(),
                what: "a fraction",
            },
        };
        let ppm = Decimal::parse(number)
            .and_then(|decimal| decimal.times(ppm_per_unit))
            .map_err(failure)?;
        u32::try_from(ppm)
            .ok()
            .and_then(Fraction::from_ppm)
            .ok_or_else(out_of_range)
    }
}

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = u64::from(Self::PPM_PER_ONE);
        f.write_str(&exact_quotient(u64::from(self.ppm()), whole))
    }
}

/// A slowdown factor of at least 1, such as a slow PE's (`faults.compute`,
/// ADR-0106): `2` makes every duration it stretches twice as long. Held
/// exactly in parts per million; written `2`, `1.25` or `150%`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slowdown(NonZeroU64);

impl Slowdown {
    /// No slowdown: a factor of exactly 1.
    pub const NONE: Slowdown = match NonZeroU64::new(Fraction::PPM_PER_ONE as u64) {
        Some(ppm) => Slowdown(ppm),
        // 1 000 000 is not zero.
        None => Slowdown(NonZeroU64::MIN),
    };

    /// `ppm` parts per million, or `None` below 1 000 000 (a factor under 1).
    pub const fn from_ppm(ppm: u64) -> Option<Self> {
        match NonZeroU64::new(ppm) {
            Some(ppm) if ppm.get() >= Fraction::PPM_PER_ONE as u64 => Some(Slowdown(ppm)),
            _ => None,
        }
    }

    /// The factor in parts per million.
    pub const fn ppm(self) -> u64 {
        self.0.get()
    }

    /// Whether this is no slowdown at all.
    pub const fn is_none(self) -> bool {
        self.0.get() == Fraction::PPM_PER_ONE as u64
    }

    /// `self × other`, rounded up to a whole part per million; `None` when
    /// that overflows.
    pub fn then(self, other: Slowdown) -> Option<Slowdown> {
        let one = u128::from(Fraction::PPM_PER_ONE);
        let product = (u128::from(self.ppm()) * u128::from(other.ppm())).div_ceil(one);
        u64::try_from(product).ok().and_then(Slowdown::from_ppm)
    }

    /// `duration × self`, rounded up to a whole picosecond (a slowdown
    /// never shortens anything); `duration` itself for no slowdown.
    pub fn stretch(self, duration: SimDuration) -> Result<SimDuration, TimeError> {
        if self.is_none() {
            return Ok(duration);
        }
        let one = u128::from(Fraction::PPM_PER_ONE);
        let ps = (u128::from(duration.as_ps()) * u128::from(self.ppm())).div_ceil(one);
        u64::try_from(ps)
            .map(SimDuration::from_ps)
            .map_err(|_| TimeError::Overflow(format!("{duration} x slowdown {self}")))
    }
}

impl FromStr for Slowdown {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        let trimmed = text.trim();
        let (number, ppm_per_unit) = match trimmed.strip_suffix('%') {
            Some(percent) => (percent.trim(), 10_000),
            None => (trimmed, u64::from(Fraction::PPM_PER_ONE)),
        };
        let out_of_range = || UnitError::OutOfRange {
            text: text.to_owned(),
            what: "a slowdown factor",
            range: "at least 1 (1: full speed, 2: twice as slow)",
        };
        let failure = |failure| match failure {
            Failure::Syntax => UnitError::Malformed {
                text: text.to_owned(),
                what: "a slowdown factor",
                example: "2",
            },
            Failure::Inexact => UnitError::Inexact {
                text: text.to_owned(),
                base: "parts per million",
            },
            Failure::TooLarge => UnitError::TooLarge {
                text: text.to_owned(),
                max: u64::MAX,
                base: "parts per million",
            },
            Failure::Negative => UnitError::Negative {
                text: text.to_owned(),
                what: "a slowdown factor",
            },
        };
        let ppm = Decimal::parse(number)
            .and_then(|decimal| decimal.times(ppm_per_unit))
            .map_err(failure)?;
        Slowdown::from_ppm(ppm).ok_or_else(out_of_range)
    }
}

impl fmt::Display for Slowdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&exact_quotient(
            self.ppm(),
            u64::from(Fraction::PPM_PER_ONE),
        ))
    }
}

/// A count of things that must be at least one (SIPs, PEs, channels...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Count(NonZeroU32);

impl Count {
    /// `n`, or `None` for zero.
    pub const fn new(n: u32) -> Option<Self> {
        match NonZeroU32::new(n) {
            Some(n) => Some(Count(n)),
            None => None,
        }
    }

    /// The count.
    pub const fn get(self) -> u32 {
        self.0.get()
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer (at most 4294967295)")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Count, E> {
                u32::try_from(n)
                    .ok()
                    .and_then(Count::new)
                    .ok_or_else(|| E::invalid_value(Unexpected::Unsigned(n), &self))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Count, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(Unexpected::Signed(n), &self)),
                }
            }
            /// `1e3`: a whole number written with an exponent.
            fn visit_f64<E: de::Error>(self, x: f64) -> Result<Count, E> {
                let whole = x.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(&x);
                match whole {
                    // Exact: a whole number within u32 converts without loss.
                    true => self.visit_u64(x as u64),
                    false => Err(E::invalid_value(Unexpected::Float(x), &self)),
                }
            }
            /// `16_000`: digits grouped with `_` (also `1_0e2`).
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Count, E> {
                let unexpected = || E::invalid_value(Unexpected::Str(text), &self);
                let n = Decimal::parse(text.trim())
                    .and_then(|d| d.times(1))
                    .map_err(|_| unexpected())?;
                self.visit_u64(n)
            }
        }
        deserializer.deserialize_u32(CountVisitor)
    }
}

/// Deserializes a quantity from its string form through `FromStr`.
struct QuantityVisitor<T> {
    expecting: &'static str,
    quantity: PhantomData<T>,
}

impl<T> Visitor<'_> for QuantityVisitor<T>
where
    T: FromStr<Err = UnitError>,
{
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        text.parse().map_err(E::custom)
    }
}

fn deserialize_quantity<'de, D, T>(deserializer: D, expecting: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = UnitError>,
{
    deserializer.deserialize_str(QuantityVisitor {
        expecting,
        quantity: PhantomData,
    })
}

impl<'de> Deserialize<'de> for Bandwidth {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_quantity(deserializer, "a bandwidth such as \"256 GB/s\"")
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_quantity(deserializer, "a size such as \"1 MiB\"")
    }
}

impl<'de> Deserialize<'de> for NonZeroSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_quantity(deserializer, "a size such as \"1 MiB\"")
    }
}

impl<'de> Deserialize<'de> for Frequency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_quantity(deserializer, "a frequency such as \"1 GHz\"")
    }
}

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_quantity(deserializer, "a fraction such as 0.9 or \"90%\"")
    }
}

impl<'de> Deserialize<'de> for Slowdown {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_quantity(deserializer, "a slowdown factor such as 2 or 1.5")
    }
}

/// Durations in configuration files are written `"8 ns"`, `"1.5 us"`; this
/// is the only `Deserialize` for [`SimDuration`] in the crate.
impl<'de> Deserialize<'de> for SimDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = SimDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"8 ns\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<SimDuration, E> {
                parse_duration(text).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw(text: &str) -> u64 {
        text.parse::<Bandwidth>().unwrap().bytes_per_sec()
    }

    #[test]
    fn slowdowns_are_exact_at_least_one_and_stretch_rounding_up() {
        let two: Slowdown = "2".parse().unwrap();
        assert_eq!(two.ppm(), 2_000_000);
        assert_eq!("150%".parse::<Slowdown>().unwrap().to_string(), "1.5");
        assert!(Slowdown::NONE.is_none());
        for bad in ["0", "0.5", "-2", "x"] {
            assert!(bad.parse::<Slowdown>().is_err(), "{bad}");
        }
        let third: Slowdown = "1.333333".parse().unwrap();
        let d = SimDuration::from_ps(3);
        assert_eq!(two.stretch(d).unwrap(), SimDuration::from_ps(6));
        assert_eq!(third.stretch(d).unwrap(), SimDuration::from_ps(4));
        assert_eq!(
            Slowdown::NONE.stretch(SimDuration::MAX).unwrap(),
            SimDuration::MAX
        );
        assert!(two.stretch(SimDuration::MAX).is_err());
        assert_eq!(two.then(two).unwrap().to_string(), "4");
        assert_eq!(Fraction::ONE.ppm(), Fraction::PPM_PER_ONE);
    }

    #[test]
    fn bandwidth_decimals_are_exact() {
        assert_eq!(bw("25.6 GB/s"), 25_600_000_000);
        assert_eq!(bw("819.2 GB/s"), 819_200_000_000);
        assert_eq!(bw("63 GB/s"), 63_000_000_000);
        assert_eq!(bw("1 TB/s"), 1_000_000_000_000);
        assert_eq!(bw("2 GiB/s"), 2 * GIB);
        assert_eq!(bw("1.5 KiB/s"), 1536);
        assert_eq!(bw("100B/s"), 100);
    }

    #[test]
    fn bandwidth_transfer_time_is_integer_picoseconds() {
        let tbps: Bandwidth = "1 TB/s".parse().unwrap();
        assert_eq!(tbps.transfer_time(64).unwrap(), SimDuration::from_ps(64));
        let pc: Bandwidth = "25.6 GB/s".parse().unwrap();
        assert_eq!(pc.transfer_time(32).unwrap(), SimDuration::from_ps(1250));
        let odd: Bandwidth = "3 B/s".parse().unwrap();
        assert_eq!(odd.transfer_time(1).unwrap().as_ps(), 333_333_333_334);
    }

    #[test]
    fn bandwidth_rejects_zero_missing_and_wrong_units() {
        let zero = "0 GB/s".parse::<Bandwidth>().unwrap_err();
        assert!(zero.to_string().contains("greater than zero"), "{zero}");
        let bare = "256".parse::<Bandwidth>().unwrap_err();
        assert!(matches!(bare, UnitError::MissingUnit { .. }), "{bare}");
        assert!(bare.to_string().contains("GB/s"), "{bare}");
        let bits = "10 Gb/s".parse::<Bandwidth>().unwrap_err();
        assert!(
            bits.to_string().contains("`Gb/s` is not a known unit"),
            "{bits}"
        );
        let time = "8 ns".parse::<Bandwidth>().unwrap_err();
        assert!(
            time.to_string().contains("`ns` is a unit of a duration"),
            "{time}"
        );
    }

    #[test]
    fn bandwidth_display_uses_exact_decimal_units() {
        for text in ["256 GB/s", "25.6 GB/s", "63 GB/s", "1.024 TB/s", "64 B/s"] {
            assert_eq!(text.parse::<Bandwidth>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn size_units_are_decimal_and_binary() {
        let bytes = |t: &str| t.parse::<Size>().unwrap().bytes();
        assert_eq!(bytes("64 B"), 64);
        assert_eq!(bytes("1 KB"), 1000);
        assert_eq!(bytes("1 MiB"), MIB);
        assert_eq!(bytes("16 GiB"), 16 * GIB);
        assert_eq!(bytes("2 TiB"), 2 * TIB);
        assert_eq!(bytes("1.5 KiB"), 1536);
        assert_eq!(bytes("0 B"), 0);
        assert!(matches!(
            "0.3 B".parse::<Size>(),
            Err(UnitError::Inexact { .. })
        ));
        assert!(matches!(
            "8 ns".parse::<Size>(),
            Err(UnitError::WrongUnit { .. })
        ));
    }

    #[test]
    fn size_display_prefers_whole_binary_units() {
        let show = |bytes: u64| Size::from_bytes(bytes).to_string();
        assert_eq!(show(16 * GIB), "16 GiB");
        assert_eq!(show(32 * MIB), "32 MiB");
        assert_eq!(show(1_000_000_000), "1 GB");
        assert_eq!(show(1536), "1536 B");
        assert_eq!(show(0), "0 B");
    }

    #[test]
    fn nonzero_size_rejects_zero() {
        assert!("0 KiB".parse::<NonZeroSize>().is_err());
        assert_eq!("8 KiB".parse::<NonZeroSize>().unwrap().get().bytes(), 8192);
    }

    #[test]
    fn durations_convert_exactly_to_picoseconds() {
        let ps = |t: &str| parse_duration(t).unwrap().as_ps();
        assert_eq!(ps("1.5 us"), 1_500_000);
        assert_eq!(ps("1.5 µs"), 1_500_000);
        assert_eq!(ps("8 ns"), 8_000);
        assert_eq!(ps("0.001 ns"), 1);
        assert_eq!(ps("2 ms"), 2_000_000_000);
        assert_eq!(ps("1 s"), PS_PER_S);
        assert_eq!(ps("64 ps"), 64);
        assert!(matches!(
            parse_duration("0.5 ps"),
            Err(UnitError::Inexact { .. })
        ));
        let wrong = parse_duration("8 GB").unwrap_err().to_string();
        assert!(wrong.contains("`GB` is a unit of a size"), "{wrong}");
        assert!(wrong.contains("ns"), "{wrong}");
        assert!(matches!(
            parse_duration("8"),
            Err(UnitError::MissingUnit { .. })
        ));
        assert!(matches!(
            parse_duration("1.2.3 ns"),
            Err(UnitError::Malformed { .. })
        ));
    }

    #[test]
    fn huge_values_are_errors_not_wraps() {
        assert!(matches!(
            parse_duration("20000000 s"),
            Err(UnitError::TooLarge { .. })
        ));
        let many_digits = format!("{} TB", "9".repeat(40));
        assert!(matches!(
            many_digits.parse::<Size>(),
            Err(UnitError::TooLarge { .. })
        ));
    }

    #[test]
    fn exponents_and_separators_are_read_exactly() {
        let bytes = |t: &str| t.parse::<Size>().unwrap().bytes();
        assert_eq!(bytes("16_000 MiB"), 16_000 * MIB);
        assert_eq!(bytes("1e3 B"), 1_000);
        assert_eq!(bytes("1E3B"), 1_000);
        assert_eq!(bytes("2.5e3 KB"), 2_500_000);
        assert_eq!(bytes("1_024e-3 KB"), 1_024);
        assert_eq!(bytes("+4 KiB"), 4 * KIB);
        assert_eq!(parse_duration("1.5e-3 s").unwrap().as_ps(), 1_500_000_000);
        assert_eq!(bw("1e2 GB/s"), 100_000_000_000);
        for malformed in ["_16 B", "16_ B", "1__6 B", "1.2.3e4 B", "e3 B"] {
            assert!(
                matches!(malformed.parse::<Size>(), Err(UnitError::Malformed { .. })),
                "{malformed}"
            );
        }
        assert!(matches!(
            "1e-1 B".parse::<Size>(),
            Err(UnitError::Inexact { .. })
        ));
        let huge = "1e30 GB/s".parse::<Bandwidth>().unwrap_err().to_string();
        assert!(
            huge.contains("is too large (at most 18446744073709551615 bytes per second)"),
            "{huge}"
        );
        let far = "1e99999 B".parse::<Size>().unwrap_err();
        assert!(matches!(far, UnitError::TooLarge { .. }), "{far}");
        assert_eq!("0e5 B".parse::<Size>().unwrap().bytes(), 0);
    }

    #[test]
    fn command_line_sizes_are_positive_bytes() {
        assert_eq!(parse_positive_bytes("4096"), Ok(4096));
        assert_eq!(parse_positive_bytes("64_000"), Ok(64_000));
        assert_eq!(parse_positive_bytes("1e6"), Ok(1_000_000));
        assert_eq!(parse_positive_bytes("64 KiB"), Ok(65_536));
        let negative = parse_positive_bytes("-256").unwrap_err().to_string();
        assert_eq!(negative, "\"-256\" is negative: a size must be positive");
        let zero = parse_positive_bytes("0").unwrap_err().to_string();
        assert!(zero.contains("must be positive"), "{zero}");
        assert!(parse_positive_bytes("many").is_err());
    }

    #[test]
    fn negative_quantities_say_so() {
        let error = "-256 B".parse::<Size>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "\"-256 B\" is negative: a size must be positive"
        );
        assert!(matches!(
            parse_duration("-8 ns"),
            Err(UnitError::Negative { .. })
        ));
        assert!(matches!(
            "-0.5".parse::<Fraction>(),
            Err(UnitError::Negative { .. })
        ));
    }

    #[test]
    fn frequency_parses_and_counts_cycles() {
        let ghz: Frequency = "1 GHz".parse().unwrap();
        assert_eq!(ghz.hz(), 1_000_000_000);
        assert_eq!(ghz.cycles(9).unwrap(), SimDuration::from_ns(9));
        let odd: Frequency = "1.35 GHz".parse().unwrap();
        assert_eq!(odd.hz(), 1_350_000_000);
        assert_eq!(odd.to_string(), "1.35 GHz");
        assert_eq!(odd.cycles(1).unwrap().as_ps(), 741);
        assert!("0 MHz".parse::<Frequency>().is_err());
        assert!("100 kHz".parse::<Frequency>().is_ok());
    }

    #[test]
    fn bandwidth_from_width_and_clock() {
        let width: NonZeroSize = "64 B".parse().unwrap();
        let clock: Frequency = "1 GHz".parse().unwrap();
        let per_cycle = Bandwidth::per_cycle(width, clock).unwrap();
        assert_eq!(per_cycle.to_string(), "64 GB/s");
        let module: Bandwidth = "256 GB/s".parse().unwrap();
        let four = Count::new(4).unwrap();
        assert_eq!(module.checked_mul(four).unwrap().to_string(), "1.024 TB/s");
        let fast: Frequency = "18446744073 GHz".parse().unwrap();
        assert_eq!(Bandwidth::per_cycle(width, fast), None);
        let huge = Count::new(u32::MAX).unwrap();
        assert_eq!(module.checked_mul(huge), None);
    }

    #[test]
    fn fractions_are_exact_parts_per_million() {
        let ppm = |t: &str| t.parse::<Fraction>().unwrap().ppm();
        assert_eq!(ppm("0.9"), 900_000);
        assert_eq!(ppm("0.92"), 920_000);
        assert_eq!(ppm("1"), 1_000_000);
        assert_eq!(ppm("80%"), 800_000);
        assert!("0".parse::<Fraction>().is_err());
        assert!("1.01".parse::<Fraction>().is_err());
        assert!("0.0000001".parse::<Fraction>().is_err());
        assert_eq!("0.92".parse::<Fraction>().unwrap().to_string(), "0.92");
        let bw: Bandwidth = "100 GB/s".parse().unwrap();
        assert_eq!(ppm_of("0.8", bw), 80_000_000_000);
    }

    fn ppm_of(fraction: &str, bw: Bandwidth) -> u64 {
        fraction.parse::<Fraction>().unwrap().of(bw).bytes_per_sec()
    }

    #[test]
    fn si_formatting() {
        assert_eq!(fmt_si(32_768_000_000_000, "FLOP/s"), "32.768 TFLOP/s");
        assert_eq!(fmt_si(512, "FLOP/s"), "512 FLOP/s");
    }
}
