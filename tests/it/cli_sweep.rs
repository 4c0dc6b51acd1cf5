//! `kernbench sweep` as a user runs it: the figures a GEMM sweep writes.

use crate::cli_common;

use cli_common::{TempDir, kernbench, stderr, stdout};

/// The SVG files `dir` holds, by name.
fn svgs(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "svg"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_gemm_sweep_writes_three_figures_with_its_points() {
    let dir = TempDir::new("sweep-gemm");
    let shapes = "16x16x16,32x32x32";
    for bench in ["gemm_single_pe", "gemm"] {
        let out = dir.path().join(bench);
        let args = ["sweep", "--bench", bench, "--shape", shapes, "--out"];
        let output = kernbench(dir.path(), &[&args[..], &[out.to_str().unwrap()]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(stdout(&output).contains("shape=32x32x32"));
        let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
        assert_eq!(csv.lines().count(), 3, "{csv}");
        let figures = svgs(&out);
        let names: Vec<_> = figures.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "simulated_vs_theoretical.svg",
                "tflops_vs_intensity.svg",
                "time_vs_shape.svg"
            ],
            "{bench}"
        );
        for (name, svg) in &figures {
            // Two shapes: at least two markers per figure, and lines.
            assert!(svg.matches("<circle").count() >= 2, "{bench} {name}");
            assert!(svg.contains("<polyline"), "{bench} {name}");
            assert!(svg.contains(bench), "{bench} {name}: legend names the run");
        }
        assert!(figures[1].1.contains("roof: peak"), "{bench}");
    }
}

/// `--buffer-kind` sweeps where the IPCQ slots live: one variant per kind,
/// a `buffer_kind` column, a curve per kind in the figures, and slots in a
/// PE's own TCM are reached faster than in the cube's HBM or SRAM.
#[test]
fn a_buffer_kind_sweep_compares_where_the_slots_live() {
    let dir = TempDir::new("sweep-buffer-kind");
    let out = dir.path().join("bk");
    let args = [
        "--fidelity",
        "flow",
        "sweep",
        "--bench",
        "ccl_allreduce",
        "--buffer-kind",
        "tcm,hbm,sram",
        "-b",
        "1K",
        "-e",
        "4K",
        "-f",
        "4",
        "--out",
    ];
    let output = kernbench(dir.path(), &[&args[..], &[out.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header: Vec<_> = csv.lines().next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (kind, size, time) = (
        column("buffer_kind"),
        column("size"),
        column("allreduce_ps"),
    );
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let at = |k: &str, s: &str| -> u64 {
        let row = rows.iter().find(|r| r[kind] == k && r[size] == s).unwrap();
        row[time].parse().unwrap()
    };
    assert_eq!(rows.len(), 6, "{csv}");
    for size in ["1024", "4096"] {
        assert!(at("tcm", size) < at("hbm", size), "{csv}");
        assert!(at("tcm", size) < at("sram", size), "{csv}");
    }
    let latency = &svgs(&out)
        .into_iter()
        .find(|(n, _)| n == "latency_vs_size.svg");
    let latency = &latency.as_ref().unwrap().1;
    for kind in ["buffer_kind=tcm", "buffer_kind=hbm", "buffer_kind=sram"] {
        assert!(latency.contains(kind), "a curve for {kind}");
    }
    let bad = kernbench(
        dir.path(),
        &["sweep", "--bench", "ccl_allreduce", "--buffer-kind", "dram"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("tcm, hbm or sram"));
}

/// A `--fidelity` list is a sweep axis: each mode runs as its own variant
/// (a `fidelity` column); every other command takes one mode.
#[test]
fn a_fidelity_list_sweeps_both_modes_and_only_sweep_takes_one() {
    let dir = TempDir::new("sweep-fidelity");
    let out = dir.path().join("fx");
    let args = [
        "--fidelity",
        "packet,flow",
        "sweep",
        "--bench",
        "ccl_allreduce",
    ];
    let sizes = ["-b", "1K", "-e", "1K", "--out", out.to_str().unwrap()];
    let output = kernbench(dir.path(), &[&args[..], &sizes[..]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let modes: Vec<_> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap())
        .collect();
    assert_eq!(modes, ["packet", "flow"], "{csv}");
    let run = [
        "--fidelity",
        "packet,flow",
        "run",
        "--bench",
        "ccl_allreduce",
    ];
    let refused = kernbench(dir.path(), &run);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("only `sweep` runs a list of fidelities"));
}
