//! Tensors as host code uses them: H2D then D2H returns the same array in
//! exactly the time of the per-shard DMA formulas, data off times the same,
//! the VA range maps onto the shards, and misuse is a typed error.

use std::rc::Rc;

use half::{bf16, f16};
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::{DPPolicy, Shard, Split, TENSOR_PAGE_SIZE, Tensor, TensorError, Torch};
use kernbench::sim::{self, SimDuration, Simulation};
use kernbench::topology::{MemSpace, TopologySpec};
use ndarray::{Array, ArrayD, IxDyn};

fn device(data: DataMode) -> Rc<Device> {
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    Device::new(&spec, data).unwrap()
}

/// Runs `body` as the single driver's host code on a fresh simulation.
fn host<T: 'static>(body: impl AsyncFnOnce() -> T + 'static) -> T {
    let mut simulation = Simulation::new();
    let handle = simulation.spawn("host", async move { body().await });
    simulation.run().unwrap();
    handle.output().unwrap()
}

/// The uncontended time of a host copy of `shard` (H2D when `to_device`).
fn host_copy_formula(device: &Device, shard: &Shard, to_device: bool) -> SimDuration {
    let machine = device.fabric().machine();
    let staging = machine.address_map().encode(MemSpace::Host, 0).unwrap();
    let issue = machine.spec().cube().mcpu.dma.issue_overhead;
    let (src, dst) = if to_device {
        (staging, shard.addr)
    } else {
        (shard.addr, staging)
    };
    device
        .dma_copy_formula(issue, machine.host(), src, dst, shard.bytes)
        .unwrap()
}

fn values(shape: &[usize]) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    Array::from_iter((0..n).map(|i| (i % 251) as f32 * 0.5 - 60.0))
        .into_shape_with_order(IxDyn(shape))
        .unwrap()
}

struct RoundTrip<T> {
    back: Option<ArrayD<T>>,
    h2d: SimDuration,
    d2h: SimDuration,
    shards: Vec<Shard>,
}

/// Uploads `array` placed by `dp`, reads it back, and times both.
fn round_trip<T: kernbench::runtime::Element>(
    device: &Rc<Device>,
    array: ArrayD<T>,
    dp: DPPolicy,
) -> RoundTrip<T> {
    let torch = Torch::new(device.clone());
    host(async move || {
        let t0 = sim::now();
        let tensor = torch.from_ndarray(&array, &dp).await.unwrap();
        let t1 = sim::now();
        let back = tensor.to_ndarray::<T>().await.unwrap();
        let d2h = sim::now() - t1;
        RoundTrip {
            back,
            h2d: t1 - t0,
            d2h,
            shards: tensor.shards().unwrap(),
        }
    })
}

#[test]
fn h2d_then_d2h_returns_the_array_in_the_formula_time() {
    let device = device(DataMode::On);
    let array = values(&[3, 40, 96]).mapv(f16::from_f32);
    let dp = DPPolicy::new(Split::RowWise, Split::ColumnWise, 4, 2);
    let trip = round_trip(&device, array.clone(), dp);
    assert_eq!(trip.back.unwrap(), array);
    assert_eq!(trip.shards.len(), 8);
    let sum = |to_device| {
        trip.shards
            .iter()
            .map(|s| host_copy_formula(&device, s, to_device))
            .fold(SimDuration::ZERO, |a, b| a + b)
    };
    assert_eq!(trip.h2d, sum(true));
    assert_eq!(trip.d2h, sum(false));
    assert!(trip.d2h > trip.h2d, "a read pays the request trip");
    assert!(device.oplog().verify(&device.store()).is_ok());
}

#[test]
fn replicas_are_all_written_and_one_is_read_back() {
    let device = device(DataMode::On);
    let array = values(&[16, 32]).mapv(bf16::from_f32);
    let dp = DPPolicy::new(Split::Replicate, Split::RowWise, 3, 2);
    let trip = round_trip(&device, array.clone(), dp);
    assert_eq!(trip.back.unwrap(), array);
    assert_eq!(trip.shards.len(), 6);
    let h2d: Vec<_> = trip
        .shards
        .iter()
        .map(|s| host_copy_formula(&device, s, true))
        .collect();
    let d2h: Vec<_> = trip.shards[..2]
        .iter()
        .map(|s| host_copy_formula(&device, s, false))
        .collect();
    assert_eq!(
        trip.h2d,
        h2d.into_iter().fold(SimDuration::ZERO, |a, b| a + b)
    );
    assert_eq!(
        trip.d2h,
        d2h.into_iter().fold(SimDuration::ZERO, |a, b| a + b)
    );
    for shard in &trip.shards {
        let bytes = device.read_untimed(shard.addr, shard.bytes).unwrap();
        let first = shard.spec.row_offset * 32 * 2;
        let expected: Vec<u8> = array.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(bytes, expected[first..first + shard.bytes as usize]);
    }
}

