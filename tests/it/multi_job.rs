//! Several jobs on one fabric (`run --jobs`, ADR-0116): jobs whose routes
//! share no link each take exactly their time alone, which is also the
//! time of a jobs file holding that job only; jobs that share links both
//! slow down and `--explain` names the shared links; overlapping SIPs and
//! bad files are one error naming the key; every run is deterministic.
//!
//! The 16-SIP examples of `configs/examples/` are ignored under `cargo
//! test` and run in release (`cargo test --release --test it -- --ignored
//! multi_job::`).

use serde_json::Value;

use crate::cli_common::{TempDir, kernbench, stderr, stdout};

const RING4: [&str; 4] = [
    "--set",
    "system.sips.count=4",
    "--set",
    "system.sips.topology=ring_1d",
];
const TORUS16: [&str; 4] = [
    "--set",
    "system.sips.count=16",
    "--set",
    "system.sips.topology=torus_2d",
];

/// A jobs file of all-reduce jobs `(name, size, sips)`.
fn jobs_file(jobs: &[(&str, &str, &str)]) -> String {
    let mut text = "jobs:\n".to_owned();
    for (name, size, sips) in jobs {
        text += &format!(
            "  {name}:\n    workload: ccl_allreduce\n    flags: {{size: {size}}}\n    sips: [{sips}]\n"
        );
    }
    text
}

/// `kernbench MACHINE run --jobs FILE ARGS --json` in `dir`: it must
/// succeed; the JSON and the text.
fn run_jobs(dir: &TempDir, machine: &[&str], file: &str, args: &[&str]) -> (Value, String) {
    let command = [machine, &["run", "--jobs", file, "--json"], args].concat();
    let output = kernbench(dir, &command);
    assert!(output.status.success(), "{command:?}: {}", stderr(&output));
    let text = stdout(&output);
    (serde_json::from_str(&text).unwrap(), text)
}

/// Job `name`'s figure `figure`.
fn figure<'a>(json: &'a Value, name: &str, figure: &str) -> &'a Value {
    let jobs = json["jobs"].as_array().unwrap();
    let job = jobs.iter().find(|j| j["name"] == name).unwrap();
    &job["report"]["figures"][figure]
}

#[test]
fn jobs_on_disjoint_routes_take_their_time_alone_to_the_picosecond() {
    let dir = TempDir::new("jobs-split");
    // On a ring of 4, SIPs 0-1 and 2-3 talk over their own link pair.
    let both = jobs_file(&[("a", "64K", "0, 1"), ("b", "64K", "2, 3")]);
    std::fs::write(dir.join("both.yaml"), both).unwrap();
    std::fs::write(dir.join("a.yaml"), jobs_file(&[("a", "64K", "0, 1")])).unwrap();
    let (json, text) = run_jobs(&dir, &RING4, "both.yaml", &[]);
    let (alone, _) = run_jobs(&dir, &RING4, "a.yaml", &[]);
    let time = figure(&json, "a", "allreduce_ps").as_u64().unwrap();
    assert_eq!(Some(time), figure(&alone, "a", "allreduce_ps").as_u64());
    assert_eq!(figure(&json, "a", "alone_ps").as_u64(), Some(time));
    for job in ["a", "b"] {
        assert_eq!(figure(&json, job, "slowdown").as_f64(), Some(1.0), "{text}");
        assert_eq!(
            figure(&json, job, "shared_links").as_u64(),
            Some(0),
            "{text}"
        );
    }
    let again = kernbench(
        &dir,
        &[&RING4[..], &["run", "--jobs", "both.yaml", "--json"]].concat(),
    );
    assert_eq!(stdout(&again), text, "two runs byte-identical");
}

