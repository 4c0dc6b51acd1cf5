//! The all-reduce catalogue on the full simulation with real data (ADR-0015):
//! every algorithm, seeded random non-integer inputs, f32 and f16. Each
//! run checks that every endpoint of every rank ends with bitwise the same
//! tile, that it is within the rounding bound of the f64 sum, and that the
//! algorithm's α-β model is present and not above the simulated time.
//!
//! `cargo test` runs every algorithm on two small machines, and at odd
//! element counts (1 element, fewer elements than endpoints, messages
//! larger than a tiny IPCQ slot); the whole acceptance matrix
//! (8 algorithms × 6 machines × 2 dtypes, 196608 B per rank) is
//! `catalogue_matrix`, and every algorithm at 2 MiB, 3 MiB and 64 MiB per
//! rank (and odd counts beside them) is `large_tiles_matrix` (issue 26),
//! both ignored in the debug run and run in release mode by `.ci/run`
//! (`cargo test --release --test it -- --ignored ccl_catalogue::`). Every
//! algorithm of every collective also runs through its `ccl_*` workload at
//! odd counts per rank with `--verify-data` (issue 26 item 3, ADR-0045):
//! a few in the debug run, `any_element_count_matrix` in release mode.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use half::f16;
use kernbench::ccl::{CclConfig, Collective};
use kernbench::config::Overrides;
use kernbench::mem::DataMode;
use kernbench::runtime::{DPPolicy, Element, ReduceOp, Split, Torch, get_rank, spawn};
use kernbench::sim::{self, SimDuration, Simulation};
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads;
use ndarray::{Array2, Ix2};

use crate::catalogue_common;
use catalogue_common::{allreduce_algorithms, collective_algorithms};

/// The acceptance machines, as `--set` arguments.
const MACHINES: [&[&str]; 6] = [
    &["system.sips.count=2"],
    &["system.sips.count=4", "system.sips.topology=torus_2d"],
    &[
        "system.sips.count=6",
        "system.sips.topology=torus_2d",
        "system.sips.w=3",
        "system.sips.h=2",
    ],
    &["system.sips.count=8"],
    &["system.sips.count=5"],
    &[
        "system.sips.count=4",
        "system.sips.topology=mesh_2d_no_wrap",
    ],
];

/// What one run gave.
struct Outcome {
    /// Simulated all-reduce time (slowest rank).
    time: SimDuration,
    /// The algorithm's model.
    model: Option<SimDuration>,
}

