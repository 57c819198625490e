//! The least a fixed or sliding window counter's decision costs: references, not limiters, set
//! beside tollgate's windows as `minimal_gcra` (`src/minimal_gcra.rs`) is set beside its buckets.
//!
//! Each is the window's decision with nothing a real limiter must add: a weight of 1 only, a
//! fixed state layout (no layout derived from the window, no check that a count fits), no path
//! for a clock that went back or for the end of representable time, and an answer of five words.
//! What is left is what every window counter of this design does between its load and its CAS:
//! is `now` still in the stored window (one multiplication, as tollgate tests it), then the count
//! test (fixed window) or the estimate `previous * (w - elapsed) + (current + 1) * w <= limit * w`
//! (sliding window, two multiplications). A decision in a later window moves the state there (one
//! hardware division, out of line: once per window). A refusal makes no CAS and reports when to
//! retry and when the window resets, as tollgate's does; the sliding window's reports 0 left (exact
//! when the current count alone fills the limit, as on the benchmarks' denied path) and finds its
//! retry-after as tollgate does, dividing only when the answer falls inside a window.
//!
//! Timed as tollgate's windows are (`DirectContender`: the same quotas, the allowed path in
//! chunks on fresh limiters, the sliding window's previous window holding 5,000).

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use tollgate::Clock;

use crate::{Direct, DirectContender, DirectLoops};

/// The fixed window's count is this wide (1,000,000 fits); the window index takes the bits above.
const FIXED_COUNT_BITS: u32 = 20;
const FIXED_COUNT_MASK: u64 = (1 << FIXED_COUNT_BITS) - 1;
/// Each of the sliding window's two counts is this wide (16,000 fits), so that the index of a
/// second since 1970 fits above them.
const SLIDING_COUNT_BITS: u32 = 16;
const SLIDING_COUNT_MASK: u64 = (1 << SLIDING_COUNT_BITS) - 1;
const NANOS_PER_SECOND: u64 = 1_000_000_000;
const NANOS_PER_DAY: u64 = 86_400 * NANOS_PER_SECOND;

/// A window counter's state word and quota, shared by both references.
#[derive(Debug)]
struct Window<C> {
    clock: C,
    state: CachePadded<AtomicU64>,
    window: u64,
    limit: u64,
}

impl<C: Clock> Window<C> {
    fn new(clock: C, window: u64, limit: u64, state: u64) -> Window<C> {
        Window {
            clock,
            state: CachePadded::new(AtomicU64::new(state)),
            window: std::hint::black_box(window),
            limit: std::hint::black_box(limit),
        }
    }

    /// One decision: `decide(state, now)` gives the state to store and the answer, or the
    /// answer of a refusal; the state is stored by the CAS tollgate's cell makes.
    #[inline(always)]
    fn decide(&self, decide: impl Fn(u64, u64) -> Result<(u64, [u64; 5]), [u64; 5]>) -> [u64; 5] {
        let now = self.clock.now().as_nanos();
        // Relaxed: as tollgate's cell loads its state word.
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let (next, answer) = match decide(state, now) {
                Ok(admitted) => admitted,
                Err(refused) => return refused,
            };
            // Relaxed, weak: the CAS tollgate's cell makes.
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return answer,
                Err(actual) => state = actual,
            }
        }
    }
}

/// The fixed window's admission, stripped: state `[index | count]`.
#[derive(Debug)]
pub struct MinimalFixedWindow<C>(Window<C>);

/// The state `now` moves a fixed window's stored state to, when `now` is in a later window.
#[inline(never)]
#[cold]
fn fixed_window_moved(window: u64, now: u64) -> (u64, u64) {
    let index = now / window;
    (index << FIXED_COUNT_BITS, now - index * window)
}

impl<C: Clock> Direct for MinimalFixedWindow<C> {
    /// Admitted (1 or 0), remaining, retry-after, reset-after, delay.
    type Answer = [u64; 5];

    #[inline(always)]
    fn check(&self) -> [u64; 5] {
        let (window, limit) = (self.0.window, self.0.limit);
        self.0.decide(|state, now| {
            let elapsed = now.wrapping_sub((state >> FIXED_COUNT_BITS).wrapping_mul(window));
            let (base, elapsed) = if elapsed < window {
                (state, elapsed)
            } else {
                fixed_window_moved(window, now)
            };
            let count = base & FIXED_COUNT_MASK;
            let until_reset = window - elapsed;
            if count >= limit {
                return Err([0, 0, until_reset, until_reset, 0]);
            }
            Ok((base + 1, [1, limit - count - 1, 0, until_reset, 0]))
        })
    }

