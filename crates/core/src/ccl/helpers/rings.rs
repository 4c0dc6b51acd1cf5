//! Rings and pairwise exchanges: [`Ring`] reduce-scatter and all-gather
//! steps ([`ring_step`]), and [`exchange`], which sends one part and
//! receives another as messages of at most [`Exchange::max_message`].

use std::pin::Pin;

use futures::future::Either;

use super::*;

/// The chunk position `pos` sends and the chunk it receives at `step` of
/// a ring reduce-scatter over `len` positions (sending east):
/// `send = (pos − step) mod n`, `recv = (pos − step − 1) mod n`.
/// After `n − 1` steps position `p` holds the sum of chunk `(p + 1) mod n`;
/// the all-gather's step `s` is `ring_step(pos + 1, s, n)`.
pub fn ring_step(pos: usize, step: usize, len: usize) -> (usize, usize) {
    let n = len.max(1);
    let send = (pos + n - step % n) % n;
    (send, (send + n - 1) % n)
}

/// [`ring_step`] of steps `0..len − 1` in turn, with no division per
/// step: each step sends what the one before it received.
fn ring_steps(pos: usize, len: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut send = ring_step(pos, 0, len).0;
    (1..len).map(move |_| {
        let recv = send.checked_sub(1).unwrap_or(len - 1);
        let step = (send, recv);
        send = recv;
        step
    })
}

/// A position on a ring of `len` endpoints that sends in `send` and
/// receives in `recv` (e.g. `E` and `W`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// This endpoint's position, `0..len`.
    pub pos: usize,
    /// Endpoints on the ring.
    pub len: usize,
    /// Towards `pos + 1`.
    pub send: Dir,
    /// The ring from `pos − 1`.
    pub recv: Dir,
    /// The largest message in bytes (e.g. [`KernelArgs::slot_bytes`]): a
    /// part larger than this goes as several ([`exchange`]).
    pub max_message: u64,
}

impl Ring {
    /// The `len − 1` reduce-scatter steps over `parts` (one per position,
    /// offsets into `acc`): afterwards part `(pos + 1) mod len` of `acc`
    /// holds its sum over the ring. (The steps' future itself, no future
    /// around it: every poll of a message passes one layer fewer.)
    pub fn reduce_scatter<'a>(
        &self,
        tl: &'a Tl,
        op: ReduceOp,
        acc: &'a TensorHandle,
        parts: TileSplit,
    ) -> impl Future<Output = Result<(), KernelError>> + use<'a> {
        let reduce = move |part, received| reduce_owned(tl, op, part, received);
        self.steps(tl, acc, parts, self.pos, reduce)
    }

    /// The part of `parts` this position owns after
    /// [`reduce_scatter`](Self::reduce_scatter).
    pub fn owned(&self, parts: TileSplit) -> TileView {
        parts.part((self.pos + 1) % self.len.max(1))
    }

    /// The `len − 1` all-gather steps after [`reduce_scatter`](Self::reduce_scatter):
    /// every part's sum is copied round the ring, so every position's
    /// `acc` ends with the same bytes (the steps' future itself).
    pub fn all_gather<'a>(
        &self,
        tl: &'a Tl,
        acc: &'a TensorHandle,
        parts: TileSplit,
    ) -> impl Future<Output = Result<(), KernelError>> + use<'a> {
        // `tl.store(&part, &received)`, with no future around the copy.
        let store = move |part: TensorHandle, received: TensorHandle| {
            tl.copy(received.addr(), part.addr(), received.bytes())
        };
        self.steps(tl, acc, parts, self.pos + 1, store)
    }

    /// `len − 1` steps of "send part `ring_step(at).0`, receive part
    /// `ring_step(at).1` and `merge` it".
    fn steps<'a, F, Fut>(
        &self,
        tl: &'a Tl,
        acc: &'a TensorHandle,
        parts: TileSplit,
        at: usize,
        merge: F,
    ) -> impl Future<Output = Result<(), KernelError>> + use<'a, F, Fut>
    where
        F: Fn(TensorHandle, TensorHandle) -> Fut + 'a,
        Fut: Future<Output = Result<(), KernelError>> + 'a,
    {
        let how = Exchange {
            send: self.send,
            recv: self.recv,
            max_message: self.max_message,
        };
        let steps =
            ring_steps(at, self.len).map(move |(send, recv)| (parts.part(send), parts.part(recv)));
        exchange_each(tl, acc, how, steps, merge)
    }
}