/// A value in [-1, 1) from a seeded xorshift: never an integer, so every
/// addition rounds.
fn random(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// An element type of the matrix.
trait Value: Element + PartialEq + std::fmt::Debug {
    /// Unit roundoff of the type.
    const UNIT: f64;
    fn of(x: f64) -> Self;
    fn get(self) -> f64;
}

impl Value for f32 {
    const UNIT: f64 = 1.0 / (1u64 << 24) as f64;
    fn of(x: f64) -> Self {
        x as f32
    }
    fn get(self) -> f64 {
        f64::from(self)
    }
}

impl Value for f16 {
    const UNIT: f64 = 1.0 / (1u64 << 11) as f64;
    fn of(x: f64) -> Self {
        f16::from_f64(x)
    }
    fn get(self) -> f64 {
        self.to_f64()
    }
}

/// Rank `rank`'s `(cubes, n)` input (seeded by rank).
fn input<T: Value>(rank: usize, cubes: usize, n: usize) -> Array2<T> {
    let mut state = 0x9E37_79B9_7F4A_7C15 ^ (rank as u64 + 1).wrapping_mul(0x2545_F491);
    Array2::from_shape_fn((cubes, n), |_| T::of(random(&mut state)))
}

/// All-reduces random `T` tiles of `n` elements with `algorithm` on the
/// machine `sets`, checks every rank's result, and returns the times.
fn run<T: Value>(sets: &[&str], algorithm: &str, n: usize) -> Outcome {
    let overrides = Overrides::parse(sets).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology).unwrap();
    let machine = Arc::new(Machine::build(&spec).unwrap());
    let cubes = machine.cubes_per_sip() as usize;
    let device = kernbench::device::Device::from_machine(machine, DataMode::On).unwrap();
    let ccl = CclConfig::load(&CclConfig::default_source(), &overrides.ccl).unwrap();
    let torch = Torch::with_ccl(device, ccl);
    let results = Rc::new(RefCell::new(Vec::new()));
    let (shared, host, name) = (results.clone(), torch.clone(), algorithm.to_owned());
    let driver = async move {
        let dist = host.distributed.clone();
        dist.init_process_group_with("ahbm", Collective::AllReduce, &name)?;
        let world = dist.get_world_size()?;
        spawn(world, move |_| {
            let (torch, results) = (host.clone(), shared.clone());
            async move {
                let dist = &torch.distributed;
                let rank = get_rank();
                let dp = DPPolicy::new(Split::RowWise, Split::Replicate, cubes as u32, 1);
                let t = torch.zeros(&[cubes, n], T::DTYPE, &dp)?;
                t.copy_from(&input::<T>(rank, cubes, n)).await?;
                let model = dist.all_reduce_model(&t)?;
                dist.barrier().await?;
                let start = sim::now();
                dist.all_reduce(&t, ReduceOp::Sum).await?;
                dist.barrier().await?;
                let time = sim::now() - start;
                let back = t.to_ndarray::<T>().await?.unwrap();
                let back = back.into_dimensionality::<Ix2>().unwrap();
                results.borrow_mut().push((rank, time, model, back));
                Ok::<(), kernbench::runtime::DistError>(())
            }
        })
        .await
        .map_err(|e| e.source)
    };
    let mut simulation = Simulation::new();
    let handle = simulation.spawn("driver", driver);
    simulation.run().unwrap();
    let what = format!("{algorithm} {:?} on {sets:?}", T::DTYPE);
    handle
        .output()
        .unwrap()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let results = results.borrow();
    let world = results.len();
    let first = &results[0].3;
    for (rank, _, _, back) in results.iter() {
        for row in back.rows() {
            assert_eq!(row, first.row(0), "{what}: rank {rank} differs from rank 0");
        }
    }
    check_sum::<T>(&what, first.row(0).to_vec(), world, cubes, n);
    let time = results.iter().map(|r| r.1).max().unwrap();
    Outcome {
        time,
        model: results[0].2,
    }
}

/// Every element within `(N + 1) · u · Σ|x|` of the f64 sum of the
/// `N = world × cubes` tiles (a sum rounded to the dtype after each of at
/// most `N − 1` additions, in any order, plus the inputs' own rounding).
fn check_sum<T: Value>(what: &str, got: Vec<T>, world: usize, cubes: usize, n: usize) {
    let inputs: Vec<Array2<T>> = (0..world).map(|r| input(r, cubes, n)).collect();
    let contributions = (world * cubes) as f64;
    for (i, value) in got.iter().enumerate() {
        let column = inputs.iter().flat_map(|a| a.column(i).to_vec());
        let (sum, abs) = column.fold((0.0, 0.0), |(s, a), x: T| (s + x.get(), a + x.get().abs()));
        let bound = (contributions + 1.0) * T::UNIT * abs;
        let error = (value.get() - sum).abs();
        assert!(
            error <= bound,
            "{what}: element {i} is {}, the sum is {sum} (error {error} > bound {bound})",
            value.get()
        );
    }
}

fn check_model(what: &str, outcome: &Outcome) {
    let model = outcome.model.unwrap_or_else(|| panic!("{what}: no model"));
    assert!(model > SimDuration::ZERO, "{what}: empty model");
    assert!(
        model <= outcome.time,
        "{what}: model {model:?} above the simulated {:?}",
        outcome.time
    );
}

