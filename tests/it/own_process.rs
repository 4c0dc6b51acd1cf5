//! Running one test alone in a child process of the test binary.

use std::process::Command;

/// Set in the child to the name of the test it runs.
const CHILD: &str = "KERNBENCH_TEST_ALONE";

/// In the test binary's own process: runs the test `name` (its path
/// without the crate, `hw_trace::packets_are_...`) alone in a child
/// process of this binary, fails if it fails, and returns `true`: the
/// caller returns. In that child: returns `false`, and the caller runs
/// its body.
pub fn elsewhere(name: &str) -> bool {
    if std::env::var(CHILD).is_ok_and(|n| n == name) {
        return false;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name}, run alone in a child process: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    true
}

#[test]
fn a_test_run_elsewhere_runs_once_in_the_child() {
    if elsewhere("own_process::a_test_run_elsewhere_runs_once_in_the_child") {
        return;
    }
    assert_eq!(
        std::env::var(CHILD).unwrap(),
        "own_process::a_test_run_elsewhere_runs_once_in_the_child"
    );
}
