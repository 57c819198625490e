//! The classic token bucket of `../shared/seeds/token-bucket.txt`, translated line for line from
//! its Python: an `f64` token count, refilled from the time elapsed since the last call, capped at
//! the capacity, and one token taken when at least one is there. Shared between threads the way
//! such code usually is, behind a `Mutex`. It is the baseline tollgate is meant to beat, so it is
//! kept exactly as the article has it: no clamping of `elapsed`, no integer arithmetic.
//!
//! The article reads `time.time()`; the Rust translation the issue asks for reads
//! `std::time::Instant`, which is also what a Rust programmer would write.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// The article's `TokenBucket`, field for field.
#[derive(Debug)]
pub struct SeedTokenBucket {
    capacity: f64,
    refill_rate: f64,
    tokens: f64,
    last_refill: Instant,
}

impl SeedTokenBucket {
    /// `__init__(self, capacity, refill_rate)`: full, last refilled now. `refill_rate` is in tokens
    /// per second.
    pub fn new(capacity: f64, refill_rate: f64) -> SeedTokenBucket {
        SeedTokenBucket {
            capacity,
            refill_rate,
            tokens: capacity,
            last_refill: Instant::now(),
        }
    }

    /// `consume(self)`: refill for the time elapsed, then take one token if there is one.
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

/// [`SeedTokenBucket`] behind a `std::sync::Mutex`, so that threads can share it.
#[derive(Debug)]
pub struct MutexTokenBucket(Mutex<SeedTokenBucket>);

impl MutexTokenBucket {
    /// A full bucket of `capacity` tokens refilled at `refill_rate` tokens per second.
    pub fn new(capacity: f64, refill_rate: f64) -> MutexTokenBucket {
        MutexTokenBucket(Mutex::new(SeedTokenBucket::new(capacity, refill_rate)))
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
        let mut bucket = SeedTokenBucket::new(2.0, 1.0 / 60.0);
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