    fn admitted(answer: &[u64; 5]) -> bool {
        answer[0] == 1
    }
}

/// The sliding window counter's admission, stripped: state `[index | previous | current]`.
#[derive(Debug)]
pub struct MinimalSlidingWindow<C>(Window<C>);

/// The state `now` moves a sliding window's stored state to, when `now` is in a later window:
/// the stored window's count becomes the previous one if it is the window just before.
#[inline(never)]
#[cold]
fn sliding_window_moved(state: u64, window: u64, now: u64) -> (u64, u64) {
    let index = now / window;
    let previous = match index.wrapping_sub(state >> (2 * SLIDING_COUNT_BITS)) {
        1 => state & SLIDING_COUNT_MASK,
        _ => 0,
    };
    (
        (index << (2 * SLIDING_COUNT_BITS)) | (previous << SLIDING_COUNT_BITS),
        now - index * window,
    )
}

/// The earliest offset `e` in `[0, w)` into a window whose previous count is `weight` where one
/// more request passes with `free` of the limit left (`weight * (w - e) <= free * w`), or `None`.
/// Divides only when the answer is strictly inside the window.
#[inline(always)]
fn earliest_offset(weight: u64, free: u64, window: u64) -> Option<u64> {
    if weight <= free {
        return Some(0);
    }
    match free {
        0 => None,
        _ => Some(window - free * window / weight),
    }
}

/// How long until a refused sliding window admits one request: later in this window, as the
/// previous count weighs less, if the current count leaves room; else in the next window, as the
/// current count (then the previous) weighs less; else when both have left.
#[inline(always)]
fn sliding_retry_after(previous: u64, current: u64, limit: u64, window: u64, elapsed: u64) -> u64 {
    let until_next = window - elapsed;
    let in_this_window = match current < limit {
        true => earliest_offset(previous, limit - current - 1, window),
        false => None,
    };
    match in_this_window {
        Some(offset) => offset.saturating_sub(elapsed),
        None => match earliest_offset(current, limit - 1, window) {
            Some(offset) => until_next + offset,
            None => until_next + window,
        },
    }
}

impl<C: Clock> Direct for MinimalSlidingWindow<C> {
    /// Admitted (1 or 0), what is left times the window (divided when asked, as tollgate's
    /// `Decision` does), retry-after, reset-after, delay.
    type Answer = [u64; 5];

    #[inline(always)]
    fn check(&self) -> [u64; 5] {
        let (window, limit) = (self.0.window, self.0.limit);
        self.0.decide(|state, now| {
            let elapsed = now.wrapping_sub((state >> (2 * SLIDING_COUNT_BITS)).wrapping_mul(window));
            let (base, elapsed) = if elapsed < window {
                (state, elapsed)
            } else {
                sliding_window_moved(state, window, now)
            };
            let previous = (base >> SLIDING_COUNT_BITS) & SLIDING_COUNT_MASK;
            let total = (base & SLIDING_COUNT_MASK) + 1;
            let until_next = window - elapsed;
            let weighed = previous * until_next;
            if total > limit || weighed > (limit - total) * window {
                let current = total - 1;
                let retry_after = sliding_retry_after(previous, current, limit, window, elapsed);
                return Err([0, 0, retry_after, until_next + window, 0]);
            }
            Ok((
                base + 1,
                [1, (limit - total) * window - weighed, 0, until_next + window, 0],
            ))
        })
    }

    fn admitted(answer: &[u64; 5]) -> bool {
        answer[0] == 1
    }
}

/// The fixed window reference with tollgate's benchmark quotas: 1,000,000 per second (allowed,
/// fresh), 1 per 36,500 days (denied, after its one admission).
#[derive(Debug)]
pub struct MinimalFixed<C>(pub C);

impl<C: Clock + Clone> DirectContender for MinimalFixed<C>
where
    MinimalFixedWindow<C>: DirectLoops,
{
    type Limiter = MinimalFixedWindow<C>;

    fn name(&self) -> &str {
        "minimal_fixed_window"
    }

    fn allowed(&self) -> MinimalFixedWindow<C> {
        MinimalFixedWindow(Window::new(self.0.clone(), NANOS_PER_SECOND, 1_000_000, 0))
    }

    fn denied(&self) -> MinimalFixedWindow<C> {
        let limiter = MinimalFixedWindow(Window::new(self.0.clone(), 36_500 * NANOS_PER_DAY, 1, 0));
        assert!(MinimalFixedWindow::admitted(&limiter.check()));
        limiter
    }
}

