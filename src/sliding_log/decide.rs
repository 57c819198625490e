//! The pure decision: a log's state, a time and a weight in; a [`Decision`] and what to record
//! out. No lock, no clock; the limiters run it while holding their log's lock.

use super::state::LogState;
use super::SlidingLog;
use crate::Decision;

/// What [`SlidingLog::decide`] concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The answer for the caller.
    pub(crate) decision: Decision,
    /// The time the request was decided at: `max(now, latest)`, where its units are recorded
    /// if it is admitted (so the ring stays ordered), and the log's new latest time if it
    /// weighs anything ([`LogState::apply`]).
    pub(crate) at: u64,
    /// Whether to record the request's units at `at`: admitted, with a weight.
    pub(crate) record: bool,
}

impl SlidingLog {
    /// Decides a request of weight `cost` at `now` against `state` (the newest admitted units,
    /// and the latest time a counted decision was made at).
    ///
    /// - **Time**: the request is decided at `at = max(now, latest)`, `latest` the latest time a
    ///   decision of weight 1 or more was made at, admitted or refused: a clock that stepped
    ///   back is treated as if it had stood still at the latest time it was shown, so it admits
    ///   only what a clock that never goes back admits, and the ring stays in time order.
    ///   Durations are measured from the real `now`.
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
    pub(crate) fn decide(&self, state: &LogState, now: u64, cost: u64) -> Verdict {
        let (ring, window) = (&state.ring, self.window);
        let at = state.decided_at(now);
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
                // `count` may exceed a limit lowered since its units were recorded (a live
                // change): nothing remains then.
                decision: Decision::allowed(
                    self.limit.saturating_sub(count),
                    reset_after(count, ring.newest()),
                    0,
                ),
                at,
                record: false,
            };
        }
        match count.checked_add(cost) {
            Some(total) if total <= self.limit => Verdict {
                // `total >= cost > 0`: the request's own units are the newest in the window.
                decision: Decision::allowed(self.limit - total, leaves(at), 0),
                at,
                record: true,
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
                        self.limit.saturating_sub(count),
                        retry_after,
                        reset_after(count, ring.newest()),
                    ),
                    at,
                    record: false,
                }
            }
        }
    }

    /// Whether a log decides exactly as an empty one at `now` and at every later time: its
    /// newest entry has left the window (or it has none), and no decision was made at a time
    /// after `now` (one would be decided at that time). A keyed table may then reuse it.
    #[inline]
    pub(crate) fn is_idle(&self, state: &LogState, now: u64) -> bool {
        state.latest <= now
            && state
                .ring
                .newest()
                .is_none_or(|newest| now - newest >= self.window)
    }

    /// Nanoseconds from `now` until the log is [idle](Self::is_idle) if nothing more is
    /// counted: when its newest entry leaves the window, and not before the latest time a
    /// decision was made at. `u64::MAX` when that is past the end of representable time.
    pub(crate) fn idle_in(&self, state: &LogState, now: u64) -> u64 {
        let leaves = state
            .ring
            .newest()
            .map_or(Some(0), |newest| newest.checked_add(self.window));
        match leaves {
            Some(leaves) => leaves.max(state.latest).saturating_sub(now),
            None => u64::MAX,
        }
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
    fn check(log: &SlidingLog, state: &mut LogState, now: u64, cost: u64) -> Decision {
        let verdict = log.decide(state, now, cost);
        state.apply(&verdict, cost, log.window);
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
        let mut ring = LogState::with_capacity(3);
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
        let mut ring = LogState::with_capacity(1);
        assert_eq!(numbers(check(&log, &mut ring, 5, 0)), (true, 1, 0, 0));
        assert_eq!(ring.ring.len(), 0);
        assert!(check(&log, &mut ring, 10, 1).is_allowed());
        assert_eq!(numbers(check(&log, &mut ring, 20, 0)), (true, 0, 0, 990));
        assert_eq!(ring.ring.to_vec(), [10]);
    }

    #[test]
    fn a_weight_above_the_limit_never_passes() {
        let log = log(2, W);
        let ring = LogState::with_capacity(2);
        let verdict = log.decide(&ring, 7, 3);
        assert_eq!(numbers(verdict.decision), (false, 2, u64::MAX, 0));
        assert!(!verdict.record);
        assert_eq!(
            numbers(log.decide(&ring, 7, u64::MAX).decision),
            (false, 2, u64::MAX, 0)
        );
    }

    #[test]
    fn time_going_back_decides_at_the_newest_entry_and_keeps_the_ring_ordered() {
        let log = log(2, W);
        let mut ring = LogState::with_capacity(2);
        assert!(check(&log, &mut ring, 5_000, 1).is_allowed());
        // 4000 is before the newest entry: decided (and recorded) at 5000.
        assert_eq!(numbers(check(&log, &mut ring, 4_000, 1)), (true, 0, 0, 2_000));
        assert_eq!(ring.ring.to_vec(), [5_000, 5_000]);
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

    /// A refusal moves the time later decisions are made at (limit 2 per 1,000 ns): 1 unit at
    /// 10,000 admitted, 2 at 10,900 refused, 1 at 9,900 (the clock stepped back) decided at
    /// 10,900 and recorded there, then 2 at 11,000 refused, as on a clock that never went back
    /// (10,000, 10,900, 10,900, 11,000): the unit at 10,900 is still in the window. Decided at
    /// the newest unit instead (10,000), the third request was recorded a window before 11,000
    /// and the fourth admitted: three units within 1,000 ns of a clock that had read 10,900.
    #[test]
    fn a_refusal_moves_the_time_later_decisions_are_made_at() {
        let log = log(2, W);
        let mut state = LogState::with_capacity(2);
        assert!(check(&log, &mut state, 10_000, 1).is_allowed());
        assert!(!check(&log, &mut state, 10_900, 2).is_allowed());
        assert_eq!(state.latest, 10_900);
        assert_eq!(numbers(check(&log, &mut state, 9_900, 1)), (true, 0, 0, 2_000));
        assert_eq!(state.ring.to_vec(), [10_000, 10_900]);
        assert!(!check(&log, &mut state, 11_000, 2).is_allowed());
        // Weightless requests and peeks move nothing.
        assert!(check(&log, &mut state, 50_000, 0).is_allowed());
        assert_eq!(state.latest, 11_000);
        assert!(!log.is_idle(&state, 10_999));
        assert_eq!(log.idle_in(&state, 10_999), 901);
        assert!(log.is_idle(&state, 11_900));
    }

    #[test]
    fn now_near_zero_does_not_underflow() {
        let log = log(1, u64::MAX);
        let mut ring = LogState::with_capacity(1);
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
        let mut ring = LogState::with_capacity(1);
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
