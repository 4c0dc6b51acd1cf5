//! [`Op`]: one operation on memory, as the hardware executes it and the
//! [`OpLog`](super::OpLog) records it.
//!
//! Each kind of op is a variant with typed parameters; [`Op::apply`]
//! carries out its effect on a [`MemoryStore`], and [`Op::inputs`] /
//! [`Op::outputs`] name the address ranges it reads and writes. New kinds
//! are new variants (or new [`BinaryFn`]s, [`UnaryFn`]s, [`ReduceFn`]s)
//! with their own `apply` arm, never an untyped catch-all.
//!
//! Elements are little-endian. Elementwise math computes in `f32` and
//! rounds once to the element type; for the binary functions here that is
//! the correctly rounded result for `f16` and `bf16` too (`f32` has more
//! than twice their precision plus two bits). GEMMs and reductions
//! accumulate in `f32` in a fixed order and round once (see `compute`).

use std::cell::Cell;
use std::fmt;

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

use super::compute::{self, GemmOperands, ReduceOperands, byte_len};
use super::store::{DataMode, MemoryStore, RegionMemo, StoreError};
use super::strided::Strided;

/// A range of device addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddrRange {
    /// First byte.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// An element type of elementwise math.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16 (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    BF16,
}

impl DType {
    /// Every element type, in the order users are told them.
    pub const ALL: [DType; 3] = [DType::F16, DType::BF16, DType::F32];

    /// The name users write (`f16`, `bf16`, `f32`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }

    /// Bytes per element.
    pub const fn size(self) -> u64 {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = String;

    /// A [`name`](DType::name); anything else is an error listing them.
    fn from_str(text: &str) -> Result<DType, String> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == text)
            .ok_or_else(|| {
                let names: Vec<_> = DType::ALL.iter().map(|d| d.name()).collect();
                format!(
                    "`{text}` is not a dtype (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// A function of two elements, applied elementwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryFn {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// The larger of `a` and `b` (the other if one is NaN).
    Max,
    /// The smaller of `a` and `b` (the other if one is NaN).
    Min,
}

impl BinaryFn {
    /// The op name the log records.
    pub const fn name(self) -> &'static str {
        match self {
            BinaryFn::Add => "add",
            BinaryFn::Sub => "sub",
            BinaryFn::Mul => "mul",
            BinaryFn::Max => "max",
            BinaryFn::Min => "min",
        }
    }

    fn eval(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryFn::Add => a + b,
            BinaryFn::Sub => a - b,
            BinaryFn::Mul => a * b,
            BinaryFn::Max => a.max(b),
            BinaryFn::Min => a.min(b),
        }
    }
}

/// An `f32` parameter of an op, compared and hashed by its bits (so `NaN`
/// equals itself and the log stays `Eq`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Scalar(pub f32);

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Scalar {}

/// A function of one element, applied elementwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnaryFn {
    /// `e^x` (`libm::expf`).
    Exp,
    /// `max(x, 0)`; `NaN` stays `NaN`.
    Relu,
    /// GeLU, the exact (erf) form PyTorch uses by default:
    /// `x/2 × (1 + erf(x/√2))` (`libm::erff`).
    Gelu,
    /// `x × factor`.
    Scale {
        /// The factor.
        factor: Scalar,
    },
    /// `x` unchanged: with different element types, a conversion.
    Cast,
}

impl UnaryFn {
    /// The op name the log records.
    pub const fn name(self) -> &'static str {
        match self {
            UnaryFn::Exp => "exp",
            UnaryFn::Relu => "relu",
            UnaryFn::Gelu => "gelu",
            UnaryFn::Scale { .. } => "scale",
            UnaryFn::Cast => "cast",
        }
    }

    pub(super) fn eval(self, x: f32) -> f32 {
        match self {
            UnaryFn::Exp => libm::expf(x),
            UnaryFn::Relu if x <= 0.0 => 0.0,
            UnaryFn::Relu | UnaryFn::Cast => x,
            UnaryFn::Gelu => 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2)),
            UnaryFn::Scale { factor } => x * factor.0,
        }
    }
}

