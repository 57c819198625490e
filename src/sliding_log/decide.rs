//! The pure decision: a ring of admitted units, a time and a weight in; a [`Decision`] and
//! what to record out. No lock, no clock; the limiters run it while holding their log's lock.

use super::ring::Ring;
use super::SlidingLog;
use crate::Decision;

/// What [`SlidingLog::decide`] concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The answer for the caller.
    pub(crate) decision: Decision,
    /// Where to record the request's units if it was admitted with a weight: the time they
    /// are written at (`max(now, newest)`, so the ring stays ordered). `None`: record nothing.
    pub(crate) record_at: Option<u64>,
}

impl SlidingLog {
    /// Decides a request of weight `cost` at `now` against `ring` (the newest admitted units).
    ///
    /// - **Time**: the request is decided at `at = max(now, newest entry)`: a clock that
    ///   stepped back is treated as if it had stood still at the newest admission, so it never
    ///   admits more than that clock would have, and the ring stays in time order. Durations are
    ///   measured from the real `now`.
    /// - **Admission**: the units in the window are the entries `e` with `at - e < w` (that is,
    ///   `e` in `(at - w, at]`, with no subtraction that can underflow: `e <= at`), a suffix
    ///   of the ring, `count` of them. Admitted iff `count + cost <= limit`, which is "the
    ///   `(limit - cost + 1)`-th newest entry is out of the window".
    /// - **Refused**: retry-after is when that `(limit - cost + 1)`-th newest entry leaves the
    ///   window (`e + w`): then `limit - cost` units are left in it, so the request fits, and
    ///   not before. Past the end of representable time: `u64::MAX`.
    /// - **Weight 0**: allowed, records nothing. **Weight above the limit** (the limiters
    ///   refuse it first with `CostTooLarge`): refused, retry-after `u64::MAX`.
    /// - remaining `= limit - units in the window` after the decision; reset-after is when the
    ///   newest unit in the window leaves it (0 if none is in it).
    #[inline]
    pub(crate) fn decide(&self, ring: &Ring, now: u64, cost: u64) -> Verdict {
        let window = self.window;
        let at = ring.newest().map_or(now, |newest| newest.max(now));
        // `e <= at` for every entry.
        let count = ring.count_in_window(at, window) as u64;
        // When a unit recorded at `entry` leaves the window, measured from the real `now` (every
        // entry asked about is in the window, so `end > at >= now`; saturating all the same).
        let leaves = |entry: u64| {
            entry
                .checked_add(window)
                .map_or(u64::MAX, |end| end.saturating_sub(now))
        };
        let reset_after = |count: u64, newest: Option<u64>| match newest {
            Some(newest) if count > 0 => leaves(newest),
            _ => 0,
        };
        if cost == 0 {
            return Verdict {
                decision: Decision::allowed(self.limit - count, reset_after(count, ring.newest()), 0),
                record_at: None,
            };
        }
        match count.checked_add(cost) {
            Some(total) if total <= self.limit => Verdict {
                // `total >= cost > 0`: the request's own units are the newest in the window.
                decision: Decision::allowed(self.limit - total, leaves(at), 0),
                record_at: Some(at),
            },
            _ => {
                let retry_after = match self.limit.checked_sub(cost) {
                    // `count > limit - cost`, so the `(limit - cost + 1)`-th newest exists and
                    // is in the window: the request fits once it leaves.
                    Some(room) => ring
                        .newest_nth(usize::try_from(room + 1).unwrap_or(usize::MAX))
                        .map_or(u64::MAX, leaves),
                    None => u64::MAX,
                };
                Verdict {
                    decision: Decision::denied(
                        self.limit - count,
                        retry_after,
                        reset_after(count, ring.newest()),
                    ),
                    record_at: None,
                }
            }
        }
    }

