//! Direct (single-key) limiters: the [`Direct`] trait every direct scenario is written against,
//! and a [`DirectContender`] per implementation, which builds its limiters for the two paths.
//!
//! - tollgate: every algorithm ([`tollgate_token_bucket`] and its siblings, and the sliding window
//!   log, [`TollgateLog`]), on any tollgate clock;
//! - governor: `RateLimiter::direct_with_clock` ([`GovernorDirect`]), on any governor clock;
//! - ratelimit: `Ratelimiter` ([`RatelimitDirect`]), on its own `StdClock` or on a tollgate
//!   clock through [`TollgateElapsed`];
//! - a plain `f64` token bucket behind a `Mutex` ([`MutexBucketDirect`], `src/float_bucket.rs`), on
//!   `std::time::Instant`.
//!
//! Allowed-path limiters admit at least [`ALLOWED_RUN`] decisions in a row from fresh;
//! denied-path limiters have admitted their one request and refuse for at least an hour.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use tollgate::algorithm::Algorithm;
use tollgate::{
    Clock, DirectLimiter, FixedWindow, LeakyBucket, LogLimiter, Quota, SlidingLog, SlidingWindow, Timestamp,
    TokenBucket,
};

use crate::float_bucket::MutexTokenBucket;
use crate::keyed::{governor_quota, tollgate_bucket, BURST};
use crate::timing::DirectLoops;

/// Decisions an allowed-path limiter admits in a row from fresh, at the least. (The token buckets
/// of every implementation, tollgate's leaky bucket, governor, ratelimit and the `Mutex` bucket
/// admit [`BURST`] or more, enough for the thread scenarios; the windows, whose counts are packed
/// in fewer bits, admit at least this many.)
pub const ALLOWED_RUN: u64 = 10_000;

/// What the benchmarks need of a direct limiter.
pub trait Direct: Sync {
    /// What one decision returns (kept whole, so that none of it is optimized away).
    type Answer;

    /// Decides one request now.
    ///
    /// Every implementation is `#[inline(always)]`, so that each limiter's own check is offered to
    /// the inliner at the benchmark loop exactly as a direct call in user code would be.
    fn check(&self) -> Self::Answer;

    /// Whether `answer` admitted the request.
    fn admitted(answer: &Self::Answer) -> bool;
}

/// One implementation, configured once: how to build its limiter for each path.
pub trait DirectContender {
    /// The limiter it builds, with its timed loop compiled in this crate.
    type Limiter: DirectLoops;

    /// The row name (`tollgate_token_bucket`, `governor`, ...).
    fn name(&self) -> &str;

    /// A fresh limiter that admits at least [`ALLOWED_RUN`] decisions in a row from now.
    fn allowed(&self) -> Self::Limiter;

    /// A limiter that has admitted its one request and refuses every request for at least an hour.
    fn denied(&self) -> Self::Limiter;
}

impl<A: Algorithm, C: Clock> Direct for DirectLimiter<A, C> {
    type Answer = tollgate::Decision;

    #[inline(always)]
    fn check(&self) -> tollgate::Decision {
        DirectLimiter::check(self)
    }

    fn admitted(answer: &tollgate::Decision) -> bool {
        answer.is_allowed()
    }
}

/// A tollgate algorithm on clock `C`: one configuration for the allowed path, one for the denied
/// path, and a way to bring a fresh allowed-path limiter into its steady state.
#[derive(Debug)]
pub struct TollgateDirect<A, C> {
    pub(crate) name: &'static str,
    pub(crate) clock: C,
    pub(crate) allowed: A,
    pub(crate) denied: A,
    pub(crate) prepare: fn(&DirectLimiter<A, C>),
}

impl<A: Algorithm + Copy, C: Clock + Clone> DirectContender for TollgateDirect<A, C>
where
    DirectLimiter<A, C>: DirectLoops,
{
    type Limiter = DirectLimiter<A, C>;

    fn name(&self) -> &str {
        self.name
    }

    fn allowed(&self) -> DirectLimiter<A, C> {
        let limiter = DirectLimiter::with_clock(self.allowed, self.clock.clone());
        (self.prepare)(&limiter);
        limiter
    }

    fn denied(&self) -> DirectLimiter<A, C> {
        let limiter = DirectLimiter::with_clock(self.denied, self.clock.clone());
        let _ = limiter.check();
        // A bucket of 1/h admits again exactly an hour after its one request.
        let before_an_hour = limiter.clock().now().saturating_add(Duration::from_secs(3599));
        assert!(
            !limiter.peek_at(before_an_hour).is_allowed(),
            "{}: the denied path must refuse for at least an hour",
            self.name
        );
        limiter
    }
}

