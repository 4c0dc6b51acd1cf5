//! The byte store as a whole: contiguous buffers per region, agreement with
//! a naive byte-by-byte model under random accesses, and identical address
//! checking with data off.

use kernbench::mem::{DataMode, MemoryStore, StoreError};
use kernbench::topology::{AddressMap, MemSpace, TopologySpec};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn address_map() -> AddressMap {
    AddressMap::new(&TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()).unwrap()
}

/// Fixed seed: the same cases on every run and machine, like the simulator.
fn config() -> ProptestConfig {
    ProptestConfig {
        rng_seed: RngSeed::Fixed(0x0073_746f),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[test]
fn a_64_mib_tensor_costs_64_mib_and_a_memcpy() {
    const MIB64: u64 = 64 << 20;
    let map = address_map();
    let src = map.encode(MemSpace::Hbm { sip: 0, cube: 0 }, 0).unwrap();
    let dst = map.encode(MemSpace::Hbm { sip: 1, cube: 7 }, 0).unwrap();
    let mut store = MemoryStore::new(map.clone());
    store.map(src, MIB64).unwrap();
    store.map(dst, MIB64).unwrap();
    let pattern: Vec<u8> = (0..MIB64).map(|i| (i % 251) as u8).collect();
    store.write(src, &pattern).unwrap();
    store.copy(src, dst, MIB64).unwrap();
    assert_eq!(store.resident_bytes(), 2 * MIB64);
    assert_eq!(store.regions().count(), 2);
    assert!(store.read(dst, MIB64).unwrap() == pattern.as_slice());

    let mut timing = MemoryStore::timing_only(map);
    timing.map(src, MIB64).unwrap();
    timing.map(dst, MIB64).unwrap();
    timing.write(src, &pattern).unwrap();
    timing.copy(src, dst, MIB64).unwrap();
    assert_eq!(timing.resident_bytes(), 0);
    assert_eq!(timing.mode(), DataMode::Off);
}

/// Three regions in three kinds of memory: (memory, offset, length).
const REGIONS: [(MemSpace, u64, u64); 3] = [
    (MemSpace::Hbm { sip: 0, cube: 0 }, 0, 256),
    (MemSpace::Sram { sip: 1, cube: 3 }, 64, 128),
    (
        MemSpace::Tcm {
            sip: 0,
            cube: 0,
            pe: 2,
        },
        0,
        64,
    ),
];

#[derive(Debug, Clone)]
enum Access {
    Write {
        at: (usize, u64),
        data: Vec<u8>,
    },
    Fill {
        at: (usize, u64),
        len: u64,
        value: u8,
    },
    Copy {
        src: (usize, u64),
        dst: (usize, u64),
        len: u64,
    },
}

/// A place in one of the regions, sometimes past its end.
fn place() -> impl Strategy<Value = (usize, u64)> {
    (0..REGIONS.len(), 0u64..270)
}

fn access() -> impl Strategy<Value = Access> {
    prop_oneof![
        (place(), prop::collection::vec(any::<u8>(), 0..80))
            .prop_map(|(at, data)| Access::Write { at, data }),
        (place(), 0u64..80, any::<u8>()).prop_map(|(at, len, value)| Access::Fill {
            at,
            len,
            value
        }),
        (place(), place(), 0u64..80).prop_map(|(src, dst, len)| Access::Copy { src, dst, len }),
    ]
}

/// The store's view and a byte-by-byte model of the same regions.
struct Harness {
    map: AddressMap,
    model: Vec<Vec<u8>>,
}

impl Harness {
    fn new(stores: &mut [&mut MemoryStore]) -> Self {
        let map = address_map();
        for &(space, offset, len) in &REGIONS {
            for store in stores.iter_mut() {
                store.map(map.encode(space, offset).unwrap(), len).unwrap();
            }
        }
        let model = REGIONS.iter().map(|r| vec![0; r.2 as usize]).collect();
        Harness { map, model }
    }

    fn addr(&self, (region, at): (usize, u64)) -> u64 {
        let (space, offset, _) = REGIONS[region];
        self.map.encode(space, offset + at).unwrap()
    }

    /// Whether the model accepts `len` bytes at `place`.
    fn fits(&self, (region, at): (usize, u64), len: u64) -> bool {
        len == 0 || at + len <= REGIONS[region].2
    }

    fn apply(&self, store: &mut MemoryStore, access: &Access) -> Result<(), StoreError> {
        match access {
            Access::Write { at, data } => store.write(self.addr(*at), data),
            Access::Fill { at, len, value } => store.fill(self.addr(*at), *len, *value),
            Access::Copy { src, dst, len } => store.copy(self.addr(*src), self.addr(*dst), *len),
        }
    }

    /// Applies `access` to the model; whether it was in bounds.
    fn apply_model(&mut self, access: &Access) -> bool {
        let range = |at: u64, len: u64| at as usize..(at + len) as usize;
        match access {
            Access::Write { at, data } => {
                let ok = self.fits(*at, data.len() as u64);
                if ok && !data.is_empty() {
                    self.model[at.0][range(at.1, data.len() as u64)].copy_from_slice(data);
                }
                ok
            }
            Access::Fill { at, len, value } => {
                let ok = self.fits(*at, *len);
                if ok && *len > 0 {
                    self.model[at.0][range(at.1, *len)].fill(*value);
                }
                ok
            }
            Access::Copy { src, dst, len } => {
                let ok = self.fits(*src, *len) && self.fits(*dst, *len);
                if ok && *len > 0 {
                    let bytes = self.model[src.0][range(src.1, *len)].to_vec();
                    self.model[dst.0][range(dst.1, *len)].copy_from_slice(&bytes);
                }
                ok
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_store_agrees_with_a_byte_model(accesses in prop::collection::vec(access(), 1..60)) {
        let map = address_map();
        let mut store = MemoryStore::new(map.clone());
        let mut timing = MemoryStore::timing_only(map);
        let mut harness = Harness::new(&mut [&mut store, &mut timing]);
        for access in &accesses {
            let result = harness.apply(&mut store, access);
            let in_bounds = harness.apply_model(access);
            prop_assert_eq!(result.is_ok(), in_bounds, "{:?}: {:?}", access, result);
            prop_assert_eq!(harness.apply(&mut timing, access), result, "data off differs");
            for (region, bytes) in harness.model.iter().enumerate() {
                let addr = harness.addr((region, 0));
                prop_assert_eq!(store.read(addr, bytes.len() as u64).unwrap(), bytes.as_slice());
            }
        }
    }
}
