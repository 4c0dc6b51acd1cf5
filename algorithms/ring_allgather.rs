//! `ring_allgather`: `all_gather` over a ring of every endpoint (PE 0 of
//! each cube of each SIP; ccl.yaml `topology: ring_1d`). Endpoint `e`
//! copies its input tile to block `e` of its output tile (HBM to HBM, no
//! TCM), then runs
//! `endpoints − 1` rounds: send the block it received last round (its own
//! first) east from the output tile while receiving block `e − s` from the
//! west into its place, so every block passes every endpoint once (the
//! ring all-gather of nccl-tests' busbw factor `(n − 1) / n`). Copies
//! only: every endpoint ends with the same bytes.
//!
//! Sending and receiving at once (`recv_into` drains the west ring segment
//! by segment while the send fills the east one), a block of any size
//! passes with one IPCQ slot per ring.
//!
//! Cost ([`RingAllgather::model`]): every block crosses `n − 1` ring
//! messages one after the other (a round's send starts once the block has
//! arrived), each at least `α + B/β` for a block of `B` bytes; with `m_e`
//! endpoint `e`'s message east, the longest block path is
//! `Σ_e m_e − min_e m_e`. The local copy of the own block, the PE_DMA
//! issues and the doorbells only add to it.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, Params};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

struct RingAllgather;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingAllgather)
}

impl CclAlgorithm for RingAllgather {
    fn collective(&self) -> Collective {
        Collective::AllGather
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_allgather", ring_allgather)
    }

    /// Blocks go from tile to tile and slot to tile with PE_DMA: no TCM.
    fn tcm_bytes(&self, _tile_bytes: u64, _params: &Params) -> u64 {
        0
    }

    /// The longest path of `n − 1` block messages around the ring.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let block = args.tile.n_elem as u64 * args.dtype.size();
        let ring = cost::ring(net, block)?;
        Ok(cost::ring_rounds(&ring))
    }
}

async fn ring_allgather(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (input, output) = (args.tile_addr(cube)?, args.out_addr(cube)?);
    let (n, e) = (args.endpoints(), args.endpoint(cube));
    let (shape, dtype) = (args.shape(), args.dtype);
    let block = |b: usize| output + args.block(b);
    let own = tl.view(input, &shape, dtype)?;
    tl.store(block(e), &own).await?;
    for step in 1..n {
        let outgoing = tl.view(block((e + n + 1 - step) % n), &shape, dtype)?;
        let incoming = block((e + n - step) % n);
        futures::try_join!(
            tl.send(Dir::E, &outgoing),
            tl.recv_into(Dir::W, &shape, dtype, incoming)
        )?;
    }
    Ok(())
}
