//! [`Strided`]: the shape of a strided copy (ADR-0112) — `rows` runs of
//! `run` bytes, the source and the destination each advancing by its own
//! stride — and the checks every such copy passes before it touches
//! memory ([`StridedError`], each naming the argument at fault).
//!
//! Knows shapes only: where the runs are is the caller's (the store checks
//! each run against its regions, the device each side against one
//! memory), and how long they take is the device's.

use serde::{Deserialize, Serialize};

/// `rows` runs of `run` bytes; run `i` is read at `src + i × src_stride`
/// and written at `dst + i × dst_stride`. Strides are at least the run
/// (no two runs of one side overlap); a stride equal to the run is that
/// side contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Strided {
    /// Runs copied (at least one).
    pub rows: u64,
    /// Bytes per run (at least one).
    pub run: u64,
    /// Bytes from one run's first byte read to the next's.
    pub src_stride: u64,
    /// Bytes from one run's first byte written to the next's.
    pub dst_stride: u64,
}

/// A strided copy's shape or placement refused, naming the argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StridedError {
    /// `rows`, `run` or a stride of zero.
    #[error("strided copy: `{arg}` is 0")]
    Zero {
        /// The argument (`rows`, `run`, `src_stride`, `dst_stride`).
        arg: &'static str,
    },
    /// A stride shorter than the run: that side's runs would overlap.
    #[error("strided copy: `{arg}` {stride} B is less than `run` {run} B, so its runs overlap")]
    Overlapping {
        /// The argument (`src_stride`, `dst_stride`).
        arg: &'static str,
        /// Its value.
        stride: u64,
        /// The run.
        run: u64,
    },
    /// A side whose last byte is past the end of the address space.
    #[error("strided copy: {rows} rows at a `{arg}` of {stride} B overflow the address space")]
    Overflow {
        /// The argument (`src_stride`, `dst_stride`).
        arg: &'static str,
        /// Its value.
        stride: u64,
        /// The rows.
        rows: u64,
    },
    /// A side whose runs do not all lie in the memory its first byte is
    /// in (a TCM, one cube's HBM, ...).
    #[error(
        "strided copy: the `{arg}` runs from {addr:#018x} span {span} B and leave \
         the memory they start in"
    )]
    LeavesMemory {
        /// The side (`src`, `dst`).
        arg: &'static str,
        /// Its first byte.
        addr: u64,
        /// Bytes from its first byte to its last run's end.
        span: u64,
    },
}

impl Strided {
    /// Errors unless every argument is at least one, both strides at
    /// least the run, and each side's span fits the address space from
    /// its first byte (`src`, `dst`).
    pub fn check(&self, src: u64, dst: u64) -> Result<(), StridedError> {
        for (arg, value) in [
            ("rows", self.rows),
            ("run", self.run),
            ("src_stride", self.src_stride),
            ("dst_stride", self.dst_stride),
        ] {
            if value == 0 {
                return Err(StridedError::Zero { arg });
            }
        }
        for (arg, stride, base) in [
            ("src_stride", self.src_stride, src),
            ("dst_stride", self.dst_stride, dst),
        ] {
            if stride < self.run {
                let run = self.run;
                return Err(StridedError::Overlapping { arg, stride, run });
            }
            let span = self.span_of(stride);
            if span.and_then(|s| base.checked_add(s)).is_none() {
                let rows = self.rows;
                return Err(StridedError::Overflow { arg, stride, rows });
            }
        }
        Ok(())
    }

    /// Bytes copied: `rows × run` (saturating; [`check`](Self::check)
    /// refuses a shape whose spans overflow, and a span is at least this).
    pub fn bytes(&self) -> u64 {
        self.rows.saturating_mul(self.run)
    }

    /// Bytes from the first byte read to the last run's end.
    pub fn src_span(&self) -> u64 {
        self.span_of(self.src_stride).unwrap_or(u64::MAX)
    }

    /// Bytes from the first byte written to the last run's end.
    pub fn dst_span(&self) -> u64 {
        self.span_of(self.dst_stride).unwrap_or(u64::MAX)
    }

    /// Whether both sides are contiguous (every stride the run): the
    /// copy is one run of [`bytes`](Self::bytes).
    pub fn is_contiguous(&self) -> bool {
        self.src_stride == self.run && self.dst_stride == self.run
    }

    /// Where each run starts on a side from `base` at `stride`.
    pub fn starts(&self, base: u64, stride: u64) -> impl Iterator<Item = u64> + use<> {
        (0..self.rows).map(move |i| base + i * stride)
    }

    /// `(rows − 1) × stride + run`, if it fits.
    fn span_of(&self, stride: u64) -> Option<u64> {
        let rows = self.rows.checked_sub(1)?;
        rows.checked_mul(stride)?.checked_add(self.run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rows: u64, run: u64, src_stride: u64, dst_stride: u64) -> Strided {
        Strided {
            rows,
            run,
            src_stride,
            dst_stride,
        }
    }

    #[test]
    fn a_shape_has_its_bytes_and_spans() {
        let s = shape(3, 4, 10, 4);
        assert_eq!((s.bytes(), s.src_span(), s.dst_span()), (12, 24, 12));
        assert!(!s.is_contiguous());
        assert!(shape(3, 4, 4, 4).is_contiguous());
        assert_eq!(s.starts(100, 10).collect::<Vec<_>>(), [100, 110, 120]);
        assert_eq!(s.check(0, 0), Ok(()));
    }

    #[test]
    fn zero_overlapping_and_overflowing_shapes_name_their_argument() {
        let arg = |s: Strided, src| match s.check(src, 0).unwrap_err() {
            StridedError::Zero { arg }
            | StridedError::Overlapping { arg, .. }
            | StridedError::Overflow { arg, .. } => arg,
            StridedError::LeavesMemory { arg, .. } => arg,
        };
        assert_eq!(arg(shape(0, 4, 4, 4), 0), "rows");
        assert_eq!(arg(shape(2, 0, 4, 4), 0), "run");
        assert_eq!(arg(shape(2, 4, 0, 4), 0), "src_stride");
        assert_eq!(arg(shape(2, 4, 4, 0), 0), "dst_stride");
        assert_eq!(arg(shape(2, 4, 3, 4), 0), "src_stride");
        assert_eq!(arg(shape(2, 4, 4, 2), 0), "dst_stride");
        assert_eq!(arg(shape(u64::MAX, 4, 8, 4), 0), "src_stride");
        assert_eq!(arg(shape(2, 4, 8, 4), u64::MAX - 8), "src_stride");
        let message = shape(2, 4, 3, 4).check(0, 0).unwrap_err().to_string();
        assert!(message.contains("`src_stride` 3 B") && message.contains("overlap"));
    }
}
