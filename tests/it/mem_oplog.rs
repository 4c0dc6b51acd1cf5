//! The op log as a whole: a small executor-less harness runs a ring
//! all-reduce over four cubes through `OpLog::apply`, then the log is
//! replayed on a fresh store (directly, after a JSON round trip, and with
//! data off) and every mapped byte is compared.

use half::f16;
use kernbench::mem::{
    BinaryFn, DType, MemoryStore, Op, OpId, OpLog, Payload, StoreDiff, StoreError, VerifyError,
};
use kernbench::sim::{SimDuration, SimTime};
use kernbench::topology::{AddressMap, MemSpace, TopologySpec};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

const CUBES: u32 = 4;
const ELEMS: u64 = 1024;
const BYTES: u64 = ELEMS * 2;

fn address_map() -> AddressMap {
    AddressMap::new(&TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()).unwrap()
}

/// Cube `c`'s input: `c + i / 4`, exact in f16, as are all sums here.
fn input(cube: u32) -> Vec<u8> {
    (0..ELEMS)
        .flat_map(|i| f16::from_f32(cube as f32 + (i % 64) as f32 / 4.0).to_le_bytes())
        .collect()
}

/// Where cube `c` keeps its buffers: accumulator and forward buffer in HBM,
/// receive staging in SRAM.
struct Buffers {
    acc: u64,
    fwd: u64,
    stage: u64,
}

fn buffers(map: &AddressMap, cube: u32) -> Buffers {
    let hbm = MemSpace::Hbm { sip: 0, cube };
    Buffers {
        acc: map.encode(hbm, 0).unwrap(),
        fwd: map.encode(hbm, 4096).unwrap(),
        stage: map.encode(MemSpace::Sram { sip: 0, cube }, 0).unwrap(),
    }
}

/// A clock that hands out issue times in order.
struct Clock(SimTime);

impl Clock {
    fn tick(&mut self) -> SimTime {
        self.0 += SimDuration::from_ns(10);
        self.0
    }
}

/// The executor-less harness: applies ops to a store at increasing times
/// and logs them.
struct Harness<'a> {
    store: &'a mut MemoryStore,
    log: OpLog,
    clock: Clock,
}

impl Harness<'_> {
    fn run(&mut self, node: impl Into<String>, op: Op) -> OpId {
        let start = self.clock.tick();
        self.log.apply(self.store, node, start, op).unwrap()
    }
}

/// Runs the all-reduce on `store`, logging every op. Each step forwards a
/// buffer round the ring and accumulates it; the forward buffer is
/// overwritten while the DMA that reads it is still in flight, so the
/// result is only right if a copy snapshots its source at issue.
fn ring_all_reduce(store: &mut MemoryStore) -> OpLog {
    let map = store.address_map().clone();
    let mut h = Harness {
        store,
        log: OpLog::new(),
        clock: Clock(SimTime::ZERO),
    };
    for cube in 0..CUBES {
        let b = buffers(&map, cube);
        for addr in [b.acc, b.fwd, b.stage] {
            h.run("host", Op::Map { addr, len: BYTES });
        }
        let data = Payload::Bytes(input(cube));
        h.run("host", Op::HostWrite { addr: b.acc, data });
        let copy = Op::Copy {
            src: b.acc,
            dst: b.fwd,
            len: BYTES,
        };
        h.run(format!("sip0.cube{cube}.mcpu.dma"), copy);
    }
    for _step in 1..CUBES {
        let mut in_flight = Vec::new();
        for cube in 0..CUBES {
            let (from, to) = (buffers(&map, cube), buffers(&map, (cube + 1) % CUBES));
            let send = Op::Copy {
                src: from.fwd,
                dst: to.stage,
                len: BYTES,
            };
            in_flight.push(h.run(format!("sip0.cube{cube}.pe0"), send));
        }
        for cube in 0..CUBES {
            let b = buffers(&map, cube);
            let add = Op::Elementwise {
                func: BinaryFn::Add,
                dtype: DType::F16,
                lhs: b.acc,
                rhs: b.stage,
                out: b.acc,
                elems: ELEMS,
            };
            h.run(format!("sip0.cube{cube}.pe0"), add);
            let forward = Op::Copy {
                src: b.stage,
                dst: b.fwd,
                len: BYTES,
            };
            h.run(format!("sip0.cube{cube}.pe0"), forward);
        }
        let done = h.clock.tick();
        for id in in_flight {
            h.log.complete(id, done).unwrap();
        }
    }
    h.log
}

