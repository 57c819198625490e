//! tollgate's limiters whose quota can change live (`tollgate::Live`) and its policy sets
//! (`tollgate::PolicySet`), beside the plain limiters they are built from:
//!
//! - direct: [`TollgateLive`] (the rows `tollgate_token_bucket_live`, `..._fixed_window_live`,
//!   `..._sliding_window_live`: the plain rows' quotas in a `Live`), [`TollgateLogLive`]
//!   (`tollgate_sliding_log_live`), and [`TollgateSet`] (`tollgate_policy_set_1`, `_2`, `_3`: one,
//!   two and three direct policies, the denied path refused by the last one, after the others
//!   admitted and before their undo);
//! - keyed: [`TollgateKeyedLive`] (`tollgate_live`, the benchmark quota in a `Live`) and
//!   [`TollgateKeyedSet`] (`tollgate_policy_set_2`: the key's bucket and a fixed window per key;
//!   `tollgate_policy_set_3`: and a global bucket).

use std::sync::Arc;
use std::time::Duration;

use tollgate::algorithm::Algorithm;
use tollgate::live::Retune;
use tollgate::{
    Clock, DirectLimiter, FixedWindow, KeyedLimiter, Live, LogLimiter, Outcome, PolicySet, Quota, SlidingLog,
    SlidingWindow, Timestamp, TokenBucket,
};

use crate::direct::{Direct, DirectContender, TollgateDirect};
use crate::keyed::{tollgate_bucket, Keyed, KeyedContender, LONG_LIVED_BURST, LONG_LIVED_PERIOD};
use crate::timing::{DirectLoops, KeyedLoops};

fn quota(text: &str) -> Quota {
    text.parse().expect("benchmark quotas are valid")
}

/// A plain row's configurations in a `Live`, named `{plain}_live`.
#[derive(Debug)]
pub struct TollgateLive<A, C> {
    name: String,
    plain: TollgateDirect<A, C>,
    prepare: fn(&DirectLimiter<Live<A>, C>),
}

fn fresh<A, C>(_: &DirectLimiter<A, C>) {}

/// The sliding window's allowed path with 5,000 in the previous window, as the plain row's.
fn fill_previous_window<C: Clock>(limiter: &DirectLimiter<Live<SlidingWindow>, C>) {
    let window_nanos = u64::try_from(limiter.algorithm().current().window().as_nanos()).unwrap_or(u64::MAX);
    let a_window_ago = limiter.clock().now().as_nanos().saturating_sub(window_nanos);
    let filled = limiter.check_n_at(5_000, Timestamp::from_nanos(a_window_ago));
    assert!(filled.is_ok_and(|decision| decision.is_allowed()));
}

/// `tollgate_token_bucket`'s quotas in a `Live`.
pub fn tollgate_token_bucket_live<C: Clock>(clock: C) -> TollgateLive<TokenBucket, C> {
    TollgateLive {
        name: "tollgate_token_bucket_live".to_owned(),
        plain: crate::tollgate_token_bucket(clock),
        prepare: fresh,
    }
}

/// `tollgate_fixed_window`'s quotas in a `Live`.
pub fn tollgate_fixed_window_live<C: Clock>(clock: C) -> TollgateLive<FixedWindow, C> {
    TollgateLive {
        name: "tollgate_fixed_window_live".to_owned(),
        plain: crate::tollgate_fixed_window(clock),
        prepare: fresh,
    }
}

/// `tollgate_sliding_window`'s quotas in a `Live`.
pub fn tollgate_sliding_window_live<C: Clock>(clock: C) -> TollgateLive<SlidingWindow, C> {
    TollgateLive {
        name: "tollgate_sliding_window_live".to_owned(),
        plain: crate::tollgate_sliding_window(clock),
        prepare: fill_previous_window,
    }
}

impl<A: Algorithm + Retune + Copy, C: Clock + Clone> DirectContender for TollgateLive<A, C>
where
    DirectLimiter<Live<A>, C>: DirectLoops,
{
    type Limiter = DirectLimiter<Live<A>, C>;

    fn name(&self) -> &str {
        &self.name
    }

    fn allowed(&self) -> Self::Limiter {
        let limiter = DirectLimiter::with_clock(Live::new(self.plain.allowed), self.plain.clock.clone());
        (self.prepare)(&limiter);
        limiter
    }

    fn denied(&self) -> Self::Limiter {
        let limiter = DirectLimiter::with_clock(Live::new(self.plain.denied), self.plain.clock.clone());
        let _ = limiter.check();
        let before_an_hour = limiter.clock().now().saturating_add(Duration::from_secs(3599));
        assert!(
            !limiter.peek_at(before_an_hour).is_allowed(),
            "{}: denied for an hour",
            self.name
        );
        limiter
    }
}

