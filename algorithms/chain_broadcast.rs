//! `chain_broadcast`: `broadcast` along the ring of every endpoint
//! (ccl.yaml `topology: ring_1d`) as a chain that starts at the root
//! endpoint (cube `root_cube`, default 0, of rank `src`): each endpoint
//! receives the tile from the west, stores it and passes the same slot
//! east, the last one (just west of the root) only stores. Every endpoint
//! ends with the root's bytes. nccl-tests' busbw factor 1.
//!
//! A chain has no cycle, so one IPCQ slot per ring suffices.

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs};
use kernbench::tl::{Kernel, KernelError, Tl};

struct ChainBroadcast;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(ChainBroadcast)
}

impl CclAlgorithm for ChainBroadcast {
    fn collective(&self) -> Collective {
        Collective::Broadcast
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("chain_broadcast", chain_broadcast)
    }
}

async fn chain_broadcast(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let addr = args.tile_addr(cube)?;
    let n = args.endpoints();
    let pos = (args.endpoint(cube) + n - args.root_endpoint()) % n;
    let value = if pos == 0 {
        tl.load(addr, &args.shape(), args.dtype).await?
    } else {
        let received = tl.recv(Dir::W, &args.shape(), args.dtype).await?;
        tl.store(addr, &received).await?;
        received
    };
    if pos + 1 < n {
        tl.send(Dir::E, &value).await?;
    }
    Ok(())
}
