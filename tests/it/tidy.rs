//! The house's habits, checked over the tree (issue 43 item 2): no
//! non-test function in the sources ([`SOURCES`]) over [`MAX_FN_LINES`]
//! lines; `unsafe` and
//! `thread_local!` only in the files of [`UNSAFE_FILES`] and
//! [`THREAD_LOCAL_FILES`] (each with its reason; `docs/ARCHITECTURE.md`
//! names the `unsafe` ones, and the crate root denies `unsafe_code`
//! elsewhere); no work-session talk ("session 12", "this VM") in
//! `docs/` or the sources: records cite commits and dates; and every log
//! line or span of the core names its target, so that users filter and
//! read `kernbench::…` whichever crate the code is in (ADR-0120).
//!
//! The scan is textual and leans on `cargo fmt`'s layout: a function's
//! body closes with a `}` at the indentation of its `fn` line, and an
//! item under `#[cfg(test)]` or `#[test]` (left out) the same way.

use std::fs;
use std::path::{Path, PathBuf};

/// The source folders: the front end's and the core's (ADR-0120).
const SOURCES: [&str; 2] = ["src", "crates/core/src"];

/// The most lines a non-test function of the sources may take, its signature
/// and closing brace included.
const MAX_FN_LINES: usize = 80;

/// The source files that may use `unsafe`, and why.
const UNSAFE_FILES: &[(&str, &str)] = &[
    (
        "crates/core/src/allocator.rs",
        "mimalloc's option calls (C functions)",
    ),
    (
        "crates/core/src/sim/mod.rs",
        "the prefetch hint (`_mm_prefetch`)",
    ),
    (
        "crates/core/src/sim/executor.rs",
        "the current core behind a thread-local pointer; pinned task futures in the slab",
    ),
    ("crates/core/src/sim/waker.rs", "the raw waker's vtable"),
    (
        "crates/core/src/hw/link_table.rs",
        "a link's pointer read back from the table that owns it",
    ),
];

/// The source files that may declare a `thread_local!`, and why.
const THREAD_LOCAL_FILES: &[(&str, &str)] = &[
    (
        "crates/core/src/sim/executor.rs",
        "the core running on this thread",
    ),
    (
        "crates/core/src/sim/cancel.rs",
        "the running simulation's cancel flag",
    ),
    (
        "crates/core/src/sim/observe.rs",
        "the running simulation's observer",
    ),
    (
        "crates/core/src/runtime/worker.rs",
        "the worker's rank and device",
    ),
    (
        "crates/core/src/hw/explain.rs",
        "the explain recorder of the running simulation",
    ),
    (
        "crates/core/src/hw/server.rs",
        "the makers of deferred counts, flushed before a read",
    ),
];

/// Every file under `dir` (relative to the crate) ending in `ext`, in
/// name order, as (path relative to the crate, text).
fn files(dir: &str, ext: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![root.join(dir)];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else if path.extension().is_some_and(|e| e == ext) {
            let name = path.strip_prefix(root).unwrap().to_string_lossy();
            let text = fs::read_to_string(&path).unwrap();
            out.push((name.replace('\\', "/"), text));
        }
    }
    out.sort();
    out
}

/// Every `.rs` file of the source folders, in name order.
fn sources() -> Vec<(String, String)> {
    SOURCES.iter().flat_map(|dir| files(dir, "rs")).collect()
}

/// The `tracing` macro calls of `text`'s non-test part (before its first
/// `#[cfg(test)]`) that name no `target:`.
fn untargeted_logs(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let macros = ["trace", "debug", "info", "warn", "error"];
    let mut found = Vec::new();
    for (at, _) in code.match_indices("!(") {
        let before = &code[..at];
        let name = before
            .rsplit(|c: char| !c.is_alphanumeric() && c != '_')
            .next();
        let name = name.unwrap_or_default();
        let base = name.strip_suffix("_span").unwrap_or(name);
        let call = &code[at + 2..];
        let first_argument = call
            .trim_start()
            .split([',', ')'])
            .next()
            .unwrap_or_default();
        if macros.contains(&base) && !first_argument.starts_with("target:") {
            found.push(format!("{name}!({first_argument}"));
        }
    }
    found
}

