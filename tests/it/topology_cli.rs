//! `kernbench topo --view`: the compiled graph as text, DOT and JSON.
//!
//! The DOT output is checked for shape here; where Graphviz's `dot` is
//! installed it is also rendered to SVG (the test says so when it is not;
//! under CI, `CI=true`, a missing Graphviz fails the test).

use crate::cli_common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn kernbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout(&kernbench(args))).unwrap()
}

/// Checks the statements of an undirected DOT graph: a header, quoted
/// node and edge statements ending in `;`, balanced brackets and quotes,
/// and every edge end declared as a node. Returns (nodes, edges).
fn check_dot(dot: &str) -> (usize, usize) {
    let mut lines = dot.lines();
    assert!(lines.next().unwrap().starts_with("graph \""), "{dot}");
    assert_eq!(dot.trim_end().lines().last(), Some("}"));
    let mut nodes = Vec::new();
    let mut edges = 0;
    for line in dot.lines().skip(1).filter(|l| l.starts_with("  ")) {
        let line = line.trim();
        assert!(line.ends_with("];"), "{line}");
        assert_eq!(line.matches('"').count() % 2, 0, "{line}");
        assert_eq!(
            line.matches('[').count(),
            line.matches(']').count(),
            "{line}"
        );
        let quoted: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        if line.contains("\" -- \"") {
            edges += 1;
            for end in &quoted[..2] {
                assert!(nodes.contains(end), "edge end {end} not declared");
            }
        } else if line.starts_with('"') {
            nodes.push(quoted[0]);
        }
    }
    (nodes.len(), edges)
}

/// Renders with Graphviz if it is installed.
fn render(dot: &str) {
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        cli_common::tool_missing("Graphviz (`dot`)", "DOT rendering is not checked");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("<svg"));
}

#[test]
fn cube_view_dot_parses_and_renders() {
    let dot = stdout(&kernbench(&["topo", "--view", "cube", "--format", "dot"]));
    let (nodes, edges) = check_dot(&dot);
    let view = json(&["topo", "--view", "cube", "--json"]);
    assert_eq!(nodes, view["nodes"].as_array().unwrap().len());
    assert_eq!(edges, view["links"].as_array().unwrap().len());
    assert!(
        dot.contains("\"sip0.cube0.r0c0\" -- \"sip0.cube0.r0c1\""),
        "{dot}"
    );
    render(&dot);
}

#[test]
fn system_and_sip_views_render() {
    for args in [
        ["topo", "--view", "system", "--format", "dot", "--sip", "0"],
        ["topo", "--view", "sip", "--format", "dot", "--sip", "1"],
    ] {
        let dot = stdout(&kernbench(&args));
        check_dot(&dot);
        render(&dot);
    }
}

#[test]
fn system_view_collapses_sips() {
    let view = json(&["topo", "--view", "system", "--format", "json"]);
    let names: Vec<&str> = view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["host", "sip0", "sip1"]);
    let links = view["links"].as_array().unwrap();
    assert_eq!(links.len(), 3);
    assert_eq!(links[2]["kind"], "inter_sip");
    assert_eq!(links[2]["params"]["bandwidth"], "100 GB/s");
    assert_eq!(links[2]["params"]["latency_ps"], 500_000);
    assert_eq!(view["machine"]["nodes"], 1703);
}

#[test]
fn sip_view_shows_cubes_ucie_and_io() {
    let text = stdout(&kernbench(&["topo", "--view", "sip", "--sip", "1"]));
    assert!(
        text.starts_with("sip1: 16 cubes (4x4 mesh), IO cube 0"),
        "{text}"
    );
    assert!(text.contains("sip1.io_cpu"), "{text}");
    assert!(text.contains("sip1.inter_sip.w"), "{text}");
    let ucie = text.lines().filter(|l| l.contains(" ucie ")).count();
    assert_eq!(ucie, 24, "one line per cube-mesh link:\n{text}");
}

#[test]
fn cube_view_text_has_the_layout_picture() {
    let text = stdout(&kernbench(&[
        "topo", "--view", "cube", "--sip", "1", "--cube", "5",
    ]));
    assert!(text.starts_with("sip1.cube5: 5x6 NoC routers"), "{text}");
    assert!(text.contains("r1    HBM      HBM"), "{text}");
    assert!(text.contains("sip1.cube5.ucie.n"), "{text}");
}

#[test]
fn bad_view_arguments_exit_2() {
    let no_sip = kernbench(&["topo", "--view", "sip", "--sip", "7"]);
    assert_eq!(no_sip.status.code(), Some(2));
    let message = String::from_utf8_lossy(&no_sip.stderr);
    assert!(
        message.contains("--sip 7: the machine has 2 SIPs"),
        "{message}"
    );
    let no_cube = kernbench(&["topo", "--view", "cube", "--cube", "16"]);
    assert_eq!(no_cube.status.code(), Some(2));
    let dot = kernbench(&["topo", "--format", "dot"]);
    assert_eq!(dot.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&dot.stderr).contains("--format dot needs --view"));
}
