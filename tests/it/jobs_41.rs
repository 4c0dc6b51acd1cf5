//! Issue 41, whole jobs: a generated step with TP, DP and PP all above 1
//! and several micro-batches runs to its end; the memory check refuses a
//! rank that cannot hold its share, naming the rank, the bytes and the
//! capacity; the new models, schedules and DP modes run the same through
//! `chakra-gen` files as through `transformer_step`.

use std::process::{Command, Output};
use std::sync::Arc;

use kernbench::chakra::generate::step::{self, DataParallel, Schedule, Step};
use kernbench::config::Override;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::{self, Options, Report};

use crate::cli_common::TempDir;

fn kernbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn machine(sets: &[&str]) -> Arc<Machine> {
    let mut sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    sets.push(Override::parse("simulation.fidelity=flow").unwrap());
    let spec = TopologySpec::load(&TopologySpec::default_source(), &sets).unwrap();
    Arc::new(Machine::build(&spec).unwrap())
}

fn json(report: &Report) -> serde_json::Value {
    serde_json::to_value(report).unwrap()["figures"].clone()
}

fn figure(report: &Report, name: &str) -> u64 {
    let figures = json(report);
    figures[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no integer figure {name} in {figures}"))
}

fn options(pairs: &[(&str, &str)]) -> Options {
    pairs
        .iter()
        .fold(Options::default(), |o, &(k, v)| o.with(k, v))
}

/// The bytes of HBM one SIP of the default machine holds: 16 cubes
/// (`cube_mesh` 4 × 4) of `cube.hbm.capacity` 16 GiB.
const SIP_HBM: u64 = 16 * (16 << 30);

#[test]
fn gpt3_175b_on_one_sip_per_replica_is_refused_naming_rank_bytes_and_capacity() {
    let dir = TempDir::new("jobs41-oom");
    let prefix = dir.path().join("g");
    let p = prefix.to_str().unwrap();
    let args = [
        "chakra-gen",
        "--model",
        "gpt3-175b",
        "--tp",
        "1",
        "--pp",
        "1",
        "--dp",
        "16",
        "--out",
        p,
    ];
    let output = kernbench(&args);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    // 96 layers of 12 h² parameters at 16 B each (f16 weights and
    // gradients, fp32 master weights and two Adam moments), plus one
    // micro-batch of activations: s·h·(34 + 5·a·s/h) 2-byte units a layer.
    let (h, s, a) = (12288u64, 2048u64, 96u64);
    let needed = 96 * 12 * h * h * 16 + 96 * s * (34 * h + 5 * a * s);
    let expected = format!("rank 0 (stage 0) needs {needed} B of HBM");
    assert!(lines[0].contains(&expected), "{}", lines[0]);
    assert!(
        lines[0].contains(&format!("a SIP holds {SIP_HBM} B")),
        "{}",
        lines[0]
    );
    assert!(!prefix.with_extension("0.et").exists(), "nothing written");
    // --ignore-memory writes them, with a warning (one layer on a machine
    // of 1 GiB cubes: 12 h² · 16 B = 29 GB against 16 GiB).
    let small = ["--set", "cube.hbm.capacity=1 GiB"];
    let layers = ["--layers", "1", "--seq", "128", "--ignore-memory"];
    let output = kernbench(&[&small[..], &args[..], &layers[..]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.starts_with("warning: rank 0 (stage 0) needs "),
        "{stderr}"
    );
}

#[test]
fn the_memory_figures_follow_the_formula_and_the_workload_refuses_too() {
    let base = [
        ("model", "gpt3-125m"),
        ("tp", "2"),
        ("dp", "2"),
        ("pp", "2"),
        ("layers", "2"),
        ("micro-batches", "3"),
        ("seq", "128"),
    ];
    let report = workloads::find("transformer_step")
        .unwrap()
        .run(machine(&["system.sips.count=8"]), &options(&base))
        .unwrap();
    let step = Step {
        tp: 2,
        dp: 2,
        pp: 2,
        layers: 2,
        micro_batches: 3,
        seq: 128,
        ..Step::new(step::model("gpt3-125m").unwrap())
    };
    // Stage 0 keeps 2 micro-batches in flight under 1F1B, stage 1 one.
    let (h, s, a, t) = (768u64, 128u64, 12u64, 2u64);
    let activation = s * (10 * h + 24 * h / t + 5 * a * s / t);
    let params = 12 * h * h / t;
    let rank0 = 16 * params + 2 * activation;
    assert_eq!(step.memory(0).total(), rank0);
    assert_eq!(figure(&report, "rank0_hbm_bytes"), rank0);
    assert_eq!(figure(&report, "rank7_hbm_bytes"), 16 * params + activation);
    assert_eq!(figure(&report, "hbm_peak_bytes"), rank0);
    assert_eq!(figure(&report, "hbm_capacity_bytes"), SIP_HBM);
    let figures = json(&report);
    let ideal = figures["bubble_fraction_ideal"].as_f64().unwrap();
    assert!((ideal - 1.0 / 4.0).abs() < 1e-12, "(PP − 1)/(M + PP − 1)");
    let idle = figures["compute_idle_fraction"].as_f64().unwrap();
    assert!(idle > 0.0 && idle < 1.0, "{idle}");
    // A machine whose cubes hold 1 MiB each (16 MiB a SIP, less than rank
    // 0 needs) is refused before running.
    assert!(rank0 > 16 << 20);
    let small = "cube.hbm.capacity=1 MiB";
    let error = workloads::find("transformer_step")
        .unwrap()
        .run(machine(&["system.sips.count=8", small]), &options(&base))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("rank 0 (stage 0) needs {rank0} B")),
        "{error}"
    );
    assert!(
        error.contains(&format!("a SIP holds {} B", 16 << 20)),
        "{error}"
    );
}

