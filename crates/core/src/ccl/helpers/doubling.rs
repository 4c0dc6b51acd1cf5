//! Recursive doubling: an endpoint's place ([`Doubling`], [`Fold`]) among
//! any number of endpoints, its neighbour table and its cost model's
//! chain.

use super::*;

/// The IPCQ directions recursive doubling uses, one per step (and one for
/// the fold): the eight a table can hold.
pub const DOUBLING_DIRS: [Dir; 8] = Dir::ALL;

/// An endpoint's partners in recursive doubling / halving over `n`
/// endpoints, with the standard fold for non-powers of two: the largest
/// power of two `P ≤ n` endpoints form the core; endpoint `P + i` (an
/// *extra*) first sends its tile to core endpoint `i` (its *host*), which
/// adds it, runs the `log2 P` core steps with partners `endpoint xor 2^k`, and
/// at the end sends the result back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubling {
    /// This endpoint.
    pub endpoint: usize,
    /// Endpoints in all.
    pub n: usize,
    /// The core size `P`.
    pub core: usize,
    /// Core steps, `log2 P`.
    pub steps: usize,
}

/// How an endpoint takes part in the fold of [`Doubling`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// A core endpoint without an extra.
    None,
    /// A core endpoint that adds its extra's tile (in the direction).
    Host(Dir),
    /// An endpoint outside the core (its host in the direction).
    Extra(Dir),
}

impl Doubling {
    /// `endpoint`'s place among `n` endpoints, or what it requires: at most
    /// 2^8 endpoints (and 2^7 for a non-power of two): one IPCQ direction
    /// per step and one for the fold.
    pub fn new(endpoint: usize, n: usize) -> Result<Doubling, Unsupported> {
        let n = n.max(1);
        let core: usize = 1 << n.ilog2();
        let steps = core.trailing_zeros() as usize;
        let dirs = steps + usize::from(core < n);
        if dirs > DOUBLING_DIRS.len() {
            return Err(Unsupported::DoublingDirections {
                endpoints: n,
                dirs,
                available: DOUBLING_DIRS.len(),
            });
        }
        Ok(Doubling {
            endpoint,
            n,
            core,
            steps,
        })
    }

    /// The partner and direction of core step `k`.
    pub fn partner(&self, k: usize) -> (usize, Dir) {
        (self.endpoint ^ (1 << k), DOUBLING_DIRS[k])
    }

    /// This endpoint's part in the fold.
    pub fn fold(&self) -> Fold {
        let dir = DOUBLING_DIRS[self.steps.min(DOUBLING_DIRS.len() - 1)];
        if self.endpoint >= self.core {
            Fold::Extra(dir)
        } else if self.endpoint + self.core < self.n {
            Fold::Host(dir)
        } else {
            Fold::None
        }
    }

    /// The fold partner, if any.
    pub fn fold_peer(&self) -> Option<usize> {
        match self.fold() {
            Fold::Extra(_) => Some(self.endpoint - self.core),
            Fold::Host(_) => Some(self.endpoint + self.core),
            Fold::None => None,
        }
    }

    /// The neighbour table: one direction per core step, one for the fold.
    pub fn table(&self) -> NeighborMap {
        let mut table = NeighborMap::new();
        if self.endpoint < self.core {
            table.extend((0..self.steps).map(|k| {
                let (peer, dir) = self.partner(k);
                (dir, peer)
            }));
        }
        if let (Some(peer), Fold::Host(dir) | Fold::Extra(dir)) = (self.fold_peer(), self.fold()) {
            table.insert(dir, peer);
        }
        table
    }

    /// The α-β time of a doubling algorithm over `n` endpoints (a lower
    /// bound of its simulated time): the slowest core endpoint's chain of
    /// sends, one after another, each `α + bytes/β` of its route: at core
    /// step `k` one message to the partner of each size `step(d, k)` lists
    /// (`d` the endpoint's place), then, at a host, the extra's fold-in and
    /// the fold-out, `fold_bytes` each. `None` when `n` endpoints cannot
    /// double ([`Doubling::new`]).
    pub fn slowest_chain(
        net: &Network,
        n: usize,
        step: impl Fn(&Doubling, usize) -> Vec<u64>,
        fold_bytes: u64,
    ) -> Result<Option<SimDuration>, CostError> {
        let mut worst = SimDuration::ZERO;
        for endpoint in 0..n {
            let Ok(d) = Doubling::new(endpoint, n) else {
                return Ok(None);
            };
            if d.endpoint >= d.core {
                continue;
            }
            let mut sends = Vec::new();
            for k in 0..d.steps {
                for bytes in step(&d, k) {
                    sends.push(net.message(endpoint, d.partner(k).0, bytes)?);
                }
            }
            if let Some(extra) = d.fold_peer() {
                sends.push(net.message(extra, endpoint, fold_bytes)?);
                sends.push(net.message(endpoint, extra, fold_bytes)?);
            }
            worst = worst.max(crate::ccl::cost::sequence(sends));
        }
        Ok(Some(worst))
    }
}
