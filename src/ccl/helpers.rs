//! Helpers that keep algorithm code short (author guide §5): split a tile
//! into chunks, the chunk indices of a ring step, a rank's place in a
//! binary tree. Pure arithmetic on ranks, sizes and addresses.

use crate::mem::DType;

/// A view of part of a tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Address of the first element.
    pub addr: u64,
    /// Elements in the chunk.
    pub n_elem: u64,
    /// Bytes in the chunk.
    pub nbytes: u64,
}

/// Splits the tile of `n_elem` elements of `dtype` at `base_addr` into
/// `n_chunks` consecutive views. When `n_elem` does not divide evenly, the
/// first `n_elem % n_chunks` chunks hold one element more (numpy's
/// `array_split`), so the chunks always cover the tile exactly. No chunks
/// when `n_chunks` is zero.
pub fn chunked(base_addr: u64, n_chunks: u64, n_elem: u64, dtype: DType) -> Vec<Chunk> {
    if n_chunks == 0 {
        return Vec::new();
    }
    let (base, extra) = (n_elem / n_chunks, n_elem % n_chunks);
    let mut addr = base_addr;
    (0..n_chunks)
        .map(|i| {
            let n_elem = base + u64::from(i < extra);
            let chunk = Chunk {
                addr,
                n_elem,
                nbytes: n_elem * dtype.size(),
            };
            addr += chunk.nbytes;
            chunk
        })
        .collect()
}

/// The chunk `rank` sends and the chunk it receives at `step` of a ring
/// reduce-scatter / all-gather over `world_size` ranks (sending east):
/// `send = (rank − step) mod n`, `recv = (rank − step − 1) mod n`.
pub fn ring_step(rank: usize, step: usize, world_size: usize) -> (usize, usize) {
    let n = world_size.max(1);
    let send = (rank + n - step % n) % n;
    (send, (send + n - 1) % n)
}

/// A rank's place in a binary tree rooted at rank 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    /// The parent rank; `None` for the root.
    pub parent: Option<usize>,
    /// The child ranks (0, 1 or 2), left first.
    pub children: Vec<usize>,
}

/// Where `rank` sits in the binary tree of `world_size` ranks: parent
/// `(rank − 1) / 2`, children `2·rank + 1` and `2·rank + 2`.
pub fn tree_step(rank: usize, world_size: usize) -> TreeNode {
    TreeNode {
        parent: (rank > 0).then(|| (rank - 1) / 2),
        children: [2 * rank + 1, 2 * rank + 2]
            .into_iter()
            .filter(|&c| c < world_size)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_tile_consecutively() {
        let chunks = chunked(0x1000, 4, 64, DType::F16);
        assert_eq!(chunks.len(), 4);
        assert_eq!(
            chunks[1],
            Chunk {
                addr: 0x1020,
                n_elem: 16,
                nbytes: 32
            }
        );
        let uneven = chunked(0, 3, 10, DType::F32);
        let sizes: Vec<u64> = uneven.iter().map(|c| c.n_elem).collect();
        assert_eq!(sizes, [4, 3, 3]);
        assert_eq!(uneven[2].addr, 28);
        assert!(chunked(0, 0, 10, DType::F32).is_empty());
    }

    #[test]
    fn ring_steps_visit_every_chunk_once_and_chain() {
        let n = 5;
        for rank in 0..n {
            let sent: Vec<usize> = (0..n - 1).map(|s| ring_step(rank, s, n).0).collect();
            let mut unique = sent.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), n - 1, "rank {rank} resends a chunk");
            for step in 0..n - 1 {
                // What rank receives at `step` is what its west neighbour sent.
                let west = (rank + n - 1) % n;
                assert_eq!(ring_step(rank, step, n).1, ring_step(west, step, n).0);
            }
        }
    }

    #[test]
    fn tree_links_parents_and_children() {
        assert_eq!(
            tree_step(0, 5),
            TreeNode {
                parent: None,
                children: vec![1, 2]
            }
        );
        assert_eq!(
            tree_step(1, 5),
            TreeNode {
                parent: Some(0),
                children: vec![3, 4]
            }
        );
        assert_eq!(
            tree_step(2, 5),
            TreeNode {
                parent: Some(0),
                children: vec![]
            }
        );
    }
}
