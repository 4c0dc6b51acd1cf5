//! Every command the docs give runs, and every figure a transcript quotes
//! holds (issue 42 item 5, ADR-0118). Read from the pages of docs/ (not
//! perf-log.md, the speed history, nor performance.md, whose benchmark
//! commands `.ci/run` runs itself; README.md is `readme_tour`'s):
//! - each `sh` block's command lines (`cargo run --release ...` as
//!   README's tour reads them, or `kernbench ...`) run in order, each page
//!   in a folder of its own with the tour's placeholders, and must exit 0.
//!   A block fenced `sh skip` is a synopsis or a cluster template (Slurm,
//!   GNU parallel) and is not run.
//! - each transcript (a plain block of `$ kernbench ...` lines, each with
//!   its output below it) runs, a `run` with `--json` added, and every
//!   `name value` its output quotes where `name` is one of the run's
//!   figures must equal that figure at the quoted precision. A drift fails
//!   naming page, line and both values; `scripts/update-docs` (this test
//!   with `UPDATE_DOCS=1`) writes the run's values in place.
//!
//! Ignored in `cargo test` (minutes in a debug build); `.ci/run` runs it in
//! release.

use std::path::{Path, PathBuf};

use crate::readme_tour::{command, folder, run_as_written, tour};

/// The pages whose commands are run, in name order.
fn pages() -> Vec<PathBuf> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(docs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| !p.ends_with("perf-log.md") && !p.ends_with("performance.md"))
        .collect();
    pages.sort();
    pages
}

fn stem(page: &Path) -> String {
    page.file_stem().unwrap().to_string_lossy().into_owned()
}

/// A figure quoted in a transcript: `name value` on line `line` (0-based)
/// of its page.
#[derive(Debug, PartialEq)]
struct Quote {
    line: usize,
    name: String,
    value: String,
}

/// One `$ ` command of a transcript and its output's lines (each with
/// its 0-based line on the page).
#[derive(Debug, PartialEq)]
struct Transcript {
    args: Vec<String>,
    output: Vec<(usize, String)>,
}

impl Transcript {
    /// The figures its output quotes.
    fn quotes(&self) -> Vec<Quote> {
        self.output
            .iter()
            .flat_map(|(n, text)| quotes(*n, text))
            .collect()
    }

    /// The error it shows, if its output is one (`error: ...`, wrapped
    /// over lines: joined by single blanks).
    fn error(&self) -> Option<String> {
        let (_, first) = self.output.first()?;
        first.starts_with("error:").then(|| {
            let words = self.output.iter().flat_map(|(_, t)| t.split_whitespace());
            words.collect::<Vec<_>>().join(" ")
        })
    }
}

/// The transcripts of a page: in a block fenced without a language, a
/// line `$ kernbench ...` (continued by a trailing `\`) and the output
/// lines up to the next `$ ` or the block's end.
fn transcripts(text: &str) -> Vec<Transcript> {
    let (mut found, mut fence, mut pending) = (Vec::<Transcript>::new(), None, String::new());
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(info) = line.strip_prefix("```") {
            fence = match fence {
                None => Some(info.to_owned()),
                Some(_) => None,
            };
            continue;
        }
        if fence.as_deref() != Some("") {
            continue;
        }
        match (pending.is_empty(), line.strip_prefix("$ ")) {
            (true, Some(start)) => pending.push_str(start),
            (false, _) => pending.push_str(line),
            (true, None) => {
                if let Some(last) = found.last_mut() {
                    last.output.push((n, line.to_owned()));
                }
                continue;
            }
        }
        if pending.ends_with('\\') {
            pending.pop();
            pending.push(' ');
        } else if let Some((_, args)) = command(&std::mem::take(&mut pending)) {
            found.push(Transcript {
                args,
                output: Vec::new(),
            });
        }
    }
    found
}

/// The `name value` pairs of an output line: a name of lower-case
/// letters, digits and `_`, then a number (commas between pairs).
fn quotes(line: usize, text: &str) -> Vec<Quote> {
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| w.trim_end_matches(','))
        .collect();
    let is_name = |w: &str| {
        w.starts_with(|c: char| c.is_ascii_lowercase())
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    words
        .windows(2)
        .filter(|pair| is_name(pair[0]) && pair[1].parse::<f64>().is_ok())
        .map(|pair| Quote {
            line,
            name: pair[0].to_owned(),
            value: pair[1].to_owned(),
        })
        .collect()
}

/// `figure` written as `quoted` writes it: as many decimals.
fn as_quoted(figure: &serde_json::Value, quoted: &str) -> String {
    let decimals = quoted.split_once('.').map_or(0, |(_, d)| d.len());
    match (figure.as_u64(), decimals) {
        (Some(n), 0) => n.to_string(),
        _ => format!("{:.*}", decimals, figure.as_f64().unwrap_or(f64::NAN)),
    }
}

