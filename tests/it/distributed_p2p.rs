//! `torch.distributed.send` / `recv` between ranks (issue 9 item 4,
//! ADR-0019): the receiver's tiles end with the sender's bits on a torus
//! and a ring, between neighbours and not; a ring exchange with `isend`
//! does not deadlock; sends between one pair meet their recvs in order; an
//! uncontended send takes its closed form (to the picosecond for one
//! piece) and never less than the route allows; misuse is a typed error and
//! an unmatched send a deadlock report naming it.
//!
//! `gather` / `scatter`, made of the same puts (ADR-0020): every block
//! lands bitwise where torch puts it, for the root 0 and another, on a
//! torus and a ring; the root takes at least its slowest put's closed form
//! and less than all of them in turn; a bad root, a list on the wrong rank,
//! a block of the wrong size or dtype are typed errors naming both ranks
//! and tensors; a rank that never calls is a deadlock report naming it.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use kernbench::ccl::CclConfig;
use kernbench::config::Overrides;
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::launch::dispatch_cost;
use kernbench::runtime::{DPPolicy, DistError, RankError, Split, Tensor, Torch, spawn};
use kernbench::sim::{self, SimDuration, SimError, Simulation};
use kernbench::tl::Grid;
use kernbench::topology::{Machine, TopologySpec};
use ndarray::Array2;

const TORUS_4: &[&str] = &[
    "system.sips.count=4",
    "system.sips.topology=torus_2d",
    "sip.cube_mesh.w=2",
    "sip.cube_mesh.h=1",
];
const RING_5: &[&str] = &[
    "system.sips.count=5",
    "sip.cube_mesh.w=2",
    "sip.cube_mesh.h=1",
];
/// Two SIPs of one cube: one route, nothing shared.
const ONE_CUBE: &[&str] = &["sip.cube_mesh.w=1", "sip.cube_mesh.h=1"];

/// Elements per cube tile.
const N: usize = 1000;

/// The process group of the default machine with `sets` (`ccl.` keys
/// address ccl.yaml), data on.
fn torch(sets: &[&str]) -> Torch {
    let overrides = Overrides::parse(sets).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology).unwrap();
    let ccl = CclConfig::load(&CclConfig::default_source(), &overrides.ccl).unwrap();
    let machine = Arc::new(Machine::build(&spec).unwrap());
    let device = Device::from_machine(machine, DataMode::On).unwrap();
    let torch = Torch::with_ccl(device, ccl);
    torch.distributed.init_process_group("ahbm").unwrap();
    torch
}

fn cubes(torch: &Torch) -> usize {
    torch.device().fabric().machine().cubes_per_sip() as usize
}

fn world(torch: &Torch) -> usize {
    torch.distributed.get_world_size().unwrap()
}

/// Runs `worker(torch, rank)` on every rank of a fresh simulation.
fn run<W, Fut>(torch: &Torch, worker: W) -> Result<Result<(), RankError<DistError>>, SimError>
where
    W: Fn(Torch, usize) -> Fut + 'static,
    Fut: Future<Output = Result<(), DistError>> + 'static,
{
    let (ranks, host) = (world(torch), torch.clone());
    let mut simulation = Simulation::new();
    let driver = simulation.spawn("driver", async move {
        spawn(ranks, move |rank| worker(host.clone(), rank)).await
    });
    simulation.run()?;
    Ok(driver.output().unwrap().map(drop))
}

/// Each rank's own result of `worker` by rank (kept even when the rank
/// fails).
fn results<W, Fut, T>(torch: &Torch, worker: W) -> Vec<(usize, Result<T, DistError>)>
where
    W: Fn(Torch, usize) -> Fut + 'static,
    Fut: Future<Output = Result<T, DistError>> + 'static,
    T: 'static,
{
    let kept = Rc::new(RefCell::new(Vec::new()));
    let keep = kept.clone();
    let worker = Rc::new(worker);
    run(torch, move |torch, rank| {
        let (keep, worker) = (keep.clone(), worker.clone());
        async move {
            let result = worker(torch, rank).await;
            keep.borrow_mut().push((rank, result));
            Ok(())
        }
    })
    .unwrap()
    .unwrap();
    let mut kept = kept.take();
    kept.sort_by_key(|(rank, _)| *rank);
    kept
}