impl<C: Clock> Direct for LogLimiter<C, Live<SlidingLog>> {
    type Answer = tollgate::Decision;

    #[inline(always)]
    fn check(&self) -> tollgate::Decision {
        LogLimiter::check(self)
    }

    fn admitted(answer: &tollgate::Decision) -> bool {
        answer.is_allowed()
    }
}

/// `tollgate_sliding_log`'s quotas in a `Live`.
#[derive(Debug)]
pub struct TollgateLogLive<C>(pub C);

impl<C: Clock + Clone> DirectContender for TollgateLogLive<C>
where
    LogLimiter<C, Live<SlidingLog>>: DirectLoops,
{
    type Limiter = LogLimiter<C, Live<SlidingLog>>;

    fn name(&self) -> &str {
        "tollgate_sliding_log_live"
    }

    fn allowed(&self) -> Self::Limiter {
        let log = SlidingLog::new(quota("20000/s")).expect("valid sliding log");
        LogLimiter::with_clock(Live::new(log), self.0.clone())
    }

    fn denied(&self) -> Self::Limiter {
        let log = SlidingLog::new(quota("1/d")).expect("valid sliding log");
        let limiter = LogLimiter::with_clock(Live::new(log), self.0.clone());
        let _ = limiter.check();
        limiter
    }
}

/// A policy set of direct limiters, deciding for one key (`0`).
pub struct DirectSet(PolicySet<u64>);

impl Direct for DirectSet {
    type Answer = tollgate::SetDecision;

    #[inline(always)]
    fn check(&self) -> tollgate::SetDecision {
        self.0.check(&0)
    }

    fn admitted(answer: &tollgate::SetDecision) -> bool {
        answer.is_allowed()
    }
}

impl std::fmt::Debug for DirectSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One, two or three direct policies: the benchmark bucket, a fixed window of 1,000,000 per
/// second, and a second benchmark bucket (allowed); the denied path's last policy refuses (1/h,
/// taken), after the ones before it admitted, which are then undone.
#[derive(Debug)]
pub struct TollgateSet<C> {
    clock: C,
    policies: usize,
}

impl<C> TollgateSet<C> {
    /// A set of `policies` (1 to 3).
    pub fn new(clock: C, policies: usize) -> TollgateSet<C> {
        assert!((1..=3).contains(&policies));
        TollgateSet { clock, policies }
    }
}

impl<C: Clock + Clone + 'static> TollgateSet<C> {
    fn build(&self, refuse_last: bool) -> DirectSet {
        let bucket = || DirectLimiter::with_clock(tollgate_bucket(), self.clock.clone());
        let refusing = || {
            let limiter =
                DirectLimiter::with_clock(TokenBucket::new(quota("1/h")).expect("valid"), self.clock.clone());
            let _ = limiter.check();
            limiter
        };
        let window = || {
            DirectLimiter::with_clock(
                FixedWindow::new(quota("1000000/s")).expect("valid"),
                self.clock.clone(),
            )
        };
        let last = self.policies - 1;
        let mut set = match (refuse_last && last == 0, 0) {
            (true, _) => PolicySet::new("p0", refusing()),
            (false, _) => PolicySet::new("p0", bucket()),
        }
        .expect("a name");
        if self.policies >= 2 {
            set = match refuse_last && last == 1 {
                true => set.and("p1", refusing()),
                false => set.and("p1", window()),
            }
            .expect("room");
        }
        if self.policies == 3 {
            set = match refuse_last {
                true => set.and("p2", refusing()),
                false => set.and("p2", bucket()),
            }
            .expect("room");
        }
        DirectSet(set)
    }
}

impl<C: Clock + Clone + 'static> DirectContender for TollgateSet<C>
where
    DirectSet: DirectLoops,
{
    type Limiter = DirectSet;

    fn name(&self) -> &str {
        [
            "tollgate_policy_set_1",
            "tollgate_policy_set_2",
            "tollgate_policy_set_3",
        ][self.policies - 1]
    }

    fn allowed(&self) -> DirectSet {
        self.build(false)
    }

    fn denied(&self) -> DirectSet {
        self.build(true)
    }
}

