//! The quota a limiter announces (feature `tower`): its units per window and how used units
//! come back. The tower layer states it in the `RateLimit-Policy` and `RateLimit` fields
//! (`src/middleware/fields.rs`); each algorithm says its own (`src/algorithm/announced.rs`,
//! `src/sliding_log/config.rs`, `src/live.rs`).

use std::time::Duration;

use crate::Quota;

/// A quota as the IETF RateLimit fields state it (draft-ietf-httpapi-ratelimit-headers):
/// `quota` units per `window`, written `q` and `w` (`w` in whole seconds: a window that is not a
/// whole number of seconds is announced rounded up, with `q` scaled down to match and rounded
/// down, so the announcement never promises more than the limiter gives: `"10/s burst 1"` is
/// `q=10;w=1`), and, for the algorithms of this crate, how used units come back (what the `t`
/// of an admitted response is computed from). Build one with [`Policy::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// `q`: the units the policy allows per window.
    pub quota: u64,
    /// `w`: the window.
    pub window: Duration,
    /// How used units come back (set by the algorithms' [`AnnouncedPolicy`]).
    pub(crate) refill: Refill,
    /// `window` exactly, when it is not a whole number of nanoseconds (a bucket's).
    pub(crate) exact: ExactWindow,
}

impl Policy {
    /// `quota` units per `window`, for a limiter of your own. The layer cannot tell when its
    /// used units come back, so admitted responses carry no `t` in their `RateLimit` field
    /// (refusals do: their retry-after).
    pub fn new(quota: u64, window: Duration) -> Policy {
        Policy {
            quota,
            window,
            refill: Refill::Unknown,
            exact: ExactWindow::of(window),
        }
    }

    /// The same policy for a bucket that runs at `interval` rather than at the interval it was
    /// announced with (a store that keeps time in coarser units than nanoseconds rounds the
    /// interval up, to whole microseconds for instance): `q`, capped by what
    /// the interval admits in `w`, and `t` follow it. A policy whose units do not come back
    /// steadily is returned as it is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::middleware::AnnouncedPolicy;
    /// use tollgate::TokenBucket;
    ///
    /// // Three per second, run at whole microseconds: one unit every 333,334 µs.
    /// let policy = TokenBucket::new("3/s".parse()?)?.policy();
    /// let running = policy.running_at(Duration::from_micros(333_334));
    /// assert_eq!((running.quota, running.window), (3, Duration::from_secs(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn running_at(mut self, interval: Duration) -> Policy {
        if let Refill::Steady { interval: steady, .. } = &mut self.refill {
            *steady = interval;
        }
        self
    }

    /// The window exactly: `exact`, unless `window` was changed since (the fields are public),
    /// then `window` itself.
    pub(crate) fn exact_window(&self) -> ExactWindow {
        if self.exact.rounded_up() == self.window.as_nanos() {
            self.exact
        } else {
            ExactWindow::of(self.window)
        }
    }
}

/// A window of exactly `nanos / per` nanoseconds, in lowest terms: a bucket fills in
/// `burst * period / count`, which need not be a whole number of nanoseconds (`"3/s burst 1"`
/// fills in a third of a second).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ExactWindow {
    /// The numerator, in nanoseconds.
    pub(crate) nanos: u128,
    /// The denominator, at least 1.
    pub(crate) per: u128,
}

impl ExactWindow {
    /// `window`, a whole number of nanoseconds.
    pub(crate) fn of(window: Duration) -> ExactWindow {
        ExactWindow {
            nanos: window.as_nanos(),
            per: 1,
        }
    }

    /// `nanos / per`, in lowest terms (`per` at least 1).
    fn new(nanos: u128, per: u128) -> ExactWindow {
        let per = per.max(1);
        let divisor = gcd(nanos, per);
        ExactWindow {
            nanos: nanos / divisor,
            per: per / divisor,
        }
    }