/// Seeded pseudo-random f32 in `[-1, 1)` (splitmix64), one row of `n` per
/// cube.
fn random(seed: u64, cubes: usize, n: usize) -> Array2<f32> {
    let mut state = seed;
    Array2::from_shape_simple_fn((cubes, n), || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    })
}

/// One tile of `n` elements of `dtype` per cube of the calling rank's SIP.
fn tiles(torch: &Torch, name: &str, n: usize, dtype: DType) -> Result<Tensor, DistError> {
    let cubes = cubes(torch);
    let dp = DPPolicy::new(Split::RowWise, Split::Replicate, cubes as u32, 1);
    Ok(torch.zeros(&[cubes, n], dtype, &dp)?.named(name))
}

/// One f32 tile of [`N`] elements per cube.
fn tile_per_cube(torch: &Torch, name: &str) -> Result<Tensor, DistError> {
    tiles(torch, name, N, DType::F32)
}

async fn filled(torch: &Torch, name: &str, seed: u64) -> Result<Tensor, DistError> {
    let tensor = tile_per_cube(torch, name)?;
    tensor.copy_from(&random(seed, cubes(torch), N)).await?;
    Ok(tensor)
}

async fn bits(tensor: &Tensor) -> Vec<u32> {
    let values = tensor.to_ndarray::<f32>().await.unwrap().unwrap();
    values.iter().map(|v| v.to_bits()).collect()
}

fn expected_bits(seed: u64, cubes: usize) -> Vec<u32> {
    random(seed, cubes, N).iter().map(|v| v.to_bits()).collect()
}

/// Rank 0 sends to rank 2; rank 2's tensor ends with rank 0's bits, the
/// others are untouched.
fn send_zero_to_two(sets: &[&str]) {
    let torch = torch(sets);
    let held = results(&torch, |torch, rank| async move {
        let dist = &torch.distributed;
        let t = filled(&torch, "t", 10 + rank as u64).await?;
        match rank {
            0 => dist.send(&t, 2).await?,
            2 => dist.recv(&t, 0).await?,
            _ => {}
        }
        Ok(bits(&t).await)
    });
    assert_eq!(held.len(), world(&torch));
    for (rank, got) in held {
        let source = if rank == 2 { 10 } else { 10 + rank as u64 };
        assert!(
            got.unwrap() == expected_bits(source, cubes(&torch)),
            "{sets:?}: rank {rank}"
        );
    }
}

#[test]
fn a_send_lands_bitwise_on_a_torus_and_over_two_ring_hops() {
    send_zero_to_two(TORUS_4);
    send_zero_to_two(RING_5);
}

/// Every rank sends to `rank + 1` and receives from `rank - 1`: `isend`
/// first, then `recv`, then `wait` (a blocking send first would wait for
/// a recv nobody has posted yet, as in torch).
fn ring_exchange(sets: &[&str]) {
    let torch = torch(sets);
    let n = world(&torch);
    let held = results(&torch, move |torch, rank| async move {
        let dist = &torch.distributed;
        let mine = filled(&torch, "mine", 100 + rank as u64).await?;
        let theirs = tile_per_cube(&torch, "theirs")?;
        let sent = dist.isend(&mine, (rank + 1) % n)?;
        dist.recv(&theirs, (rank + n - 1) % n).await?;
        sent.wait().await?;
        Ok(bits(&theirs).await)
    });
    assert_eq!(held.len(), n);
    for (rank, got) in held {
        let west = (rank + n - 1) % n;
        let want = expected_bits(100 + west as u64, cubes(&torch));
        assert!(
            got.unwrap() == want,
            "{sets:?}: rank {rank} holds rank {west}'s data"
        );
    }
}

#[test]
fn a_ring_exchange_with_isend_completes_on_a_torus_and_a_ring() {
    ring_exchange(TORUS_4);
    ring_exchange(RING_5);
}