/// How a reduction combines the elements along its axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReduceFn {
    /// The sum (from `0`, in axis order).
    Sum,
    /// The largest element (`NaN`s are skipped, as by `f32::max`).
    Max,
}

impl ReduceFn {
    /// The op name the log records.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceFn::Sum => "reduce_sum",
            ReduceFn::Max => "reduce_max",
        }
    }

    pub(super) fn identity(self) -> f32 {
        match self {
            ReduceFn::Sum => 0.0,
            ReduceFn::Max => f32::NEG_INFINITY,
        }
    }

    pub(super) fn combine(self, acc: f32, x: f32) -> f32 {
        match self {
            ReduceFn::Sum => acc + x,
            ReduceFn::Max => acc.max(x),
        }
    }
}

/// Bytes that come from outside simulated memory (a host write's source).
///
/// With data off only the length is kept ([`Payload::Elided`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Payload {
    /// The bytes.
    Bytes(Vec<u8>),
    /// Bytes that were not kept: only their number.
    Elided {
        /// The number of bytes.
        len: u64,
    },
}

impl Payload {
    /// The number of bytes.
    pub fn len(&self) -> u64 {
        match self {
            Payload::Bytes(bytes) => bytes.len() as u64,
            Payload::Elided { len } => *len,
        }
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, if kept.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Payload::Bytes(bytes) => Some(bytes),
            Payload::Elided { .. } => None,
        }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Payload::Bytes(bytes)
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Bytes(bytes) => write!(f, "Bytes({} bytes)", bytes.len()),
            Payload::Elided { len } => write!(f, "Elided({len} bytes)"),
        }
    }
}

/// One operation on memory. Addresses are device addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Op {
    /// A region comes into use, zero-filled (an allocation).
    Map {
        /// First byte.
        addr: u64,
        /// Bytes.
        len: u64,
    },
    /// The region starting at `addr` goes out of use (a free).
    Unmap {
        /// First byte.
        addr: u64,
    },
    /// Bytes from the host program land in memory (an H2D payload).
    HostWrite {
        /// First byte written.
        addr: u64,
        /// The bytes.
        data: Payload,
    },
    /// A DMA copy.
    Copy {
        /// First byte read.
        src: u64,
        /// First byte written.
        dst: u64,
        /// Bytes.
        len: u64,
    },
    /// A strided DMA copy (ADR-0112): run `i` of `layout` read at `src +
    /// i × src_stride`, written at `dst + i × dst_stride`.
    StridedCopy {
        /// First byte read.
        src: u64,
        /// First byte written.
        dst: u64,
        /// Rows, run and strides.
        layout: Strided,
    },
    /// A range set to one byte value.
    Fill {
        /// First byte.
        addr: u64,
        /// Bytes.
        len: u64,
        /// The value.
        value: u8,
    },
    /// `out[i] = func(lhs[i], rhs[i])` for `elems` elements of `dtype`.
    /// `out` may be `lhs` or `rhs` (in-place accumulate).
    Elementwise {
        /// The function.
        func: BinaryFn,
        /// The element type of all three operands.
        dtype: DType,
        /// First operand.
        lhs: u64,
        /// Second operand.
        rhs: u64,
        /// Result.
        out: u64,
        /// Elements.
        elems: u64,
    },
    /// `out = a × b` (or `out += a × b` with `accumulate`): `a` is
    /// `[m, k]`, `b` is `[k, n]`, `out` is `[m, n]`, all row-major;
    /// accumulation in `f32`, one rounding to `out_dtype`.
    Gemm {
        /// First operand.
        a: u64,
        /// Second operand.
        b: u64,
        /// Result.
        out: u64,
        /// Rows of `a` and `out`.
        m: u64,
        /// Columns of `b` and `out`.
        n: u64,
        /// Columns of `a`, rows of `b`.
        k: u64,
        /// Element type of `a` and `b`.
        dtype: DType,
        /// Element type of `out`.
        out_dtype: DType,
        /// Whether `out` is added to rather than overwritten.
        accumulate: bool,
    },
    /// `out[i] = func(src[i])` for `elems` elements, read as `from` and
    /// written as `to`. `out` may be `src`.
    Unary {
        /// The function.
        func: UnaryFn,
        /// Element type of `src`.
        from: DType,
        /// Element type of `out`.
        to: DType,
        /// Operand.
        src: u64,
        /// Result.
        out: u64,
        /// Elements.
        elems: u64,
    },
    /// `src` seen as `[outer, len, inner]` reduced along `len` into `out`
    /// (`[outer, inner]`), accumulating in `f32`.
    Reduce {
        /// The reduction.
        func: ReduceFn,
        /// Element type of `src` and `out`.
        dtype: DType,
        /// Operand.
        src: u64,
        /// Result.
        out: u64,
        /// Product of the dimensions before the axis.
        outer: u64,
        /// Length of the axis.
        len: u64,
        /// Product of the dimensions after the axis.
        inner: u64,
    },
}

