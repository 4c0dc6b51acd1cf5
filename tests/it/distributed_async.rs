//! `all_reduce(tensor, async_op=True)`: the collective runs while the
//! caller goes on, `wait` returns when it is done (and the instant it
//! finished), and the result and the collective's own time are those of
//! the blocking call.

use std::cell::RefCell;
use std::rc::Rc;

use half::f16;
use kernbench::device::Device;
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::{DPPolicy, DistError, ReduceOp, Split, Torch, spawn};
use kernbench::sim::{self, SimDuration, Simulation};
use kernbench::topology::{Machine, TopologySpec};
use ndarray::Array2;

const CUBES: usize = 16;
const N_ELEM: usize = 64;

fn torch() -> Torch {
    let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
    let machine = std::sync::Arc::new(Machine::build(&spec).unwrap());
    Torch::new(Device::from_machine(machine, DataMode::On).unwrap())
}

/// How a rank calls the all-reduce.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Blocking,
    /// Async, with this much host "compute" (a sleep) before `wait`.
    Async(SimDuration),
}

/// Per rank: the time from the call to the result, from the call to the
/// collective's end, and the values.
type Results = Vec<(usize, SimDuration, SimDuration, Vec<f16>)>;

/// Every rank fills its tensor with `rank + 1` and all-reduces it.
fn all_reduce(mode: Mode) -> Results {
    let torch = torch();
    torch.distributed.init_process_group("ahbm").unwrap();
    let results = Rc::new(RefCell::new(Vec::new()));
    let (shared, host) = (results.clone(), torch.clone());
    let mut simulation = Simulation::new();
    let driver = simulation.spawn("driver", async move {
        spawn(2, move |rank| {
            let (torch, results) = (host.clone(), shared.clone());
            async move {
                let dp = DPPolicy::new(Split::RowWise, Split::Replicate, CUBES as u32, 1);
                let t = torch.zeros(&[CUBES, N_ELEM], DType::F16, &dp)?;
                let value = f16::from_f32((rank + 1) as f32);
                t.copy_from(&Array2::from_elem((CUBES, N_ELEM), value))
                    .await?;
                torch.distributed.barrier().await?;
                let start = sim::now();
                let finished = match mode {
                    Mode::Blocking => {
                        torch.distributed.all_reduce(&t, ReduceOp::Sum).await?;
                        sim::now()
                    }
                    Mode::Async(compute) => {
                        let work = torch.distributed.all_reduce_async(&t, ReduceOp::Sum)?;
                        assert!(
                            !work.is_completed(),
                            "the call returns before the collective ends"
                        );
                        sim::sleep(compute).await;
                        work.wait().await?
                    }
                };
                let (time, collective) = (sim::now() - start, finished - start);
                let values = t.to_ndarray::<f16>().await?.unwrap();
                results
                    .borrow_mut()
                    .push((rank, time, collective, values.into_iter().collect()));
                Ok::<(), DistError>(())
            }
        })
        .await
    });
    simulation.run().unwrap();
    driver.output().unwrap().unwrap();
    let mut results = results.take();
    results.sort_by_key(|r| r.0);
    results
}

#[test]
fn async_all_reduce_gives_the_blocking_result_in_the_blocking_time() {
    let blocking = all_reduce(Mode::Blocking);
    let asynchronous = all_reduce(Mode::Async(SimDuration::ZERO));
    // Every tile of both ranks: 16 × 1 + 16 × 2.
    let expected = f16::from_f32((CUBES * (1 + 2)) as f32);
    for (rank, _, _, values) in &asynchronous {
        assert!(values.iter().all(|&v| v == expected), "rank {rank}");
    }
    assert_eq!(blocking, asynchronous);
}

#[test]
fn host_work_before_wait_overlaps_the_collective() {
    let alone = all_reduce(Mode::Blocking)[0].1;
    let half = SimDuration::from_ps(alone.as_ps() / 2);
    // Shorter host work is hidden entirely; longer work is what is waited.
    assert_eq!(all_reduce(Mode::Async(half))[0].1, alone);
    let longer = alone.checked_add(SimDuration::from_ns(100)).unwrap();
    let late = &all_reduce(Mode::Async(longer))[0];
    assert_eq!(late.1, longer);
    // `wait` reports when the collective ended, not when it was waited for.
    assert_eq!(late.2, alone);
}

#[test]
fn argument_errors_come_from_the_call() {
    let torch = torch();
    torch.distributed.init_process_group("ahbm").unwrap();
    let mut simulation = Simulation::new();
    let handle = simulation.spawn("driver", async move {
        // Four tiles where the algorithm runs on sixteen cubes.
        let dp = DPPolicy::new(Split::RowWise, Split::Replicate, 4, 1);
        let t = torch.zeros(&[4, N_ELEM], DType::F16, &dp).unwrap();
        torch.distributed.all_reduce_async(&t, ReduceOp::Sum).err()
    });
    simulation.run().unwrap();
    assert!(matches!(
        handle.output().unwrap(),
        Some(DistError::TileMismatch { tiles: 4, .. })
    ));
}