    /// The window in whole nanoseconds, rounded up.
    fn rounded_up(&self) -> u128 {
        self.nanos.div_ceil(self.per)
    }
}

/// The greatest common divisor of `a` and `b` (`b` at least 1).
fn gcd(mut a: u128, mut b: u128) -> u128 {
    while a != 0 {
        (a, b) = (b % a, a);
    }
    b
}

/// How a limiter's used units come back: what the layer needs to tell an admitted client when
/// more quota is made available (the `t` of the `RateLimit` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Refill {
    /// One unit every `interval`, steadily (the buckets): the next one comes
    /// `reset_after - (quota - remaining - 1) * interval` from now.
    Steady {
        /// The time one unit takes to come back.
        interval: Duration,
        /// Whether an admitted request waits for its slot (the leaky bucket): each request
        /// admitted at one instant waits one `interval` longer than the one before, so a
        /// layer's maximum wait lets fewer through than the decision's `remaining`.
        shaped: bool,
    },
    /// All at once when the window ends (the fixed window): at `reset_after`.
    AtWindowEnd,
    /// As the previous window's count weighs less (the sliding window counter): at times a
    /// `Decision` does not tell, as for `Unknown`; and a window after a used one admits one unit
    /// less than the limit, which the announced `q` of a window scaled up to whole seconds
    /// accounts for.
    Sliding,
    /// At times a `Decision` does not tell (the sliding log, whose units come back as old
    /// requests leave the window, or a limiter of your own): admitted responses carry no
    /// `t` (the draft makes it optional).
    Unknown,
}

/// An algorithm whose parameters can be announced as a [`Policy`].
///
/// - Windows ([`FixedWindow`](crate::FixedWindow), [`SlidingWindow`](crate::SlidingWindow),
///   [`SlidingLog`](crate::SlidingLog)): `limit` per window. A window that is not a whole
///   number of seconds is announced over the whole seconds that hold it, `q` scaled down; a
///   sliding window counter admits one unit less in every window after its first, which that
///   `q` counts: `"7/250ms"` is `q=25;w=1` (`q=28;w=1` for the fixed window and the log).
/// - Buckets ([`TokenBucket`](crate::TokenBucket), [`LeakyBucket`](crate::LeakyBucket)):
///   `burst` per the time an empty bucket takes to fill again (`burst * period / count`):
///   `"100/min"` is `q=100;w=60`, `"10/s burst 20"` is `q=20;w=2`. That time is the quota's
///   exact one, not the emission interval's, which is rounded up to whole nanoseconds: `"3/s"`
///   is `q=3;w=1`, and `"3/s burst 1"` (a third of a second) is `q=3;w=1` too.
///   [`Policy::window`] is that time rounded up to whole nanoseconds. The announced `q` is also
///   at most what the bucket admits in `w` seconds starting full at its rounded interval:
///   `"999999/s burst 1"` (1001 ns per unit) is `q=999001;w=1`.
pub trait AnnouncedPolicy {
    /// The policy this algorithm enforces.
    fn policy(&self) -> Policy;
}

/// `burst` units per the time an empty bucket takes to fill at the quota's exact rate, `count`
/// per `period` ns (`burst * period / count`, at most `burst` rounded-up intervals: validated
/// at construction to fit a `u64` of nanoseconds); one unit coming back every `interval` (the
/// rate the bucket runs at); `shaped` when admitted requests wait for their slot.
pub(crate) fn bucket_policy(quota: Quota, interval: Duration, shaped: bool) -> Policy {
    let burst = quota.burst();
    let exact = ExactWindow::new(
        u128::from(burst) * quota.period().as_nanos(),
        u128::from(quota.count()),
    );
    let window = u64::try_from(exact.rounded_up()).unwrap_or(u64::MAX);
    Policy {
        quota: burst,
        window: Duration::from_nanos(window),
        refill: Refill::Steady { interval, shaped },
        exact,
    }
}
