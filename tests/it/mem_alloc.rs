//! Allocators as a whole: properties of first-fit with coalescing under
//! random alloc/free sequences, one allocator per memory of a machine, and
//! a tensor sharded over cubes behind one virtual range.

use kernbench::mem::{
    AllocError, DeviceAllocError, DeviceAllocators, Extent, FirstFitAllocator, Segment,
    VirtualAllocator,
};
use kernbench::topology::{AddressMap, MemSpace, TopologySpec};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// Fixed seed: the same cases on every run and machine, like the simulator.
fn config() -> ProptestConfig {
    ProptestConfig {
        rng_seed: RngSeed::Fixed(0x006d_656d),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[derive(Debug, Clone)]
enum Step {
    Alloc { size: u64, align_log2: u32 },
    Free { pick: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1u64..3000, 0u32..11).prop_map(|(size, align_log2)| Step::Alloc { size, align_log2 }),
        2 => any::<usize>().prop_map(|pick| Step::Free { pick }),
    ]
}

/// The offset first fit must choose: the lowest aligned start in the
/// lowest free block that holds `len` bytes.
fn lowest_fit(a: &FirstFitAllocator, size: u64, align: u64) -> Option<u64> {
    let len = size.next_multiple_of(a.granule());
    let align = align.max(a.granule());
    a.free_blocks().find_map(|(start, block)| {
        let at = start.next_multiple_of(align);
        (at + len <= start + block).then_some(at)
    })
}

/// Free blocks and live allocations tile `[0, capacity)` exactly, and no
/// two free blocks touch (they would have been merged).
fn check_layout(a: &FirstFitAllocator) {
    let mut pieces: Vec<(u64, u64, bool)> = a
        .free_blocks()
        .map(|(o, l)| (o, l, true))
        .chain(a.allocations().map(|(o, l)| (o, l, false)))
        .collect();
    pieces.sort_unstable();
    let mut end = 0;
    let mut previous_free = false;
    for (offset, len, free) in pieces {
        assert_eq!(offset, end, "gap or overlap at {offset:#x}");
        assert!(len > 0, "empty piece at {offset:#x}");
        assert!(
            !(free && previous_free),
            "adjacent free blocks at {offset:#x}"
        );
        (end, previous_free) = (offset + len, free);
    }
    assert_eq!(end, a.capacity(), "pieces do not reach the end");
    let live: u64 = a.allocations().map(|(_, l)| l).sum();
    assert_eq!(a.free_bytes() + live, a.capacity());
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_sequences_keep_first_fit_invariants(
        capacity_kib in 4u64..64,
        granule_log2 in 0u32..7,
        steps in prop::collection::vec(step(), 1..120),
        free_order in any::<u64>(),
    ) {
        let capacity = capacity_kib * 1024;
        let mut a = FirstFitAllocator::new("sip0.cube0.pe0.tcm", capacity, 1 << granule_log2).unwrap();
        let mut live: Vec<(u64, u64)> = Vec::new();
        for step in steps {
            match step {
                Step::Alloc { size, align_log2 } => {
                    let align = 1u64 << align_log2;
                    let expected = lowest_fit(&a, size, align);
                    match a.alloc_aligned(size, align) {
                        Ok(offset) => {
                            prop_assert_eq!(Some(offset), expected, "first fit");
                            prop_assert_eq!(offset % align.max(a.granule()), 0);
                            prop_assert!(offset + size <= capacity);
                            live.push((offset, size));
                        }
                        Err(AllocError::OutOfMemory { size: s, free, largest_free, .. }) => {
                            prop_assert_eq!(expected, None, "refused a request that fits");
                            prop_assert_eq!(s, size);
                            prop_assert_eq!(free, a.free_bytes());
                            prop_assert_eq!(largest_free, a.largest_free_block());
                        }
                        Err(other) => prop_assert!(false, "unexpected {other}"),
                    }
                }
                Step::Free { pick } if !live.is_empty() => {
                    let (offset, _) = live.swap_remove(pick % live.len());
                    a.free(offset).unwrap();
                }
                Step::Free { .. } => {}
            }
            check_layout(&a);
        }
        // Free the rest in a scrambled order: everything coalesces.
        let mut order = free_order;
        while !live.is_empty() {
            let (offset, _) = live.swap_remove((order % live.len() as u64) as usize);
            order = order.rotate_left(7) ^ 0x9e37_79b9;
            a.free(offset).unwrap();
            prop_assert!(
                matches!(a.free(offset), Err(AllocError::DoubleFree { offset: o, .. }) if o == offset),
                "second free of {offset:#x} must be a double free"
            );
        }
        prop_assert_eq!(a.free_blocks().collect::<Vec<_>>(), vec![(0, capacity)]);
    }
}

fn default_spec() -> TopologySpec {
    TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()
}

#[test]
fn exhausting_a_tcm_reports_the_unit_and_its_free_space() {
    let spec = default_spec();
    let mut device = DeviceAllocators::new(&spec, 64).unwrap();
    let tcm = MemSpace::Tcm {
        sip: 0,
        cube: 2,
        pe: 5,
    };
    let capacity = spec.pe().tcm.capacity.get().bytes();
    let half = device.alloc(tcm, capacity / 2).unwrap();
    device.alloc(tcm, capacity / 4).unwrap();
    device.free(half).unwrap();
    let err = device.alloc(tcm, capacity / 2 + 64).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "sip0.cube2.pe5.tcm: out of memory: cannot allocate {} bytes aligned to 64 \
             ({} bytes free, largest free block {} bytes)",
            capacity / 2 + 64,
            capacity * 3 / 4,
            capacity / 2
        )
    );
    // Other PEs' TCMs and the cube's HBM are untouched.
    let hbm = MemSpace::Hbm { sip: 0, cube: 2 };
    assert_eq!(
        device.unit(hbm).unwrap().free_bytes(),
        spec.cube().hbm.capacity.get().bytes()
    );
    assert!(matches!(
        device.alloc(tcm, 0),
        Err(DeviceAllocError::Alloc(AllocError::ZeroSize { .. }))
    ));
}