/// The sliding window reference with tollgate's benchmark quotas: 16,000 per second with 5,000
/// in the previous window (allowed), 1 per day (denied, after its one admission).
#[derive(Debug)]
pub struct MinimalSliding<C>(pub C);

impl<C: Clock + Clone> DirectContender for MinimalSliding<C>
where
    MinimalSlidingWindow<C>: DirectLoops,
{
    type Limiter = MinimalSlidingWindow<C>;

    fn name(&self) -> &str {
        "minimal_sliding_window"
    }

    fn allowed(&self) -> MinimalSlidingWindow<C> {
        let index = self.0.now().as_nanos() / NANOS_PER_SECOND;
        // Window `index - 1` holds 5,000: the first decision moves them to the previous count.
        let state = ((index - 1) << (2 * SLIDING_COUNT_BITS)) | 5_000;
        MinimalSlidingWindow(Window::new(self.0.clone(), NANOS_PER_SECOND, 16_000, state))
    }

    fn denied(&self) -> MinimalSlidingWindow<C> {
        let limiter = MinimalSlidingWindow(Window::new(self.0.clone(), NANOS_PER_DAY, 1, 0));
        assert!(MinimalSlidingWindow::admitted(&limiter.check()));
        limiter
    }
}

#[cfg(test)]
mod tests {
    //! The references decide what a window counter must, so that setting tollgate's windows
    //! beside them compares like with like. (The benchmark itself checks, after every timed
    //! chunk, that the allowed path still admits and the denied path refuses.)

    use std::time::Duration;

    use tollgate::clock::ManualClock;
    use tollgate::Timestamp;

    use super::*;

    fn admitted(answers: impl IntoIterator<Item = [u64; 5]>) -> Vec<u64> {
        answers.into_iter().map(|answer| answer[0]).collect()
    }

    #[test]
    fn the_fixed_window_admits_its_limit_per_window() {
        let clock = ManualClock::starting_at(Timestamp::from_secs(100));
        let limiter = MinimalFixedWindow(Window::new(clock.clone(), NANOS_PER_SECOND, 3, 0));
        assert_eq!(admitted((0..4).map(|_| limiter.check())), [1, 1, 1, 0]);
        clock.advance(Duration::from_millis(250));
        let refused = limiter.check();
        assert_eq!(refused, [0, 0, 750_000_000, 750_000_000, 0]);
        clock.advance(Duration::from_millis(750));
        assert_eq!(limiter.check(), [1, 2, 0, NANOS_PER_SECOND, 0]);
    }

    #[test]
    fn the_sliding_window_weighs_the_previous_count() {
        // Limit 100 per minute, 80 in the previous window, 15 s (25%) into this one: the estimate
        // weighs the previous window by 45/60, 60, so from none so far 40 pass.
        let clock = ManualClock::starting_at(Timestamp::from_secs(61));
        let state = (1 << (2 * SLIDING_COUNT_BITS)) | 80;
        let limiter = MinimalSlidingWindow(Window::new(clock.clone(), 60 * NANOS_PER_SECOND, 100, state));
        clock.set(Timestamp::from_secs(135));
        let first = limiter.check();
        assert_eq!(first[0], 1);
        // What is left, times the window: (100 - 1) * w - 80 * (w - 15 s).
        assert_eq!(first[1], 99 * 60 * NANOS_PER_SECOND - 80 * 45 * NANOS_PER_SECOND);
        assert_eq!(admitted((1..40).map(|_| limiter.check())), [1; 39]);
        // Refused: at 135.75 s the previous window weighs 80 * 44.25/60 = 59, and 59 + 41 = 100.
        let refused = limiter.check();
        assert_eq!(refused, [0, 0, 750_000_000, 105 * NANOS_PER_SECOND, 0]);
        assert_eq!(limiter.check()[0], 0);
        // 40 admitted at 135 s: 80 * 45/60 + 40 = 100, the limit. At 150 s, 80 * 30/60 + 40 = 80:
        // 20 more pass.
        clock.set(Timestamp::from_secs(150));
        assert_eq!(
            admitted((0..21).map(|_| limiter.check())),
            [[1; 20].as_slice(), &[0]].concat()
        );
    }
}
