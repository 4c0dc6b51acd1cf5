//! The project's own MSCCL all-reduce algorithms for `n` ranks, written
//! as MSCCL XML (`algorithms/msccl/*.xml` are their output, and
//! `examples/msccl_gen.rs` writes them): [`ring`] and [`all_pairs`].
//!
//! Pure text: nothing of the machine.

use std::fmt::Write;

/// One `<step>`: type, `(buffer, chunk)` read and written, the step of
/// another tb it waits for, and whether another step waits for it.
struct StepText<'a> {
    kind: &'a str,
    src: (&'a str, i64),
    dst: (&'a str, i64),
    dep: Option<(usize, usize)>,
    hasdep: bool,
}

impl StepText<'_> {
    fn new<'a>(kind: &'a str, src: (&'a str, i64), dst: (&'a str, i64)) -> StepText<'a> {
        StepText {
            kind,
            src,
            dst,
            dep: None,
            hasdep: false,
        }
    }
}

const NONE: (&str, i64) = ("i", -1);

fn algo(name: &str, n: usize, nchunks: usize, gpus: &str) -> String {
    format!(
        "<algo name=\"{name}\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"{nchunks}\" \
         ngpus=\"{n}\" coll=\"allreduce\" inplace=\"1\">\n{gpus}</algo>\n"
    )
}

fn gpu(out: &mut String, id: usize, chunks: usize, scratch: usize, tbs: &str) {
    let _ = writeln!(
        out,
        "  <gpu id=\"{id}\" i_chunks=\"{chunks}\" o_chunks=\"{chunks}\" s_chunks=\"{scratch}\">\n{tbs}  </gpu>"
    );
}

fn tb(out: &mut String, id: usize, send: i64, recv: i64, steps: &[StepText<'_>]) {
    let _ = writeln!(
        out,
        "    <tb id=\"{id}\" send=\"{send}\" recv=\"{recv}\" chan=\"0\">"
    );
    for (s, step) in steps.iter().enumerate() {
        let (depid, deps) = step.dep.map_or((-1, -1), |(t, s)| (t as i64, s as i64));
        let _ = writeln!(
            out,
            "      <step s=\"{s}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" \
             dstoff=\"{}\" cnt=\"1\" depid=\"{depid}\" deps=\"{deps}\" hasdep=\"{}\"/>",
            step.kind,
            step.src.0,
            step.src.1,
            step.dst.0,
            step.dst.1,
            u8::from(step.hasdep)
        );
    }
    out.push_str("    </tb>\n");
}

/// The ring all-reduce over `n` ranks (at least 2), one chunk per rank,
/// `2n − 1` steps: `s`, then `n − 1` reduce-scatter receives (`rrs`,
/// ending in `rrcs` at the chunk's owner, which starts the all-gather) and
/// `n − 1` all-gather receives (`rcs`, ending in `r`); at step `k` rank
/// `r` sends chunk `r − k` to `r + 1` (modulo `n`), so rank `r` owns
/// chunk `r + 1`.
pub fn ring(n: usize) -> String {
    let n = n.max(2);
    let at = |r: usize, k: usize| ((r + n * n - k) % n) as i64;
    let mut gpus = String::new();
    for r in 0..n {
        let mut steps = vec![StepText::new("s", ("i", at(r, 0)), NONE)];
        for k in 1..n - 1 {
            steps.push(StepText::new("rrs", ("i", at(r, k)), NONE));
        }
        let owned = ("i", at(r, n - 1));
        steps.push(StepText::new("rrcs", owned, owned));
        for j in 1..n {
            let chunk = ("i", at(r + 1, j));
            let kind = if j + 1 < n { "rcs" } else { "r" };
            steps.push(StepText::new(kind, NONE, chunk));
        }
        let mut tbs = String::new();
        tb(
            &mut tbs,
            0,
            ((r + 1) % n) as i64,
            ((r + n - 1) % n) as i64,
            &steps,
        );
        gpu(&mut gpus, r, n, 0, &tbs);
    }
    algo(&format!("ring_allreduce_{n}"), n, n, &gpus)
}

/// The all-pairs all-reduce over `n` ranks (at least 2), one chunk per
/// rank, owned by the rank of its index: one tb per peer sends the
/// peer's chunk to it and receives the peer's copy of this rank's chunk
/// into scratch; one more tb adds the scratch chunks into the owned chunk
/// in peer order (`re`, each after its receive); then every peer tb sends
/// the sum to its peer (after the last `re`) and receives the peer's sum
/// into the peer's chunk.
pub fn all_pairs(n: usize) -> String {
    let n = n.max(2);
    let mut gpus = String::new();
    for r in 0..n {
        let peers: Vec<usize> = (0..n).filter(|&p| p != r).collect();
        let reducer = peers.len();
        let own = ("i", r as i64);
        let mut tbs = String::new();
        for (j, &p) in peers.iter().enumerate() {
            let mut receive = StepText::new("r", NONE, ("s", j as i64));
            receive.hasdep = true;
            let mut send_sum = StepText::new("s", own, NONE);
            send_sum.dep = Some((reducer, peers.len() - 1));
            let steps = [
                StepText::new("s", ("i", p as i64), NONE),
                receive,
                send_sum,
                StepText::new("r", NONE, ("i", p as i64)),
            ];
            tb(&mut tbs, j, p as i64, p as i64, &steps);
        }
        let reduces: Vec<StepText<'_>> = (0..peers.len())
            .map(|j| StepText {
                dep: Some((j, 1)),
                hasdep: j + 1 == peers.len(),
                ..StepText::new("re", ("s", j as i64), own)
            })
            .collect();
        tb(&mut tbs, reducer, -1, -1, &reduces);
        gpu(&mut gpus, r, n, peers.len(), &tbs);
    }
    algo(&format!("allpairs_allreduce_{n}"), n, n, &gpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::Collective;
    use crate::ccl::msccl::program::{Program, StepKind};

    #[test]
    fn the_ring_reads_back_with_two_n_minus_one_steps_per_rank() {
        for n in [2, 3, 4, 8] {
            let program = Program::parse("ring.xml", &ring(n), n, Collective::AllReduce).unwrap();
            for (r, gpu) in program.gpus.iter().enumerate() {
                let tb = &gpu.tbs[0];
                // One send, then 2 (n − 1) receiving steps.
                assert_eq!(tb.steps.len(), 2 * n - 1);
                assert_eq!(
                    (tb.send, tb.recv),
                    (Some((r + 1) % n), Some((r + n - 1) % n))
                );
                // The owned chunk is reduced in place at step n − 1.
                let owner = &tb.steps[n - 1];
                assert_eq!(owner.kind, StepKind::RecvReduceCopySend);
                assert_eq!(owner.dst.off, (r + 1) % n);
            }
        }
    }

    #[test]
    fn all_pairs_reads_back_with_a_reducer_that_waits_for_every_receive() {
        let n = 4;
        let program = Program::parse("ap.xml", &all_pairs(n), n, Collective::AllReduce).unwrap();
        let gpu = &program.gpus[2];
        assert_eq!(gpu.tbs.len(), n);
        assert_eq!(gpu.scratch_chunks, n - 1);
        let deps: Vec<_> = gpu.tbs[n - 1].steps.iter().map(|s| s.dep).collect();
        assert_eq!(deps, [Some((0, 1)), Some((1, 1)), Some((2, 1))]);
        assert_eq!(gpu.tbs[0].steps[2].dep, Some((n - 1, n - 2)));
    }
}
