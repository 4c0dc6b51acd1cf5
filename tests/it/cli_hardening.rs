//! The reproducers of issue 26 (items 4 to 14) as a user types them: each
//! ends in a correct result or a bounded refusal — one `error:` line naming
//! the input, exit 1 or 2.

use crate::cli_common;

use std::process::Output;

use cli_common::{TempDir, kernbench, stderr, stdout};

/// The one `error:` line of a refused command, with its exit code.
fn refusal(output: &Output) -> (i32, String) {
    let text = stderr(output);
    let errors: Vec<_> = text.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line expected: {text}");
    (output.status.code().unwrap(), errors[0].to_owned())
}

#[test]
fn probe_refuses_a_size_its_sweep_cannot_spread() {
    let dir = TempDir::new("hard-probe");
    for size in ["1", "1 B"] {
        let (code, line) = refusal(&kernbench(dir.path(), &["probe", "--size", size]));
        assert_eq!(code, 2, "{line}");
        assert!(line.contains("smallest valid size is 2 B"), "{line}");
    }
    let output = kernbench(dir.path(), &["probe", "--size", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_sweep_with_a_failed_point_exits_non_zero() {
    let dir = TempDir::new("hard-sweep-fail");
    // 101 B is half an f16 element over (any whole count runs, ADR-0045).
    for size in ["101", "NaN"] {
        let output = kernbench(
            dir.path(),
            &["sweep", "--bench", "ccl_allreduce", "--size", size],
        );
        let (code, line) = refusal(&output);
        assert_eq!(code, 1, "{line}");
        assert!(
            line.contains("1 of 1 point(s) failed (1 could not run"),
            "{line}"
        );
        assert!(stdout(&output).contains(&format!("size={size}")));
    }
    let args = ["sweep", "--bench", "ccl_allreduce", "--size", "1K,101"];
    let (code, line) = refusal(&kernbench(dir.path(), &args));
    assert_eq!(
        (code, line.contains("1 of 2 point(s)")),
        (1, true),
        "{line}"
    );
    let args = ["sweep", "--bench", "ccl_allreduce", "--size", "1K,2K"];
    assert!(kernbench(dir.path(), &args).status.success());
}

#[test]
fn sweep_out_is_checked_before_the_first_point_and_named() {
    let dir = TempDir::new("hard-out");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let path = file.to_str().unwrap();
    let args = [
        "sweep",
        "--bench",
        "ccl_allreduce",
        "--size",
        "1K",
        "--out",
        path,
    ];
    let output = kernbench(dir.path(), &args);
    let (code, line) = refusal(&output);
    assert_eq!(code, 1);
    assert!(line.contains(path), "{line}");
    assert!(
        stdout(&output).is_empty(),
        "no point ran: {}",
        stdout(&output)
    );
}

/// Issue 40 item 14: `chakra-gen --out` into a folder that does not exist
/// (or is a file) is refused before generating, naming the folder.
#[test]
fn chakra_gen_checks_its_out_folder_before_any_work() {
    let dir = TempDir::new("hard-gen-out");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.path().join("no/such/folder");
    for (folder, problem) in [(&missing, "no such folder"), (&file, "is not a folder")] {
        let prefix = folder.join("step");
        let args = [
            "chakra-gen",
            "--model",
            "gpt3-13b",
            "--tp",
            "4",
            "--out",
            prefix.to_str().unwrap(),
        ];
        let (code, line) = refusal(&kernbench(dir.path(), &args));
        assert_eq!(code, 1, "{line}");
        let expected = format!("cannot write output to {}: {problem}", folder.display());
        assert!(line.contains(&expected), "{line}");
    }
}

/// Issue 40 item 10: a `--vary` value whose machine would not fit the host
/// (here a 4 GiB address-space cap) is refused before the first point runs,
/// as `run` refuses it, naming the assignment.
#[cfg(unix)]
#[test]
fn a_sweep_checks_every_variants_machine_before_the_first_point() {
    let dir = TempDir::new("hard-vary-fit");
    let output = std::process::Command::new("sh")
        .args(["-c", "ulimit -v 4194304 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_kernbench"))
        .args(["sweep", "--bench", "ccl_allreduce", "--size", "1K"])
        .args(["--vary", "system.sips.count=2,4097"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (code, line) = refusal(&output);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.contains("--vary system.sips.count=4097: the machine would take about"),
        "{line}"
    );
    assert!(
        stdout(&output).is_empty(),
        "no point ran: {}",
        stdout(&output)
    );
}

/// Issue 40 item 10: a `--vary` of more than a thousand machines is warned
/// about as soon as it is read, before any machine is loaded (here the
/// first value is then refused).
#[test]
fn a_long_vary_is_warned_about_before_it_runs() {
    let dir = TempDir::new("hard-vary-long");
    let values: Vec<String> = std::iter::once(0)
        .chain(2..1002)
        .map(|n| n.to_string())
        .collect();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args([
            "sweep",
            "--bench",
            "ccl_allreduce",
            "--size",
            "1K",
            "--vary",
        ])
        .arg(format!("system.sips.count={}", values.join(",")))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning: --vary gives 1001 machines"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(2), "{stderr}");
}

#[test]
fn negative_sizes_reach_our_own_message() {
    let dir = TempDir::new("hard-negative");
    let (code, line) = refusal(&kernbench(
        dir.path(),
        &["run", "--bench", "ccl_allreduce", "--size", "-256"],
    ));
    assert_eq!(code, 2);
    assert!(line.contains("--size -256"), "{line}");
    let args = ["sweep", "--bench", "ccl_allreduce", "-b", "-1K", "-e", "4K"];
    let (code, line) = refusal(&kernbench(dir.path(), &args));
    assert_eq!(code, 2);
    assert!(line.contains("`-1K` is not a size"), "{line}");
}

#[test]
fn a_config_that_is_not_a_small_text_file_is_refused_quickly() {
    let dir = TempDir::new("hard-config");
    let (code, line) = refusal(&kernbench(dir.path(), &["--topology", "/dev/zero", "topo"]));
    assert_eq!(code, 2);
    assert!(line.contains("/dev/zero: not a text file"), "{line}");
    let big = dir.path().join("big.yaml");
    std::fs::write(&big, format!("# {}\n", "x".repeat(5 << 20))).unwrap();
    let (_, line) = refusal(&kernbench(
        dir.path(),
        &["--ccl", big.to_str().unwrap(), "topo"],
    ));
    assert!(line.contains("4 MiB cap of a configuration file"), "{line}");
    let passwd = dir.path().join("passwd");
    let users: String = (0..50)
        .map(|i| format!("user{i}:x:{i}:{i}::/home/user{i}:/bin/sh\n"))
        .collect();
    std::fs::write(&passwd, &users).unwrap();
    let (_, line) = refusal(&kernbench(
        dir.path(),
        &["--topology", passwd.to_str().unwrap(), "topo"],
    ));
    assert!(line.len() < 300, "a short excerpt only: {line}");
    assert!(line.contains("user0:x:0:0"), "{line}");
}

/// A sweep folder `name` in `dir` of two all-reduce sizes.
fn sweep_folder(dir: &std::path::Path, name: &str, bench: &[&str]) -> std::path::PathBuf {
    let out = dir.join(name);
    let mut args = vec!["sweep"];
    args.extend_from_slice(bench);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let output = kernbench(dir, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    out
}

/// `folder/results.json` with `edit` applied to its JSON, in a new folder.
fn edited(folder: &std::path::Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> String {
    let text = std::fs::read_to_string(folder.join("results.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut json);
    let out = folder.parent().unwrap().join(name);
    std::fs::create_dir_all(&out).unwrap();
    // Figures too large or small for JSON numbers are written as text.
    let text = serde_json::to_string(&json)
        .unwrap()
        .replace("\"HUGE\"", "1e308")
        .replace("\"TINY\"", "1e-320");
    std::fs::write(out.join("results.json"), text).unwrap();
    out.to_str().unwrap().to_owned()
}

/// A change made to a results.json.
type Edit = fn(&mut serde_json::Value);

#[test]
fn a_bad_results_file_is_refused_on_load_naming_row_and_field() {
    let dir = TempDir::new("hard-results");
    let d = dir.path();
    let good = sweep_folder(d, "W", &["--bench", "ccl_allreduce", "--size", "1K,2K"]);
    let cases: [(&str, Edit, &str); 5] = [
        (
            "S",
            |j| j["rows"][0]["source"] = 99.into(),
            "rows[0].source: 99 names no source",
        ),
        (
            "E",
            |j| j["sources"] = serde_json::json!([]),
            "rows[0].source: 0 names no source",
        ),
        (
            "H",
            |j| j["rows"][1]["figures"]["busbw_gbps"] = "HUGE".into(),
            "rows[1].figures.busbw_gbps",
        ),
        (
            "T",
            |j| j["rows"][0]["figures"]["bytes_per_rank"] = "TINY".into(),
            "rows[0].figures.bytes_per_rank",
        ),
        (
            "N",
            |j| j["rows"][0]["point"]["size"] = "NaN".into(),
            "rows[0].point.size: `NaN` is not a size",
        ),
    ];
    for (name, edit, expected) in cases {
        let folder = edited(&good, name, edit);
        for args in [
            vec!["report", folder.as_str(), "--out", "R"],
            vec!["web", "--port", "0", "--results", folder.as_str()],
        ] {
            let (code, line) = refusal(&kernbench(d, &args));
            assert_eq!(code, 2, "{line}");
            assert!(
                line.contains(expected) && line.contains(&folder),
                "{expected}: {line}"
            );
        }
    }
    let zero = d.join("Z");
    std::fs::create_dir(&zero).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("results.json")).unwrap();
    let (code, line) = refusal(&kernbench(d, &["report", "Z", "--out", "R"]));
    assert_eq!(code, 2);
    assert!(line.contains("Z/results.json: not a text file"), "{line}");
}

#[test]
fn the_figures_draw_what_they_can_of_extreme_finite_values() {
    use kernbench::harness::figures::{Axes, Curve, Style, chart};
    use kernbench::harness::ticks::Unit;
    for extreme in [1e308, 1e-320, f64::MAX, f64::MIN_POSITIVE] {
        for (log_x, log_y) in [(true, true), (false, false), (true, false)] {
            let curve = |points| Curve {
                label: "c".to_owned(),
                points,
                style: Style::Line,
                color: 0,
            };
            let axes = Axes {
                title: "t",
                x: "x",
                y: "y",
                log_x,
                log_y,
                x_unit: Unit::Bytes,
                y_unit: Unit::TimeUs,
                x_names: &[],
            };
            let drawn = chart(
                "f.svg",
                axes,
                vec![curve(vec![(1.0, 2.0), (extreme, extreme)])],
            );
            assert!(drawn.is_some(), "the finite, ordinary point is drawn");
            let alone = chart("f.svg", axes, vec![curve(vec![(extreme, extreme)])]);
            assert!(alone.is_none(), "{extreme:e}: nothing drawable, no chart");
        }
    }
}

/// An nccl-tests log of `collective` in `dtype`, with NCCL's INFO lines and
/// `N/A` in place, over 1 KiB and 2 KiB.
fn nccl_log(collective: &str, dtype: &str) -> String {
    format!(
        "# Collective test starting: {collective}_perf\n\
         # nThread 1 nGpus 2 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20\n\
         node01:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
         #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
         1024 256 {dtype} sum -1 18.41 0.06 0.10 0 N/A N/A N/A N/A\n\
         node01:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE\n\
         2048 512 {dtype} sum -1 18.77 0.11 0.19 0 18.35 0.11 0.20 0\n\
         # Avg bus bandwidth    : 0.14\n"
    )
}

#[test]
fn a_real_nccl_tests_log_is_compared_and_a_mismatch_refused() {
    let dir = TempDir::new("hard-reference");
    let d = dir.path();
    sweep_folder(
        d,
        "W",
        &[
            "--bench",
            "ccl_allreduce",
            "--size",
            "1K,2K",
            "--dtype",
            "f32",
        ],
    );
    std::fs::write(d.join("ar.txt"), nccl_log("all_reduce", "float")).unwrap();
    let output = kernbench(d, &["report", "W", "--reference", "ar.txt", "--out", "R"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("      1024        18.410"),
        "{}",
        stdout(&output)
    );
    assert!(stderr(&output).is_empty(), "{}", stderr(&output));
    std::fs::write(d.join("ag.txt"), nccl_log("all_gather", "float")).unwrap();
    let (code, line) = refusal(&kernbench(
        d,
        &[
            "report",
            "W",
            "--reference",
            "ag.txt",
            "--out",
            "R",
            "--force",
        ],
    ));
    assert_eq!(code, 2);
    assert!(
        line.contains("ag.txt: the log measured ccl_allgather but the results are ccl_allreduce"),
        "{line}"
    );
    std::fs::write(d.join("half.txt"), nccl_log("all_reduce", "half")).unwrap();
    let again = [
        "report",
        "W",
        "--reference",
        "half.txt",
        "--out",
        "R",
        "--force",
    ];
    let output = kernbench(d, &again);
    assert!(output.status.success());
    assert!(
        stderr(&output).contains(
            "warning: --reference half.txt: the log measured f16 but the results are f32"
        ),
        "{}",
        stderr(&output)
    );
    sweep_folder(
        d,
        "G",
        &["--bench", "gemm_single_pe", "--shape", "16x16x16"],
    );
    let (code, line) = refusal(&kernbench(
        d,
        &[
            "report",
            "G",
            "--reference",
            "ar.txt",
            "--out",
            "R",
            "--force",
        ],
    ));
    assert_eq!(code, 2);
    assert!(line.contains("no result row is a collective"), "{line}");
    let (code, line) = refusal(&kernbench(
        d,
        &[
            "report",
            "W",
            "--reference",
            "/dev/zero",
            "--out",
            "R",
            "--force",
        ],
    ));
    assert_eq!(code, 2);
    assert!(line.contains("/dev/zero: not a text file"), "{line}");
}

#[test]
fn sweep_sizes_beyond_a_ranks_hbm_are_refused_before_any_point_runs() {
    let dir = TempDir::new("hard-hbm");
    let args = [
        "--fidelity",
        "flow",
        "sweep",
        "--bench",
        "ccl_allreduce",
        "-b",
        "1K",
        "-e",
        "18446744073709551615",
    ];
    let output = kernbench(dir.path(), &args);
    let (code, line) = refusal(&output);
    assert_eq!(code, 2);
    assert!(
        line.contains("more than a rank's HBM") && line.contains("cube.hbm.capacity"),
        "{line}"
    );
    assert!(stdout(&output).is_empty(), "no point ran");
}

/// Issue 40 item 14: every `--out` folder is checked before any work,
/// naming the path and what is wrong (`run --explain --out /dev/null`
/// said "File exists (os error 17)" after the run).
#[test]
fn every_out_folder_is_checked_before_any_work() {
    let dir = TempDir::new("hard-out");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().unwrap();
    let run = ["run", "--bench", "ccl_allreduce", "--explain", "--out"];
    let sweep = ["sweep", "--bench", "ccl_allreduce", "--size", "1K", "--out"];
    for (command, path) in [
        (&run[..], "/dev/null"),
        (&run[..], file),
        (&sweep[..], file),
    ] {
        let args: Vec<_> = command.iter().copied().chain([path]).collect();
        let output = kernbench(dir.path(), &args);
        let (code, line) = refusal(&output);
        assert_eq!(code, 1, "{line}");
        let expected = format!("cannot write output to {path}: exists and is not a folder");
        assert!(line.contains(&expected), "{args:?}: {line}");
        assert!(
            stdout(&output).is_empty(),
            "nothing ran: {}",
            stdout(&output)
        );
    }
}
