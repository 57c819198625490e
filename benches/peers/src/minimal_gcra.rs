//! The least a GCRA decision that reports what is left can do: a reference, not a limiter, set
//! beside tollgate's token and leaky buckets as `minimal_fixed_window` and
//! `minimal_sliding_window` are set beside its windows (`src/minimal_windows.rs`).
//!
//! One clock read, one load of the theoretical arrival time (TAT), `max(tat, now) + T`, one
//! comparison with the bucket's capacity in time, then, to admit, one successful CAS and the
//! remaining count by one multiply-high with a reciprocal (not exact, as a real limiter's must
//! be); to refuse, no CAS and the time until the next admission. The answer is five words, as
//! tollgate's `Decision` is. Nothing a real limiter adds: no weight but 1, no quota validation, no
//! path for a clock that went back or for the end of representable time.
//!
//! Timed as tollgate's buckets are (`DirectContender`: the token bucket's quotas, the allowed
//! path in chunks on fresh references, the denied path after its one admission).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use tollgate::Clock;

use crate::{Direct, DirectContender, DirectLoops, BURST, PERIOD};

/// The reference decision: a TAT in one cache-padded word, and its quota.
#[derive(Debug)]
pub struct MinimalGcra<C> {
    clock: C,
    tat: CachePadded<AtomicU64>,
    /// The emission interval `T`, in ns.
    interval: u64,
    /// The bucket's capacity in time: `burst * T`, in ns. A request is admitted when
    /// `max(tat, now) - now + T` is at most this.
    capacity: u64,
    /// `u64::MAX / T`: what is left, in requests, is the room times this, high half.
    reciprocal: u64,
}

impl<C: Clock> MinimalGcra<C> {
    /// A reference on `clock` admitting `burst` requests at once and one per `interval` after.
    ///
    /// # Panics
    /// If `interval` is zero or under 1 ns, or `burst * interval` does not fit in 64 bits of
    /// nanoseconds: the benchmarks' quotas are fixed and fit.
    pub fn new(clock: C, interval: Duration, burst: u64) -> MinimalGcra<C> {
        let interval = u64::try_from(interval.as_nanos())
            .ok()
            .filter(|&nanos| nanos > 0)
            .expect("the interval is at least 1 ns and fits in 64 bits");
        let capacity = interval
            .checked_mul(burst)
            .expect("burst * interval fits in 64 bits of nanoseconds");
        MinimalGcra {
            clock,
            tat: CachePadded::new(AtomicU64::new(0)),
            // Opaque to the optimizer, as a quota read from a configuration is.
            interval: std::hint::black_box(interval),
            capacity: std::hint::black_box(capacity),
            reciprocal: std::hint::black_box(u64::MAX / interval),
        }
    }
}

impl<C: Clock> Direct for MinimalGcra<C> {
    /// Admitted (1 or 0), remaining, retry-after, reset-after, delay.
    type Answer = [u64; 5];

    #[inline(always)]
    fn check(&self) -> [u64; 5] {
        let now = self.clock.now().as_nanos();
        // Relaxed: as tollgate's cell loads its state word.
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            let start = tat.max(now);
            let after = start - now + self.interval;
            if after > self.capacity {
                return [0, 0, after - self.capacity, start - now, 0];
            }
            let remaining = ((u128::from(self.capacity - after) * u128::from(self.reciprocal)) >> 64) as u64;
            // Relaxed, weak: the CAS tollgate's cell makes.
            match self.tat.compare_exchange_weak(
                tat,
                start + self.interval,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return [1, remaining, 0, after, 0],
                Err(actual) => tat = actual,
            }
        }
    }

    fn admitted(answer: &[u64; 5]) -> bool {
        answer[0] == 1
    }
}

/// The GCRA reference with tollgate's token bucket's benchmark quotas: one per [`PERIOD`] with a
/// burst of [`BURST`] (allowed), 1/h (denied, after its one admission).
#[derive(Debug)]
pub struct MinimalBucket<C>(pub C);

impl<C: Clock + Clone> DirectContender for MinimalBucket<C>
where
    MinimalGcra<C>: DirectLoops,
{
    type Limiter = MinimalGcra<C>;

    fn name(&self) -> &str {
        "minimal_gcra"
    }

    fn allowed(&self) -> MinimalGcra<C> {
        MinimalGcra::new(self.0.clone(), PERIOD, u64::from(BURST))
    }

    fn denied(&self) -> MinimalGcra<C> {
        let reference = MinimalGcra::new(self.0.clone(), Duration::from_secs(3600), 1);
        assert!(MinimalGcra::admitted(&reference.check()));
        reference
    }
}

#[cfg(test)]
mod tests {
    //! The reference decides what a GCRA bucket must, so that setting tollgate's buckets beside it
    //! compares like with like.

    use tollgate::clock::ManualClock;
    use tollgate::Timestamp;

    use super::*;

    #[test]
    fn it_admits_its_burst_then_one_per_interval() {
        let clock = ManualClock::starting_at(Timestamp::from_secs(100));
        let reference = MinimalGcra::new(clock.clone(), Duration::from_secs(1), 3);
        let answers: Vec<[u64; 5]> = (0..4).map(|_| reference.check()).collect();
        // Remaining 2, 1, 0 (the reciprocal rounds down: at most one under the exact count).
        assert!(answers[..3].iter().all(|answer| answer[0] == 1));
        assert!(answers[0][1] >= 1 && answers[2][1] == 0);
        // Refused: the next admission is a second away.
        assert_eq!(answers[3], [0, 0, 1_000_000_000, 3_000_000_000, 0]);
        clock.advance(Duration::from_secs(1));
        assert_eq!(reference.check()[0], 1);
        assert_eq!(reference.check()[0], 0);
    }

    /// The denied path's quota (`MinimalBucket::denied`, 1/h): refused for the hour after its one
    /// admission, admitted again at its end.
    #[test]
    fn one_per_hour_refuses_for_the_hour_after_an_admission() {
        let clock = ManualClock::starting_at(Timestamp::from_secs(100));
        let reference = MinimalGcra::new(clock.clone(), Duration::from_secs(3600), 1);
        assert_eq!(reference.check()[0], 1);
        clock.advance(Duration::from_secs(3599));
        assert_eq!(reference.check()[0], 0);
        clock.advance(Duration::from_secs(1));
        assert_eq!(reference.check()[0], 1);
    }
}
