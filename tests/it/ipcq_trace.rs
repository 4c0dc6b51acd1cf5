//! CCL trace lines (`RUST_LOG=kernbench::ccl=debug`). Alone in a process of
//! its own: tracing caches callsite interest process-wide, so a scoped
//! subscriber must not race other tests' threads.

use crate::tl_common;

use kernbench::ccl::BufferKind;
use kernbench::ccl::install::install;
use kernbench::ccl::topology::{Builtin, Wiring};
use kernbench::mem::{DType, DataMode};
use kernbench::runtime::launch::launch_with_ipcq;
use kernbench::sim::Simulation;
use kernbench::tl::{Dir, Grid, IpcqParams, Kernel, PeCoord, Tl};
use kernbench::topology::MemSpace;

use tl_common::{device, f16_bytes, spec, values};

const N: usize = 32;

/// pe0 sends 64 B east, pe1 receives it from the west.
fn exchange() {
    let device = device(&spec(&[]), DataMode::On);
    let pes = [0, 1].map(|pe| PeCoord {
        sip: 0,
        cube: 0,
        pe,
    });
    let wiring = Wiring::install(&Builtin::Ring1d.tables(2, None).unwrap()).unwrap();
    let network = install(
        &device,
        &wiring,
        &pes,
        BufferKind::Tcm,
        IpcqParams::default(),
    )
    .unwrap();
    let bytes = f16_bytes(&values(N, 9));
    let src = device.alloc(MemSpace::Hbm { sip: 0, cube: 0 }, 64).unwrap();
    device.write_untimed("host", src, &bytes).unwrap();
    let kernel = Kernel::new("exchange", |tl: Tl, src: u64| async move {
        if tl.program_id(0) == 0 {
            tl.send(Dir::E, &tl.view(src, &[N], DType::F16)?).await
        } else {
            tl.recv(Dir::W, &[N], DType::F16).await.map(|_| ())
        }
    });
    let mut simulation = Simulation::new();
    let grid = Grid { pes: 2, cubes: 1 };
    let host = simulation.spawn("host", async move {
        launch_with_ipcq(&device, &kernel, (0, grid), src, &network)
            .await
            .map(|_| ())
    });
    simulation.run().unwrap();
    host.output().unwrap().unwrap();
}

#[test]
fn ccl_trace_lines_have_the_guide_shape() {
    if crate::own_process::elsewhere("ipcq_trace::ccl_trace_lines_have_the_guide_shape") {
        return; // alone in its own process (see the module doc)
    }
    use std::sync::{Arc, Mutex};
    let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink = lines.clone();
    use tracing_subscriber::{Layer, filter::Targets, layer::SubscriberExt};
    let only_ccl: Targets = "kernbench::ccl=debug".parse().unwrap();
    let lines_layer = tracing_subscriber::fmt::layer()
        .with_writer(move || Capture(sink.clone()))
        .without_time()
        .with_target(false)
        .with_level(false)
        .with_filter(only_ccl);
    let subscriber = tracing_subscriber::registry().with(lines_layer);
    tracing::subscriber::with_default(subscriber, exchange);
    let text = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
    let send = regex_like(&text, "send] sip0.cube0.pe0 dir=E nbytes=64 seq=0");
    let recv = regex_like(&text, "recv] sip0.cube0.pe1 dir=W nbytes=64");
    assert!(send && recv, "{text}");
    assert!(
        text.lines().all(|l| l.trim_start().starts_with("[ccl t=")),
        "{text}"
    );
}

fn regex_like(text: &str, tail: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim();
        let Some(rest) = l.strip_prefix("[ccl t=") else {
            return false;
        };
        let (t, after) = rest.split_once(' ').unwrap_or(("", ""));
        let (whole, tenth) = t.split_once('.').unwrap_or(("", ""));
        whole.parse::<u64>().is_ok() && tenth.len() == 1 && after == tail
    })
}

struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
