//! `intercube_reducescatter` (ADR-0090): `reduce_scatter` in two levels,
//! PE 0 of every cube of every SIP on the intercube tables, the mirror of
//! `intercube_allgather`. Each input tile holds one block per endpoint;
//! endpoint `e`'s output is the combination of block `e` of every input.
//!
//! 1. **reduce in the SIP**: every cube loads its whole input tile into
//!    TCM, adds its children's (received whole from the cube tree: each
//!    row W → E, the east column N → S, `helpers::cube_tree`) and sends
//!    the sum to its parent: the leader (the south-east cube) holds the
//!    SIP's sum of every block;
//! 2. **reduce-scatter between leaders**, in TCM: along the SIP column
//!    (units of a row's runs), then along the SIP row (units of one run),
//!    or along the ring of SIPs as one line; each line as two streams, one
//!    towards each end (`helpers::line_reduce_scatter`): the leader ends
//!    with its own run, the SIP's `cubes` blocks, combined over every
//!    endpoint;
//! 3. **scatter in the SIP**: the leader finishes the run once (`avg`
//!    divides by the endpoints) and puts block `c` into cube `c`'s output.
//!
//! Each element's combination is formed once, in a fixed order, so the
//! result does not depend on timing. The leader holds the whole input
//! tile in TCM (with one received tile beside it): a tile larger than
//! half the TCM fails with the allocator's error naming the PE.
//!
//! Cost ([`IntercubeReducescatter::model`]): the climb of the cube tree
//! with one tile per edge (`cost::tree_up`), then `len − 1` unit
//! messages in a row on every line (the end of a stream receives them
//! one after another); the final puts only add to it.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{cube_tree, leader_cube, line_reduce_scatter, sip_lines};
use kernbench::ccl::topology::TopologyError;
use kernbench::ccl::{
    CclAlgorithm, Collective, DevAddr, Endpoints, KernelArgs, Params, WorldShape, finish,
    reduce_received,
};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

struct IntercubeReducescatter;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(IntercubeReducescatter)
}

impl CclAlgorithm for IntercubeReducescatter {
    fn collective(&self) -> Collective {
        Collective::ReduceScatter
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("intercube_reducescatter", intercube_reducescatter)
    }

    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        Endpoints::intercube(shape)
    }

    /// Two blocks at least (the workload asks per block; the whole tile
    /// of `endpoints` blocks and one received beside it is what runs).
    fn tcm_bytes(&self, tile_bytes: u64, _params: &Params) -> u64 {
        2 * tile_bytes
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        if args.endpoints() < 2 {
            return Ok(None);
        }
        let n = args.endpoints() as u64;
        let block = args.tile.n_elem as u64 * args.dtype.size();
        let links: Vec<_> = (0..args.endpoints() as u32)
            .map(|e| cube_tree(args, e % args.cubes()))
            .collect();
        let mut phases = vec![cost::tree_up(net, &links, block * n, 1)?];
        let (cubes, leader) = (args.cubes() as usize, leader_cube(args) as usize);
        let run = block * cubes as u64;
        let mut stride = cubes;
        for on in sip_lines(&KernelArgs {
            sip_rank: 0,
            ..args.clone()
        }) {
            let len = on.line.len as u64;
            if len > 1 {
                let hop = net.message(leader, leader + stride, run * on.unit_runs)?;
                phases.push(cost::repeat(hop, len - 1));
            }
            stride *= on.line.len as usize;
        }
        Ok(Some(cost::sequence(phases)))
    }
}

async fn intercube_reducescatter(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (dtype, op) = (args.dtype, args.op()?);
    let links = cube_tree(&args, cube);
    let whole = [args.tile.n_elem * args.endpoints()];
    let acc = tl.load(args.tile_addr(cube)?, &whole, dtype).await?;
    for &child in &links.children {
        let received = tl.alloc(&whole, dtype)?;
        tl.recv_into(child, &whole, dtype, &received).await?;
        reduce_received(&tl, op, &acc, &received).await?;
        tl.free(&received)?;
    }
    if let Some(parent) = links.parent {
        return tl.send(parent, &acc).await;
    }
    let run_elems = args.tile.n_elem as u64 * u64::from(args.cubes());
    for on in sip_lines(&args).iter().rev() {
        line_reduce_scatter(&tl, on, op, &acc, run_elems).await?;
    }
    let start = args.block(args.endpoint(0));
    let run = tl.view(DevAddr::of(&acc) + start, &[run_elems as usize], dtype)?;
    let result = finish(&tl, op, run, args.endpoints()).await?;
    let shape = args.shape();
    let puts = (0..args.cubes()).map(|c| {
        let tl = tl.clone();
        let (result, offset) = (result.clone(), args.block(c as usize));
        let out = args.out_addr(c);
        async move {
            let block = tl.view(DevAddr::of(&result) + offset, &shape, dtype)?;
            tl.store(out?, &block).await
        }
    });
    futures::future::try_join_all(puts).await?;
    Ok(())
}
