//! tollgate's keyed limiter and governor's, with the quota both run and the [`Keyed`] trait every
//! keyed scenario is written against.
//!
//! Both contenders run the same quota, a GCRA token bucket of one token per [`PERIOD`] with a burst
//! of [`BURST`]: every decision adds [`PERIOD`] of debt to its key, so a key stays allowed for
//! [`BURST`] decisions (more than any benchmark makes of one limiter) and is never idle (never
//! reclaimable) while it is being measured, nor during a fill of 1,000,000 keys on a loaded
//! machine (a key decided once stays live for [`PERIOD`]; a key idle for longer may give its slot
//! to a new key, and a fill would then hold fewer keys than it decided).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use tollgate::algorithm::Algorithm;
use tollgate::{Clock, FixedWindow, KeyedLimiter, Outcome, Quota, SlidingWindow, TokenBucket};

use crate::timing::KeyedLoops;

/// The burst of the shared quota: decisions a key may take before it is refused.
pub const BURST: u32 = 100_000_000;

/// The period of the shared quota: the debt each decision adds to its key.
pub const PERIOD: Duration = Duration::from_secs(10);

/// tollgate's keyed token bucket with the shared quota.
pub type Tollgate<C> = KeyedLimiter<u64, TokenBucket, C>;

/// governor's keyed limiter on its DashMap state store (what `RateLimiter::keyed` builds), with
/// clock `C`.
pub type Governor<C> =
    governor::RateLimiter<u64, DashMapStateStore<u64>, C, NoOpMiddleware<<C as GovernorClock>::Instant>>;

/// The shared quota as a tollgate token bucket: one per [`PERIOD`], burst [`BURST`].
pub fn tollgate_bucket() -> TokenBucket {
    let quota = tollgate::Quota::new(1, PERIOD)
        .and_then(|quota| quota.with_burst(u64::from(BURST)))
        .expect("the benchmark quota is valid");
    TokenBucket::new(quota).expect("the benchmark quota fits a token bucket")
}

/// The shared quota as a governor quota: one per [`PERIOD`], burst [`BURST`].
pub fn governor_quota() -> governor::Quota {
    let burst = NonZeroU32::new(BURST).expect("BURST is not zero");
    governor::Quota::with_period(PERIOD)
        .expect("PERIOD is not zero")
        .allow_burst(burst)
}

/// A tollgate keyed limiter built for `capacity` keys (its whole table is allocated and written
/// here).
pub fn tollgate<C: Clock>(capacity: usize, clock: C) -> Tollgate<C> {
    KeyedLimiter::with_clock(tollgate_bucket(), capacity, clock).expect("the capacity fits in memory")
}

/// A governor keyed limiter whose DashMap is pre-sized for `capacity` keys (as tollgate's table
/// is), so that no benchmark measures its growth.
pub fn governor<C: GovernorClock>(capacity: usize, clock: C) -> Governor<C> {
    governor::RateLimiter::new(
        governor_quota(),
        DashMapStateStore::<u64>::with_capacity(capacity),
        clock,
    )
}

/// A governor keyed limiter exactly as `RateLimiter::dashmap_with_clock` builds it: an empty
/// DashMap that grows as keys arrive.
pub fn governor_unsized<C: GovernorClock>(clock: C) -> Governor<C> {
    governor::RateLimiter::dashmap_with_clock(governor_quota(), clock)
}

/// What the benchmarks need of a keyed limiter over `u64` keys.
pub trait Keyed: Sync {
    /// What one decision returns (kept whole, so that none of it is optimized away).
    type Answer;

    /// Decides one request for `key` now, inserting the key if it is new.
    ///
    /// Both implementations are `#[inline(always)]`, so that each limiter's own `check` is offered
    /// to the inliner at the benchmark loop exactly as a direct call in user code would be: a
    /// forwarding layer of ours must not decide whether it gets inlined.
    fn check(&self, key: &u64) -> Self::Answer;

    /// Whether `answer` admitted the request and counted it against its key.
    fn admitted(answer: &Self::Answer) -> bool;

    /// Keys held.
    fn keys(&self) -> usize;
}

impl<A: Algorithm, C: Clock> Keyed for KeyedLimiter<u64, A, C> {
    type Answer = tollgate::Decision;

    #[inline(always)]
    fn check(&self, key: &u64) -> tollgate::Decision {
        KeyedLimiter::check(self, key)
    }