/// A transcript's arguments as run in `dir`: `/tmp/X` becomes `dir/X`,
/// and a `run` gets `--json` (its figures to compare).
fn as_run(args: &[String], dir: &Path) -> (Vec<String>, bool) {
    let mut args: Vec<String> = args
        .iter()
        .map(|a| match a.strip_prefix("/tmp/") {
            Some(rest) => dir.join(rest).to_string_lossy().into_owned(),
            None => a.clone(),
        })
        .collect();
    let run = args.iter().position(|a| a == "run");
    if let Some(at) = run.filter(|_| !args.iter().any(|a| a == "--json")) {
        args.insert(at + 1, "--json".to_owned());
    }
    (args, run.is_some())
}

#[test]
fn transcripts_give_their_commands_quotes_and_errors() {
    let page = "text\n```\n$ kernbench chakra-gen --out /tmp/ar\nerror: rank 0 needs\n  3 B\n\
                $ kernbench --set a=1 run --bench x \\\n    --tp 4\n  step_ps 123 (the same), mfu 0.0548,\n\
                ```\n```sh\n$ kernbench not this\n```\n";
    let found = transcripts(page);
    let args: Vec<&[String]> = found.iter().map(|t| t.args.as_slice()).collect();
    let strings = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert_eq!(
        args,
        [
            &strings(&["chakra-gen", "--out", "/tmp/ar"])[..],
            &strings(&["--set", "a=1", "run", "--bench", "x", "--tp", "4"])[..],
        ]
    );
    assert_eq!(found[0].error().as_deref(), Some("error: rank 0 needs 3 B"));
    assert_eq!(found[1].error(), None);
    let quote = |name: &str, value: &str| Quote {
        line: 7,
        name: name.into(),
        value: value.into(),
    };
    assert_eq!(
        found[1].quotes(),
        [quote("step_ps", "123"), quote("mfu", "0.0548")]
    );
}

#[test]
fn a_figure_is_compared_at_the_quoted_precision() {
    let check = |figure: serde_json::Value, quoted: &str, expect: &str| {
        assert_eq!(as_quoted(&figure, quoted), expect, "{figure} as {quoted}");
    };
    check(
        serde_json::json!(90414431691u64),
        "96633233045",
        "90414431691",
    );
    check(serde_json::json!(0.054_83), "0.0548", "0.0548");
    check(serde_json::json!(0.047_6), "0.047", "0.048");
    check(serde_json::json!(2.5), "3", "2");
}

#[test]
#[ignore = "every docs/ command: release, in .ci/run"]
fn every_docs_command_runs() {
    let mut count = 0;
    for page in pages() {
        let commands = tour(&std::fs::read_to_string(&page).unwrap());
        if commands.is_empty() {
            continue;
        }
        let dir = folder(&format!("docs-{}", stem(&page)));
        for (name, args) in commands {
            run_as_written(&dir, &name, &args);
            eprintln!("ok: {}: {name} {}", stem(&page), args.join(" "));
            count += 1;
        }
    }
    assert!(count >= 50, "{count} commands");
}

#[test]
#[ignore = "every docs/ transcript: release, in .ci/run"]
fn every_transcript_quote_holds() {
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut drifts = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let found = transcripts(&text);
        if found.is_empty() {
            continue;
        }
        let dir = folder(&format!("docs-transcript-{}", stem(&page)));
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        for transcript in found {
            let (args, is_run) = as_run(&transcript.args, &dir);
            if let Some(error) = transcript.error() {
                refused_as_shown(&dir, &args, &error);
                continue;
            }
            let stdout = run_as_written(&dir, "kernbench", &args).unwrap_or_default();
            if !is_run {
                continue;
            }
            let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            for quote in &transcript.quotes() {
                let Some(figure) = report["figures"].get(&quote.name) else {
                    continue;
                };
                let now = as_quoted(figure, &quote.value);
                if now != quote.value {
                    let (old, new) = (&quote.value, &now);
                    drifts.push(format!(
                        "{}:{}: {} quoted {old}, the run gives {new}",
                        page.display(),
                        quote.line + 1,
                        quote.name
                    ));
                    let line = &mut lines[quote.line];
                    let (from, to) = (
                        format!("{} {old}", quote.name),
                        format!("{} {new}", quote.name),
                    );
                    *line = line.replacen(&from, &to, 1);
                }
            }
        }
        if update {
            std::fs::write(&page, lines.join("\n") + "\n").unwrap();
        }
    }
    match update {
        true => eprintln!("{}\n(written in place)", drifts.join("\n")),
        false => assert!(
            drifts.is_empty(),
            "{}\n(scripts/update-docs writes the run's values in place)",
            drifts.join("\n")
        ),
    }
}

/// A transcript that shows an error: the command exits 2 with that
/// error (`/tmp/` paths as the page writes them).
fn refused_as_shown(dir: &Path, args: &[String], error: &str) {
    let out = std::process::Command::new(crate::readme_tour::binary("kernbench"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr =
        String::from_utf8_lossy(&out.stderr).replace(&format!("{}/", dir.display()), "/tmp/");
    let shown = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        shown.starts_with(error),
        "{args:?}: the page shows\n{error}\nthe run says\n{shown}"
    );
}