#[test]
fn every_algorithm_is_bitwise_identical_on_every_rank_with_random_data() {
    for algorithm in &allreduce_algorithms() {
        let outcome = run::<f32>(MACHINES[0], algorithm, 40);
        check_model(&format!("{algorithm} f32"), &outcome);
    }
    let torus = MACHINES[2];
    for algorithm in [
        "intercube_allreduce",
        "lrab_hierarchical_allreduce",
        "rd_allreduce",
    ] {
        let outcome = run::<f16>(torus, algorithm, 24);
        check_model(&format!("{algorithm} f16 6-SIP torus"), &outcome);
    }
}

/// The acceptance matrix (release mode, `.ci/run`): 196608 B per rank.
#[test]
#[ignore = "release-mode matrix, run by .ci/run"]
fn catalogue_matrix() {
    for algorithm in &allreduce_algorithms() {
        for machine in MACHINES {
            let cubes = 16;
            let f32_run = run::<f32>(machine, algorithm, 196_608 / 4 / cubes);
            let f16_run = run::<f16>(machine, algorithm, 196_608 / 2 / cubes);
            for (dtype, outcome) in [("f32", f32_run), ("f16", f16_run)] {
                let what = format!("{algorithm} {dtype} {machine:?}");
                check_model(&what, &outcome);
                println!(
                    "{algorithm:28} {dtype} {:55} sim {:>12} ps model {:>12} ps",
                    machine.join(" "),
                    outcome.time.as_ps(),
                    outcome.model.unwrap().as_ps()
                );
            }
        }
    }
}

/// 3 SIPs of 2 × 1 cubes (6 endpoints: recursive doubling folds 2 of
/// them) with 64 B IPCQ slots, so that every tile below of more than 16
/// f32 elements goes as several messages.
const SMALL_SLOTS: &[&str] = &[
    "system.sips.count=3",
    "sip.cube_mesh.w=2",
    "sip.cube_mesh.h=1",
    "ccl.defaults.ipcq.slot_size=64 B",
];

#[test]
fn every_algorithm_takes_any_element_count() {
    for algorithm in &allreduce_algorithms() {
        // One element; fewer elements than endpoints (empty pieces); a
        // prime count cut into uneven messages of at most a slot.
        for n in [1, 5, 37] {
            let outcome = run::<f32>(SMALL_SLOTS, algorithm, n);
            check_model(&format!("{algorithm} f32 n={n}"), &outcome);
        }
        // 16 endpoints on one SIP, 5 elements each (issue 26's
        // `--set system.sips.count=1 ... --size 160`).
        run::<f16>(&["system.sips.count=1"], algorithm, 5);
    }
}

/// Issue 26's sizes: every algorithm at 2 MiB, 3 MiB and 64 MiB per rank
/// (16 cubes: 128 KiB, 192 KiB and 4 MiB tiles, larger than an IPCQ slot)
/// and at odd counts beside them, in flow fidelity (release mode,
/// `.ci/run`).
#[test]
#[ignore = "release-mode matrix, run by .ci/run"]
fn large_tiles_matrix() {
    const MIB: usize = 1 << 20;
    let machines: [&[&str]; 5] = [
        &["system.sips.count=2"],
        &["system.sips.count=3"],
        &["system.sips.count=4"],
        &["system.sips.count=8"],
        &[
            "system.sips.count=9",
            "system.sips.topology=mesh_2d_no_wrap",
        ],
    ];
    let cubes = 16;
    for algorithm in &allreduce_algorithms() {
        for machine in machines {
            let sets = [machine, &["simulation.fidelity=flow"]].concat();
            for (bytes, odd) in [(2 * MIB, 0), (3 * MIB, 0), (2 * MIB, 3)] {
                let n = bytes / 4 / cubes + odd;
                let outcome = run::<f32>(&sets, algorithm, n);
                let what = format!("{algorithm} f32 {n} per tile {machine:?}");
                check_model(&what, &outcome);
                println!(
                    "{algorithm:28} f32 {n:>8} per tile {:50} sim {:>12} ps",
                    machine.join(" "),
                    outcome.time.as_ps()
                );
            }
        }
        let flow = ["system.sips.count=2", "simulation.fidelity=flow"];
        for (n, name) in [
            (64 * MIB / 4 / cubes, "64 MiB"),
            (64 * MIB / 4 / cubes - 1, "odd"),
        ] {
            let outcome = run::<f32>(&flow, algorithm, n);
            check_model(&format!("{algorithm} f32 {name} 2 SIPs"), &outcome);
            println!(
                "{algorithm:28} f32 {n:>8} per tile ({name}) 2 SIPs sim {:>12} ps",
                outcome.time.as_ps()
            );
        }
        // f16 on the 3-SIP fold at 3 MiB.
        let fold = ["system.sips.count=3", "simulation.fidelity=flow"];
        run::<f16>(&fold, algorithm, 3 * MIB / 2 / cubes);
    }
}

