//! `ring_allgather`: `all_gather` over a ring of every endpoint (PE 0 of
//! each cube of each SIP; ccl.yaml `topology: ring_1d`). Endpoint `e`
//! writes its input tile to block `e` of its output tile, then runs
//! `endpoints − 1` rounds: send the block it holds east, receive block
//! `e − s` from the west, store it in place and forward it next round, so
//! every block passes every endpoint once (the ring all-gather of
//! nccl-tests' busbw factor `(n − 1) / n`). Copies only: every endpoint
//! ends with the same bytes.
//!
//! It forwards the slot it received while the next one arrives, so it
//! needs two IPCQ slots per ring.

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, Requirements};
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

    fn requirements(&self) -> Requirements {
        Requirements {
            min_slots: 2,
            ..Requirements::default()
        }
    }
}

async fn ring_allgather(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (input, output) = (args.tile_addr(cube)?, args.out_addr(cube)?);
    let (n, e) = (args.endpoints(), args.endpoint(cube));
    let block = |b: usize| output + (b * args.tile.n_elem) as u64 * args.dtype.size();
    let own = tl.load(input, &args.shape(), args.dtype).await?;
    tl.store(block(e), &own).await?;
    let mut current = own.clone();
    for step in 1..n {
        tl.send(Dir::E, &current).await?;
        let received = tl.recv(Dir::W, &args.shape(), args.dtype).await?;
        tl.store(block((e + n - step) % n), &received).await?;
        current = received;
    }
    tl.free(&own)
}