impl Op {
    /// The op name the log records (`copy`, `add`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Map { .. } => "map",
            Op::Unmap { .. } => "unmap",
            Op::HostWrite { .. } => "host_write",
            Op::Copy { .. } => "copy",
            Op::StridedCopy { .. } => "strided_copy",
            Op::Fill { .. } => "fill",
            Op::Elementwise { func, .. } => func.name(),
            Op::Gemm { .. } => "gemm",
            Op::Unary { func, .. } => func.name(),
            Op::Reduce { func, .. } => func.name(),
        }
    }

    /// The address ranges the op reads.
    pub fn inputs(&self) -> Vec<AddrRange> {
        match *self {
            Op::Copy { src, len, .. } => vec![range(src, len)],
            Op::StridedCopy { src, layout, .. } => runs(src, layout.src_stride, &layout),
            Op::Elementwise {
                lhs,
                rhs,
                dtype,
                elems,
                ..
            } => {
                let len = dtype.size().saturating_mul(elems);
                vec![range(lhs, len), range(rhs, len)]
            }
            Op::Gemm {
                a,
                b,
                out,
                m,
                n,
                k,
                dtype,
                out_dtype,
                accumulate,
            } => {
                let mut inputs = vec![
                    range(a, byte_len(dtype, m.saturating_mul(k))),
                    range(b, byte_len(dtype, k.saturating_mul(n))),
                ];
                if accumulate {
                    inputs.push(range(out, byte_len(out_dtype, m.saturating_mul(n))));
                }
                inputs
            }
            Op::Unary {
                from, src, elems, ..
            } => vec![range(src, byte_len(from, elems))],
            Op::Reduce {
                dtype,
                src,
                outer,
                len,
                inner,
                ..
            } => {
                let elems = outer.saturating_mul(len).saturating_mul(inner);
                vec![range(src, byte_len(dtype, elems))]
            }
            Op::Map { .. } | Op::Unmap { .. } | Op::HostWrite { .. } | Op::Fill { .. } => {
                Vec::new()
            }
        }
    }

    /// The address ranges the op writes.
    pub fn outputs(&self) -> Vec<AddrRange> {
        match self {
            Op::Map { addr, len } | Op::Fill { addr, len, .. } => vec![range(*addr, *len)],
            Op::HostWrite { addr, data } => vec![range(*addr, data.len())],
            Op::Copy { dst, len, .. } => vec![range(*dst, *len)],
            Op::StridedCopy { dst, layout, .. } => runs(*dst, layout.dst_stride, layout),
            Op::Elementwise {
                out, dtype, elems, ..
            } => vec![range(*out, dtype.size().saturating_mul(*elems))],
            Op::Gemm {
                out,
                m,
                n,
                out_dtype,
                ..
            } => vec![range(*out, byte_len(*out_dtype, m.saturating_mul(*n)))],
            Op::Unary { to, out, elems, .. } => vec![range(*out, byte_len(*to, *elems))],
            Op::Reduce {
                dtype,
                out,
                outer,
                inner,
                ..
            } => vec![range(*out, byte_len(*dtype, outer.saturating_mul(*inner)))],
            Op::Unmap { .. } => Vec::new(),
        }
    }

    /// [`apply`](Self::apply) by a caller that remembers where its last
    /// op's operands were: with data off, a copy's or an elementwise op's
    /// operands are checked against `memo` first
    /// ([`MemoryStore::check_remembered`]: the same checks, the same
    /// errors).
    pub(super) fn apply_remembered(
        &self,
        store: &mut MemoryStore,
        memo: &Cell<RegionMemo>,
    ) -> Result<(), StoreError> {
        if store.mode() == DataMode::Off {
            match *self {
                Op::Copy { src, dst, len } => {
                    return store.check_remembered(&[src, dst], len, memo);
                }
                Op::Elementwise {
                    dtype,
                    lhs,
                    rhs,
                    out,
                    elems,
                    ..
                } => {
                    let len = dtype.size().saturating_mul(elems);
                    return store.check_remembered(&[out, lhs, rhs], len, memo);
                }
                _ => {}
            }
        }
        self.apply(store)
    }

    /// Carries out the op on `store`. With data off, addresses are checked
    /// and nothing else happens.
    pub fn apply(&self, store: &mut MemoryStore) -> Result<(), StoreError> {
        match self {
            Op::Map { addr, len } => store.map(*addr, *len),
            Op::Unmap { addr } => store.unmap(*addr).map(|_| ()),
            Op::HostWrite { addr, data } => host_write(store, *addr, data),
            Op::Copy { src, dst, len } => store.copy(*src, *dst, *len),
            Op::StridedCopy { src, dst, layout } => store.copy_strided(*src, *dst, layout),
            Op::Fill { addr, len, value } => store.fill(*addr, *len, *value),
            Op::Elementwise {
                func,
                dtype,
                lhs,
                rhs,
                out,
                elems,
            } => {
                let len = dtype.size().saturating_mul(*elems);
                elementwise(store, *func, *dtype, [*lhs, *rhs, *out], len)
            }
            Op::Gemm {
                a,
                b,
                out,
                m,
                n,
                k,
                dtype,
                out_dtype,
                accumulate,
            } => {
                let operands = GemmOperands {
                    a: *a,
                    b: *b,
                    out: *out,
                    m: *m,
                    n: *n,
                    k: *k,
                    dtype: *dtype,
                    out_dtype: *out_dtype,
                    accumulate: *accumulate,
                };
                compute::gemm(store, &operands)
            }
            Op::Unary {
                func,
                from,
                to,
                src,
                out,
                elems,
            } => compute::unary(store, *func, [*from, *to], [*src, *out], *elems),
            Op::Reduce {
                func,
                dtype,
                src,
                out,
                outer,
                len,
                inner,
            } => {
                let operands = ReduceOperands {
                    src: *src,
                    out: *out,
                    dtype: *dtype,
                    outer: *outer,
                    len: *len,
                    inner: *inner,
                };
                compute::reduce(store, *func, &operands)
            }
        }
    }

    /// This op as recorded by a store in `mode`: with data off, a host
    /// write keeps only its length.
    pub(super) fn for_mode(self, mode: DataMode) -> Op {
        match (self, mode) {
            (Op::HostWrite { addr, data }, DataMode::Off) => Op::HostWrite {
                addr,
                data: Payload::Elided { len: data.len() },
            },
            (op, _) => op,
        }
    }
}

