//! `ring_alltoall`: `all_to_all` over the ring of every endpoint (ccl.yaml
//! `topology: ring_1d`). Each input and output tile holds one block per
//! endpoint; block `j` of endpoint `e`'s output is block `e` of endpoint
//! `j`'s input. Round `s` (`1 ≤ s < n`) moves every endpoint's block for
//! `e + s` east by `s` hops, relayed by the endpoints between (each relays
//! one block per hop), so a block crosses exactly the links between its
//! source and destination: `n (n − 1) / 2` hops per endpoint in all, the
//! ring's cost for an all-to-all. nccl-tests' busbw factor `(n − 1) / n`.
//!
//! Relays forward the slot they received, so it needs two IPCQ slots.

use kernbench::ccl::topology::Dir;
use kernbench::ccl::{CclAlgorithm, Collective, KernelArgs, Requirements};
use kernbench::tl::{Kernel, KernelError, Tl};

struct RingAlltoall;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(RingAlltoall)
}

impl CclAlgorithm for RingAlltoall {
    fn collective(&self) -> Collective {
        Collective::AllToAll
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        Kernel::new("ring_alltoall", ring_alltoall)
    }

    fn requirements(&self) -> Requirements {
        Requirements {
            min_slots: 2,
            ..Requirements::default()
        }
    }
}

async fn ring_alltoall(tl: Tl, args: KernelArgs) -> Result<(), KernelError> {
    let cube = tl.program_id(1);
    let (input, output) = (args.tile_addr(cube)?, args.out_addr(cube)?);
    let (n, e) = (args.endpoints(), args.endpoint(cube));
    let bytes = args.tile.n_elem as u64 * args.dtype.size();
    let (shape, dtype) = (args.shape(), args.dtype);
    for step in 0..n {
        let own = tl
            .load(input + ((e + step) % n) as u64 * bytes, &shape, dtype)
            .await?;
        let mut current = own.clone();
        for _ in 0..step {
            tl.send(Dir::E, &current).await?;
            current = tl.recv(Dir::W, &shape, dtype).await?;
        }
        tl.store(output + ((e + n - step) % n) as u64 * bytes, &current)
            .await?;
        tl.free(&own)?;
    }
    Ok(())
}