/// The reduce-scatter's merge: [`reduce_received`] into `part` of the
/// slot `received`, both owned. A slot in this PE's TCM is checked and
/// assigned at once and the merge is PE_MATH's run itself: no future
/// around it, no handle kept across its waits (the merge is awaited as
/// soon as it is made, so nothing happens between). Any other slot, or
/// an op refused, is boxed (ADR-0067).
fn reduce_owned<'a>(
    tl: &'a Tl,
    op: ReduceOp,
    part: TensorHandle,
    received: TensorHandle,
) -> impl Future<Output = Result<(), KernelError>> + 'a {
    type Other<'a> = Pin<Box<dyn Future<Output = Result<(), KernelError>> + 'a>>;
    if received.space() != tl.tcm() {
        let remote: Other =
            Box::pin(async move { reduce_received(tl, op, &part, &received).await });
        return Either::Right(remote);
    }
    match tl.assign_op(op.binary(), &part, &received) {
        Ok((job, elements)) => Either::Left(tl.run_math(job, elements)),
        Err(refused) => Either::Right(Box::pin(std::future::ready(Err(refused))) as Other),
    }
}

/// Where an [`exchange`] sends and receives, and its largest message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// The direction the outgoing part goes.
    pub send: Dir,
    /// The direction the incoming part comes from.
    pub recv: Dir,
    /// The largest message in bytes (at most one IPCQ slot).
    pub max_message: u64,
}

/// Sends `out` (an offset view of `acc`) in `how.send` and receives a
/// part of `into`'s size from `how.recv`, each as [`messages`] of at most
/// `how.max_message` bytes, interleaved: message `i` out, then message `i`
/// in, `merge`d (`merge(destination, received)`) into its place in `into`
/// and released. Two partners exchanging with each other, or a ring all
/// sending at once, thus never wait on a full ring, and a part larger than
/// an IPCQ slot passes in several. An empty part sends (receives) nothing:
/// both ends cut the same part the same way.
pub async fn exchange<F, Fut>(
    tl: &Tl,
    acc: &TensorHandle,
    how: Exchange,
    out: TileView,
    into: TileView,
    merge: F,
) -> Result<(), KernelError>
where
    F: Fn(TensorHandle, TensorHandle) -> Fut,
    Fut: Future<Output = Result<(), KernelError>>,
{
    exchange_each(tl, acc, how, [(out, into)], merge).await
}

/// [`exchange`] of each `(out, into)` pair in turn, as one future (a
/// ring's steps build no future per step).
async fn exchange_each<F, Fut>(
    tl: &Tl,
    acc: &TensorHandle,
    how: Exchange,
    pairs: impl IntoIterator<Item = (TileView, TileView)>,
    merge: F,
) -> Result<(), KernelError>
where
    F: Fn(TensorHandle, TensorHandle) -> Fut,
    Fut: Future<Output = Result<(), KernelError>>,
{
    let dtype = acc.dtype();
    for (out, into) in pairs {
        let (outs, ins) = (
            message_count(out, how.max_message, dtype),
            message_count(into, how.max_message, dtype),
        );
        for i in 0..outs.max(ins) {
            if i < outs {
                let src = slice(tl, acc, &out.part(outs, i, dtype))?;
                tl.send(how.send, &src).await?;
            }
            if i < ins {
                let part = slice(tl, acc, &into.part(ins, i, dtype))?;
                let (received, held) = tl.recv_held(how.recv, part.shape(), part.dtype()).await?;
                merge(part, received).await?;
                tl.release_held_slot(held)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            // The last part received is the one the rank ends owning.
            assert_eq!(ring_step(rank, n - 2, n).1, (rank + 1) % n);
        }
    }

    #[test]
    fn ring_steps_walk_ring_step() {
        for len in 0..6 {
            for pos in 0..len + 2 {
                let walked: Vec<_> = ring_steps(pos, len).collect();
                let stepped: Vec<_> = (0..len.saturating_sub(1))
                    .map(|step| ring_step(pos, step, len))
                    .collect();
                assert_eq!(walked, stepped, "pos {pos} of {len}");
            }
        }
    }
}
