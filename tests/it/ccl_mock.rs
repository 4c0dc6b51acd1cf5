//! The mock runtime (`runtime::testing::run_kernel_in_mock`): the seeds'
//! author-guide unit tests in Rust — hello_send and ring_allreduce on four
//! ranks, an algorithm in hand with a `neighbors` hook, and typed errors.

use half::f16;
use kernbench::ccl::registry;
use kernbench::ccl::topology::{Dir, NeighborMap};
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs};
use kernbench::runtime::testing::{MockError, run_kernel_in_mock};
use kernbench::tl::Kernel;

/// Rank `r`'s tile: `n` values `r + 1 + i / 8`, exact in f16.
fn tile(r: usize, n: usize) -> Vec<f16> {
    (0..n)
        .map(|i| f16::from_f32(r as f32 + 1.0 + i as f32 / 8.0))
        .collect()
}

#[test]
fn hello_send_on_a_ring_of_four_moves_each_tile_east() {
    let inputs: Vec<_> = (0..4).map(|r| tile(r, 8)).collect();
    let outputs = run_kernel_in_mock("hello_send", 4, "ring_1d", &inputs).unwrap();
    assert_eq!(outputs.len(), 4);
    for (r, output) in outputs.iter().enumerate() {
        assert_eq!(output, &inputs[(r + 3) % 4], "rank {r}");
    }
}

#[test]
fn ring_allreduce_on_four_ranks_gives_every_rank_the_sum() {
    let n = 16;
    let inputs: Vec<_> = (0..4).map(|r| tile(r, n)).collect();
    let expected: Vec<f32> = (0..n)
        .map(|i| inputs.iter().map(|t| t[i].to_f32()).sum())
        .collect();
    let algorithm = registry::find("ring_allreduce").unwrap();
    let outputs = run_kernel_in_mock(algorithm.as_ref(), 4, "ring_1d", &inputs).unwrap();
    for (r, output) in outputs.iter().enumerate() {
        for (i, (got, want)) in output.iter().zip(&expected).enumerate() {
            let got = got.to_f32();
            assert!(
                (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                "rank {r}[{i}]: {got} != {want}"
            );
        }
    }
}

/// hello_send's kernel on a skip ring (E → rank + 2) built by the
/// `neighbors` hook: the W ring then receives from rank − 2.
struct SkipHello;

impl CclAlgorithm for SkipHello {
    fn collective(&self) -> Collective {
        Collective::Custom
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        registry::find("hello_send").unwrap().kernel()
    }

    fn neighbors(&self, endpoint: usize, n: usize, _map: &mut NeighborMap) -> Option<NeighborMap> {
        Some(NeighborMap::from([
            (Dir::E, (endpoint + 2) % n),
            (Dir::W, (endpoint + n - 2) % n),
        ]))
    }
}

#[test]
fn an_algorithm_in_hand_runs_with_its_neighbors_hook() {
    let inputs: Vec<_> = (0..5).map(|r| tile(r, 4)).collect();
    let algorithm: &dyn CclAlgorithm = &SkipHello;
    let outputs = run_kernel_in_mock(algorithm, 5, "ring_1d", &inputs).unwrap();
    for (r, output) in outputs.iter().enumerate() {
        assert_eq!(output, &inputs[(r + 3) % 5], "rank {r}");
    }
}

#[test]
fn wrong_inputs_unknown_names_and_kernel_failures_are_typed_errors() {
    let three: Vec<_> = (0..3).map(|r| tile(r, 8)).collect();
    let error = run_kernel_in_mock("hello_send", 4, "ring_1d", &three).unwrap_err();
    assert!(matches!(
        error,
        MockError::InputCount {
            world_size: 4,
            inputs: 3
        }
    ));
    assert_eq!(
        error.to_string(),
        "mock run: 3 input tile(s) for world_size 4 (one per rank)"
    );

    let ragged = vec![tile(0, 8), tile(1, 8), tile(2, 7), tile(3, 8)];
    let error = run_kernel_in_mock("hello_send", 4, "ring_1d", &ragged).unwrap_err();
    assert!(matches!(
        error,
        MockError::InputLength {
            rank: 2,
            len: 7,
            expected: 8
        }
    ));

    let four: Vec<_> = (0..4).map(|r| tile(r, 8)).collect();
    let error = run_kernel_in_mock("nope", 4, "ring_1d", &four).unwrap_err();
    assert!(matches!(error, MockError::UnknownAlgorithm(_)), "{error}");
    let error = run_kernel_in_mock("hello_send", 4, "ring_9d", &four).unwrap_err();
    assert!(matches!(error, MockError::Topology(_)), "{error}");

    // tree_binary has no E ring at the leaves: the launch fails, naming the PE.
    let error = run_kernel_in_mock("hello_send", 4, "tree_binary", &four).unwrap_err();
    assert!(matches!(error, MockError::Launch(_)), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("kernel `hello_send` failed on"),
        "{message}"
    );
    assert!(message.contains("(sip 0, cube 0, pe "), "{message}");
}

/// The author guide's common mistake 3, as it says: hello_send with a tile
/// larger than a 64 KiB slot. Two segments (128 KiB) are sent, and the
/// `recv` of them fails naming the ring, the size and the slot; sixteen
/// (1 MiB), more than the ring has slots, leave every endpoint blocked in
/// its send: the deadlock report.
#[test]
fn a_tile_larger_than_a_slot_is_an_error_naming_the_ipcq() {
    let run = |n: usize| {
        let inputs: Vec<_> = (0..4).map(|r| tile(r, n)).collect();
        run_kernel_in_mock("hello_send", 4, "ring_1d", &inputs)
            .unwrap_err()
            .to_string()
    };
    let two = run(64 * 1024);
    let said = "recv: 131072 B does not fit a 65536 B slot of ring sip0.cube0.pe1:W";
    assert!(two.contains(said), "{two}");
    let sixteen = run(512 * 1024);
    assert!(sixteen.to_lowercase().contains("deadlock"), "{sixteen}");
}