#[test]
fn sends_between_one_pair_meet_their_recvs_in_order() {
    let torch = torch(RING_5);
    let held = results(&torch, |torch, rank| async move {
        let dist = &torch.distributed;
        match rank {
            1 => {
                let (a, b) = (filled(&torch, "a", 1).await?, filled(&torch, "b", 2).await?);
                let first = dist.isend(&a, 4)?;
                let second = dist.isend(&b, 4)?;
                first.wait().await?;
                second.wait().await?;
                Ok(vec![])
            }
            4 => {
                let (x, y) = (tile_per_cube(&torch, "x")?, tile_per_cube(&torch, "y")?);
                // `y` is posted first, so it takes the first send.
                let first = dist.irecv(&y, 1)?;
                dist.recv(&x, 1).await?;
                first.wait().await?;
                Ok(vec![bits(&y).await, bits(&x).await])
            }
            _ => Ok(vec![]),
        }
    });
    let cubes = cubes(&torch);
    let (_, received) = held.into_iter().nth(4).unwrap();
    let received = received.unwrap();
    assert!(
        received[0] == expected_bits(1, cubes),
        "the first recv took the first send"
    );
    assert!(
        received[1] == expected_bits(2, cubes),
        "the second recv took the second send"
    );
}

/// What rank 0's `send` of one f32 tile of `n` elements per cube to rank 1
/// took (from the call to its return, rank 1's `irecv` posted before),
/// with both tiles' device addresses and the algorithm's model.
struct Timed {
    took: SimDuration,
    src: u64,
    dst: u64,
    model: SimDuration,
}

fn timed_send(torch: &Torch, n: usize) -> Timed {
    let held = results(torch, move |torch, rank| async move {
        let dist = &torch.distributed;
        let t = tiles(&torch, "t", n, DType::F32)?;
        let addr = t.shards()?[0].addr;
        if rank == 1 {
            let work = dist.irecv(&t, 0)?;
            dist.barrier().await?;
            work.wait().await?;
            return Ok((SimDuration::ZERO, addr, None));
        }
        dist.barrier().await?;
        let start = sim::now();
        dist.send(&t, 1).await?;
        Ok((sim::now() - start, addr, dist.send_model(&t, 1)?))
    });
    let [(_, sender), (_, receiver)] = <[_; 2]>::try_from(held).ok().unwrap();
    let ((took, src, model), (_, dst, _)) = (sender.unwrap(), receiver.unwrap());
    Timed {
        took,
        src,
        dst,
        model: model.expect("p2p_copy states a model"),
    }
}

#[test]
fn an_uncontended_send_takes_its_closed_form() {
    let torch = torch(ONE_CUBE);
    let device = torch.device().clone();
    let machine = device.fabric().machine().clone();
    let spec = machine.spec();
    let bytes = (N * 4) as u64;
    let timed = timed_send(&torch, N);
    // One piece: the launch around one PE_DMA copy from the sender's HBM to
    // the receiver's.
    let pe = machine.pe(0, 0, 0).unwrap();
    let copy = device
        .dma_copy_formula(
            spec.pe().dma.issue_overhead,
            pe,
            timed.src,
            timed.dst,
            bytes,
        )
        .unwrap();
    let cost = dispatch_cost(&device, 0, Grid { pes: 1, cubes: 1 }).unwrap();
    assert_eq!(timed.took, cost.launch_time(&[copy]).unwrap());
    // Never less than the route allows: the launch's fixed overheads, the
    // DMA's issue, the inter-SIP hop's latency and the bytes at the
    // route's narrowest link (a NoC link or the inter-SIP link).
    let noc = &spec.cube().noc;
    let ppm = |f: kernbench::config::units::Fraction| f64::from(f.ppm()) / 1e6;
    let noc_bps = (noc.link_width.get().bytes() * noc.clock.hz()) as f64 * ppm(noc.efficiency);
    let link = &spec.system().inter_sip;
    let sip_bps = link.bandwidth.bytes_per_sec() as f64 * ppm(link.efficiency);
    let serialise = |bytes: u64| bytes as f64 / noc_bps.min(sip_bps) * 1e12;
    let overheads = [
        spec.system().host.kernel_launch_overhead,
        spec.sip().io_cpu.dispatch_overhead,
        spec.cube().mcpu.dispatch_overhead,
        spec.pe().dma.issue_overhead,
        link.latency,
    ];
    let fixed: u64 = overheads.iter().map(|d| d.as_ps()).sum();
    let bound = fixed as f64 + serialise(bytes);
    assert!(
        timed.took.as_ps() as f64 >= bound,
        "{:?} < {bound}",
        timed.took
    );
    // The model is the route's α-β: at least its hop and its bytes, at
    // most the copy itself.
    assert!(timed.model.as_ps() as f64 >= link.latency.as_ps() as f64 + serialise(bytes));
    assert!(timed.model <= copy, "{:?} > {copy:?}", timed.model);
}

