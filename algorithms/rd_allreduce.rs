//! `rd_allreduce`: recursive doubling over every endpoint (PE 0 of each
//! cube of each SIP), with the standard fold for a count that is not a
//! power of two (`helpers::Doubling`).
//!
//! The largest power of two `P ≤ n` endpoints form the core. Extra
//! endpoint `P + i` sends its tile to core endpoint `i`, which adds it.
//! Then `log2 P` steps: at step `k` every core endpoint exchanges its
//! whole partial sum with endpoint `rank xor 2^k` and adds what it gets.
//! Both partners compute `a + b` and `b + a`, the same bits (addition is
//! commutative), so after the last step every core endpoint holds the
//! same total; hosts send it back to their extras. Wiring: the
//! algorithm's own tables (ccl.yaml `topology: none` plus the
//! `neighbors` hook), one direction per step.
//!
//! Requires at most 256 endpoints (128 for a non-power of two): one IPCQ
//! direction per step.
//!
//! Cost ([`RdAllreduce::model`]): the slowest endpoint's chain of sends,
//! `[α + S/β]_fold-in + Σ_k (α_k + S/β_k) + [α + S/β]_fold-out`, with `S`
//! the tile and the α, β of each partner's route.

use kernbench::ccl::cost::{CostError, Network, sequence};
use kernbench::ccl::helpers::{Doubling, Fold, finish_in_place};
use kernbench::ccl::topology::NeighborMap;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, Params, WorldShape, reduce_received};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

struct RdAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RdAllreduce)
}

impl CclAlgorithm for RdAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("rd_allreduce", rd_allreduce)
    }

    fn supports(&self, shape: &WorldShape, _: &Params) -> Result<(), String> {
        Doubling::new(0, shape.endpoints()).map(|_| ())
    }

    fn neighbors(&self, rank: usize, n: usize, _: &mut NeighborMap) -> Option<NeighborMap> {
        Doubling::new(rank, n).ok().map(|d| d.table())
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        let bytes = args.tile.n_elem as u64 * args.dtype.size();
        let mut worst = SimDuration::ZERO;
        for rank in 0..n {
            let Ok(d) = Doubling::new(rank, n) else {
                return Ok(None);
            };
            if d.rank >= d.core {
                continue;
            }
            let mut sends = Vec::new();
            for k in 0..d.steps {
                sends.push(net.message(rank, d.partner(k).0, bytes)?);
            }
            if let Some(extra) = d.fold_peer() {
                sends.push(net.message(extra, rank, bytes)?);
                sends.push(net.message(rank, extra, bytes)?);
            }
            worst = worst.max(sequence(sends));
        }
        Ok(Some(worst))
    }
}

async fn rd_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let doubling = Doubling::new(args.endpoint(cube), args.endpoints())
        .map_err(|e| KernelError::failed(format!("rd_allreduce: {e}")))?;
    let tile = args.tile_addr(cube)?;
    let shape = [args.tile.n_elem];
    let acc = tl.load(tile, &shape, args.dtype).await?;
    match doubling.fold() {
        Fold::Extra(dir) => {
            tl.send(dir, &acc).await?;
            let result = tl.recv(dir, &shape, args.dtype).await?;
            return tl.store(tile, &result).await;
        }
        Fold::Host(dir) => {
            let extra = tl.recv(dir, &shape, args.dtype).await?;
            reduce_received(&tl, args.op, &acc, &extra).await?;
            tl.release(&extra)?;
        }
        Fold::None => {}
    }
    for k in 0..doubling.steps {
        let (_, dir) = doubling.partner(k);
        tl.send(dir, &acc).await?;
        let received = tl.recv(dir, &shape, args.dtype).await?;
        reduce_received(&tl, args.op, &acc, &received).await?;
        tl.release(&received)?;
    }
    finish_in_place(&tl, &args, &acc).await?;
    if let Fold::Host(dir) = doubling.fold() {
        tl.send(dir, &acc).await?;
    }
    tl.store(tile, &acc).await
}
