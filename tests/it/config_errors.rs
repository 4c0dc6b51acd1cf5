//! Whole-behaviour tests of configuration loading: every bad input is an
//! error that names the file, line, column, key path and what was expected.

use kernbench::ccl::CclConfig;
use kernbench::config::{ConfigError, ConfigSource, Override, Overrides};
use kernbench::topology::{SipArrangement, TopologySpec};

const TOPOLOGY: &str = include_str!("../../configs/topology.yaml");
const CCL: &str = include_str!("../../configs/ccl.yaml");

fn source(text: String) -> ConfigSource {
    ConfigSource::Text {
        name: "topology.yaml".into(),
        text: text.into(),
    }
}

fn load(text: String, sets: &[&str]) -> Result<TopologySpec, ConfigError> {
    let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    TopologySpec::load(&source(text), &overrides)
}

/// The default topology with the one occurrence of `old` replaced by `new`,
/// and the 1-based line where it was.
fn edit(old: &str, new: &str) -> (String, usize) {
    assert_eq!(TOPOLOGY.matches(old).count(), 1, "`{old}` must occur once");
    let offset = TOPOLOGY.find(old).unwrap();
    let line = TOPOLOGY[..offset].matches('\n').count() + 1;
    (TOPOLOGY.replacen(old, new, 1), line)
}

fn error_of(text: String) -> String {
    load(text, &[]).unwrap_err().to_string()
}

#[test]
fn embedded_defaults_parse() {
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    assert_eq!(spec.system().sips.count(), 2);
    assert_eq!(spec.system().sips, SipArrangement::Ring { n: 2 });
    assert_eq!(
        (spec.sip().cube_mesh.w.get(), spec.sip().cube_mesh.h.get()),
        (4, 4)
    );
    assert_eq!(spec.cube().pes.get(), 8);
    let ccl = CclConfig::load(&CclConfig::default_source(), &[]).unwrap();
    assert_eq!(ccl.default_algorithm().name, "intercube_allreduce");
    assert!(ccl.algorithm("ring_allreduce").is_some());
    assert!(ccl.algorithm("hello_send").is_some());
}

#[test]
fn embedded_defaults_name_themselves_in_errors() {
    let overrides = Overrides::parse(&["system.sips.topology=torus_2d"]).unwrap();
    let error = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("<embedded configs/topology.yaml>:"),
        "{error}"
    );
}

#[test]
fn unknown_key_has_line_column_and_path() {
    let (text, line) = edit("    count: 2 ", "    bogus: 1\n    count: 2 ");
    assert_eq!(
        error_of(text),
        format!(
            "topology.yaml:{line}:5: system.sips.bogus: unknown key `bogus`, \
             expected one of `count`, `topology`, `w`, `h`"
        )
    );
}

#[test]
fn unknown_top_level_section() {
    let text = format!("{TOPOLOGY}\nmemory: {{}}\n");
    let line = text.lines().count();
    let error = error_of(text);
    assert!(
        error.starts_with(&format!(
            "topology.yaml:{line}:1: memory: unknown key `memory`"
        )),
        "{error}"
    );
}

#[test]
fn wrong_unit_names_what_was_expected() {
    let (text, line) = edit(
        "latency: \"500 ns\"               # (estimate) half",
        "latency: \"8 GB\"                 # (estimate) half",
    );
    let error = error_of(text);
    let prefix = format!("topology.yaml:{line}:5: system.host_link.latency: \"8 GB\": ");
    assert!(error.starts_with(&prefix), "{error}");
    assert!(error.contains("`GB` is a unit of a size"), "{error}");
    assert!(
        error.contains("expected a duration in ps, ns, us"),
        "{error}"
    );
}

#[test]
fn missing_unit_is_an_error() {
    let (text, line) = edit("bandwidth: \"63 GB/s\"", "bandwidth: 63");
    let error = error_of(text);
    let prefix = format!("topology.yaml:{line}:5: system.host_link.bandwidth: \"63\" has no unit");
    assert!(error.starts_with(&prefix), "{error}");
    assert!(error.contains("GB/s"), "{error}");
}

#[test]
fn sip_grid_must_match_count() {
    let (text, line) = edit("    count: 2 ", "    count: 6\n    w: 4\n    h: 2\n    #");
    let text = text.replace("topology: ring_1d ", "topology: torus_2d ");
    assert_eq!(
        error_of(text),
        format!(
            "topology.yaml:{}:3: system.sips: sip layout 4x2 = 8 != sips.count 6 (w=4, h=2)",
            line - 1
        )
    );
}

