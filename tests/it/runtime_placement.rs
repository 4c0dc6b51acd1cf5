//! Placement (seed ADR-0026): the resolvers cover the tensor, the SIP comes
//! from the caller's device (one registry behind `torch.ahbm` and
//! `torch.accelerator`), the removed fields are refused with what replaced
//! them, and missing hardware is named.

use kernbench::config::Document;
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::placement::MachineBounds;
use kernbench::runtime::{
    DPPolicy, PlacementError, ShardSpec, Split, TensorError, Torch, scope_rank,
};
use kernbench::sim::Simulation;
use kernbench::topology::TopologySpec;
use proptest::prelude::*;

const BOUNDS: MachineBounds = MachineBounds {
    sips: 2,
    cubes_per_sip: 16,
    pes_per_cube: 8,
};

const SPLITS: [Split; 5] = [
    Split::RowWise,
    Split::ColumnWise,
    Split::Replicate,
    Split::TiledRowMajor,
    Split::TiledColMajor,
];

/// How many `shards` hold each element of a `rows × cols` tensor.
fn coverage(rows: usize, cols: usize, shards: &[ShardSpec]) -> Vec<u32> {
    let mut counts = vec![0u32; rows * cols];
    for shard in shards {
        for r in shard.row_offset..shard.row_offset + shard.rows {
            for c in shard.col_offset..shard.col_offset + shard.cols {
                counts[r * cols + c] += 1;
            }
        }
    }
    counts
}

proptest! {
    #[test]
    fn primaries_cover_every_element_exactly_once(
        cube in 0..5usize,
        pe in 0..5usize,
        num_cubes in 1..=16u32,
        num_pes in 1..=8u32,
        rows in 1..48usize,
        cols in 1..48usize,
        sip in 0..2u32,
    ) {
        let policy = DPPolicy::new(SPLITS[cube], SPLITS[pe], num_cubes, num_pes);
        match policy.resolve(rows, cols, sip, BOUNDS) {
            Ok(shards) => {
                prop_assert_eq!(shards.len() as u32, num_cubes * num_pes);
                prop_assert!(shards.iter().all(|s| s.sip == sip && s.rows > 0 && s.cols > 0));
                let primaries: Vec<_> = shards.iter().copied().filter(ShardSpec::is_primary).collect();
                prop_assert!(coverage(rows, cols, &primaries).iter().all(|&n| n == 1));
                let copies = |split, n| if split == Split::Replicate { n } else { 1 };
                let expected = copies(policy.cube, num_cubes) * copies(policy.pe, num_pes);
                prop_assert!(coverage(rows, cols, &shards).iter().all(|&n| n == expected));
            }
            Err(PlacementError::TooFewElements { extent, parts, .. }) => {
                prop_assert!(extent < parts as usize);
            }
            Err(other) => prop_assert!(false, "unexpected error {}", other),
        }
    }
}

#[test]
fn row_column_and_tiled_splits_put_every_element_in_one_shard() {
    for split in [
        Split::RowWise,
        Split::ColumnWise,
        Split::TiledRowMajor,
        Split::TiledColMajor,
    ] {
        let policy = DPPolicy::new(split, split, 16, 8);
        let shards = policy.resolve(128, 128, 0, BOUNDS).unwrap();
        assert_eq!(shards.len(), 128);
        assert!(shards.iter().all(ShardSpec::is_primary), "{split:?}");
        assert!(
            coverage(128, 128, &shards).iter().all(|&n| n == 1),
            "{split:?}"
        );
    }
}

#[test]
fn replicate_gives_every_shard_the_whole_tensor() {
    let policy = DPPolicy::new(Split::Replicate, Split::Replicate, 4, 2);
    let shards = policy.resolve(6, 10, 1, BOUNDS).unwrap();
    assert_eq!(shards.len(), 8);
    for (i, shard) in shards.iter().enumerate() {
        assert_eq!(
            (shard.rows, shard.cols, shard.row_offset, shard.col_offset),
            (6, 10, 0, 0)
        );
        assert_eq!(shard.replica, i as u32);
        assert_eq!(
            (shard.sip, shard.cube, shard.pe),
            (1, i as u32 / 2, i as u32 % 2)
        );
    }
}

#[test]
fn a_policy_reads_from_yaml_and_json() {
    let yaml = "cube: row_wise\npe: tiled_col_major\nnum_cubes: 4\nnum_pes: 8\n";
    let from_yaml: DPPolicy = Document::parse(yaml, "dp.yaml")
        .unwrap()
        .deserialize()
        .unwrap();
    assert_eq!(
        from_yaml,
        DPPolicy::new(Split::RowWise, Split::TiledColMajor, 4, 8)
    );
    let json = serde_json::to_string(&from_yaml).unwrap();
    assert_eq!(serde_json::from_str::<DPPolicy>(&json).unwrap(), from_yaml);
}

