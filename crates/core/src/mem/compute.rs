//! The arithmetic of the compute ops ([`Op::Gemm`](super::Op::Gemm),
//! [`Op::Unary`](super::Op::Unary), [`Op::Reduce`](super::Op::Reduce)) on
//! a [`MemoryStore`].
//!
//! Every op decodes its inputs to `f32`, computes in `f32` in a fixed
//! order (GEMM: `k` ascending for every output; reductions: along the axis,
//! ascending), and rounds once to the output type. Loops are plain Rust
//! (no BLAS, no fused multiply-add), and `exp` is `libm`'s, so results are
//! bit-identical on every machine. With data off, addresses are checked
//! and nothing is computed.

use half::{bf16, f16};

use super::op::{DType, ReduceFn, UnaryFn};
use super::store::{MemoryStore, StoreError};

/// The operands of a matrix product `out (+)= a × b`, row-major.
pub(super) struct GemmOperands {
    pub a: u64,
    pub b: u64,
    pub out: u64,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub dtype: DType,
    pub out_dtype: DType,
    pub accumulate: bool,
}

/// A tensor viewed as `[outer, len, inner]`, reduced along `len`.
pub(super) struct ReduceOperands {
    pub src: u64,
    pub out: u64,
    pub dtype: DType,
    pub outer: u64,
    pub len: u64,
    pub inner: u64,
}

/// `elems` elements of `dtype` in bytes (saturating: an absurd size then
/// fails the store's range check).
pub(super) fn byte_len(dtype: DType, elems: u64) -> u64 {
    dtype.size().saturating_mul(elems)
}

/// Little-endian elements of `dtype` as `f32`s.
fn decode(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
    }
}

/// `values` rounded to `dtype`, little-endian.
fn encode(dtype: DType, values: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        DType::BF16 => values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect(),
    }
}

/// The elements at `addr`, or `None` with data off (after the check).
fn load(
    store: &MemoryStore,
    addr: u64,
    dtype: DType,
    elems: u64,
) -> Result<Option<Vec<f32>>, StoreError> {
    Ok(store
        .bytes(addr, byte_len(dtype, elems))?
        .map(|bytes| decode(dtype, &bytes)))
}

/// `out (+)= a × b` with `f32` accumulation.
pub(super) fn gemm(store: &mut MemoryStore, op: &GemmOperands) -> Result<(), StoreError> {
    let out_len = byte_len(op.out_dtype, op.m.saturating_mul(op.n));
    store.check(op.out, out_len)?;
    let a = load(store, op.a, op.dtype, op.m.saturating_mul(op.k))?;
    let b = load(store, op.b, op.dtype, op.k.saturating_mul(op.n))?;
    let (Some(a), Some(b)) = (a, b) else {
        return Ok(());
    };
    let mut c = match op.accumulate {
        true => load(store, op.out, op.out_dtype, op.m * op.n)?.unwrap_or_default(),
        false => vec![0.0; (op.m * op.n) as usize],
    };
    let (n, k) = (op.n as usize, op.k as usize);
    for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
        for (&a_ik, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
            for (c_ij, &b_kj) in c_row.iter_mut().zip(b_row) {
                *c_ij += a_ik * b_kj;
            }
        }
    }
    store.write(op.out, &encode(op.out_dtype, &c))
}

/// `out[i] = func(src[i])`, converting `from` → `to`.
pub(super) fn unary(
    store: &mut MemoryStore,
    func: UnaryFn,
    [from, to]: [DType; 2],
    [src, out]: [u64; 2],
    elems: u64,
) -> Result<(), StoreError> {
    store.check(out, byte_len(to, elems))?;
    let Some(values) = load(store, src, from, elems)? else {
        return Ok(());
    };
    let result: Vec<f32> = values.into_iter().map(|v| func.eval(v)).collect();
    store.write(out, &encode(to, &result))
}

