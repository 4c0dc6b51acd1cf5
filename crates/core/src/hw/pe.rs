//! A PE's compute units and their timing: [`GemmEngine`] (PE_GEMM, the
//! `rows × cols` MAC array) and [`MathEngine`] (PE_MATH, the vector unit),
//! and the pipeline that streams a GEMM's output tiles through an epilogue
//! on PE_MATH (seed ADR-0014's TileToken stages).
//!
//! Both units are FIFO [`SerialServer`]s (counted, traced on the tracks
//! `sip{s}.cube{c}.pe{p}.gemm` and `.math`). Timing, with `cyc(n)` the
//! length of `n` PE clock cycles:
//!
//! - **GEMM** `[M, K] × [K, N]`: the output is cut into `R × C` tiles
//!   (row-major; edge tiles are smaller). Tile `t` (`m_t × n_t`) holds the
//!   array for `g_t = max(cyc(K), ⌈bytes_t × 10^12 / B_tcm⌉)`, the larger
//!   of streaming `K` operand vectors and moving its TCM traffic
//!   `bytes_t = (m_t·K + K·n_t)·s_in + m_t·n_t·s_out·(1 + acc)` (roofline);
//!   its results leave the array `F = cyc(R + C − 2)` later (fill/drain,
//!   pipelined: the next tile streams meanwhile). Uncontended:
//!   [`gemm_formula`] `= Σ_t g_t + F`.
//! - **Math** over `E` elements holds PE_MATH for
//!   `cyc(⌈E / elements_per_cycle⌉ + MATH_PIPELINE_CYCLES)` ([`math_formula`]).
//! - **Pipeline** (a GEMM with an epilogue of `s` math steps): tile `t`
//!   reaches PE_MATH at `G_t + F` (`G_t` its GEMM end) and holds it for
//!   `m_t = cyc(s·(⌈m_t·n_t / epc⌉ + MATH_PIPELINE_CYCLES))`, so tile
//!   `t`'s epilogue overlaps tile `t + 1`'s GEMM. Uncontended:
//!   [`pipeline_formula`] `= max_j (Σ_{t≤j} g_t + F + Σ_{t≥j} m_t)`.
//!
//! A slow PE (`faults.compute`, ADR-0106) has engines made
//! [`with_slowdown`](GemmEngine::with_slowdown): every hold above is
//! stretched by its factor, rounded up to a picosecond; the formulas are
//! the healthy PE's.
//!
//! Knows shapes and element sizes only; nothing of addresses, tensors or
//! what the units compute.

use super::explain;
use super::server::{Activity, Reservation, SerialServer, ServerStats};
use super::{HwError, later};
use crate::config::units::Slowdown;
use crate::sim::{self, SimDuration, SimTime};
use crate::topology::PeSpec;

/// Cycles a PE_MATH job spends draining its pipeline after its last
/// element issues (estimate: a short vector pipeline).
pub const MATH_PIPELINE_CYCLES: u64 = 4;

/// A matrix product `[m, k] × [k, n]` as PE_GEMM sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmShape {
    /// Output rows.
    pub m: u64,
    /// Output columns.
    pub n: u64,
    /// Reduction length.
    pub k: u64,
    /// Bytes per input element.
    pub in_bytes: u64,
    /// Bytes per output element.
    pub out_bytes: u64,
    /// Whether the output is read too (`out += a × b`).
    pub accumulate: bool,
}

/// One job for the PE pipeline: a GEMM whose output tiles then pass
/// through `epilogue_steps` elementwise math steps on PE_MATH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineJob {
    /// The GEMM.
    pub gemm: GemmShape,
    /// Math steps applied to every output element (0: a plain GEMM).
    pub epilogue_steps: u64,
}

/// One output tile: rows and columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tile {
    rows: u64,
    cols: u64,
}

/// The output tiles of `shape` on a `spec` array, row-major.
fn tiles(spec: &PeSpec, shape: &GemmShape) -> Vec<Tile> {
    let (r, c) = (
        u64::from(spec.gemm.rows.get()),
        u64::from(spec.gemm.cols.get()),
    );
    let cut = |len: u64, step: u64| (0..len.div_ceil(step)).map(move |i| step.min(len - i * step));
    cut(shape.m, r)
        .flat_map(|rows| cut(shape.n, c).map(move |cols| Tile { rows, cols }))
        .collect()
}

