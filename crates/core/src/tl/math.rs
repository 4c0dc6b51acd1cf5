//! PE_MATH ops: elementwise math and reductions on tensors in the PE's TCM.
//!
//! Each call is one PE_MATH job over `E` elements (the output's for
//! elementwise ops, the input's for reductions) that holds the unit for
//! `⌈E / elements_per_cycle⌉ + MATH_PIPELINE_CYCLES` cycles, FIFO
//! ([`crate::hw::math_formula`]). The op takes effect (applied to memory
//! and logged) when PE_MATH starts it, completes when it ends, and the call
//! returns then. Results go to new scratch, except [`Tl::add_assign`].

use crate::hw::explain;
use crate::mem::{BinaryFn, DType, Op, ReduceFn, Scalar, UnaryFn};
use crate::sim;

use super::{KernelError, TensorHandle, Tl};

impl Tl {
    /// `a + b`, elementwise (same shape and type).
    pub async fn add(
        &self,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<TensorHandle, KernelError> {
        self.binary(BinaryFn::Add, a, b).await
    }

    /// `a − b`, elementwise.
    pub async fn sub(
        &self,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<TensorHandle, KernelError> {
        self.binary(BinaryFn::Sub, a, b).await
    }

    /// `a × b`, elementwise.
    pub async fn mul(
        &self,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<TensorHandle, KernelError> {
        self.binary(BinaryFn::Mul, a, b).await
    }

    /// The larger of `a` and `b`, elementwise (Triton's `maximum`).
    pub async fn maximum(
        &self,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<TensorHandle, KernelError> {
        self.binary(BinaryFn::Max, a, b).await
    }

    /// The smaller of `a` and `b`, elementwise (Triton's `minimum`).
    pub async fn minimum(
        &self,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<TensorHandle, KernelError> {
        self.binary(BinaryFn::Min, a, b).await
    }

    /// `acc += x` in place: the accumulate of a reduction loop.
    pub async fn add_assign(
        &self,
        acc: &TensorHandle,
        x: &TensorHandle,
    ) -> Result<(), KernelError> {
        self.apply_assign(BinaryFn::Add, acc, x).await
    }

    /// `acc = func(acc, x)` in place: the combine step of a reduction of
    /// any operator.
    pub async fn apply_assign(
        &self,
        func: BinaryFn,
        acc: &TensorHandle,
        x: &TensorHandle,
    ) -> Result<(), KernelError> {
        let (op, elements) = self.assign_op(func, acc, x)?;
        self.run_math(op, elements).await
    }

    /// The checked op of [`apply_assign`](Self::apply_assign), for
    /// [`run_math`](Self::run_math): a caller that awaits it at once runs
    /// it with one future fewer.
    pub(crate) fn assign_op(
        &self,
        func: BinaryFn,
        acc: &TensorHandle,
        x: &TensorHandle,
    ) -> Result<(Op, u64), KernelError> {
        self.binary_op(func, acc, [acc, x])
    }

    /// `e^x`, elementwise.
    pub async fn exp(&self, x: &TensorHandle) -> Result<TensorHandle, KernelError> {
        self.unary(UnaryFn::Exp, x, x.dtype()).await
    }

    /// `max(x, 0)`, elementwise.
    pub async fn relu(&self, x: &TensorHandle) -> Result<TensorHandle, KernelError> {
        self.unary(UnaryFn::Relu, x, x.dtype()).await
    }

    /// GeLU (erf form), elementwise.
    pub async fn gelu(&self, x: &TensorHandle) -> Result<TensorHandle, KernelError> {
        self.unary(UnaryFn::Gelu, x, x.dtype()).await
    }

    /// `x × factor`, elementwise.
    pub async fn scale(&self, x: &TensorHandle, factor: f32) -> Result<TensorHandle, KernelError> {
        let func = UnaryFn::Scale {
            factor: Scalar(factor),
        };
        self.unary(func, x, x.dtype()).await
    }

    /// `x` converted to `dtype` (rounded to nearest even).
    pub async fn cast(&self, x: &TensorHandle, dtype: DType) -> Result<TensorHandle, KernelError> {
        self.unary(UnaryFn::Cast, x, dtype).await
    }

    /// The sum along `axis`, which is removed from the shape (`f32`
    /// accumulation, in axis order).
    pub async fn sum(&self, x: &TensorHandle, axis: usize) -> Result<TensorHandle, KernelError> {
        self.reduce(ReduceFn::Sum, x, axis).await
    }

    /// The largest element along `axis`, which is removed from the shape.
    pub async fn max(&self, x: &TensorHandle, axis: usize) -> Result<TensorHandle, KernelError> {
        self.reduce(ReduceFn::Max, x, axis).await
    }

    async fn binary(
        &self,
        func: BinaryFn,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<TensorHandle, KernelError> {
        let out = self.scratch_tensor(func.name(), a.shape(), a.dtype())?;
        let (op, elements) = self.binary_op(func, &out, [a, b])?;
        self.run_math(op, elements).await?;
        Ok(out)
    }

    /// The op `out = func(a, b)`, checked, and its element count.
    fn binary_op(
        &self,
        func: BinaryFn,
        out: &TensorHandle,
        [a, b]: [&TensorHandle; 2],
    ) -> Result<(Op, u64), KernelError> {
        let op = func.name();
        self.check_local(op, a)?;
        // An in-place op's output is its first operand: checked already.
        let rest: &[&TensorHandle] = match std::ptr::eq(out, a) {
            true => &[b],
            false => &[b, out],
        };
        for &operand in rest {
            self.check_local(op, operand)?;
            check_alike(op, a, operand)?;
        }
        let elems = a.elements();
        let (lhs, rhs, out, dtype) = (a.addr(), b.addr(), out.addr(), a.dtype());
        let op = Op::Elementwise {
            func,
            dtype,
            lhs,
            rhs,
            out,
            elems,
        };
        Ok((op, elems))
    }

    async fn unary(
        &self,
        func: UnaryFn,
        x: &TensorHandle,
        to: DType,
    ) -> Result<TensorHandle, KernelError> {
        self.check_local(func.name(), x)?;
        let out = self.scratch_tensor(func.name(), x.shape(), to)?;
        let op = Op::Unary {
            func,
            from: x.dtype(),
            to,
            src: x.addr(),
            out: out.addr(),
            elems: x.elements(),
        };
        self.run_math(op, x.elements()).await?;
        Ok(out)
    }

    async fn reduce(
        &self,
        func: ReduceFn,
        x: &TensorHandle,
        axis: usize,
    ) -> Result<TensorHandle, KernelError> {
        self.check_local(func.name(), x)?;
        let shape = x.shape();
        let Some(&len) = shape.get(axis) else {
            let reason = format!("axis {axis} of a {}-D tensor", shape.len());
            return Err(KernelError::operands(func.name(), reason));
        };
        let product = |dims: &[usize]| dims.iter().map(|&d| d as u64).product::<u64>();
        let kept: Vec<usize> = [&shape[..axis], &shape[axis + 1..]].concat();
        let out = self.scratch_tensor(func.name(), &kept, x.dtype())?;
        let op = Op::Reduce {
            func,
            dtype: x.dtype(),
            src: x.addr(),
            out: out.addr(),
            outer: product(&shape[..axis]),
            len: len as u64,
            inner: product(&shape[axis + 1..]),
        };
        self.run_math(op, x.elements()).await?;
        Ok(out)
    }

    /// Runs `op` over `elements` on PE_MATH: applied when the unit starts
    /// it, completed when it ends.
    pub(crate) async fn run_math(&self, op: Op, elements: u64) -> Result<(), KernelError> {
        let p = &self.program;
        let held = p.math.reserve(elements)?;
        if explain::recording() {
            let queue = held.start.saturating_since(sim::now()).as_ps();
            explain::push_server(p.math.server(), explain::TermKind::Queue, queue);
        }
        explain::sleep_until(held.start).await;
        let id = p
            .device
            .apply_remembered(p.math.name(), op, &p.math_regions)?;
        if explain::recording() {
            let service = held.end.saturating_since(held.start).as_ps();
            explain::push_server(p.math.server(), explain::TermKind::Service, service);
        }
        explain::sleep_until(held.end).await;
        p.device.complete(id)?;
        Ok(())
    }
}

/// Errors unless `b` has `a`'s shape and element type.
#[inline]
pub(super) fn check_alike(
    op: &'static str,
    a: &TensorHandle,
    b: &TensorHandle,
) -> Result<(), KernelError> {
    // Element by element: a shape is short, and a slice comparison
    // would call `memcmp`.
    let (x, y) = (a.shape(), b.shape());
    let same_shape = x.len() == y.len() && x.iter().zip(y).all(|(i, j)| i == j);
    if same_shape && a.dtype() == b.dtype() {
        return Ok(());
    }
    Err(unalike(op, a, b))
}

/// The error of [`check_alike`], out of its inlined fast path.
#[cold]
fn unalike(op: &'static str, a: &TensorHandle, b: &TensorHandle) -> KernelError {
    let reason = format!(
        "operands differ: {:?} {:?} and {:?} {:?}",
        a.shape(),
        a.dtype(),
        b.shape(),
        b.dtype()
    );
    KernelError::operands(op, reason)
}