/// `out[o, i] = func over l of src[o, l, i]`.
pub(super) fn reduce(
    store: &mut MemoryStore,
    func: ReduceFn,
    op: &ReduceOperands,
) -> Result<(), StoreError> {
    let out_elems = op.outer.saturating_mul(op.inner);
    store.check(op.out, byte_len(op.dtype, out_elems))?;
    let src_elems = out_elems.saturating_mul(op.len);
    let Some(values) = load(store, op.src, op.dtype, src_elems)? else {
        return Ok(());
    };
    let (len, inner) = (op.len as usize, op.inner as usize);
    let mut result = vec![func.identity(); out_elems as usize];
    for (slab, out_row) in values
        .chunks_exact(len * inner)
        .zip(result.chunks_exact_mut(inner))
    {
        for row in slab.chunks_exact(inner) {
            for (acc, &v) in out_row.iter_mut().zip(row) {
                *acc = func.combine(*acc, v);
            }
        }
    }
    store.write(op.out, &encode(op.dtype, &result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{Op, Scalar};
    use crate::topology::{AddressMap, MemSpace, TopologySpec};

    fn store() -> (MemoryStore, u64) {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        let map = AddressMap::new(&spec).unwrap();
        let base = map.encode(MemSpace::Sram { sip: 0, cube: 0 }, 0).unwrap();
        let mut store = MemoryStore::new(map);
        store.map(base, 256).unwrap();
        (store, base)
    }

    fn read(store: &MemoryStore, dtype: DType, addr: u64, elems: u64) -> Vec<f32> {
        decode(dtype, &store.read(addr, byte_len(dtype, elems)).unwrap())
    }

    #[test]
    fn decode_and_encode_round_trip_every_type() {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let values = [1.5f32, -2.0, 0.25];
            assert_eq!(decode(dtype, &encode(dtype, &values)), values, "{dtype:?}");
        }
    }

    #[test]
    fn gemm_multiplies_row_major_and_accumulates() {
        let (mut store, base) = store();
        // a = [[1, 2, 3], [4, 5, 6]] (f16), b = [[1, 0], [0, 1], [1, 1]].
        let a = encode(DType::F16, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = encode(DType::F16, &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        store.write(base, &a).unwrap();
        store.write(base + 16, &b).unwrap();
        let mut op = Op::Gemm {
            a: base,
            b: base + 16,
            out: base + 32,
            m: 2,
            n: 2,
            k: 3,
            dtype: DType::F16,
            out_dtype: DType::F32,
            accumulate: false,
        };
        op.apply(&mut store).unwrap();
        assert_eq!(
            read(&store, DType::F32, base + 32, 4),
            [4.0, 5.0, 10.0, 11.0]
        );
        if let Op::Gemm { accumulate, .. } = &mut op {
            *accumulate = true;
        }
        op.apply(&mut store).unwrap();
        assert_eq!(
            read(&store, DType::F32, base + 32, 4),
            [8.0, 10.0, 20.0, 22.0]
        );
        assert_eq!(
            op.inputs().len(),
            3,
            "an accumulating GEMM reads its output"
        );
    }

    #[test]
    fn reductions_run_along_the_middle_axis() {
        let (mut store, base) = store();
        // [2, 3] f32: [[1, 5, 2], [7, -1, 3]].
        let x = encode(DType::F32, &[1.0, 5.0, 2.0, 7.0, -1.0, 3.0]);
        store.write(base, &x).unwrap();
        let reduce = |func, outer, len, inner| Op::Reduce {
            func,
            dtype: DType::F32,
            src: base,
            out: base + 64,
            outer,
            len,
            inner,
        };
        reduce(ReduceFn::Sum, 1, 2, 3).apply(&mut store).unwrap();
        assert_eq!(read(&store, DType::F32, base + 64, 3), [8.0, 4.0, 5.0]);
        reduce(ReduceFn::Max, 2, 3, 1).apply(&mut store).unwrap();
        assert_eq!(read(&store, DType::F32, base + 64, 2), [5.0, 7.0]);
        assert_eq!(reduce(ReduceFn::Max, 2, 3, 1).name(), "reduce_max");
    }

    #[test]
    fn unary_functions_convert_in_place() {
        let (mut store, base) = store();
        store
            .write(base, &encode(DType::F32, &[-1.5, 0.0, 2.0]))
            .unwrap();
        let unary = |func, from, to| Op::Unary {
            func,
            from,
            to,
            src: base,
            out: base,
            elems: 3,
        };
        let scale = UnaryFn::Scale {
            factor: Scalar(3.0),
        };
        unary(scale, DType::F32, DType::F32)
            .apply(&mut store)
            .unwrap();
        unary(UnaryFn::Relu, DType::F32, DType::F32)
            .apply(&mut store)
            .unwrap();
        unary(UnaryFn::Cast, DType::F32, DType::F16)
            .apply(&mut store)
            .unwrap();
        assert_eq!(read(&store, DType::F16, base, 3), [0.0, 0.0, 6.0]);
        unary(UnaryFn::Exp, DType::F16, DType::F16)
            .apply(&mut store)
            .unwrap();
        let e6 = f16::from_f32(6.0f32.exp()).to_f32();
        assert_eq!(read(&store, DType::F16, base, 3), [1.0, 1.0, e6]);
    }
}