#[test]
fn data_off_takes_the_same_time_and_returns_no_values() {
    let dp = DPPolicy::new(Split::TiledRowMajor, Split::Replicate, 4, 1);
    let on = round_trip(&device(DataMode::On), values(&[64, 64]), dp);
    let off = round_trip(&device(DataMode::Off), values(&[64, 64]), dp);
    assert_eq!((on.h2d, on.d2h), (off.h2d, off.d2h));
    assert!(on.back.is_some() && off.back.is_none());
}

#[test]
fn one_va_range_spans_the_shards_page_by_page() {
    let device = device(DataMode::On);
    let torch = Torch::new(device.clone());
    let (ptr, shards, translated) = host(async move || {
        // 4 cubes x 16 rows x 128 f16 = 4 KiB per shard: one page each.
        let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 4, 1);
        let t = torch.zeros(&[64, 128], DType::F16, &dp).unwrap();
        let ptr = t.data_ptr().unwrap();
        let shards = t.shards().unwrap();
        let translated: Vec<_> = (0..4)
            .map(|i| torch.translate(ptr + i * TENSOR_PAGE_SIZE + 6).unwrap())
            .collect();
        (ptr, shards, translated)
    });
    for (i, shard) in shards.iter().enumerate() {
        assert_eq!(shard.va, ptr + i as u64 * TENSOR_PAGE_SIZE);
        assert_eq!(shard.addr % TENSOR_PAGE_SIZE, 0);
        assert_eq!(translated[i], shard.addr + 6);
        let (space, _) = device
            .fabric()
            .machine()
            .address_map()
            .decode(shard.addr)
            .unwrap();
        assert_eq!(
            space,
            MemSpace::Hbm {
                sip: 0,
                cube: i as u32
            }
        );
    }
}

#[test]
fn misuse_is_a_typed_error_naming_the_tensor() {
    let torch = Torch::new(device(DataMode::On));
    let errors = host(async move || {
        let t: Tensor = torch
            .zeros(&[4, 8], DType::F16, &DPPolicy::single())
            .unwrap()
            .named("w");
        let wrong_shape = t
            .copy_from(&values(&[8, 4]).mapv(f16::from_f32))
            .await
            .unwrap_err();
        let wrong_dtype = t.copy_from(&values(&[4, 8])).await.unwrap_err();
        let read_as_f32 = t.to_ndarray::<f32>().await.unwrap_err();
        t.free().unwrap();
        let after_free = t.to_ndarray::<f16>().await.unwrap_err();
        let double_free = t.free().unwrap_err();
        [
            wrong_shape,
            wrong_dtype,
            read_as_f32,
            after_free,
            double_free,
        ]
        .map(|e| e.to_string())
    });
    assert_eq!(
        errors,
        [
            "tensor w has shape [4, 8] but the array has shape [8, 4]",
            "tensor w holds f16 but the array holds f32",
            "tensor w holds f16 but the array holds f32",
            "tensor w is not deployed: it was freed and has no shards",
            "tensor w is not deployed: it was freed and has no shards",
        ]
    );
}

#[test]
fn freeing_returns_the_memory() {
    let device = device(DataMode::On);
    let torch = Torch::new(device.clone());
    let regions = host(async move || {
        let dp = DPPolicy::new(Split::ColumnWise, Split::Replicate, 2, 1);
        let t = torch.from_ndarray(&values(&[2, 6]), &dp).await.unwrap();
        let live = torch.device().store().regions().count();
        t.free().unwrap();
        let err = t.copy_from(&values(&[2, 6])).await.unwrap_err();
        assert!(matches!(err, TensorError::NotDeployed { .. }));
        (live, torch.device().store().regions().count())
    });
    assert_eq!(regions, (2, 0));
    assert!(device.oplog().verify(&device.store()).is_ok());
}
