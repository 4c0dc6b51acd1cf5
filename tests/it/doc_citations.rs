//! Citations of design records, checked over the tree (issue 25 item 5):
//! the seeds' records are cited as "seed ADR-00NN", ours as "ADR-00NN"
//! naming a file of `docs/adr/`. Comment markers and line breaks are
//! folded away first, so a citation split over two comment lines is read
//! as one.

use std::fs;
use std::path::{Path, PathBuf};

/// Folders and files whose text is checked.
const ROOTS: &[&str] = &[
    "src",
    "crates",
    "algorithms",
    "workloads",
    "configs",
    "docs",
    "tests",
    "examples",
    "benches",
    "README.md",
];

/// The seeds' records run from 0001 to 0053.
const LAST_SEED_RECORD: u32 = 53;

/// Every text file under the roots, in name order.
fn files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = ROOTS.iter().map(|r| root.join(r)).collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else if ["rs", "md", "yaml", "yml"]
            .iter()
            .any(|ext| path.extension().is_some_and(|e| e == *ext))
        {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The file's words with comment markers (`//!`, `///`, `//`, `#`, `>`)
/// dropped, so a phrase broken over comment lines reads as one, and
/// punctuation trimmed except backticks (code: `seed` the variable).
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|w| !matches!(*w, "//" | "///" | "//!" | "#" | ">" | "*"))
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && !matches!(c, '-' | '`'))
                .to_owned()
        })
        .collect()
}

/// The numbers of our own ADRs: the files of `docs/adr/`.
fn our_adrs() -> Vec<u32> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/adr");
    let mut numbers: Vec<u32> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.get(..4)?.parse().ok()
        })
        .collect();
    numbers.sort();
    numbers
}

/// The digits `word` starts with.
fn leading_digits(word: &str) -> String {
    word.chars().take_while(char::is_ascii_digit).collect()
}

/// The malformed citations in one file's words, each with what is wrong.
fn malformed(words: &[String], ours: &[u32]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, raw) in words.iter().enumerate() {
        let word = raw.trim_matches('`');
        let previous = i.checked_sub(1).map(|p| words[p].to_lowercase());
        let is_seed = previous.as_deref() == Some("seed");
        let lower = raw.to_lowercase();
        if lower == "seed"
            && words
                .get(i + 1)
                .is_some_and(|n| n.eq_ignore_ascii_case("seed"))
        {
            found.push("\"seed seed\"".to_owned());
        }
        let next_number = words
            .get(i + 1)
            .map(|n| leading_digits(n))
            .unwrap_or_default();
        if (lower == "record" || lower == "records") && next_number.len() == 4 {
            found.push(format!(
                "\"{word} {next_number}\": write \"seed ADR-{next_number}\""
            ));
        }
        let Some(rest) = word.strip_prefix("ADR") else {
            continue;
        };
        if rest.is_empty()
            && words
                .get(i + 1)
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        {
            found.push(format!("\"ADR {}\": write \"ADR-NNNN\"", words[i + 1]));
            continue;
        }
        let Some(digits) = rest.strip_prefix('-') else {
            continue; // "ADRs", "ADR" as a word
        };
        let number = leading_digits(digits);
        if number.len() != 4 {
            found.push(format!("\"{word}\": four digits after \"ADR-\""));
            continue;
        }
        let n: u32 = number.parse().unwrap();
        if is_seed && n > LAST_SEED_RECORD {
            found.push(format!(
                "\"seed {word}\": the seeds' records end at {LAST_SEED_RECORD:04}"
            ));
        }
        if !is_seed && !ours.contains(&n) {
            found.push(format!(
                "\"{word}\": no docs/adr/{number}-*.md (a seed record is \"seed ADR-{number}\")"
            ));
        }
    }
    found
}

#[test]
fn every_citation_is_seed_adr_or_one_of_ours() {
    let ours = our_adrs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    // This file spells the mistakes out on purpose.
    for file in files()
        .into_iter()
        .filter(|f| !f.ends_with("tests/it/doc_citations.rs"))
    {
        let text = fs::read_to_string(&file).unwrap();
        for problem in malformed(&words(&text), &ours) {
            problems.push(format!(
                "{}: {problem}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "malformed citations:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_finds_each_kind_of_mistake() {
    let ours = [1, 11];
    let check = |text: &str| malformed(&words(text), &ours).len();
    assert_eq!(check("as seed ADR-0047 D6 says; ADR-0011 and ADR-0001."), 0);
    assert_eq!(check("/// (seed\n/// seed ADR-0032)"), 1);
    assert_eq!(check("record 0048's allocator"), 1);
    assert_eq!(check("ADR 0011"), 1);
    assert_eq!(check("ADR-011"), 1);
    assert_eq!(check("ADR-0032 D3, not ours"), 1);
    assert_eq!(check("seed ADR-0060"), 1);
    assert_eq!(check("the ADRs, ADR index, filled with seed `seed + r`"), 0);
}

/// Each record's file name and its status paragraph.
fn adr_statuses() -> Vec<(String, String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/adr");
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let text = fs::read_to_string(dir.join(&name)).unwrap();
        let (_, after) = text
            .split_once("## Status\n")
            .unwrap_or_else(|| panic!("docs/adr/{name}: no `## Status` section"));
        let status = after.split("\n\n").next().unwrap().replace('\n', " ");
        out.push((name, status, text));
    }
    out.sort();
    out
}

#[test]
fn every_adr_has_a_plain_status_and_an_index_row_and_back_links() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/adr");
    let index = fs::read_to_string(dir.join("README.md")).unwrap();
    for (name, status, _) in adr_statuses() {
        let kind = ["Accepted.", "Amended by [ADR-", "Superseded by [ADR-"]
            .into_iter()
            .find(|k| status.starts_with(k));
        let kind = kind.unwrap_or_else(|| {
            panic!(
                "docs/adr/{name}: status must be Accepted / Amended by / Superseded by: {status}"
            )
        });
        assert!(
            kind != "Accepted." || status == "Accepted.",
            "docs/adr/{name}: the status says only \"Accepted.\" (history goes in Context): {status}"
        );
        let row_start = format!("| [ADR-{}]({name})", &name[..4]);
        let row = index
            .lines()
            .find(|l| l.starts_with(&row_start))
            .unwrap_or_else(|| panic!("docs/adr/README.md has no row starting {row_start}"));
        let word = kind.split(' ').next().unwrap().trim_end_matches('.');
        assert!(
            row.contains(&format!("| {word}")),
            "docs/adr/README.md: {name} is {word}: {row}"
        );
        // Whoever amends or supersedes this record names it.
        let number = &name[..4];
        for later in status.split("](").skip(1) {
            let later = later.split(')').next().unwrap();
            let text = fs::read_to_string(dir.join(later)).unwrap_or_else(|_| {
                panic!("docs/adr/{name}: its status links to {later}, not there")
            });
            assert!(
                text.contains(&format!("ADR-{number}")),
                "docs/adr/{later} does not name ADR-{number}, which it changes"
            );
        }
    }
}
