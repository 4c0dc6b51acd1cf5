//! `intercube_allgather` (ADR-0090): `all_gather` in two levels, PE 0 of
//! every cube of every SIP on the intercube tables (`N/S/E/W` in the cube
//! mesh, `global_*` between SIPs), as `intercube_allreduce` works.
//!
//! 1. **gather in the SIP**: every cube puts its input tile (PE_DMA, HBM
//!    to HBM) into its block of the leader's output (the south-east cube:
//!    `helpers::leader_cube`), then a token climbs the cube tree (each
//!    row W → E, the east column N → S: `helpers::cube_tree`) once a
//!    cube's subtree has landed: the leader then holds the SIP's run of
//!    `cubes` consecutive blocks;
//! 2. **all-gather between leaders**: along the ring of SIPs, or along the
//!    SIP row (units of one run) then the SIP column (units of a row's
//!    runs), each line as two streams, one towards each end
//!    (`helpers::line_allgather`): every message is one contiguous unit;
//! 3. **spread in the SIP**: the leader's whole output goes down the cube
//!    tree in up to 8 pieces (`helpers::spread_down`), each put into the
//!    children's output, then a token per child.
//!
//! A 1,024-SIP torus with 16 cubes each sends 62 units per leader and
//! some 120 puts per SIP, where the flat `ring_allgather` sends
//! `endpoints − 1 = 16,383` messages per endpoint. Messages between SIPs
//! are large (a row's runs), so its ccl.yaml entry gives it HBM slots of
//! 4 MiB (`buffer_kind: hbm`, `ipcq.slot_size`).
//!
//! Cost ([`IntercubeAllgather::model`]): three dependent phases, each
//! bounded below: the SIP's puts into the leader at once
//! (`Network::hbm_copies`), `len − 1` unit messages in a row on every
//! line (the last position of a stream receives them one after the
//! other), and the pieces pipelined down the deepest branch of the cube
//! tree (`cost::pipeline` of its hops' HBM-to-HBM times).

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{
    cube_toward, cube_tree, leader_cube, line_allgather, sip_lines, spread_down, spread_pieces,
    tokens_up,
};
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{
    CclAlgorithm, Collective, DevAddr, Endpoints, KernelArgs, Params, WorldShape,
};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

struct IntercubeAllgather;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(IntercubeAllgather)
}

impl CclAlgorithm for IntercubeAllgather {
    fn collective(&self) -> Collective {
        Collective::AllGather
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("intercube_allgather", intercube_allgather)
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }

    /// Blocks go from tile to tile and slot to tile with PE_DMA; only
    /// tokens pass through TCM.
    fn tcm_bytes(&self, _tile_bytes: u64, _params: &Params) -> u64 {
        0
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        if args.endpoints() < 2 {
            return Ok(None);
        }
        let block = args.tile.n_elem as u64 * args.dtype.size();
        let (cubes, leader) = (args.cubes() as usize, leader_cube(args) as usize);
        let gather: Vec<_> = (0..cubes)
            .filter(|&c| c != leader)
            .map(|c| (c, leader))
            .collect();
        let mut phases = vec![match gather.is_empty() {
            true => SimDuration::ZERO,
            false => net.hbm_copies(&gather, block)?,
        }];
        let run = block * cubes as u64;
        let mut stride = cubes;
        for on in sip_lines(&KernelArgs {
            sip_rank: 0,
            ..args.clone()
        }) {
            let len = on.line.len as u64;
            if len > 1 {
                let unit = run * on.unit_runs;
                let hop = net.hbm_copies(&[(leader, leader + stride)], unit)?;
                phases.push(cost::repeat(hop, len - 1));
            }
            stride *= on.line.len as usize;
        }
        let n_out = args.tile.n_elem as u64 * args.endpoints() as u64;
        phases.push(spread_model(args, net, n_out)?);
        Ok(Some(cost::sequence(phases)))
    }
}

/// The spread of `n_out` elements: its pieces (each at least the smallest
/// one) pipelined down the deepest branch of the cube tree of SIP 0 (its
/// hops' HBM-to-HBM times); nothing on one cube.
fn spread_model(args: &KernelArgs, net: &Network, n_out: u64) -> Result<SimDuration, CostError> {
    let size = args.dtype.size();
    let pieces = spread_pieces(n_out * size);
    let piece = n_out / pieces * size;
    let mut deepest = Vec::new();
    for cube in 0..args.cubes() {
        let mut hops = Vec::new();
        let mut at = cube;
        while let Some(dir) = cube_tree(args, at).parent {
            let parent = cube_toward(at, dir, args.tile.cube_w).ok_or(CostError::NoRoot(0))?;
            hops.push(net.hbm_copies(&[(parent as usize, at as usize)], piece)?);
            at = parent;
        }
        if cost::sequence(hops.iter().copied()) > cost::sequence(deepest.iter().copied()) {
            deepest = hops;
        }
    }
    Ok(cost::pipeline(&deepest, pieces))
}

async fn intercube_allgather(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (leader, dtype) = (leader_cube(&args), args.dtype);
    let links = cube_tree(&args, cube);
    let own = tl.view(args.tile_addr(cube)?, &args.shape(), dtype)?;
    let gathered = args.out_addr(leader)? + args.block(args.endpoint(cube));
    tl.store(gathered, &own).await?;
    tokens_up(&tl, &links, dtype).await?;
    let run_elems = args.tile.n_elem as u64 * u64::from(args.cubes());
    if cube == leader {
        let out = args.out_addr(leader)?;
        for on in sip_lines(&args) {
            line_allgather(&tl, &on, out, run_elems, dtype).await?;
        }
    }
    let outputs: Vec<DevAddr> = (0..args.cubes())
        .map(|c| args.out_addr(c))
        .collect::<Result<_, _>>()?;
    let n_out = args.tile.n_elem as u64 * args.endpoints() as u64;
    spread_down(&tl, &args, &links, &outputs, n_out).await
}
