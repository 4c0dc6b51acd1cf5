//! The `ahbm` process group's contract (seed ADR-0047): every misuse is a
//! typed error with the seeds' message, and the world and rank are what
//! ccl.yaml and the launcher say.

use std::rc::Rc;

use kernbench::ccl::{CclConfig, Collective};
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
    assert_eq!(
        dist.algorithm(Collective::AllReduce, 0).unwrap(),
        "intercube_allreduce"
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
        "tensor `grad` is not deployed"
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
fn rooted_calls_outside_a_rank_worker_are_rank_0_s() {
    // As every call outside a worker: the caller is rank 0, so it is the
    // root of dst=0 (and must pass the list) and not that of src=1.
    let result = drive(|torch| async move {
        torch.distributed.init_process_group("ahbm")?;
        torch.distributed.gather(&tensor(&torch), None, 0).await
    });
    assert_eq!(
        result.unwrap_err().to_string(),
        "dist.gather on the root rank 0: gather_list is missing (the root passes a tensor \
         whose cube tiles hold one block per rank)"
    );
    let result = drive(|torch| async move {
        torch.distributed.init_process_group("ahbm")?;
        let t = tensor(&torch);
        torch.distributed.scatter(&t, Some(&t), 1).await
    });
    assert!(matches!(
        result,
        Err(DistError::ListNotOnRoot {
            rank: 0,
            root: 1,
            ..
        })
    ));
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
                       algorithms:\n  a: {module: no_such_file, wiring: ring_1d}\n");
    let dist = Torch::with_ccl(device.clone(), unknown).distributed;
    let message = dist.init_process_group("ahbm").unwrap_err().to_string();
    assert!(
        message.starts_with("no algorithm module `no_such_file` in algorithms/"),
        "{message}"
    );
    assert!(!dist.is_initialized());
    let too_many = ccl(
        "defaults: {algorithm: a, buffer_kind: tcm, n_elem: 8, world_size: 3}\n\
                        algorithms:\n  a: {module: ring_allreduce, wiring: ring_1d}\n",
    );
    let dist = Torch::with_ccl(Rc::clone(&device), too_many).distributed;
    let message = dist.init_process_group("ahbm").unwrap_err().to_string();
    assert_eq!(message, "world_size 3 needs 3 SIPs, but the machine has 2");
    assert!(!dist.is_initialized());
}

fn ccl(text: &str) -> CclConfig {
    let source = ConfigSource::Text {
        name: "ccl.yaml".into(),
        text: text.to_owned().into(),
    };
    CclConfig::load(&source, &[]).unwrap()
}

/// `init_process_group` on the default machine (or `sets` of it) with the
/// ccl.yaml `text`: its error message.
fn init_error(sets: &[&str], text: &str) -> String {
    let overrides: Vec<_> = sets
        .iter()
        .map(|s| kernbench::config::Override::parse(s).unwrap())
        .collect();
    let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap();
    let machine = std::sync::Arc::new(Machine::build(&spec).unwrap());
    let device = Device::from_machine(machine, DataMode::Off).unwrap();
    let dist = Torch::with_ccl(device, ccl(text)).distributed;
    let message = dist.init_process_group("ahbm").unwrap_err().to_string();
    assert!(!dist.is_initialized());
    message
}

#[test]
fn an_algorithm_runs_only_for_the_collective_it_declares() {
    let dist = torch().distributed;
    let error = dist
        .init_process_group_with("ahbm", Collective::AllReduce, "hello_send")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "ccl.yaml entry `hello_send` implements custom, not all_reduce: choose an algorithm \
         that declares all_reduce"
    );
    assert!(!dist.is_initialized());
}

#[test]
fn requirements_are_checked_at_init_not_by_a_deadlock() {
    let one_slot = "defaults: {algorithm: b, buffer_kind: tcm, n_elem: 8, ipcq: {slots: 1}}\n\
                    algorithms:\n  a: {module: test_double_send, wiring: ring_1d}\n  \
                    b: {module: ring_allreduce, wiring: ring_1d}\n";
    let device = torch().device().clone();
    let dist = Torch::with_ccl(device, ccl(one_slot)).distributed;
    let error = dist.init_process_group_with("ahbm", Collective::Custom, "a");
    assert_eq!(
        error.unwrap_err().to_string(),
        "ccl.yaml entry `a`: `test_double_send` needs at least 2 IPCQ slots per ring, \
         ipcq.slots is 1 (set ccl.yaml ipcq.slots: 2)"
    );
    let torus = ["system.sips.count=4", "system.sips.topology=torus_2d"];
    let three = "defaults: {algorithm: a, buffer_kind: tcm, n_elem: 8, world_size: 3}\n\
                 algorithms:\n  a: {module: intercube_allreduce, wiring: none}\n";
    assert!(
        init_error(&torus, three).starts_with(
            "ccl.yaml entry `a`: world_size 3 cannot run on the SIP grid torus_2d 2x2"
        ),
    );
}

#[test]
fn root_cube_and_params_reach_the_algorithm() {
    let root = "defaults: {algorithm: a, buffer_kind: tcm, n_elem: 8}\n\
                algorithms:\n  a: {module: intercube_allreduce, wiring: none, root_cube: 3}\n";
    assert_eq!(
        init_error(&[], root),
        "ccl.yaml entry `a`: `intercube_allreduce` requires: its root cube is the south-east \
         corner of the cube mesh (root_cube: 15), not 3"
    );
    let params = "defaults: {algorithm: a, buffer_kind: tcm, n_elem: 8}\n\
                  algorithms:\n  a: {module: ring_allreduce, wiring: ring_1d, \
                  params: {chunks: 4}}\n";
    assert_eq!(
        init_error(&[], params),
        "ccl.yaml entry `a`: params.chunks: `ring_allreduce` has no such parameter (it takes: \
         chunk)"
    );
}

#[test]
fn unequal_cube_tiles_are_refused_at_the_call() {
    let result = drive(|torch| async move {
        torch.distributed.init_process_group("ahbm")?;
        let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 16, 1);
        let t = torch.zeros(&[17, 8], DType::F16, &dp)?.named("ragged");
        torch.distributed.all_reduce(&t, ReduceOp::Sum).await
    });
    let message = result.unwrap_err().to_string();
    assert!(
        message.starts_with("tensor `ragged`: its cube tiles on SIP 0 differ in size ([32, 16,"),
        "{message}"
    );
}
