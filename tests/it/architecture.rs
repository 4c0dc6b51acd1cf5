//! `docs/ARCHITECTURE.md`'s claims that a test can hold (issue 43 item 4):
//! every top-level module of `src/lib.rs` has its code-map paragraph
//! (`**`name`** — ...`) and is on the bird's-eye drawing, and the code
//! map names no module `src/` does not have.

use std::fs;
use std::path::Path;

/// The `pub mod NAME;` lines of `src/lib.rs`.
fn modules() -> Vec<String> {
    let lib = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    lib.lines()
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
        let exists = [
            root.join("src").join(name),
            root.join("src").join(format!("{name}.rs")),
            root.join(name),
        ]
        .iter()
        .any(|p| p.exists());
        assert!(
            exists,
            "docs/ARCHITECTURE.md's code map names `{name}`, not in the tree"
        );
    }
}