/// `chakra-gen` with `flags`, then `run --bench chakra` on the files, and
/// `transformer_step` with the same flags: the same step time.
fn files_and_memory_agree(flags: &[(&str, &str)], sips: usize) -> Report {
    let dir = TempDir::new("jobs41-same");
    let prefix = dir.path().join("s");
    let p = prefix.to_str().unwrap();
    let mut args = vec!["chakra-gen".to_owned(), "--out".to_owned(), p.to_owned()];
    for (k, v) in flags {
        args.push(format!("--{k}"));
        args.push((*v).to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = kernbench(&args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let count = format!("system.sips.count={sips}");
    let files = workloads::find("chakra")
        .unwrap()
        .run(machine(&[&count]), &Options::default().with("et", p))
        .unwrap();
    let direct = workloads::find("transformer_step")
        .unwrap()
        .run(machine(&[&count]), &options(flags))
        .unwrap();
    for name in ["et_ps", "comm_ps", "exposed_comm_ps", "compute_ps"] {
        assert_eq!(figure(&files, name), figure(&direct, name), "{name}");
    }
    assert_eq!(figure(&direct, "step_ps"), figure(&files, "et_ps"));
    direct
}

#[test]
#[ignore = "whole training steps: release mode, .ci/run"]
fn llama3_with_gqa_swiglu_and_gpipe_runs_the_same_through_files() {
    let flags = [
        ("model", "llama3-8b"),
        ("tp", "2"),
        ("pp", "2"),
        ("layers", "2"),
        ("micro-batches", "2"),
        ("seq", "64"),
        ("schedule", "gpipe"),
        ("dtype", "bf16"),
    ];
    let report = files_and_memory_agree(&flags, 4);
    assert_eq!(json(&report)["schedule"], "gpipe");
    // GQA: the QKV width is h + 2·8·h/32 = 1.5 h, not 3 h.
    let model = step::model("llama3-8b").unwrap();
    assert_eq!(model.qkv_width(), 4096 + 2 * 8 * 128);
    let step = Step {
        tp: 2,
        pp: 2,
        layers: 2,
        micro_batches: 2,
        seq: 64,
        schedule: Schedule::GPipe,
        ..Step::new(model)
    };
    // Forward FLOPs per layer: 2·s·(h·q + h² + h·2f + f·h) + attention
    // 4·s²·h; the backward twice that; 2 layers, 2 micro-batches.
    let (h, q, f, s) = (4096u64, 6144u64, 14336u64, 64u64);
    let per_layer = 2 * s * (h * q + h * h + h * 2 * f + f * h) + 4 * s * s * h;
    assert_eq!(step.flops(), 3 * per_layer * 2 * 2);
    assert_eq!(figure(&report, "flops"), step.flops());
    // GPipe keeps both micro-batches in flight on every stage.
    assert_eq!(
        step.memory(3).activations,
        2 * step.activation_bytes_per_layer()
    );
}

#[test]
#[ignore = "whole training steps: release mode, .ci/run"]
fn zero_gathers_weights_and_scatters_gradients_the_same_through_files() {
    let flags = [
        ("model", "gpt3-125m"),
        ("tp", "2"),
        ("dp", "2"),
        ("pp", "2"),
        ("layers", "2"),
        ("micro-batches", "2"),
        ("seq", "64"),
        ("dp-mode", "zero"),
    ];
    let report = files_and_memory_agree(&flags, 8);
    assert_eq!(json(&report)["dp_mode"], "zero");
    // ZeRO-3 on 1 layer per stage, 2 micro-batches: per rank an
    // all-gather before the layer's forward and backward and a
    // reduce-scatter after its backward; 4 DP groups (2 stages x 2 shards).
    assert_eq!(figure(&report, "allgather_count"), 4 * 2 * 2);
    assert_eq!(figure(&report, "reducescatter_count"), 4 * 2);
    assert_eq!(figure(&report, "allreduce_count"), 4 * 2 * 4, "TP only");
    let step = Step {
        tp: 2,
        dp: 2,
        pp: 2,
        layers: 2,
        micro_batches: 2,
        seq: 64,
        data_parallel: DataParallel::Zero,
        ..Step::new(step::model("gpt3-125m").unwrap())
    };
    // The shard of one layer's 12 h² / TP parameters over DP 2, two
    // gathered layers' weights on top.
    let layer = 12 * 768 * 768 / 2;
    assert_eq!(step.memory(0).weights, 2 * (layer / 2 + 2 * layer));
    assert_eq!(figure(&report, "rank0_hbm_bytes"), step.memory(0).total());
}

/// Issue 41's reproducer: GPT-3 175B at tp 4 dp 2 pp 2, 2 micro-batches,
/// 4 layers, on 16 SIPs (torus_2d). Stage 1's DP bucket all-reduce and its
/// last backward's TP all-reduces run at once on PE 0 of every cube; the
/// DP collective's chunks and both networks' IPCQ slots fragmented the
/// TCM, the TP all-reduce's whole-tile load failed (out of memory), and
/// the failure showed as a deadlock of the orphaned pipeline receives.
/// It now runs to the end, every rank past its last pipeline transfer.
#[test]
#[ignore = "whole training steps: release mode, .ci/run"]
fn a_multi_micro_batch_step_with_tp_dp_and_pp_runs_to_the_end() {
    let flags = [
        ("model", "gpt3-175b"),
        ("tp", "4"),
        ("dp", "2"),
        ("pp", "2"),
        ("layers", "4"),
        ("micro-batches", "2"),
        ("ignore-memory", "on"),
    ];
    let report = workloads::find("transformer_step")
        .unwrap()
        .run(
            machine(&["system.sips.count=16", "system.sips.topology=torus_2d"]),
            &options(&flags),
        )
        .unwrap();
    // 4 TP groups x 2 micro-batches x 2 layers a stage x 4, and 2 buckets
    // (one a layer: 906 MB > 25 MiB) on each of the 8 DP groups.
    assert_eq!(figure(&report, "allreduce_count"), 4 * 2 * 2 * 4 + 8 * 2);
    let step = figure(&report, "step_ps");
    assert!(step > figure(&report, "compute_ps"));
    for rank in 0..16 {
        assert!(figure(&report, &format!("rank{rank}_ps")) > 0);
    }
}

/// The 64-SIP MoE step's flags: Mixtral-8x7B, 8 experts top-2, EP 8 over
/// DP 8, 8 stages of one layer, sequences of 64 tokens.
const MOE: [(&str, &str); 7] = [
    ("model", "mixtral-8x7b"),
    ("tp", "1"),
    ("dp", "8"),
    ("pp", "8"),
    ("ep", "8"),
    ("layers", "8"),
    ("seq", "64"),
];

/// `chakra-gen` with `flags` into `prefix`, then `run --bench chakra` on
/// the files on the machine of `sets`.
fn generated_and_run(prefix: &str, flags: &[(&str, &str)], sets: &[&str]) -> Report {
    let output = chakra_gen(prefix, flags);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{error}");
    workloads::find("chakra")
        .unwrap()
        .run(machine(sets), &Options::default().with("et", prefix))
        .unwrap()
}

/// `chakra-gen` with `flags` into `prefix`: its output.
fn chakra_gen(prefix: &str, flags: &[(&str, &str)]) -> Output {
    let mut args = vec![
        "chakra-gen".to_owned(),
        "--out".to_owned(),
        prefix.to_owned(),
    ];
    for (k, v) in flags {
        args.extend([format!("--{k}"), (*v).to_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kernbench(&args)
}

#[test]
fn chakra_gen_writes_moe_ep_groups_and_refuses_a_bad_ep() {
    let dir = TempDir::new("jobs41-moe");
    let prefix = dir.path().join("m");
    let p = prefix.to_str().unwrap();
    let output = chakra_gen(p, &MOE);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(prefix.with_extension("comm_groups.json")).unwrap();
    let groups: std::collections::BTreeMap<String, Vec<usize>> =
        serde_json::from_str(&text).unwrap();
    // One EP group a stage (the stage's 8 replicas); no expert-DP groups
    // (DP / EP = 1).
    assert_eq!(groups["ep0"], (0..8).collect::<Vec<_>>());
    assert_eq!(groups["ep7"], (56..64).collect::<Vec<_>>());
    assert_eq!(groups.keys().filter(|k| k.starts_with("ep")).count(), 8);
    assert!(!groups.keys().any(|k| k.starts_with("edp")));
    let mut bad = MOE;
    bad[4] = ("ep", "3");
    let output = chakra_gen(p, &bad);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "error: --ep 3 must divide --dp 8 and mixtral-8x7b's 8 experts (the experts are \
         sharded over the DP replicas of a stage)"
    );
    bad[4] = ("ep", "8");
    let output = chakra_gen(p, &[&bad[..], &[("moe-skew", "8")]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        stderr.starts_with("error: --moe-skew 8: expected 0 to --ep − 1 = 7"),
        "{stderr}"
    );
}

/// Issue 41's MoE acceptance: 8 experts, EP 8, top-2 on 64 SIPs
/// (`torus_2d`, flow, `simulation.repeats: replay`) runs through
/// `chakra-gen` files and reports its all-to-all time; `transformer_step`
/// with the same flags gives the same step.
#[test]
#[ignore = "whole training steps: release mode, .ci/run"]
fn a_moe_step_with_ep_8_top_2_on_64_sips_reports_its_all_to_all_time() {
    let dir = TempDir::new("jobs41-moe64");
    let prefix = dir.path().join("m");
    let p = prefix.to_str().unwrap();
    let skewed = [&MOE[..], &[("moe-skew", "0.5")]].concat();
    let sets = [
        "system.sips.count=64",
        "system.sips.topology=torus_2d",
        "simulation.repeats=replay",
    ];
    let files = generated_and_run(p, &skewed, &sets);
    // 8 EP groups (one a stage) x one layer x 4 all-to-alls (dispatch and
    // combine, forward and backward), each t·k·h·e bytes a rank.
    let (t, k, h, e) = (64u64, 2u64, 4096u64, 2u64);
    assert_eq!(figure(&files, "alltoall_count"), 8 * 4);
    assert_eq!(figure(&files, "alltoall_bytes"), 8 * 4 * t * k * h * e);
    assert!(figure(&files, "alltoall_ps") > 0);
    let direct = workloads::find("transformer_step")
        .unwrap()
        .run(machine(&sets), &options(&skewed))
        .unwrap();
    assert_eq!(figure(&direct, "step_ps"), figure(&files, "et_ps"));
    assert_eq!(
        figure(&direct, "alltoall_ps"),
        figure(&files, "alltoall_ps")
    );
    assert_eq!(figure(&direct, "experts"), 8);
    let step = Step {
        tp: 1,
        dp: 8,
        pp: 8,
        ep: 8,
        layers: 8,
        seq: 64,
        moe_skew: 0.5,
        ..Step::new(step::model("mixtral-8x7b").unwrap())
    };
    assert_eq!(figure(&direct, "flops"), step.flops());
}

/// Issue 41's acceptance step: GPT-3 175B at tp 8 dp 16 pp 8, 16
/// micro-batches, on 1,024 SIPs (32×32 `torus_2d`, flow, replayed,
/// ADR-0114): it runs to the end through the files and in memory with
/// the same step time, simulating a few dozen of its 127,744 calls (a
/// repeat of a first call still running follows it; the sends replay).
#[test]
#[ignore = "whole training steps: release mode, .ci/run"]
fn the_175b_step_on_1024_sips_runs_replayed_the_same_through_files() {
    let flags = [
        ("model", "gpt3-175b"),
        ("tp", "8"),
        ("dp", "16"),
        ("pp", "8"),
        ("micro-batches", "16"),
    ];
    let dir = TempDir::new("jobs41-1024");
    let prefix = dir.path().join("s");
    let p = prefix.to_str().unwrap();
    let sets = [
        "system.sips.count=1024",
        "system.sips.topology=torus_2d",
        "simulation.fidelity=flow",
        "simulation.repeats=replay",
    ];
    let files = generated_and_run(p, &flags, &sets);
    let direct = workloads::find("transformer_step")
        .unwrap()
        .run(machine(&sets), &options(&flags))
        .unwrap();
    assert_eq!(figure(&direct, "step_ps"), figure(&files, "et_ps"));
    let (simulated, replayed) = (
        figure(&files, "collectives_simulated"),
        figure(&files, "collectives_replayed"),
    );
    // 128 TP groups x 16 micro-batches x 12 layers x 4 all-reduces, 64 DP
    // groups x 12 buckets, 128 pipelines x 16 x 7 boundaries x 2 sends.
    assert_eq!(
        simulated + replayed,
        128 * 16 * 12 * 4 + 64 * 12 + 128 * 16 * 7 * 2
    );
    assert!(simulated < 64, "{simulated} calls simulated");
    for rank in [0, 511, 1023] {
        assert!(figure(&files, &format!("rank{rank}_ps")) > figure(&files, "et_ps") / 2);
    }
}