/// TCM bytes one tile moves: its operand panels and its output.
fn tile_bytes(shape: &GemmShape, tile: Tile) -> u64 {
    let operands = (tile.rows + tile.cols)
        .saturating_mul(shape.k)
        .saturating_mul(shape.in_bytes);
    let passes = 1 + u64::from(shape.accumulate);
    let output = (tile.rows * tile.cols)
        .saturating_mul(shape.out_bytes)
        .saturating_mul(passes);
    operands.saturating_add(output)
}

/// `g_t`: how long tile `tile` holds the array.
fn tile_occupancy(spec: &PeSpec, shape: &GemmShape, tile: Tile) -> Result<SimDuration, HwError> {
    let compute = spec
        .clock
        .cycles(shape.k)
        .map_err(HwError::time("PE_GEMM"))?;
    let traffic = spec
        .tcm
        .bandwidth
        .transfer_time(tile_bytes(shape, tile))
        .map_err(HwError::time("PE_GEMM"))?;
    Ok(compute.max(traffic))
}

/// `F`: the array's fill and drain, `R + C − 2` cycles.
fn fill(spec: &PeSpec) -> Result<SimDuration, HwError> {
    let cycles = u64::from(spec.gemm.rows.get()) + u64::from(spec.gemm.cols.get()) - 2;
    spec.clock.cycles(cycles).map_err(HwError::time("PE_GEMM"))
}

/// Cycles of `steps` math steps over `elements`.
fn math_cycles(spec: &PeSpec, elements: u64, steps: u64) -> u64 {
    let per_cycle = u64::from(spec.math.elements_per_cycle.get());
    steps.saturating_mul(elements.div_ceil(per_cycle) + MATH_PIPELINE_CYCLES)
}

/// How long `steps` math steps over `elements` hold PE_MATH.
fn math_occupancy(spec: &PeSpec, elements: u64, steps: u64) -> Result<SimDuration, HwError> {
    spec.clock
        .cycles(math_cycles(spec, elements, steps))
        .map_err(HwError::time("PE_MATH"))
}

/// The uncontended time of a GEMM alone: `Σ_t g_t + F`.
pub fn gemm_formula(spec: &PeSpec, shape: &GemmShape) -> Result<SimDuration, HwError> {
    pipeline_formula(
        spec,
        &PipelineJob {
            gemm: *shape,
            epilogue_steps: 0,
        },
    )
}

/// The uncontended time of one math op over `elements`.
pub fn math_formula(spec: &PeSpec, elements: u64) -> Result<SimDuration, HwError> {
    math_occupancy(spec, elements, 1)
}

/// The uncontended time of a pipeline job, from submission to the end of
/// its last tile's epilogue: `max_j (Σ_{t≤j} g_t + F + Σ_{t≥j} m_t)`.
pub fn pipeline_formula(spec: &PeSpec, job: &PipelineJob) -> Result<SimDuration, HwError> {
    let fill = fill(spec)?;
    let add =
        |a: SimDuration, b: SimDuration| a.checked_add(b).map_err(HwError::time("PE pipeline"));
    let (mut gemm_end, mut math_end) = (SimDuration::ZERO, SimDuration::ZERO);
    for tile in tiles(spec, &job.gemm) {
        gemm_end = add(gemm_end, tile_occupancy(spec, &job.gemm, tile)?)?;
        let epilogue = math_occupancy(spec, tile.rows * tile.cols, job.epilogue_steps)?;
        math_end = add(add(gemm_end, fill)?.max(math_end), epilogue)?;
    }
    Ok(math_end)
}

/// PE_GEMM: one PE's matrix engine.
pub struct GemmEngine {
    spec: PeSpec,
    /// A slow PE's factor on every hold (`faults.compute`, ADR-0106).
    slowdown: Slowdown,
    server: SerialServer,
}

/// A pipeline job whose GEMM tiles are reserved; [`finish`](Self::finish)
/// runs their epilogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineRun {
    start: SimTime,
    /// Per tile: when it reaches PE_MATH, and how long its epilogue holds it.
    tiles: Vec<(SimTime, SimDuration)>,
    gemm_end: SimTime,
}

impl GemmEngine {
    /// An idle engine named `name` with `spec`'s array, clock and TCM.
    pub fn new(name: &str, spec: &PeSpec) -> Self {
        GemmEngine {
            spec: *spec,
            slowdown: Slowdown::NONE,
            server: SerialServer::new(name, Activity::Gemm),
        }
    }

