//! IPCQ end to end: tiles moved between PEs through installed rings, with
//! exact closed-form times, backpressure, errors and deadlock reports.

use crate::tl_common;

use std::rc::Rc;

use kernbench::ccl::BufferKind;
use kernbench::ccl::install::{install, install_endpoints};
use kernbench::ccl::topology::{Builtin, Wiring};
use kernbench::ccl::{Endpoints, WorldShape};
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::launch::{LaunchError, LaunchReport, launch_with_ipcq};
use kernbench::sim::{SimDuration, SimError, SimTime, Simulation, sleep};
use kernbench::tl::{
    Backpressure, Dir, Grid, IpcqNetwork, IpcqParams, Kernel, KernelError, PeCoord, Tl,
    pointer_dump,
};
use kernbench::topology::MemSpace;

use tl_common::{device, f16_bytes, spec, values};

const N: usize = 32;
const PE0: PeCoord = PeCoord {
    sip: 0,
    cube: 0,
    pe: 0,
};
const PE1: PeCoord = PeCoord {
    sip: 0,
    cube: 0,
    pe: 1,
};

/// A ring over `pes` (rank i = `pes[i]`) with `params`, slots in TCM.
fn ring(device: &Device, pes: &[PeCoord], params: IpcqParams) -> Rc<IpcqNetwork> {
    let tables = Builtin::Ring1d.tables(pes.len(), None).unwrap();
    let wiring = Wiring::install(&tables).unwrap();
    install(device, &wiring, pes, BufferKind::Tcm, params).unwrap()
}

/// What a run ended with: the simulation's result and, if the host task
/// finished, the launch's.
type Outcome<T> = (
    Result<(), SimError>,
    Option<Result<LaunchReport<T>, LaunchError>>,
);

/// Runs `kernel` on SIP 0 over `grid` with `network`; the simulation's
/// result and the launch's.
fn run<T: 'static>(
    device: &Rc<Device>,
    network: &Rc<IpcqNetwork>,
    kernel: Kernel<u64, T>,
    grid: Grid,
    arg: u64,
) -> Outcome<T> {
    let mut simulation = Simulation::new();
    let (d, n) = (device.clone(), network.clone());
    let host = simulation.spawn("host", async move {
        launch_with_ipcq(&d, &kernel, (0, grid), arg, &n).await
    });
    let status = simulation.run().map(|_| ());
    (status, host.output().ok())
}

fn ok<T>(result: Outcome<T>) -> LaunchReport<T> {
    result.0.unwrap();
    result.1.unwrap().unwrap()
}

fn failure<T>(result: Outcome<T>) -> String {
    result.0.unwrap();
    match result.1.unwrap() {
        Ok(_) => panic!("the launch succeeded"),
        Err(error) => error.to_string(),
    }
}

/// `n` f16 values of `seed` written at a fresh HBM tile of cube 0.
fn tile(device: &Device, seed: u64) -> (u64, Vec<u8>) {
    let bytes = f16_bytes(&values(N, seed));
    let addr = device
        .alloc(MemSpace::Hbm { sip: 0, cube: 0 }, bytes.len() as u64)
        .unwrap();
    device.write_untimed("host", addr, &bytes).unwrap();
    (addr, bytes)
}

/// Program start and end of `pe`'s `send`/`recv` section, as the kernel
/// returns them.
type Span = (SimTime, SimTime);

/// pe0 sends the tile at `src` east `sends` times; pe1 waits `delay`, then
/// receives them all from the west (return_slot).
fn exchange(sends: usize, delay: SimDuration) -> Kernel<u64, Vec<Span>> {
    Kernel::new("exchange", move |tl: Tl, src: u64| async move {
        let mut spans = Vec::new();
        let start = kernbench::sim::now();
        if tl.program_id(0) == 0 {
            let h = tl.view(src, &[N], DType::F16)?;
            for _ in 0..sends {
                tl.send(Dir::E, &h).await?;
                spans.push((start, kernbench::sim::now()));
            }
        } else {
            sleep(delay).await;
            for _ in 0..sends {
                tl.recv(Dir::W, &[N], DType::F16).await?;
                spans.push((start, kernbench::sim::now()));
            }
        }
        Ok::<_, KernelError>(spans)
    })
}

const TWO: Grid = Grid { pes: 2, cubes: 1 };

