//! `ring_rsag_allreduce`: the bandwidth-optimal ring (as NCCL's ring
//! all-reduce) over every endpoint (PE 0 of each cube of each SIP),
//! `ring_1d` wiring.
//!
//! The tile is cut into `n` parts, one per endpoint. Reduce-scatter:
//! `n − 1` steps in which every endpoint sends one piece east and adds
//! the piece arriving from the west (`helpers::Ring::reduce_scatter`), after
//! which endpoint `e` owns the sum of piece `e + 1`, formed once. All-gather:
//! `n − 1` steps passing the owned sums round the ring, stored as they
//! arrive, so every endpoint ends with the owners' bits.
//!
//! Any tile of at least one element: with fewer elements than endpoints
//! some parts are empty and their steps send nothing; a piece larger than
//! an IPCQ slot goes as several messages (`helpers::exchange`). The whole
//! tile is held in TCM (refused at load when it does not fit).
//!
//! Cost ([`RingRsagAllreduce::model`]): each endpoint sends `2 (n − 1)`
//! parts of `S/n` to its east neighbour, one after the other:
//! `2 (n − 1) · (α + S / (n β))`, the largest over the endpoints.

use kernbench::ccl::cost::{CostError, Network};
use kernbench::ccl::helpers::{
    ChunkDefault, MAX_CHUNK, Ring, TileSplit, finish_in_place, message_bytes, slice,
};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

struct RingRsagAllreduce;

/// The largest message: one default IPCQ slot (at most the configured
/// one); a larger piece goes as several.
const MESSAGE: ChunkDefault = ChunkDefault::Fixed(MAX_CHUNK);

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingRsagAllreduce)
}

impl CclAlgorithm for RingRsagAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_rsag_allreduce", ring_rsag_allreduce)
    }

    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        if n < 2 {
            return Ok(Some(SimDuration::ZERO));
        }
        let bytes = (args.tile.n_elem / n) as u64 * args.dtype.size();
        let mut worst = SimDuration::ZERO;
        for e in 0..n {
            let step = net.message(e, (e + 1) % n, bytes)?;
            worst = worst.max(SimDuration::from_ps(step.as_ps() * 2 * (n as u64 - 1)));
        }
        Ok(Some(worst))
    }
}

async fn ring_rsag_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (n, len) = (args.tile.n_elem, args.endpoints());
    let tile = args.tile_addr(cube)?;
    let acc = tl.load(tile, &[n], args.dtype).await?;
    let ring = Ring {
        pos: args.endpoint(cube),
        len,
        send: Dir::E,
        recv: Dir::W,
        max_message: message_bytes(&args, MESSAGE),
    };
    let parts = TileSplit::new(len as u64, n as u64, args.dtype);
    ring.reduce_scatter(&tl, args.op()?, &acc, parts).await?;
    let mine = ring.owned(parts);
    if mine.n_elem > 0 {
        finish_in_place(&tl, &args, &slice(&tl, &acc, &mine)?).await?;
    }
    ring.all_gather(&tl, &acc, parts).await?;
    tl.store(tile, &acc).await
}
