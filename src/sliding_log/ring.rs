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
//! always a suffix of the ring, and the `k`-th newest entry is found by index arithmetic alone.
//! The ring counts the oldest entries that have left every window to come (a window older than
//! the newest entry, found at each record), and the search for a window's first entry gallops
//! from there: one read when nothing else has left the window since, `O(log d)` when `d`
//! entries have.

use std::collections::TryReserveError;

/// The timestamps (ns since the UNIX epoch) of the newest admitted units, at most `capacity`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ring {
    /// Grows by `push` up to `capacity` (never beyond: its allocation is exactly that), then is
    /// overwritten in place.
    entries: Vec<u64>,
    /// Where the next entry goes: one past the newest, wrapping at `capacity`.
    next: usize,
    /// The most entries the ring holds: the log's limit, at most `SlidingLog::MAX_LIMIT`
    /// (2^24). A `u32`, as `expired`: with the latest time beside it, a keyed slot stays 64
    /// bytes.
    capacity: u32,
    /// How many of the oldest entries are out of the window of every decision to come: at
    /// least a window older than the newest entry, as [`record`](Ring::record) last found.
    /// Decisions are made at or after the newest entry, so the search for the window's first
    /// entry starts past them ([`count_in_window`](Ring::count_in_window)).
    expired: u32,
}

/// A position or count of entries in the ring: below its capacity, which fits a `u32`.
const fn narrow(n: usize) -> u32 {
    if n > u32::MAX as usize {
        u32::MAX
    } else {
        n as u32
    }
}

impl Ring {
    /// An empty ring for `capacity` entries, allocating nothing yet (see [`Ring::reserve`]).
    pub(crate) const fn unallocated(capacity: usize) -> Ring {
        Ring {
            entries: Vec::new(),
            next: 0,
            capacity: narrow(capacity),
            expired: 0,
        }
    }

    /// An empty ring for `capacity` entries, with its memory allocated.
    pub(crate) fn with_capacity(capacity: usize) -> Ring {
        Ring {
            entries: Vec::with_capacity(capacity),
            next: 0,
            capacity: narrow(capacity),
            expired: 0,
        }
    }

    /// Allocates the ring's whole memory if that has not been done yet: the only allocation a
    /// ring ever makes. Recording without it would allocate on the way (still bounded).
    ///
    /// # Errors
    /// When the allocator refuses the memory; the ring is unchanged.
    pub(crate) fn reserve(&mut self) -> Result<(), TryReserveError> {
        if self.entries.capacity() < self.capacity() {
            // `len <= capacity`, so this asks for room for exactly `capacity` entries in all.
            self.entries
                .try_reserve_exact(self.capacity() - self.entries.len())?;
        }
        Ok(())
    }