#[test]
fn one_piece_of_any_size_is_one_dma() {
    // 256 KiB in one piece, four times the IPCQ slot p2p_copy does not use.
    let sets = [ONE_CUBE, &["ccl.algorithms.p2p_copy.params.piece=256 KiB"]].concat();
    let torch = torch(&sets);
    let device = torch.device().clone();
    let n = 64 * 1024;
    let timed = timed_send(&torch, n);
    let machine = device.fabric().machine();
    let issue = machine.spec().pe().dma.issue_overhead;
    let pe = machine.pe(0, 0, 0).unwrap();
    let copy = device
        .dma_copy_formula(issue, pe, timed.src, timed.dst, (n * 4) as u64)
        .unwrap();
    let cost = dispatch_cost(&device, 0, Grid { pes: 1, cubes: 1 }).unwrap();
    assert_eq!(timed.took, cost.launch_time(&[copy]).unwrap());
}

#[test]
fn a_tile_of_many_pieces_overlaps_them() {
    let torch = torch(ONE_CUBE);
    let device = torch.device().clone();
    let spec = device.fabric().machine().spec().clone();
    // Four 64 KiB pieces.
    let n = 4 * 16 * 1024;
    let timed = timed_send(&torch, n);
    let cost = dispatch_cost(&device, 0, Grid { pes: 1, cubes: 1 }).unwrap();
    let fixed = cost.launch_time(&[SimDuration::ZERO]).unwrap();
    let kernel = SimDuration::from_ps(timed.took.as_ps() - fixed.as_ps());
    let pe = device.fabric().machine().pe(0, 0, 0).unwrap();
    let piece = device
        .dma_copy_formula(
            spec.pe().dma.issue_overhead,
            pe,
            timed.src,
            timed.dst,
            64 * 1024,
        )
        .unwrap();
    assert!(
        kernel.as_ps() < 4 * piece.as_ps(),
        "pieces overlap: {kernel:?}"
    );
    assert!(
        kernel >= timed.model,
        "the model bounds it: {:?}",
        timed.model
    );
}

#[test]
fn peers_outside_the_world_or_the_rank_itself_are_refused() {
    let torch = torch(TORUS_4);
    let errors = results(&torch, |torch, rank| async move {
        let t = tile_per_cube(&torch, "t")?;
        let dist = &torch.distributed;
        match rank {
            0 => dist.send(&t, 4).await,
            1 => dist.recv(&t, 1).await,
            2 => dist.isend(&t, 2).map(drop),
            _ => dist.irecv(&t, 7).map(drop),
        }
    });
    let messages: Vec<_> = errors
        .into_iter()
        .map(|(_, result)| result.unwrap_err().to_string())
        .collect();
    assert_eq!(
        messages,
        [
            "dist.send on rank 0: rank 4 does not exist (the world has ranks 0 to 3)",
            "dist.recv on rank 1: the peer is rank 1 itself (send and recv need two ranks)",
            "dist.isend on rank 2: the peer is rank 2 itself (send and recv need two ranks)",
            "dist.irecv on rank 3: rank 7 does not exist (the world has ranks 0 to 3)",
        ]
    );
}

#[test]
fn a_send_and_recv_of_different_tiles_fail_on_both_sides() {
    let torch = torch(TORUS_4);
    let errors = results(&torch, |torch, rank| async move {
        let dist = &torch.distributed;
        match rank {
            0 => dist.send(&tiles(&torch, "grad", N, DType::F32)?, 3).await,
            3 => {
                dist.recv(&tiles(&torch, "buf", N * 2, DType::F16)?, 0)
                    .await
            }
            _ => Ok(()),
        }
    });
    let want = "send from rank 0 to rank 3 does not match its recv: the sent tensor `grad` has \
                cube tiles of 1000 f32 elements, the receiving tensor `buf` of 2000 f16 \
                (send and recv need the same tile size and dtype)";
    for (rank, result) in errors {
        match rank {
            0 | 3 => assert_eq!(result.unwrap_err().to_string(), want, "rank {rank}"),
            _ => result.unwrap(),
        }
    }
}

