//! The executor's run queue: task ids in FIFO order, in a ring whose
//! length is a power of two, so a push and a pop find their place with a
//! mask (a `VecDeque` wraps with a compare and a conditional move; ADR-0063).

use super::waker::TaskId;

/// What fills the ring's free places (never read: only the `len` ids from
/// `head` on are).
const VACANT: TaskId = TaskId {
    index: u32::MAX,
    generation: 0,
};

/// Task ids waiting to be polled, oldest first.
#[derive(Default)]
pub(crate) struct RunQueue {
    /// Empty, or a power of two long.
    ring: Vec<TaskId>,
    head: usize,
    len: usize,
}

impl RunQueue {
    /// Appends `id` after every id already queued.
    #[inline]
    pub fn push_back(&mut self, id: TaskId) {
        if self.len == self.ring.len() {
            self.grow();
        }
        let at = (self.head + self.len) & (self.ring.len() - 1);
        self.ring[at] = id;
        self.len += 1;
    }

    /// The oldest id, removed.
    #[inline]
    pub fn pop_front(&mut self) -> Option<TaskId> {
        if self.len == 0 {
            return None;
        }
        let id = self.ring[self.head];
        self.head = (self.head + 1) & (self.ring.len() - 1);
        self.len -= 1;
        Some(id)
    }

    /// The oldest id, left in place.
    #[inline]
    pub fn front(&self) -> Option<TaskId> {
        (self.len > 0).then(|| self.ring[self.head])
    }

    /// Forgets every queued id.
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Doubles the ring (at least 16 places), the queued ids first in order.
    #[cold]
    fn grow(&mut self) {
        let capacity = (self.ring.len() * 2).max(16);
        let mut ring = Vec::with_capacity(capacity);
        ring.extend((0..self.len).map(|i| self.ring[(self.head + i) % self.ring.len()]));
        ring.resize(capacity, VACANT);
        self.ring = ring;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn id(index: u32) -> TaskId {
        TaskId {
            index,
            generation: index / 3,
        }
    }

    /// Pushes and pops interleaved across several growths and wraps give
    /// the ids a `VecDeque` gives, in the same order.
    #[test]
    fn a_ring_is_fifo_across_growth_and_wrap() {
        let (mut ring, mut deque) = (RunQueue::default(), VecDeque::new());
        let mut next = 0;
        for round in 0..200_u32 {
            for _ in 0..(round % 7 + 1) {
                ring.push_back(id(next));
                deque.push_back(id(next));
                next += 1;
            }
            for _ in 0..(round % 5) {
                assert_eq!(ring.front(), deque.front().copied());
                assert_eq!(ring.pop_front(), deque.pop_front());
            }
        }
        while let Some(expected) = deque.pop_front() {
            assert_eq!(ring.pop_front(), Some(expected));
        }
        assert_eq!(ring.pop_front(), None);
        assert_eq!(ring.front(), None);
        ring.push_back(id(1));
        ring.clear();
        assert_eq!(ring.pop_front(), None);
    }
}