    fn admitted(answer: &tollgate::Decision) -> bool {
        // Not `AllowedUntracked`: a key that found no room would not be a fair comparison.
        answer.outcome() == Outcome::Allowed
    }

    fn keys(&self) -> usize {
        self.len()
    }
}

impl<C: GovernorClock + Sync> Keyed for Governor<C>
where
    C::Instant: Sync,
{
    type Answer = Result<(), governor::NotUntil<C::Instant>>;

    #[inline(always)]
    fn check(&self, key: &u64) -> Self::Answer {
        self.check_key(key)
    }

    fn admitted(answer: &Self::Answer) -> bool {
        answer.is_ok()
    }

    fn keys(&self) -> usize {
        self.len()
    }
}

/// One keyed implementation on one clock: how to build its limiter.
pub trait KeyedContender {
    /// The limiter it builds, with its timed loops compiled in this crate.
    type Limiter: KeyedLoops;

    /// The implementation's name, the first half of every benchmark id.
    const NAME: &'static str;

    /// A limiter built for `capacity` keys, holding none.
    fn build(&self, capacity: usize) -> Self::Limiter;

    /// A limiter built for `capacity` keys holding keys `0..keys`, each decided once.
    ///
    /// # Panics
    /// If a key is refused or not held: the benchmarks must measure the allowed path.
    fn filled(&self, capacity: usize, keys: u64) -> Self::Limiter {
        let limiter = self.build(capacity);
        for key in 0..keys {
            let answer = limiter.check(&key);
            assert!(
                Self::Limiter::admitted(&answer),
                "{}: key {key} must be admitted",
                Self::NAME
            );
        }
        assert_eq!(
            limiter.keys() as u64,
            keys,
            "{}: every key must be held",
            Self::NAME
        );
        limiter
    }
}

/// The long-lived quota, for runs far slower than real time (under callgrind): one per 1,000 s
/// with a burst of [`LONG_LIVED_BURST`], so that every decision adds 1,000 s of debt and a key
/// filled at the start of a slow run is still live (not reclaimable) when it is measured. Its
/// arithmetic is the same as the benchmark quota's.
pub const LONG_LIVED_PERIOD: Duration = Duration::from_secs(1_000);

/// The burst of the long-lived quota: decisions a key may take before it is refused.
pub const LONG_LIVED_BURST: u32 = 1_000_000;

/// tollgate's keyed token bucket on clock `C`.
#[derive(Debug)]
pub struct TollgateKeyed<C> {
    clock: C,
    bucket: TokenBucket,
}

impl<C> TollgateKeyed<C> {
    /// With the benchmark quota (one per [`PERIOD`], burst [`BURST`]).
    pub fn new(clock: C) -> TollgateKeyed<C> {
        TollgateKeyed {
            clock,
            bucket: tollgate_bucket(),
        }
    }

    /// With the long-lived quota ([`LONG_LIVED_PERIOD`], burst [`LONG_LIVED_BURST`]).
    pub fn long_lived(clock: C) -> TollgateKeyed<C> {
        let quota = tollgate::Quota::new(1, LONG_LIVED_PERIOD)
            .and_then(|quota| quota.with_burst(u64::from(LONG_LIVED_BURST)))
            .expect("the long-lived quota is valid");
        let bucket = TokenBucket::new(quota).expect("the long-lived quota fits a token bucket");
        TollgateKeyed { clock, bucket }
    }
}

impl<C: Clock + Clone> KeyedContender for TollgateKeyed<C>
where
    Tollgate<C>: KeyedLoops,
{
    type Limiter = Tollgate<C>;
    const NAME: &'static str = "tollgate";

    fn build(&self, capacity: usize) -> Tollgate<C> {
        KeyedLimiter::with_clock(self.bucket, capacity, self.clock.clone())
            .expect("the capacity fits in memory")
    }
}

/// tollgate's keyed token bucket on clock `C`, named (feature `metrics`): every decision counted
/// on its thread's lane (`tollgate::metrics`). The rows `tollgate_metered`, beside `tollgate`'s
/// in the same run: the cost of counting.
#[cfg(feature = "metrics")]
#[derive(Debug)]
pub struct TollgateKeyedMetered<C>(pub TollgateKeyed<C>);

#[cfg(feature = "metrics")]
impl<C: Clock + Clone> KeyedContender for TollgateKeyedMetered<C>
where
    Tollgate<C>: KeyedLoops,
{
    type Limiter = Tollgate<C>;
    const NAME: &'static str = "tollgate_metered";

    fn build(&self, capacity: usize) -> Tollgate<C> {
        let name = tollgate::metrics::LimiterName::new("bench").expect("a valid name");
        self.0.build(capacity).named(name)
    }
}