/// What the run's deadlock report lists when rank 1 alone calls
/// `send(dst = 2)` (`send`) or `recv(src = 2)`.
fn unmatched(send: bool) -> Vec<String> {
    let torch = torch(TORUS_4);
    let outcome = run(&torch, move |torch, rank| async move {
        let dist = &torch.distributed;
        match (rank, send) {
            (1, true) => dist.send(&tile_per_cube(&torch, "t")?, 2).await,
            (1, false) => dist.recv(&tile_per_cube(&torch, "t")?, 2).await,
            _ => Ok(()),
        }
    });
    let Err(SimError::Deadlock { blocked, .. }) = outcome else {
        panic!("a call nobody matches cannot complete");
    };
    blocked.iter().map(|b| b.to_string()).collect()
}

#[test]
fn an_unmatched_send_or_recv_ends_the_run_in_a_deadlock_naming_it() {
    let send = "task \"rank1\" waits on wait on event \"dist.send #0 from rank 1 to rank 2: no \
                matching recv(src=1) on rank 2\" (not set)";
    let waits = unmatched(true);
    assert!(waits.iter().any(|w| w == send), "{waits:#?}");
    let recv = "task \"rank1\" waits on wait on event \"dist.recv #0 on rank 1 from rank 2: no \
                matching send(dst=1) from rank 2\" (not set)";
    let waits = unmatched(false);
    assert!(waits.iter().any(|w| w == recv), "{waits:#?}");
}

/// One f32 list tile of `world × N` elements per cube (one block per rank).
fn list_per_cube(torch: &Torch, name: &str) -> Result<Tensor, DistError> {
    tiles(torch, name, world(torch) * N, DType::F32)
}

/// Row `c` of the root's list after a gather: every rank's row `c`, in
/// rank order (rank `r` filled with seed `seed + r`).
fn gathered_bits(seed: u64, cubes: usize, world: usize) -> Vec<u32> {
    let rows: Vec<_> = (0..world)
        .map(|r| random(seed + r as u64, cubes, N))
        .collect();
    let row = |c: usize| rows.iter().flat_map(move |a| a.row(c).to_vec());
    (0..cubes).flat_map(row).map(f32::to_bits).collect()
}

/// Every rank gathers its tensor (seed `20 + rank`) to `root`.
fn gather_to(sets: &[&str], root: usize) {
    let torch = torch(sets);
    let held = results(&torch, move |torch, rank| async move {
        let dist = &torch.distributed;
        let mine = filled(&torch, "mine", 20 + rank as u64).await?;
        let list = list_per_cube(&torch, "list")?;
        let list_arg = (rank == root).then_some(&list);
        dist.gather(&mine, list_arg, root).await?;
        Ok((bits(&list).await, bits(&mine).await))
    });
    let (cubes, n) = (cubes(&torch), world(&torch));
    assert_eq!(held.len(), n);
    for (rank, got) in held {
        let (list, mine) = got.unwrap();
        assert!(mine == expected_bits(20 + rank as u64, cubes), "{sets:?}");
        let want = match rank == root {
            true => gathered_bits(20, cubes, n),
            false => vec![0; cubes * n * N],
        };
        assert!(list == want, "{sets:?}: rank {rank}'s list, root {root}");
    }
}

#[test]
fn a_gather_lands_every_rank_in_rank_order_on_a_torus_and_a_ring() {
    gather_to(TORUS_4, 0);
    gather_to(TORUS_4, 3);
    gather_to(RING_5, 0);
    gather_to(RING_5, 2);
}

/// `root` scatters its list (seed 77); every rank receives its block.
fn scatter_from(sets: &[&str], root: usize) {
    let torch = torch(sets);
    let held = results(&torch, move |torch, rank| async move {
        let dist = &torch.distributed;
        let mine = tile_per_cube(&torch, "mine")?;
        let list = list_per_cube(&torch, "list")?;
        list.copy_from(&random(77, cubes(&torch), world(&torch) * N))
            .await?;
        let list_arg = (rank == root).then_some(&list);
        dist.scatter(&mine, list_arg, root).await?;
        Ok(bits(&mine).await)
    });
    let (cubes, n) = (cubes(&torch), world(&torch));
    let list = random(77, cubes, n * N);
    for (rank, got) in held {
        let block =
            (0..cubes).flat_map(|c| list.row(c).to_vec()[rank * N..(rank + 1) * N].to_vec());
        let want: Vec<u32> = block.map(f32::to_bits).collect();
        assert!(got.unwrap() == want, "{sets:?}: rank {rank}, root {root}");
    }
}