fn quota(text: &str) -> Quota {
    text.parse().expect("benchmark quotas are valid")
}

fn fresh<A, C>(_: &DirectLimiter<A, C>) {}

/// tollgate's token bucket (GCRA): one per 10 s with a burst of [`BURST`] (allowed: the quota every peer
/// runs), 1/h (denied).
pub fn tollgate_token_bucket<C: Clock>(clock: C) -> TollgateDirect<TokenBucket, C> {
    TollgateDirect {
        name: "tollgate_token_bucket",
        clock,
        allowed: tollgate_bucket(),
        denied: TokenBucket::new(quota("1/h")).expect("valid token bucket"),
        prepare: fresh,
    }
}

/// tollgate's leaky bucket (shaper): one per ns with a queue of 10^9 (allowed), 1/h (denied).
pub fn tollgate_leaky_bucket<C: Clock>(clock: C) -> TollgateDirect<LeakyBucket, C> {
    TollgateDirect {
        name: "tollgate_leaky_bucket",
        clock,
        allowed: LeakyBucket::new(quota("1/ns burst 1000000000")).expect("valid leaky bucket"),
        denied: LeakyBucket::new(quota("1/h")).expect("valid leaky bucket"),
        prepare: fresh,
    }
}

/// tollgate's fixed window: 1,000,000 per second (allowed), 1 per 36,500 days (denied: windows
/// are aligned to the UNIX epoch, so a window of a day would admit again at midnight UTC; this
/// one ends in 2069).
pub fn tollgate_fixed_window<C: Clock>(clock: C) -> TollgateDirect<FixedWindow, C> {
    TollgateDirect {
        name: "tollgate_fixed_window",
        clock,
        allowed: FixedWindow::new(quota("1000000/s")).expect("valid fixed window"),
        denied: FixedWindow::new(quota("1/36500d")).expect("valid fixed window"),
        prepare: fresh,
    }
}

/// The sliding window's allowed-path limiter starts with 5,000 in the previous window, so that its
/// estimate really weighs it, as under steady load.
fn fill_previous_window<C: Clock>(limiter: &DirectLimiter<SlidingWindow, C>) {
    let window_nanos = u64::try_from(limiter.algorithm().window().as_nanos()).unwrap_or(u64::MAX);
    let a_window_ago = limiter.clock().now().as_nanos().saturating_sub(window_nanos);
    let filled = limiter.check_n_at(5_000, Timestamp::from_nanos(a_window_ago));
    assert!(filled.is_ok_and(|decision| decision.is_allowed()));
}

/// tollgate's sliding window counter: 16,000 per second (near the most a one-second window
/// packs), 5,000 already in the previous window (allowed), 1 per day (denied).
pub fn tollgate_sliding_window<C: Clock>(clock: C) -> TollgateDirect<SlidingWindow, C> {
    TollgateDirect {
        name: "tollgate_sliding_window",
        clock,
        allowed: SlidingWindow::new(quota("16000/s")).expect("valid sliding window"),
        denied: SlidingWindow::new(quota("1/d")).expect("valid sliding window"),
        prepare: fill_previous_window,
    }
}

/// tollgate's sliding window counter with a 128-bit state: 50,000 per second (more than a
/// one-second window packs in 64 bits, so wide by itself), 5,000 already in the previous window
/// (allowed); 1 per day, built wide (denied).
pub fn tollgate_sliding_window_wide<C: Clock>(clock: C) -> TollgateDirect<SlidingWindow, C> {
    let allowed = SlidingWindow::new(quota("50000/s")).expect("valid sliding window");
    assert!(allowed.is_wide(), "50000/s takes the 128-bit state");
    TollgateDirect {
        name: "tollgate_sliding_window_wide",
        clock,
        allowed,
        denied: SlidingWindow::new(quota("1/d"))
            .expect("valid sliding window")
            .with_wide_state(),
        prepare: fill_previous_window,
    }
}

/// tollgate's fixed window with a 128-bit state: 1,000,000,000 per second (more than a
/// one-second window packs in 64 bits, so wide by itself; allowed), 1 per 36,500 days, built
/// wide (denied).
pub fn tollgate_fixed_window_wide<C: Clock>(clock: C) -> TollgateDirect<FixedWindow, C> {
    let allowed = FixedWindow::new(quota("1000000000/s")).expect("valid fixed window");
    assert!(allowed.is_wide(), "1000000000/s takes the 128-bit state");
    TollgateDirect {
        name: "tollgate_fixed_window_wide",
        clock,
        allowed,
        denied: FixedWindow::new(quota("1/36500d"))
            .expect("valid fixed window")
            .with_wide_state(),
        prepare: fresh,
    }
}

