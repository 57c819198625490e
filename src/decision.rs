//! The answer every limiter gives.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

/// Whether a request passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
// A full word, so that a `Decision` is six words and is copied word by word (a one-byte field
// made copies mix widths, and the loads stalled on store forwarding).
#[repr(u64)]
pub enum Outcome {
    /// The request may proceed (for the leaky bucket shaper: after [`Decision::delay`]).
    Allowed,
    /// The request is refused; it was not counted.
    Denied,
    /// Keyed limiters only: the request is refused because the table has no room for a new key
    /// and its policy is [`WhenFull::Refuse`](crate::WhenFull::Refuse) (fail closed).
    /// [`Decision::retry_after`] is then a hint: how long until a key that holds a slot this
    /// key could use is due to become reclaimable
    /// ([`Algorithm::is_reclaimable`](crate::algorithm::Algorithm::is_reclaimable): idle, and
    /// for the fixed window a whole window later), as read during the lookup. Another new key
    /// may take that slot first.
    TableFull,
    /// The request may proceed, but it was not counted (fail open): a keyed limiter's table had
    /// no room for a new key and its policy is [`WhenFull::Admit`](crate::WhenFull::Admit), or
    /// (feature `redis`) a distributed limiter could not reach its store and its policy is to
    /// fail open.
    AllowedUntracked,
}

/// What a limiter decided for one request, and what the caller may tell the client.
///
/// All durations are measured from the timestamp the decision was made at.
///
/// ```
/// use tollgate::{DirectLimiter, ManualClock, Quota, TokenBucket};
///
/// let clock = ManualClock::new();
/// let limiter = DirectLimiter::with_clock(TokenBucket::new(Quota::per_second(2)?)?, clock);
/// let first = limiter.check();
/// assert!(first.is_allowed());
/// assert_eq!(first.remaining(), 1);
/// limiter.check();
/// let refused = limiter.check();
/// assert!(!refused.is_allowed());
/// assert_eq!(refused.retry_after().as_millis(), 500);
/// assert_eq!(refused.reset_after().as_millis(), 1_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Two decisions are equal when everything they answer is: outcome, remaining, retry-after,
/// reset-after and delay.
#[derive(Clone, Copy)]
#[must_use = "a decision that is not looked at limits nothing"]
pub struct Decision {
    outcome: Outcome,
    /// `remaining` times `unit`, or more by less than `unit`: the remaining units are divided out
    /// when asked for. A bucket's decision knows its room in nanoseconds (the sliding window's
    /// 64-bit path, its room times `w`); dividing on every decision put a multiplication chain
    /// before the stores of the answer, which a locked CAS then waited for (2 ns of a 22 ns
    /// decision on an Intel Xeon).
    remaining_scaled: u64,
    /// At least 1: the buckets' emission interval, the sliding window's `w` on its 64-bit path,
    /// 1 for every other answer.
    unit: u64,
    retry_after_nanos: u64,
    reset_after_nanos: u64,
    delay_nanos: u64,
}

impl Decision {
    /// An admitted request: `remaining` units still pass now, the limiter is full again after
    /// `reset_after_nanos`, and the request itself should wait `delay_nanos` (non-zero only for
    /// the shaper).
    pub(crate) const fn allowed(remaining: u64, reset_after_nanos: u64, delay_nanos: u64) -> Self {
        Decision::allowed_in_units(remaining, 1, reset_after_nanos, delay_nanos)
    }

    /// [`allowed`](Self::allowed) with `remaining_scaled / unit` units remaining (`unit` at
    /// least 1; 0 is taken as 1).
    pub(crate) const fn allowed_in_units(
        remaining_scaled: u64,
        unit: u64,
        reset_after_nanos: u64,
        delay_nanos: u64,
    ) -> Self {
        Decision {
            outcome: Outcome::Allowed,
            remaining_scaled,
            unit,
            retry_after_nanos: 0,
            reset_after_nanos,
            delay_nanos,
        }
    }

    /// A refused request: `remaining` units would pass now, the same request passes after
    /// `retry_after_nanos`, and the limiter is full again after `reset_after_nanos`.
    pub(crate) const fn denied(remaining: u64, retry_after_nanos: u64, reset_after_nanos: u64) -> Self {
        Decision::denied_in_units(remaining, 1, retry_after_nanos, reset_after_nanos)
    }

    /// [`denied`](Self::denied) with `remaining_scaled / unit` units remaining (`unit` at least
    /// 1; 0 is taken as 1).
    pub(crate) const fn denied_in_units(
        remaining_scaled: u64,
        unit: u64,
        retry_after_nanos: u64,
        reset_after_nanos: u64,
    ) -> Self {
        Decision {
            outcome: Outcome::Denied,
            remaining_scaled,
            unit,
            retry_after_nanos,
            reset_after_nanos,
            delay_nanos: 0,
        }
    }

    /// A refusal for lack of room in a keyed table: room may appear after `retry_after_nanos`
    /// (a hint: see [`Outcome::TableFull`]); the other durations are zero.
    pub(crate) const fn table_full(retry_after_nanos: u64) -> Self {
        Decision {
            outcome: Outcome::TableFull,
            remaining_scaled: 0,
            unit: 1,
            retry_after_nanos,
            reset_after_nanos: 0,
            delay_nanos: 0,
        }
    }

