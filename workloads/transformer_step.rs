//! `transformer_step`: one transformer training step (Megatron TP, DP and
//! a 1F1B pipeline; `kernbench::chakra::generate::step`) generated in
//! memory and run exactly as `kernbench chakra-gen --model ...` followed by
//! `run --bench chakra --et PREFIX` runs its files (the same traces, the
//! same executor, the same figures), plus the step's FLOPs and MFU:
//! `flops / (et_ps × peak)`, peak being every PE_GEMM array of the
//! `TP × DP × PP` SIPs at its clock. A mixture-of-experts model
//! (`mixtral-8x7b`) takes `--ep` and `--moe-skew` and adds `experts`,
//! `top_k`, `ep` and `moe_skew` to the figures. Per pipeline stage its
//! busiest rank's compute (`stage{s}_compute_ps`) and the stage with the
//! most (`bottleneck_stage`), as for any trace (`et::stages`: the
//! generated groups lie within a stage, so the stages are the step's).

use std::rc::Rc;

use kernbench::chakra;
use kernbench::chakra::generate::step::{self, DataParallel, Dtype, Schedule, Step};
use kernbench::runtime::Torch;
use kernbench::workloads::et::{self, ComputeMode};
use kernbench::workloads::{Definition, Figure, Options, Outcome, Param, WorkloadError};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "A generated transformer training step (TP, DP or ZeRO, 1F1B or GPipe PP): step time, compute/comm/exposed, MFU, bubble, HBM per rank",
    params: &[
        Param {
            name: "model",
            value_name: "NAME",
            help: "Model: gpt3-125m, gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b, gpt3-175b, llama3-8b, llama3-70b, mixtral-8x7b (default gpt3-13b)",
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
            help: "Sequence length, tokens per sequence (default 2048)",
        },
        Param {
            name: "micro-batch-size",
            value_name: "B",
            help: "Sequences per micro-batch (default 1)",
        },
        Param {
            name: "dtype",
            value_name: "TYPE",
            help: "Element type: f16, bf16 or f32 (default f16)",
        },
        Param {
            name: "schedule",
            value_name: "NAME",
            help: "Pipeline schedule: 1f1b or gpipe (default 1f1b)",
        },
        Param {
            name: "dp-mode",
            value_name: "MODE",
            help: "Data parallelism: allreduce (DDP) or zero (ZeRO-3 / FSDP) (default allreduce)",
        },
        Param {
            name: "ep",
            value_name: "EP",
            help: "Expert-parallel degree of a mixture-of-experts model: experts sharded over EP neighbouring DP replicas (divides dp and the experts; default 1)",
        },
        Param {
            name: "moe-skew",
            value_name: "SKEW",
            help: "MoE load skew: the busiest EP rank of each layer receives (1 + SKEW) x the mean tokens, 0 to EP - 1 (default 0)",
        },
        Param {
            name: "ignore-memory",
            value_name: "on|off",
            help: "on: run even if a rank's weights, gradients, optimizer and activations exceed its SIP's HBM, with a warning (default off)",
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
    let text = |key: &str, default: &str| -> Result<String, WorkloadError> {
        Ok(options
            .get::<String>(key)?
            .unwrap_or_else(|| default.to_owned()))
    };
    Ok(Step {
        tp: options.get("tp")?.unwrap_or(1),
        dp: options.get("dp")?.unwrap_or(1),
        pp: options.get("pp")?.unwrap_or(1),
        layers: options.get("layers")?.unwrap_or(model.layers),
        micro_batches: options.get("micro-batches")?.unwrap_or(1),
        seq: options.get("seq")?.unwrap_or(2048),
        micro_batch: options.get("micro-batch-size")?.unwrap_or(1),
        dtype: Dtype::parse(&text("dtype", "f16")?)?,
        schedule: Schedule::parse(&text("schedule", "1f1b")?)?,
        data_parallel: DataParallel::parse(&text("dp-mode", "allreduce")?)?,
        ep: options.get("ep")?.unwrap_or(1),
        moe_skew: options.get("moe-skew")?.unwrap_or(0.0),
        ..Step::new(model)
    })
}

/// Refuses (or, with `--ignore-memory on`, warns about) a step whose
/// busiest rank does not fit its SIP's HBM; the per-rank figures.
fn memory_figures(
    step: &Step,
    torch: &Torch,
    options: &Options,
) -> Result<Vec<Figure>, WorkloadError> {
    let machine = torch.device().fabric().machine();
    let capacity =
        machine.spec().cube().hbm.capacity.get().bytes() * u64::from(machine.cubes_per_sip());
    let ignore = text_flag(options, "ignore-memory")?.unwrap_or(false);
    if let Err(error) = step.check_memory(capacity) {
        match ignore {
            true => eprintln!("warning: {error}"),
            false => return Err(error.into()),
        }
    }
    let memories = step.memories();
    let peak = memories.iter().map(|m| m.total()).max().unwrap_or(0);
    let mut figures = vec![
        Figure::int("hbm_capacity_bytes", capacity),
        Figure::int("hbm_peak_bytes", peak),
    ];
    for m in &memories {
        figures.push(Figure::int(
            figure_name(format!("rank{}_hbm_bytes", m.rank)),
            m.total(),
        ));
    }
    Ok(figures)
}

/// `--NAME on|off`.
fn text_flag(options: &Options, name: &str) -> Result<Option<bool>, WorkloadError> {
    match options.get::<String>(name)?.as_deref() {
        None => Ok(None),
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some(other) => Err(WorkloadError::BadOption(format!(
            "--{name} {other}: expected on or off"
        ))),
    }
}

/// Figure names are `&'static str`; these are made per rank, each kept
/// once for the life of the process (a bounded set).
fn figure_name(text: String) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(text.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(text.into_boxed_str());
    names.insert(leaked);
    leaked
}

async fn run(torch: Torch, options: Options) -> Result<Outcome, WorkloadError> {
    let step = step(&options)?;
    step.check()?;
    let memory = memory_figures(&step, &torch, &options)?;
    let (traces, groups) = step.generate()?;
    let n = traces.len();
    let machine = torch.device().fabric().machine().clone();
    let sips = torch.world_sips();
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
        Figure::int("micro_batch_size", step.micro_batch),
        Figure::text("dtype", step.dtype.name()),
        Figure::text("schedule", step.schedule.name()),
        Figure::text("dp_mode", step.data_parallel.name()),
        Figure::int("flops", flops),
        Figure::real("peak_tflops", peak / 1e12),
        Figure::real("mfu", mfu),
        Figure::int("step_ps", step_ps),
    ];
    if step.model.is_moe() {
        figures.extend([
            Figure::int("experts", step.model.experts),
            Figure::int("top_k", step.model.top_k),
            Figure::int("ep", step.ep as u64),
            Figure::real("moe_skew", step.moe_skew),
        ]);
    }
    figures.extend(bubble_figures(&step, &set, &result, step_ps));
    figures.extend(memory);
    figures.extend(figures_of_run);
    Ok(Outcome {
        checks: Vec::new(),
        figures,
    })
}

/// The pipeline bubble (ADR-0097): `bubble_fraction_ideal`, the
/// schedule's `(PP − 1) / (M + PP − 1)` (1F1B and GPipe alike), and
/// `compute_idle_fraction`, the share of the step the ranks' compute
/// streams stand idle, `1 − Σ compute_r / (ranks × step)` (bubble and
/// exposed communication together).
fn bubble_figures(
    step: &Step,
    set: &chakra::TraceSet,
    result: &et::EtResult,
    step_ps: u64,
) -> Vec<Figure> {
    let (p, m) = (step.pp as f64, step.micro_batches as f64);
    let ranks = set.graphs.len();
    let compute: u64 = (0..ranks)
        .map(|r| et::split(set, result, r).compute.as_ps())
        .sum();
    let idle = match step_ps {
        0 => 0.0,
        step_ps => 1.0 - compute as f64 / (ranks as f64 * step_ps as f64),
    };
    vec![
        Figure::real("bubble_fraction_ideal", (p - 1.0) / (m + p - 1.0)),
        Figure::real("compute_idle_fraction", idle),
    ]
}