#[test]
fn a_scatter_lands_block_r_on_rank_r_on_a_torus_and_a_ring() {
    scatter_from(TORUS_4, 0);
    scatter_from(TORUS_4, 1);
    scatter_from(RING_5, 0);
    scatter_from(RING_5, 4);
}

/// Three SIPs of one cube on a ring: every put has one route.
const RING_3_ONE_CUBE: &[&str] = &[
    "system.sips.count=3",
    "sip.cube_mesh.w=1",
    "sip.cube_mesh.h=1",
];

/// The uncontended time of one put of `n` f32 elements launched on `sip`
/// from `src` to `dst` (one cube): the launch around one PE_DMA copy.
fn put_formula(torch: &Torch, sip: u32, (src, dst): (u64, u64), n: usize) -> SimDuration {
    let device = torch.device();
    let machine = device.fabric().machine();
    let issue = machine.spec().pe().dma.issue_overhead;
    let pe = machine.pe(sip, 0, 0).unwrap();
    let copy = device
        .dma_copy_formula(issue, pe, src, dst, (n * 4) as u64)
        .unwrap();
    let cost = dispatch_cost(device, sip, Grid { pes: 1, cubes: 1 }).unwrap();
    cost.launch_time(&[copy]).unwrap()
}

/// What `root`'s rooted call took from the barrier, with every rank's
/// tile address and the root's list address.
fn timed_rooted(torch: &Torch, scatter: bool, root: usize) -> (SimDuration, Vec<u64>, u64) {
    let held = results(torch, move |torch, rank| async move {
        let dist = &torch.distributed;
        let mine = tile_per_cube(&torch, "mine")?;
        let list = list_per_cube(&torch, "list")?;
        let list_arg = (rank == root).then_some(&list);
        dist.barrier().await?;
        let start = sim::now();
        match scatter {
            true => dist.scatter(&mine, list_arg, root).await?,
            false => dist.gather(&mine, list_arg, root).await?,
        }
        let took = sim::now() - start;
        Ok((took, mine.shards()?[0].addr, list.shards()?[0].addr))
    });
    let held: Vec<_> = held.into_iter().map(|(_, r)| r.unwrap()).collect();
    let (took, _, list) = held[root];
    (took, held.iter().map(|h| h.1).collect(), list)
}

#[test]
fn a_rooted_call_takes_at_least_its_slowest_put_and_runs_them_at_once() {
    let root = 1;
    let block = |r: usize| (r * N * 4) as u64;
    for scatter in [false, true] {
        let torch = torch(RING_3_ONE_CUBE);
        let (took, tiles, list) = timed_rooted(&torch, scatter, root);
        // Each put alone: gather's rank r launches on its SIP from its
        // tile into block r of the root's list; scatter's root launches on
        // its SIP from block r into rank r's tile (the root's own block
        // too, a copy inside its HBM).
        let puts: Vec<_> = (0..tiles.len())
            .map(|r| {
                let (sip, pair) = match scatter {
                    false => (r, (tiles[r], list + block(r))),
                    true => (root, (list + block(r), tiles[r])),
                };
                put_formula(&torch, sip as u32, pair, N)
            })
            .collect();
        let slowest = puts.iter().copied().max().unwrap();
        let in_turn: u64 = puts.iter().map(|p| p.as_ps()).sum();
        assert!(took >= slowest, "scatter {scatter}: {took:?} < {slowest:?}");
        assert!(
            took.as_ps() < in_turn,
            "scatter {scatter}: the puts overlap: {took:?} vs {in_turn} ps in turn"
        );
    }
}