/// The uncontended time of one send pe0 → pe1's slot `slot`:
/// `dma_copy_formula(src → slot) + doorbell (header-only pe0 → pe1)`.
fn send_formula(device: &Device, src: u64, slot: u64) -> SimDuration {
    let f = device.fabric();
    let m = f.machine();
    let (pe0, pe1) = (m.pe(0, 0, 0).unwrap(), m.pe(0, 0, 1).unwrap());
    let issue = m.spec().pe().dma.issue_overhead;
    let copy = device
        .dma_copy_formula(issue, pe0, src, slot, (N * 2) as u64)
        .unwrap();
    let doorbell = f
        .send_formula(&f.router().find_path(pe0, pe1).unwrap(), 0)
        .unwrap();
    copy + doorbell
}

/// The credit's uncontended time pe1 → pe0 (header only).
fn credit_formula(device: &Device) -> SimDuration {
    let f = device.fabric();
    let m = f.machine();
    let (pe0, pe1) = (m.pe(0, 0, 0).unwrap(), m.pe(0, 0, 1).unwrap());
    f.send_formula(&f.router().find_path(pe1, pe0).unwrap(), 0)
        .unwrap()
}

#[test]
fn two_pes_exchange_a_tile_in_exactly_its_closed_form() {
    let device = device(&spec(&[]), DataMode::On);
    let network = ring(&device, &[PE0, PE1], IpcqParams::default());
    let (src, bytes) = tile(&device, 1);
    let report = ok(run(
        &device,
        &network,
        exchange(1, SimDuration::ZERO),
        TWO,
        src,
    ));
    let slot = network.slot_addrs(PE1, Dir::W).unwrap()[0];
    let formula = send_formula(&device, src, slot);
    let (send, recv) = (report.programs[0].output[0], report.programs[1].output[0]);
    assert_eq!(send.1 - send.0, formula);
    assert_eq!(
        recv.1 - recv.0,
        formula,
        "the slot is receivable when the doorbell lands"
    );
    assert_eq!(
        device.read_untimed(slot, bytes.len() as u64).unwrap(),
        bytes
    );
    assert!(device.oplog().verify(&device.store()).is_ok());
    let dump = pointer_dump(&network);
    assert!(
        dump.contains("ring sip0.cube0.pe1:W <- sip0.cube0.pe0 dir=E"),
        "{dump}"
    );
    assert!(
        dump.contains("my_tail=1 peer_head_cache=1; receiver my_head=1 peer_tail_cache=1"),
        "{dump}"
    );
}

#[test]
fn a_send_in_a_direction_not_installed_names_the_pe_and_the_direction() {
    let device = device(&spec(&[]), DataMode::On);
    let network = ring(&device, &[PE0, PE1], IpcqParams::default());
    let (src, _) = tile(&device, 2);
    let kernel = Kernel::new("north", |tl: Tl, src: u64| async move {
        let h = tl.view(src, &[N], DType::F16)?;
        tl.send(Dir::N, &h).await
    });
    let error = failure(run(
        &device,
        &network,
        kernel,
        Grid { pes: 1, cubes: 1 },
        src,
    ));
    assert!(
        error.contains("IpcqInvalidDirection: sip0.cube0.pe0 has no send ring in direction N"),
        "{error}"
    );
    assert!(error.contains("(installed: E, W)"), "{error}");
}

fn mismatch(strict: bool) -> Outcome<()> {
    let device = device(&spec(&[]), DataMode::On);
    let params = IpcqParams {
        strict_validation: strict,
        ..IpcqParams::default()
    };
    let network = ring(&device, &[PE0, PE1], params);
    let (src, _) = tile(&device, 3);
    let kernel = Kernel::new("mismatch", |tl: Tl, src: u64| async move {
        if tl.program_id(0) == 0 {
            tl.send(Dir::E, &tl.view(src, &[N], DType::F16)?).await
        } else {
            tl.recv(Dir::W, &[N / 2], DType::F32).await.map(|_| ())
        }
    });
    run(&device, &network, kernel, TWO, src)
}

#[test]
fn strict_validation_names_both_sides_of_a_mismatch() {
    let error = failure(mismatch(true));
    assert!(
        error.contains("sip0.cube0.pe0 sent dir=E shape [32] F16"),
        "{error}"
    );
    assert!(
        error.contains("sip0.cube0.pe1 receives dir=W shape [16] F32"),
        "{error}"
    );
    ok(mismatch(false));
}