#[test]
fn removed_fields_are_refused_with_what_replaced_them() {
    for field in ["sip: 1", "num_sips: 2"] {
        let yaml = format!("cube: row_wise\npe: replicate\nnum_cubes: 4\nnum_pes: 1\n{field}\n");
        let error = Document::parse(&yaml, "dp.yaml")
            .unwrap()
            .deserialize::<DPPolicy>()
            .unwrap_err()
            .to_string();
        let name = field.split(':').next().unwrap();
        assert!(error.starts_with("dp.yaml:1:1: "), "{error}");
        assert!(
            error.contains(&format!("`{name}` is not a placement field any more")),
            "{error}"
        );
        assert!(error.contains("torch.ahbm.set_device(rank)"), "{error}");
        assert!(error.contains("(sip, cube, pe)"), "{error}");
    }
    let json =
        r#"{"cube": "row_wise", "pe": "replicate", "num_cubes": 1, "num_pes": 1, "pe_index": 3}"#;
    let error = serde_json::from_str::<DPPolicy>(json)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`pe_index` is not a placement field any more"),
        "{error}"
    );
    assert!(error.contains("structurally as (sip, cube, pe)"), "{error}");
    let legacy_only = r#"{"num_sips": 2}"#;
    let error = serde_json::from_str::<DPPolicy>(legacy_only)
        .unwrap_err()
        .to_string();
    assert!(error.contains("`num_sips`"), "{error}");
}

fn torch() -> Torch {
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    Torch::new(Device::new(&spec, DataMode::On).unwrap())
}

/// Runs `body` as rank `rank`'s host worker on a fresh simulation.
fn as_worker<T: 'static>(rank: usize, body: impl AsyncFnOnce() -> T + 'static) -> T {
    let mut simulation = Simulation::new();
    let handle = simulation.spawn("host", scope_rank(rank, async move { body().await }));
    simulation.run().unwrap();
    handle.output().unwrap()
}

#[test]
fn set_device_and_the_accelerator_alias_share_one_registry() {
    let torch = torch();
    let sips = as_worker(1, async move || {
        assert_eq!(torch.accelerator.current_device_index(), None);
        torch.ahbm.set_device(1);
        assert_eq!(torch.accelerator.current_device_index(), Some(1));
        let on_one = torch
            .zeros(&[4, 4], DType::F16, &DPPolicy::single())
            .unwrap();
        torch.accelerator.set_device_index(0);
        assert_eq!(torch.ahbm.current_device(), Some(0));
        let on_zero = torch
            .zeros(&[4, 4], DType::F16, &DPPolicy::single())
            .unwrap();
        [
            on_one.shards().unwrap()[0].spec.sip,
            on_zero.shards().unwrap()[0].spec.sip,
        ]
    });
    assert_eq!(sips, [1, 0]);
}

#[test]
fn without_a_bound_device_tensors_go_to_sip_0() {
    let torch = torch();
    let sip = as_worker(1, async move || {
        let t = torch.empty(&[8], DType::F32, &DPPolicy::single()).unwrap();
        t.shards().unwrap()[0].spec.sip
    });
    assert_eq!(sip, 0);
}

#[test]
fn placement_on_missing_hardware_names_the_coordinates() {
    let torch = torch();
    let errors = as_worker(0, async move || {
        let make = |dp: DPPolicy| {
            torch
                .zeros(&[64, 64], DType::F16, &dp)
                .unwrap_err()
                .to_string()
        };
        let cubes = make(DPPolicy::new(Split::RowWise, Split::Replicate, 17, 1));
        let pes = make(DPPolicy::new(Split::RowWise, Split::ColumnWise, 2, 9));
        torch.ahbm.set_device(5);
        let sip = make(DPPolicy::single());
        [cubes, pes, sip]
    });
    assert_eq!(
        errors,
        [
            "placement on sip0.cube16, which does not exist: a SIP has cubes 0..16",
            "placement on sip0.cube0.pe8, which does not exist: a cube has PEs 0..8",
            "placement on sip5, which does not exist: the machine has SIPs 0..2",
        ]
    );
}

#[test]
fn a_split_finer_than_the_tensor_is_an_error() {
    let torch = torch();
    let error = as_worker(0, async move || {
        let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 16, 1);
        torch.zeros(&[4, 64], DType::F16, &dp).unwrap_err()
    });
    assert!(matches!(
        error,
        TensorError::Placement(PlacementError::TooFewElements {
            extent: 4,
            parts: 16,
            ..
        })
    ));
}