    /// Whether a log decides exactly as an empty one at `now` and at every later time: its
    /// newest entry has left the window (or it has none). A keyed table may then reuse it.
    #[inline]
    pub(crate) fn is_idle(&self, ring: &Ring, now: u64) -> bool {
        ring.newest()
            .is_none_or(|newest| now >= newest && now - newest >= self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;
    use std::time::Duration;

    const W: u64 = 1_000;

    fn log(limit: u64, window: u64) -> SlidingLog {
        SlidingLog::new(Quota::new(limit, Duration::from_nanos(window)).unwrap()).unwrap()
    }

    /// Decides and records, as a limiter does under its lock.
    fn check(log: &SlidingLog, ring: &mut Ring, now: u64, cost: u64) -> Decision {
        let verdict = log.decide(ring, now, cost);
        if let Some(at) = verdict.record_at {
            ring.record(at, cost, log.window);
        }
        verdict.decision
    }

    fn numbers(d: Decision) -> (bool, u64, u64, u64) {
        let ns = |d: Duration| d.as_nanos() as u64;
        (
            d.is_allowed(),
            d.remaining(),
            ns(d.retry_after()),
            ns(d.reset_after()),
        )
    }

    #[test]
    fn admits_up_to_the_limit_in_any_window() {
        let log = log(3, W);
        let mut ring = Ring::with_capacity(3);
        assert_eq!(numbers(check(&log, &mut ring, 100, 1)), (true, 2, 0, 1_000));
        assert_eq!(numbers(check(&log, &mut ring, 400, 2)), (true, 0, 0, 1_000));
        // Full: the weight-1 request waits for the oldest (100) to leave at 1100.
        assert_eq!(numbers(check(&log, &mut ring, 900, 1)), (false, 0, 200, 500));
        // A weight-2 request waits for the 2nd newest... the 3 - 2 + 1 = 2nd newest is 400.
        assert_eq!(numbers(check(&log, &mut ring, 900, 2)), (false, 0, 500, 500));
        // At 1100 the unit at 100 is out: (100, 1100] holds the two at 400.
        assert_eq!(numbers(check(&log, &mut ring, 1_100, 1)), (true, 0, 0, 1_000));
        assert_eq!(numbers(check(&log, &mut ring, 1_399, 1)), (false, 0, 1, 701));
        // At 1400 both units at 400 are out: only 1100 is left.
        assert_eq!(numbers(check(&log, &mut ring, 1_400, 1)), (true, 1, 0, 1_000));
    }

    #[test]
    fn weight_zero_is_allowed_and_records_nothing() {
        let log = log(1, W);
        let mut ring = Ring::with_capacity(1);
        assert_eq!(numbers(check(&log, &mut ring, 5, 0)), (true, 1, 0, 0));
        assert_eq!(ring.len(), 0);
        assert!(check(&log, &mut ring, 10, 1).is_allowed());
        assert_eq!(numbers(check(&log, &mut ring, 20, 0)), (true, 0, 0, 990));
        assert_eq!(ring.to_vec(), [10]);
    }

    #[test]
    fn a_weight_above_the_limit_never_passes() {
        let log = log(2, W);
        let ring = Ring::with_capacity(2);
        let verdict = log.decide(&ring, 7, 3);
        assert_eq!(numbers(verdict.decision), (false, 2, u64::MAX, 0));
        assert_eq!(verdict.record_at, None);
        assert_eq!(
            numbers(log.decide(&ring, 7, u64::MAX).decision),
            (false, 2, u64::MAX, 0)
        );
    }

    #[test]
    fn time_going_back_decides_at_the_newest_entry_and_keeps_the_ring_ordered() {
        let log = log(2, W);
        let mut ring = Ring::with_capacity(2);
        assert!(check(&log, &mut ring, 5_000, 1).is_allowed());
        // 4000 is before the newest entry: decided (and recorded) at 5000.
        assert_eq!(numbers(check(&log, &mut ring, 4_000, 1)), (true, 0, 0, 2_000));
        assert_eq!(ring.to_vec(), [5_000, 5_000]);
        // Refused: both leave at 6000, 2000 after the real now.
        assert_eq!(
            numbers(check(&log, &mut ring, 4_000, 1)),
            (false, 0, 2_000, 2_000)
        );
        // Far back in time: still refused, never underflows.
        assert_eq!(numbers(check(&log, &mut ring, 0, 1)), (false, 0, 6_000, 6_000));
        assert!(!log.is_idle(&ring, 0));
        assert!(!log.is_idle(&ring, 5_999));
        assert!(log.is_idle(&ring, 6_000));
    }

    #[test]
    fn now_near_zero_does_not_underflow() {
        let log = log(1, u64::MAX);
        let mut ring = Ring::with_capacity(1);
        assert_eq!(numbers(check(&log, &mut ring, 0, 1)), (true, 0, 0, u64::MAX));
        // The unit at 0 leaves at u64::MAX: representable, u64::MAX - 3 ns away.
        assert_eq!(
            numbers(check(&log, &mut ring, 3, 1)),
            (false, 0, u64::MAX - 3, u64::MAX - 3)
        );
    }

    #[test]
    fn the_end_of_time_reports_never_instead_of_wrapping() {
        let log = log(1, W);
        let mut ring = Ring::with_capacity(1);
        let near = u64::MAX - 10;
        assert_eq!(numbers(check(&log, &mut ring, near, 1)), (true, 0, 0, u64::MAX));
        // The unit at `near` would leave past u64::MAX: never, in representable time.
        assert_eq!(
            numbers(check(&log, &mut ring, u64::MAX, 1)),
            (false, 0, u64::MAX, u64::MAX)
        );
        assert!(!log.is_idle(&ring, u64::MAX));
    }
}
