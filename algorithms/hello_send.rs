//! `hello_send` (seed author guide §1): every endpoint sends its tile east
//! once, receives its west neighbour's tile and stores it over its own, so
//! endpoint `e` ends holding endpoint `e − 1`'s tile. A teaching kernel,
//! no `torch.distributed` collective: it declares [`Collective::Custom`].

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs};
use kernbench::tl::{Kernel, KernelError, Tl};

struct HelloSend;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(HelloSend)
}

impl CclAlgorithm for HelloSend {
    fn collective(&self) -> Collective {
        Collective::Custom
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("hello_send", hello_send)
    }
}

async fn hello_send(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let addr = args.tile_addr(tl.program_id(1))?;
    let tile = tl.load(addr, &args.shape(), args.dtype).await?;
    tl.send(Dir::E, &tile).await?;
    let received = tl.recv(Dir::W, &args.shape(), args.dtype).await?;
    tl.store(addr, &received).await
}
