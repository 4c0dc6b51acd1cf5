//! Kernel launch: program ids over a grid, one common start time, the
//! launch time equal to the documented dispatch formula plus kernel time,
//! cancellation on failure and grid validation, all naming (sip, cube, pe).

use crate::tl_common;

use kernbench::mem::DataMode;
use kernbench::runtime::launch::{LaunchError, dispatch_cost, launch};
use kernbench::sim::{self, SimDuration, SimTime, Simulation};
use kernbench::tl::{Grid, Kernel, KernelError, KernelRegistry, PeCoord, Tl};
use tl_common::*;

type Ids = (PeCoord, [u32; 5]);

/// Sleeps `(cube + 1) × base` and reports what `tl` says about itself.
async fn whoami(tl: Tl, base: SimDuration) -> Result<Ids, KernelError> {
    sim::sleep(base * u64::from(tl.program_id(1) + 1)).await;
    let ids = [
        tl.program_id(0),
        tl.program_id(1),
        tl.num_programs(0),
        tl.num_programs(1),
        tl.program_id(2) + tl.num_programs(2),
    ];
    Ok((tl.coord(), ids))
}

const GRID: Grid = Grid { pes: 2, cubes: 2 };

#[test]
fn every_program_sees_its_ids_and_starts_at_the_common_target_start() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let base = SimDuration::from_ns(500);
    let report = run(&device, Kernel::new("whoami", whoami), GRID, base).unwrap();
    let coords: Vec<_> = report.programs.iter().map(|p| p.coord).collect();
    let at = |cube, pe| PeCoord { sip: 0, cube, pe };
    assert_eq!(coords, [at(0, 0), at(0, 1), at(1, 0), at(1, 1)]);
    for program in &report.programs {
        let (coord, ids) = program.output;
        assert_eq!(coord, program.coord);
        assert_eq!(ids, [coord.pe, coord.cube, 2, 2, 1]);
        assert_eq!(program.start, report.target_start, "{coord}");
        assert_eq!(
            program.end - program.start,
            base * u64::from(coord.cube + 1)
        );
    }
    assert_eq!(
        (report.kernel.as_str(), report.sip, report.grid),
        ("whoami", 0, GRID)
    );
}

#[test]
fn a_launch_takes_its_dispatch_formula_plus_the_kernel_time() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let base = SimDuration::from_ns(500);
    let report = run(&device, Kernel::new("whoami", whoami), GRID, base).unwrap();
    let cost = dispatch_cost(&device, 0, GRID).unwrap();
    assert_eq!(report.start, SimTime::ZERO);
    assert_eq!(
        report.target_start - report.start,
        cost.to_target_start().unwrap()
    );
    let kernel = [base, base * 2];
    assert_eq!(
        report.end - report.start,
        cost.launch_time(&kernel).unwrap()
    );
    // The terms, by hand: 2 us host, 1 us IO_CPU, 200 ns M_CPU.
    assert_eq!(cost.host, SimDuration::from_us(2));
    assert_eq!(cost.io_cpu, SimDuration::from_us(1));
    let fabric = device.fabric();
    let m = fabric.machine();
    let router = fabric.router();
    let path = |from, to| {
        router
            .find_path_in(from, to, kernbench::topology::View::All)
            .unwrap()
    };
    let io_cpu = m.io_cpu(0).unwrap();
    // host -> PCIe EP -> IO_CPU: a PCIe hop and a management hop.
    let command = path(m.host(), io_cpu);
    assert_eq!(command.hops(), 2);
    assert_eq!(cost.command, fabric.send_formula(&command, 64).unwrap());
    let pe_far = (0..2).map(|pe| {
        let to_pe = router
            .find_path(m.mcpu(0, 1).unwrap(), m.pe(0, 1, pe).unwrap())
            .unwrap();
        fabric.send_formula(&to_pe, 64).unwrap()
    });
    let to_mcpu = fabric
        .send_formula(&path(io_cpu, m.mcpu(0, 1).unwrap()), 64)
        .unwrap();
    let reach = to_mcpu + SimDuration::from_ns(200) + pe_far.max().unwrap();
    assert_eq!(cost.reach[1], reach);
}

#[test]
fn launches_on_other_sips_use_their_own_io_cpu() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let base = SimDuration::from_ns(100);
    let kernel = Kernel::new("whoami", whoami);
    let mut simulation = Simulation::new();
    let d = device.clone();
    let host = simulation.spawn(
        "host",
        async move { launch(&d, &kernel, 1, GRID, base).await },
    );
    simulation.run().unwrap();
    let report = host.output().unwrap().unwrap();
    assert!(report.programs.iter().all(|p| p.coord.sip == 1));
    let cost = dispatch_cost(&device, 1, GRID).unwrap();
    assert_eq!(
        report.end - report.start,
        cost.launch_time(&[base, base * 2]).unwrap()
    );
    assert_eq!(device.fabric().io_cpu(1).dispatch_stats(report.end).jobs, 1);
    assert_eq!(device.fabric().io_cpu(0).dispatch_stats(report.end).jobs, 0);
}

