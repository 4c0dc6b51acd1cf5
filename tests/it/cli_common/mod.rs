//! Shared by the CLI tests: run the built `kernbench` binary in a fresh
//! empty directory, as a user would.

#![allow(dead_code)] // each test binary uses a different subset

pub mod web;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh empty directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// `<tmp>/kernbench-<name>-<pid>-<n>`, emptied: `n` counts the
    /// directories made in this process, so two tests that ask for one
    /// name at once (running in parallel) never share, or remove, one.
    pub fn new(name: &str) -> Self {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let leaf = format!("kernbench-{name}-{}-{n}", std::process::id());
        let path = std::env::temp_dir().join(leaf);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The main job's binary, `allreduce`, built once per test process in
/// the profile of the tests. It belongs to the core package, whose
/// binaries cargo builds for this crate's tests only when asked
/// (ADR-0120); with the features of this build it links in seconds.
pub fn main_job() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut build = Command::new(env!("CARGO"));
        build.args([
            "build",
            "--quiet",
            "-p",
            "kernbench-core",
            "--bin",
            "allreduce",
        ]);
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        let status = build.current_dir(env!("CARGO_MANIFEST_DIR")).status();
        assert!(
            status.unwrap().success(),
            "cargo could not build the main job"
        );
        Path::new(env!("CARGO_BIN_EXE_kernbench")).with_file_name("allreduce")
    })
}

/// Runs `kernbench args...` in `dir` with no `RUST_LOG`.
pub fn kernbench(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// The exit code and the peak resident memory, in KiB, of `kernbench
/// args` (output discarded): the child's `VmHWM`, read every 5 ms while
/// it runs. Not `wait4`'s `ru_maxrss`: a child spawned by a large test
/// process starts from that process's memory (Linux carries the address
/// space's high-water mark across `exec`), so it reports the tests'
/// peak, not the run's.
pub fn peak_rss_kib(args: &[&str]) -> (Option<i32>, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Some(kib) = std::fs::read_to_string(&status)
            .ok()
            .and_then(|text| high_water_kib(&text))
        {
            peak = peak.max(kib);
        }
        if let Some(exit) = child.try_wait().expect("the child can be waited on") {
            return (exit.code(), peak);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `VmHWM` of a `/proc/PID/status` text, in KiB.
fn high_water_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The command's standard output.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The command's standard error.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Whether the tests run under CI: `CI` set to anything but empty, `0` or
/// `false` (as CI services and `.ci/run` set it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// A tool a test needs is not installed. Under CI that is a failure naming
/// the tool (CI must not be green without the test having run); elsewhere
/// the test skips and prints why.
pub fn tool_missing(tool: &str, what_is_not_checked: &str) {
    let reason = format!("{tool} is not installed (not on PATH): {what_is_not_checked}");
    if under_ci() {
        panic!("{reason}; CI=true, so this is a failure (.ci/run installs {tool})");
    }
    println!("skipped: {reason}");
}
