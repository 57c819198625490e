//! The exact count of units in a trailing window `(t - w, t]`, kept independently of every
//! limiter: the yardstick for overshoot and for the own-history measure of scenario 5.

use std::collections::VecDeque;

/// The times of the units counted so far that may still fall in a later window.
///
/// Times must be pushed in non-decreasing order (arrivals and the shaper's departures are).
#[derive(Debug)]
pub(crate) struct TrailingWindow {
    window_nanos: u64,
    times: VecDeque<u64>,
}

impl TrailingWindow {
    /// An empty window of length `window_nanos`.
    pub(crate) fn new(window_nanos: u64) -> TrailingWindow {
        TrailingWindow {
            window_nanos,
            times: VecDeque::new(),
        }
    }

    /// Forgets everything (to reuse the allocation for another client).
    pub(crate) fn clear(&mut self) {
        self.times.clear();
    }

    /// The units counted in `(now - w, now]`, forgetting those that are older.
    pub(crate) fn count_at(&mut self, now: u64) -> u64 {
        while let Some(&oldest) = self.times.front() {
            if oldest.saturating_add(self.window_nanos) > now {
                break;
            }
            self.times.pop_front();
        }
        self.times.len() as u64
    }

    /// Counts one unit at `at`, and returns the units in `(at - w, at]` including it.
    pub(crate) fn push(&mut self, at: u64) -> u64 {
        let before = self.count_at(at);
        self.times.push_back(at);
        before + 1
    }
}