/// Program (pe 1, cube 1) fails after 100 ns; the others would run 10 us.
async fn one_fails(tl: Tl, _: ()) -> Result<(), KernelError> {
    if (tl.program_id(0), tl.program_id(1)) == (1, 1) {
        sim::sleep(SimDuration::from_ns(100)).await;
        return Err(KernelError::failed("bad tile"));
    }
    let scratch = tl.alloc(&[1024], kernbench::mem::DType::F32)?;
    sim::sleep(SimDuration::from_us(10)).await;
    tl.free(&scratch)
}

#[test]
fn a_failing_program_cancels_the_launch_and_is_named() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let mut simulation = Simulation::new();
    let d = device.clone();
    let kernel = Kernel::new("one_fails", one_fails);
    let host = simulation.spawn("host", async move {
        let result = launch(&d, &kernel, 0, GRID, ()).await;
        (result, sim::now())
    });
    simulation.run().expect("no deadlock, no panic");
    let (result, returned) = host.output().unwrap();
    let error = result.unwrap_err();
    let LaunchError::Program { coord, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(
        *coord,
        PeCoord {
            sip: 0,
            cube: 1,
            pe: 1
        }
    );
    assert_eq!(
        error.to_string(),
        "kernel `one_fails` failed on sip0.cube1.pe1 (sip 0, cube 1, pe 1): bad tile"
    );
    let cost = dispatch_cost(&device, 0, GRID).unwrap();
    let failed_at = SimTime::ZERO + cost.to_target_start().unwrap() + SimDuration::from_ns(100);
    assert_eq!(
        returned, failed_at,
        "the launch returns when the program fails"
    );
    assert_eq!(
        simulation.now(),
        failed_at,
        "the other programs were cancelled"
    );
    let scratch_left = device.store().regions().count();
    assert_eq!(scratch_left, 0, "their scratch was freed");
}

#[test]
fn programs_on_missing_pes_or_cubes_are_named() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let kernel = Kernel::new("noop", |_: Tl, _: ()| async { Ok(()) });
    let error = |sip, grid| {
        let mut simulation = Simulation::new();
        let (d, k) = (device.clone(), kernel.clone());
        let host = simulation.spawn("host", async move { launch(&d, &k, sip, grid, ()).await });
        simulation.run().unwrap();
        host.output().unwrap().unwrap_err().to_string()
    };
    assert_eq!(
        error(0, Grid { pes: 9, cubes: 1 }),
        "no PE for the program at (sip 0, cube 0, pe 8): a cube has 8 PEs"
    );
    assert_eq!(
        error(0, Grid { pes: 1, cubes: 17 }),
        "no PE for the program at (sip 0, cube 16, pe 0): a SIP has 16 cubes"
    );
    assert_eq!(
        error(2, Grid { pes: 1, cubes: 1 }),
        "no PE for the program at (sip 2, cube 0, pe 0): the machine has 2 SIPs"
    );
    assert_eq!(
        error(0, Grid { pes: 0, cubes: 4 }),
        "grid (0, 4) has no programs"
    );
}

#[test]
fn kernels_are_launched_by_name_from_a_registry() {
    let mut registry = KernelRegistry::new();
    registry.register(Kernel::new("whoami", whoami)).unwrap();
    let kernel = registry.get::<SimDuration, Ids>("whoami").unwrap();
    let device = device(&spec(&[]), DataMode::Off);
    let report = run(&device, kernel, ONE, SimDuration::ZERO).unwrap();
    assert_eq!(report.programs[0].output.1, [0, 0, 1, 1, 1]);
}

/// PE 0 starts a long composite and waits; PE 1 fails 100 ns in.
async fn fails_during_a_composite(tl: Tl, _: ()) -> Result<(), KernelError> {
    if tl.program_id(0) == 1 {
        sim::sleep(SimDuration::from_ns(100)).await;
        return Err(KernelError::failed("gave up"));
    }
    let a = tl.alloc(&[512, 512], kernbench::mem::DType::F16)?;
    let token = tl.composite(&a, &a, &[kernbench::tl::Epilogue::Relu])?;
    token.wait().await.map(|_| ())
}

#[test]
fn a_failure_also_stops_the_pipeline_jobs_of_the_other_programs() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let grid = Grid { pes: 2, cubes: 1 };
    let kernel = Kernel::new("fails_during_a_composite", fails_during_a_composite);
    let mut simulation = Simulation::new();
    let d = device.clone();
    let host = simulation.spawn(
        "host",
        async move { launch(&d, &kernel, 0, grid, ()).await },
    );
    simulation.run().unwrap();
    let error = host.output().unwrap().unwrap_err().to_string();
    assert!(
        error.contains("sip0.cube0.pe1 (sip 0, cube 0, pe 1): gave up"),
        "{error}"
    );
    let cost = dispatch_cost(&device, 0, grid).unwrap();
    let failed_at = SimTime::ZERO + cost.to_target_start().unwrap() + SimDuration::from_ns(100);
    assert_eq!(
        simulation.now(),
        failed_at,
        "the composite's task stopped too"
    );
    let gemm = device.fabric().pe_gemm(0, 0, 0);
    assert_eq!(
        gemm.stats(failed_at).jobs,
        16,
        "its tiles had been reserved"
    );
    assert_eq!(device.store().regions().count(), 0, "and its scratch freed");
}
