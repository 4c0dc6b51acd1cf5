//! `docs/ARCHITECTURE.md`'s claims that a test can hold (issue 43 item 4):
//! every top-level module of both crates' `lib.rs` has its code-map
//! paragraph (`**`name`** — ...`) and is on the bird's-eye drawing, and
//! the code map names no module the crates do not have.

use std::fs;
use std::path::Path;

/// The crates' source folders: the front end's and the core's (ADR-0120).
const SOURCES: [&str; 2] = ["src", "crates/core/src"];

/// The `pub mod NAME;` lines of both crates' `lib.rs`.
fn modules() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let libs = SOURCES.map(|dir| fs::read_to_string(root.join(dir).join("lib.rs")).unwrap());
    libs.iter()
        .flat_map(|lib| lib.lines())
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_owned())
        .collect()
}

/// The text of `docs/ARCHITECTURE.md`.
fn architecture() -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md")).unwrap()
}

#[test]
fn every_module_has_its_paragraph_and_is_drawn() {
    let text = architecture();
    let drawing = text
        .split("## Bird's-eye view")
        .nth(1)
        .and_then(|t| t.split("```").nth(1))
        .expect("a drawing under \"Bird's-eye view\"");
    for module in modules() {
        assert!(
            text.contains(&format!("\n**`{module}`** — ")),
            "docs/ARCHITECTURE.md has no code-map paragraph for `{module}`"
        );
        assert!(
            drawing
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == module),
            "docs/ARCHITECTURE.md's drawing leaves out `{module}`"
        );
    }
}

#[test]
fn the_code_map_names_only_modules_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for line in architecture().lines() {
        let Some(rest) = line.strip_prefix("**`") else {
            continue;
        };
        let name = rest.split('`').next().unwrap();
        let in_a_crate = SOURCES.iter().any(|dir| {
            let dir = root.join(dir);
            dir.join(name).exists() || dir.join(format!("{name}.rs")).exists()
        });
        let exists = in_a_crate || root.join(name).exists();
        assert!(
            exists,
            "docs/ARCHITECTURE.md's code map names `{name}`, not in the tree"
        );
    }
}
