//! tollgate's keyed limiter beside its peers, for the comparison benchmarks
//! (`benches/keyed.rs`) and the memory probe (`src/bin/keyed_memory.rs`).
//!
//! This package is `publish = false` and lives in its own workspace member so that governor (and
//! its DashMap, futures and parking_lot) never enter tollgate's dependency tree.
//!
//! Both contenders run the same quota, a GCRA token bucket of one token per second with a burst
//! of [`BURST`]: every decision adds a second of debt to its key, so a key stays allowed for
//! [`BURST`] decisions (far more than any benchmark makes) and is never idle (never reclaimable)
//! while it is being measured.
//!
//! Run:
//! - `cargo bench -p tollgate-peers --bench keyed`
//! - `cargo run -p tollgate-peers --release --bin keyed_memory -- tollgate` (and `governor`,
//!   `governor-unsized`)

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use tollgate::{Clock, KeyedLimiter, Outcome, TokenBucket};

/// The burst of the shared quota: decisions a key may take before it is refused.
pub const BURST: u32 = 1_000_000_000;

/// tollgate's keyed token bucket with the shared quota.
pub type Tollgate<C> = KeyedLimiter<u64, TokenBucket, C>;

/// governor's keyed limiter on its DashMap state store (what `RateLimiter::keyed` builds), with
/// clock `C`.
pub type Governor<C> =
    governor::RateLimiter<u64, DashMapStateStore<u64>, C, NoOpMiddleware<<C as GovernorClock>::Instant>>;

/// The shared quota as a tollgate token bucket: 1/s, burst [`BURST`].
pub fn tollgate_bucket() -> TokenBucket {
    let quota = tollgate::Quota::per_second(1)
        .and_then(|quota| quota.with_burst(u64::from(BURST)))
        .expect("the benchmark quota is valid");
    TokenBucket::new(quota).expect("the benchmark quota fits a token bucket")
}

/// The shared quota as a governor quota: 1/s, burst [`BURST`].
pub fn governor_quota() -> governor::Quota {
    let burst = std::num::NonZeroU32::new(BURST).expect("BURST is not zero");
    governor::Quota::per_second(std::num::NonZeroU32::MIN).allow_burst(burst)
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

impl<C: Clock> Keyed for Tollgate<C> {
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
