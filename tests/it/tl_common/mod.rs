//! Helpers shared by the `tl_*` and `launch_*` tests: a device, one launch
//! run to completion, and f16/f32 byte conversions.

#![allow(dead_code)]

use std::rc::Rc;

use half::f16;
use kernbench::config::Override;
use kernbench::device::Device;
use kernbench::mem::DataMode;
use kernbench::runtime::launch::{LaunchError, LaunchReport, launch};
use kernbench::sim::Simulation;
use kernbench::tl::{Grid, Kernel};
use kernbench::topology::TopologySpec;

/// The default machine with `sets` overrides (`key.path=value`).
pub fn spec(sets: &[&str]) -> TopologySpec {
    let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    TopologySpec::load(&TopologySpec::default_source(), &overrides).unwrap()
}

/// A fresh device of `spec`'s machine.
pub fn device(spec: &TopologySpec, data: DataMode) -> Rc<Device> {
    Device::new(spec, data).unwrap()
}

/// Launches `kernel` on SIP 0 over `grid` and runs the simulation to its
/// end; the launch's result.
pub fn run<A: Clone + 'static, T: 'static>(
    device: &Rc<Device>,
    kernel: Kernel<A, T>,
    grid: Grid,
    args: A,
) -> Result<LaunchReport<T>, LaunchError> {
    let mut simulation = Simulation::new();
    let d = device.clone();
    let host = simulation.spawn(
        "host",
        async move { launch(&d, &kernel, 0, grid, args).await },
    );
    simulation.run().unwrap();
    host.output().unwrap()
}

/// One program on PE 0 of cube 0.
pub const ONE: Grid = Grid { pes: 1, cubes: 1 };

/// `n` deterministic values in [-1, 1), exactly representable in f16.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            f16::from_f32(2.0 * unit - 1.0).to_f32()
        })
        .collect()
}

pub fn f16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_le_bytes())
        .collect()
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub fn from_f16(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

pub fn from_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `a [m, k] × b [k, n]`, in f64.
pub fn matmul(a: &[f32], b: &[f32], [m, n, k]: [usize; 3]) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|l| f64::from(a[i * k + l]) * f64::from(b[l * n + j]))
                .sum();
        }
    }
    c
}

/// Asserts `|got − want| ≤ tol × max(1, |want|)` everywhere.
pub fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(err <= tol * w.abs().max(1.0), "element {i}: {g} vs {w}");
    }
}