#[test]
fn sip_grid_written_as_flow_mapping() {
    let start = TOPOLOGY.find("  sips:\n").unwrap();
    let end = TOPOLOGY.find("  host:\n").unwrap();
    let flow = "  sips: {count: 6, topology: torus_2d, w: 4, h: 2}\n";
    let text = format!("{}{flow}{}", &TOPOLOGY[..start], &TOPOLOGY[end..]);
    let error = error_of(text);
    for part in ["system.sips", "w=4", "h=2", "= 8", "sips.count 6"] {
        assert!(error.contains(part), "`{part}` missing from: {error}");
    }
}

#[test]
fn non_square_count_without_grid_asks_for_w_and_h() {
    let sets = [
        "system.sips.count=6",
        "system.sips.topology=mesh_2d_no_wrap",
    ];
    let error = load(TOPOLOGY.to_owned(), &sets).unwrap_err().to_string();
    assert!(
        error.starts_with(
            "--set system.sips.count=6: system.sips.count: sips.count 6 is not a square"
        ),
        "{error}"
    );
    assert!(error.contains("set sips.w and sips.h"), "{error}");
    let square = ["system.sips.count=9", "system.sips.topology=torus_2d"];
    let spec = load(TOPOLOGY.to_owned(), &square).unwrap();
    assert_eq!(spec.system().sips.grid().unwrap().to_string(), "3x3");
}

#[test]
fn ring_rejects_a_grid() {
    let error = load(TOPOLOGY.to_owned(), &["system.sips.h=2"])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("--set system.sips.h=2: system.sips.h: sips.h sets a 2-D grid"),
        "{error}"
    );
}

#[test]
fn unknown_topology_lists_the_valid_ones() {
    let (text, line) = edit("topology: ring_1d ", "topology: hypercube ");
    assert_eq!(
        error_of(text),
        format!(
            "topology.yaml:{line}:5: system.sips.topology: unknown value `hypercube`, \
             expected one of `ring_1d`, `torus_2d`, `mesh_2d_no_wrap`"
        )
    );
}

#[test]
fn zero_bandwidth_is_rejected() {
    let (text, line) = edit("bandwidth: \"100 GB/s\"", "bandwidth: \"0 GB/s\"");
    let error = error_of(text);
    let prefix = format!("topology.yaml:{line}:5: system.inter_sip.bandwidth: ");
    assert!(error.starts_with(&prefix), "{error}");
    assert!(error.contains("greater than zero"), "{error}");
}

#[test]
fn zero_pes_and_zero_clock_are_rejected() {
    let (text, line) = edit("  pes: 8 ", "  pes: 0 ");
    assert_eq!(
        error_of(text),
        format!(
            "topology.yaml:{line}:3: cube.pes: expected a positive integer (at most 4294967295), found 0"
        )
    );
    let error = load(TOPOLOGY.to_owned(), &["pe.clock=0 GHz"])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("--set pe.clock=0 GHz: pe.clock: "),
        "{error}"
    );
    assert!(error.contains("greater than zero"), "{error}");
}

#[test]
fn hbm_interleave_must_divide_evenly() {
    let (text, line) = edit("interleave: \"256 B\"", "interleave: \"48 B\"");
    assert_eq!(
        error_of(text),
        format!(
            "topology.yaml:{line}:5: cube.hbm.interleave: interleave 48 B is not a whole number of 32 B bursts"
        )
    );
    let error = load(TOPOLOGY.to_owned(), &["cube.hbm.capacity=1000 MB"])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("--set cube.hbm.capacity=1000 MB: cube.hbm.capacity: "),
        "{error}"
    );
}

#[test]
fn set_overrides_values_before_deserialization() {
    let sets = [
        "system.sips.count=6",
        "system.sips.topology=torus_2d",
        "system.sips.w=3",
        "system.sips.h=2",
        "sip.cube_mesh={w: 2, h: 2}",
        "pe.clock=1.5 GHz",
    ];
    let spec = load(TOPOLOGY.to_owned(), &sets).unwrap();
    assert_eq!(spec.system().sips.grid().unwrap().to_string(), "3x2");
    assert_eq!(spec.total_cubes(), 24);
    assert_eq!(spec.pe().clock.hz(), 1_500_000_000);
}

#[test]
fn set_with_an_unknown_path_names_the_argument() {
    let error = load(TOPOLOGY.to_owned(), &["system.sips.colour=red"])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "--set system.sips.colour=red: system.sips.colour: unknown key `colour`, expected one of"
        ),
        "{error}"
    );
    let error = load(TOPOLOGY.to_owned(), &["nosuch.key=1"])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("--set nosuch.key=1: nosuch: unknown key `nosuch`"),
        "{error}"
    );
    let error = load(TOPOLOGY.to_owned(), &["cube.pes.count=1"])
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "--set cube.pes.count=1: `cube.pes` is a single value, not a section with keys"
    );
    let error = Override::parse("cube.pes").unwrap_err().to_string();
    assert!(
        error.starts_with("--set cube.pes: expected key.path=value"),
        "{error}"
    );
}

