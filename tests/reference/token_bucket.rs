//! The classic token bucket.

use num_rational::Ratio;

use super::{BucketModel, Expected};

/// A classic token bucket: a token count (an exact rational), refilled continuously at one token
/// per emission interval `T` and capped at `burst`; it starts full. A request of weight `n` is
/// admitted iff at least `n` tokens are present, and then takes them.
///
/// - `remaining`: whole tokens left after the decision (`floor(tokens)`);
/// - `retry_after` (refused): the time until `tokens >= n`;
/// - `reset_after`: the time until `tokens == burst`.
///
/// `T` is the implementation's documented emission interval (`period / count`, rounded up to
/// whole nanoseconds), which the test passes in; or, for a rate the bucket keeps exactly
/// ([`TokenBucketModel::exact`]), the ratio `period / count` itself, with waits rounded up to
/// whole nanoseconds.
///
/// A quota changed live ([`TokenBucketModel::retune`]) keeps the debt in time: the bucket is full
/// again at the same instant as before the change, so it holds `burst' - (burst - tokens) * T /
/// T'` tokens, which may be negative (a debt of more than the new bucket: refused until it is
/// paid).
#[derive(Clone, Debug)]
pub(crate) struct TokenBucketModel {
    interval: Ratio<i128>,
    burst: u64,
    tokens: Ratio<i128>,
    last: Option<u64>,
}

impl TokenBucketModel {
    pub(crate) fn new(interval: u64, burst: u64) -> Self {
        assert!(interval > 0);
        TokenBucketModel::with_interval(Ratio::from_integer(i128::from(interval)), burst)
    }

    /// A token bucket refilled at exactly `count` per `period` ns: `T = period / count`, a
    /// rational number of nanoseconds.
    pub(crate) fn exact(count: u64, period: u64, burst: u64) -> Self {
        assert!(count > 0 && period > 0);
        TokenBucketModel::with_interval(Ratio::new(i128::from(period), i128::from(count)), burst)
    }

    fn with_interval(interval: Ratio<i128>, burst: u64) -> Self {
        assert!(burst > 0);
        TokenBucketModel {
            interval,
            burst,
            tokens: Ratio::from_integer(i128::from(burst)),
            last: None,
        }
    }

    fn refill(&mut self, now: u64) {
        if let Some(last) = self.last {
            assert!(now >= last, "the token bucket model needs monotone time");
            let gained = Ratio::from_integer(i128::from(now - last)) / self.interval;
            self.tokens = (self.tokens + gained).min(Ratio::from_integer(i128::from(self.burst)));
        }
        self.last = Some(now);
    }

    /// Nanoseconds until the bucket holds at least `level` tokens.
    fn time_until(&self, level: u64) -> u64 {
        let level = Ratio::from_integer(i128::from(level));
        if self.tokens >= level {
            return 0;
        }
        let wait = ((level - self.tokens) * self.interval).ceil();
        u64::try_from(wait.to_integer()).expect("waits fit in u64")
    }

    /// Decides a request of weight `cost` at `now`, and takes its tokens if admitted.
    pub(crate) fn decide(&mut self, now: u64, cost: u64) -> Expected {
        self.refill(now);
        let need = Ratio::from_integer(i128::from(cost));
        // A weightless request takes no token: it passes even in debt (after a live change).
        let allowed = cost == 0 || self.tokens >= need;
        if allowed {
            self.tokens -= need;
        }
        Expected {
            allowed,
            // No whole token remains while the bucket is in debt (after a live change).
            remaining: u64::try_from(self.tokens.floor().to_integer().max(0)).expect("at most burst"),
            retry_after: if allowed { 0 } else { self.time_until(cost) },
            reset_after: self.time_until(self.burst),
            delay: 0,
        }
    }

    /// Changes the quota live at `now` to an emission interval `interval` and a burst `burst`:
    /// the time until the bucket is full again stays, `(burst - tokens) * T`, now counted in
    /// the new interval.
    pub(crate) fn retune(&mut self, now: u64, interval: u64, burst: u64) {
        assert!(interval > 0 && burst > 0);
        self.refill(now);
        let until_full = (Ratio::from_integer(i128::from(self.burst)) - self.tokens) * self.interval;
        self.interval = Ratio::from_integer(i128::from(interval));
        self.burst = burst;
        self.tokens =
            Ratio::from_integer(i128::from(burst)) - until_full / Ratio::from_integer(i128::from(interval));
    }
}

impl BucketModel for TokenBucketModel {
    fn new(interval: u64, burst: u64) -> Self {
        TokenBucketModel::new(interval, burst)
    }

    fn decide(&mut self, now: u64, cost: u64) -> Expected {
        TokenBucketModel::decide(self, now, cost)
    }

    fn describe(&self) -> String {
        format!(", model tokens before refill {}", self.tokens)
    }
}