#[test]
fn rooted_calls_refuse_a_bad_root_and_a_list_on_the_wrong_rank() {
    let torch = torch(TORUS_4);
    let errors = results(&torch, |torch, rank| async move {
        let dist = &torch.distributed;
        let (mine, list) = (tile_per_cube(&torch, "t")?, list_per_cube(&torch, "l")?);
        match rank {
            0 => dist.gather(&mine, Some(&list), 4).await,
            1 => dist.scatter(&mine, None, 1).await,
            2 => dist.gather(&mine, Some(&list), 0).await,
            _ => dist.scatter(&mine, Some(&list), 9).await,
        }
    });
    let messages: Vec<_> = errors
        .into_iter()
        .map(|(_, result)| result.unwrap_err().to_string())
        .collect();
    assert_eq!(
        messages,
        [
            "dist.gather on rank 0: rank 4 does not exist (the world has ranks 0 to 3)",
            "dist.scatter on the root rank 1: scatter_list is missing (the root passes a tensor \
             whose cube tiles hold one block per rank)",
            "dist.gather on rank 2: gather_list is given, but only the root rank 0 takes one \
             (pass None)",
            "dist.scatter on rank 3: rank 9 does not exist (the world has ranks 0 to 3)",
        ]
    );
}

#[test]
fn a_block_of_another_size_or_dtype_fails_the_rank_and_the_root() {
    let torch = torch(TORUS_4);
    // Rank 2's tensor is f16 of twice the elements: it and the gathering
    // root fail, naming both; the others land.
    let errors = results(&torch, |torch, rank| async move {
        let dist = &torch.distributed;
        let mine = match rank {
            2 => tiles(&torch, "grad", 2 * N, DType::F16)?,
            _ => tile_per_cube(&torch, "grad")?,
        };
        let list = list_per_cube(&torch, "all")?;
        dist.gather(&mine, (rank == 0).then_some(&list), 0).await
    });
    let want = "dist.gather: rank 2's tensor `grad` has cube tiles of 2000 f16 elements, but the \
                root rank 0's gather_list `all` has cube tiles of 4000 f32 (it needs 4 blocks \
                of 2000 f16, one per rank: 8000 elements)";
    for (rank, result) in errors {
        match rank {
            0 | 2 => assert_eq!(result.unwrap_err().to_string(), want, "rank {rank}"),
            _ => result.unwrap(),
        }
    }
    // The root's own list of the wrong size fails the root at the call.
    let torch = self::torch(TORUS_4);
    let errors = results(&torch, |torch, rank| async move {
        let dist = &torch.distributed;
        let mine = tile_per_cube(&torch, "out")?;
        let list = tiles(&torch, "parts", 3 * N, DType::F32)?;
        match rank {
            1 => dist.scatter(&mine, Some(&list), 1).await,
            _ => Ok(()),
        }
    });
    let want = "dist.scatter: rank 1's tensor `out` has cube tiles of 1000 f32 elements, but the \
                root rank 1's scatter_list `parts` has cube tiles of 3000 f32 (it needs 4 blocks \
                of 1000 f32, one per rank: 4000 elements)";
    let (_, result) = &errors[1];
    assert_eq!(result.as_ref().unwrap_err().to_string(), want);
}

#[test]
fn a_rank_that_never_calls_is_a_deadlock_naming_it() {
    let waits = |scatter: bool| {
        let torch = torch(TORUS_4);
        let outcome = run(&torch, move |torch, rank| async move {
            let dist = &torch.distributed;
            let (mine, list) = (tile_per_cube(&torch, "t")?, list_per_cube(&torch, "l")?);
            match (rank, scatter) {
                (0, false) => dist.gather(&mine, Some(&list), 0).await,
                (2, true) => dist.scatter(&mine, None, 0).await,
                _ => Ok(()),
            }
        });
        let Err(SimError::Deadlock { blocked, .. }) = outcome else {
            panic!("a rooted call whose peers never come cannot complete");
        };
        blocked.iter().map(|b| b.to_string()).collect::<Vec<_>>()
    };
    let gather = "dist.gather #0 on the root rank 0: rank 3 has not called gather(dst=0)";
    let got = waits(false);
    assert!(got.iter().any(|w| w.contains(gather)), "{got:#?}");
    let scatter = "dist.scatter #0 on rank 2: the root rank 0 has not called scatter(src=0)";
    let got = waits(true);
    assert!(got.iter().any(|w| w.contains(scatter)), "{got:#?}");
}