/// tollgate's keyed window counter with a 128-bit state (a locked table: a short lock per key),
/// on clock `C`: `u32::MAX` per 1,000 s (the long-lived period): the sliding window's two counts
/// take 128 bits by themselves, the fixed window is built wide; a key stays allowed for
/// `u32::MAX` decisions. The rows
/// `tollgate_sliding_window_wide` and `tollgate_fixed_window_wide`.
#[derive(Debug)]
pub struct TollgateKeyedWindow<A, C> {
    clock: C,
    window: A,
}

impl<C> TollgateKeyedWindow<SlidingWindow, C> {
    /// The sliding window counter.
    pub fn sliding(clock: C) -> Self {
        let window = SlidingWindow::new(wide_quota()).expect("the wide quota fits a sliding window");
        assert!(window.is_wide());
        TollgateKeyedWindow { clock, window }
    }
}

impl<C> TollgateKeyedWindow<FixedWindow, C> {
    /// The fixed window counter.
    pub fn fixed(clock: C) -> Self {
        // A fixed window's one count of u32::MAX fits beside a 1,000 s window's index in one word:
        // built wide, as the sliding window's two counts are by themselves.
        let window = FixedWindow::new(wide_quota())
            .expect("the wide quota fits a fixed window")
            .with_wide_state();
        assert!(window.is_wide());
        TollgateKeyedWindow { clock, window }
    }
}

/// `u32::MAX` per [`LONG_LIVED_PERIOD`].
fn wide_quota() -> Quota {
    Quota::new(u64::from(u32::MAX), LONG_LIVED_PERIOD).expect("the wide quota is valid")
}

impl<C: Clock + Clone> KeyedContender for TollgateKeyedWindow<SlidingWindow, C>
where
    KeyedLimiter<u64, SlidingWindow, C>: KeyedLoops,
{
    type Limiter = KeyedLimiter<u64, SlidingWindow, C>;
    const NAME: &'static str = "tollgate_sliding_window_wide";

    fn build(&self, capacity: usize) -> Self::Limiter {
        KeyedLimiter::with_clock(self.window, capacity, self.clock.clone())
            .expect("the capacity fits in memory")
    }
}

impl<C: Clock + Clone> KeyedContender for TollgateKeyedWindow<FixedWindow, C>
where
    KeyedLimiter<u64, FixedWindow, C>: KeyedLoops,
{
    type Limiter = KeyedLimiter<u64, FixedWindow, C>;
    const NAME: &'static str = "tollgate_fixed_window_wide";

    fn build(&self, capacity: usize) -> Self::Limiter {
        KeyedLimiter::with_clock(self.window, capacity, self.clock.clone())
            .expect("the capacity fits in memory")
    }
}

/// governor's keyed limiter (DashMap pre-sized for the capacity) on clock `C`.
#[derive(Debug)]
pub struct GovernorKeyed<C> {
    clock: C,
    quota: governor::Quota,
}

impl<C> GovernorKeyed<C> {
    /// With the benchmark quota (one per [`PERIOD`], burst [`BURST`]).
    pub fn new(clock: C) -> GovernorKeyed<C> {
        GovernorKeyed {
            clock,
            quota: governor_quota(),
        }
    }

    /// With the long-lived quota ([`LONG_LIVED_PERIOD`], burst [`LONG_LIVED_BURST`]).
    pub fn long_lived(clock: C) -> GovernorKeyed<C> {
        let burst = NonZeroU32::new(LONG_LIVED_BURST).expect("LONG_LIVED_BURST is not zero");
        let quota = governor::Quota::with_period(LONG_LIVED_PERIOD)
            .expect("the period is not zero")
            .allow_burst(burst);
        GovernorKeyed { clock, quota }
    }
}

impl<C: GovernorClock + Clone + Sync> KeyedContender for GovernorKeyed<C>
where
    C::Instant: Sync,
    Governor<C>: KeyedLoops,
{
    type Limiter = Governor<C>;
    const NAME: &'static str = "governor";

    fn build(&self, capacity: usize) -> Governor<C> {
        governor::RateLimiter::new(
            self.quota,
            DashMapStateStore::<u64>::with_capacity(capacity),
            self.clock.clone(),
        )
    }
}