#[test]
fn a_row_sharded_tensor_is_one_virtual_range_over_all_cubes() {
    let spec = default_spec();
    let map = AddressMap::new(&spec).unwrap();
    let mut device = DeviceAllocators::new(&spec, 64).unwrap();
    let mut va = VirtualAllocator::new(map.clone());
    let page = va.page_size();
    let shard = 3 * page;
    let cubes = spec.cubes_per_sip() as u32;

    // One page-aligned shard in each cube's HBM, after a small allocation
    // that pushes the shards off offset 0.
    let mut backing = Vec::new();
    for cube in 0..cubes {
        let hbm = MemSpace::Hbm { sip: 1, cube };
        device.alloc(hbm, 100).unwrap();
        let addr = device.alloc_aligned(hbm, shard, page).unwrap();
        let (space, offset) = map.decode(addr).unwrap();
        assert_eq!(offset, page, "aligned past the small allocation");
        backing.push(Extent {
            space,
            offset,
            len: shard,
        });
    }
    let t_ptr = va.map(backing.clone()).unwrap();
    assert_eq!(t_ptr % page, 0);

    for cube in 0..cubes {
        let hbm = MemSpace::Hbm { sip: 1, cube };
        let pe_addr = t_ptr + u64::from(cube) * shard;
        assert_eq!(
            va.translate(pe_addr + 17).unwrap(),
            map.encode(hbm, page + 17).unwrap()
        );
    }
    // A range across the boundary between cube 0 and cube 1.
    let pieces = va.segments(t_ptr + shard - 8, 16).unwrap();
    let cube = |c| MemSpace::Hbm { sip: 1, cube: c };
    assert_eq!(
        pieces,
        [
            Segment {
                va: t_ptr + shard - 8,
                addr: map.encode(cube(0), page + shard - 8).unwrap(),
                len: 8
            },
            Segment {
                va: t_ptr + shard,
                addr: map.encode(cube(1), page).unwrap(),
                len: 8
            },
        ]
    );

    // Unmapping hands the backing back to be freed.
    for extent in va.unmap(t_ptr).unwrap() {
        device
            .free(map.encode(extent.space, extent.offset).unwrap())
            .unwrap();
    }
    assert!(va.translate(t_ptr).is_err());
}
