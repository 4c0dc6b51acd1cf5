//! Kernel launch: one named [`Kernel`] over a [`Grid`] of one SIP, one
//! program (a sim task with its own [`Tl`]) per PE, dispatched the way the
//! machine does it (seed ADR-0046's dispatch-overhead model):
//!
//! ```text
//! host     kernel_launch_overhead, then a 64 B command over PCIe (host → PCIe EP → IO_CPU)
//! IO_CPU   dispatch_overhead; stamps target_start = dispatched + max_c reach_c; fans out
//! cube c   command over the management bus (IO_CPU → M_CPU), M_CPU dispatch_overhead,
//!          delivery over the cube's NoC to each PE (M_CPU → PE); every program starts
//!          at max(target_start, delivered)
//! PE       the program runs; the cube answers when all its programs have ended
//!          (M_CPU → IO_CPU), and the IO_CPU tells the host (IO_CPU → PCIe EP → host)
//! ```
//!
//! `reach_c` is cube `c`'s uncontended command transit, M_CPU dispatch and
//! delivery to its farthest PE, so every program of the launch starts at
//! the common `target_start`. [`dispatch_cost`] gives each term; without
//! contention a launch takes exactly [`DispatchCost::launch_time`] of its
//! programs' run times (`docs/latency-model.md`, "Kernel launch").
//!
//! A launch completes when every program has finished. The first program
//! to fail cancels the others (and their pipeline jobs) at once, and the
//! launch returns its error, naming the program's `(sip, cube, pe)`;
//! scratch left in TCM is freed either way. [`launch_with_ipcq`] attaches an
//! installed IPCQ network to every program's `Tl`.

use std::cell::RefCell;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;

use crate::device::{Device, DeviceError};
use crate::hw::{CubeFanout, HwError, Mcpu, PeCommand, explain};
use crate::sim::{self, Event, SimDuration, SimTime};
use crate::tl::{Grid, IpcqNetwork, Kernel, KernelError, PeCoord, Tl};
use crate::topology::{Machine, NodeId, Path, View};

/// Bytes of one kernel command, and of one completion message.
pub const COMMAND_BYTES: u64 = 64;

/// Why a launch did not run to completion.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A grid without programs.
    #[error("grid {grid} has no programs")]
    EmptyGrid {
        /// The grid asked for.
        grid: Grid,
    },
    /// A program whose PE (or cube, or SIP) does not exist.
    #[error("no PE for the program at (sip {sip}, cube {cube}, pe {pe}): {reason}")]
    NoSuchPe {
        /// SIP asked for.
        sip: u32,
        /// Cube (program id 1).
        cube: u32,
        /// PE (program id 0).
        pe: u32,
        /// What the machine has instead.
        reason: String,
    },
    /// A program failed; the others were cancelled.
    #[error(
        "kernel `{kernel}` failed on {coord} (sip {}, cube {}, pe {}): {source}",
        coord.sip, coord.cube, coord.pe
    )]
    Program {
        /// The kernel.
        kernel: String,
        /// Where it failed.
        coord: PeCoord,
        /// Why.
        source: KernelError,
    },
    /// The command or a response could not be routed or timed.
    #[error("dispatch: {0}")]
    Dispatch(#[from] DeviceError),
}

impl From<HwError> for LaunchError {
    fn from(error: HwError) -> Self {
        LaunchError::Dispatch(DeviceError::Hw(error))
    }
}

/// One program of a finished launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramReport<T> {
    /// Its PE (`program_id(0)` = `pe`, `program_id(1)` = `cube`).
    pub coord: PeCoord,
    /// When it started.
    pub start: SimTime,
    /// When it ended (its pipeline jobs drained, its scratch freed).
    pub end: SimTime,
    /// What the kernel returned.
    pub output: T,
}

/// A finished launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchReport<T> {
    /// The kernel's name.
    pub kernel: String,
    /// The SIP it ran on.
    pub sip: u32,
    /// Its grid.
    pub grid: Grid,
    /// When `launch` was called.
    pub start: SimTime,
    /// The common start time the IO_CPU stamped.
    pub target_start: SimTime,
    /// When the host learnt that every program had finished.
    pub end: SimTime,
    /// Every program, cube by cube, PEs in order.
    pub programs: Vec<ProgramReport<T>>,
}

