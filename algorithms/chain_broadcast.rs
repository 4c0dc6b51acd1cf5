//! `chain_broadcast`: `broadcast` along the ring of every endpoint
//! (ccl.yaml `topology: ring_1d`) as a chain that starts at the root
//! endpoint (cube `root_cube`, default 0, of rank `src`): each endpoint
//! receives the tile from the west into its own (`recv_into`, segment by
//! segment, so a tile of any size passes) and sends it east from there;
//! the last one (just west of the root) only receives. Every endpoint ends
//! with the root's bytes. nccl-tests' busbw factor 1.
//!
//! The tile moves in chunks (ccl.yaml `params.chunk`, default 8 KiB as
//! in the other chains), so the chain pipelines: an endpoint passes chunk
//! `c` east while its west neighbour already sends it chunk `c + 1`. Each
//! chunk is received straight into the tile and sent from there: no TCM is
//! used, and a chain has no cycle, so one IPCQ slot per ring suffices.
//!
//! Cost ([`ChainBroadcast::model`]): the chain of `n − 1` messages east
//! from the root, `C` chunks of `m` bytes pipelined through it:
//! `Σ_hops (α_h + m/β_h) + (C − 1) · max_h (α_h + m/β_h)`
//! (`cost::pipeline`), as `ring_allreduce`'s climb.

use kernbench::ccl::cost::{self, CostError, Network};
use kernbench::ccl::helpers::{ChunkDefault, MIN_CHUNK, split_tile, tile_chunks};
use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, Params};
use kernbench::sim::SimDuration;
use kernbench::tl::{Kernel, KernelError, Tl};

const CHUNKS: ChunkDefault = ChunkDefault::Fixed(MIN_CHUNK);

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

    fn chunking(&self) -> Option<ChunkDefault> {
        Some(CHUNKS)
    }

    /// Chunks go from slot to tile and tile to slot: no TCM.
    fn tcm_bytes(&self, _tile_bytes: u64, _params: &Params) -> u64 {
        0
    }

    /// The chunks pipelined along the chain from the root.
    fn model(&self, args: &KernelArgs, net: &Network) -> Result<Option<SimDuration>, CostError> {
        let n = args.endpoints();
        let (chunks, piece) = tile_chunks(args, CHUNKS);
        let chain = cost::walk(net, args.root_endpoint()?, Dir::E, n - 1, piece)?;
        Ok((n > 1).then(|| cost::pipeline(&chain, chunks)))
    }
}

async fn chain_broadcast(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let addr = args.tile_addr(cube)?;
    let n = args.endpoints();
    let pos = (args.endpoint(cube) + n - args.root_endpoint()?) % n;
    let (chunks, _) = tile_chunks(&args, CHUNKS);
    for view in split_tile(chunks, args.tile.n_elem as u64, args.dtype) {
        let (shape, at) = ([view.n_elem as usize], addr + view.offset);
        let chunk = match pos {
            0 => tl.view(at, &shape, args.dtype)?,
            _ => tl.recv_into(Dir::W, &shape, args.dtype, at).await?,
        };
        if pos + 1 < n {
            tl.send(Dir::E, &chunk).await?;
        }
    }
    Ok(())
}
