//! Refunds through Redis (`RedisLimiter::refund_n`): the same answers as the local limiters'
//! `refund_n_at`, the key's expiry kept exact, typed errors, best effort when Redis is away; a
//! shaper's slots (`RedisLimiter::check_slot`, `refund_slot`); and the fallbacks' slots (`LocalFallback::check_slot`, `refund_slot`). The tower layer's refunds
//! are `refund_layer.rs` (through Redis) and `refund_fallback.rs` (through the fallback).

use std::time::Duration;

use crate::redis_common::cluster::RedisCluster;
use crate::redis_common::{client_time_limiter, raw_connection, shared_database, Backend, RedisServer};
use redis::AsyncCommands;
use tollgate::distributed::{
    DecidedBy, Failure, FailurePolicy, RedisAlgorithm, RedisCheckError, RedisLimiter,
};
use tollgate::{
    Decision, DirectLimiter, FixedWindow, LeakyBucket, ManualClock, Quota, Timestamp, TokenBucket,
};

/// 1_700_000_040 s since the epoch, in microseconds: step times are offsets from it.
const BASE_MICROS: u64 = 1_700_000_040_000_000;
const SECOND: u64 = 1_000_000;

/// One step of a scenario, at `at` µs after BASE, with what it must answer.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `check_n(weight)`, admitted or not.
    Check { at: u64, weight: u64, admitted: bool },
    /// `refund_n(weight)`, giving something back or not.
    Refund { at: u64, weight: u64, gave_back: bool },
}

const fn check(at: u64, weight: u64, admitted: bool) -> Step {
    Step::Check { at, weight, admitted }
}

const fn refund(at: u64, weight: u64, gave_back: bool) -> Step {
    Step::Refund {
        at,
        weight,
        gave_back,
    }
}

/// The local twin of a scenario's limiter.
trait Local {
    fn check(&self, cost: u64, now: Timestamp) -> Decision;
    fn refund(&self, cost: u64, now: Timestamp) -> bool;
}

impl<A: tollgate::algorithm::Algorithm> Local for DirectLimiter<A, ManualClock> {
    fn check(&self, cost: u64, now: Timestamp) -> Decision {
        self.check_n_at(cost, now).unwrap()
    }

