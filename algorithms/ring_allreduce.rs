//! `ring_allreduce` (seed author guide §2): a ring over every endpoint (PE
//! 0 of each cube of each SIP). Each runs `endpoints − 1` rounds: send the
//! tile it holds east, receive one from the west, `acc = op(acc, recv)` on
//! PE_MATH, and forward the received tile next round, so every tile passes
//! every endpoint once. Each ends with the reduction of all tiles.
//!
//! It forwards the slot it received while the next one arrives, so it
//! needs two IPCQ slots per ring.

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, Requirements, finish, reduce_received};
use kernbench::tl::{Kernel, KernelError, Tl};

struct RingAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingAllreduce)
}

impl CclAlgorithm for RingAllreduce {
    fn collective(&self) -> Collective {
        Collective::AllReduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_allreduce", ring_allreduce)
    }

    fn requirements(&self) -> Requirements {
        Requirements {
            min_slots: 2,
            ..Requirements::default()
        }
    }
}

async fn ring_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let addr = args.tile_addr(tl.program_id(1))?;
    let acc = tl.load(addr, &args.shape(), args.dtype).await?;
    let mut current = acc.clone();
    for _ in 1..args.endpoints() {
        let _round = tl.phase("ring_round");
        tl.send(Dir::E, &current).await?;
        let received = tl.recv(Dir::W, &args.shape(), args.dtype).await?;
        reduce_received(&tl, args.op, &acc, &received).await?;
        current = received;
    }
    let result = finish(&tl, args.op, acc, args.endpoints()).await?;
    tl.store(addr, &result).await
}