/// A line's indentation.
fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The line index of the `}` closing the item opened at `lines[start]`
/// (same indentation), if the item has a body.
fn item_end(lines: &[&str], start: usize) -> Option<usize> {
    let at = indent(lines[start]);
    let close = format!("{at}}}");
    let mut i = start;
    loop {
        let line = lines.get(i)?.trim_end();
        if i == start && line.contains('{') && line.ends_with('}') {
            return Some(i); // one line
        }
        if line.ends_with(';') && !line.contains('{') && i == start {
            return None; // no body
        }
        if i > start && line == close {
            return Some(i);
        }
        i += 1;
    }
}

/// `text`'s lines outside items marked `#[cfg(test)]` or `#[test]`, each
/// with its index.
fn non_test_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t == "#[cfg(test)]" || t == "#[test]" {
            let mut item = i + 1;
            while lines.get(item).is_some_and(|l| l.trim().starts_with("#[")) {
                item += 1;
            }
            if item < lines.len() {
                i = item_end(&lines, item).unwrap_or(item) + 1;
                continue;
            }
        }
        out.push((i, lines[i]));
        i += 1;
    }
    out
}

/// The name of the function whose header starts `line`, if it does.
fn fn_name(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let at = if t.starts_with("fn ") {
        0
    } else {
        t.find(" fn ")? + 1
    };
    let qualifier = |w: &str| {
        matches!(w, "pub" | "const" | "async" | "unsafe" | "extern" | "\"C\"")
            || w.starts_with("pub(")
    };
    if !t[..at].split_whitespace().all(qualifier) {
        return None;
    }
    let rest = &t[at + 3..];
    let end = rest
        .find(|c: char| !c.is_alphanumeric() && c != '_')
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The non-test functions of one file over [`MAX_FN_LINES`]: (name, lines).
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let kept = non_test_lines(text);
    let lines: Vec<&str> = kept.iter().map(|&(_, l)| l).collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        // The body opens at the end of the signature's last line.
        let mut open = i;
        while lines.get(open).is_some_and(|l| {
            let l = l.trim_end();
            !(l.ends_with('{') || l.ends_with(';') || l.ends_with('}'))
        }) {
            open += 1;
        }
        if lines.get(open).is_none_or(|l| l.trim_end().ends_with(';')) {
            continue;
        }
        let close = format!("{}}}", indent(line));
        let single = lines[open].trim_end().ends_with('}');
        let end = match single {
            true => Some(open),
            false => (open + 1..lines.len()).find(|&j| lines[j] == close),
        };
        let length = end.map_or(0, |end| kept[end].0 - kept[i].0 + 1);
        if length > MAX_FN_LINES {
            out.push((name.to_owned(), length));
        }
    }
    out
}

/// A line's code: the part before a `//` comment.
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// Whether `code` holds `word` as a whole word (not `unsafe_code`).
fn has_word(code: &str, word: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(part)
    })
}

/// Whether the non-test code of `text` uses `unsafe` / declares a
/// `thread_local!`.
fn uses(text: &str) -> (bool, bool) {
    let lines = non_test_lines(text);
    let unsafe_ = lines.iter().any(|(_, l)| has_word(code(l), "unsafe"));
    let local = lines.iter().any(|(_, l)| code(l).contains("thread_local!"));
    (unsafe_, local)
}

/// The work-session talk in `text`: "session 12", "sessions 17-19",
/// "this VM", with line breaks and comment markers folded away.
fn session_talk(text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .split_whitespace()
        .filter(|w| !matches!(*w, "//" | "///" | "//!" | "#" | ">" | "*"))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
        .collect();
    let mut found = Vec::new();
    for pair in words.windows(2) {
        let (first, next) = (pair[0].to_lowercase(), &pair[1]);
        let numbered = next.starts_with(|c: char| c.is_ascii_digit());
        let vm = next.eq_ignore_ascii_case("vm") || next.eq_ignore_ascii_case("vm's");
        if (matches!(first.as_str(), "session" | "sessions") && numbered) || (first == "this" && vm)
        {
            found.push(format!("\"{} {next}\"", pair[0]));
        }
    }
    found
}