    /// This engine `slowdown` times as slow: every tile's hold, the fill
    /// and the epilogues stretched (ADR-0106).
    #[must_use]
    pub fn with_slowdown(self, slowdown: Slowdown) -> Self {
        GemmEngine { slowdown, ..self }
    }

    /// The name given at creation (trace track, op-log node).
    /// Its server.
    pub fn server(&self) -> &SerialServer {
        &self.server
    }

    pub fn name(&self) -> &str {
        self.server.name()
    }

    /// Reserves the array for every tile of `job`, arriving now, back to
    /// back (FIFO behind earlier jobs). Nothing waits yet: sleep until
    /// [`PipelineRun::start`] to see the job begin.
    pub fn submit(&self, job: &PipelineJob) -> Result<PipelineRun, HwError> {
        let slow = |d| stretch(self.slowdown, d, "PE_GEMM");
        let fill = slow(fill(&self.spec)?)?;
        let mut start = None;
        let mut runs = Vec::new();
        for tile in tiles(&self.spec, &job.gemm) {
            let occupancy = slow(tile_occupancy(&self.spec, &job.gemm, tile)?)?;
            let held = self
                .server
                .reserve(occupancy, tile_bytes(&job.gemm, tile))?;
            start.get_or_insert(held.start);
            let epilogue = math_occupancy(&self.spec, tile.rows * tile.cols, job.epilogue_steps)?;
            let epilogue = slow(epilogue)?;
            runs.push((later(held.end, fill, self.name())?, epilogue));
        }
        let now = sim::now();
        let gemm_end = runs.last().map_or(now, |&(ready, _)| ready);
        Ok(PipelineRun {
            start: start.unwrap_or(now),
            tiles: runs,
            gemm_end,
        })
    }

    /// Tiles served (`jobs`), operand bytes and busy time as of `now`.
    pub fn stats(&self, now: SimTime) -> ServerStats {
        self.server.stats(now)
    }
}

impl PipelineRun {
    /// When the first tile starts on the array.
    pub fn start(&self) -> SimTime {
        self.start
    }

    /// When the last tile's results have left the array.
    pub fn gemm_end(&self) -> SimTime {
        self.gemm_end
    }

    /// Runs each tile's epilogue on `math` as the tile arrives there, in
    /// tile order; returns when the last one is done (at once, at
    /// [`gemm_end`](Self::gemm_end), without an epilogue).
    pub async fn finish(self, math: &MathEngine) -> Result<SimTime, HwError> {
        let mut end = self.gemm_end;
        let mut epilogues = false;
        for (ready, occupancy) in self.tiles {
            if occupancy == SimDuration::ZERO {
                continue;
            }
            epilogues = true;
            tiles_term(ready);
            explain::sleep_until(ready).await;
            let booked = math.server.reserve(occupancy, 0)?;
            if explain::recording() {
                explain::push_booking(&math.server, sim::now(), booked);
            }
            end = booked.end;
        }
        if !epilogues {
            // Waiting for the array alone: the same term as a tile's.
            tiles_term(end);
        }
        explain::sleep_until(end).await;
        Ok(end)
    }
}

/// The `--explain` term of a wait until PE_GEMM's tiles are `ready`.
fn tiles_term(ready: SimTime) {
    if explain::recording() {
        let ps = ready.saturating_since(sim::now()).as_ps();
        explain::push_named(
            "pe_gemm tiles",
            explain::Class::PeMath,
            explain::TermKind::Service,
            ps,
        );
    }
}

/// `duration` stretched by `slowdown` (itself for none), an overflow
/// named after `unit`.
fn stretch(
    slowdown: Slowdown,
    duration: SimDuration,
    unit: &'static str,
) -> Result<SimDuration, HwError> {
    slowdown.stretch(duration).map_err(HwError::time(unit))
}

/// PE_MATH: one PE's vector unit.
pub struct MathEngine {
    spec: PeSpec,
    /// A slow PE's factor on every hold (`faults.compute`, ADR-0106).
    slowdown: Slowdown,
    server: SerialServer,
}

impl MathEngine {
    /// An idle unit named `name` with `spec`'s clock and width.
    pub fn new(name: &str, spec: &PeSpec) -> Self {
        MathEngine {
            spec: *spec,
            slowdown: Slowdown::NONE,
            server: SerialServer::new(name, Activity::Math),
        }
    }

    /// This unit `slowdown` times as slow (ADR-0106).
    #[must_use]
    pub fn with_slowdown(self, slowdown: Slowdown) -> Self {
        MathEngine { slowdown, ..self }
    }

