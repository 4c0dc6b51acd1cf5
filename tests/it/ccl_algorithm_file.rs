//! ADR-0009's claim: an algorithm is one file in `algorithms/` plus one
//! ccl.yaml entry. `algorithms/test_double_send.rs` is such a file; here a
//! ccl.yaml naming it runs through the process group (`run_custom`: it
//! declares no `torch.distributed` collective).

use std::cell::RefCell;
use std::rc::Rc;

use half::f16;
use kernbench::ccl::{CclConfig, Collective, registry};
use kernbench::config::ConfigSource;
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::{DPPolicy, Split, Torch, spawn};
use kernbench::sim::Simulation;
use kernbench::topology::{Machine, TopologySpec};
use kernbench::workloads::WorkloadError;
use kernbench::workloads::ccl_allreduce::pattern;
use ndarray::{Array2, ArrayD};

const CCL: &str = "defaults: {algorithm: ring, buffer_kind: hbm, n_elem: 8}\n\
                   algorithms:\n  ring: {module: ring_allreduce, wiring: ring_1d}\n  \
                   test_double_send: {module: test_double_send, wiring: ring_1d}\n";

#[test]
fn one_file_and_one_entry_make_an_algorithm() {
    assert!(registry::names().any(|n| n == "test_double_send"));
    let source = ConfigSource::Text {
        name: "ccl.yaml".into(),
        text: CCL.into(),
    };
    let ccl = CclConfig::load(&source, &[]).unwrap();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    let machine = std::sync::Arc::new(Machine::build(&spec).unwrap());
    let torch = Torch::with_ccl(Device::from_machine(machine, DataMode::On).unwrap(), ccl);
    let results = Rc::new(RefCell::new(Vec::new()));
    let (shared, host) = (results.clone(), torch.clone());
    let mut simulation = Simulation::new();
    let handle = simulation.spawn("driver", async move {
        spawn(2, move |rank| {
            let (torch, results) = (host.clone(), shared.clone());
            async move {
                let custom = Collective::Custom;
                let dist = &torch.distributed;
                dist.init_process_group_with("ahbm", custom, "test_double_send")?;
                let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 16, 1);
                let t = torch.zeros(&[16, 8], DType::F16, &dp)?;
                t.copy_from(&pattern(rank, 16, 8)).await?;
                dist.run_custom(&t).await?;
                let back: ArrayD<f16> = t.to_ndarray().await?.unwrap();
                results.borrow_mut().push((rank, back));
                Ok::<(), WorkloadError>(())
            }
        })
        .await
    });
    simulation.run().unwrap();
    handle.output().unwrap().unwrap();
    // Endpoint e = rank × 16 + cube holds t(e) + 2 t(e − 1) on the flat ring.
    let tile = |e: usize| pattern(e / 16, 16, 8).row(e % 16).to_owned();
    for (rank, back) in results.borrow().iter() {
        let want = Array2::from_shape_fn((16, 8), |(c, i)| {
            let e = rank * 16 + c;
            let prev = (e + 31) % 32;
            f16::from_f32(tile(e)[i].to_f32() + 2.0 * tile(prev)[i].to_f32())
        });
        assert_eq!(back, &want.into_dyn(), "rank {rank}");
    }
}
