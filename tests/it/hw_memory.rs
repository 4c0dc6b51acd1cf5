//! Memories: the HBM controller's pseudo-channels and the SRAM/TCM ports
//! time uncontended accesses exactly as their formulas say, serialise
//! competing accesses per channel, and count what they served.

use std::rc::Rc;

use kernbench::hw::{
    AccessReport, HbmController, HwError, MemoryPort, hbm_formula, memory_formula, pc_shares,
};
use kernbench::sim::{self, SimDuration, SimTime, Simulation};
use kernbench::topology::{HbmSpec, MemorySpec, TopologySpec};
use proptest::prelude::*;

fn spec() -> TopologySpec {
    TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()
}

fn hbm(spec: &HbmSpec) -> Rc<HbmController> {
    Rc::new(HbmController::new("hbm", spec, |k| format!("hbm.pc{k}")))
}

/// Each request is `(start_ps, offset, len)`; all run concurrently.
fn run_hbm(controller: &Rc<HbmController>, requests: &[(u64, u64, u64)]) -> Vec<AccessReport> {
    let mut simulation = Simulation::new();
    let handles: Vec<_> = requests
        .iter()
        .enumerate()
        .map(|(i, &(start, offset, len))| {
            let controller = controller.clone();
            simulation.spawn(&format!("req{i}"), async move {
                sim::sleep_until(SimTime::from_ps(start)).await;
                controller.access(offset, len).await.unwrap()
            })
        })
        .collect();
    simulation.run().unwrap();
    handles.into_iter().map(|h| h.output().unwrap()).collect()
}

#[test]
fn hbm_simulation_equals_formula() {
    let spec = spec().cube().hbm;
    let capacity = spec.capacity.get().bytes();
    let cases = [
        (0, 32),             // one burst
        (0, 256),            // one interleave granule
        (0, 8192),           // one granule on every PC
        (31, 2),             // straddles a burst boundary
        (100, 1000),         // unaligned, five PCs
        (8000, 20_000),      // unaligned, wraps across all PCs
        (12_345, 1 << 20),   // 1 MiB, unaligned
        (capacity - 64, 64), // the last bytes
        (5, 0),              // command-only
    ];
    for (offset, len) in cases {
        let report = run_hbm(&hbm(&spec), &[(0, offset, len)])[0];
        let formula = hbm_formula(&spec, offset, len).unwrap();
        assert_eq!(report.duration(), formula, "[{offset}, +{len})");
        let shares = pc_shares(&spec, offset, len).unwrap();
        assert_eq!(report.bytes, shares.iter().sum::<u64>());
        assert!(report.bytes >= len && report.bytes < len + 2 * 32);
    }
}

#[test]
fn hbm_formula_worked_values() {
    let spec = spec().cube().hbm;
    // 20 ns controller + 30 ns access + 256 B at 25.6 GB/s (10 ns).
    assert_eq!(hbm_formula(&spec, 0, 8192).unwrap().as_ps(), 60_000);
    // 1 MiB spreads 32 KiB over each PC: 32768 B / 25.6 GB/s = 1.28 us.
    assert_eq!(
        hbm_formula(&spec, 0, 1 << 20).unwrap().as_ps(),
        50_000 + 1_280_000
    );
    // Unaligned [100, 1100): PC0 gets bursts 96..256 (160 B) -> 6.25 ns.
    assert_eq!(
        pc_shares(&spec, 100, 1000).unwrap()[..5],
        [160, 256, 256, 256, 96]
    );
    assert_eq!(hbm_formula(&spec, 100, 1000).unwrap().as_ps(), 60_000);
}

#[test]
fn hbm_counts_per_pseudo_channel() {
    let spec = spec().cube().hbm;
    let controller = hbm(&spec);
    let report = run_hbm(&controller, &[(0, 0, 8192)])[0];
    let stats = controller.pc_stats(report.end);
    assert_eq!(stats.len(), 32);
    for pc in &stats {
        assert_eq!((pc.jobs, pc.bytes), (1, 256));
        assert_eq!(pc.busy, SimDuration::from_ns(10));
        assert!(pc.utilisation() <= 1.0);
    }
}