fn range(addr: u64, len: u64) -> AddrRange {
    AddrRange { addr, len }
}

/// The runs of one side of a strided copy from `base` at `stride`.
fn runs(base: u64, stride: u64, layout: &Strided) -> Vec<AddrRange> {
    let starts = layout.starts(base, stride);
    starts.map(|addr| range(addr, layout.run)).collect()
}

fn host_write(store: &mut MemoryStore, addr: u64, data: &Payload) -> Result<(), StoreError> {
    match (data, store.mode()) {
        (Payload::Bytes(bytes), _) => store.write(addr, bytes),
        (Payload::Elided { len }, DataMode::Off) => store.check(addr, *len),
        (Payload::Elided { len }, DataMode::On) => {
            store.check(addr, *len)?;
            Err(StoreError::PayloadElided { addr, len: *len })
        }
    }
}

/// `out = func(lhs, rhs)` over `len` bytes; operands are `[lhs, rhs, out]`.
fn elementwise(
    store: &mut MemoryStore,
    func: BinaryFn,
    dtype: DType,
    [lhs, rhs, out]: [u64; 3],
    len: u64,
) -> Result<(), StoreError> {
    if store.mode() == DataMode::Off {
        return store.check_each(&[out, lhs, rhs], len);
    }
    store.check(out, len)?;
    let (Some(a), Some(b)) = (store.bytes(lhs, len)?, store.bytes(rhs, len)?) else {
        return Ok(());
    };
    let (a, b) = (&*a, &*b);
    let result = match dtype {
        DType::F32 => zip_elements(a, b, |x, y| {
            func.eval(f32::from_le_bytes(x), f32::from_le_bytes(y))
                .to_le_bytes()
        }),
        DType::F16 => zip_elements(a, b, |x, y| {
            let (x, y) = (
                f16::from_le_bytes(x).to_f32(),
                f16::from_le_bytes(y).to_f32(),
            );
            f16::from_f32(func.eval(x, y)).to_le_bytes()
        }),
        DType::BF16 => zip_elements(a, b, |x, y| {
            let (x, y) = (
                bf16::from_le_bytes(x).to_f32(),
                bf16::from_le_bytes(y).to_f32(),
            );
            bf16::from_f32(func.eval(x, y)).to_le_bytes()
        }),
    };
    store.write(out, &result)
}