/// The long-lived quota of the keyed rows (one per 1,000 s, burst 1,000,000), as a bucket.
fn long_lived_bucket() -> TokenBucket {
    let quota = Quota::new(1, LONG_LIVED_PERIOD)
        .and_then(|quota| quota.with_burst(u64::from(LONG_LIVED_BURST)))
        .expect("the long-lived quota is valid");
    TokenBucket::new(quota).expect("the long-lived quota fits a token bucket")
}

/// tollgate's keyed token bucket in a `Live` (`tollgate_live`): the benchmark quota, or the
/// long-lived one (under callgrind).
#[derive(Debug)]
pub struct TollgateKeyedLive<C> {
    clock: C,
    bucket: TokenBucket,
}

impl<C> TollgateKeyedLive<C> {
    /// With the benchmark quota.
    pub fn new(clock: C) -> Self {
        TollgateKeyedLive {
            clock,
            bucket: tollgate_bucket(),
        }
    }

    /// With the long-lived quota.
    pub fn long_lived(clock: C) -> Self {
        TollgateKeyedLive {
            clock,
            bucket: long_lived_bucket(),
        }
    }
}

impl<C: Clock + Clone> KeyedContender for TollgateKeyedLive<C>
where
    KeyedLimiter<u64, Live<TokenBucket>, C>: KeyedLoops,
{
    type Limiter = KeyedLimiter<u64, Live<TokenBucket>, C>;
    const NAME: &'static str = "tollgate_live";

    fn build(&self, capacity: usize) -> Self::Limiter {
        KeyedLimiter::with_clock(Live::new(self.bucket), capacity, self.clock.clone())
            .expect("the capacity fits in memory")
    }
}

/// A policy set of keyed limiters, and its first one (whose keys it reports).
pub struct KeyedSet<C> {
    set: PolicySet<u64>,
    first: Arc<KeyedLimiter<u64, TokenBucket, C>>,
}

impl<C: Clock> Keyed for KeyedSet<C> {
    type Answer = tollgate::SetDecision;

    #[inline(always)]
    fn check(&self, key: &u64) -> tollgate::SetDecision {
        self.set.check(key)
    }

    fn admitted(answer: &tollgate::SetDecision) -> bool {
        answer.outcome() == Outcome::Allowed
    }

    fn keys(&self) -> usize {
        self.first.len()
    }
}

impl<C> std::fmt::Debug for KeyedSet<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.set.fmt(f)
    }
}

/// `N` keyed policies (2 or 3): the key's bucket (the benchmark quota, or the long-lived one),
/// a fixed window per key of 100,000,000 per 1,000 s, and (3) a global bucket of the same quota
/// as the key's.
#[derive(Debug)]
pub struct TollgateKeyedSet<C, const N: usize> {
    clock: C,
    bucket: TokenBucket,
}

impl<C, const N: usize> TollgateKeyedSet<C, N> {
    /// With the benchmark quota.
    pub fn new(clock: C) -> Self {
        TollgateKeyedSet {
            clock,
            bucket: tollgate_bucket(),
        }
    }

    /// With the long-lived quota.
    pub fn long_lived(clock: C) -> Self {
        TollgateKeyedSet {
            clock,
            bucket: long_lived_bucket(),
        }
    }
}

impl<C: Clock + Clone + 'static, const N: usize> KeyedContender for TollgateKeyedSet<C, N>
where
    KeyedSet<C>: KeyedLoops,
{
    type Limiter = KeyedSet<C>;
    const NAME: &'static str = match N {
        2 => "tollgate_policy_set_2",
        _ => "tollgate_policy_set_3",
    };

    fn build(&self, capacity: usize) -> KeyedSet<C> {
        let first = Arc::new(
            KeyedLimiter::with_clock(self.bucket, capacity, self.clock.clone())
                .expect("the capacity fits in memory"),
        );
        let window =
            FixedWindow::new(Quota::new(100_000_000, LONG_LIVED_PERIOD).expect("valid")).expect("valid");
        let windows =
            KeyedLimiter::with_clock(window, capacity, self.clock.clone()).expect("the capacity fits");
        let mut set = PolicySet::new("bucket", Arc::clone(&first))
            .and_then(|set| set.and("window", windows))
            .expect("two policies");
        if N == 3 {
            let global = DirectLimiter::with_clock(self.bucket, self.clock.clone());
            set = set.and("global", global).expect("three policies");
        }
        KeyedSet { set, first }
    }
}
