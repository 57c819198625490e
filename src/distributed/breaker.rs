//! Fail fast while a remote limiter is away: after a failure, decisions go straight to the
//! failure policy for a pause, except one probe per pause, so that an outage costs each request
//! nothing rather than a full deadline. Used by the Redis limiter (`distributed`); compiled on
//! its own under `--cfg tollgate_loom` (also without the `redis` feature), where `loom-tests/tests/breaker.rs` checks that
//! concurrent callers elect exactly one probe.

use std::time::{Duration, Instant};

use crate::sync::{AtomicU64, Ordering};
use crate::time::duration_to_nanos_saturating;

/// A circuit breaker on one word: the time (ns since `origin`) before which Redis is not asked,
/// or 0 when it is asked every time.
///
/// Public only to the loom models (re-exported under `--cfg tollgate_loom`).
#[derive(Debug)]
#[cfg_attr(not(tollgate_loom), allow(unreachable_pub))]
pub struct Breaker {
    origin: Instant,
    skip_until: AtomicU64,
    pause: u64,
}

#[cfg_attr(not(tollgate_loom), allow(unreachable_pub))]
impl Breaker {
    /// A closed breaker (Redis asked every time) that pauses for `pause` after a failure.
    pub fn new(pause: Duration) -> Breaker {
        Breaker {
            origin: Instant::now(),
            skip_until: AtomicU64::new(0),
            pause: duration_to_nanos_saturating(pause).max(1),
        }
    }

    /// Whether this decision should ask Redis: always while Redis answers; after a failure, only
    /// the one caller that takes the probe once the pause is over.
    pub fn should_ask(&self) -> bool {
        self.should_ask_at(self.now())
    }

    /// [`should_ask`](Self::should_ask) at `now` ns since the breaker was made.
    pub fn should_ask_at(&self, now: u64) -> bool {
        // Relaxed: the word is self-contained (no other data is published through it); a stale
        // read only moves one decision between Redis and the policy.
        let until = self.skip_until.load(Ordering::Relaxed);
        if until == 0 {
            return true;
        }
        if now < until {
            return false;
        }
        // The pause is over: the caller that pushes it further takes the probe.
        // Relaxed: as above; the CAS only elects one prober.
        self.skip_until
            .compare_exchange(
                until,
                now.saturating_add(self.pause),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Redis failed (a timeout or a connection error): skip it for a pause.
    pub fn failed(&self) {
        self.failed_at(self.now());
    }

    /// [`failed`](Self::failed) at `now` ns since the breaker was made.
    pub fn failed_at(&self, now: u64) {
        // Relaxed: as in `should_ask`. At least 1, since 0 means "closed".
        self.skip_until
            .store(now.saturating_add(self.pause).max(1), Ordering::Relaxed);
    }

    /// Redis answered: ask it every time again.
    pub fn succeeded(&self) {
        // Relaxed: as in `should_ask`. A load first, so the usual case writes nothing.
        if self.skip_until.load(Ordering::Relaxed) != 0 {
            self.skip_until.store(0, Ordering::Relaxed);
        }
    }

    fn now(&self) -> u64 {
        duration_to_nanos_saturating(self.origin.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::Breaker;
    use std::time::Duration;

    #[test]
    fn asks_every_time_until_a_failure() {
        let breaker = Breaker::new(Duration::from_secs(60));
        assert!(breaker.should_ask());
        assert!(breaker.should_ask());
        breaker.failed();
        assert!(!breaker.should_ask());
        breaker.succeeded();
        assert!(breaker.should_ask());
    }

    #[test]
    fn one_probe_per_pause() {
        let breaker = Breaker::new(Duration::from_millis(5));
        breaker.failed();
        assert!(!breaker.should_ask());
        std::thread::sleep(Duration::from_millis(10));
        let probes = (0..100).filter(|_| breaker.should_ask()).count();
        assert_eq!(probes, 1);
    }
}
