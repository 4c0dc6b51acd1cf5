//! Routing over the compiled machine: determinism, dimension order at each
//! level, hop counts per SIP topology, adjacency views, address resolution.
//! Expected counts come from the placement rules of docs/topology.md, not
//! from the router.

use std::sync::Arc;

use kernbench::config::Override;
use kernbench::topology::naming::Side;
use kernbench::topology::{
    EdgeKind, Machine, MemSpace, NodeId, NodeKind, Path, PathRouter, RouteError, TopologySpec, View,
};

fn router(sets: &[&str]) -> PathRouter {
    let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap();
    PathRouter::new(Arc::new(Machine::build(&spec).unwrap()))
}

fn id(router: &PathRouter, name: &str) -> NodeId {
    router
        .machine()
        .find(name)
        .unwrap_or_else(|| panic!("{name}"))
}

fn path(router: &PathRouter, from: &str, to: &str) -> Arc<Path> {
    router.find_node_path(from, to).unwrap()
}

fn hops(router: &PathRouter, path: &Path, kind: EdgeKind) -> usize {
    path.hops_of(router.machine(), kind)
}

/// The sides by which a path leaves through ports of `kind`, in order.
fn exits(router: &PathRouter, path: &Path, kind: EdgeKind) -> Vec<Side> {
    let machine = router.machine();
    path.edges()
        .iter()
        .map(|&e| machine.edge(e))
        .filter(|edge| edge.kind == kind)
        .filter_map(|edge| machine.node(edge.from).side)
        .collect()
}

/// UCIe hops between two cubes of a `w`-wide mesh: Manhattan distance.
fn cube_distance(w: u32, a: u32, b: u32) -> usize {
    ((a / w).abs_diff(b / w) + (a % w).abs_diff(b % w)) as usize
}

/// The cube carrying a SIP's port on `side` in a 4×4 mesh (middle of that edge).
fn port_cube(side: Side) -> u32 {
    match side {
        Side::E => 4 + 3,
        Side::W => 4,
        Side::N => 1,
        Side::S => 12 + 1,
    }
}

#[test]
fn paths_are_consistent_chains() {
    let router = router(&[]);
    let machine = router.machine();
    for (from, to) in [
        ("sip0.cube0.pe0", "sip1.cube15.pe7"),
        ("host", "sip1.cube3.hbm"),
        ("sip0.cube5.hbm", "host"),
        ("sip1.cube9.pe3.tcm", "sip0.cube2.sram"),
        ("sip0.cube0.ucie.e", "sip0.cube1.pe0"),
        ("sip0.inter_sip.e", "sip1.cube0.pe0"),
    ] {
        let path = path(&router, from, to);
        assert_eq!(machine.node(path.from()).name, from);
        assert_eq!(machine.node(path.to()).name, to);
        assert_eq!(path.nodes().len(), path.hops() + 1);
        for (i, &e) in path.edges().iter().enumerate() {
            let edge = machine.edge(e);
            assert_eq!((edge.from, edge.to), (path.nodes()[i], path.nodes()[i + 1]));
        }
        let mut visited = path.nodes().to_vec();
        visited.sort();
        visited.dedup();
        assert_eq!(visited.len(), path.nodes().len(), "{from} -> {to} loops");
    }
}

#[test]
fn same_inputs_give_the_same_paths() {
    let pairs = [
        ("sip0.cube0.pe0", "sip1.cube15.pe7"),
        ("sip1.cube6.hbm", "sip0.cube9.pe2.tcm"),
        ("host", "sip1.cube12.mcpu"),
    ];
    let names = |router: &PathRouter| -> Vec<Vec<String>> {
        pairs
            .iter()
            .map(|(a, b)| {
                let path = path(router, a, b);
                path.nodes()
                    .iter()
                    .map(|&n| router.machine().node(n).name.clone())
                    .collect()
            })
            .collect()
    };
    let sets = ["system.sips.count=4", "system.sips.topology=torus_2d"];
    assert_eq!(names(&router(&sets)), names(&router(&sets)));
}

#[test]
fn routes_are_cached() {
    let router = router(&[]);
    let a = path(&router, "sip0.cube0.pe0", "sip1.cube3.pe1");
    let b = path(&router, "sip0.cube0.pe0", "sip1.cube3.pe1");
    assert!(Arc::ptr_eq(&a, &b));
}

#[test]
fn cube_mesh_is_crossed_x_then_y() {
    let router = router(&[]);
    let path = path(&router, "sip0.cube0.pe0", "sip0.cube15.pe0");
    assert_eq!(
        exits(&router, &path, EdgeKind::Ucie),
        [Side::E, Side::E, Side::E, Side::S, Side::S, Side::S]
    );
    assert_eq!(hops(&router, &path, EdgeKind::InterSip), 0);
}