    /// An admission that was not counted: what a fresh key would have been told, marked untracked.
    pub(crate) const fn untracked(fresh: Decision) -> Self {
        Decision {
            outcome: Outcome::AllowedUntracked,
            ..fresh
        }
    }

    /// The same decision with the request waiting `delay_nanos` for its slot (a policy set's
    /// admission: the longest wait any of its policies gave).
    pub(crate) const fn with_delay(self, delay_nanos: u64) -> Self {
        Decision { delay_nanos, ..self }
    }

    /// Why the request passes or not.
    pub const fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// `true` when the request may proceed ([`Outcome::Allowed`] or
    /// [`Outcome::AllowedUntracked`]).
    pub const fn is_allowed(&self) -> bool {
        matches!(self.outcome, Outcome::Allowed | Outcome::AllowedUntracked)
    }

    /// How many units (requests of weight 1) would pass right now, after this decision.
    pub const fn remaining(&self) -> u64 {
        match self.remaining_scaled.checked_div(self.unit) {
            Some(units) => units,
            None => self.remaining_scaled,
        }
    }

    /// For a refused request: how long until the same request (same weight) would pass if
    /// nothing else is admitted meanwhile. Zero for an admitted request. A request that can never
    /// pass (the end of representable time) reports about 584 years. For
    /// [`Outcome::TableFull`], a hint of when room may appear (zero when a slot is about to be
    /// freed by an insert in flight).
    pub const fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos)
    }

    /// How long until the limiter is back to full (as if it had never been used), if nothing
    /// else is admitted meanwhile.
    pub const fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after_nanos)
    }

    /// For the leaky bucket shaper: how long an admitted request must wait for its slot before
    /// it proceeds. Zero for every other algorithm and for refused requests. The limiter never
    /// sleeps; the caller waits.
    pub const fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay_nanos)
    }

    /// The end of the slot this decision gave, when it was decided at `decided_at`: that time
    /// plus its reset-after (a bucket's reset-after is exactly its new TAT minus `now`, in whole
    /// nanoseconds, so this is the TAT it stored), the `end` a `refund_slot` compares. `None`
    /// unless counted and admitted ([`Outcome::Allowed`]): a refusal or an untracked admission
    /// holds no slot.
    pub(crate) fn slot_end(&self, decided_at: crate::Timestamp) -> Option<crate::Timestamp> {
        match self.outcome {
            Outcome::Allowed => Some(decided_at.saturating_add(self.reset_after())),
            _ => None,
        }
    }
}

impl PartialEq for Decision {
    fn eq(&self, other: &Decision) -> bool {
        self.outcome == other.outcome
            && self.remaining() == other.remaining()
            && self.retry_after_nanos == other.retry_after_nanos
            && self.reset_after_nanos == other.reset_after_nanos
            && self.delay_nanos == other.delay_nanos
    }
}

impl Eq for Decision {}

impl Hash for Decision {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (
            self.outcome,
            self.remaining(),
            self.retry_after_nanos,
            self.reset_after_nanos,
            self.delay_nanos,
        )
            .hash(state);
    }
}

impl fmt::Debug for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decision")
            .field("outcome", &self.outcome)
            .field("remaining", &self.remaining())
            .field("retry_after_nanos", &self.retry_after_nanos)
            .field("reset_after_nanos", &self.reset_after_nanos)
            .field("delay_nanos", &self.delay_nanos)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;

    use super::*;

    fn hash(decision: &Decision) -> u64 {
        let mut hasher = DefaultHasher::new();
        decision.hash(&mut hasher);
        hasher.finish()
    }

    /// A bucket's decision keeps its room in nanoseconds and divides when asked: 25 ns of 10 ns
    /// intervals is 2 units, and such a decision is equal to (and hashes and prints as) one that
    /// says 2 outright; one unit more or less is another decision.
    #[test]
    fn remaining_is_divided_when_asked_and_compared_as_divided() {
        let scaled = Decision::allowed_in_units(25, 10, 7, 3);
        let plain = Decision::allowed(2, 7, 3);
        assert_eq!(scaled.remaining(), 2);
        assert_eq!(scaled, plain);
        assert_eq!(hash(&scaled), hash(&plain));
        assert_eq!(format!("{scaled:?}"), format!("{plain:?}"));
        assert!(format!("{scaled:?}").contains("remaining: 2"));
        assert_ne!(Decision::allowed_in_units(30, 10, 7, 3), plain);
        assert_ne!(Decision::allowed_in_units(19, 10, 7, 3), plain);
        let refused = Decision::denied_in_units(u64::MAX, 3, 5, 9);
        assert_eq!(refused.remaining(), u64::MAX / 3);
        assert_eq!(refused, Decision::denied(u64::MAX / 3, 5, 9));
        assert_ne!(refused, Decision::allowed(u64::MAX / 3, 9, 0));
        // A unit of 0 is taken as 1 (no constructor makes one; no division by zero either).
        assert_eq!(Decision::allowed_in_units(4, 0, 0, 0).remaining(), 4);
        assert_eq!(Decision::untracked(scaled).remaining(), 2);
        assert_eq!(Decision::table_full(1).remaining(), 0);
    }
}