fn expected_sum() -> Vec<u8> {
    (0..ELEMS)
        .flat_map(|i| {
            let sum: f32 = (0..CUBES).map(|c| c as f32 + (i % 64) as f32 / 4.0).sum();
            f16::from_f32(sum).to_le_bytes()
        })
        .collect()
}

/// Every region of `a` and `b`, compared byte for byte.
fn assert_same_memory(a: &MemoryStore, b: &MemoryStore) {
    let (left, right): (Vec<_>, Vec<_>) = (a.regions().collect(), b.regions().collect());
    assert_eq!(left.len(), right.len());
    for (l, r) in left.iter().zip(&right) {
        assert_eq!((l.addr, l.len), (r.addr, r.len));
        let bytes = |store: &MemoryStore| store.read(l.addr, l.len).unwrap().into_owned();
        assert!(bytes(a) == bytes(b), "region {:#x} differs", l.addr);
    }
}

#[test]
fn the_all_reduce_computes_the_sum_and_its_log_replays_exactly() {
    let mut live = MemoryStore::new(address_map());
    let log = ring_all_reduce(&mut live);
    let map = live.address_map().clone();
    for cube in 0..CUBES {
        let acc = live.read(buffers(&map, cube).acc, BYTES).unwrap();
        assert!(acc == expected_sum().as_slice(), "cube {cube}");
    }

    let mut fresh = live.fresh();
    log.replay(&mut fresh).unwrap();
    assert_same_memory(&fresh, &live);
    assert_eq!(fresh.diff(&live), None);
    log.verify(&live).unwrap();

    let json = serde_json::to_string(&log).unwrap();
    let loaded: OpLog = serde_json::from_str(&json).unwrap();
    assert_eq!(loaded, log);
    let mut from_file = live.fresh();
    loaded.replay(&mut from_file).unwrap();
    assert_same_memory(&from_file, &live);
}

#[test]
fn records_carry_name_node_times_and_ranges() {
    let mut live = MemoryStore::new(address_map());
    let log = ring_all_reduce(&mut live);
    let map = live.address_map().clone();
    // 5 setup ops per cube, then per step 4 sends and 4 x (add, forward).
    assert_eq!(log.len() as u32, 5 * CUBES + (CUBES - 1) * 3 * CUBES);
    let first_send = &log.records()[5 * CUBES as usize];
    assert_eq!(first_send.name(), "copy");
    assert_eq!(first_send.node(), "sip0.cube0.pe0");
    let (from, to) = (buffers(&map, 0), buffers(&map, 1));
    assert_eq!(first_send.inputs()[0].addr, from.fwd);
    assert_eq!(first_send.outputs()[0].addr, to.stage);
    assert!(first_send.end().unwrap() > first_send.start());
    let add = &log.records()[5 * CUBES as usize + CUBES as usize];
    assert_eq!(add.name(), "add");
    assert_eq!(add.inputs().len(), 2);
    assert_eq!(add.end(), None, "never completed by the harness");
    let starts: Vec<SimTime> = log.records().iter().map(|r| r.start()).collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "issue order");
}

#[test]
fn timing_only_runs_log_the_same_ops_without_bytes() {
    let mut live = MemoryStore::new(address_map());
    let with_data = ring_all_reduce(&mut live);
    let mut timing = MemoryStore::timing_only(address_map());
    let without = ring_all_reduce(&mut timing);

    assert_eq!(timing.resident_bytes(), 0);
    assert_eq!(with_data.len(), without.len());
    for (a, b) in with_data.records().iter().zip(without.records()) {
        assert_eq!(
            (a.name(), a.node(), a.start(), a.end()),
            (b.name(), b.node(), b.start(), b.end())
        );
        assert_eq!((a.inputs(), a.outputs()), (b.inputs(), b.outputs()));
    }
    let host_write = &without.records()[3];
    assert!(matches!(
        host_write.op(),
        Op::HostWrite {
            data: Payload::Elided { len: BYTES },
            ..
        }
    ));
    without.verify(&timing).unwrap();

    let err = without.replay(&mut live.fresh()).unwrap_err();
    assert_eq!(err.id.index(), 3);
    assert!(matches!(err.source, StoreError::PayloadElided { .. }));
    assert!(
        err.to_string()
            .starts_with("replay of op #3 (host_write on host) failed")
    );
}

