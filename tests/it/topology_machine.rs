//! The compiled machine graph: counts computed from the spec by the rules
//! of docs/topology.md (independently of the compiler), unique names,
//! full-duplex edges, SIP topologies and rejected machines.

use kernbench::config::Override;
use kernbench::config::units::Count;
use kernbench::topology::{CubeSpec, EdgeKind, Grid, Machine, NodeKind, TopologySpec};

fn spec(sets: &[&str]) -> TopologySpec {
    let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap()
}

fn machine(sets: &[&str]) -> Machine {
    Machine::build(&spec(sets)).unwrap()
}

/// The documented NoC sizing: `(w, h, zone_rows)`.
fn noc_grid(spec: &TopologySpec) -> (u64, u64, u64) {
    let endpoints = u64::from(spec.cube().pes.get()) + 5;
    let link = spec.cube().noc.link_width.get().bytes() * spec.cube().noc.clock.hz();
    let ports = spec.cube().hbm.bandwidth().bytes_per_sec().div_ceil(link);
    (1..=64)
        .map(|w| {
            let zone = ports.div_ceil(w);
            (w, zone + endpoints.div_ceil(w), zone)
        })
        .min_by_key(|&(w, h, _)| (w.max(h), w * h, w))
        .unwrap()
}

/// Links of a `w × h` mesh.
fn mesh_links(w: u64, h: u64) -> u64 {
    (w - 1) * h + w * (h - 1)
}

#[test]
fn default_machine_counts_follow_from_the_spec() {
    let spec = spec(&[]);
    let machine = Machine::build(&spec).unwrap();
    let (w, h, zone) = noc_grid(&spec);
    assert_eq!((w, h, zone), (5, 6, 3), "the documented default layout");
    let sips = u64::from(spec.system().sips.count());
    let cubes = spec.cubes_per_sip();
    let pes = u64::from(spec.cube().pes.get());
    let (mw, mh) = (
        u64::from(spec.sip().cube_mesh.w.get()),
        u64::from(spec.sip().cube_mesh.h.get()),
    );
    let ucie_links = mesh_links(mw, mh);
    let inter_sip_links = 1; // a ring of two SIPs: one pair, not doubled
    let routers = w * h;
    let per_cube_nodes = routers + 2 * pes + 4; // + hbm, sram, mcpu, mcpu.dma
    let nodes =
        1 + sips * 2 + 2 * inter_sip_links + sips * cubes * per_cube_nodes + sips * 2 * ucie_links;
    assert_eq!(machine.nodes().len() as u64, nodes);

    let per_cube_links = mesh_links(w, h) + 2 * pes + w * zone + 3;
    let per_sip_links = 1 + 1 + cubes + 2; // pcie, pcie-io_cpu, mgmt per cube, two NoC attachments
    let links = sips * per_sip_links
        + 2 * inter_sip_links // port attachments
        + inter_sip_links
        + sips * (cubes * per_cube_links + 2 * ucie_links + ucie_links);
    assert_eq!(machine.edges().len() as u64, 2 * links);

    let kind = |k: EdgeKind| machine.edges().iter().filter(|e| e.kind == k).count() as u64;
    assert_eq!(kind(EdgeKind::Ucie), 2 * sips * ucie_links);
    assert_eq!(kind(EdgeKind::InterSip), 2);
    assert_eq!(kind(EdgeKind::Pcie), 2 * sips);
    assert_eq!(kind(EdgeKind::HbmPort), 2 * sips * cubes * w * zone);
    let routers_seen = machine
        .nodes()
        .iter()
        .filter(|n| n.kind == NodeKind::Router)
        .count() as u64;
    assert_eq!(routers_seen, sips * cubes * routers);
}

#[test]
fn names_are_unique_and_indexed() {
    let machine = machine(&[]);
    assert_eq!(machine.by_name().len(), machine.nodes().len());
    let names: Vec<&str> = machine
        .by_name()
        .iter()
        .map(|&id| machine.node(id).name.as_str())
        .collect();
    assert!(
        names.windows(2).all(|pair| pair[0] < pair[1]),
        "in name order"
    );
    assert_eq!(machine.find("sip0.cube0.pe0.tcmx"), None);
    for (i, node) in machine.nodes().iter().enumerate() {
        assert_eq!(machine.find(&node.name).map(|id| id.index()), Some(i));
    }
    for name in [
        "host",
        "sip0.pcie_ep",
        "sip1.io_cpu",
        "sip1.cube15.r5c4",
        "sip1.cube15.pe7.tcm",
        "sip0.cube3.hbm",
        "sip0.cube3.mcpu.dma",
        "sip0.cube0.ucie.e",
        "sip0.inter_sip.e",
        "sip1.inter_sip.w",
    ] {
        assert!(machine.find(name).is_some(), "{name} missing");
    }
    for absent in [
        "sip0.cube0.ucie.w",
        "sip0.inter_sip.w",
        "sip1.inter_sip.e",
        "sip0.cube0.hbm.pc0",
    ] {
        assert!(machine.find(absent).is_none(), "{absent} should not exist");
    }
}