#[test]
fn no_function_in_src_is_over_80_lines() {
    let mut found = Vec::new();
    for (path, text) in sources() {
        for (name, length) in long_functions(&text) {
            found.push(format!("{path}: fn {name}, {length} lines"));
        }
    }
    assert!(
        found.is_empty(),
        "over {MAX_FN_LINES} lines (split them):\n{}",
        found.join("\n")
    );
}

#[test]
fn unsafe_and_thread_locals_only_in_their_files() {
    let mut found = Vec::new();
    for (path, text) in sources() {
        let (unsafe_, local) = uses(&text);
        let listed = |list: &[(&str, &str)]| list.iter().any(|&(p, _)| p == path);
        if unsafe_ && !listed(UNSAFE_FILES) {
            found.push(format!("{path}: `unsafe`, not in UNSAFE_FILES"));
        }
        if local && !listed(THREAD_LOCAL_FILES) {
            found.push(format!(
                "{path}: `thread_local!`, not in THREAD_LOCAL_FILES"
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    let architecture =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .unwrap();
    for (path, _) in UNSAFE_FILES {
        let name = path.trim_start_matches("crates/core/src/");
        assert!(
            architecture.contains(name),
            "docs/ARCHITECTURE.md does not name {name}, which may use `unsafe`"
        );
    }
}

#[test]
fn docs_and_src_cite_commits_and_dates_not_sessions() {
    let mut found = Vec::new();
    let tree = [files("docs", "md"), sources()].concat();
    for (path, text) in tree {
        let talk = session_talk(&text);
        if !talk.is_empty() {
            found.push(format!("{path}: {}", talk.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "work-session talk (cite a commit or a date):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_cores_log_lines_and_spans_name_their_target() {
    let core = [files("crates/core/src", "rs"), files("algorithms", "rs")];
    let mut found = Vec::new();
    for (path, text) in core.concat().into_iter().chain(files("workloads", "rs")) {
        for call in untargeted_logs(&text) {
            found.push(format!("{path}: {call} (name `target: \"kernbench::…\"`)"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn each_rule_fires_on_a_sample() {
    let body = "    x += 1;\n".repeat(MAX_FN_LINES - 3);
    let long = format!("pub(crate) fn long(\n    x: u8,\n) {{\n{body}}}\n");
    assert_eq!(
        long_functions(&long),
        [("long".to_owned(), MAX_FN_LINES + 1)]
    );
    let short = format!(
        "fn short() {{\n{}}}\n",
        "    x += 1;\n".repeat(MAX_FN_LINES - 2)
    );
    assert!(
        long_functions(&short).is_empty(),
        "exactly 80 lines is fine"
    );
    let tested = format!("#[cfg(test)]\nmod tests {{\n    fn long() {{\n{body}{body}    }}\n}}\n");
    assert!(long_functions(&tested).is_empty(), "test code is left out");
    assert!(long_functions("    fn declared(&self) -> u8;\n").is_empty());

    assert_eq!(uses("let x = unsafe { *p };\n"), (true, false));
    assert_eq!(
        uses("#![deny(unsafe_code)]\n// unsafe here\n"),
        (false, false)
    );
    assert_eq!(
        uses("thread_local! {\n    static X: u8 = 0;\n}\n"),
        (false, true)
    );
    assert_eq!(
        uses("#[cfg(test)]\nmod tests {\n    thread_local! {}\n}\n"),
        (false, false)
    );

    assert_eq!(
        untargeted_logs("tracing::warn!(\n    \"x {y}\",\n);\ninfo_span!(\"copy\", n);\n"),
        ["warn!(\"x {y}\"", "info_span!(\"copy\""]
    );
    let targeted = "debug!(target: \"kernbench::ccl\", \"x\");\nassert!(a);\n";
    assert!(untargeted_logs(targeted).is_empty());
    assert!(untargeted_logs("#[cfg(test)]\nmod tests {\n    info!(\"t\");\n}\n").is_empty());

    assert_eq!(session_talk("as session 12 measured"), ["\"session 12\""]);
    assert_eq!(session_talk("/// (sessions\n/// 17-19)").len(), 1);
    assert_eq!(session_talk("Session 21's figures, on this VM.").len(), 2);
    assert!(session_talk("a session of work; this VMA; this vm_id").is_empty());
}
