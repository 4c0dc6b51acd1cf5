//! `ring_reducescatter`: `reduce_scatter` over a ring of every endpoint
//! (ccl.yaml `topology: ring_1d`). Each input tile holds one block per
//! endpoint; endpoint `e`'s output is the reduction of block `e` of every
//! input. Round `s` (`1 ≤ s < n`): receive the partial of block
//! `e − s − 1` from the west, combine it with the own input block, and send
//! the result east — the partial of block `b` starts at endpoint `b + 1`
//! and is combined in ring order until it ends, complete, at `b` (round
//! `n − 1`), where an `avg` is scaled once. nccl-tests' busbw factor
//! `(n − 1) / n`.
//!
//! Each round sends east while it receives from the west into TCM scratch
//! (`recv_into` drains the ring segment by segment), so a block of any
//! size passes with one IPCQ slot per ring.
//!
//! Cost ([`RingReducescatter::model`]): the partial of a block crosses
//! `n − 1` ring messages one after the other (it is sent on only once it
//! has arrived and been combined), each at least `α + B/β` for a block of
//! `B` bytes; with `m_e` endpoint `e`'s message east, the longest path is
//! `Σ_e m_e − min_e m_e`. Loads, PE_MATH combines and the final store only
//! add to it.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, finish, reduce_received};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

struct RingReducescatter;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingReducescatter)
}

impl CclAlgorithm for RingReducescatter {
    fn collective(&self) -> Collective {
        Collective::ReduceScatter
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_reducescatter", ring_reducescatter)
    }

    /// The longest path of `n − 1` block messages around the ring.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let block = args.tile.n_elem as u64 * args.dtype.size();
        let ring = cost::ring(net, block)?;
        Ok(cost::ring_rounds(&ring))
    }
}

async fn ring_reducescatter(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (input, output) = (args.tile_addr(cube)?, args.out_addr(cube)?);
    let (n, e) = (args.endpoints(), args.endpoint(cube));
    let block = |b: usize| input + args.block(b);
    let (shape, dtype, op) = (args.shape(), args.dtype, args.op()?);
    let mut acc = tl.load(block((e + n - 1) % n), &shape, dtype).await?;
    for step in 1..n {
        let received = tl.alloc(&shape, dtype)?;
        futures::try_join!(
            tl.send(Dir::E, &acc),
            tl.recv_into(Dir::W, &shape, dtype, &received)
        )?;
        tl.free(&acc)?;
        let b = (e + 2 * n - step - 1) % n;
        acc = tl.load(block(b), &shape, dtype).await?;
        reduce_received(&tl, op, &acc, &received).await?;
        tl.free(&received)?;
    }
    let result = finish(&tl, op, acc, n).await?;
    tl.store(output, &result).await
}