/// Runs `bench` with `algorithm` on `count` `dtype` elements per rank on
/// the machine `sets`, with `--verify-data`, and asserts that every check
/// passed and that the count reported is the one asked for (ADR-0045).
fn run_count(sets: &[&str], bench: &str, algorithm: &str, dtype: &str, count: u64) {
    let overrides = Overrides::parse(sets).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology).unwrap();
    let ccl = CclConfig::load(&CclConfig::default_source(), &overrides.ccl).unwrap();
    let elem = if dtype == "f32" { 4 } else { 2 };
    let options = workloads::Options {
        ccl: Some(ccl),
        verify_data: true,
        ..workloads::Options::default()
    }
    .with("algorithm", algorithm)
    .with("dtype", dtype)
    .with("size", count * elem);
    let machine = Arc::new(Machine::build(&spec).unwrap());
    let what = format!("{bench} {algorithm} {dtype} {count} per rank on {sets:?}");
    let report = workloads::find(bench)
        .unwrap()
        .run(machine, &options)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(report.checks_passed > 0, "{what}: nothing checked");
    assert_eq!(report.checks_failed, 0, "{what}: {:?}", report.checks);
    let reported = report.figures.iter().find(|f| f.name == "count");
    let reported = reported.unwrap_or_else(|| panic!("{what}: no count"));
    assert_eq!(reported.value, workloads::Value::Int(count), "{what}");
}

/// Issue 26 item 3: any element count per rank, in every algorithm of
/// every collective, with `--verify-data`: one element (fewer than the
/// blocks: every block but one is padding), 7 and 1000 (blocks padded),
/// in f32 and f16, on 6 endpoints with 64 B slots (several messages per
/// block), and 4097 in f32 there.
#[test]
fn every_collective_takes_any_element_count_per_rank() {
    for (bench, algorithm) in &collective_algorithms() {
        for dtype in ["f32", "f16"] {
            for count in [1, 7, 1000] {
                run_count(SMALL_SLOTS, bench, algorithm, dtype, count);
            }
        }
        run_count(SMALL_SLOTS, bench, algorithm, "f32", 4097);
    }
}

/// The odd counts on larger machines (release mode, `.ci/run`): the
/// default 16-cube SIPs on 2, 3 and 5 ranks, and one SIP alone (issue 26's
/// `--set system.sips.count=1 ... --size 160`: 80 f16 elements), f32 and
/// f16, and 65537 f32 elements for every all-reduce.
#[test]
#[ignore = "release-mode matrix, run by .ci/run"]
fn any_element_count_matrix() {
    let machines: [&[&str]; 4] = [
        &["system.sips.count=1"],
        &["system.sips.count=2"],
        &["system.sips.count=3"],
        &["system.sips.count=5", "simulation.fidelity=flow"],
    ];
    for (bench, algorithm) in &collective_algorithms() {
        for machine in machines {
            if *bench == "ccl_sendrecv" && machine == machines[0] {
                continue; // send_recv needs 2 ranks
            }
            for dtype in ["f32", "f16"] {
                for count in [1, 7, 80, 1000, 4097] {
                    run_count(machine, bench, algorithm, dtype, count);
                }
            }
            if *bench == "ccl_allreduce" {
                run_count(machine, bench, algorithm, "f32", 65_537);
            }
            println!("{bench:18} {algorithm:28} {machine:?}: 1 to 4097 elements pass");
        }
    }
}
