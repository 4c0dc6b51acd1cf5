//! `ring_allreduce` (author guide §2): a ring over every endpoint (PE 0 of
//! each cube of each SIP). Each runs `endpoints − 1` rounds: send the tile
//! it holds east, receive one from the west, `acc += recv` on PE_MATH, and
//! forward the received tile next round, so every tile passes every
//! endpoint once. Each ends with the sum of all tiles.

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, KernelArgs, add_received};
use kernbench::mem::DType;
use kernbench::tl::{Kernel, KernelError, Tl};

struct RingAllreduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingAllreduce)
}

impl CclAlgorithm for RingAllreduce {
    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_allreduce", ring_allreduce)
    }
}

async fn ring_allreduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let addr = args.tile_addr(tl.program_id(1))?;
    let shape = [args.tile.n_elem];
    let acc = tl.load(addr, &shape, DType::F16).await?;
    let mut current = acc.clone();
    for _ in 1..args.endpoints() {
        let _round = tl.phase("ring_round");
        tl.send(Dir::E, &current).await?;
        let received = tl.recv(Dir::W, &shape, DType::F16).await?;
        add_received(&tl, &acc, &received).await?;
        current = received;
    }
    tl.store(addr, &acc).await
}