#[test]
fn verify_catches_memory_changed_behind_the_logs_back() {
    let mut live = MemoryStore::new(address_map());
    let log = ring_all_reduce(&mut live);
    let target = buffers(live.address_map(), 2).acc + 10;
    live.write(target, &[0xAB]).unwrap();
    match log.verify(&live) {
        Err(VerifyError::Mismatch(StoreDiff::Byte { addr, right, .. })) => {
            assert_eq!((addr, right), (target, 0xAB));
        }
        other => panic!("expected a byte mismatch, got {other:?}"),
    }
}

/// Fixed seed: the same cases on every run and machine, like the simulator.
fn config() -> ProptestConfig {
    ProptestConfig {
        rng_seed: RngSeed::Fixed(0x006c_6f67),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Two 256-byte regions (HBM, TCM); places are 4-byte aligned so that
/// elementwise ops line up with elements.
fn random_op(map: &AddressMap) -> impl Strategy<Value = Op> {
    let bases = [
        map.encode(MemSpace::Hbm { sip: 1, cube: 2 }, 0).unwrap(),
        map.encode(
            MemSpace::Tcm {
                sip: 0,
                cube: 1,
                pe: 4,
            },
            512,
        )
        .unwrap(),
    ];
    let place = move || (0..2usize, 0u64..64).prop_map(move |(r, i)| bases[r] + 4 * i);
    prop_oneof![
        (place(), prop::collection::vec(any::<u8>(), 1..64)).prop_map(|(addr, bytes)| {
            Op::HostWrite {
                addr,
                data: bytes.into(),
            }
        }),
        (place(), place(), 1u64..96).prop_map(|(src, dst, len)| Op::Copy { src, dst, len }),
        (place(), 1u64..64, any::<u8>()).prop_map(|(addr, len, value)| Op::Fill {
            addr,
            len,
            value
        }),
        (place(), place(), place(), 1u64..24, any::<bool>()).prop_map(
            |(lhs, rhs, out, elems, wide)| Op::Elementwise {
                func: BinaryFn::Add,
                dtype: if wide { DType::F32 } else { DType::F16 },
                lhs,
                rhs,
                out,
                elems,
            }
        ),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_op_sequences_replay_exactly(ops in prop::collection::vec(random_op(&address_map()), 1..40)) {
        let map = address_map();
        let mut live = MemoryStore::new(map.clone());
        let mut log = OpLog::new();
        let mut clock = Clock(SimTime::ZERO);
        let hbm = map.encode(MemSpace::Hbm { sip: 1, cube: 2 }, 0).unwrap();
        let tcm = map.encode(MemSpace::Tcm { sip: 0, cube: 1, pe: 4 }, 512).unwrap();
        for addr in [hbm, tcm] {
            log.apply(&mut live, "host", clock.tick(), Op::Map { addr, len: 256 }).unwrap();
        }
        for op in ops {
            let before = live.clone();
            if log.apply(&mut live, "sip0.cube0.pe0", clock.tick(), op).is_err() {
                prop_assert_eq!(live.diff(&before), None, "a rejected op changed memory");
            }
        }
        let mut fresh = live.fresh();
        log.replay(&mut fresh).unwrap();
        prop_assert_eq!(fresh.diff(&live), None);
        let loaded: OpLog = serde_json::from_str(&serde_json::to_string(&log).unwrap()).unwrap();
        let mut from_json = live.fresh();
        loaded.replay(&mut from_json).unwrap();
        prop_assert_eq!(from_json.diff(&live), None);
    }
}