/// The uncontended cost of dispatching a launch, term by term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchCost {
    /// The host's `kernel_launch_overhead`.
    pub host: SimDuration,
    /// The command's transit host → PCIe EP → IO_CPU.
    pub command: SimDuration,
    /// The IO_CPU's `dispatch_overhead`.
    pub io_cpu: SimDuration,
    /// Per cube: command transit IO_CPU → M_CPU, the M_CPU's
    /// `dispatch_overhead`, and delivery to its farthest PE of the grid.
    pub reach: Vec<SimDuration>,
    /// Per cube: the response's transit M_CPU → IO_CPU.
    pub response: Vec<SimDuration>,
    /// The completion's transit IO_CPU → PCIe EP → host.
    pub completion: SimDuration,
}

impl DispatchCost {
    /// From the call to the common start: `host + command + io_cpu +
    /// max_c reach_c`.
    pub fn to_target_start(&self) -> Result<SimDuration, HwError> {
        let farthest = self.reach.iter().copied().max().unwrap_or_default();
        sum([self.host, self.command, self.io_cpu, farthest])
    }

    /// The whole launch when cube `c`'s longest program runs `kernel[c]`:
    /// `to_target_start + max_c (kernel_c + response_c) + completion`.
    pub fn launch_time(&self, kernel: &[SimDuration]) -> Result<SimDuration, HwError> {
        let cubes = kernel.iter().zip(&self.response);
        let slowest = cubes
            .map(|(&k, &r)| sum([k, r]))
            .try_fold(SimDuration::ZERO, |max, t| t.map(|t| t.max(max)))?;
        sum([self.to_target_start()?, slowest, self.completion])
    }
}

fn sum<const N: usize>(terms: [SimDuration; N]) -> Result<SimDuration, HwError> {
    terms
        .into_iter()
        .try_fold(SimDuration::ZERO, |a, b| a.checked_add(b))
        .map_err(HwError::time("launch"))
}

/// The uncontended dispatch cost of a launch of `grid` on `sip`.
pub fn dispatch_cost(device: &Device, sip: u32, grid: Grid) -> Result<DispatchCost, LaunchError> {
    Ok(DispatchPlan::new(device, sip, grid)?.cost)
}

/// Runs `kernel` with `args` (cloned for each program) on PEs
/// `0..grid.pes` of cubes `0..grid.cubes` of SIP `sip`; returns when every
/// program has finished and the host knows it. See the module docs.
pub async fn launch<A: Clone + 'static, T: 'static>(
    device: &Rc<Device>,
    kernel: &Kernel<A, T>,
    sip: u32,
    grid: Grid,
    args: A,
) -> Result<LaunchReport<T>, LaunchError> {
    launch_on(device, kernel, (sip, grid), args, None).await
}

/// [`launch`] with `network` attached to every program's `Tl`, so the
/// kernel can `send` and `recv` on its installed IPCQ rings. Slots a
/// program still holds when it ends are released.
pub async fn launch_with_ipcq<A: Clone + 'static, T: 'static>(
    device: &Rc<Device>,
    kernel: &Kernel<A, T>,
    (sip, grid): (u32, Grid),
    args: A,
    network: &Rc<IpcqNetwork>,
) -> Result<LaunchReport<T>, LaunchError> {
    launch_on(device, kernel, (sip, grid), args, Some(network.clone())).await
}

