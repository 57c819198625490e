//! The answer every limiter gives.

use std::time::Duration;

/// Whether a request passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
// A full word, so that a `Decision` is five words and is copied word by word (a one-byte field
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
    /// key could use is due to become idle (its slot can then be reclaimed), as read during the
    /// lookup. Another new key may take that slot first.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a decision that is not looked at limits nothing"]
pub struct Decision {
    outcome: Outcome,
    remaining: u64,
    retry_after_nanos: u64,
    reset_after_nanos: u64,
    delay_nanos: u64,
}

impl Decision {
    /// An admitted request: `remaining` units still pass now, the limiter is full again after
    /// `reset_after_nanos`, and the request itself should wait `delay_nanos` (non-zero only for
    /// the shaper).
    pub(crate) const fn allowed(remaining: u64, reset_after_nanos: u64, delay_nanos: u64) -> Self {
        Decision {
            outcome: Outcome::Allowed,
            remaining,
            retry_after_nanos: 0,
            reset_after_nanos,
            delay_nanos,
        }
    }

    /// A refused request: `remaining` units would pass now, the same request passes after
    /// `retry_after_nanos`, and the limiter is full again after `reset_after_nanos`.
    pub(crate) const fn denied(remaining: u64, retry_after_nanos: u64, reset_after_nanos: u64) -> Self {
        Decision {
            outcome: Outcome::Denied,
            remaining,
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
            remaining: 0,
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
        self.remaining
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
    #[cfg(any(feature = "tower", feature = "redis"))]
    pub(crate) fn slot_end(&self, decided_at: crate::Timestamp) -> Option<crate::Timestamp> {
        match self.outcome {
            Outcome::Allowed => Some(decided_at.saturating_add(self.reset_after())),
            _ => None,
        }
    }
}
