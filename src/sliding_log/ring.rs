//! The log itself: the timestamps of the newest admitted units, oldest to newest, in a ring
//! allocated once and overwritten in place.
//!
//! One `u64` entry per admitted unit (a request of weight `n` writes `n` entries, all at its
//! time). Only the newest `limit` entries can ever matter: a request is admitted only if the
//! units in the window plus its own weight stay within `limit`, so at most `limit` entries are
//! ever in a window, and an entry older than the `limit`-th newest one is out of every window
//! a later decision looks at. The ring therefore holds `limit` entries and writes over the
//! oldest.
//!
//! Entries are kept in non-decreasing time order on purpose: the decision records a request at
//! `max(now, newest)` (`docs/design.md`, "Sliding window log"), so the units in a window are
//! always a suffix of the ring, found by binary search, and the `k`-th newest entry is found
//! by index arithmetic alone.

use std::collections::TryReserveError;

/// The timestamps (ns since the UNIX epoch) of the newest admitted units, at most `capacity`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ring {
    /// Grows by `push` up to `capacity` (never beyond: its allocation is exactly that), then is
    /// overwritten in place.
    entries: Vec<u64>,
    /// Where the next entry goes: one past the newest, wrapping at `capacity`.
    next: usize,
    /// The most entries the ring holds: the log's limit.
    capacity: usize,
}

impl Ring {
    /// An empty ring for `capacity` entries, allocating nothing yet (see [`Ring::reserve`]).
    pub(crate) const fn unallocated(capacity: usize) -> Ring {
        Ring {
            entries: Vec::new(),
            next: 0,
            capacity,
        }
    }

    /// An empty ring for `capacity` entries, with its memory allocated.
    pub(crate) fn with_capacity(capacity: usize) -> Ring {
        Ring {
            entries: Vec::with_capacity(capacity),
            next: 0,
            capacity,
        }
    }

    /// Allocates the ring's whole memory if that has not been done yet: the only allocation a
    /// ring ever makes. Recording without it would allocate on the way (still bounded).
    ///
    /// # Errors
    /// When the allocator refuses the memory; the ring is unchanged.
    pub(crate) fn reserve(&mut self) -> Result<(), TryReserveError> {
        if self.entries.capacity() < self.capacity {
            // `len <= capacity`, so this asks for room for exactly `capacity` entries in all.
            self.entries
                .try_reserve_exact(self.capacity - self.entries.len())?;
        }
        Ok(())
    }

    /// Forgets every entry, keeping the memory (a keyed slot reused for another key).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.next = 0;
    }

    /// How many entries the ring holds (at most its capacity).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The `k`-th newest entry (`k = 1` the newest), if there are at least `k`.
    #[inline]
    pub(crate) fn newest_nth(&self, k: usize) -> Option<u64> {
        if k == 0 || k > self.entries.len() {
            return None;
        }
        // Before the ring is full, `next == len`; once full, the newest is just before `next`.
        let index = if self.next >= k {
            self.next - k
        } else {
            self.next + self.entries.len() - k
        };
        Some(self.entries[index])
    }

    /// The newest entry, if any.
    #[inline]
    pub(crate) fn newest(&self) -> Option<u64> {
        self.newest_nth(1)
    }

    /// How many of the newest entries satisfy `in_window`, a predicate that holds for the
    /// newest entries and fails from some entry on (the entries are in time order). Binary
    /// search: `O(log len)`.
    #[inline]
    pub(crate) fn count_newest(&self, in_window: impl Fn(u64) -> bool) -> usize {
        // Invariant: the `lo` newest hold, the `hi + 1`-th newest (if any) does not.
        let (mut lo, mut hi) = (0, self.entries.len());
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            // `1 <= mid <= len`, so the entry exists.
            if self.newest_nth(mid).is_some_and(&in_window) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Appends `units` entries at `at`, writing over the oldest once full; only the last
    /// `capacity` units are kept. The decision already records at or after the newest entry;
    /// an earlier `at` is moved up to the newest all the same, so the ring is always ordered.
    #[inline]
    pub(crate) fn record(&mut self, at: u64, units: u64) {
        let at = self.newest().map_or(at, |newest| newest.max(at));
        let units = usize::try_from(units).unwrap_or(usize::MAX).min(self.capacity);
        for _ in 0..units {
            if self.entries.len() < self.capacity {
                self.entries.push(at);
            } else {
                self.entries[self.next] = at;
            }
            self.next += 1;
            if self.next == self.capacity {
                self.next = 0;
            }
        }
    }

    /// Every entry, oldest first (for tests).
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u64> {
        (1..=self.len())
            .rev()
            .filter_map(|k| self.newest_nth(k))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_unallocated_ring_allocates_once_when_reserved() {
        let mut ring = Ring::unallocated(4);
        assert_eq!(ring.entries.capacity(), 0);
        ring.reserve().unwrap();
        assert_eq!(ring.entries.capacity(), 4);
        let buffer = ring.entries.as_ptr();
        ring.record(1, 3);
        ring.record(2, 3);
        ring.clear();
        ring.reserve().unwrap();
        ring.record(5, 9);
        assert_eq!(ring.entries.as_ptr(), buffer, "the ring reallocated");
        assert_eq!(ring.entries.capacity(), 4);
        assert_eq!(ring.to_vec(), [5, 5, 5, 5]);
    }

    #[test]
    fn keeps_the_newest_entries_in_order() {
        let mut ring = Ring::with_capacity(3);
        assert_eq!(ring.newest(), None);
        ring.record(10, 1);
        ring.record(20, 2);
        assert_eq!(ring.to_vec(), [10, 20, 20]);
        ring.record(30, 1);
        assert_eq!(ring.to_vec(), [20, 20, 30]);
        assert_eq!(ring.newest_nth(1), Some(30));
        assert_eq!(ring.newest_nth(3), Some(20));
        assert_eq!(ring.newest_nth(4), None);
        assert_eq!(ring.newest_nth(0), None);
        ring.record(40, 0);
        assert_eq!(ring.to_vec(), [20, 20, 30]);
        // An entry before the newest is recorded at the newest: the ring stays ordered.
        ring.record(25, 1);
        assert_eq!(ring.to_vec(), [20, 30, 30]);
    }

    proptest! {
        /// The ring holds exactly the last `capacity` entries of everything recorded, and
        /// `count_newest` counts the suffix a plain filter finds.
        #[test]
        fn is_the_tail_of_everything_recorded(
            capacity in 1usize..9,
            steps in proptest::collection::vec((0u64..5, 0u64..12), 0..40),
            cutoff in 0u64..200,
        ) {
            let mut ring = Ring::with_capacity(capacity);
            let (mut all, mut at) = (Vec::new(), 0);
            for (gap, units) in steps {
                at += gap;
                ring.record(at, units);
                all.extend(std::iter::repeat_n(at, units as usize));
            }
            let tail = all[all.len().saturating_sub(capacity)..].to_vec();
            prop_assert_eq!(ring.to_vec(), tail.clone());
            let expected = tail.iter().filter(|&&e| e > cutoff).count();
            prop_assert_eq!(ring.count_newest(|e| e > cutoff), expected);
        }
    }
}
