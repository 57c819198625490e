//! Fail fast while Redis is away: after a failure, decisions go straight to the failure policy
//! for a pause, except one probe per pause, so that an outage costs each request nothing
//! rather than a full deadline.

use std::time::{Duration, Instant};

use crate::sync::{AtomicU64, Ordering};
use crate::time::duration_to_nanos_saturating;

/// A circuit breaker on one word: the time (ns since `origin`) before which Redis is not asked,
/// or 0 when it is asked every time.
#[derive(Debug)]
pub(crate) struct Breaker {
    origin: Instant,
    skip_until: AtomicU64,
    pause: u64,
}

impl Breaker {
    pub(crate) fn new(pause: Duration) -> Breaker {
        Breaker {
            origin: Instant::now(),
            skip_until: AtomicU64::new(0),
            pause: duration_to_nanos_saturating(pause).max(1),
        }
    }

    /// Whether this decision should ask Redis: always while Redis answers; after a failure, only
    /// the one caller that takes the probe once the pause is over.
    pub(crate) fn should_ask(&self) -> bool {
        // Relaxed: the word is self-contained (no other data is published through it); a stale
        // read only moves one decision between Redis and the policy.
        let until = self.skip_until.load(Ordering::Relaxed);
        if until == 0 {
            return true;
        }
        let now = self.now();
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
    pub(crate) fn failed(&self) {
        // Relaxed: as in `should_ask`. At least 1, since 0 means "closed".
        self.skip_until
            .store(self.now().saturating_add(self.pause).max(1), Ordering::Relaxed);
    }

    /// Redis answered: ask it every time again.
    pub(crate) fn succeeded(&self) {
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
