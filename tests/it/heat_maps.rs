//! The heat maps point at the bottleneck and explain output stays in
//! proportion (ADR-0117), on the run that showed neither: a 16 MiB
//! all-reduce on 4 SIPs `torus_2d`, explained. Its links with the most
//! time on the critical path, as the text names them, are the strongest
//! colours of `topology-heat.svg` and `cube-heat.svg` together; its
//! `explain.json`, its `--json` and a two-point explained sweep's
//! `results.json` stay small. Release only (`.ci/run`): the run takes
//! about 10 s there.

use crate::cli_common::{self, TempDir, kernbench};

const MACHINE: [&str; 4] = [
    "--set",
    "system.sips.count=4",
    "--set",
    "system.sips.topology=torus_2d",
];

/// The explained 16 MiB all-reduce.
const EXPLAINED: [&str; 6] = [
    "run",
    "--bench",
    "ccl_allreduce",
    "--size",
    "16M",
    "--explain",
];

/// `args` after the 4-SIP machine, expected to succeed.
fn run(dir: &TempDir, args: &[&str]) -> String {
    let all: Vec<&str> = MACHINE.iter().chain(args).copied().collect();
    let output = kernbench(dir.path(), &all);
    assert!(output.status.success(), "{}", cli_common::stderr(&output));
    cli_common::stdout(&output)
}

/// The links the text's "top components" list names first, links only,
/// most first.
fn top_links(text: &str, n: usize) -> Vec<String> {
    let list = text
        .split("top components on the critical path:\n")
        .nth(1)
        .expect("a top components list");
    let is_link = |class: &str| ["noc", "ucie", "inter_sip_link", "pcie"].contains(&class);
    list.lines()
        .take_while(|l| l.starts_with("    "))
        .filter_map(|l| {
            let (name, class) = l.trim_end_matches(')').rsplit_once(" (")?;
            is_link(class).then(|| name.rsplit(' ').next().unwrap().to_owned())
        })
        .take(n)
        .collect()
}

/// Every drawn link of a heat map: its tooltip and how strong its colour
/// is (the ramp's blue falls from start to end, so less blue is
/// stronger).
fn coloured_links(svg: &str) -> Vec<(u8, String)> {
    svg.split("<g class=\"heat\"><title>")
        .skip(1)
        .filter_map(|group| {
            let (title, rest) = group.split_once("</title>")?;
            let stroke = rest.split("stroke=\"#").nth(1)?.get(..6)?;
            let blue = u8::from_str_radix(stroke.get(4..6)?, 16).ok()?;
            (stroke != "cccccc").then(|| (blue, title.to_owned()))
        })
        .collect()
}

#[test]
#[ignore = "release: .ci/run"]
fn the_paths_top_links_are_the_heat_maps_strongest_colours() {
    let dir = TempDir::new("heat-top-links");
    let text = run(&dir, &[&EXPLAINED[..], &["--out", "E"]].concat());
    let top = top_links(&text, 3);
    assert_eq!(top.len(), 3, "{text}");
    let read = |name: &str| std::fs::read_to_string(dir.path().join("E").join(name)).unwrap();
    let mut links = coloured_links(&read("topology-heat.svg"));
    links.extend(coloured_links(&read("cube-heat.svg")));
    links.sort();
    let strongest: Vec<&String> = links.iter().take(3).map(|(_, t)| t).collect();
    for link in &top {
        assert!(
            strongest
                .iter()
                .any(|t| t.starts_with(&format!("{link}: ")) || t.contains(&format!("; {link}: "))),
            "{link} is not among the three strongest colours: {strongest:#?}"
        );
    }
    for (rank, link) in top.iter().enumerate() {
        let labelled = format!("#{}</text>", rank + 1);
        let holder = [read("topology-heat.svg"), read("cube-heat.svg")]
            .concat()
            .split("<g class=\"heat\"><title>")
            .any(|g| g.contains(link.as_str()) && g.contains(&labelled));
        assert!(holder, "{link} is not labelled #{}", rank + 1);
    }
    let json = std::fs::metadata(dir.path().join("E/explain.json")).unwrap();
    assert!(json.len() <= 10 << 20, "explain.json: {} B", json.len());
}

#[test]
#[ignore = "release: .ci/run"]
fn explained_json_and_a_two_point_sweep_stay_small() {
    let dir = TempDir::new("heat-sizes");
    let json = run(&dir, &[&EXPLAINED[..], &["--json"]].concat());
    assert!(json.len() <= 10 << 20, "--json: {} B", json.len());
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let explain = &parsed["explain"];
    let lines = explain["critical_path"].as_array().unwrap().len();
    assert_eq!(lines, 24, "the first and last 12 lines");
    assert!(explain["critical_path_elided"]["lines"].as_u64().unwrap() > 0);
    run(
        &dir,
        &[
            "sweep",
            "--bench",
            "ccl_allreduce",
            "--size",
            "16M",
            "--vary",
            "system.inter_sip.bandwidth=100 GB/s,400 GB/s",
            "--explain",
            "--out",
            "V",
        ],
    );
    let results = std::fs::metadata(dir.path().join("V/results.json")).unwrap();
    assert!(
        results.len() <= 20 << 20,
        "results.json: {} B",
        results.len()
    );
}
