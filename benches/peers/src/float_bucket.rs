//! A token bucket as it is commonly written, and the baseline every direct table shows: an `f64`
//! token count, refilled from the seconds elapsed since the last call (`std::time::Instant`),
//! capped at the capacity, and one token taken when at least one is there. Threads share it the
//! way such code usually is shared, behind a `std::sync::Mutex`. It is kept plain on purpose: no
//! clamping of the elapsed time, no integer arithmetic, a lock around every decision.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// The plain token bucket: a capacity, a refill rate in tokens per second, the tokens left and
/// the time of the last refill.
#[derive(Debug)]
pub struct FloatTokenBucket {
    capacity: f64,
    refill_rate: f64,
    tokens: f64,
    last_refill: Instant,
}

impl FloatTokenBucket {
    /// A full bucket of `capacity` tokens, last refilled now, refilled at `refill_rate` tokens per
    /// second.
    pub fn new(capacity: f64, refill_rate: f64) -> FloatTokenBucket {
        FloatTokenBucket {
            capacity,
            refill_rate,
            tokens: capacity,
            last_refill: Instant::now(),
        }
    }

    /// Refills for the time elapsed, then takes one token if there is one.
    #[inline]
    pub fn consume(&mut self) -> bool {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last_refill).as_secs_f64();
        self.tokens = self.capacity.min(self.tokens + elapsed * self.refill_rate);
        self.last_refill = now;

        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        false
    }
}

/// [`FloatTokenBucket`] behind a `std::sync::Mutex`, so that threads can share it.
#[derive(Debug)]
pub struct MutexTokenBucket(Mutex<FloatTokenBucket>);

impl MutexTokenBucket {
    /// A full bucket of `capacity` tokens refilled at `refill_rate` tokens per second.
    pub fn new(capacity: f64, refill_rate: f64) -> MutexTokenBucket {
        MutexTokenBucket(Mutex::new(FloatTokenBucket::new(capacity, refill_rate)))
    }

    /// Locks the bucket and consumes one token. A poisoned lock (a panic while it was held, which
    /// `consume` cannot cause) is taken over rather than propagated.
    #[inline]
    pub fn consume(&self) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).consume()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_gives_its_capacity_then_refuses() {
        // No refill (rate 0), so the outcome does not depend on how fast the test runs.
        let bucket = MutexTokenBucket::new(3.0, 0.0);
        assert!(bucket.consume() && bucket.consume() && bucket.consume());
        assert!(!bucket.consume());
    }

    #[test]
    fn elapsed_time_refills_up_to_the_capacity() {
        // One token a minute: the test would have to stall for a minute to see a refill of its own.
        let mut bucket = FloatTokenBucket::new(2.0, 1.0 / 60.0);
        assert!(bucket.consume() && bucket.consume());
        assert!(!bucket.consume());
        // Three minutes ago: three tokens' worth of refill, capped at the capacity of two.
        bucket.last_refill = Instant::now()
            .checked_sub(std::time::Duration::from_secs(180))
            .expect("the monotonic clock has run for three minutes");
        assert!(bucket.consume() && bucket.consume());
        assert!(!bucket.consume());
    }
}
