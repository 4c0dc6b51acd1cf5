//! `chain_broadcast`: `broadcast` along the ring of every endpoint
//! (ccl.yaml `topology: ring_1d`) as a chain that starts at the root
//! endpoint (cube `root_cube`, default 0, of rank `src`): each endpoint
//! receives the tile from the west into its own (`recv_into`, segment by
//! segment, so a tile of any size passes) and sends it east from there;
//! the last one (just west of the root) only receives. Every endpoint ends
//! with the root's bytes. nccl-tests' busbw factor 1.
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
    let (shape, dtype) = (args.shape(), args.dtype);
    let tile = match pos {
        0 => tl.view(addr, &shape, dtype)?,
        _ => tl.recv_into(Dir::W, &shape, dtype, addr).await?,
    };
    if pos + 1 < n {
        tl.send(Dir::E, &tile).await?;
    }
    Ok(())
}