impl<C: Clock> Direct for LogLimiter<C> {
    type Answer = tollgate::Decision;

    #[inline(always)]
    fn check(&self) -> tollgate::Decision {
        LogLimiter::check(self)
    }

    fn admitted(answer: &tollgate::Decision) -> bool {
        answer.is_allowed()
    }
}

/// tollgate's sliding window log (`LogLimiter`) on clock `C`: 20,000 per second (allowed: a ring
/// of 20,000 timestamps, so a run of [`ALLOWED_RUN`] never wraps it), 1 per day (denied).
#[derive(Debug)]
pub struct TollgateLog<C>(pub C);

impl<C: Clock + Clone> DirectContender for TollgateLog<C>
where
    LogLimiter<C>: DirectLoops,
{
    type Limiter = LogLimiter<C>;

    fn name(&self) -> &str {
        "tollgate_sliding_log"
    }

    fn allowed(&self) -> LogLimiter<C> {
        let log = SlidingLog::new(quota("20000/s")).expect("valid sliding log");
        LogLimiter::with_clock(log, self.0.clone())
    }

    fn denied(&self) -> LogLimiter<C> {
        let log = SlidingLog::new(quota("1/d")).expect("valid sliding log");
        let limiter = LogLimiter::with_clock(log, self.0.clone());
        let _ = limiter.check();
        // As the other tollgate rows: refused for at least the next hour (a day, here).
        let before_an_hour = limiter.clock().now().saturating_add(Duration::from_secs(3599));
        assert!(
            !limiter.peek_at(before_an_hour).is_allowed(),
            "tollgate_sliding_log: the denied path must refuse for at least an hour"
        );
        limiter
    }
}

/// governor's direct limiter, as `RateLimiter::direct_with_clock` builds it, with clock `C`.
pub type GovernorDirectLimiter<C> =
    governor::RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as GovernorClock>::Instant>>;

impl<C: GovernorClock + Sync> Direct for GovernorDirectLimiter<C>
where
    C::Instant: Sync,
{
    type Answer = Result<(), governor::NotUntil<C::Instant>>;

    #[inline(always)]
    fn check(&self) -> Self::Answer {
        governor::RateLimiter::check(self)
    }

    fn admitted(answer: &Self::Answer) -> bool {
        answer.is_ok()
    }
}

/// governor's direct limiter on clock `C`: one per 10 s with a burst of [`BURST`] (allowed), 1/h
/// (denied).
#[derive(Debug)]
pub struct GovernorDirect<C>(pub C);

impl<C: GovernorClock + Clone + Sync> DirectContender for GovernorDirect<C>
where
    C::Instant: Sync,
    GovernorDirectLimiter<C>: DirectLoops,
{
    type Limiter = GovernorDirectLimiter<C>;

    fn name(&self) -> &str {
        "governor"
    }

    fn allowed(&self) -> GovernorDirectLimiter<C> {
        governor::RateLimiter::direct_with_clock(governor_quota(), self.0.clone())
    }

    fn denied(&self) -> GovernorDirectLimiter<C> {
        let one_per_hour = governor::Quota::per_hour(NonZeroU32::MIN);
        let limiter = governor::RateLimiter::direct_with_clock(one_per_hour, self.0.clone());
        let _ = limiter.check();
        limiter
    }
}

/// A tollgate clock as a ratelimit clock: the time elapsed since the adapter was made.
#[derive(Debug)]
pub struct TollgateElapsed<C> {
    clock: C,
    start: Timestamp,
}

impl<C: Clock> TollgateElapsed<C> {
    /// Starts counting now.
    pub fn new(clock: C) -> TollgateElapsed<C> {
        let start = clock.now();
        TollgateElapsed { clock, start }
    }
}

impl<C: Clock> ratelimit::Clock for TollgateElapsed<C> {
    #[inline(always)]
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.clock.now().as_nanos().saturating_sub(self.start.as_nanos()))
    }
}

impl<C: ratelimit::Clock + Sync> Direct for ratelimit::Ratelimiter<C> {
    type Answer = Result<(), ratelimit::TryWaitError>;

    #[inline(always)]
    fn check(&self) -> Self::Answer {
        self.try_wait()
    }

    fn admitted(answer: &Self::Answer) -> bool {
        answer.is_ok()
    }
}

