//! Which quota changes each algorithm takes live ([`Retune`]), and why.

use crate::{FixedWindow, LeakyBucket, Quota, SlidingWindow, TokenBucket};

use super::QuotaChangeError;

/// An algorithm whose quota can change while its states are kept: every state the running
/// configuration stored reads under the new one, so that a [`Live`](super::Live) limiter
/// swaps the configuration and keeps its states.
///
/// | algorithm | live | needs a new limiter |
/// |---|---|---|
/// | [`TokenBucket`], [`LeakyBucket`] | every quota: the state is a time (the TAT) | a bucket's change to or from a rate kept in units of `1 / count` ns, or to another such count ([`QuotaChangeError::TimeUnitChanged`]) |
/// | [`FixedWindow`], [`SlidingWindow`] | the limit, within the state's width | the window's length ([`QuotaChangeError::WindowChanged`]); a limit past a 64-bit state's ([`QuotaChangeError::NeedsWideState`]) |
///
/// (The sliding log's limit and window both change live, through its limiters'
/// `set_quota`: [`LogLimiter::set_quota`](crate::LogLimiter::set_quota).)
pub trait Retune: Sized {
    /// This algorithm with `quota`, in the layout of the states this one stores.
    ///
    /// # Errors
    /// [`QuotaChangeError`]: the quota is refused by the algorithm, or its states cannot be read
    /// under it.
    fn retune(&self, quota: Quota) -> Result<Self, QuotaChangeError>;

    /// `Ok` when `next` reads every state this configuration stores.
    ///
    /// # Errors
    /// [`QuotaChangeError`]: why not.
    fn can_become(&self, next: &Self) -> Result<(), QuotaChangeError>;
}

impl Retune for TokenBucket {
    /// Any quota: the state is the time the bucket is full again (its TAT), which reads the
    /// same under any rate, and is kept. So the debt is kept in time, not in units: a client
    /// full again at 12:00:01 under the old quota is full again then under the new one, and
    /// holds the same share of the new bucket (8 of 10 spent at `10/s` is 4 of 5 at `5/s` and
    /// 16 of 20 at `20/s`). That is what the Redis limiter does (its state is the same TAT), and
    /// what a change of one pointer can do without rewriting every key's state.
    ///
    /// A rate whole nanoseconds cannot hold within 1% keeps its TAT in units of `1 / count` ns
    /// (see [`TokenBucket`], "Rounding"): such a bucket changes live only to another of the
    /// same count, and no other bucket to one.
    fn retune(&self, quota: Quota) -> Result<Self, QuotaChangeError> {
        let next = TokenBucket::new(quota)?;
        self.can_become(&next).map(|()| next)
    }

    fn can_become(&self, next: &Self) -> Result<(), QuotaChangeError> {
        bucket_can_become((self.quota(), next.quota()), (is_wide(self), is_wide(next)))
    }
}

impl Retune for LeakyBucket {
    /// Any quota, as for the [`TokenBucket`]: the state is when the queue is empty, and is
    /// kept. Requests already given a slot keep it (its time was told to them); new requests
    /// queue after the last slot, at the new interval, and the new burst bounds the queue from
    /// the change on (a shorter one refuses until the queue has drained to it).
    ///
    /// A rate whole nanoseconds cannot hold within 1% keeps its queue's end in units of
    /// `1 / count` ns (see [`LeakyBucket`], "Rounding"): as for the token bucket, such a shaper
    /// changes live only to another of the same count, and no other shaper to one.
    fn retune(&self, quota: Quota) -> Result<Self, QuotaChangeError> {
        let next = LeakyBucket::new(quota)?;
        self.can_become(&next).map(|()| next)
    }

    fn can_become(&self, next: &Self) -> Result<(), QuotaChangeError> {
        bucket_can_become((self.quota(), next.quota()), (is_wide(self), is_wide(next)))
    }
}

impl Retune for FixedWindow {
    /// A new limit for the same window: the count of the window in progress stays, and the new
    /// limit applies to the rest of it (a count already past a lowered limit refuses until the
    /// window ends). A running 128-bit state keeps that width whatever the new limit; a 64-bit
    /// one takes limits up to [`max_narrow_limit`](FixedWindow::max_narrow_limit).
    fn retune(&self, quota: Quota) -> Result<Self, QuotaChangeError> {
        let next = FixedWindow::new(quota)?;
        let next = match crate::algorithm::Algorithm::is_wide(self) {
            true => next.with_wide_state(),
            false => next,
        };
        self.can_become(&next).map(|()| next)
    }

    fn can_become(&self, next: &Self) -> Result<(), QuotaChangeError> {
        window_can_become(
            "fixed window counter",
            (self.window(), next.window()),
            (is_wide(self), is_wide(next)),
            (next.limit(), self.max_narrow_limit()),
        )
    }
}

impl Retune for SlidingWindow {
    /// A new limit for the same window, as for the [`FixedWindow`]: both counts stay, weighed
    /// against the new limit from the change on.
    fn retune(&self, quota: Quota) -> Result<Self, QuotaChangeError> {
        let next = SlidingWindow::new(quota)?;
        let next = match is_wide(self) {
            true => next.with_wide_state(),
            false => next,
        };
        self.can_become(&next).map(|()| next)
    }

    fn can_become(&self, next: &Self) -> Result<(), QuotaChangeError> {
        window_can_become(
            "sliding window counter",
            (self.window(), next.window()),
            (is_wide(self), is_wide(next)),
            (next.limit(), self.max_narrow_limit()),
        )
    }
}

fn is_wide(algorithm: &impl crate::algorithm::Algorithm) -> bool {
    algorithm.is_wide()
}

/// A bucket's change: both TATs in whole nanoseconds, or both in units of `1 / count` ns of
/// the same count.
fn bucket_can_become((from, to): (Quota, Quota), widths: (bool, bool)) -> Result<(), QuotaChangeError> {
    match widths {
        (false, false) => Ok(()),
        (true, true) if from.count() == to.count() => Ok(()),
        _ => Err(QuotaChangeError::TimeUnitChanged { from, to }),
    }
}

/// A window counter's change: the same length, and the same state width.
fn window_can_become(
    algorithm: &'static str,
    (from, to): (std::time::Duration, std::time::Duration),
    (wide, next_wide): (bool, bool),
    (limit, max): (u64, u64),
) -> Result<(), QuotaChangeError> {
    if from != to {
        return Err(QuotaChangeError::WindowChanged { algorithm, from, to });
    }
    match (wide, next_wide) {
        (false, true) if limit > max => Err(QuotaChangeError::NeedsWideState {
            algorithm,
            limit,
            max,
        }),
        (false, true) | (true, false) => Err(QuotaChangeError::LayoutChanged { algorithm }),
        _ => Ok(()),
    }
}
