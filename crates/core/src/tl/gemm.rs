//! PE_GEMM: `dot`, `dot_acc` and `composite`, a GEMM whose output tiles
//! stream through an epilogue of math ops on PE_MATH as one pipeline job
//! (seed ADR-0014's TileToken stages; timing in [`crate::hw::pe`]).
//!
//! Operands are row-major and in the PE's TCM; `a` is `[M, K]`, `b` is
//! `[K, N]`, both `f16`, `bf16` or `f32` (the same); the product is
//! accumulated and returned in `f32`. A job takes effect (its GEMM op and
//! every epilogue op applied and logged, in order) when its first tile
//! starts on PE_GEMM; the GEMM op completes when the last tile leaves the
//! array, the epilogue ops when the last tile's epilogue ends.

use std::cell::RefCell;
use std::pin::pin;
use std::rc::Rc;

use crate::hw::{GemmShape, PipelineJob, explain};
use crate::mem::{BinaryFn, DType, Op, Scalar, UnaryFn};
use crate::sim::{self, Event};

use super::math::check_alike;
use super::{KernelError, TensorHandle, Tl};

/// One step of a composite's epilogue, applied in order to every element
/// of the GEMM's output `c` on PE_MATH.
#[derive(Debug, Clone, PartialEq)]
pub enum Epilogue {
    /// `c = func(c, operand)`; `operand` is in this PE's TCM and has `c`'s
    /// shape and current element type (`f32` until a [`Cast`](Self::Cast)).
    Binary(BinaryFn, TensorHandle),
    /// `c = e^c`.
    Exp,
    /// `c = max(c, 0)`.
    Relu,
    /// `c = GeLU(c)` (erf form).
    Gelu,
    /// `c = c × factor`.
    Scale(f32),
    /// `c` converted to another element type, in place.
    Cast(DType),
}

/// A submitted composite: [`wait`](Self::wait) for its output.
#[must_use = "a composite's errors surface through wait (or when the kernel ends)"]
pub struct CompositeToken {
    output: TensorHandle,
    job: Rc<PendingJob>,
}

impl CompositeToken {
    /// Waits until the job's last epilogue step has ended; returns the
    /// output tensor.
    pub async fn wait(self) -> Result<TensorHandle, KernelError> {
        self.job.done.wait().await;
        match self.job.result.take() {
            Some(Err(error)) => Err(error),
            _ => Ok(self.output),
        }
    }
}

/// A pipeline job running in its own task, and its result once done.
pub(super) struct PendingJob {
    done: Event,
    result: RefCell<Option<Result<(), KernelError>>>,
}

impl PendingJob {
    /// Done, and its result taken by a `wait`.
    fn consumed(&self) -> bool {
        self.done.is_set() && self.result.borrow().is_none()
    }
}

/// What one pipeline job does: its timing and its ops.
struct Plan {
    job: PipelineJob,
    gemm: Op,
    epilogue: Vec<Op>,
}

impl Plan {
    /// `c (+)= a × b` of `[m, n, k]`, without epilogue (operands already
    /// checked).
    fn new([a, b, c]: [&TensorHandle; 3], dims: [usize; 3], accumulate: bool) -> Plan {
        let [m, n, k] = dims.map(|d| d as u64);
        let job = PipelineJob {
            gemm: GemmShape {
                m,
                n,
                k,
                in_bytes: a.dtype().size(),
                out_bytes: DType::F32.size(),
                accumulate,
            },
            epilogue_steps: 0,
        };
        let gemm = Op::Gemm {
            a: a.addr(),
            b: b.addr(),
            out: c.addr(),
            m,
            n,
            k,
            dtype: a.dtype(),
            out_dtype: DType::F32,
            accumulate,
        };
        Plan {
            job,
            gemm,
            epilogue: Vec::new(),
        }
    }
}