    fn refund(&self, cost: u64, now: Timestamp) -> bool {
        self.refund_n_at(cost, now)
    }
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

/// A name, the local limiter, the same algorithm for Redis, and the steps.
type Scenario = (&'static str, Box<dyn Local>, RedisAlgorithm, Vec<Step>);

fn local<A: tollgate::algorithm::Algorithm + 'static>(algorithm: A) -> Box<dyn Local> {
    Box::new(DirectLimiter::with_clock(algorithm, ManualClock::new()))
}

/// Every parameter is whole seconds, so each key lives at least a second of real time after a
/// write (its TTL is client time counted on the server's clock): longer than a scenario runs.
fn scenarios() -> Vec<Scenario> {
    let token = TokenBucket::new(quota("1/s burst 5")).unwrap();
    let leaky = LeakyBucket::new(quota("1/s burst 3")).unwrap();
    let fixed = FixedWindow::new(quota("3/min")).unwrap();
    vec![
        (
            "token bucket: absent key, weights, clamped at now, a check that now passes",
            local(token),
            token.into(),
            vec![
                // Nothing was admitted: a full bucket stays full.
                refund(0, 1, false),
                check(0, 3, true),
                refund(0, 1, true),
                // 2 s of the 5 taken: 4 would not fit, 3 do.
                check(0, 4, false),
                check(0, 3, true),
                check(0, 1, false),
                // Weight 2 back: the refused request now passes.
                refund(SECOND / 2, 2, true),
                check(SECOND / 2, 2, true),
                // A weight of 0 gives nothing back.
                refund(SECOND / 2, 0, false),
                // 4.5 s ahead at 0.5 s; back by 5 s would be behind now: clamped to now, so
                // the bucket is full again (and the key gone).
                refund(SECOND, 5, true),
                check(SECOND, 5, true),
                // On a clock that steps back, 0.5 s: the TAT (6 s) moves back to 2 s.
                refund(SECOND / 2, 4, true),
                check(SECOND / 2, 3, true),
                check(SECOND / 2, 1, false),
                // Long after: the bucket refilled by itself, nothing to give back.
                refund(60 * SECOND, 1, false),
                check(60 * SECOND, 5, true),
            ],
        ),
        (
            "leaky bucket: an abandoned slot lets the next request in",
            local(leaky),
            leaky.into(),
            vec![
                check(0, 1, true),
                check(0, 1, true),
                check(0, 1, true),
                check(0, 1, false),
                refund(0, 1, true),
                check(0, 1, true),
                refund(SECOND / 4, 2, true),
                check(SECOND / 4, 2, true),
                check(SECOND / 4, 1, false),
                refund(30 * SECOND, 3, false),
            ],
        ),
        (
            "fixed window: nothing given back, without asking Redis",
            local(fixed),
            fixed.into(),
            vec![check(0, 3, true), refund(0, 1, false), check(0, 1, false)],
        ),
    ]
}

#[tokio::test(flavor = "current_thread")]
async fn refunds_answer_as_the_local_limiters() {
    refunds_of_the_table_answer_as_the_local_limiters(&shared_database()).await;
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_cluster_refunds_answer_as_the_local_limiters() {
    refunds_of_the_table_answer_as_the_local_limiters(RedisCluster::shared()).await;
}

/// Every scenario of the table, each on its own key, on `server`.
async fn refunds_of_the_table_answer_as_the_local_limiters(server: &impl Backend) {
    let clock = ManualClock::new();
    let mut refunds = 0;
    for (number, (name, local, algorithm, steps)) in scenarios().into_iter().enumerate() {
        let remote = client_time_limiter(server, algorithm, &clock, "refund:").await;
        let key = number.to_string();
        for (index, step) in steps.into_iter().enumerate() {
            let (Step::Check { at, .. } | Step::Refund { at, .. }) = step;
            let now = Timestamp::from_nanos((BASE_MICROS + at) * 1_000);
            clock.set(now);
            match step {
                Step::Check { weight, admitted, .. } => {
                    let expected = local.check(weight, now);
                    let answer = remote.check_n(&key, weight).await.unwrap();
                    assert_eq!(answer.decided_by, DecidedBy::Redis, "{name}: step {index}");
                    assert_eq!(answer.decision, expected, "{name}: step {index} ({step:?})");
                    assert_eq!(expected.is_allowed(), admitted, "{name}: step {index} ({step:?})");
                }
                Step::Refund {
                    weight, gave_back, ..
                } => {
                    let expected = local.refund(weight, now);
                    let answer = remote.refund_n(&key, weight).await.unwrap();
                    assert_eq!(answer, expected, "{name}: step {index} ({step:?})");
                    assert_eq!(expected, gave_back, "{name}: step {index} ({step:?})");
                    refunds += 1;
                }
            }
        }
    }
    assert_eq!(refunds, 11, "every refund step ran");
}

/// On the server's clock: after a refund the key lives exactly until its state is fresh again
/// (the new reset-after); a refund back to now removes it; a refund of an absent key writes
/// nothing.
#[tokio::test(flavor = "current_thread")]
async fn a_refund_keeps_the_key_expiring_when_fresh_again() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let buckets: [RedisAlgorithm; 2] = [
        TokenBucket::new(quota("10/s burst 5")).unwrap().into(),
        LeakyBucket::new(quota("10/s burst 5")).unwrap().into(),
    ];
    for algorithm in buckets {
        let name = algorithm.name();
        let limiter = RedisLimiter::builder(server.url(), algorithm, FailurePolicy::FailOpen)
            .deadline(Duration::from_secs(5))
            .connect()
            .await
            .unwrap();
        let key = limiter.redis_key("user:7");
        assert!(!limiter.refund_n("user:7", 1).await.unwrap(), "{name}");
        let exists: bool = raw.exists(&key).await.unwrap();
        assert!(!exists, "{name}: a refund of an absent key wrote it");
        assert!(limiter.check_n("user:7", 4).await.unwrap().is_allowed(), "{name}");
        assert!(limiter.refund_n("user:7", 1).await.unwrap(), "{name}");
        // A weightless check reads the state without writing: its reset-after is TAT - now.
        let reset = limiter.check_n("user:7", 0).await.unwrap().decision.reset_after();
        let ttl: i64 = raw.pttl(&key).await.unwrap();
        // 400 ms taken, 100 ms given back.
        assert!(
            reset <= Duration::from_millis(300) && reset > Duration::from_millis(200),
            "{name}: reset {reset:?}"
        );
        let reset = i64::try_from(reset.as_millis()).unwrap();
        // `PTTL` counts from Redis's cached command time, which can trail the `TIME` the
        // scripts read by a few milliseconds on a loaded machine (299 against 297 occurs):
        // 5 ms of slack, far below the 100 ms a refund moves the expiry.
        assert!(
            ttl > 0 && ttl <= reset + 5 && ttl + 100 > reset,
            "{name}: ttl {ttl} ms, reset {reset} ms"
        );
        // Back by more than is outstanding: the bucket is full, the key gone.
        assert!(limiter.refund_n("user:7", 5).await.unwrap(), "{name}");
        let exists: bool = raw.exists(&key).await.unwrap();
        assert!(!exists, "{name}: a full bucket's key outlived its refund");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn refund_errors_are_typed() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let bucket = TokenBucket::new(quota("10/s burst 5")).unwrap();
    let limiter = RedisLimiter::builder(server.url(), bucket, FailurePolicy::FailOpen)
        .deadline(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    assert!(matches!(
        limiter.refund_n("k", 6).await,
        Err(RedisCheckError::CostTooLarge(_))
    ));
    let list = limiter.redis_key("list");
    let _: () = raw.rpush(&list, "x").await.unwrap();
    assert_eq!(
        limiter.refund_n("list", 1).await,
        Err(RedisCheckError::WrongType { key: list })
    );
    let text = limiter.redis_key("text");
    let _: () = raw.set(&text, "not a time").await.unwrap();
    assert_eq!(
        limiter.refund_n("text", 1).await,
        Err(RedisCheckError::CorruptState { key: text })
    );
    // The window gives nothing back, even for a cost it would refuse.
    let window = RedisLimiter::builder(
        server.url(),
        FixedWindow::new(quota("3/s")).unwrap(),
        FailurePolicy::FailOpen,
    )
    .connect()
    .await
    .unwrap();
    assert!(matches!(
        window.refund_n("k", 4).await,
        Err(RedisCheckError::CostTooLarge(_))
    ));
    // A client time past the scripts' range is refused before Redis is asked.
    let far = RedisLimiter::builder(server.url(), bucket, FailurePolicy::FailOpen)
        .client_time(ManualClock::starting_at(Timestamp::from_nanos(u64::MAX)))
        .connect()
        .await
        .unwrap();
    assert!(matches!(
        far.refund_n("k", 1).await,
        Err(RedisCheckError::TimeOutOfRange { .. })
    ));
}

/// With Redis gone, a refund gives nothing back within the deadline, and does not make the next
/// decision skip Redis (it finds out by itself, and says why).
#[tokio::test(flavor = "current_thread")]
async fn a_refund_without_redis_gives_nothing_back_and_leaves_the_breaker_alone() {
    let mut server = RedisServer::start();
    let bucket = TokenBucket::new(quota("10/s burst 5")).unwrap();
    let limiter = RedisLimiter::builder(
        server.url(),
        bucket,
        FailurePolicy::FailClosed {
            retry_after: Duration::from_secs(1),
        },
    )
    .deadline(Duration::from_millis(200))
    .connect()
    .await
    .unwrap();
    assert!(limiter.check_n("k", 2).await.unwrap().is_allowed());
    server.kill();
    let refunded = tokio::time::timeout(Duration::from_secs(5), limiter.refund_n("k", 1)).await;
    assert_eq!(refunded.expect("a refund waits at most its deadline"), Ok(false));
    let answer = limiter.check("k").await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::FailClosed);
    assert!(
        !matches!(answer.failure, Some(Failure::RecentlyDown(_))),
        "{answer:?}"
    );
}

/// `check_slot` names the end of the slot each of a Redis shaper's admissions took (the TAT
/// its script stored), refuses a wait above the maximum with nothing counted, and
/// `refund_slot` gives a slot back only while it ends the key's queue in Redis: D, C, B
/// leaving in that order give back all three, B first gives nothing back. The other
/// algorithms never delay: no end, and nothing to give back.
#[tokio::test(flavor = "current_thread")]
async fn a_slot_named_by_check_slot_goes_back_only_while_it_ends_the_queue() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_800_000_000);
    let clock = ManualClock::starting_at(start);
    let shaper = LeakyBucket::new(quota("1/10s burst 5")).unwrap();
    let limiter = client_time_limiter(&server, shaper, &clock, "slots:").await;
    let secs = Duration::from_secs;
    let mut ends = Vec::new();
    for slot in 1..=3 {
        let (answer, end) = limiter.check_slot("k", 1, None).await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
        assert!(answer.is_allowed(), "{answer:?}");
        assert_eq!(answer.decision.delay(), secs(10 * (slot - 1)));
        assert_eq!(end, Some(start.saturating_add(secs(10 * slot))));
        ends.push(end.unwrap());
    }
    // The next would wait 30 s: above 25 s, refused by the script, counted nowhere.
    let (refused, end) = limiter.check_slot("k", 1, Some(secs(25))).await.unwrap();
    assert_eq!(refused.decided_by, DecidedBy::Redis, "{refused:?}");
    assert!(!refused.is_allowed(), "{refused:?}");
    assert_eq!((refused.decision.retry_after(), end), (secs(5), None));
    assert_eq!(
        limiter.peek_n("k", 0).await.unwrap().decision.reset_after(),
        secs(30)
    );
    assert!(
        !limiter.refund_slot("k", 1, ends[1]).await.unwrap(),
        "the middle of the queue"
    );
    assert!(
        limiter.refund_slot("k", 1, ends[2]).await.unwrap(),
        "the end of the queue"
    );
    assert!(
        limiter.refund_slot("k", 1, ends[1]).await.unwrap(),
        "the end, in its turn"
    );
    assert_eq!(
        limiter.peek_n("k", 0).await.unwrap().decision.reset_after(),
        secs(10)
    );
    // A token bucket's admission takes no slot; a window gives nothing back.
    let bucket = TokenBucket::new(quota("1/10s burst 5")).unwrap();
    let bucket = client_time_limiter(&server, bucket, &clock, "slots:").await;
    let (answer, end) = bucket.check_slot("k", 1, Some(secs(1))).await.unwrap();
    assert!(answer.is_allowed() && end.is_none(), "{answer:?} {end:?}");
    let window = FixedWindow::new(quota("3/min")).unwrap();
    let window = client_time_limiter(&server, window, &clock, "slots:").await;
    let (answer, end) = window.check_slot("k", 1, None).await.unwrap();
    assert!(answer.is_allowed() && end.is_none(), "{answer:?} {end:?}");
    assert!(!window.refund_slot("k", 1, start).await.unwrap());
}

