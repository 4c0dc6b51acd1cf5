//! Property test of the CLI as a hostile user drives it: random `--set`
//! keys and values (units, exponents, separators, signs, extremes, YAML
//! aliases and nesting) and random `--size` arguments. Whatever the input,
//! `kernbench` exits 0, 1 or 2, a failure prints exactly one non-empty
//! `error:` line (no abort; a hang shows as a test that does not end, and
//! the harness names it after 60 s — no wall-clock assertion here).

use crate::cli_common;

use cli_common::{TempDir, kernbench, stderr};
use proptest::prelude::*;

/// Keys of both files, leaves and sections.
const KEYS: &[&str] = &[
    "system.sips.count",
    "system.sips.topology",
    "system.sips.w",
    "system.inter_sip.bandwidth",
    "system.host_link.max_payload",
    "sip.cube_mesh",
    "sip.cube_mesh.w",
    "sip.ucie.modules_per_edge",
    "cube.pes",
    "cube.noc.clock",
    "cube.noc.link_width",
    "cube.noc.hop_cycles",
    "cube.hbm.capacity",
    "cube.hbm.interleave",
    "pe.clock",
    "pe.tcm.capacity",
    "pe.gemm.rows",
    "ccl.defaults.world_size",
    "ccl.defaults.n_elem",
    "ccl.defaults.ipcq.slots",
    "ccl.defaults.ipcq.slot_size",
    "ccl.algorithms.ring_allreduce.module",
    "no.such.key",
];

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..5000).prop_map(|n| n.to_string()),
        Just("0".to_owned()),
        Just("-256".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("99999999999999999999999".to_owned()),
        Just("1e30".to_owned()),
        Just("1.5e-3".to_owned()),
        Just("16_000".to_owned()),
        Just("0.5".to_owned()),
    ]
}

/// A one-line alias bomb: 8 levels of 10 aliases, 10^8 values expanded.
fn alias_bomb() -> String {
    let mut levels = vec!["&l0 [x, x, x, x, x, x, x, x, x, x]".to_owned()];
    for level in 1..8 {
        let items = vec![format!("*l{}", level - 1); 10].join(", ");
        levels.push(format!("&l{level} [{items}]"));
    }
    format!("[{}]", levels.join(", "))
}

fn value() -> impl Strategy<Value = String> {
    let unit = prop_oneof![
        Just(""),
        Just(" B"),
        Just(" MiB"),
        Just(" GB/s"),
        Just(" GHz"),
        Just(" Hz"),
        Just(" ns"),
        Just(" Gb/s")
    ];
    prop_oneof![
        4 => (number(), unit).prop_map(|(n, u)| format!("{n}{u}")),
        1 => Just("[&a [1,2], *a, *a]".to_owned()),
        1 => Just(alias_bomb()),
        1 => Just(format!("{}1{}", "[".repeat(80), "]".repeat(80))),
        1 => Just("{w: 64, h: 64}".to_owned()),
        1 => Just("torus_2d".to_owned()),
        1 => Just(String::new()),
    ]
}

fn command() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(vec!["topo".to_owned()]),
        number().prop_map(|n| vec!["probe".into(), "--size".into(), n]),
        number().prop_map(|n| {
            let run = ["run", "--bench", "ccl_allreduce", "--size"];
            run.iter().map(|s| (*s).to_owned()).chain([n]).collect()
        }),
        Just(
            [
                "run",
                "--bench",
                "gemm_single_pe",
                "--shape",
                "100000x100000x100000"
            ]
            .map(str::to_owned)
            .to_vec()
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_input_ends_in_0_1_or_2_with_one_error_line(
        sets in prop::collection::vec((prop::sample::select(KEYS), value()), 0..3),
        command in command(),
    ) {
        let dir = TempDir::new("fuzz");
        let mut args: Vec<String> = sets
            .iter()
            .flat_map(|(key, value)| ["--set".to_owned(), format!("{key}={value}")])
            .collect();
        args.extend(command);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = kernbench(dir.path(), &args);
        let code = output.status.code();
        let message = stderr(&output);
        prop_assert!(matches!(code, Some(0..=2)), "{args:?}: {code:?} {message}");
        let errors: Vec<&str> = message.lines().filter(|l| l.starts_with("error:")).collect();
        if code == Some(0) {
            prop_assert!(errors.is_empty(), "{args:?}: {message}");
        } else {
            prop_assert_eq!(errors.len(), 1, "{:?}: {}", args, message);
            prop_assert!(errors[0].len() > "error: ".len(), "{args:?}: {message}");
        }
    }
}
