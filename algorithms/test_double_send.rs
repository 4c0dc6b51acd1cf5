//! `test_double_send`: the proof that an algorithm is one file here plus
//! one ccl.yaml entry (ADR-0009; exercised by `tests/it/ccl_algorithm_file.rs`).
//! Every endpoint sends its tile east twice and ends holding its own tile
//! plus both copies it received from the west: `t(e) + 2 t(e − 1)`. No
//! `torch.distributed` collective: it declares [`Collective::Custom`].

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{
    CclAlgorithm, Collective, KernelArgs, ReduceOp, Requirements, reduce_received,
};
use kernbench::tl::{Kernel, KernelError, Tl};

struct TestDoubleSend;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(TestDoubleSend)
}

impl CclAlgorithm for TestDoubleSend {
    fn collective(&self) -> Collective {
        Collective::Custom
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("test_double_send", double_send)
    }

    /// With one slot per ring, each endpoint's second send waits for the
    /// slot its east neighbour holds until that neighbour's second
    /// receive, which comes after the neighbour's own second send: a
    /// circular wait.
    fn requirements(&self) -> Requirements {
        Requirements { min_slots: 2 }
    }
}

async fn double_send(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let addr = args.tile_addr(tl.program_id(1))?;
    let acc = tl.load(addr, &args.shape(), args.dtype).await?;
    let tile = tl.load(addr, &args.shape(), args.dtype).await?;
    for _ in 0..2 {
        tl.send(Dir::E, &tile).await?;
        let received = tl.recv(Dir::W, &args.shape(), args.dtype).await?;
        reduce_received(&tl, ReduceOp::Sum, &acc, &received).await?;
    }
    tl.store(addr, &acc).await
}
