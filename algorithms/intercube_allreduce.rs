//! `intercube_allreduce` (seed ADR-0032): PE 0 of every cube of every SIP.
//!
//! 1. row reduce W → E across the cube mesh (the east column holds row sums);
//! 2. column reduce N → S on the east column (the SE root cube holds the
//!    SIP's sum);
//! 3. on the root cube, the inter-SIP exchange chosen by `sip_topo_kind`:
//!    a ring (`ring_1d`), a row ring then a column ring (`torus_2d`), or a
//!    chain reduce + broadcast per dimension (`mesh_2d_no_wrap`), on the
//!    `global_*` directions; any other kind fails loudly;
//! 4. column broadcast S → N on the east column;
//! 5. row broadcast E → W.
//!
//! On a single-cube machine (`cube_w = cube_h = 1`) phases 1, 2, 4 and 5
//! have no hops, so only the exchange runs (ADR-0050 D7).

use kernbench::ccl::topology::Dir;
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{
    CclAlgorithm, Endpoints, KernelArgs, SIP_TOPO_MESH, SIP_TOPO_RING, SIP_TOPO_TORUS,
    TOPO_NAME_TO_KIND, WorldShape, add_received,
};
use kernbench::mem::DType;
use kernbench::tl::{Kernel, KernelError, TensorHandle, Tl};
use kernbench::topology::TopologySpec;

struct IntercubeAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(IntercubeAllreduce)
}

impl CclAlgorithm for IntercubeAllreduce {
    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("intercube_allreduce", intercube_allreduce)
    }

    fn topo_name_to_kind(&self) -> &'static [(&'static str, u32)] {
        TOPO_NAME_TO_KIND
    }

    fn endpoints(&self, _: &WorldShape, spec: &TopologySpec) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(spec)
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
    let acc = tl.load(addr, &[args.tile.n_elem], DType::F16).await?;
    let reduce = tl.phase("mesh_reduce");
    mesh_reduce(&tl, &acc, cubes).await?;
    drop(reduce);
    let mut value = acc.clone();
    if cubes.is_corner() {
        let _exchange = tl.phase("inter_sip");
        value = inter_sip(&tl, &args, acc).await?;
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
    let (n, rank) = (args.tile.n_sips, args.sip_rank);
    match args.sip_topo_kind {
        SIP_TOPO_RING => {
            ring(tl, &acc, Dir::GlobalE, n).await?;
            Ok(acc)
        }
        SIP_TOPO_TORUS => {
            let sips = sip_mesh(args)?;
            ring(tl, &acc, Dir::GlobalE, sips.w).await?;
            ring(tl, &acc, Dir::GlobalS, sips.h).await?;
            Ok(acc)
        }
        SIP_TOPO_MESH => {
            let sips = sip_mesh(args)?;
            mesh_reduce(tl, &acc, sips).await?;
            mesh_broadcast(tl, acc, sips).await
        }
        kind => Err(KernelError::failed(format!(
            "intercube_allreduce: unsupported sip_topo_kind {kind} on SIP {rank} \
             (0 ring_1d, 1 torus_2d, 2 mesh_2d_no_wrap)"
        ))),
    }
}

/// This SIP on the `sip_topo_w × sip_topo_h` grid of `global_*` links.
fn sip_mesh(args: &KernelArgs) -> Result<Mesh, KernelError> {
    let (w, h, n) = (args.sip_topo_w, args.sip_topo_h, args.tile.n_sips);
    if w * h != n {
        return Err(KernelError::failed(format!(
            "intercube_allreduce: a {w}x{h} SIP grid does not hold {n} SIPs"
        )));
    }
    let rank = args.sip_rank;
    Ok(Mesh {
        x: rank % w,
        y: rank / w,
        w,
        h,
        east: Dir::GlobalE,
        south: Dir::GlobalS,
    })
}

impl Mesh {
    /// The SE corner, where the reduce ends.
    fn is_corner(&self) -> bool {
        self.x + 1 == self.w && self.y + 1 == self.h
    }
}

/// `len − 1` ring rounds along `fwd`: every member's `acc` ends as the sum.
async fn ring(tl: &Tl, acc: &TensorHandle, fwd: Dir, len: u32) -> Result<(), KernelError> {
    let mut current = acc.clone();
    for _ in 1..len {
        tl.send(fwd, &current).await?;
        let received = tl.recv(fwd.opposite(), acc.shape(), acc.dtype()).await?;
        add_received(tl, acc, &received).await?;
        current = received;
    }
    Ok(())
}

/// Row reduce towards east, then column reduce towards south on the east
/// column: the SE corner's `acc` ends as the grid's sum.
async fn mesh_reduce(tl: &Tl, acc: &TensorHandle, m: Mesh) -> Result<(), KernelError> {
    reduce_line(tl, acc, m.east, m.x, m.w).await?;
    if m.x + 1 == m.w {
        reduce_line(tl, acc, m.south, m.y, m.h).await?;
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
    acc: &TensorHandle,
    fwd: Dir,
    pos: u32,
    len: u32,
) -> Result<(), KernelError> {
    if pos > 0 {
        let received = tl.recv(fwd.opposite(), acc.shape(), acc.dtype()).await?;
        add_received(tl, acc, &received).await?;
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