#[test]
fn every_edge_has_its_reverse() {
    let machine = machine(&["system.sips.count=4", "system.sips.topology=torus_2d"]);
    for (i, edge) in machine.edges().iter().enumerate() {
        let back = machine.edge(edge.reverse);
        assert_eq!((back.from, back.to), (edge.to, edge.from), "edge {i}");
        assert_eq!(back.reverse.index(), i);
        assert_eq!((back.kind, back.role), (edge.kind, edge.role));
        assert!(machine.out_edges(edge.to).contains(&edge.reverse));
    }
    // Three ids, a kind and a role: 16 bytes an edge (ADR-0050 D3).
    assert_eq!(std::mem::size_of::<kernbench::topology::Edge>(), 16);
}

#[test]
fn sip_topologies_have_the_documented_links() {
    let inter_sip = |sets: &[&str]| {
        let machine = machine(sets);
        machine
            .edges()
            .iter()
            .filter(|e| e.kind == EdgeKind::InterSip)
            .count()
            / 2
    };
    let ring = |n: u32| inter_sip(&[&format!("system.sips.count={n}")]);
    assert_eq!((ring(1), ring(2), ring(3), ring(4)), (0, 1, 3, 4));
    let grid = |topology: &str, n: u32, w: u32, h: u32| {
        inter_sip(&[
            &format!("system.sips.count={n}"),
            &format!("system.sips.topology={topology}"),
            &format!("system.sips.w={w}"),
            &format!("system.sips.h={h}"),
        ])
    };
    assert_eq!(grid("torus_2d", 9, 3, 3), 18);
    assert_eq!(grid("torus_2d", 4, 2, 2), 4, "a wrap of two is not doubled");
    assert_eq!(grid("torus_2d", 4, 4, 1), 4);
    assert_eq!(grid("torus_2d", 1, 1, 1), 0);
    assert_eq!(grid("mesh_2d_no_wrap", 9, 3, 3), 12);
    assert_eq!(grid("mesh_2d_no_wrap", 6, 3, 2), 7);
}

#[test]
fn io_and_ports_attach_where_documented() {
    let machine = machine(&[]);
    let node = |name: &str| machine.node(machine.find(name).unwrap()).clone();
    let io = node("sip0.io_cpu");
    assert_eq!((io.cube, io.kind), (Some(0), NodeKind::IoCpu));
    let port = node("sip0.inter_sip.e");
    assert_eq!(
        port.cube,
        Some(7),
        "middle of the east edge: row 1, column 3"
    );
    assert_eq!(
        machine.sip_port_cube(kernbench::topology::naming::Side::E),
        7
    );
    let ucie = node("sip0.cube5.ucie.n");
    let layout = machine.layout();
    assert_eq!(
        ucie.router.map(|p| (p.row, p.col)),
        Some((0, (layout.width() - 1) / 2))
    );
}

#[test]
fn a_noc_grid_that_cannot_hold_the_cube_is_rejected() {
    let error = TopologySpec::load(
        &TopologySpec::default_source(),
        &[Override::parse("cube.noc.grid={w: 4, h: 4}").unwrap()],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("cube.noc.grid"), "{error}");
    assert!(error.contains("too small"), "{error}");

    let count = |n| Count::new(n).unwrap();
    let on_grid = |w, h| {
        let spec = spec(&[]);
        let cube = spec.cube().clone();
        let grid = Grid {
            w: count(w),
            h: count(h),
        };
        let noc = cube.noc.with_grid(Some(grid));
        spec.with_cube(CubeSpec { noc, ..cube })
    };
    let error = on_grid(5, 5).unwrap_err();
    assert_eq!(error.key(), "cube.noc.grid");
    assert!(error.to_string().contains("too small"), "{error}");
    let machine = Machine::build(&on_grid(5, 7).unwrap()).unwrap();
    assert_eq!(
        (machine.layout().width(), machine.layout().height()),
        (5, 7)
    );
}

#[test]
fn a_noc_beyond_the_router_limit_is_rejected() {
    let error = TopologySpec::load(
        &TopologySpec::default_source(),
        &[Override::parse("cube.noc.clock=1 MHz").unwrap()],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("cube.noc.clock: "), "{error}");
    assert!(error.contains("raise cube.noc.clock"), "{error}");
    assert!(error.contains("12800 HBM ports"), "{error}");
    assert!(error.contains("at most 4096"), "{error}");
}