/// The keyed and direct limiters, as a fallback, name the end of the slot each admission gets
/// (the decision's time plus its reset-after), refuse a wait above the maximum with nothing
/// counted, and give a slot back only while it ends the queue; a fallback that keeps the
/// provided methods names no slot, applies no maximum, and gives no slot back.
#[test]
fn a_fallback_names_its_slots_and_gives_back_only_the_last() {
    use tollgate::distributed::LocalFallback;
    use tollgate::{CostTooLarge, KeyedLimiter};
    let start = Timestamp::from_secs(1_800_000_000);
    let clock = ManualClock::starting_at(start);
    let shaper = LeakyBucket::new(quota("1/10s burst 5")).unwrap();
    let secs = Duration::from_secs;
    let fallbacks = [
        (
            "keyed",
            FailurePolicy::fallback(
                KeyedLimiter::<str, _, _>::with_clock(shaper, 100, clock.clone()).unwrap(),
            ),
        ),
        (
            "direct",
            FailurePolicy::fallback(DirectLimiter::with_clock(shaper, clock.clone())),
        ),
    ];
    for (name, policy) in fallbacks {
        let FailurePolicy::Fallback(local) = &policy else {
            unreachable!()
        };
        let mut ends = Vec::new();
        for slot in 1..=3 {
            let (decision, end) = local.check_slot("k", 1, None).unwrap();
            assert!(decision.is_allowed(), "{name}: {decision:?}");
            assert_eq!(end, Some(start.saturating_add(secs(10 * slot))), "{name}");
            ends.push(end.unwrap());
        }
        // The next would wait 30 s: above 25 s, refused, counted nowhere, no slot named.
        let (refused, end) = local.check_slot("k", 1, Some(secs(25))).unwrap();
        assert!(!refused.is_allowed(), "{name}: {refused:?}");
        assert_eq!((refused.retry_after(), end), (secs(5), None), "{name}");
        assert_eq!(local.peek_n("k", 0).unwrap().reset_after(), secs(30), "{name}");
        assert!(
            !policy.refund_slot("k", 1, ends[1]),
            "{name}: the middle of the queue"
        );
        assert!(
            policy.refund_slot("k", 1, ends[2]),
            "{name}: the end of the queue"
        );
        assert!(
            policy.refund_slot("k", 1, ends[1]),
            "{name}: the end, in its turn"
        );
        assert_eq!(local.peek_n("k", 0).unwrap().reset_after(), secs(10), "{name}");
    }

    /// A fallback written before `check_slot` and `refund_slot` existed.
    struct Custom(KeyedLimiter<str, LeakyBucket, ManualClock>);
    impl LocalFallback for Custom {
        fn check_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
            self.0.check_n(key, cost)
        }
        fn peek_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
            self.0.peek_n(key, cost)
        }
    }
    let custom = Custom(KeyedLimiter::with_clock(shaper, 100, clock.clone()).unwrap());
    let _ = custom.check_slot("k", 1, None).unwrap();
    // `check_n`'s decision: the 10 s wait is admitted above a maximum of 0, with no end.
    let (waiting, end) = custom.check_slot("k", 1, Some(Duration::ZERO)).unwrap();
    assert_eq!(
        (waiting.is_allowed(), waiting.delay(), end),
        (true, secs(10), None)
    );
    assert!(!custom.refund_slot("k", 1, start.saturating_add(secs(20))));
    assert_eq!(custom.0.peek_n("k", 0).unwrap().reset_after(), secs(20));
    // Fail open counts nothing, fail closed admits nothing: no slot to give back.
    assert!(!FailurePolicy::FailOpen.refund_slot("k", 1, start.saturating_add(secs(10))));
    let closed = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    assert!(!closed.refund_slot("k", 1, start.saturating_add(secs(10))));
}