#[test]
fn noc_is_crossed_x_then_y() {
    let router = router(&[]);
    let path = path(&router, "sip0.cube0.pe0", "sip0.cube0.pe7");
    let machine = router.machine();
    let layout = machine.layout();
    let (a, b) = (layout.pe(0).unwrap(), layout.pe(7).unwrap());
    assert_eq!(hops(&router, &path, EdgeKind::Noc), a.manhattan(b) as usize);
    let positions: Vec<_> = path
        .nodes()
        .iter()
        .map(|&n| machine.node(n))
        .filter(|n| n.kind == NodeKind::Router)
        .filter_map(|n| n.router)
        .collect();
    let turn = positions.iter().position(|p| p.col == b.col).unwrap();
    assert!(
        positions[..=turn].iter().all(|p| p.row == a.row),
        "{positions:?}"
    );
    assert!(
        positions[turn..].iter().all(|p| p.col == b.col),
        "{positions:?}"
    );
}

#[test]
fn hbm_is_reached_by_the_nearest_zone_router() {
    let router = router(&[]);
    let path = path(&router, "sip0.cube0.pe2", "sip0.cube0.hbm");
    // pe2 sits on the row above the zone: one NoC-free step down into it.
    assert_eq!(path.hops(), 3, "pe -> router -> zone router -> hbm");
    assert_eq!(hops(&router, &path, EdgeKind::HbmPort), 1);
}

#[test]
fn ring_of_four_goes_two_sips_east() {
    let router = router(&["system.sips.count=4"]);
    let path = path(&router, "sip0.cube0.pe0", "sip2.cube0.pe0");
    assert_eq!(hops(&router, &path, EdgeKind::InterSip), 2);
    assert_eq!(
        exits(&router, &path, EdgeKind::InterSip),
        [Side::E, Side::E]
    );
    let expected = cube_distance(4, 0, port_cube(Side::E))
        + cube_distance(4, port_cube(Side::W), port_cube(Side::E))
        + cube_distance(4, port_cube(Side::W), 0);
    assert_eq!(hops(&router, &path, EdgeKind::Ucie), expected);
    let through = |sip: u32| {
        path.nodes()
            .iter()
            .any(|&n| router.machine().node(n).sip == Some(sip))
    };
    assert!(through(1) && !through(3));
    let back = self::path(&router, "sip0.cube0.pe0", "sip3.cube0.pe0");
    assert_eq!(exits(&router, &back, EdgeKind::InterSip), [Side::W]);
}

#[test]
fn two_sip_ring_uses_its_one_link_both_ways() {
    let router = router(&[]);
    let there = path(&router, "sip0.cube7.pe0", "sip1.cube4.pe0");
    let back = path(&router, "sip1.cube4.pe0", "sip0.cube7.pe0");
    assert_eq!(exits(&router, &there, EdgeKind::InterSip), [Side::E]);
    assert_eq!(exits(&router, &back, EdgeKind::InterSip), [Side::W]);
    assert_eq!(hops(&router, &there, EdgeKind::Ucie), 0);
}

#[test]
fn torus_uses_the_wrap_and_mesh_does_not() {
    let grid = |topology: &str| {
        router(&[
            "system.sips.count=9",
            &format!("system.sips.topology={topology}"),
        ])
    };
    let torus = grid("torus_2d");
    let wrap = path(&torus, "sip0.cube0.pe0", "sip2.cube0.pe0");
    assert_eq!(exits(&torus, &wrap, EdgeKind::InterSip), [Side::W]);
    let expected =
        cube_distance(4, 0, port_cube(Side::W)) + cube_distance(4, port_cube(Side::E), 0);
    assert_eq!(hops(&torus, &wrap, EdgeKind::Ucie), expected);
    let corner = path(&torus, "sip0.cube0.pe0", "sip8.cube0.pe0");
    assert_eq!(
        exits(&torus, &corner, EdgeKind::InterSip),
        [Side::W, Side::N]
    );

    let mesh = grid("mesh_2d_no_wrap");
    let corner = path(&mesh, "sip0.cube0.pe0", "sip8.cube0.pe0");
    assert_eq!(
        exits(&mesh, &corner, EdgeKind::InterSip),
        [Side::E, Side::E, Side::S, Side::S],
        "Manhattan distance, X first"
    );
    let expected = cube_distance(4, 0, port_cube(Side::E))
        + cube_distance(4, port_cube(Side::W), port_cube(Side::E))
        + cube_distance(4, port_cube(Side::W), port_cube(Side::S))
        + cube_distance(4, port_cube(Side::N), port_cube(Side::S))
        + cube_distance(4, port_cube(Side::N), 0);
    assert_eq!(hops(&mesh, &corner, EdgeKind::Ucie), expected);
}

#[test]
fn one_sip_two_by_two_builds_and_routes() {
    let router = router(&[
        "system.sips.count=1",
        "sip.cube_mesh={w: 2, h: 2}",
        "cube.pes=2",
    ]);
    let machine = router.machine();
    assert_eq!((machine.sip_count(), machine.cubes_per_sip()), (1, 4));
    assert!(machine.nodes().iter().all(|n| n.kind != NodeKind::SipPort));
    let path = path(&router, "sip0.cube0.pe1", "sip0.cube3.pe0");
    assert_eq!(exits(&router, &path, EdgeKind::Ucie), [Side::E, Side::S]);
    assert!(path.latency(machine) > kernbench::sim::SimDuration::ZERO);
}

