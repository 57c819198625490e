//! Window arithmetic and the packing shared by the fixed and sliding window counters.

use super::divisor::Divisor;

/// How a window algorithm's 64-bit state is split, derived from the window length, and the
/// window arithmetic both layouts share.
///
/// ```text
///  63                      count_bits * fields                    0
/// +----------------------------+-------------------+--------------+
/// | window index (now / w)     | counter 1         | counter 0    |
/// +----------------------------+-------------------+--------------+
/// ```
///
/// The index field is exactly as wide as the largest index a `u64` timestamp can produce
/// (`u64::MAX / w`), so the absolute window index is stored without truncation and never wraps.
/// Whatever is left is shared by the counters; a limit that does not fit them takes the 128-bit
/// layout instead ([`WideLayout`]). For a 1-second window the index takes 35 bits; for a
/// 1-minute window, 29.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowLayout {
    window: Divisor,
    count_bits: u32,
    /// `fields * count_bits`: where the index starts (below 64: the index takes at least a bit).
    index_shift: u32,
    /// `2^count_bits - 1`, the largest value a counter field holds.
    count_mask: u64,
}

impl WindowLayout {
    /// The layout for `fields` counters of a window of `window` ns (at least 1).
    pub(crate) fn new(window: u64, fields: u32) -> WindowLayout {
        let index_bits = u64::BITS - (u64::MAX / window).leading_zeros();
        let count_bits = (u64::BITS - index_bits) / fields;
        WindowLayout {
            window: Divisor::new(window),
            count_bits,
            index_shift: fields * count_bits,
            // count_bits <= 63 because the index takes at least one bit.
            count_mask: (1 << count_bits) - 1,
        }
    }

    /// Whether counters of up to `limit` fit this 64-bit layout.
    pub(crate) const fn holds(&self, limit: u64) -> bool {
        limit <= self.count_mask
    }

    pub(crate) const fn window(&self) -> u64 {
        self.window.get()
    }

    /// `n / window`, by multiplication.
    #[inline]
    pub(crate) const fn windows_in(&self, n: u64) -> u64 {
        self.window.divide(n)
    }

    /// The index of the window holding `now`.
    #[inline]
    pub(crate) const fn index_of(&self, now: u64) -> u64 {
        self.window.divide(now)
    }

    /// When window `index` starts; `None` when that is past the end of representable time.
    #[inline]
    pub(crate) const fn start_of(&self, index: u64) -> Option<u64> {
        index.checked_mul(self.window.get())
    }
}

/// A window algorithm's state word: `u64` ([`WindowLayout`]) or `u128` ([`WideLayout`]).
pub(crate) trait Word: Copy + Eq + std::ops::Add<Output = Self> + From<u64> {}

impl Word for u64 {}

impl Word for u128 {}

/// How a window algorithm's counters and index are packed into its state word.
pub(crate) trait Packing: Copy {
    /// The state word.
    type Word: Word;

    /// The window index of a raw state.
    fn index(&self, raw: Self::Word) -> u64;

    /// Counter `field` (0 is the lowest) of a raw state.
    fn counter(&self, raw: Self::Word, field: u32) -> u64;

    /// Packs an index and counters (lowest first). Counters must be at most
    /// [`count_mask`](Self::count_mask), the index at most the window of `u64::MAX`.
    fn pack(&self, index: u64, counters: &[u64]) -> Self::Word;

    /// The largest value a counter field holds.
    fn count_mask(&self) -> u64;
}

impl Packing for WindowLayout {
    type Word = u64;

    #[inline(always)]
    fn index(&self, raw: u64) -> u64 {
        raw >> self.index_shift
    }

    #[inline(always)]
    fn counter(&self, raw: u64, field: u32) -> u64 {
        (raw >> (field * self.count_bits)) & self.count_mask
    }

    #[inline(always)]
    fn pack(&self, index: u64, counters: &[u64]) -> u64 {
        let mut raw = index;
        for &count in counters.iter().rev() {
            debug_assert!(count <= self.count_mask);
            raw = (raw << self.count_bits) | count;
        }
        raw
    }

    fn count_mask(&self) -> u64 {
        self.count_mask
    }
}

/// The 128-bit layout of a window whose limit does not fit its 64-bit one: the window index in
/// the high 64 bits (every index a `u64` timestamp produces fits), the `FIELDS` counters in the
/// low 64: the sliding window's two counters 32 bits each, the fixed window's one 63 bits (so
/// that a count plus a weight, each at most `2^63 - 1`, never overflows a `u64`).
///
/// ```text
///  127                   64 63            32 31             0
/// +-----------------------+----------------+----------------+
/// | window index (now / w)| previous (32)  | current (32)   |   (sliding)
/// +-----------------------+----------------+----------------+
/// | window index (now / w)|0| count (63)                    |   (fixed)
/// +-----------------------+---------------------------------+
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WideLayout<const FIELDS: u32>;

impl<const FIELDS: u32> WideLayout<FIELDS> {
    /// Bits per counter.
    const COUNT_BITS: u32 = if FIELDS == 1 { 63 } else { u64::BITS / FIELDS };
    /// The largest value a counter holds.
    pub(crate) const COUNT_MASK: u64 = u64::MAX >> (u64::BITS - Self::COUNT_BITS);
}

impl<const FIELDS: u32> Packing for WideLayout<FIELDS> {
    type Word = u128;

    #[inline(always)]
    fn index(&self, raw: u128) -> u64 {
        (raw >> u64::BITS) as u64
    }

    #[inline(always)]
    fn counter(&self, raw: u128, field: u32) -> u64 {
        ((raw >> (field * Self::COUNT_BITS)) as u64) & Self::COUNT_MASK
    }

    #[inline(always)]
    fn pack(&self, index: u64, counters: &[u64]) -> u128 {
        let mut low = 0u128;
        for (field, &count) in counters.iter().enumerate() {
            debug_assert!(count <= Self::COUNT_MASK);
            low |= u128::from(count) << (field as u32 * Self::COUNT_BITS);
        }
        (u128::from(index) << u64::BITS) | low
    }

    fn count_mask(&self) -> u64 {
        Self::COUNT_MASK
    }
}

/// Nanoseconds from `now` until `at`; `u64::MAX` ("never", about 584 years) when `at` is past the
/// end of representable time, zero when it has passed.
#[inline]
pub(crate) fn nanos_until(at: Option<u64>, now: u64) -> u64 {
    at.map_or(u64::MAX, |at| at.saturating_sub(now))
}

/// What the windows' equivalence tests (`fixed_window/tests.rs`, `sliding_window/tests.rs`)
/// share.
#[cfg(test)]
pub(super) mod test_support {
    /// `raw % (bound + 1)`, or one of the values near `anchor` (clamped to `0..=bound`): how the
    /// generators pick a number in a range with its edges often.
    pub(crate) fn pick(selector: u8, raw: u64, anchor: u64, bound: u64) -> u64 {
        match selector % 8 {
            0 => 0,
            1 => bound,
            2 => anchor.saturating_sub(1 + raw % 2).min(bound),
            3 => anchor.min(bound),
            4 => anchor.saturating_add(1 + raw % 2).min(bound),
            5 => (raw % 4).min(bound),
            _ => raw % bound.saturating_add(1).max(1),
        }
    }
}
