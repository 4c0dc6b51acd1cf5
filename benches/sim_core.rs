//! Speed of the simulation core on the W1 (sleep storm) and W2 (ring
//! ping-pong) workloads. `cargo bench --bench sim_core`; criterion reports
//! the median time per run, from which events per second follow (W1 has
//! 2,048,000 events per run, W2 130,000).

use criterion::{Criterion, criterion_group, criterion_main};
use kernbench::sim::speed;

/// The allocator of every binary (ADR-0026): the simulator makes and
/// frees millions of small objects; mimalloc keeps them closer together.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn sim_core(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim_core");
    group.sample_size(10);
    group.bench_function("W1_sleep_storm", |b| {
        b.iter(|| speed::w1_sleep_storm().expect("W1 runs"))
    });
    group.bench_function("W2_ring_pingpong", |b| {
        b.iter(|| speed::w2_ring_pingpong().expect("W2 runs"))
    });
    group.finish();
}

criterion_group!(benches, sim_core);
criterion_main!(benches);
