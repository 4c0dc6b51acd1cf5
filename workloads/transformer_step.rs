//! `transformer_step`: one transformer training step (Megatron TP, DP and
//! a 1F1B pipeline; `kernbench::chakra::generate::step`) generated in
//! memory and run exactly as `kernbench chakra-gen --model ...` followed by
//! `run --bench chakra --et PREFIX` runs its files (the same traces, the
//! same executor, the same figures), plus the step's FLOPs and MFU:
//! `flops / (et_ps × peak)`, peak being every PE_GEMM array of the
//! `TP × DP × PP` SIPs at its clock.

use std::rc::Rc;

use kernbench::chakra;
use kernbench::chakra::generate::step::{self, Step};
use kernbench::runtime::Torch;
use kernbench::workloads::et::{self, ComputeMode};
use kernbench::workloads::{Definition, Figure, Options, Outcome, Param, WorkloadError};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "A generated transformer training step (TP, DP, 1F1B PP): step time, compute/comm/exposed, MFU",
    params: &[
        Param {
            name: "model",
            value_name: "NAME",
            help: "Model shape: gpt3-125m, gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b, gpt3-175b (default gpt3-13b)",
        },
        Param {
            name: "tp",
            value_name: "T",
            help: "Tensor-parallel degree (default 1)",
        },
        Param {
            name: "dp",
            value_name: "D",
            help: "Data-parallel degree (default 1)",
        },
        Param {
            name: "pp",
            value_name: "P",
            help: "Pipeline stages, 1F1B schedule (default 1)",
        },
        Param {
            name: "layers",
            value_name: "L",
            help: "Transformer layers (default: the model's)",
        },
        Param {
            name: "micro-batches",
            value_name: "M",
            help: "Micro-batches per step (default 1)",
        },
        Param {
            name: "seq",
            value_name: "S",
            help: "Sequence length, tokens per micro-batch (default 2048)",
        },
    ],
    host: |torch, options| Box::pin(run(torch, options)),
};

/// The step the options describe.
pub fn step(options: &Options) -> Result<Step, WorkloadError> {
    let name = options
        .get::<String>("model")?
        .unwrap_or_else(|| "gpt3-13b".to_owned());
    let model = step::model(&name)?;
    Ok(Step {
        model,
        tp: options.get("tp")?.unwrap_or(1),
        dp: options.get("dp")?.unwrap_or(1),
        pp: options.get("pp")?.unwrap_or(1),
        layers: options.get("layers")?.unwrap_or(model.layers),
        micro_batches: options.get("micro-batches")?.unwrap_or(1),
        seq: options.get("seq")?.unwrap_or(2048),
    })
}

async fn run(torch: Torch, options: Options) -> Result<Outcome, WorkloadError> {
    let step = step(&options)?;
    let (traces, groups) = step.generate()?;
    let n = traces.len();
    let machine = torch.device().fabric().machine().clone();
    let sips = machine.sip_count() as usize;
    if n > sips {
        return Err(WorkloadError::BadOption(format!(
            "--tp {} --dp {} --pp {}: {n} ranks (rank = SIP), but the machine has {sips} SIPs: \
             set system.sips.count to at least {n} (--set system.sips.count={n})",
            step.tp, step.dp, step.pp
        )));
    }
    let files = (0..n).map(|r| format!("{}.{r}", step.model.name)).collect();
    let set = chakra::assemble(files, &traces, &groups)?;
    let set = Rc::new(set);
    let result = et::run(torch, set.clone(), ComputeMode::Roofline).await?;
    let figures_of_run = et::figures(&set, &result);
    let step_ps = et::step_time(&set, &result).as_ps();
    let spec = machine.spec();
    let per_sip =
        spec.pe().peak_flops() * u64::from(machine.pes_per_cube() * machine.cubes_per_sip());
    let peak = per_sip as f64 * n as f64;
    let flops = step.flops();
    let mfu = flops as f64 / (step_ps as f64 * 1e-12 * peak);
    let mut figures = vec![
        Figure::text("model", step.model.name),
        Figure::int("tp", step.tp as u64),
        Figure::int("dp", step.dp as u64),
        Figure::int("pp", step.pp as u64),
        Figure::int("layers", step.layers as u64),
        Figure::int("micro_batches", step.micro_batches as u64),
        Figure::int("seq", step.seq),
        Figure::text("schedule", "1f1b"),
        Figure::int("flops", flops),
        Figure::real("peak_tflops", peak / 1e12),
        Figure::real("mfu", mfu),
        Figure::int("step_ps", step_ps),
    ];
    figures.extend(figures_of_run);
    Ok(Outcome {
        checks: Vec::new(),
        figures,
    })
}
