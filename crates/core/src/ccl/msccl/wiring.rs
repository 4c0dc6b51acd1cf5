//! Which IPCQ direction carries each MSCCL connection (ADR-0035).
//!
//! A connection is a (peer, channel) pair of a gpu, used by the tb whose
//! `send` (or `recv`) is that peer on that channel. Every connection
//! between two ranks becomes one table entry at each end: rank `a` names
//! `b` in a direction `Da`, `b` names `a` in `Db`; a send from `a` in
//! `Da` then lands in `b`'s ring `Db` (the address-based matching of
//! `ccl::topology`), so at each rank a connection's direction is both the
//! one it sends in and the label of the ring it receives from. Two ranks
//! joined on several channels name each other in opposite directions
//! (`Db = opposite(Da)`), which is what tells their rings apart.
//!
//! Some directions are taken before the connections are placed: `E` and
//! `W` by the ring over a SIP's cubes when the program runs on PE 0 beside
//! it, or `S` (PE 1's way to PE 0 of its cube) when it runs on PE 1 (see
//! `kernel`).
//!
//! Pure functions of the program: nothing of PEs, memory or time.

use std::collections::{BTreeMap, BTreeSet};

use crate::tl::Dir;

use super::program::{Program, XmlError};

/// One rank's connections: (peer, channel) → direction.
pub type Links = BTreeMap<(usize, u32), Dir>;

/// Every rank's [`Links`]: the connections of the program's tbs, each in
/// a direction of its own at both ends, none in `reserved`; an error
/// naming the gpu's line when a rank has more connections than
/// directions.
pub fn links(program: &Program, reserved: &[Dir]) -> Result<Vec<Links>, XmlError> {
    let free_dirs = || Dir::ALL.into_iter().filter(|d| !reserved.contains(d));
    // Every undirected connection {a, b} on channel c, a < b.
    let mut pairs: BTreeMap<(usize, usize), BTreeSet<u32>> = BTreeMap::new();
    for (rank, gpu) in program.gpus.iter().enumerate() {
        for tb in &gpu.tbs {
            for peer in [tb.send, tb.recv].into_iter().flatten() {
                let key = (rank.min(peer), rank.max(peer));
                pairs.entry(key).or_default().insert(tb.chan);
            }
        }
    }
    let mut links = vec![Links::new(); program.gpus.len()];
    // Pairs on several channels first: they need opposite directions.
    let (multi, single): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(_, c)| c.len() > 1);
    for ((a, b), chans) in multi {
        for chan in chans {
            let taken = |rank: usize, d: Dir| links[rank].values().any(|&x| x == d);
            let dir = free_dirs()
                .filter(|d| !reserved.contains(&d.opposite()))
                .find(|&d| !taken(a, d) && !taken(b, d.opposite()));
            let Some(dir) = dir else {
                return Err(too_many(program, a, b, reserved));
            };
            links[a].insert((b, chan), dir);
            links[b].insert((a, chan), dir.opposite());
        }
    }
    for ((a, b), chans) in single {
        let chan = *chans.first().expect("a pair has a channel");
        for (me, peer) in [(a, b), (b, a)] {
            let dir = free_dirs().find(|d| !links[me].values().any(|x| x == d));
            let Some(dir) = dir else {
                return Err(too_many(program, me, peer, reserved));
            };
            links[me].insert((peer, chan), dir);
        }
    }
    Ok(links)
}

fn too_many(program: &Program, rank: usize, peer: usize, reserved: &[Dir]) -> XmlError {
    let peers = Dir::ALL.len() - reserved.len();
    XmlError {
        file: program.file.clone(),
        line: program.gpus[rank].line,
        message: format!(
            "gpu {rank}: no IPCQ direction left for its connection with gpu {peer}: a rank holds \
             at most {peers} (peer, channel) connections (the 8 IPCQ directions but those the \
             SIP's cube ring takes)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::Collective;

    /// PE 1's direction to PE 0 (`kernel::TO_CUBE_RING`).
    const TO_CUBE_RING: Dir = Dir::S;

    fn xml(ngpus: usize, tbs: impl Fn(usize) -> String) -> String {
        let gpus: String = (0..ngpus)
            .map(|g| {
                format!(
                    "<gpu id=\"{g}\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">{}</gpu>\n",
                    tbs(g)
                )
            })
            .collect();
        format!(
            "<algo name=\"t\" nchunksperloop=\"1\" ngpus=\"{ngpus}\" coll=\"allreduce\" inplace=\"1\">\n{gpus}</algo>"
        )
    }

    fn tb(id: usize, send: i64, recv: i64, chan: u32) -> String {
        format!("<tb id=\"{id}\" send=\"{send}\" recv=\"{recv}\" chan=\"{chan}\"/>")
    }

    #[test]
    fn all_pairs_of_eight_fit_and_every_rank_names_each_peer_once() {
        let text = xml(8, |g| {
            (0..8)
                .filter(|&p| p != g)
                .enumerate()
                .map(|(i, p)| tb(i, p as i64, p as i64, 0))
                .collect()
        });
        let program = Program::parse("a.xml", &text, 8, Collective::AllReduce).unwrap();
        let links = links(&program, &[TO_CUBE_RING]).unwrap();
        for (rank, table) in links.iter().enumerate() {
            assert_eq!(table.len(), 7, "rank {rank}");
            let dirs: BTreeSet<_> = table.values().collect();
            assert_eq!(dirs.len(), 7, "rank {rank}: a direction twice");
            assert!(!dirs.contains(&TO_CUBE_RING));
        }
    }

    #[test]
    fn two_channels_between_two_ranks_take_opposite_directions() {
        let text = xml(2, |g| {
            let p = (1 - g) as i64;
            tb(0, p, p, 0) + &tb(1, p, p, 1)
        });
        let program = Program::parse("c.xml", &text, 2, Collective::AllReduce).unwrap();
        let links = links(&program, &[TO_CUBE_RING]).unwrap();
        for chan in 0..2 {
            assert_eq!(links[0][&(1, chan)].opposite(), links[1][&(0, chan)]);
        }
        assert_ne!(links[0][&(1, 0)], links[0][&(1, 1)]);
    }

    #[test]
    fn more_connections_than_directions_name_the_gpu_line() {
        // 7 channels between two ranks: the six directions of the three
        // opposite pairs without `S`/`N` hold six.
        let text = xml(2, |g| {
            let p = (1 - g) as i64;
            (0..7).map(|c| tb(c, p, p, c as u32)).collect()
        });
        let program = Program::parse("m.xml", &text, 2, Collective::AllReduce).unwrap();
        let error = links(&program, &[TO_CUBE_RING]).unwrap_err();
        assert_eq!(error.line, 2);
        assert!(
            error
                .to_string()
                .starts_with("m.xml:2: gpu 0: no IPCQ direction left"),
            "{error}"
        );
    }
}