#[test]
fn an_unmatched_send_is_a_deadlock_with_the_pointer_dump() {
    let device = device(&spec(&[]), DataMode::On);
    let params = IpcqParams {
        slots: 2,
        ..IpcqParams::default()
    };
    let network = ring(&device, &[PE0, PE1], params);
    let (src, _) = tile(&device, 4);
    let kernel = Kernel::new("unmatched", |tl: Tl, src: u64| async move {
        if tl.program_id(0) == 0 {
            let h = tl.view(src, &[N], DType::F16)?;
            for _ in 0..3 {
                tl.send(Dir::E, &h).await?;
            }
        }
        Ok(())
    });
    let (status, _) = run(&device, &network, kernel, TWO, src);
    let error = status.unwrap_err();
    assert!(matches!(error, SimError::Deadlock { .. }));
    let text = error.to_string();
    assert!(
        text.contains("send on IPCQ ring sip0.cube0.pe1:W <- sip0.cube0.pe0 dir=E"),
        "{text}"
    );
    assert!(
        text.contains("my_tail=2 peer_head_cache=0; receiver my_head=0 peer_tail_cache=2"),
        "{text}"
    );
}

#[test]
fn an_unmatched_recv_is_a_deadlock_naming_its_ring() {
    let device = device(&spec(&[]), DataMode::On);
    let network = ring(&device, &[PE0, PE1], IpcqParams::default());
    let kernel = Kernel::new("lonely", |tl: Tl, _: u64| async move {
        tl.recv(Dir::W, &[N], DType::F16).await.map(|_| ())
    });
    let (status, _) = run(&device, &network, kernel, Grid { pes: 1, cubes: 1 }, 0);
    let text = status.unwrap_err().to_string();
    assert!(
        text.contains("recv on IPCQ ring sip0.cube0.pe0:W <- sip0.cube0.pe1 dir=E"),
        "{text}"
    );
    assert!(text.contains("peer_tail_cache=0"), "{text}");
}

/// pe0's three sends into a 2-slot ring while pe1 starts receiving after
/// `DELAY`, with `fidelity`; the end of each send.
fn backpressure(
    mode: Backpressure,
    fidelity: &str,
) -> (Vec<Span>, SimDuration, SimDuration, SimDuration) {
    const DELAY: SimDuration = SimDuration::from_ps(5_000_000);
    let fidelity = format!("simulation.fidelity={fidelity}");
    let device = device(&spec(&[&fidelity]), DataMode::On);
    let params = IpcqParams {
        slots: 2,
        backpressure: mode,
        ..IpcqParams::default()
    };
    let network = ring(&device, &[PE0, PE1], params);
    let (src, _) = tile(&device, 5);
    let report = ok(run(&device, &network, exchange(3, DELAY), TWO, src));
    let slot = network.slot_addrs(PE1, Dir::W).unwrap()[0];
    let send = send_formula(&device, src, slot);
    (
        report.programs[0].output.clone(),
        DELAY,
        send,
        credit_formula(&device),
    )
}

/// In flow mode the credit is not a task: its landing instant is recorded
/// when it is sent (ADR-0022); the times are the same.
#[test]
fn the_third_send_into_two_slots_waits_for_a_credit() {
    for fidelity in ["packet", "flow"] {
        check_third_send_waits_for_a_credit(fidelity);
    }
}

fn check_third_send_waits_for_a_credit(fidelity: &str) {
    let (sleep_ends, delay, send, credit) = backpressure(Backpressure::Sleep, fidelity);
    let start = sleep_ends[0].0;
    let ends: Vec<SimDuration> = sleep_ends.iter().map(|s| s.1 - start).collect();
    assert_eq!(ends[0], send);
    assert_eq!(ends[1], send + send);
    // pe1's second recv releases slot 0 at DELAY; its credit lands after
    // `credit`, and the sleeping sender goes at once.
    assert_eq!(ends[2], delay + credit + send);

    let (poll_ends, _, _, _) = backpressure(Backpressure::Poll, fidelity);
    let poll = IpcqParams::DEFAULT_POLL_INTERVAL.as_ps();
    let blocked = (ends[1]).as_ps();
    let waited = (delay + credit).as_ps() - blocked;
    let tick = blocked + waited.div_ceil(poll) * poll;
    assert_eq!(
        (poll_ends[2].1 - poll_ends[2].0).as_ps(),
        tick + send.as_ps()
    );
    assert!(
        poll_ends[2].1 > sleep_ends[2].1,
        "polling lands on a later tick here"
    );
    assert_eq!(poll_ends[..2], sleep_ends[..2]);
}

