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
/// whole nanoseconds), which the test passes in.
#[derive(Clone, Debug)]
pub(crate) struct TokenBucketModel {
    interval: u64,
    burst: u64,
    tokens: Ratio<u128>,
    last: Option<u64>,
}

impl TokenBucketModel {
    pub(crate) fn new(interval: u64, burst: u64) -> Self {
        assert!(interval > 0 && burst > 0);
        TokenBucketModel {
            interval,
            burst,
            tokens: Ratio::from_integer(u128::from(burst)),
            last: None,
        }
    }

    fn refill(&mut self, now: u64) {
        if let Some(last) = self.last {
            assert!(now >= last, "the token bucket model needs monotone time");
            let gained = Ratio::new(u128::from(now - last), u128::from(self.interval));
            self.tokens = (self.tokens + gained).min(Ratio::from_integer(u128::from(self.burst)));
        }
        self.last = Some(now);
    }

    /// Nanoseconds until the bucket holds at least `level` tokens.
    fn time_until(&self, level: u64) -> u64 {
        let level = Ratio::from_integer(u128::from(level));
        if self.tokens >= level {
            return 0;
        }
        let wait = ((level - self.tokens) * Ratio::from_integer(u128::from(self.interval))).ceil();
        u64::try_from(wait.to_integer()).expect("waits fit in u64")
    }

    /// Decides a request of weight `cost` at `now`, and takes its tokens if admitted.
    pub(crate) fn decide(&mut self, now: u64, cost: u64) -> Expected {
        self.refill(now);
        let need = Ratio::from_integer(u128::from(cost));
        let allowed = self.tokens >= need;
        if allowed {
            self.tokens -= need;
        }
        Expected {
            allowed,
            remaining: u64::try_from(self.tokens.floor().to_integer()).expect("at most burst"),
            retry_after: if allowed { 0 } else { self.time_until(cost) },
            reset_after: self.time_until(self.burst),
            delay: 0,
        }
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
