//! Window arithmetic and the packing shared by the fixed and sliding window counters.

use std::time::Duration;

use super::divisor::Divisor;
use crate::error::QuotaError;

/// How a window algorithm's 64-bit state is split, derived from the window length.
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
/// Whatever is left is shared by the counters; a limit that does not fit is refused at
/// construction with [`QuotaError::LimitTooLarge`]. For a 1-second window the index takes 35
/// bits; for a 1-minute window, 29.
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
    /// The layout for `fields` counters of a window of `window` ns holding up to `limit` each.
    pub(crate) fn new(window: u64, limit: u64, fields: u32) -> Result<WindowLayout, QuotaError> {
        let index_bits = u64::BITS - (u64::MAX / window).leading_zeros();
        let count_bits = (u64::BITS - index_bits) / fields;
        let layout = WindowLayout {
            window: Divisor::new(window),
            count_bits,
            index_shift: fields * count_bits,
            // count_bits <= 63 because the index takes at least one bit.
            count_mask: (1 << count_bits) - 1,
        };
        if limit > layout.count_mask() {
            return Err(QuotaError::LimitTooLarge {
                limit,
                max: layout.count_mask(),
                window: Duration::from_nanos(window),
            });
        }
        Ok(layout)
    }

    pub(crate) const fn window(&self) -> u64 {
        self.window.get()
    }

    /// `n / window`, by multiplication.
    #[inline]
    pub(crate) const fn windows_in(&self, n: u64) -> u64 {
        self.window.divide(n)
    }

    /// The largest value a counter field holds.
    pub(crate) const fn count_mask(&self) -> u64 {
        self.count_mask
    }

    /// Counter `field` (0 is the lowest) of a raw state.
    #[inline]
    pub(crate) const fn counter(&self, raw: u64, field: u32) -> u64 {
        (raw >> (field * self.count_bits)) & self.count_mask
    }

    /// The window index of a raw state.
    #[inline]
    pub(crate) const fn index(&self, raw: u64) -> u64 {
        raw >> self.index_shift
    }

    /// Packs an index and counters (lowest first). Counters must be `<= count_mask()`.
    pub(crate) fn pack(&self, index: u64, counters: &[u64]) -> u64 {
        let mut raw = index;
        for &count in counters.iter().rev() {
            debug_assert!(count <= self.count_mask());
            raw = (raw << self.count_bits) | count;
        }
        raw
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