#[test]
fn runs_are_deterministic() {
    for fidelity in ["packet", "flow"] {
        for mode in [Backpressure::Poll, Backpressure::Sleep] {
            assert_eq!(
                backpressure(mode, fidelity).0,
                backpressure(mode, fidelity).0
            );
        }
    }
}

#[test]
fn recv_into_moves_a_tile_across_cubes_over_ucie() {
    let device = device(&spec(&[]), DataMode::On);
    let (a, b) = (
        PE0,
        PeCoord {
            sip: 0,
            cube: 1,
            pe: 0,
        },
    );
    let network = ring(&device, &[a, b], IpcqParams::default());
    let (src, bytes) = tile(&device, 6);
    let dst = device
        .alloc(MemSpace::Hbm { sip: 0, cube: 1 }, bytes.len() as u64)
        .unwrap();
    let kernel = Kernel::new("ucie", move |tl: Tl, src: u64| async move {
        if tl.program_id(1) == 0 {
            tl.send(Dir::E, &tl.view(src, &[N], DType::F16)?).await
        } else {
            let h = tl.recv_into(Dir::W, &[N], DType::F16, dst).await?;
            assert_eq!(h.addr(), dst);
            Ok(())
        }
    });
    ok(run(
        &device,
        &network,
        kernel,
        Grid { pes: 1, cubes: 2 },
        src,
    ));
    assert_eq!(device.read_untimed(dst, bytes.len() as u64).unwrap(), bytes);
    assert!(device.oplog().verify(&device.store()).is_ok());
    assert!(
        pointer_dump(&network).contains("sender my_tail=1 peer_head_cache=1; receiver my_head=1")
    );
}

#[test]
fn global_east_crosses_to_the_next_sip() {
    let spec = spec(&[]);
    let device = device(&spec, DataMode::On);
    let world = WorldShape::new(&spec, 2, Builtin::None, None).unwrap();
    let endpoints = Endpoints::intercube(&world).unwrap();
    let params = IpcqParams::default();
    let network = install_endpoints(&device, &endpoints, BufferKind::Hbm, params).unwrap();
    let (src, bytes) = tile(&device, 7);
    let dst = device
        .alloc(MemSpace::Hbm { sip: 1, cube: 0 }, bytes.len() as u64)
        .unwrap();
    let kernel = Kernel::new("global", move |tl: Tl, src: u64| async move {
        if tl.coord().sip == 0 {
            tl.send(Dir::GlobalE, &tl.view(src, &[N], DType::F16)?)
                .await
        } else {
            tl.recv_into(Dir::GlobalW, &[N], DType::F16, dst)
                .await
                .map(|_| ())
        }
    });
    let mut simulation = Simulation::new();
    let one = Grid { pes: 1, cubes: 1 };
    let hosts: Vec<_> = (0..2)
        .map(|sip| {
            let (d, n, k) = (device.clone(), network.clone(), kernel.clone());
            simulation.spawn(&format!("rank{sip}"), async move {
                launch_with_ipcq(&d, &k, (sip, one), src, &n)
                    .await
                    .map(|_| ())
            })
        })
        .collect();
    simulation.run().unwrap();
    for host in hosts {
        host.output().unwrap().unwrap();
    }
    assert_eq!(device.read_untimed(dst, bytes.len() as u64).unwrap(), bytes);
    assert!(device.oplog().verify(&device.store()).is_ok());
}

