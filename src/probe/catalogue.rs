//! Which cases the probe runs, with their exact cube choices.
//!
//! - `h2d_best` / `h2d_worst`: host → HBM of the IO cube (where the PCIe
//!   endpoint attaches) / of the cube farthest from the host (most hops; the
//!   highest cube index on ties).
//! - `d2h_best` / `d2h_worst`: the same cubes, read back to the host.
//! - `pe_dma_local`: sip0.cube0.pe0 reads cube 0's HBM into its TCM.
//! - `pe_dma_neighbour`: the same PE reads the HBM of cube 0's east
//!   neighbour (south if the mesh is one column wide), one UCIe crossing.
//! - `pe_dma_far`: the same PE reads the HBM farthest from it in its SIP.
//! - `pe_dma_other_sip`: the same PE reads cube 0's HBM of SIP 1.
//! - `size/<bytes>`: `pe_dma_local` at 1/8, 1, 8 and 32 times the reference.
//! - `load/<k>`: k PEs of cube 0 (1, 2, 4, 6, 8, capped at the PE count)
//!   read the far HBM at once.
//!
//! Cases a machine cannot have (a neighbour on a single-cube SIP, another
//! SIP on a one-SIP machine) are left out.

use std::rc::Rc;
use std::sync::Arc;

use super::REFERENCE_BYTES;
use crate::hw::{DmaEngine, Fabric, Mcpu};
use crate::topology::{Machine, MemSpace, NodeId, PathRouter};

/// What kind of traffic a case is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Host to device.
    H2d,
    /// Device to host.
    D2h,
    /// A PE's DMA engine reading HBM into its TCM.
    PeDma,
}

/// Which DMA engine issues a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The host, through the M_CPU.DMA of this cube.
    Host {
        /// SIP of the cube.
        sip: u32,
        /// The cube whose M_CPU.DMA issues.
        cube: u32,
    },
    /// A PE's PE_DMA.
    PeDma {
        /// SIP.
        sip: u32,
        /// Cube.
        cube: u32,
        /// PE.
        pe: u32,
    },
}

impl Engine {
    /// The engine's hardware in `fabric`.
    pub(crate) fn resolve(self, fabric: &Fabric) -> EngineHandle {
        match self {
            Engine::Host { sip, cube } => EngineHandle::Mcpu(fabric.mcpu(sip, cube).clone()),
            Engine::PeDma { sip, cube, pe } => {
                EngineHandle::Pe(fabric.pe_dma(sip, cube, pe).clone())
            }
        }
    }
}

/// An owned handle to a DMA engine of a fabric.
pub(crate) enum EngineHandle {
    /// A cube's M_CPU, whose DMA engine issues.
    Mcpu(Rc<Mcpu>),
    /// A PE's PE_DMA.
    Pe(Rc<DmaEngine>),
}

impl EngineHandle {
    /// The engine.
    pub(crate) fn dma(&self) -> &DmaEngine {
        match self {
            EngineHandle::Mcpu(mcpu) => mcpu.dma(),
            EngineHandle::Pe(engine) => engine,
        }
    }
}

/// One copy of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Who issues it.
    pub engine: Engine,
    /// Where the bytes come from.
    pub src: MemSpace,
    /// Where they go.
    pub dst: MemSpace,
}

/// A named case: flows of `bytes` each, all started at time zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeCase {
    /// Name, e.g. `h2d_best` or `load/4`.
    pub name: String,
    /// Kind of traffic.
    pub category: Category,
    /// Bytes per flow.
    pub bytes: u64,
    /// The flows (one unless the case is a load point).
    pub flows: Vec<Flow>,
}

/// The PE every PE-DMA case reads with.
const READER: (u32, u32, u32) = (0, 0, 0);
/// The load points of the load sweep (capped at the PE count).
const LOADS: [u32; 5] = [1, 2, 4, 6, 8];
/// The size sweep as (numerator, denominator) of the reference size.
const SIZES: [(u64, u64); 4] = [(1, 8), (1, 1), (8, 1), (LARGEST_FACTOR, 1)];

/// The largest multiple of the reference size a case copies.
pub(super) const LARGEST_FACTOR: u64 = 32;

/// Every case for `machine` with reference size `bytes`.
pub fn catalogue(machine: &Arc<Machine>, bytes: u64) -> Vec<ProbeCase> {
    let router = PathRouter::new(machine.clone());
    let mut cases = host_cases(&router, bytes);
    cases.extend(pe_cases(&router, bytes));
    cases.extend(size_sweep(bytes));
    let tcm = machine.spec().pe().tcm.capacity.get().bytes();
    let load_bytes = bytes.max(REFERENCE_BYTES.min(tcm / LARGEST_FACTOR));
    cases.extend(load_sweep(&router, load_bytes));
    cases
}

