//! `Pages`: the bytes of one mapped region, stored sparsely.
//!
//! A region is cut into [`PAGE`]-byte pages, and a page is allocated the
//! first time a non-zero byte is written to it; a page that was never
//! written reads as zeros. So the memory a data-keeping run needs grows
//! with the bytes it writes, not with the bytes it maps: IPCQ slot rings of
//! thousands of endpoints, of which a small all-reduce fills one slot each,
//! cost a page per slot used.
//!
//! Knows nothing of addresses or memories: offsets are into the region,
//! already checked by the store.

use std::borrow::Cow;

/// Bytes per page.
pub(super) const PAGE: usize = 4096;

/// A region's bytes: see the module docs.
#[derive(Debug, Clone)]
pub(super) struct Pages {
    len: usize,
    pages: Vec<Option<Box<[u8]>>>,
}

impl Pages {
    /// `len` zero bytes (no page allocated).
    pub(super) fn zeroed(len: usize) -> Pages {
        Pages {
            len,
            pages: vec![None; len.div_ceil(PAGE)],
        }
    }

    /// Bytes held in allocated pages.
    pub(super) fn resident(&self) -> usize {
        self.pages.iter().flatten().map(|page| page.len()).sum()
    }

    /// The `n` bytes at offset `at`: borrowed when they lie in one
    /// allocated page, assembled otherwise.
    pub(super) fn read(&self, at: usize, n: usize) -> Cow<'_, [u8]> {
        let (index, offset) = (at / PAGE, at % PAGE);
        if offset + n <= PAGE {
            if let Some(page) = &self.pages[index] {
                return Cow::Borrowed(&page[offset..offset + n]);
            }
        }
        let mut bytes = vec![0; n];
        let mut filled = 0;
        for (index, offset, n) in Self::spans(at, n) {
            if let Some(page) = &self.pages[index] {
                bytes[filled..filled + n].copy_from_slice(&page[offset..offset + n]);
            }
            filled += n;
        }
        Cow::Owned(bytes)
    }

    /// Writes `data` at offset `at`; zeros written to a page never written
    /// before leave it unallocated.
    pub(super) fn write(&mut self, at: usize, data: &[u8]) {
        let mut taken = 0;
        for (index, offset, n) in Self::spans(at, data.len()) {
            let chunk = &data[taken..taken + n];
            taken += n;
            if self.pages[index].is_none() && chunk.iter().all(|&b| b == 0) {
                continue;
            }
            self.page_mut(index)[offset..offset + n].copy_from_slice(chunk);
        }
    }

    /// Sets `n` bytes at offset `at` to `value`.
    pub(super) fn fill(&mut self, at: usize, n: usize, value: u8) {
        for (index, offset, n) in Self::spans(at, n) {
            if self.pages[index].is_none() && value == 0 {
                continue;
            }
            self.page_mut(index)[offset..offset + n].fill(value);
        }
    }

    /// The offset of the first byte that differs from `other` (a region of
    /// the same length), and the two bytes.
    pub(super) fn first_difference(&self, other: &Pages) -> Option<(usize, u8, u8)> {
        let zeros = [0; PAGE];
        let mut pairs = self.pages.iter().zip(&other.pages).enumerate();
        pairs.find_map(|(index, (a, b))| {
            let width = self.page_len(index);
            let a = a.as_deref().unwrap_or(&zeros[..width]);
            let b = b.as_deref().unwrap_or(&zeros[..width]);
            let at = a.iter().zip(b).position(|(x, y)| x != y)?;
            Some((index * PAGE + at, a[at], b[at]))
        })
    }

    /// `(page, offset in it, bytes)` for each page `[at, at + n)` touches.
    fn spans(at: usize, n: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let end = at + n;
        let mut position = at;
        std::iter::from_fn(move || {
            (position < end).then(|| {
                let (index, offset) = (position / PAGE, position % PAGE);
                let n = (PAGE - offset).min(end - position);
                position += n;
                (index, offset, n)
            })
        })
    }

    /// Page `index`, allocated (zeroed) if it was not.
    fn page_mut(&mut self, index: usize) -> &mut [u8] {
        let width = self.page_len(index);
        self.pages[index].get_or_insert_with(|| vec![0; width].into_boxed_slice())
    }

    /// The length of page `index` (the last one may be short).
    fn page_len(&self, index: usize) -> usize {
        PAGE.min(self.len - index * PAGE)
    }
}

impl PartialEq for Pages {
    /// Equal contents: an unallocated page equals a page of zeros.
    fn eq(&self, other: &Pages) -> bool {
        self.len == other.len && self.first_difference(other).is_none()
    }
}

impl Eq for Pages {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_allocated_by_non_zero_writes_only() {
        let mut pages = Pages::zeroed(10 * PAGE + 5);
        pages.write(3 * PAGE, &[0; 100]);
        pages.fill(5 * PAGE, PAGE, 0);
        assert_eq!(pages.resident(), 0);
        pages.write(PAGE - 2, &[1, 2, 3, 4]);
        assert_eq!(pages.resident(), 2 * PAGE);
        pages.fill(10 * PAGE, 5, 7);
        assert_eq!(pages.resident(), 2 * PAGE + 5, "the last page is short");
        assert_eq!(&*pages.read(PAGE - 3, 6), [0, 1, 2, 3, 4, 0]);
        assert!(matches!(pages.read(PAGE, 2), Cow::Borrowed([3, 4])));
        assert_eq!(&*pages.read(7 * PAGE, 3), [0, 0, 0]);
        assert_eq!(&*pages.read(10 * PAGE + 3, 2), [7, 7]);
    }

    #[test]
    fn an_unwritten_page_equals_a_page_of_zeros() {
        let mut a = Pages::zeroed(3 * PAGE);
        let mut b = a.clone();
        b.write(PAGE, &[5]);
        b.write(PAGE, &[0]);
        assert_eq!(a, b);
        a.write(2 * PAGE + 9, &[4]);
        assert_eq!(a.first_difference(&b), Some((2 * PAGE + 9, 4, 0)));
        assert_ne!(a, b);
    }
}
