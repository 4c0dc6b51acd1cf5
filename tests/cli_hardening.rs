//! The reproducers of issue 26 (items 4 to 14) as a user types them: each
//! ends in a correct result or a bounded refusal — one `error:` line naming
//! the input, exit 1 or 2.

mod cli_common;

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
    for size in ["100", "NaN"] {
        let output = kernbench(dir.path(), &["sweep", "--bench", "ccl_allreduce", "--size", size]);
        let (code, line) = refusal(&output);
        assert_eq!(code, 1, "{line}");
        assert!(line.contains("1 of 1 point(s) failed (1 could not run"), "{line}");
        assert!(stdout(&output).contains(&format!("size={size}")));
    }
    let args = ["sweep", "--bench", "ccl_allreduce", "--size", "1K,100"];
    let (code, line) = refusal(&kernbench(dir.path(), &args));
    assert_eq!((code, line.contains("1 of 2 point(s)")), (1, true), "{line}");
    let args = ["sweep", "--bench", "ccl_allreduce", "--size", "1K,2K"];
    assert!(kernbench(dir.path(), &args).status.success());
}

#[test]
fn sweep_out_is_checked_before_the_first_point_and_named() {
    let dir = TempDir::new("hard-out");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let path = file.to_str().unwrap();
    let args = ["sweep", "--bench", "ccl_allreduce", "--size", "1K", "--out", path];
    let output = kernbench(dir.path(), &args);
    let (code, line) = refusal(&output);
    assert_eq!(code, 1);
    assert!(line.contains(path), "{line}");
    assert!(stdout(&output).is_empty(), "no point ran: {}", stdout(&output));
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
