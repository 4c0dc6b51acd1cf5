//! `chain_reduce`: `reduce` along the ring of every endpoint (ccl.yaml
//! `topology: ring_1d`) as a chain that ends at the root endpoint (cube
//! `root_cube`, default 0, of rank `dst`): the endpoint just east of the
//! root starts, each next one combines the partial it receives from the
//! west with its own tile and sends it east, and the root combines last,
//! scales an `avg` once and stores the result. Other tiles are left as
//! they were. nccl-tests' busbw factor 1.
//!
//! Each partial is received into TCM scratch (`recv_into`, segment by
//! segment, so a tile of any size passes): one IPCQ slot suffices.

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, finish, reduce_received};
use kernbench::tl::{Kernel, KernelError, Tl};

struct ChainReduce;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(ChainReduce)
}

impl CclAlgorithm for ChainReduce {
    fn collective(&self) -> Collective {
        Collective::Reduce
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("chain_reduce", chain_reduce)
    }
}

async fn chain_reduce(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let addr = args.tile_addr(cube)?;
    let n = args.endpoints();
    let pos = (args.endpoint(cube) + 2 * n - args.root_endpoint() - 1) % n;
    let (shape, dtype) = (args.shape(), args.dtype);
    let acc = tl.load(addr, &shape, dtype).await?;
    if pos > 0 {
        let received = tl.alloc(&shape, dtype)?;
        tl.recv_into(Dir::W, &shape, dtype, &received).await?;
        reduce_received(&tl, args.op, &acc, &received).await?;
        tl.free(&received)?;
    }
    if pos + 1 < n {
        return tl.send(Dir::E, &acc).await;
    }
    let result = finish(&tl, args.op, acc, n).await?;
    tl.store(addr, &result).await
}
