//! What the GEMM workloads (`gemm_single_pe`, `gemm`) share on the host:
//! their input element types ([`InputType`], [`Input`]), deterministic
//! operands whose f32 product is exact ([`operand`]), the check of a
//! product against an f32 `ndarray` reference ([`compare`]) and TFLOP/s
//! ([`tflops`]).
//!
//! Knows host arrays and element types; nothing of the device.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};
use ndarray::{Array2, ArrayView2};

use super::Check;
use crate::mem::DType;
use crate::runtime::Element;
use crate::sim::SimDuration;

/// A GEMM input element type (`--dtype`): f16 or bf16, accumulated in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputType {
    /// IEEE binary16.
    #[default]
    F16,
    /// bfloat16.
    Bf16,
}

impl InputType {
    /// The element type on the device.
    pub fn dtype(self) -> DType {
        match self {
            InputType::F16 => DType::F16,
            InputType::Bf16 => DType::BF16,
        }
    }
}

impl fmt::Display for InputType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dtype().name())
    }
}

impl FromStr for InputType {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "f16" => Ok(InputType::F16),
            "bf16" => Ok(InputType::Bf16),
            _ => Err(format!(
                "expected f16 or bf16 (GEMM inputs; accumulation is f32), got `{text}`"
            )),
        }
    }
}

/// An input element type: f16 or bf16.
pub trait Input: Element + Default + Into<f32> + PartialEq {
    /// The element nearest `x`.
    fn from_f32(x: f32) -> Self;
    /// The relative rounding error bound `ε` of [`compare`]: the output
    /// type's machine epsilon.
    const EPSILON: f32;
}

impl Input for f16 {
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    const EPSILON: f32 = 1.0 / 1024.0;
}

impl Input for bf16 {
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    const EPSILON: f32 = 1.0 / 128.0;
}

/// A deterministic `rows × cols` operand of multiples of ½ in `[-1, 1]`
/// (exact in f16 and bf16, so an f32 product of two is exact up to
/// `K = 2²²`), different for each `salt`.
pub fn operand<T: Input>(rows: usize, cols: usize, salt: u64) -> Array2<T> {
    Array2::from_shape_fn((rows, cols), |(r, c)| {
        let i = (r * cols + c) as u64;
        let mixed = i.wrapping_mul(2_654_435_761).wrapping_add(salt * 40_503) >> 13;
        T::from_f32(((mixed % 5) as f32 - 2.0) * 0.5)
    })
}

/// `c` against the f32 product `a · b`, within the output type's rounding:
/// `|c − ref| ≤ ε (|ref| + 1)` for every element (`c_matches_reference`).
pub fn compare<T: Input>(a: &Array2<T>, b: &Array2<T>, c: ArrayView2<'_, T>) -> Check {
    let reference = a.mapv(Into::into).dot(&b.mapv(Into::<f32>::into));
    let (mut worst, mut outside) = (0.0f32, 0usize);
    for (&got, &want) in c.iter().zip(reference.iter()) {
        let error = (got.into() - want).abs();
        worst = worst.max(error);
        outside += usize::from(error.is_nan() || error > T::EPSILON * (want.abs() + 1.0));
    }
    let detail = format!(
        "max |C - ref| = {worst:e} over {} elements; {outside} outside {:e} (|ref| + 1)",
        reference.len(),
        T::EPSILON
    );
    let passed = outside == 0 && c.dim() == reference.dim();
    Check::new("c_matches_reference", passed, detail)
}

/// `flops / time` in TFLOP/s (0 for no time).
pub fn tflops(flops: u64, time: SimDuration) -> f64 {
    if time == SimDuration::ZERO {
        return 0.0;
    }
    flops as f64 / time.as_secs_f64() / 1e12
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_types_parse_and_f32_is_refused_with_why() {
        assert_eq!("bf16".parse::<InputType>(), Ok(InputType::Bf16));
        assert_eq!(
            "f16".parse::<InputType>().map(|t| t.to_string()),
            Ok("f16".into())
        );
        let error = "f32".parse::<InputType>().unwrap_err();
        assert!(error.contains("f16 or bf16"), "{error}");
    }

    #[test]
    fn compare_passes_the_exact_product_and_flags_one_wrong_element() {
        let (a, b) = (operand::<bf16>(3, 5, 1), operand::<bf16>(5, 4, 2));
        let exact = a
            .mapv(bf16::to_f32)
            .dot(&b.mapv(bf16::to_f32))
            .mapv(bf16::from_f32);
        assert!(compare(&a, &b, exact.view()).passed);
        let mut wrong = exact.clone();
        wrong[[2, 3]] = bf16::from_f32(wrong[[2, 3]].to_f32() + 0.5);
        let check = compare(&a, &b, wrong.view());
        assert!(!check.passed);
        assert!(check.detail.contains("1 outside"), "{}", check.detail);
    }

    #[test]
    fn tflops_is_flops_over_seconds() {
        // 2e12 FLOP in 1 ms (1e9 ps) = 2000 TFLOP/s.
        assert_eq!(
            tflops(2_000_000_000_000, SimDuration::from_ps(1_000_000_000)),
            2000.0
        );
        assert_eq!(tflops(1, SimDuration::ZERO), 0.0);
    }
}