fn hbm(sip: u32, cube: u32) -> MemSpace {
    MemSpace::Hbm { sip, cube }
}

fn tcm((sip, cube, pe): (u32, u32, u32)) -> MemSpace {
    MemSpace::Tcm { sip, cube, pe }
}

fn case(name: &str, category: Category, bytes: u64, flows: Vec<Flow>) -> ProbeCase {
    ProbeCase {
        name: name.to_owned(),
        category,
        bytes,
        flows,
    }
}

fn host_cases(router: &PathRouter, bytes: u64) -> Vec<ProbeCase> {
    let machine = router.machine();
    let best = machine.io_cube();
    let worst = farthest_cube(router, machine.host());
    let mut cases = Vec::new();
    for (label, cube) in [("best", best), ("worst", worst)] {
        let engine = Engine::Host { sip: 0, cube };
        let (to, from) = (
            Flow {
                engine,
                src: MemSpace::Host,
                dst: hbm(0, cube),
            },
            Flow {
                engine,
                src: hbm(0, cube),
                dst: MemSpace::Host,
            },
        );
        cases.push(case(
            &format!("h2d_{label}"),
            Category::H2d,
            bytes,
            vec![to],
        ));
        cases.push(case(
            &format!("d2h_{label}"),
            Category::D2h,
            bytes,
            vec![from],
        ));
    }
    cases.sort_by_key(|c| c.category != Category::H2d);
    cases
}

fn pe_read(pe: (u32, u32, u32), from: MemSpace) -> Flow {
    Flow {
        engine: Engine::PeDma {
            sip: pe.0,
            cube: pe.1,
            pe: pe.2,
        },
        src: from,
        dst: tcm(pe),
    }
}

fn pe_cases(router: &PathRouter, bytes: u64) -> Vec<ProbeCase> {
    let machine = router.machine();
    let mut sources = vec![("pe_dma_local", hbm(0, 0))];
    if let Some(cube) = neighbour_of_cube0(machine) {
        sources.push(("pe_dma_neighbour", hbm(0, cube)));
    }
    if machine.cubes_per_sip() > 1 {
        sources.push(("pe_dma_far", hbm(0, far_from_reader(router))));
    }
    if machine.sip_count() > 1 {
        sources.push(("pe_dma_other_sip", hbm(1, 0)));
    }
    sources
        .into_iter()
        .map(|(name, src)| case(name, Category::PeDma, bytes, vec![pe_read(READER, src)]))
        .collect()
}

fn size_sweep(bytes: u64) -> Vec<ProbeCase> {
    SIZES
        .iter()
        .map(|&(num, den)| (bytes * num / den).max(1))
        .map(|size| {
            let flow = pe_read(READER, hbm(0, 0));
            case(&format!("size/{size}"), Category::PeDma, size, vec![flow])
        })
        .collect()
}

fn load_sweep(router: &PathRouter, bytes: u64) -> Vec<ProbeCase> {
    let pes = router.machine().pes_per_cube();
    let far = hbm(0, far_from_reader(router));
    let mut loads: Vec<u32> = LOADS.iter().map(|&k| k.min(pes)).collect();
    loads.dedup();
    loads
        .into_iter()
        .map(|k| {
            let flows = (0..k).map(|pe| pe_read((0, 0, pe), far)).collect();
            case(&format!("load/{k}"), Category::PeDma, bytes, flows)
        })
        .collect()
}

fn far_from_reader(router: &PathRouter) -> u32 {
    let reader = router
        .machine()
        .pe(READER.0, READER.1, READER.2)
        .expect("every machine has sip0.cube0.pe0");
    farthest_cube(router, reader)
}

/// Cube 0's east neighbour, or its south one in a one-column mesh.
fn neighbour_of_cube0(machine: &Machine) -> Option<u32> {
    let mesh = machine.spec().sip().cube_mesh;
    let (w, h) = (mesh.w.get(), mesh.h.get());
    match (w > 1, h > 1) {
        (true, _) => Some(1),
        (false, true) => Some(w),
        (false, false) => None,
    }
}

/// The cube of SIP 0 whose HBM is the most hops from `from` (the highest
/// index on ties).
fn farthest_cube(router: &PathRouter, from: NodeId) -> u32 {
    let machine = router.machine();
    (0..machine.cubes_per_sip())
        .filter_map(|cube| {
            let to = machine.hbm(0, cube)?;
            Some((router.find_path(from, to).ok()?.hops(), cube))
        })
        .max()
        .map_or(0, |(_, cube)| cube)
}
