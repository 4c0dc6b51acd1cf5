//! Every command of README.md's tour runs as written (issue 40 item 7):
//! the `cargo run --release -- ...` lines of its `sh` blocks are read from
//! the file itself (continuations joined, comments dropped), run with the
//! built binaries in a folder of their own (with `configs/`, `algorithms/`
//! and the placeholders `my.yaml` and `my_ccl.yaml` made first), and each
//! must exit 0; `web`, which serves until stopped, must still be serving
//! after two seconds. Ignored in `cargo test` (the tour takes minutes in a
//! debug build); `.ci/run` runs it in release.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The tour's commands: each a binary name and its arguments.
pub(crate) fn tour(readme: &str) -> Vec<(String, Vec<String>)> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut line = String::new();
    for raw in readme.lines() {
        match raw.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            _ if !in_sh || raw.trim_start().starts_with('#') => {}
            text => {
                line.push_str(text.trim_end_matches('\\'));
                line.push(' ');
                if !text.ends_with('\\') {
                    commands.extend(command(&std::mem::take(&mut line)));
                }
            }
        }
    }
    commands
}

/// A `cargo run --release [--bin B] -- ARGS` or `kernbench ARGS` line as
/// (binary, args).
pub(crate) fn command(line: &str) -> Option<(String, Vec<String>)> {
    let words = words(line);
    if let Some(args) = words.strip_prefix(&["kernbench".to_owned()]) {
        return Some(("kernbench".to_owned(), args.to_vec()));
    }
    let rest = words.strip_prefix(&["cargo", "run", "--release"].map(String::from))?;
    let (binary, rest) = match rest {
        [bin, name, rest @ ..] if bin == "--bin" => (name.clone(), rest),
        rest => ("kernbench".to_owned(), rest),
    };
    let args = match rest {
        [dashes, args @ ..] if dashes == "--" => args.to_vec(),
        args => args.to_vec(),
    };
    Some((binary, args))
}

/// Shell words: split at blanks outside quotes, quotes removed, a `#`
/// that starts a word ends the line.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote) = (Vec::new(), None::<String>, None);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, '#') if word.is_none() => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// A folder `name` for a tour: the repository's configs and algorithms,
/// and the placeholders its commands name (`my.yaml`, `my_ccl.yaml`, a
/// measured log `nccl.txt`).
pub(crate) fn folder(name: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["configs", "algorithms"] {
        std::os::unix::fs::symlink(repo.join(name), dir.join(name)).unwrap();
    }
    std::fs::copy(repo.join("configs/topology.yaml"), dir.join("my.yaml")).unwrap();
    std::fs::copy(repo.join("configs/ccl.yaml"), dir.join("my_ccl.yaml")).unwrap();
    let log = repo.join("tests/data/nccl_all_reduce.txt");
    std::fs::copy(log, dir.join("nccl.txt")).unwrap();
    dir
}

pub(crate) fn binary(name: &str) -> &'static Path {
    match name {
        "kernbench" => Path::new(env!("CARGO_BIN_EXE_kernbench")),
        "allreduce" => crate::cli_common::main_job(),
        other => panic!("README runs an unknown binary {other}"),
    }
}

#[test]
fn the_parser_reads_continuations_quotes_and_comments() {
    let readme = "```sh\ncargo run --release -- --set a=1 \\\n    run --vary 'k=1 GB/s,2' --x \"y z\"   # note\n# a comment\ncargo run --release --bin allreduce -- --trace ar.json\n```\n";
    let expect = vec![
        (
            "kernbench".to_owned(),
            ["--set", "a=1", "run", "--vary", "k=1 GB/s,2", "--x", "y z"]
                .map(String::from)
                .to_vec(),
        ),
        (
            "allreduce".to_owned(),
            ["--trace", "ar.json"].map(String::from).to_vec(),
        ),
    ];
    assert_eq!(tour(readme), expect);
}

#[test]
#[ignore = "the whole README tour: release, in .ci/run"]
fn every_readme_command_runs() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    let commands = tour(&readme.unwrap());
    assert!(commands.len() >= 20, "{} commands", commands.len());
    let dir = folder("readme-tour");
    for (name, args) in commands {
        let stdout = run_as_written(&dir, &name, &args);
        if args.ends_with(&["--out".to_owned(), "tour/V".to_owned()]) {
            the_what_if_has_its_figure_and_note(&dir, &stdout.unwrap_or_default());
        }
        eprintln!("ok: {name} {}", args.join(" "));
    }
}

/// Runs one tour command in `dir`: `web`, which serves until stopped,
/// must still be serving after two seconds (then it is stopped: `None`);
/// anything else must exit 0 (its standard output).
pub(crate) fn run_as_written(dir: &Path, name: &str, args: &[String]) -> Option<String> {
    let web = args.first().is_some_and(|a| a == "web");
    let stdout = match web {
        true => std::process::Stdio::null(),
        false => std::process::Stdio::piped(),
    };
    let mut child = Command::new(binary(name))
        .args(args)
        .current_dir(dir)
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if web {
        std::thread::sleep(Duration::from_secs(2));
        let running = child.try_wait().unwrap().is_none();
        assert!(running, "{name} {args:?}: web stopped");
        child.kill().unwrap();
        child.wait().unwrap();
        return None;
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} {args:?} in {}: {}\n{stderr}",
        dir.display(),
        out.status
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The README's `--vary` example (issue 42): a figure with the varied
/// value on its x axis, and a note under the table naming the class that
/// bounds the time where a step moved it by under 1 %.
fn the_what_if_has_its_figure_and_note(dir: &Path, stdout: &str) {
    let figure = dir.join("tour/V/time_vs_system_inter_sip_bandwidth.svg");
    let svg = std::fs::read_to_string(&figure).expect("the what-if figure");
    assert!(
        svg.contains("system.inter_sip.bandwidth\n</text>"),
        "x axis: {svg}"
    );
    let note = stdout
        .lines()
        .find(|l| l.contains("moved the time by under 1 %"))
        .unwrap_or_else(|| panic!("no note: {stdout}"));
    assert!(note.contains("the time is bound by "), "{note}");
}