/// ratelimit's `Ratelimiter` on the clock `make_clock` returns (a fresh one per limiter, as its
/// clocks count from their creation): 1/s holding [`BURST`] tokens (allowed), 1/h holding one
/// token, taken (denied).
#[derive(Debug)]
pub struct RatelimitDirect<RC> {
    name: &'static str,
    make_clock: fn() -> RC,
}

impl<RC> RatelimitDirect<RC> {
    /// Names the row `name` and makes each limiter's clock with `make_clock`.
    pub fn new(name: &'static str, make_clock: fn() -> RC) -> RatelimitDirect<RC> {
        RatelimitDirect { name, make_clock }
    }
}

impl<RC: ratelimit::Clock + Sync> DirectContender for RatelimitDirect<RC>
where
    ratelimit::Ratelimiter<RC>: DirectLoops,
{
    type Limiter = ratelimit::Ratelimiter<RC>;

    fn name(&self) -> &str {
        self.name
    }

    fn allowed(&self) -> ratelimit::Ratelimiter<RC> {
        let burst = u64::from(BURST);
        ratelimit::Builder::with_clock(1, (self.make_clock)())
            .max_tokens(burst)
            .initial_available(burst)
            .build()
            .expect("a valid ratelimit configuration")
    }

    fn denied(&self) -> ratelimit::Ratelimiter<RC> {
        let limiter = ratelimit::Builder::with_clock(1, (self.make_clock)())
            .period(Duration::from_secs(3600))
            .max_tokens(1)
            .initial_available(1)
            .build()
            .expect("a valid ratelimit configuration");
        let _ = limiter.try_wait();
        limiter
    }
}

impl Direct for MutexTokenBucket {
    type Answer = bool;

    #[inline(always)]
    fn check(&self) -> bool {
        self.consume()
    }

    fn admitted(answer: &bool) -> bool {
        *answer
    }
}

/// The plain `f64` token bucket behind a `Mutex` (`src/float_bucket.rs`): capacity [`BURST`] refilled at 1/s
/// (allowed), capacity 1 refilled at 1/h, taken (denied).
#[derive(Debug)]
pub struct MutexBucketDirect;

impl DirectContender for MutexBucketDirect {
    type Limiter = MutexTokenBucket;

    fn name(&self) -> &str {
        "mutex_f64_bucket"
    }

    fn allowed(&self) -> MutexTokenBucket {
        MutexTokenBucket::new(f64::from(BURST), 1.0)
    }

    fn denied(&self) -> MutexTokenBucket {
        let bucket = MutexTokenBucket::new(1.0, 1.0 / 3600.0);
        let _ = bucket.consume();
        bucket
    }
}

#[cfg(test)]
mod tests {
    use tollgate::PreciseClock;

    use super::*;

    /// Every contender's (and every reference's) allowed path admits `ALLOWED_RUN` decisions in a
    /// row (and one more, which the benchmark makes to check), and its denied path refuses.
    fn paths_hold<T: DirectContender>(contender: &T) {
        let allowed = contender.allowed();
        for decision in 0..=ALLOWED_RUN {
            let answer = allowed.check();
            assert!(
                T::Limiter::admitted(&answer),
                "{}: decision {decision} refused",
                contender.name()
            );
        }
        let denied = contender.denied();
        for _ in 0..1_000 {
            let answer = denied.check();
            assert!(
                !T::Limiter::admitted(&answer),
                "{}: the denied path admitted",
                contender.name()
            );
        }
    }

    #[test]
    fn every_contender_stays_on_its_path() {
        let clock = PreciseClock::new();
        paths_hold(&tollgate_token_bucket(clock));
        paths_hold(&tollgate_leaky_bucket(clock));
        paths_hold(&tollgate_fixed_window(clock));
        paths_hold(&tollgate_sliding_window(clock));
        paths_hold(&tollgate_fixed_window_wide(clock));
        paths_hold(&tollgate_sliding_window_wide(clock));
        paths_hold(&TollgateLog(clock));
        paths_hold(&GovernorDirect(governor::clock::QuantaClock::default()));
        paths_hold(&RatelimitDirect::new("ratelimit", || {
            TollgateElapsed::new(PreciseClock::new())
        }));
        paths_hold(&RatelimitDirect::new("ratelimit_std", ratelimit::StdClock::new));
        paths_hold(&MutexBucketDirect);
        paths_hold(&crate::MinimalBucket(clock));
        paths_hold(&crate::MinimalFixed(clock));
        paths_hold(&crate::MinimalSliding(clock));
    }
}