#[test]
fn recv_any_and_recv_async_take_every_direction() {
    let device = device(&spec(&[]), DataMode::On);
    let pe2 = PeCoord {
        sip: 0,
        cube: 0,
        pe: 2,
    };
    let network = ring(&device, &[PE0, PE1, pe2], IpcqParams::default());
    let (src, _) = tile(&device, 8);
    let kernel = Kernel::new("any", |tl: Tl, src: u64| async move {
        let h = tl.view(src, &[N], DType::F16)?;
        let mut got = Vec::new();
        match tl.program_id(0) {
            0 => tl.send(Dir::E, &h).await?,
            2 => {
                tl.send(Dir::W, &h).await?;
                tl.send(Dir::W, &h).await?;
                tl.send(Dir::W, &h).await?;
            }
            _ => {
                for _ in 0..2 {
                    got.push(tl.recv_any(&[N], DType::F16).await?.0);
                }
                let first = tl.recv_async(Dir::E, &[N], DType::F16);
                let second = tl.recv_async(Dir::E, &[N], DType::F16);
                let b = tl.wait(second).await?;
                let a = tl.wait(first).await?;
                assert_ne!(a.addr(), b.addr(), "two slots held at once");
                tl.release(&a)?;
                assert!(tl.release(&a).is_err(), "a slot is released once");
            }
        }
        Ok::<_, KernelError>(got)
    });
    let report = ok(run(
        &device,
        &network,
        kernel,
        Grid { pes: 3, cubes: 1 },
        src,
    ));
    let mut dirs = report.programs[1].output.clone();
    dirs.sort();
    assert_eq!(dirs, [Dir::E, Dir::W]);
    let dump = pointer_dump(&network);
    assert!(dump.contains("ring sip0.cube0.pe1:E <- sip0.cube0.pe2 dir=W [4 x 65536 B in sip0.cube0.pe1.tcm]: sender my_tail=3 peer_head_cache=3; receiver my_head=3 peer_tail_cache=3"), "{dump}");
}

/// pe0 of cube 0 sends `n` f16 values to pe0 of cube 1 through slots of
/// `slot_bytes` (`slots` of them); cube 1 receives with `recv_into` (or
/// `recv` when `into` is false). The launch's end, the destination bytes
/// and the pointer dump; or the error.
fn segmented(
    n: usize,
    slot_bytes: u64,
    slots: usize,
    into: bool,
) -> Result<(SimDuration, Vec<u8>, Vec<u8>, String), String> {
    let device = device(&spec(&[]), DataMode::On);
    let b = PeCoord {
        sip: 0,
        cube: 1,
        pe: 0,
    };
    let params = IpcqParams {
        slots,
        slot_bytes,
        ..IpcqParams::default()
    };
    let network = ring(&device, &[PE0, b], params);
    let bytes = f16_bytes(&values(n, 9));
    let hbm = |cube| MemSpace::Hbm { sip: 0, cube };
    let src = device.alloc(hbm(0), bytes.len() as u64).unwrap();
    device.write_untimed("host", src, &bytes).unwrap();
    let dst = device.alloc(hbm(1), bytes.len() as u64).unwrap();
    let kernel = Kernel::new("segments", move |tl: Tl, src: u64| async move {
        if tl.program_id(1) == 0 {
            tl.send(Dir::E, &tl.view(src, &[n], DType::F16)?).await
        } else if into {
            tl.recv_into(Dir::W, &[n], DType::F16, dst).await.map(drop)
        } else {
            tl.recv(Dir::W, &[n], DType::F16).await.map(drop)
        }
    });
    let (status, launch) = run(&device, &network, kernel, Grid { pes: 1, cubes: 2 }, src);
    status.map_err(|e| e.to_string())?;
    let report = launch.unwrap().map_err(|e| e.to_string())?;
    let received = device.read_untimed(dst, bytes.len() as u64).unwrap();
    assert!(device.oplog().verify(&device.store()).is_ok());
    Ok((
        report.end - SimTime::ZERO,
        bytes,
        received,
        pointer_dump(&network),
    ))
}

#[test]
fn a_message_larger_than_a_slot_travels_in_segments_in_order() {
    // 1000 f16 = 2000 B through 256 B slots: 8 segments (7 full, 208 B).
    let (_, sent, received, dump) = segmented(1000, 256, 2, true).unwrap();
    assert_eq!(received, sent);
    assert!(
        dump.contains("sender my_tail=8 peer_head_cache=8; receiver my_head=8"),
        "{dump}"
    );
}

#[test]
fn more_slots_pipeline_the_segments() {
    let time = |slots| segmented(4096, 1024, slots, true).unwrap().0;
    let (one, four) = (time(1), time(4));
    assert!(four < one, "4 slots {four:?} vs 1 slot {one:?}");
}

#[test]
fn a_recv_of_a_segmented_message_names_recv_into_and_the_keys() {
    let error = segmented(1000, 256, 2, false).unwrap_err();
    for part in [
        "2000 B does not fit a 256 B slot",
        "recv_into",
        "ipcq.slot_size",
    ] {
        assert!(error.contains(part), "{error}");
    }
}