    /// The name given at creation (trace track, op-log node).
    /// Its server.
    pub fn server(&self) -> &SerialServer {
        &self.server
    }

    pub fn name(&self) -> &str {
        self.server.name()
    }

    /// Reserves the unit for one op over `elements`, arriving now (FIFO).
    pub fn reserve(&self, elements: u64) -> Result<Reservation, HwError> {
        let occupancy = math_occupancy(&self.spec, elements, 1)?;
        let occupancy = stretch(self.slowdown, occupancy, "PE_MATH")?;
        self.server.reserve(occupancy, 0)
    }

    /// Jobs served (ops and epilogue tiles) and busy time as of `now`.
    pub fn stats(&self, now: SimTime) -> ServerStats {
        self.server.stats(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Simulation;
    use crate::topology::{GemmSpec, PeParams, TopologySpec};

    fn pe(rows: u32) -> PeSpec {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        let count = crate::config::units::Count::new(rows).unwrap();
        let gemm = GemmSpec {
            rows: count,
            cols: count,
        };
        PeSpec::new(PeParams {
            gemm,
            ..**spec.pe()
        })
        .unwrap()
    }

    fn shape(m: u64, n: u64, k: u64) -> GemmShape {
        GemmShape {
            m,
            n,
            k,
            in_bytes: 2,
            out_bytes: 4,
            accumulate: false,
        }
    }

    #[test]
    fn edge_tiles_are_smaller_and_row_major() {
        let t = tiles(&pe(32), &shape(40, 70, 8));
        let dims: Vec<_> = t.iter().map(|t| (t.rows, t.cols)).collect();
        assert_eq!(
            dims,
            vec![(32, 32), (32, 32), (32, 6), (8, 32), (8, 32), (8, 6)]
        );
    }

    #[test]
    fn a_small_gemm_is_one_tile_plus_fill() {
        // 64 x 64 x 64 f16 on 128 x 128: 64 cycles beat 32 KiB of TCM
        // traffic at 1 TB/s (32.768 ns); fill is 254 cycles.
        let t = gemm_formula(&pe(128), &shape(64, 64, 64)).unwrap();
        assert_eq!(t.as_ps(), 64_000 + 254_000);
    }

    #[test]
    fn the_epilogue_of_one_tile_overlaps_the_next_tiles_gemm() {
        let pe = pe(32);
        let job = PipelineJob {
            gemm: shape(64, 32, 100),
            epilogue_steps: 2,
        };
        // Two tiles of 100 cycles; fill 62; epilogue 2 x (1 + 4) cycles.
        let t = pipeline_formula(&pe, &job).unwrap();
        assert_eq!(t.as_ps(), (100 + 100 + 62 + 10) * 1000);
        let mut simulation = Simulation::new();
        let gemm = std::rc::Rc::new(GemmEngine::new("gemm", &pe));
        let math = std::rc::Rc::new(MathEngine::new("math", &pe));
        let (g, m) = (gemm.clone(), math.clone());
        let done = simulation.spawn("job", async move {
            let run = g.submit(&job).unwrap();
            run.finish(&m).await.unwrap()
        });
        simulation.run().unwrap();
        assert_eq!(done.output().unwrap().as_ps(), t.as_ps());
        assert_eq!(math.stats(SimTime::from_ns(300)).jobs, 2);
    }

    #[test]
    fn a_slow_pe_takes_its_factor_times_every_hold() {
        let pe = pe(32);
        let job = PipelineJob {
            gemm: shape(64, 32, 100),
            epilogue_steps: 2,
        };
        let t = pipeline_formula(&pe, &job).unwrap();
        let slow: Slowdown = "2".parse().unwrap();
        let mut simulation = Simulation::new();
        let gemm = std::rc::Rc::new(GemmEngine::new("gemm", &pe).with_slowdown(slow));
        let math = std::rc::Rc::new(MathEngine::new("math", &pe).with_slowdown(slow));
        let (g, m) = (gemm.clone(), math.clone());
        let done = simulation.spawn("job", async move {
            let run = g.submit(&job).unwrap();
            let end = run.finish(&m).await.unwrap();
            let op = m.reserve(1024).unwrap();
            (end, op.end - op.start)
        });
        simulation.run().unwrap();
        let (end, op) = done.output().unwrap();
        assert_eq!(end.as_ps(), 2 * t.as_ps());
        assert_eq!(
            op,
            SimDuration::from_ps(2 * math_formula(&pe, 1024).unwrap().as_ps())
        );
    }
}