#[test]
fn ccl_overrides_and_errors() {
    let overrides = Overrides::parse(&[
        "ccl.defaults.n_elem=16",
        "ccl.defaults.algorithm=ring_allreduce",
    ])
    .unwrap();
    let ccl = CclConfig::load(&CclConfig::default_source(), &overrides.ccl).unwrap();
    assert_eq!(ccl.defaults().n_elem.get(), 16);
    assert_eq!(ccl.default_algorithm().name, "ring_allreduce");
    let text = CCL.replace("algorithm: intercube_allreduce", "algorithm: butterfly");
    let line = text.lines().position(|l| l.contains("butterfly")).unwrap() + 1;
    let source = ConfigSource::Text {
        name: "ccl.yaml".into(),
        text: text.into(),
    };
    let error = CclConfig::load(&source, &[]).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "ccl.yaml:{line}:3: defaults.algorithm: `butterfly` is not an entry of `algorithms`"
        )),
        "{error}"
    );
}

#[test]
fn yaml_syntax_errors_are_positioned() {
    let text = format!("{TOPOLOGY}\nbroken: [1, 2\n");
    let error = error_of(text);
    assert!(error.starts_with("topology.yaml:"), "{error}");
    assert!(error.contains("YAML syntax error"), "{error}");
    let (text, line) = edit("    count: 2 ", "    count: 2\n    count: 3\n    #");
    let error = error_of(text);
    assert!(
        error.starts_with(&format!(
            "topology.yaml:{}:5: duplicate key `count`",
            line + 1
        )),
        "{error}"
    );
}

fn set_error(sets: &[&str]) -> String {
    load(TOPOLOGY.to_owned(), sets).unwrap_err().to_string()
}

#[test]
fn numbers_take_exponents_and_separators() {
    let spec = load(
        TOPOLOGY.to_owned(),
        &[
            "cube.hbm.capacity=16_384 MiB",
            "pe.clock=1e9 Hz",
            "cube.pes=8e0",
        ],
    )
    .unwrap();
    assert_eq!(spec.cube().hbm.capacity.get().bytes(), 16 << 30);
    assert_eq!(spec.pe().clock.hz(), 1_000_000_000);
    assert_eq!(spec.cube().pes.get(), 8);
    let error = set_error(&["system.inter_sip.bandwidth=1e30 GB/s"]);
    assert!(
        error.contains("system.inter_sip.bandwidth: \"1e30 GB/s\" is too large"),
        "{error}"
    );
}

#[test]
fn derived_rates_that_overflow_name_their_key() {
    // 1e6 GHz x 2 FLOPs x 128 x 128 MACs = 3.3e19 FLOP/s > u64::MAX (1.8e19).
    let error = set_error(&["pe.clock=1000000 GHz"]);
    assert!(
        error.starts_with("--set pe.clock=1000000 GHz: pe.clock: "),
        "{error}"
    );
    assert!(error.contains("overflows"), "{error}");
    // 18446744073 GHz x 64 B is past u64::MAX B/s.
    let error = set_error(&["cube.noc.clock=18446744073 GHz"]);
    assert!(error.contains("cube.noc.clock: "), "{error}");
    let error = set_error(&[
        "sip.ucie.modules_per_edge=4294967295",
        "sip.ucie.module_bandwidth=10 TB/s",
    ]);
    assert!(error.contains("sip.ucie.module_bandwidth: "), "{error}");
}

#[test]
fn address_map_limits_are_load_errors_naming_the_key() {
    // The fields widen with the machine (ADR-0038): 4,096 SIPs, 241 PEs
    // and 17 × 16 cubes all fit 64 bits.
    for fits in [
        &["system.sips.count=4096"][..],
        &["cube.pes=241"],
        &["sip.cube_mesh.w=17", "sip.cube_mesh.h=16"],
    ] {
        assert!(load(TOPOLOGY.to_owned(), fits).is_ok(), "{fits:?}");
    }
    // 2^31 SIPs and the host need 32 bits: 32 + 4 + 5 + 34 = 75 do not fit.
    let error = set_error(&["system.sips.count=2147483648"]);
    assert!(error.contains("system.sips.count: "), "{error}");
    assert!(
        error.contains("2147483648 SIPs and the host need 32 bits")
            && error.contains("75 bits, more than 64"),
        "{error}"
    );
    // A 2^63-byte SRAM needs a 63-bit offset: no room for the rest.
    let error = set_error(&["cube.sram.capacity=8388608 TiB"]);
    assert!(error.contains("cube.sram.capacity: "), "{error}");
}

#[test]
fn alias_bombs_are_refused_at_the_alias() {
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n\
                b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
                c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n\
                d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n\
                e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n\
                f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
    let error = error_of(bomb.to_owned());
    assert!(error.starts_with("topology.yaml:5:"), "{error}");
    assert!(error.contains("more than 100000 values"), "{error}");
}