async fn launch_on<A: Clone + 'static, T: 'static>(
    device: &Rc<Device>,
    kernel: &Kernel<A, T>,
    (sip, grid): (u32, Grid),
    args: A,
    network: Option<Rc<IpcqNetwork>>,
) -> Result<LaunchReport<T>, LaunchError> {
    let plan = DispatchPlan::new(device, sip, grid)?;
    let failure = Rc::new(Failure::new(kernel.name()));
    let start = sim::now();
    let context = LaunchContext {
        device,
        kernel,
        args,
        failure: &failure,
        network,
        programs: RefCell::new(Vec::new()),
    };
    let run = pin!(context.dispatch(&plan));
    let Some(done) = failure.cancel.cancels(run).await else {
        return Err(failure.cancelled(&context.programs.borrow()));
    };
    let (target_start, programs) = done?;
    let Some(programs) = programs else {
        return Err(failure.take());
    };
    Ok(LaunchReport {
        kernel: kernel.name().to_owned(),
        sip,
        grid,
        start,
        target_start,
        end: sim::now(),
        programs,
    })
}

/// The programs' PEs, cube by cube.
fn coords(sip: u32, grid: Grid) -> impl Iterator<Item = PeCoord> {
    (0..grid.cubes).flat_map(move |cube| (0..grid.pes).map(move |pe| PeCoord { sip, cube, pe }))
}

/// The first program failure of a launch, and the signal that cancels the
/// rest.
struct Failure {
    kernel: String,
    cancel: Event,
    error: RefCell<Option<LaunchError>>,
}

impl Failure {
    fn new(kernel: &str) -> Self {
        Failure {
            kernel: kernel.to_owned(),
            cancel: Event::new(&format!("launch of {kernel}: cancel")),
            error: RefCell::new(None),
        }
    }

    /// Keeps the first failure and cancels the launch.
    fn record(&self, coord: PeCoord, source: KernelError) {
        let mut error = self.error.borrow_mut();
        if error.is_none() {
            let kernel = self.kernel.clone();
            *error = Some(LaunchError::Program {
                kernel,
                coord,
                source,
            });
        }
        self.cancel.set();
    }

    /// The recorded failure.
    fn take(&self) -> LaunchError {
        self.error
            .take()
            .expect("a launch is cancelled only after a failure is recorded")
    }

    /// The recorded failure, after freeing the programs' scratch.
    fn cancelled(&self, programs: &[Tl]) -> LaunchError {
        for tl in programs {
            if let Err(error) = tl.release_all() {
                tracing::warn!(
                    target: "kernbench::runtime::launch",
                    "freeing scratch of {} after a failed launch: {error}",
                    tl.coord()
                );
            }
        }
        self.take()
    }
}

/// A message's route and its uncontended transit time.
struct Route {
    path: Arc<Path>,
    time: SimDuration,
}

/// One cube's part of the dispatch.
struct CubePlan {
    mcpu: Rc<Mcpu>,
    command: Route,
    response: Route,
    /// M_CPU → PE delivery time, per PE of the grid.
    delivery: Vec<SimDuration>,
}

/// Every route of a launch and its cost.
struct DispatchPlan {
    sip: u32,
    grid: Grid,
    command: Route,
    cubes: Vec<CubePlan>,
    completion: Route,
    cost: DispatchCost,
}

impl DispatchPlan {
    fn new(device: &Device, sip: u32, grid: Grid) -> Result<Self, LaunchError> {
        let fabric = device.fabric();
        let machine = fabric.machine();
        let pes = check_grid(machine, sip, grid)?;
        let route = |from: NodeId, to: NodeId, view: View| -> Result<Route, DeviceError> {
            let path = fabric.router().find_path_in(from, to, view)?;
            let time = fabric.send_formula(&path, COMMAND_BYTES)?;
            Ok(Route { path, time })
        };
        let resolver = fabric.router().resolver();
        let io_cpu = resolver.find_io_cpu(sip).map_err(DeviceError::from)?;
        let host = machine.host();
        let cubes = pes
            .iter()
            .enumerate()
            .map(|(cube, pes)| {
                let mcpu = resolver.find_m_cpu(sip, cube as u32)?;
                let delivery = pes
                    .iter()
                    .map(|&pe| Ok(route(mcpu, pe, View::CubeLocal)?.time))
                    .collect::<Result<_, DeviceError>>()?;
                Ok(CubePlan {
                    mcpu: fabric.mcpu(sip, cube as u32).clone(),
                    command: route(io_cpu, mcpu, View::All)?,
                    response: route(mcpu, io_cpu, View::All)?,
                    delivery,
                })
            })
            .collect::<Result<Vec<_>, DeviceError>>()?;
        let command = route(host, io_cpu, View::All)?;
        let completion = route(io_cpu, host, View::All)?;
        let cost = cost(machine, &command, &cubes, &completion)?;
        Ok(DispatchPlan {
            sip,
            grid,
            command,
            cubes,
            completion,
            cost,
        })
    }
}