impl Tl {
    /// `a × b` into new `f32` scratch `[M, N]`; returns when it is done.
    pub async fn dot(
        &self,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<TensorHandle, KernelError> {
        let dims @ [m, n, _] = self.gemm_dims("dot", a, b)?;
        let c = self.scratch_tensor("dot", &[m, n], DType::F32)?;
        self.execute(Plan::new([a, b, &c], dims, false)).await?;
        Ok(c)
    }

    /// `acc += a × b`, `acc` an `f32` `[M, N]` tensor in this PE's TCM (the
    /// accumulator of a loop over `K`); returns when it is done.
    pub async fn dot_acc(
        &self,
        acc: &TensorHandle,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<(), KernelError> {
        let dims @ [m, n, _] = self.gemm_dims("dot_acc", a, b)?;
        self.check_local("dot_acc", acc)?;
        if acc.shape() != [m, n] || acc.dtype() != DType::F32 {
            let reason = format!(
                "accumulator is {:?} {:?}, not [{m}, {n}] F32",
                acc.shape(),
                acc.dtype()
            );
            return Err(KernelError::operands("dot_acc", reason));
        }
        self.execute(Plan::new([a, b, acc], dims, true)).await
    }

    /// Submits `epilogue(a × b)` as one pipeline job and returns at once;
    /// the output is new scratch `[M, N]` (`f32`, or the type of the last
    /// [`Epilogue::Cast`]). The kernel goes on while PE_GEMM and PE_MATH
    /// work; a job nobody waits for is waited for when the kernel ends.
    pub fn composite(
        &self,
        a: &TensorHandle,
        b: &TensorHandle,
        epilogue: &[Epilogue],
    ) -> Result<CompositeToken, KernelError> {
        let dims @ [m, n, _] = self.gemm_dims("composite", a, b)?;
        let c = self.scratch_tensor("composite", &[m, n], DType::F32)?;
        let (epilogue_ops, dtype) = self.epilogue_ops(&c, epilogue)?;
        let mut plan = Plan::new([a, b, &c], dims, false);
        plan.job.epilogue_steps = epilogue_ops.len() as u64;
        plan.epilogue = epilogue_ops;
        let job = self.spawn_job(plan);
        Ok(CompositeToken {
            output: c.retyped(dtype),
            job,
        })
    }

    /// Waits for every pipeline job not yet waited for; the first error
    /// among them, if any.
    pub(super) async fn drain_jobs(&self) -> Result<(), KernelError> {
        let jobs = std::mem::take(&mut *self.program.jobs.borrow_mut());
        let mut first = Ok(());
        for job in jobs {
            job.done.wait().await;
            if let Some(Err(error)) = job.result.take() {
                first = first.and(Err(error));
            }
        }
        first
    }

    /// `[M, N, K]` of `a × b`, after checking the operands.
    fn gemm_dims(
        &self,
        op: &'static str,
        a: &TensorHandle,
        b: &TensorHandle,
    ) -> Result<[usize; 3], KernelError> {
        self.check_local(op, a)?;
        self.check_local(op, b)?;
        let (&[m, k], &[k2, n]) = (a.shape(), b.shape()) else {
            let reason = format!(
                "needs 2-D operands, got {:?} and {:?}",
                a.shape(),
                b.shape()
            );
            return Err(KernelError::operands(op, reason));
        };
        if k != k2 || a.dtype() != b.dtype() {
            let reason = format!(
                "cannot multiply {:?} {:?} by {:?} {:?}",
                a.shape(),
                a.dtype(),
                b.shape(),
                b.dtype()
            );
            return Err(KernelError::operands(op, reason));
        }
        Ok([m, n, k])
    }

    /// The ops of `steps` applied in place to `c`, and `c`'s final type.
    fn epilogue_ops(
        &self,
        c: &TensorHandle,
        steps: &[Epilogue],
    ) -> Result<(Vec<Op>, DType), KernelError> {
        let mut c = c.clone();
        let mut ops = Vec::with_capacity(steps.len());
        for step in steps {
            let (op, dtype) = self.epilogue_op(&c, step)?;
            ops.push(op);
            c = c.retyped(dtype);
        }
        Ok((ops, c.dtype()))
    }

    /// One step's op on `c` (as it is before the step), and `c`'s type
    /// after it.
    fn epilogue_op(&self, c: &TensorHandle, step: &Epilogue) -> Result<(Op, DType), KernelError> {
        let (addr, elems, from) = (c.addr(), c.elements(), c.dtype());
        let unary = |func, to| Op::Unary {
            func,
            from,
            to,
            src: addr,
            out: addr,
            elems,
        };
        let op = match step {
            Epilogue::Binary(func, operand) => {
                self.check_local("composite", operand)?;
                check_alike("composite", c, operand)?;
                let (func, rhs) = (*func, operand.addr());
                Op::Elementwise {
                    func,
                    dtype: from,
                    lhs: addr,
                    rhs,
                    out: addr,
                    elems,
                }
            }
            Epilogue::Exp => unary(UnaryFn::Exp, from),
            Epilogue::Relu => unary(UnaryFn::Relu, from),
            Epilogue::Gelu => unary(UnaryFn::Gelu, from),
            Epilogue::Scale(factor) => unary(
                UnaryFn::Scale {
                    factor: Scalar(*factor),
                },
                from,
            ),
            Epilogue::Cast(to) => unary(UnaryFn::Cast, *to),
        };
        let to = if let Epilogue::Cast(to) = step {
            *to
        } else {
            from
        };
        Ok((op, to))
    }

    /// Runs `plan` in a task of its own, which stops if the launch is
    /// cancelled.
    fn spawn_job(&self, plan: Plan) -> Rc<PendingJob> {
        let p = &self.program;
        let job = Rc::new(PendingJob {
            done: Event::new(&format!("{}.pipeline", p.coord)),
            result: RefCell::new(None),
        });
        p.jobs.borrow_mut().retain(|j| !j.consumed());
        p.jobs.borrow_mut().push(job.clone());
        let (tl, pending) = (self.clone(), job.clone());
        sim::spawn(&format!("{}.pipeline", p.coord), async move {
            let cancel = tl.program.cancel.clone();
            let execute = pin!(tl.execute(plan));
            let result = cancel.cancels(execute).await;
            let result = result.unwrap_or(Err(KernelError::Cancelled));
            *pending.result.borrow_mut() = Some(result);
            pending.done.set();
        });
        job
    }

    /// Runs one pipeline job on PE_GEMM and PE_MATH; see the module docs
    /// for when its ops take effect and complete.
    async fn execute(&self, plan: Plan) -> Result<(), KernelError> {
        let p = &self.program;
        let run = p.gemm.submit(&plan.job)?;
        if explain::recording() {
            let queue = run.start().saturating_since(sim::now()).as_ps();
            explain::push_server(p.gemm.server(), explain::TermKind::Queue, queue);
        }
        explain::sleep_until(run.start()).await;
        let gemm = p.device.apply(p.gemm.name(), plan.gemm)?;
        let epilogue = plan
            .epilogue
            .into_iter()
            .map(|op| p.device.apply(p.math.name(), op))
            .collect::<Result<Vec<_>, _>>()?;
        let gemm_end = run.gemm_end();
        let gemm_done = async {
            if explain::recording() {
                let service = gemm_end.saturating_since(sim::now()).as_ps();
                explain::push_server(p.gemm.server(), explain::TermKind::Service, service);
            }
            explain::sleep_until(gemm_end).await;
            p.device.complete(gemm)
        };
        let (gemm_done, math_done) = futures::join!(gemm_done, run.finish(&p.math));
        gemm_done?;
        math_done?;
        for id in epilogue {
            p.device.complete(id)?;
        }
        Ok(())
    }
}