    /// Forgets every entry, keeping the memory (a keyed slot reused for another key).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.next = 0;
        self.expired = 0;
    }

    /// The most entries the ring holds.
    #[inline]
    fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// How many of the oldest entries are out of every window to come.
    #[inline]
    fn expired(&self) -> usize {
        self.expired as usize
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

    /// How many entries are in the window of length `window` that ends at `at`: the entries `e`
    /// with `at - e < window`, the newest ones. `at` must be at or after the newest entry (the
    /// decision's `max(now, newest)`), which keeps every subtraction from underflowing and the
    /// entries [`record`](Ring::record) found expired out of this window too.
    #[inline]
    pub(crate) fn count_in_window(&self, at: u64, window: u64) -> usize {
        let from = self.expired();
        // The usual case inline: the oldest entry not known to have left is still in.
        match self.entry_from_oldest(from) {
            Some(entry) if at - entry < window => self.len() - from,
            None => 0,
            Some(_) => self.len() - self.first_in_window(from, at, window),
        }
    }

    /// The entry `position` places from the oldest (0 the oldest), if there is one.
    #[inline]
    fn entry_from_oldest(&self, position: usize) -> Option<u64> {
        let len = self.entries.len();
        if position >= len {
            return None;
        }
        // The oldest is at `next` once the ring is full, at 0 before (`next == len` then): either
        // way `next + position`, less `len` if that is past the end.
        let index = self.next + position;
        Some(self.entries[if index >= len { index - len } else { index }])
    }

    /// The position, oldest first, of the oldest entry in the window that ends at `at`, or
    /// `len` if none is; every entry before `from` must be out of that window. Galloping from
    /// `from`, then bisecting: `O(log d)` reads for `d` entries between `from` and the answer,
    /// one read when the entry at `from` is in the window (a steady rate's usual case).
    fn first_in_window(&self, from: usize, at: u64, window: u64) -> usize {
        let len = self.len();
        // Every entry is at or before `at`, so `at - entry` cannot underflow.
        let inside = |position: usize| {
            self.entry_from_oldest(position)
                .is_some_and(|entry| at - entry < window)
        };
        if from >= len || inside(from) {
            return from.min(len);
        }
        // Invariant: the entry at `out` is out of the window, the one at `within` in it (or
        // `within == len`).
        let (mut out, mut step) = (from, 1);
        let mut within = loop {
            let probe = out.saturating_add(step);
            if probe >= len {
                break len;
            }
            if inside(probe) {
                break probe;
            }
            out = probe;
            step = step.saturating_mul(2);
        };
        while within - out > 1 {
            let middle = out + (within - out) / 2;
            if inside(middle) {
                within = middle;
            } else {
                out = middle;
            }
        }
        within
    }

    /// Appends `units` entries at `at`, writing over the oldest once full; only the last
    /// `capacity` units are kept. The decision already records at or after the newest entry;
    /// an earlier `at` is moved up to the newest all the same, so the ring is always ordered.
    /// Then moves the count of expired entries on to those a `window` older than the newest.
    #[inline]
    pub(crate) fn record(&mut self, at: u64, units: u64, window: u64) {
        let at = self.newest().map_or(at, |newest| newest.max(at));
        let capacity = self.capacity();
        let units = usize::try_from(units).unwrap_or(usize::MAX).min(capacity);
        for _ in 0..units {
            if self.entries.len() < capacity {
                self.entries.push(at);
            } else {
                self.entries[self.next] = at;
                // The oldest entry is gone: every position moves down by one.
                self.expired = self.expired.saturating_sub(1);
            }
            self.next += 1;
            if self.next == capacity {
                self.next = 0;
            }
        }
        // Every later decision is made at or after `at`, the newest entry now (if one was
        // written: the decisions never record a weight of 0).
        if units > 0 {
            self.expired = narrow(self.first_in_window(self.expired(), at, window));
        }
    }

    /// Makes room for `capacity` entries, keeping every entry in order (a sliding log whose
    /// limit was raised: the ring must hold the new limit's newest entries before a decision
    /// reads the limit). An unallocated ring only takes the new capacity, reserved by
    /// [`reserve`](Ring::reserve) when first used; an allocated one allocates the difference
    /// now. A smaller capacity changes nothing.
    ///
    /// # Errors
    /// When the allocator refuses the memory; the ring is unchanged.
    pub(crate) fn grow(&mut self, capacity: usize) -> Result<(), TryReserveError> {
        if capacity <= self.capacity() {
            return Ok(());
        }
        let len = self.entries.len();
        if self.entries.capacity() > 0 {
            self.entries.try_reserve_exact(capacity - len)?;
            // Oldest first from index 0, so that the ring grows by pushes from here (before it
            // was full, `next == len` already).
            if len == self.capacity() {
                self.entries.rotate_left(self.next);
            }
            self.next = len;
        }
        self.capacity = narrow(capacity);
        Ok(())
    }

    /// Removes up to `units` of the entries recorded at `at`, for an admission undone a moment
    /// later (its units are the newest entries at `at`, and only entries recorded after it are
    /// newer); the entries after them keep their order and move back into their places.
    /// Returns how many were removed.
    ///
    /// In a full ring the places freed become its oldest, counted as expired (out of every
    /// window to come) and holding time 0, so that the ring stays full and ordered.
    pub(crate) fn unrecord(&mut self, at: u64, units: u64) -> usize {
        let len = self.len();
        let newer = (1..=len)
            .take_while(|&k| self.newest_nth(k).is_some_and(|entry| entry > at))
            .count();
        let recorded = (newer + 1..=len)
            .take_while(|&k| self.newest_nth(k) == Some(at))
            .count();
        let removed = recorded.min(usize::try_from(units).unwrap_or(usize::MAX));
        if removed == 0 {
            return 0;
        }
        // The newer entries, oldest of them first, each `removed` places older.
        for k in (1..=newer).rev() {
            let (from, to) = (self.newest_index(k), self.newest_index(k + removed));
            self.entries[to] = self.entries[from];
        }
        if len < self.capacity() {
            // Not full: the ring is in order from index 0, and `next == len`.
            self.entries.truncate(len - removed);
            self.next = len - removed;
            self.expired = self.expired.min(narrow(self.len()));
        } else {
            // Full: the `removed` newest places become the oldest.
            for k in 1..=removed {
                let index = self.newest_index(k);
                self.entries[index] = 0;
            }
            self.next = (self.next + len - removed) % len;
            self.expired = narrow((self.expired() + removed).min(len));
        }
        removed
    }

    /// The index of the `k`-th newest entry (`1 <= k <= len`).
    fn newest_index(&self, k: usize) -> usize {
        if self.next >= k {
            self.next - k
        } else {
            self.next + self.entries.len() - k
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

    /// A window longer than every test's times: nothing expires.
    const W: u64 = 1_000;

    #[test]
    fn an_unallocated_ring_allocates_once_when_reserved() {
        let mut ring = Ring::unallocated(4);
        assert_eq!(ring.entries.capacity(), 0);
        ring.reserve().unwrap();
        assert_eq!(ring.entries.capacity(), 4);
        let buffer = ring.entries.as_ptr();
        ring.record(1, 3, W);
        ring.record(2, 3, W);
        ring.clear();
        ring.reserve().unwrap();
        ring.record(5, 9, W);
        assert_eq!(ring.entries.as_ptr(), buffer, "the ring reallocated");
        assert_eq!(ring.entries.capacity(), 4);
        assert_eq!(ring.to_vec(), [5, 5, 5, 5]);
    }

    #[test]
    fn keeps_the_newest_entries_in_order() {
        let mut ring = Ring::with_capacity(3);
        assert_eq!(ring.newest(), None);
        ring.record(10, 1, W);
        ring.record(20, 2, W);
        assert_eq!(ring.to_vec(), [10, 20, 20]);
        ring.record(30, 1, W);
        assert_eq!(ring.to_vec(), [20, 20, 30]);
        assert_eq!(ring.newest_nth(1), Some(30));
        assert_eq!(ring.newest_nth(3), Some(20));
        assert_eq!(ring.newest_nth(4), None);
        assert_eq!(ring.newest_nth(0), None);
        ring.record(40, 0, W);
        assert_eq!(ring.to_vec(), [20, 20, 30]);
        // An entry before the newest is recorded at the newest: the ring stays ordered.
        ring.record(25, 1, W);
        assert_eq!(ring.to_vec(), [20, 30, 30]);
    }

    /// Entries leave the window oldest first, and the count of expired entries follows the
    /// ring as it is overwritten.
    #[test]
    fn counts_the_window_from_the_entries_that_left_it() {
        let mut ring = Ring::with_capacity(4);
        ring.record(0, 2, 10);
        ring.record(5, 1, 10);
        ring.record(12, 1, 10);
        // 0 and 0 are a window older than 12: expired.
        assert_eq!((ring.to_vec(), ring.expired), (vec![0, 0, 5, 12], 2));
        assert_eq!(ring.count_in_window(12, 10), 2);
        assert_eq!(ring.count_in_window(14, 10), 2);
        assert_eq!(ring.count_in_window(15, 10), 1);
        assert_eq!(ring.count_in_window(40, 10), 0);
        // Overwriting an expired entry: one expired left, then 5 leaves too (a window before 16).
        ring.record(16, 1, 10);
        assert_eq!((ring.to_vec(), ring.expired), (vec![0, 5, 12, 16], 2));
        assert_eq!(ring.count_in_window(16, 10), 2);
        ring.clear();
        assert_eq!((ring.len(), ring.expired), (0, 0));
        assert_eq!(ring.count_in_window(16, 10), 0);
    }

    proptest! {
        /// The ring holds exactly the last `capacity` entries of everything recorded, and after
        /// every record `count_in_window` counts, at any time from the newest entry on, the
        /// entries a plain filter finds in the window.
        #[test]
        fn is_the_tail_of_everything_recorded(
            capacity in 1usize..9,
            window in 1u64..40,
            steps in proptest::collection::vec((0u64..12, 0u64..12, 0u64..50), 0..40),
        ) {
            let mut ring = Ring::with_capacity(capacity);
            let (mut all, mut at) = (Vec::new(), 0);
            for (gap, units, later) in steps {
                at += gap;
                ring.record(at, units, window);
                all.extend(std::iter::repeat_n(at, units as usize));
                let tail = all[all.len().saturating_sub(capacity)..].to_vec();
                prop_assert_eq!(ring.to_vec(), tail.clone());
                let newest = tail.last().copied().unwrap_or(0);
                for now in [newest, newest + later, newest + window, newest + window - 1] {
                    let expected = tail.iter().filter(|&&e| now - e < window).count();
                    prop_assert_eq!(ring.count_in_window(now, window), expected, "at {}", now);
                }
                prop_assert!(ring.expired() <= ring.len());
            }
        }
    }
}