/// `f` over the `N`-byte elements of `a` and `b`, concatenated.
fn zip_elements<const N: usize>(
    a: &[u8],
    b: &[u8],
    f: impl Fn([u8; N], [u8; N]) -> [u8; N],
) -> Vec<u8> {
    let element = |chunk: &[u8]| <[u8; N]>::try_from(chunk).expect("chunks_exact yields N bytes");
    a.chunks_exact(N)
        .zip(b.chunks_exact(N))
        .flat_map(|(x, y)| f(element(x), element(y)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{AddressMap, MemSpace, TopologySpec};

    #[test]
    fn dtypes_parse_their_names_and_list_them_otherwise() {
        for dtype in DType::ALL {
            assert_eq!(dtype.name().parse::<DType>(), Ok(dtype));
        }
        assert_eq!(
            "f64x".parse::<DType>().unwrap_err(),
            "`f64x` is not a dtype (expected one of f16, bf16, f32)"
        );
    }

    fn store() -> (MemoryStore, u64) {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        let map = AddressMap::new(&spec).unwrap();
        let base = map.encode(MemSpace::Hbm { sip: 0, cube: 0 }, 0).unwrap();
        let mut store = MemoryStore::new(map);
        store.map(base, 64).unwrap();
        (store, base)
    }

    fn f16s(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect()
    }

    #[test]
    fn f16_add_in_place() {
        let (mut store, base) = store();
        store
            .write(base, &f16s(&[1.0, 2.5, -4.0, 65504.0]))
            .unwrap();
        store
            .write(base + 8, &f16s(&[0.5, 0.25, 4.0, 65504.0]))
            .unwrap();
        let add = Op::Elementwise {
            func: BinaryFn::Add,
            dtype: DType::F16,
            lhs: base,
            rhs: base + 8,
            out: base,
            elems: 4,
        };
        add.apply(&mut store).unwrap();
        let inf = f32::INFINITY;
        assert_eq!(&*store.read(base, 8).unwrap(), f16s(&[1.5, 2.75, 0.0, inf]));
        assert_eq!(add.name(), "add");
        assert_eq!(add.inputs(), [range(base, 8), range(base + 8, 8)]);
        assert_eq!(add.outputs(), [range(base, 8)]);
    }

    #[test]
    fn f32_and_bf16_functions() {
        let (mut store, base) = store();
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        store.write(base, &f32s(&[3.0, -1.0])).unwrap();
        store.write(base + 8, &f32s(&[2.0, 5.0])).unwrap();
        for (func, expected) in [
            (BinaryFn::Sub, [1.0, -6.0]),
            (BinaryFn::Mul, [6.0, -5.0]),
            (BinaryFn::Max, [3.0, 5.0]),
            (BinaryFn::Min, [2.0, -1.0]),
        ] {
            let op = Op::Elementwise {
                func,
                dtype: DType::F32,
                lhs: base,
                rhs: base + 8,
                out: base + 16,
                elems: 2,
            };
            op.apply(&mut store).unwrap();
            assert_eq!(
                &*store.read(base + 16, 8).unwrap(),
                f32s(&expected),
                "{func:?}"
            );
        }
        let bf = |v: f32| bf16::from_f32(v).to_le_bytes();
        store.write(base + 32, &bf(1.5)).unwrap();
        store.write(base + 34, &bf(2.0)).unwrap();
        let op = Op::Elementwise {
            func: BinaryFn::Mul,
            dtype: DType::BF16,
            lhs: base + 32,
            rhs: base + 34,
            out: base + 36,
            elems: 1,
        };
        op.apply(&mut store).unwrap();
        assert_eq!(&*store.read(base + 36, 2).unwrap(), bf(3.0));
    }

    #[test]
    fn operands_are_checked_before_anything_is_written() {
        let (mut store, base) = store();
        let op = Op::Elementwise {
            func: BinaryFn::Add,
            dtype: DType::F32,
            lhs: base,
            rhs: base + 32,
            out: base + 48,
            elems: 8,
        };
        assert!(matches!(
            op.apply(&mut store),
            Err(StoreError::Straddles { .. })
        ));
    }

    #[test]
    fn every_operand_is_checked_with_data_off_and_an_in_place_one_once() {
        let (store, base) = store();
        let mut timing = MemoryStore::timing_only(store.address_map().clone());
        timing.map(base, 64).unwrap();
        let add = |lhs, rhs, out| Op::Elementwise {
            func: BinaryFn::Add,
            dtype: DType::F32,
            lhs,
            rhs,
            out,
            elems: 4,
        };
        let outside = base + 64;
        assert!(add(base, base + 16, base).apply(&mut timing).is_ok());
        for op in [
            add(outside, base, base),
            add(base, outside, base),
            add(base, base, outside),
            add(outside, base, outside),
        ] {
            let err = op.apply(&mut timing).unwrap_err();
            assert!(matches!(err, StoreError::Unmapped { addr, .. } if addr == outside));
        }
        timing.unmap(base).unwrap();
        let err = add(base, base, base).apply(&mut timing).unwrap_err();
        assert!(matches!(err, StoreError::Unmapped { .. }), "{err}");
    }

    #[test]
    fn elided_payloads_replay_only_without_data() {
        let (mut store, base) = store();
        let op = Op::HostWrite {
            addr: base,
            data: vec![1, 2, 3].into(),
        }
        .for_mode(DataMode::Off);
        assert_eq!(
            op,
            Op::HostWrite {
                addr: base,
                data: Payload::Elided { len: 3 }
            }
        );
        assert!(matches!(
            op.apply(&mut store),
            Err(StoreError::PayloadElided { len: 3, .. })
        ));
        let mut timing = MemoryStore::timing_only(store.address_map().clone());
        timing.map(base, 64).unwrap();
        op.apply(&mut timing).unwrap();
    }

    #[test]
    fn gelu_is_the_erf_form() {
        // GeLU(x) = x Φ(x): Φ(0) = 1/2, Φ(±1) = (1 ± erf(1/√2)) / 2 with
        // erf(1/√2) = 0.682689492137... (the one-sigma probability).
        let one_sigma = 0.682_689_5_f32;
        let gelu = |x| UnaryFn::Gelu.eval(x);
        assert_eq!(gelu(0.0), 0.0);
        assert!((gelu(1.0) - (1.0 + one_sigma) / 2.0).abs() < 1e-6);
        assert!((gelu(-1.0) + (1.0 - one_sigma) / 2.0).abs() < 1e-6);
        assert!((gelu(10.0) - 10.0).abs() < 1e-6);
    }
}
