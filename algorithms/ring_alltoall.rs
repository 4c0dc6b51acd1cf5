//! `ring_alltoall`: `all_to_all` over the ring of every endpoint (ccl.yaml
//! `topology: ring_1d`). Each input and output tile holds one block per
//! endpoint; block `j` of endpoint `e`'s output is block `e` of endpoint
//! `j`'s input. Round `s` (`1 ≤ s < n`) moves every endpoint's block for
//! `e + s` east by `s` hops, relayed by the endpoints between (each relays
//! one block per hop), so a block crosses exactly the links between its
//! source and destination: `n (n − 1) / 2` hops per endpoint in all, the
//! ring's cost for an all-to-all. nccl-tests' busbw factor `(n − 1) / n`.
//!
//! Each hop sends east while it receives from the west into TCM scratch
//! (`recv_into` drains the ring segment by segment), so a block of any
//! size passes with one IPCQ slot per ring.
//!
//! Cost ([`RingAlltoall::model`]): every endpoint sends `n (n − 1) / 2`
//! blocks east one after the other (each round's hops wait for the block
//! to arrive, and the next round starts when the last hop is stored), each
//! at least its message `m_e = α + B/β` for a block of `B` bytes, so the
//! busiest sender bounds the call: `n (n − 1) / 2 · max_e m_e`. Loads,
//! stores and doorbells only add to it.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, Params};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

struct RingAlltoall;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingAlltoall)
}

impl CclAlgorithm for RingAlltoall {
    fn collective(&self) -> Collective {
        Collective::AllToAll
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_alltoall", ring_alltoall)
    }

    /// Two blocks: the one it forwards and the one it receives meanwhile.
    fn tcm_bytes(&self, tile_bytes: u64, _params: &Params) -> u64 {
        tile_bytes.saturating_mul(2)
    }

    /// The busiest endpoint's `n (n − 1) / 2` block messages in a row.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        let block = args.tile.n_elem as u64 * args.dtype.size();
        let ring = cost::ring(net, block)?;
        let sends = (n * n.saturating_sub(1) / 2) as u64;
        let slowest = ring.iter().copied().max();
        Ok(slowest.filter(|_| n > 1).map(|m| cost::repeat(m, sends)))
    }
}

async fn ring_alltoall(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (input, output) = (args.tile_addr(cube)?, args.out_addr(cube)?);
    let (n, e) = (args.endpoints(), args.endpoint(cube));
    let (shape, dtype) = (args.shape(), args.dtype);
    for step in 0..n {
        let own = tl
            .load(input + args.block((e + step) % n), &shape, dtype)
            .await?;
        let mut current = own;
        for _ in 0..step {
            let received = tl.alloc(&shape, dtype)?;
            futures::try_join!(
                tl.send(Dir::E, &current),
                tl.recv_into(Dir::W, &shape, dtype, &received)
            )?;
            tl.free(&current)?;
            current = received;
        }
        tl.store(output + args.block((e + n - step) % n), &current)
            .await?;
        tl.free(&current)?;
    }
    Ok(())
}
