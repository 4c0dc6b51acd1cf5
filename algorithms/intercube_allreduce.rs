//! `intercube_allreduce` (seed ADR-0032): PE 0 of every cube of every SIP.
//!
//! 1. row reduce W → E across the cube mesh (the east column holds row sums);
//! 2. column reduce N → S on the east column (the SE root cube holds the
//!    SIP's sum);
//! 3. on the root cube, the inter-SIP exchange chosen by the SIP grid:
//!    a ring (`Ring`), a row ring then a column ring (`Torus`), or a
//!    chain reduce + broadcast per dimension (`Mesh`), on the `global_*`
//!    directions (an `Avg` is scaled here, once);
//! 4. column broadcast S → N on the east column;
//! 5. row broadcast E → W.
//!
//! On a single-cube machine (`cube_w = cube_h = 1`) phases 1, 2, 4 and 5
//! have no hops, so only the exchange runs (seed ADR-0050 D7). The ring
//! phase forwards the slot it received, so it needs two IPCQ slots; the
//! root cube is the south-east corner (a `root_cube` elsewhere is refused).

use kernbench::ccl::topology::Dir;
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{
    CclAlgorithm, Collective, Endpoints, KernelArgs, Params, Requirements, WorldShape, finish,
    reduce_received,
};
use kernbench::tl::{Kernel, KernelError, TensorHandle, Tl};
use kernbench::topology::SipGrid;

struct IntercubeAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(IntercubeAllreduce)
}

impl CclAlgorithm for IntercubeAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("intercube_allreduce", intercube_allreduce)
    }

    fn requirements(&self) -> Requirements {
        Requirements {
            min_slots: 2,
            ..Requirements::default()
        }
    }

    fn supports(&self, shape: &WorldShape, _: &Params) -> Result<(), String> {
        let corner = shape.cubes() - 1;
        match shape.root_cube {
            Some(root) if root != corner => Err(format!(
                "its root cube is the south-east corner of the cube mesh (root_cube: {corner}), \
                 not {root}"
            )),
            _ => Ok(()),
        }
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }
}

/// A position on a `w × h` grid and the directions of its axes.
#[derive(Clone, Copy)]
struct Mesh {
    x: u32,
    y: u32,
    w: u32,
    h: u32,
    east: Dir,
    south: Dir,
}

async fn intercube_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let addr = args.tile_addr(cube)?;
    let (w, h) = (args.tile.cube_w, args.tile.cube_h);
    let cubes = Mesh {
        x: cube % w,
        y: cube / w,
        w,
        h,
        east: Dir::E,
        south: Dir::S,
    };
    let acc = tl.load(addr, &args.shape(), args.dtype).await?;
    let reduce = tl.phase("mesh_reduce");
    mesh_reduce(&tl, &args, &acc, cubes).await?;
    drop(reduce);
    let mut value = acc.clone();
    if cubes.is_corner() {
        let _exchange = tl.phase("inter_sip");
        let total = inter_sip(&tl, &args, acc).await?;
        value = finish(&tl, args.op, total, args.endpoints()).await?;
    }
    let broadcast = tl.phase("mesh_broadcast");
    let value = mesh_broadcast(&tl, value, cubes).await?;
    drop(broadcast);
    tl.store(addr, &value).await
}

/// Phase 3 on the root cube: the SIP sums of every SIP, summed.
async fn inter_sip(
    tl: &Tl,
    args: &KernelArgs,
    acc: TensorHandle,
) -> Result<TensorHandle, KernelError> {
    match args.sip_grid {
        SipGrid::Ring => {
            ring(tl, args, &acc, Dir::GlobalE, args.tile.n_sips).await?;
            Ok(acc)
        }
        SipGrid::Torus { w, h } => {
            ring(tl, args, &acc, Dir::GlobalE, w).await?;
            ring(tl, args, &acc, Dir::GlobalS, h).await?;
            Ok(acc)
        }
        SipGrid::Mesh { w, h } => {
            let sips = sip_mesh(args.sip_rank, w, h);
            mesh_reduce(tl, args, &acc, sips).await?;
            mesh_broadcast(tl, acc, sips).await
        }
    }
}

/// SIP `rank` on the `w × h` grid of `global_*` links (the process group
/// has checked that the grid holds the world).
fn sip_mesh(rank: u32, w: u32, h: u32) -> Mesh {
    Mesh {
        x: rank % w,
        y: rank / w,
        w,
        h,
        east: Dir::GlobalE,
        south: Dir::GlobalS,
    }
}

impl Mesh {
    /// The SE corner, where the reduce ends.
    fn is_corner(&self) -> bool {
        self.x + 1 == self.w && self.y + 1 == self.h
    }
}

/// `len − 1` ring rounds along `fwd`: every member's `acc` ends as the sum.
async fn ring(
    tl: &Tl,
    args: &KernelArgs,
    acc: &TensorHandle,
    fwd: Dir,
    len: u32,
) -> Result<(), KernelError> {
    let mut current = acc.clone();
    for _ in 1..len {
        tl.send(fwd, &current).await?;
        let received = tl.recv(fwd.opposite(), acc.shape(), acc.dtype()).await?;
        reduce_received(tl, args.op, acc, &received).await?;
        current = received;
    }
    Ok(())
}

/// Row reduce towards east, then column reduce towards south on the east
/// column: the SE corner's `acc` ends as the grid's sum.
async fn mesh_reduce(
    tl: &Tl,
    args: &KernelArgs,
    acc: &TensorHandle,
    m: Mesh,
) -> Result<(), KernelError> {
    reduce_line(tl, args, acc, m.east, m.x, m.w).await?;
    if m.x + 1 == m.w {
        reduce_line(tl, args, acc, m.south, m.y, m.h).await?;
    }
    Ok(())
}

/// The SE corner's `value` back up the east column, then along every row.
async fn mesh_broadcast(
    tl: &Tl,
    value: TensorHandle,
    m: Mesh,
) -> Result<TensorHandle, KernelError> {
    let value = if m.x + 1 == m.w {
        broadcast_line(tl, value, m.south, m.y, m.h).await?
    } else {
        value
    };
    broadcast_line(tl, value, m.east, m.x, m.w).await
}

/// A chain reduce along `fwd`: the last of `len` holds the sum.
async fn reduce_line(
    tl: &Tl,
    args: &KernelArgs,
    acc: &TensorHandle,
    fwd: Dir,
    pos: u32,
    len: u32,
) -> Result<(), KernelError> {
    if pos > 0 {
        let received = tl.recv(fwd.opposite(), acc.shape(), acc.dtype()).await?;
        reduce_received(tl, args.op, acc, &received).await?;
    }
    if pos + 1 < len {
        tl.send(fwd, acc).await?;
    }
    Ok(())
}

/// A chain broadcast against `fwd`: the last of `len` sends its `value`.
async fn broadcast_line(
    tl: &Tl,
    value: TensorHandle,
    fwd: Dir,
    pos: u32,
    len: u32,
) -> Result<TensorHandle, KernelError> {
    let value = if pos + 1 < len {
        tl.recv(fwd, value.shape(), value.dtype()).await?
    } else {
        value
    };
    if pos > 0 {
        tl.send(fwd.opposite(), &value).await?;
    }
    Ok(value)
}
