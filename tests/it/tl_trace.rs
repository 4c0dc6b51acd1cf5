//! PE_GEMM, PE_MATH and kernel programs on the virtual-time timeline, in a
//! process of its own (tracing callsites are process-wide; see `hw_trace.rs`).

use crate::tl_common;

use kernbench::mem::{DType, DataMode};
use kernbench::runtime::launch::LaunchReport;
use kernbench::tl::{Kernel, KernelError, Tl};
use kernbench::trace::ChromeTraceLayer;
use tl_common::*;
use tracing_subscriber::layer::SubscriberExt;

/// A 256 x 128 x 64 dot (two tiles), then a relu of the product, in a
/// phase `both` around a phase `dot`.
async fn dot_relu(tl: Tl, _: ()) -> Result<(), KernelError> {
    let _both = tl.phase("both");
    let a = tl.alloc(&[256, 64], DType::F16)?;
    let b = tl.alloc(&[64, 128], DType::F16)?;
    let dot = tl.phase("dot");
    let c = tl.dot(&a, &b).await?;
    drop(dot);
    tl.relu(&c).await.map(|_| ())
}

fn launch_once() -> LaunchReport<()> {
    let device = device(&spec(&[]), DataMode::Off);
    run(&device, Kernel::new("dot_relu", dot_relu), ONE, ()).unwrap()
}

#[test]
fn units_programs_and_phases_are_spans_on_their_tracks_and_tracing_changes_no_time() {
    if crate::own_process::elsewhere(
        "tl_trace::units_programs_and_phases_are_spans_on_their_tracks_and_tracing_changes_no_time",
    ) {
        return; // alone in its own process (see the module doc)
    }
    let (layer, handle) = ChromeTraceLayer::with_sim_clock();
    let subscriber = tracing_subscriber::registry().with(layer);
    let traced = tracing::subscriber::with_default(subscriber, launch_once);
    let program = &traced.programs[0];
    let start = program.start.as_ps();
    // Two 128 x 128 tiles, each moving 98 304 B of TCM traffic (more
    // than 64 cycles); fill 254 cycles; then the relu.
    let tile = 98_304;
    assert_eq!(
        handle.spans("sip0.cube0.pe0.gemm", "gemm"),
        [(start, tile), (start + tile, tile)]
    );
    let relu = (256 * 128u64).div_ceil(1024) + 4;
    let dot = 2 * tile + 254_000;
    assert_eq!(
        handle.spans("sip0.cube0.pe0.math", "math"),
        [(start + dot, relu * 1000)]
    );
    assert_eq!(handle.spans("sip0.cube0.pe0", "dot"), [(start, dot)]);
    let both = handle.spans("sip0.cube0.pe0", "both");
    assert_eq!(both, [(start, dot + relu * 1000)]);
    let kernel = handle.spans("sip0.cube0.pe0", "kernel");
    assert_eq!(kernel, [(start, (program.end - program.start).as_ps())]);
    assert_eq!(launch_once(), traced, "tracing changed simulated time");
}