#[test]
fn requests_on_one_pc_serialise_and_on_different_pcs_overlap() {
    let spec = spec().cube().hbm;
    // Two requests for the same granule (PC 0) at the same time.
    let same = run_hbm(&hbm(&spec), &[(0, 0, 256), (0, 0, 256)]);
    assert_eq!(same[0].end.as_ps(), 60_000);
    assert_eq!(same[1].end.as_ps(), 70_000, "waits one 10 ns occupancy");
    // Two requests for PC 0 and PC 1: independent.
    let apart = run_hbm(&hbm(&spec), &[(0, 0, 256), (0, 256, 256)]);
    assert_eq!(
        (apart[0].end.as_ps(), apart[1].end.as_ps()),
        (60_000, 60_000)
    );
    // Request 0 holds PCs 0..9 over [20, 30) ns (one granule each). A
    // request for PC 0 reaching it at 25 ns waits until 30 ns; one reaching
    // it at 35 ns does not wait.
    let queued = run_hbm(&hbm(&spec), &[(0, 0, 2560), (5_000, 0, 32)]);
    assert_eq!(queued[1].end.as_ps(), 30_000 + 1_250 + 30_000);
    let free = run_hbm(&hbm(&spec), &[(0, 0, 2560), (15_000, 0, 32)]);
    assert_eq!(free[1].end.as_ps(), 15_000 + 20_000 + 1_250 + 30_000);
}

#[test]
fn hbm_access_outside_the_stack_is_an_error() {
    let spec = spec().cube().hbm;
    let capacity = spec.capacity.get().bytes();
    let controller = hbm(&spec);
    let mut simulation = Simulation::new();
    let c = controller.clone();
    let result = simulation.spawn("bad", async move { c.access(capacity - 8, 64).await });
    simulation.run().unwrap();
    let error = result.output().unwrap().unwrap_err();
    assert!(matches!(error, HwError::OutOfRange { .. }));
    assert!(error.to_string().starts_with("hbm: "), "{error}");
}

fn run_port(spec: &MemorySpec, sizes: &[u64]) -> (Vec<AccessReport>, Rc<MemoryPort>) {
    let port = Rc::new(MemoryPort::new("tcm", spec));
    let mut simulation = Simulation::new();
    let handles: Vec<_> = sizes
        .iter()
        .map(|&bytes| {
            let port = port.clone();
            simulation.spawn("access", async move { port.access(bytes).await.unwrap() })
        })
        .collect();
    simulation.run().unwrap();
    (
        handles.into_iter().map(|h| h.output().unwrap()).collect(),
        port,
    )
}

#[test]
fn sram_and_tcm_simulation_equals_formula() {
    let spec = spec();
    for memory in [spec.cube().sram, spec.pe().tcm] {
        for bytes in [0, 1, 64, 4096, 3 << 20] {
            let (reports, _) = run_port(&memory, &[bytes]);
            assert_eq!(
                reports[0].duration(),
                memory_formula(&memory, bytes).unwrap()
            );
        }
    }
    // TCM: 2 ns + 4096 B at 1 TB/s.
    assert_eq!(memory_formula(&spec.pe().tcm, 4096).unwrap().as_ps(), 6_096);
}

#[test]
fn back_to_back_accesses_stream_at_full_bandwidth() {
    let tcm = spec().pe().tcm;
    let (reports, port) = run_port(&tcm, &[4096, 4096, 4096]);
    let ends: Vec<u64> = reports.iter().map(|r| r.end.as_ps()).collect();
    // The latency is paid once per access but overlaps: 4.096 ns apart.
    assert_eq!(ends, vec![6_096, 10_192, 14_288]);
    let stats = port.stats(reports[2].end);
    assert_eq!((stats.jobs, stats.bytes), (3, 3 * 4096));
    assert_eq!(stats.busy.as_ps(), 3 * 4096);
    assert!(port.stats(SimTime::from_ps(5_000)).utilisation() <= 1.0);
}

proptest! {
    #[test]
    fn any_hbm_request_matches_its_formula(offset in 0u64..1 << 24, len in 0u64..1 << 16) {
        let spec = spec().cube().hbm;
        let report = run_hbm(&hbm(&spec), &[(0, offset, len)])[0];
        prop_assert_eq!(report.duration(), hbm_formula(&spec, offset, len).unwrap());
    }
}