#[test]
fn the_summary_names_each_job_with_its_sips_and_slowdown() {
    let dir = TempDir::new("jobs-summary");
    let file = jobs_file(&[("left", "64K", "0, 1"), ("right", "64K", "3, 2")]);
    std::fs::write(dir.join("jobs.yaml"), file).unwrap();
    let output = kernbench(
        &dir,
        &[&RING4[..], &["run", "--jobs", "jobs.yaml"]].concat(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let header = text.lines().next().unwrap();
    for column in [
        "job",
        "workload",
        "sips",
        "time",
        "alone",
        "slowdown",
        "shared links",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let right = text.lines().find(|l| l.starts_with("right ")).unwrap();
    assert!(right.contains("3,2") && right.contains("1.0000"), "{right}");
    assert!(text.contains("\njob left: ccl_allreduce"), "{text}");
}

#[test]
fn a_job_s_host_has_tracks_of_its_own_in_the_trace() {
    let dir = TempDir::new("jobs-trace");
    let file = jobs_file(&[("left", "64K", "0, 1"), ("right", "64K", "2, 3")]);
    std::fs::write(dir.join("jobs.yaml"), file).unwrap();
    let args = [
        &["--trace", "t.json"],
        &RING4[..],
        &["run", "--jobs", "jobs.yaml"],
    ]
    .concat();
    let output = kernbench(&dir, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    let trace = std::fs::read_to_string(dir.join("t.json")).unwrap();
    for track in ["left.host.rank1", "right.host.rank0"] {
        assert!(trace.contains(track), "{track} missing from the trace");
    }
}

#[test]
fn overlapping_jobs_and_bad_files_are_one_error_at_the_key() {
    let dir = TempDir::new("jobs-bad");
    let check = |file: &str, args: &[&str], want: &str| {
        std::fs::write(dir.join("jobs.yaml"), file).unwrap();
        let command = [&RING4[..], &["run", "--jobs", "jobs.yaml"], args].concat();
        let started = std::time::Instant::now();
        let output = kernbench(&dir, &command);
        let error = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{file}: {error}");
        assert_eq!(error.lines().count(), 1, "{error}");
        assert!(error.contains(want), "{file}: {error}");
        assert!(started.elapsed().as_secs() < 5, "{file}: refused late");
    };
    let overlap = jobs_file(&[("a", "64K", "0, 1"), ("b", "64K", "1, 2")]);
    check(
        &overlap,
        &[],
        "jobs.b.sips: SIP 1 is also job a's (jobs.a): jobs a and b overlap",
    );
    check(
        &jobs_file(&[("a", "64K", "0, 4")]),
        &[],
        "jobs.a.sips: SIP 4",
    );
    let colour = "jobs:\n  a: {workload: ccl_allreduce, sips: [0], colour: red}\n";
    check(colour, &[], "colour");
    let placed = "jobs:\n  a: {workload: ccl_allreduce, placement: {kind: packed, count: 9}}\n";
    check(placed, &[], "jobs.a.placement.count");
    check(
        &jobs_file(&[("a", "64K", "0")]),
        &["--size", "1M"],
        "--size with --jobs",
    );
    check("jobs: {}\n", &[], "no job");
    // What the file and a job must be, in words, not a Rust type's name.
    check("hello\n", &[], "expected a jobs mapping with `jobs:`");
    check("jobs:\n  a: 5\n", &[], "jobs.a: expected a job mapping");
}

/// An example jobs file of `configs/examples/`.
fn example(name: &str) -> String {
    format!("{}/configs/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[ignore = "16 SIPs, 4 MiB, three runs: run in release (cargo test --release --test it -- --ignored multi_job::)"]
fn the_two_halves_of_a_torus_each_take_their_time_alone() {
    let dir = TempDir::new("jobs-halves");
    let (json, text) = run_jobs(&dir, &TORUS16, &example("two-jobs.yaml"), &[]);
    for job in ["left", "right"] {
        let time = figure(&json, job, "allreduce_ps").as_u64();
        assert!(time.is_some_and(|t| t > 0), "{text}");
        assert_eq!(
            figure(&json, job, "alone_ps").as_u64(),
            time,
            "{job}: {text}"
        );
        assert_eq!(figure(&json, job, "slowdown").as_f64(), Some(1.0), "{job}");
        assert_eq!(
            figure(&json, job, "shared_links").as_u64(),
            Some(0),
            "{job}"
        );
    }
}

#[test]
#[ignore = "16 SIPs, 4 MiB, explained: run in release (cargo test --release --test it -- --ignored multi_job::)"]
fn strided_jobs_share_links_both_slow_down_and_explain_names_the_shared_links() {
    let dir = TempDir::new("jobs-strided");
    let file = example("two-jobs-shared.yaml");
    let (json, text) = run_jobs(&dir, &TORUS16, &file, &[]);
    let (again, _) = run_jobs(&dir, &TORUS16, &file, &[]);
    assert_eq!(json, again, "two runs identical");
    let jobs = json["jobs"].as_array().unwrap();
    assert_eq!(
        jobs[0]["sips"],
        serde_json::json!([0, 2, 4, 6, 8, 10, 12, 14])
    );
    assert_eq!(
        jobs[1]["sips"],
        serde_json::json!([1, 3, 5, 7, 9, 11, 13, 15])
    );
    for job in ["left", "right"] {
        let slowdown = figure(&json, job, "slowdown").as_f64().unwrap();
        assert!(slowdown > 1.0, "{job} slows down: {text}");
        let (time, alone) = (
            figure(&json, job, "allreduce_ps"),
            figure(&json, job, "alone_ps"),
        );
        let ratio = time.as_u64().unwrap() as f64 / alone.as_u64().unwrap() as f64;
        assert!(
            (ratio - slowdown).abs() < 1e-12,
            "{job}: the figure says by how much"
        );
    }
    let (explained, text) = run_jobs(&dir, &TORUS16, &file, &["--explain"]);
    for job in explained["jobs"].as_array().unwrap() {
        let shared = job["report"]["explain"]["shared_links"].as_array().unwrap();
        let inter_sip = shared.iter().any(|s| {
            let name = s["name"].as_str().unwrap();
            name.contains(".inter_sip.") && s["ps"].as_u64().unwrap() > 0
        });
        assert!(
            inter_sip,
            "{}: an inter-SIP link shared on its path: {text}",
            job["name"]
        );
        let time = job["report"]["figures"]["allreduce_ps"].as_u64();
        let plain = figure(&json, job["name"].as_str().unwrap(), "allreduce_ps").as_u64();
        assert_eq!(time, plain, "explaining a job changes no time");
    }
}