/// The terms of [`DispatchCost`] from the routes.
fn cost(
    machine: &Machine,
    command: &Route,
    cubes: &[CubePlan],
    completion: &Route,
) -> Result<DispatchCost, HwError> {
    let spec = machine.spec();
    let reach = cubes
        .iter()
        .map(|cube| {
            let farthest = cube.delivery.iter().copied().max().unwrap_or_default();
            sum([
                cube.command.time,
                spec.cube().mcpu.dispatch_overhead,
                farthest,
            ])
        })
        .collect::<Result<_, _>>()?;
    Ok(DispatchCost {
        host: spec.system().host.kernel_launch_overhead,
        command: command.time,
        io_cpu: spec.sip().io_cpu.dispatch_overhead,
        reach,
        response: cubes.iter().map(|cube| cube.response.time).collect(),
        completion: completion.time,
    })
}

/// The PE nodes of the grid, per cube; the first program (cube by cube)
/// whose PE does not exist is an error naming it.
fn check_grid(machine: &Machine, sip: u32, grid: Grid) -> Result<Vec<Vec<NodeId>>, LaunchError> {
    if grid.programs() == 0 {
        return Err(LaunchError::EmptyGrid { grid });
    }
    let nodes = coords(sip, grid)
        .map(|c| {
            machine
                .pe(c.sip, c.cube, c.pe)
                .ok_or_else(|| no_such_pe(machine, c))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(nodes.chunks(grid.pes as usize).map(<[_]>::to_vec).collect())
}

/// The error for a program at `coord`, saying what the machine has.
fn no_such_pe(machine: &Machine, coord: PeCoord) -> LaunchError {
    let PeCoord { sip, cube, pe } = coord;
    let reason = if sip >= machine.sip_count() {
        format!("the machine has {} SIPs", machine.sip_count())
    } else if cube >= machine.cubes_per_sip() {
        format!("a SIP has {} cubes", machine.cubes_per_sip())
    } else {
        format!("a cube has {} PEs", machine.pes_per_cube())
    };
    LaunchError::NoSuchPe {
        sip,
        cube,
        pe,
        reason,
    }
}

/// What every part of one launch shares.
struct LaunchContext<'a, A, T> {
    device: &'a Rc<Device>,
    kernel: &'a Kernel<A, T>,
    args: A,
    failure: &'a Rc<Failure>,
    /// The IPCQ network every program is attached to.
    network: Option<Rc<IpcqNetwork>>,
    /// The programs made so far: a cube's when its command arrives, so
    /// that a launch waiting for its dispatch holds none (issue 40 item
    /// 12: thousands of pending sends each held sixteen).
    programs: RefCell<Vec<Tl>>,
}

/// Each program's report, or `None` for one that failed or was cancelled.
type Outputs<T> = Option<Vec<ProgramReport<T>>>;

impl<A: Clone + 'static, T: 'static> LaunchContext<'_, A, T> {
    /// Host → IO_CPU → cubes → IO_CPU → host; the common start time and
    /// the programs' reports.
    async fn dispatch(&self, plan: &DispatchPlan) -> Result<(SimTime, Outputs<T>), LaunchError> {
        let fabric = self.device.fabric();
        if explain::recording() {
            let ps = plan.cost.host.as_ps();
            explain::push_named(
                "host",
                explain::Class::Launch,
                explain::TermKind::Service,
                ps,
            );
        }
        explain::sleep_until(sim::now() + plan.cost.host).await;
        fabric
            .send(&fabric.route(&plan.command.path)?, COMMAND_BYTES)
            .await?;
        let cubes = (0..)
            .zip(&plan.cost.reach)
            .map(|(cube, &reach)| CubeFanout {
                reach,
                run: move |target_start| self.run_cube(cube, plan, target_start),
            })
            .collect();
        let io = fabric.io_cpu(plan.sip).launch(cubes).await?;
        fabric
            .send(&fabric.route(&plan.completion.path)?, COMMAND_BYTES)
            .await?;
        let mut reports = Vec::with_capacity(plan.grid.programs() as usize);
        for cube in io.responses {
            reports.extend(cube?);
        }
        Ok((io.target_start, reports.into_iter().collect()))
    }

    /// Cube `index` of `plan`: command in, M_CPU dispatch and delivery,
    /// its programs (made now), response out.
    async fn run_cube(
        &self,
        index: u32,
        plan: &DispatchPlan,
        target_start: SimTime,
    ) -> Result<Vec<Option<ProgramReport<T>>>, LaunchError> {
        let cube = &plan.cubes[index as usize];
        let fabric = self.device.fabric();
        fabric
            .send(&fabric.route(&cube.command.path)?, COMMAND_BYTES)
            .await?;
        let programs = self.programs_of_cube(index, plan)?;
        let commands = programs
            .iter()
            .zip(&cube.delivery)
            .map(|(tl, &delivery)| PeCommand {
                delivery,
                kernel: self.spawn_program(tl.clone()),
            })
            .collect();
        let done = cube.mcpu.run_kernels(target_start, commands).await?;
        fabric
            .send(&fabric.route(&cube.response.path)?, COMMAND_BYTES)
            .await?;
        Ok(done.outputs)
    }

    /// One `Tl` per PE of cube `cube` of the launch's grid, each attached
    /// to the launch's network and kept for freeing after a failure.
    fn programs_of_cube(&self, cube: u32, plan: &DispatchPlan) -> Result<Vec<Tl>, LaunchError> {
        let machine = self.device.fabric().machine();
        let programs = (0..plan.grid.pes)
            .map(|pe| {
                let coord = PeCoord {
                    sip: plan.sip,
                    cube,
                    pe,
                };
                let cancel = self.failure.cancel.clone();
                Tl::new(
                    self.device.clone(),
                    (coord, plan.grid),
                    cancel,
                    self.network.clone(),
                )
                .ok_or_else(|| no_such_pe(machine, coord))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.programs.borrow_mut().extend(programs.iter().cloned());
        Ok(programs)
    }

    /// Starts the program of `tl` as a task of its own (when polled: the
    /// M_CPU polls it at the program's start) and waits for it.
    async fn spawn_program(&self, tl: Tl) -> Option<ProgramReport<T>> {
        let name = format!("{}:{}", self.kernel.name(), tl.coord());
        let program = run_program(
            self.kernel.clone(),
            tl,
            self.args.clone(),
            self.failure.clone(),
        );
        sim::spawn(&name, program).await.ok().flatten()
    }
}

/// One program: the kernel, then its pipeline drain and scratch release,
/// each cancelled when the launch is. A failure is recorded (cancelling
/// the launch) and gives `None`, as a cancelled program does. The task's
/// future itself, with the kernel's future inside it one level down: a
/// poll passes no other wrapper (ADR-0063).
async fn run_program<A: 'static, T: 'static>(
    kernel: Kernel<A, T>,
    tl: Tl,
    args: A,
    failure: Rc<Failure>,
) -> Option<ProgramReport<T>> {
    let coord = tl.coord();
    let _span = tracing::trace_span!(target: "kernbench::runtime::launch", "kernel", component = %coord, kernel = kernel.name());
    let start = sim::now();
    let cancel = &failure.cancel;
    let output = match cancel.cancels(kernel.call(tl.clone(), args)).await? {
        Ok(output) => output,
        Err(source) => {
            failure.record(coord, source);
            return None;
        }
    };
    if let Err(source) = cancel.cancels(pin!(tl.finish())).await? {
        failure.record(coord, source);
        return None;
    }
    Some(ProgramReport {
        coord,
        start,
        end: sim::now(),
        output,
    })
}