#[test]
fn views_exclude_edge_kinds() {
    let router = router(&[]);
    let (pe0, pe1) = (id(&router, "sip0.cube0.pe0"), id(&router, "sip0.cube1.pe0"));
    let error = router.find_path_in(pe0, pe1, View::CubeLocal).unwrap_err();
    let message = error.to_string();
    assert!(matches!(
        error,
        RouteError::NoRoute {
            view: View::CubeLocal,
            ..
        }
    ));
    assert!(
        message.contains("sip0.cube0.pe0") && message.contains("sip0.cube1.pe0"),
        "{message}"
    );
    assert!(message.contains("cube_local"), "{message}");
    assert!(
        router
            .find_path_in(pe0, id(&router, "sip0.cube0.pe5"), View::CubeLocal)
            .is_ok()
    );

    let (dma, far_hbm) = (
        id(&router, "sip0.cube0.mcpu.dma"),
        id(&router, "sip1.cube0.hbm"),
    );
    let error = router.find_mcpu_dma_path(dma, far_hbm).unwrap_err();
    assert!(error.to_string().contains("inter_sip"), "{error}");
    let host_copy = router
        .find_mcpu_dma_path(router.machine().host(), far_hbm)
        .unwrap();
    assert_eq!(hops(&router, &host_copy, EdgeKind::Pcie), 1);
}

#[test]
fn commands_use_the_management_bus_and_data_does_not() {
    let router = router(&[]);
    let (io, mcpu) = (id(&router, "sip0.io_cpu"), id(&router, "sip0.cube10.mcpu"));
    let command = router.find_path_in(io, mcpu, View::All).unwrap();
    assert_eq!(
        (command.hops(), hops(&router, &command, EdgeKind::Mgmt)),
        (1, 1)
    );
    let launch = router
        .find_path_in(router.machine().host(), mcpu, View::All)
        .unwrap();
    assert_eq!(launch.hops(), 3, "host -> pcie_ep -> io_cpu -> mcpu");
    let data = router.find_path(io, mcpu).unwrap();
    assert_eq!(hops(&router, &data, EdgeKind::Mgmt), 0);
    assert_eq!(
        hops(&router, &data, EdgeKind::Ucie),
        cube_distance(4, 0, 10)
    );
}

#[test]
fn distance_is_hops() {
    let router = router(&[]);
    let (io, far) = (id(&router, "sip0.io_cpu"), id(&router, "sip0.cube15.mcpu"));
    let (path, distance) = router.find_path_with_distance(io, far).unwrap();
    assert_eq!(distance, path.hops());
    let near = id(&router, "sip0.cube0.mcpu");
    assert!(router.find_path_with_distance(io, near).unwrap().1 < distance);
}

#[test]
fn addresses_resolve_to_memory_nodes() {
    let router = router(&[]);
    let machine = router.machine();
    let resolver = router.resolver();
    let hbm = MemSpace::Hbm { sip: 1, cube: 3 };
    let addr = machine.address_map().encode(hbm, 0x1000).unwrap();
    let resolved = resolver.resolve(addr).unwrap();
    assert_eq!(machine.node(resolved.node).name, "sip1.cube3.hbm");
    assert_eq!((resolved.space, resolved.offset), (hbm, 0x1000));
    let tcm = MemSpace::Tcm {
        sip: 0,
        cube: 2,
        pe: 5,
    };
    let node = resolver.memory_node(tcm).unwrap();
    assert_eq!(machine.node(node).name, tcm.node_name());

    let unmapped = resolver.resolve(0x0500_0000_0000_0000).unwrap_err();
    assert!(matches!(unmapped, RouteError::Address(_)), "{unmapped}");

    let pe = id(&router, "sip0.cube0.pe0");
    let (path, space) = router.find_memory_path(pe, addr).unwrap();
    assert_eq!((space, path.to()), (hbm, resolved.node));
    assert_eq!(hops(&router, &path, EdgeKind::InterSip), 1);
}

#[test]
fn sip_level_lookups() {
    let router = router(&[]);
    let resolver = router.resolver();
    let machine = router.machine();
    let name = |id| machine.node(id).name.clone();
    assert_eq!(
        name(resolver.find_m_cpu(1, 15).unwrap()),
        "sip1.cube15.mcpu"
    );
    assert_eq!(name(resolver.find_pcie_ep(1).unwrap()), "sip1.pcie_ep");
    assert_eq!(name(resolver.find_io_cpu(0).unwrap()), "sip0.io_cpu");
    let all: Vec<String> = resolver.find_all_pcie_eps().into_iter().map(name).collect();
    assert_eq!(all, ["sip0.pcie_ep", "sip1.pcie_ep"]);
    let missing = resolver.find_m_cpu(5, 0).unwrap_err();
    assert_eq!(missing.to_string(), "no node named sip5.cube0.mcpu");
    assert!(router.find_node_path("sip0.cube0.pe0", "nowhere").is_err());
}
