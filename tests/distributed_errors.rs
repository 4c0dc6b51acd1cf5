//! The `ahbm` process group's contract (seed ADR-0047): every misuse is a
//! typed error with the seeds' message, and the world and rank are what
//! ccl.yaml and the launcher say.

use std::rc::Rc;

use kernbench::ccl::CclConfig;
use kernbench::config::ConfigSource;
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::{DPPolicy, DistError, ReduceOp, Split, Torch};
use kernbench::sim::Simulation;
use kernbench::topology::{Machine, TopologySpec};

fn torch() -> Torch {
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    let machine = std::sync::Arc::new(Machine::build(&spec).unwrap());
    Torch::new(Device::from_machine(machine, DataMode::On).unwrap())
}

/// Runs `body` as the single driver of a fresh simulation.
fn drive<F, Fut>(body: F) -> Result<(), DistError>
where
    F: FnOnce(Torch) -> Fut,
    Fut: std::future::Future<Output = Result<(), DistError>> + 'static,
{
    let mut simulation = Simulation::new();
    let handle = simulation.spawn("driver", body(torch()));
    simulation.run().unwrap();
    handle.output().unwrap()
}

fn tensor(torch: &Torch) -> kernbench::runtime::Tensor {
    let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 16, 1);
    torch.zeros(&[16, 8], DType::F16, &dp).unwrap()
}

#[test]
fn another_backend_is_unsupported() {
    let error = torch().distributed.init_process_group("nccl").unwrap_err();
    assert_eq!(
        error.to_string(),
        "Unsupported backend \"nccl\": the only backend is \"ahbm\""
    );
}

#[test]
fn every_call_before_init_is_refused() {
    let dist = torch().distributed;
    assert!(!dist.is_initialized());
    let message = dist.get_world_size().unwrap_err().to_string();
    assert!(
        message.starts_with("Default process group has not been initialized"),
        "{message}"
    );
    assert!(matches!(
        dist.get_rank(),
        Err(DistError::NotInitialized { call: "get_rank" })
    ));
    assert!(matches!(
        dist.get_backend(),
        Err(DistError::NotInitialized { .. })
    ));
    let result = drive(|torch| async move {
        let t = tensor(&torch);
        torch.distributed.all_reduce(&t, ReduceOp::Sum).await
    });
    assert!(matches!(
        result,
        Err(DistError::NotInitialized { call: "all_reduce" })
    ));
}

#[test]
fn init_resolves_the_world_from_the_topology() {
    let dist = torch().distributed;
    dist.init_process_group("ahbm").unwrap();
    dist.init_process_group("ahbm").unwrap();
    assert!(dist.is_initialized());
    assert_eq!(dist.get_world_size().unwrap(), 2);
    assert_eq!(dist.get_rank().unwrap(), 0, "outside a worker");
    assert_eq!(dist.get_backend().unwrap(), "ahbm");
    assert_eq!(dist.algorithm().unwrap(), "intercube_allreduce");
}

#[test]
fn only_sum_is_implemented() {
    let result = drive(|torch| async move {
        torch.distributed.init_process_group("ahbm")?;
        let t = tensor(&torch);
        torch.distributed.all_reduce(&t, ReduceOp::Max).await
    });
    let message = result.unwrap_err().to_string();
    assert_eq!(
        message,
        "all_reduce: ReduceOp.MAX is not implemented by the ahbm backend (only ReduceOp.SUM)"
    );
}

#[test]
fn a_freed_or_misplaced_tensor_is_an_error() {
    let freed = drive(|torch| async move {
        torch.distributed.init_process_group("ahbm")?;
        let t = tensor(&torch).named("grad");
        t.free()?;
        torch.distributed.all_reduce(&t, ReduceOp::Sum).await
    });
    assert_eq!(
        freed.unwrap_err().to_string(),
        "all_reduce: tensor `grad` is not deployed"
    );
    let misplaced = drive(|torch| async move {
        torch.distributed.init_process_group("ahbm")?;
        let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 4, 1);
        let t = torch.zeros(&[4, 8], DType::F16, &dp)?;
        torch.distributed.all_reduce(&t, ReduceOp::Sum).await
    });
    assert!(matches!(
        misplaced,
        Err(DistError::TileMismatch {
            tiles: 4,
            cubes: 16,
            ..
        })
    ));
}

#[test]
fn unsupported_calls_say_so() {
    let result = drive(|torch| async move {
        torch.distributed.init_process_group("ahbm")?;
        torch.distributed.broadcast(&tensor(&torch), 0)
    });
    let message = result.unwrap_err().to_string();
    assert!(
        message.starts_with("torch.distributed.broadcast is not supported by the ahbm backend")
    );
}

#[test]
fn a_bad_algorithm_or_topology_leaves_nothing_installed() {
    let ccl = |text: &str| {
        let source = ConfigSource::Text {
            name: "ccl.yaml".into(),
            text: text.to_owned().into(),
        };
        CclConfig::load(&source, &[]).unwrap()
    };
    let device = torch().device().clone();
    let unknown = ccl("defaults: {algorithm: a, buffer_kind: tcm, n_elem: 8}\n\
                       algorithms:\n  a: {module: no_such_file, topology: ring_1d}\n");
    let dist = Torch::with_ccl(device.clone(), unknown).distributed;
    let message = dist.init_process_group("ahbm").unwrap_err().to_string();
    assert!(
        message.starts_with("no algorithm module `no_such_file` in algorithms/"),
        "{message}"
    );
    assert!(!dist.is_initialized());
    let too_many = ccl(
        "defaults: {algorithm: a, buffer_kind: tcm, n_elem: 8, world_size: 3}\n\
                        algorithms:\n  a: {module: ring_allreduce, topology: ring_1d}\n",
    );
    let dist = Torch::with_ccl(Rc::clone(&device), too_many).distributed;
    let message = dist.init_process_group("ahbm").unwrap_err().to_string();
    assert_eq!(message, "world_size 3 needs 3 SIPs, but the machine has 2");
    assert!(!dist.is_initialized());
}
