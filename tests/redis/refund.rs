//! Refunds through Redis (`RedisLimiter::refund_n`, and the layer's refund of an abandoned
//! shaped request): the same answers as the local limiters' `refund_n_at`, the key's expiry kept
//! exact, typed errors, best effort when Redis is away.

use std::time::Duration;

use crate::redis_common::{client_time_limiter, raw_connection, shared_database, RedisServer};
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
    let server = shared_database();
    let clock = ManualClock::new();
    let mut refunds = 0;
    for (number, (name, local, algorithm, steps)) in scenarios().into_iter().enumerate() {
        let remote = client_time_limiter(&server, algorithm, &clock, "refund:").await;
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
    assert_ne!(answer.failure, Some(Failure::RecentlyDown));
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

#[cfg(feature = "tower")]
mod layer {
    use std::sync::Arc;
    use std::time::Duration;

    use http::{HeaderName, Request, StatusCode};
    use tollgate::distributed::{FailurePolicy, RedisLimiter};
    use tollgate::middleware::{HeaderKey, RateLimitLayer};
    use tollgate::{LeakyBucket, ManualClock, Timestamp};
    use tower::{Layer, Service};

    use crate::middleware_common::Hello;
    use crate::redis_common::{shared_database, RedisServer, RedisUrl};

    /// How long the next request for `key` would wait: a weightless check reads the queue
    /// without taking a slot.
    async fn queue(limiter: &RedisLimiter, key: &str) -> Duration {
        limiter.check_n(key, 0).await.unwrap().decision.delay()
    }

    /// Polls Redis until the queue is `wanted` long (a bounded wait on a condition, not a sleep
    /// standing in for one).
    async fn until(limiter: &RedisLimiter, wanted: Duration) {
        let wait = async {
            while queue(limiter, "k").await != wanted {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("the queue never became {wanted:?}"));
    }

    /// A Redis shaper of `quota`, failing closed, on a client clock that stands still: the state
    /// in Redis only changes when the layer decides or refunds.
    async fn fleet_shaper(server: &impl RedisUrl, quota: &str) -> Arc<RedisLimiter> {
        Arc::new(
            RedisLimiter::builder(
                server.url(),
                LeakyBucket::new(quota.parse().unwrap()).unwrap(),
                FailurePolicy::FailClosed {
                    retry_after: Duration::from_secs(1),
                },
            )
            .client_time(ManualClock::starting_at(Timestamp::from_secs(1_800_000_000)))
            .deadline(Duration::from_secs(5))
            .connect()
            .await
            .unwrap(),
        )
    }

    #[tokio::test]
    async fn an_abandoned_shaped_request_gives_its_slot_back_to_the_fleet() {
        let server = shared_database();
        // A slot every 10 s, one at once and one waiting, on a client clock that stands still:
        // the state in Redis only changes when the layer decides or refunds.
        let limiter = fleet_shaper(&server, "1/10s burst 2").await;
        let layer = RateLimitLayer::new(
            Arc::clone(&limiter),
            HeaderKey::new(HeaderName::from_static("x-api-key")),
        );
        let service = layer.layer(Hello);
        let call = || {
            let mut service = service.clone();
            async move {
                std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
                service
                    .call(Request::get("/").header("x-api-key", "k").body(()).unwrap())
                    .await
            }
        };

        // The first passes at once; the second is given the slot 10 s away and waits.
        assert_eq!(call().await.unwrap().status(), StatusCode::OK);
        assert_eq!(queue(&limiter, "k").await, Duration::from_secs(10));
        let waiting = tokio::spawn(call());
        until(&limiter, Duration::from_secs(20)).await;
        // The queue is full: a third is refused.
        assert_eq!(call().await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);

        // The waiting one is abandoned: its slot comes back in Redis...
        waiting.abort();
        until(&limiter, Duration::from_secs(10)).await;
        // ... and the next request is admitted to it, where the third was refused.
        let next = tokio::spawn(call());
        until(&limiter, Duration::from_secs(20)).await;
        next.abort();
        until(&limiter, Duration::from_secs(10)).await;
    }

    /// A client that leaves while its decision is still in Redis (the server paused with
    /// `CLIENT PAUSE`, so the script runs after the client left): the script counts the slot
    /// all the same, and the layer, no longer awaiting the answer, lets the decision finish on a
    /// task of its own and gives the slot back.
    #[tokio::test]
    async fn a_request_abandoned_before_the_fleets_answer_gives_its_slot_back() {
        let server = RedisServer::start();
        let limiter = fleet_shaper(&server, "1/10s burst 3").await;
        let mut service = RateLimitLayer::new(
            Arc::clone(&limiter),
            HeaderKey::new(HeaderName::from_static("x-api-key")),
        )
        .layer(Hello);
        let request = || Request::get("/").header("x-api-key", "k").body(()).unwrap();
        // The first passes at once: the next waits 10 s.
        std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx))
            .await
            .unwrap();
        assert_eq!(service.call(request()).await.unwrap().status(), StatusCode::OK);
        assert_eq!(queue(&limiter, "k").await, Duration::from_secs(10));

        // Redis stops answering for a second; the second request's script waits in it, and
        // its client leaves meanwhile.
        let mut raw = super::raw_connection(&server).await;
        let () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(1000)
            .query_async(&mut raw)
            .await
            .unwrap();
        std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx))
            .await
            .unwrap();
        let mut leaving = Box::pin(service.call(request()));
        let answered = tokio::time::timeout(Duration::from_millis(200), leaving.as_mut()).await;
        assert!(answered.is_err(), "Redis is paused: no answer yet");
        drop(leaving);

        // The script runs once Redis resumes: the slot 10 s further is counted (this check
        // goes over the limiter's one connection after the script, so it sees it run)...
        assert_eq!(queue(&limiter, "k").await, Duration::from_secs(20));
        // ... and given back by the decision finishing on its own.
        until(&limiter, Duration::from_secs(10)).await;
    }

    /// The TAT (µs) a bucket's key holds in Redis, `None` without the key.
    async fn tat(raw: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<i64> {
        use redis::AsyncCommands;
        let bytes: Option<Vec<u8>> = raw.get(key).await.unwrap();
        bytes.map(|bytes| i64::from_le_bytes(bytes.as_slice().try_into().unwrap()))
    }

    /// Polls Redis until `key`'s TAT is `wanted` (µs).
    async fn until_tat(raw: &mut redis::aio::MultiplexedConnection, key: &str, wanted: i64) {
        let wait = async {
            while tat(raw, key).await != Some(wanted) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("{key} never held the TAT {wanted}"));
    }

    /// The layer's path through a Redis shaper on a client clock that stands still
    /// ("1/10s burst 5"): each admission names the end of its slot, and a refund gives the slot
    /// back only while it still ends the key's queue in Redis (`gcra_refund.lua` compares).
    ///
    /// Refunds wait in the limiter's queue (`RateLimiter::refund` is called from a destructor),
    /// sent one after the other, so once a later refund on a marker key is seen in Redis, the
    /// earlier one has run too.
    #[tokio::test]
    async fn a_slot_in_the_middle_of_the_fleets_queue_passes_unused() {
        use tollgate::middleware::{Origin, RateLimiter};
        let server = shared_database();
        let now = Timestamp::from_secs(1_800_000_000);
        let limiter = super::client_time_limiter(
            &server,
            LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
            &ManualClock::starting_at(now),
            "p:",
        )
        .await;
        let mut raw = super::raw_connection(&server).await;
        let (key, marker) = ("k".to_owned(), "m".to_owned());
        let (redis_key, marker_key) = (limiter.redis_key(&key), limiter.redis_key(&marker));
        let micros = |secs: u64| (now.as_nanos() / 1_000 + secs * 1_000_000) as i64;
        let decide = |key: &String| {
            let key = key.clone();
            let limiter = &limiter;
            async move {
                RateLimiter::<String>::decide_within(limiter, &key, 1, None)
                    .await
                    .unwrap()
            }
        };
        // The refund script is loaded first, so that each refund below is one round trip.
        assert!(!limiter.refund_n("warm-up", 1).await.unwrap());

        // A at once; B, C, D given 10, 20, 30 s; each names its slot's end.
        let mut slots = Vec::new();
        for secs in 0..4 {
            let (decision, origin) = decide(&key).await;
            assert_eq!(decision.delay(), Duration::from_secs(10 * secs));
            let end = Timestamp::from_secs(1_800_000_000 + 10 * (secs + 1));
            assert_eq!(origin, Origin::Slot { end });
            slots.push(origin);
        }
        assert_eq!(tat(&mut raw, &redis_key).await, Some(micros(40)));
        // The marker key: one slot at once, one waiting, given back at the end.
        let _ = decide(&marker).await;
        let (_, marker_slot) = decide(&marker).await;

        // B hangs up: its end (20 s) no longer matches the TAT (40 s), nothing moves.
        RateLimiter::<String>::refund(&limiter, key.clone(), 1, slots[1]);
        RateLimiter::<String>::refund(&limiter, marker.clone(), 1, marker_slot);
        until_tat(&mut raw, &marker_key, micros(10)).await;
        assert_eq!(tat(&mut raw, &redis_key).await, Some(micros(40)));
        // E is given 40 s, after D.
        let (e, e_slot) = decide(&key).await;
        assert_eq!(e.delay(), Duration::from_secs(40));

        // E, the last, hangs up: its slot goes back exactly, and F is given it.
        RateLimiter::<String>::refund(&limiter, key.clone(), 1, e_slot);
        until_tat(&mut raw, &redis_key, micros(40)).await;
        let (f, _) = decide(&key).await;
        assert_eq!(f.delay(), Duration::from_secs(40));
    }

    /// The client time the shapers of the refund-chain tests stand at.
    const FROZEN: u64 = 1_800_000_000;

    /// A TAT `secs` after [`FROZEN`], in the scripts' microseconds.
    fn frozen_micros(secs: u64) -> i64 {
        ((FROZEN + secs) * 1_000_000) as i64
    }

    /// A Redis shaper of one slot every 10 s, 5 at once, on a client clock frozen at
    /// [`FROZEN`]: a key's TAT only moves when the layer decides or refunds.
    async fn frozen_shaper(server: &impl RedisUrl) -> RedisLimiter {
        super::client_time_limiter(
            server,
            LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
            &ManualClock::starting_at(Timestamp::from_secs(FROZEN)),
            "p:",
        )
        .await
    }

    /// The layer's decision for `key`: the slot it was given.
    async fn slot(limiter: &RedisLimiter, key: &str) -> tollgate::middleware::Origin {
        let (decision, origin) =
            tollgate::middleware::RateLimiter::<String>::decide_within(limiter, &key.to_owned(), 1, None)
                .await
                .unwrap();
        assert!(decision.is_allowed(), "{key}: {decision:?}");
        origin
    }

    /// The layer giving `slot` of `key` back, as a response future dropped while it waits.
    fn give_back(limiter: &RedisLimiter, key: &str, slot: tollgate::middleware::Origin) {
        tollgate::middleware::RateLimiter::<String>::refund(limiter, key.to_owned(), 1, slot);
    }

    /// `slot` of `key` given back from a current-thread runtime of its own, which is dropped
    /// as soon as the call returns, before running anything, or kept (not run) and returned.
    fn give_back_from_a_side_runtime(
        limiter: &Arc<RedisLimiter>,
        key: &str,
        slot: tollgate::middleware::Origin,
        keep: bool,
    ) -> Option<tokio::runtime::Runtime> {
        let (limiter, key) = (Arc::clone(limiter), key.to_owned());
        std::thread::spawn(move || {
            let side = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            side.block_on(async { give_back(&limiter, &key, slot) });
            keep.then_some(side)
        })
        .join()
        .unwrap()
    }

    /// Clients D, C and B leaving in that order give back all three slots, on a multi-threaded
    /// runtime too: each refund of a key reaches Redis after those given back before it. With a
    /// task per refund, C's refund could run before D's, find the queue ending at D's slot and
    /// give nothing back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn slots_given_back_from_the_end_of_the_queue_all_come_back() {
        let server = shared_database();
        let limiter = frozen_shaper(&server).await;
        let mut raw = super::raw_connection(&server).await;
        for round in 0..50 {
            let key = format!("k{round}");
            let mut slots = Vec::new();
            for _ in 0..4 {
                slots.push(slot(&limiter, &key).await);
            }
            // A proceeds at once; B, C and D wait for 10, 20 and 30 s, and leave: D, C, B.
            for slot in slots[1..].iter().rev() {
                give_back(&limiter, &key, *slot);
            }
            until_tat(&mut raw, &limiter.redis_key(&key), frozen_micros(10)).await;
        }
    }

    /// The `EVALSHA` calls Redis has run so far (`INFO commandstats`).
    async fn evalsha_calls(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(raw)
            .await
            .unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |calls| calls.parse().unwrap())
    }

    /// A key's refund does not wait behind other keys' refunds: given back after 20,000 refunds
    /// of another key (sent one after the other, one round trip each), key `x`'s slot is back in
    /// Redis before they are done. With one queue for every key, the refund would wait behind the
    /// others while a new request took the slot after the abandoned one, which would then give
    /// nothing back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_keys_refund_does_not_wait_for_other_keys_refunds() {
        const BACKLOG: u64 = 20_000;
        let server = RedisServer::start();
        let limiter = frozen_shaper(&server).await;
        let mut raw = super::raw_connection(&server).await;
        assert!(!limiter.refund_n("warm-up", 1).await.unwrap());
        let other = slot(&limiter, "other").await;
        let (_a, b) = (slot(&limiter, "x").await, slot(&limiter, "x").await);
        let before = evalsha_calls(&mut raw).await;
        for _ in 0..BACKLOG {
            give_back(&limiter, "other", other);
        }
        // B, waiting behind A, leaves: the queue ends at A's slot again.
        give_back(&limiter, "x", b);
        until_tat(&mut raw, &limiter.redis_key("x"), frozen_micros(10)).await;
        let sent = evalsha_calls(&mut raw).await - before;
        assert!(sent < BACKLOG, "x's refund waited for {sent} calls");
    }

    /// A key's refunds run on a runtime that is running: one given back from a runtime that is
    /// then kept but no longer run (a side runtime's `block_on` that returned) does not hold up
    /// another key's refund from the main runtime (with one task per limiter, started by the
    /// first refund, every later refund would wait for that runtime).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refund_runs_on_a_runtime_that_runs() {
        let server = shared_database();
        let limiter = Arc::new(frozen_shaper(&server).await);
        let mut raw = super::raw_connection(&server).await;
        let other = slot(&limiter, "other").await;
        let side = give_back_from_a_side_runtime(&limiter, "other", other, true);
        let (_a, b) = (slot(&limiter, "x").await, slot(&limiter, "x").await);
        give_back(&limiter, "x", b);
        until_tat(&mut raw, &limiter.redis_key("x"), frozen_micros(10)).await;
        // A runtime is dropped outside another's context.
        std::thread::spawn(move || drop(side)).join().unwrap();
    }

    /// A refund whose runtime shut down before it ran is lost, but does not hold up its key: the
    /// next refund of the key, from a runtime that runs, reaches Redis.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refund_lost_with_its_runtime_does_not_hold_up_its_key() {
        let server = shared_database();
        let limiter = Arc::new(frozen_shaper(&server).await);
        let mut raw = super::raw_connection(&server).await;
        let (_a, b) = (slot(&limiter, "x").await, slot(&limiter, "x").await);
        // B's refund is handed to a runtime that shuts down before running it.
        give_back_from_a_side_runtime(&limiter, "x", b, false);
        assert_eq!(
            tat(&mut raw, &limiter.redis_key("x")).await,
            Some(frozen_micros(20))
        );
        // Given back again from this runtime, it reaches Redis.
        give_back(&limiter, "x", b);
        until_tat(&mut raw, &limiter.redis_key("x"), frozen_micros(10)).await;
    }

    /// Eight threads, each on a runtime of its own (half multi-threaded, half current-thread, all
    /// kept running), give back units of three keys, with pauses of about a round trip so that
    /// the keys' chains end and start again under the pushes: every refund reaches Redis (each
    /// drained bucket is exactly full again), round after round on the same keys (a chain that
    /// kept its key after ending would hold up the next round's refunds). The pauses land refunds
    /// between a chain's last pop and its removal, where a refund pushed onto a chain that is
    /// ending must still run.
    #[test]
    fn refunds_of_few_keys_from_many_runtimes_all_arrive() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        use tollgate::middleware::{Origin, RateLimiter};
        use tollgate::TokenBucket;
        const KEYS: usize = 3;
        const THREADS: usize = 8;
        const EACH: u64 = 150;
        let total = THREADS as u64 * EACH;
        let server = shared_database();
        let setup = tokio::runtime::Runtime::new().unwrap();
        // An hour per unit: a lost refund leaves the key an hour from full, which its expiry (on
        // the server's real clock, while the client's clock stands still) does not hide.
        let bucket = TokenBucket::new(format!("1/h burst {total}").parse().unwrap()).unwrap();
        let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
        let limiter = Arc::new(setup.block_on(super::client_time_limiter(&server, bucket, &clock, "p:")));
        let keys: Vec<String> = (0..KEYS).map(|key| format!("k{key}")).collect();
        for round in 0..3 {
            setup.block_on(async {
                for key in &keys {
                    assert!(limiter.check_n(key, total).await.unwrap().decision.is_allowed());
                }
            });
            let done = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let (limiter, keys, done) = (Arc::clone(&limiter), keys.clone(), Arc::clone(&done));
                    std::thread::spawn(move || {
                        let runtime = match thread % 2 {
                            0 => tokio::runtime::Runtime::new().unwrap(),
                            _ => tokio::runtime::Builder::new_current_thread()
                                .enable_all()
                                .build()
                                .unwrap(),
                        };
                        runtime.block_on(async {
                            let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (thread * 7_919 + round) as u64;
                            for i in 0..EACH as usize * KEYS {
                                seed ^= seed << 13;
                                seed ^= seed >> 7;
                                seed ^= seed << 17;
                                let key = keys[(i + thread) % KEYS].clone();
                                RateLimiter::<String>::refund(&*limiter, key, 1, Origin::Limiter);
                                match seed % 3 {
                                    0 => tokio::time::sleep(Duration::from_micros(seed % 1_000)).await,
                                    1 => tokio::task::yield_now().await,
                                    _ => std::thread::sleep(Duration::from_micros(seed % 500)),
                                }
                            }
                            // Every runtime runs until every thread has pushed and the buckets
                            // are full: a chain may run on any of them.
                            done.fetch_add(1, Ordering::SeqCst);
                            let full = |key: String| {
                                let limiter = Arc::clone(&limiter);
                                async move { limiter.peek_n(&key, total).await.unwrap().decision.is_allowed() }
                            };
                            let deadline = std::time::Instant::now() + Duration::from_secs(20);
                            loop {
                                let mut all = done.load(Ordering::SeqCst) == THREADS;
                                for key in &keys {
                                    all = all && full(key.clone()).await;
                                }
                                if all || std::time::Instant::now() > deadline {
                                    break;
                                }
                                tokio::time::sleep(Duration::from_millis(5)).await;
                            }
                        });
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            setup.block_on(async {
                for key in &keys {
                    let full = limiter.peek_n(key, total).await.unwrap().decision;
                    assert!(full.is_allowed(), "round {round}, {key}: refunds lost: {full:?}");
                }
            });
        }
    }

    /// On the server's clock, the script's reply names the slot's end too: the last slot given
    /// back moves the TAT back exactly one interval.
    #[tokio::test]
    async fn on_the_servers_clock_the_last_slot_goes_back() {
        use tollgate::middleware::{Origin, RateLimiter};
        let server = shared_database();
        let limiter = RedisLimiter::builder(
            server.url(),
            LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
            FailurePolicy::FailClosed {
                retry_after: Duration::from_secs(1),
            },
        )
        .deadline(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
        let mut raw = super::raw_connection(&server).await;
        let key = "k".to_owned();
        let redis_key = limiter.redis_key(&key);
        let _ = RateLimiter::<String>::decide_within(&limiter, &key, 1, None)
            .await
            .unwrap();
        let (waiting, origin) = RateLimiter::<String>::decide_within(&limiter, &key, 1, None)
            .await
            .unwrap();
        assert!(waiting.delay() > Duration::from_secs(9), "{waiting:?}");
        let Origin::Slot { end } = origin else {
            panic!("a shaped admission by Redis names its slot: {origin:?}")
        };
        let end = i64::try_from(end.as_nanos() / 1_000).unwrap();
        assert_eq!(tat(&mut raw, &redis_key).await, Some(end));
        RateLimiter::<String>::refund(&limiter, key.clone(), 1, origin);
        until_tat(&mut raw, &redis_key, end - 10_000_000).await;
    }

    /// A wait above the maximum is refused by the script itself: nothing is written, so there
    /// is no slot to give back. Its refusal is told when the wait fits.
    #[tokio::test]
    async fn a_wait_above_the_maximum_is_refused_by_the_script() {
        use tollgate::middleware::{Origin, RateLimiter};
        let server = shared_database();
        let now = Timestamp::from_secs(1_800_000_000);
        let limiter = super::client_time_limiter(
            &server,
            LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
            &ManualClock::starting_at(now),
            "p:",
        )
        .await;
        let mut raw = super::raw_connection(&server).await;
        let key = "k".to_owned();
        let redis_key = limiter.redis_key(&key);
        let max = Some(Duration::from_secs(15));
        let decide = || RateLimiter::<String>::decide_within(&limiter, &key, 1, max);
        assert!(decide().await.unwrap().0.is_allowed());
        assert_eq!(decide().await.unwrap().0.delay(), Duration::from_secs(10));
        let before = tat(&mut raw, &redis_key).await;
        // 20 s: above 15 s.
        let (refused, origin) = decide().await.unwrap();
        assert!(!refused.is_allowed(), "{refused:?}");
        assert_eq!(refused.retry_after(), Duration::from_secs(5));
        assert_eq!(refused.remaining(), 0);
        assert_eq!(origin, Origin::Limiter);
        assert_eq!(tat(&mut raw, &redis_key).await, before, "nothing was written");
    }
}

/// The layer over a Redis shaper while Redis is away (`FailurePolicy::Fallback`): the local
/// share decides as the fleet would, and gives its slots back as Redis does, only while a slot
/// still ends the key's queue; a wait above the layer's maximum is refused by the share itself.
#[cfg(feature = "tower")]
mod fallback {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use http::{HeaderName, Request, Response, StatusCode};
    use tollgate::distributed::{DecidedBy, Failure, FailurePolicy, LocalFallback, RedisLimiter};
    use tollgate::middleware::{HeaderKey, RateLimit, RateLimitLayer};
    use tollgate::{CostTooLarge, Decision, KeyedLimiter, LeakyBucket, ManualClock, Timestamp};
    use tower::{Layer, Service};

    use crate::middleware_common::Hello;
    use crate::redis_common::RedisServer;

    type Shaper = KeyedLimiter<str, LeakyBucket, ManualClock>;

    /// The instance's share ("1/10s burst 5" on a clock that stands still: a slot every 10 s,
    /// one at once and up to 4 waiting), counting the refunds the layer hands it.
    struct Share {
        limiter: Shaper,
        /// `refund_n` calls: unconditional refunds.
        refunds: AtomicUsize,
        /// `refund_slot` calls that gave the slot back, and that kept it.
        slots_back: AtomicUsize,
        slots_kept: AtomicUsize,
    }

    impl Share {
        fn new() -> Share {
            Share {
                limiter: KeyedLimiter::with_clock(
                    LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
                    100,
                    ManualClock::starting_at(Timestamp::from_secs(1_800_000_000)),
                )
                .unwrap(),
                refunds: AtomicUsize::new(0),
                slots_back: AtomicUsize::new(0),
                slots_kept: AtomicUsize::new(0),
            }
        }

        /// How long until `k`'s queue is empty: the end of its last slot (its TAT), from the
        /// share's clock (a weightless peek's reset-after, which a full queue reports too).
        fn queue(&self) -> Duration {
            self.limiter.peek_n("k", 0).unwrap().reset_after()
        }

        // Relaxed: counts read on this test's one thread, after the calls that made them.
        fn counts(&self) -> [usize; 3] {
            [&self.refunds, &self.slots_back, &self.slots_kept].map(|count| count.load(Ordering::Relaxed))
        }
    }

    /// Hands every call on to the share's limiter; counts the refunds.
    impl LocalFallback for Share {
        fn check_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
            LocalFallback::check_n(&self.limiter, key, cost)
        }

        fn peek_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
            LocalFallback::peek_n(&self.limiter, key, cost)
        }

        fn check_slot(
            &self,
            key: &str,
            cost: u64,
            max_delay: Option<Duration>,
        ) -> Result<(Decision, Option<Timestamp>), CostTooLarge> {
            LocalFallback::check_slot(&self.limiter, key, cost, max_delay)
        }

        fn refund_n(&self, key: &str, cost: u64) -> bool {
            self.refunds.fetch_add(1, Ordering::Relaxed);
            LocalFallback::refund_n(&self.limiter, key, cost)
        }

        fn refund_slot(&self, key: &str, cost: u64, end: Timestamp) -> bool {
            let gave_back = LocalFallback::refund_slot(&self.limiter, key, cost, end);
            let count = if gave_back {
                &self.slots_back
            } else {
                &self.slots_kept
            };
            count.fetch_add(1, Ordering::Relaxed);
            gave_back
        }
    }

    type Gateway = RateLimit<Hello, Arc<RedisLimiter>, HeaderKey>;

    /// A layer (longest wait `max_delay`) over a Redis shaper of the same quota as `share`,
    /// whose server is killed: once a decision has found Redis gone, the next ones do not ask it
    /// for an hour (the breaker is open) and the share answers at once, without I/O. Then
    /// tokio's clock is paused: it moves only to the next timer when every task waits, so each
    /// request is answered exactly at the timer the layer set for its slot.
    async fn gateway_without_redis(share: &Arc<Share>, max_delay: Option<Duration>) -> Gateway {
        let mut server = RedisServer::start();
        let limiter = RedisLimiter::builder(
            server.url(),
            LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
            FailurePolicy::Fallback(Arc::clone(share) as _),
        )
        .deadline(Duration::from_secs(2))
        .probe_interval(Duration::from_secs(3600))
        .connect()
        .await
        .unwrap();
        server.kill();
        let found_gone = limiter.check("warm-up").await.unwrap();
        assert_eq!(found_gone.decided_by, DecidedBy::Fallback);
        let not_asked = limiter.check("warm-up").await.unwrap();
        assert_eq!(not_asked.failure, Some(Failure::RecentlyDown));
        tokio::time::pause();
        let mut layer = RateLimitLayer::builder(
            Arc::new(limiter),
            HeaderKey::new(HeaderName::from_static("x-api-key")),
        );
        if let Some(max) = max_delay {
            layer = layer.max_delay(max);
        }
        layer.build().layer(Hello)
    }

    type Answered = tokio::task::JoinHandle<(StatusCode, Duration)>;

    /// A client: a request for `k` on a task of its own, saying its status and when, after
    /// `since` on tokio's clock, it was answered. Returns once the share has decided it (the
    /// queue is then `queued` long), so that requests are decided in the order they are sent;
    /// aborting the task is the client hanging up.
    async fn send(
        gateway: &Gateway,
        share: &Share,
        queued: Duration,
        since: tokio::time::Instant,
    ) -> Answered {
        let mut service = gateway.clone();
        let client = tokio::spawn(async move {
            std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx))
                .await
                .unwrap();
            let request = Request::get("/").header("x-api-key", "k").body(()).unwrap();
            let answer: Response<_> = service.call(request).await.unwrap();
            (answer.status(), since.elapsed())
        });
        // Yields (tokio's clock does not move while a task is ready): the decision is the
        // client's first poll, and answers without I/O.
        for _ in 0..1_000 {
            if share.queue() == queued {
                return client;
            }
            tokio::task::yield_now().await;
        }
        panic!("the share never queued {queued:?}: {:?}", share.queue());
    }

    /// The client hangs up: its task is dropped, and with it the request's slot (the layer's
    /// refund runs in the drop).
    async fn hang_up(client: Answered) {
        client.abort();
        assert!(client.await.unwrap_err().is_cancelled());
    }

    async fn answered(client: Answered) -> Duration {
        let (status, at) = client.await.unwrap();
        assert_eq!(status, StatusCode::OK);
        at
    }

    /// Each waiting client was answered at its slot, `at[i]` for `slots[i]`, up to tokio's
    /// timer resolution: its clock was paused between two of its milliseconds, so every timer
    /// fires late by the same amount, under a millisecond (0 on the boundary).
    fn assert_answered_at(at: &[Duration], slots: &[Duration]) {
        let late: Vec<_> = at
            .iter()
            .zip(slots)
            .map(|(at, slot)| at.checked_sub(*slot))
            .collect();
        let same = late.iter().all(|each| *each == late[0]);
        assert!(
            same && late[0].is_some_and(|late| late <= Duration::from_millis(1)),
            "answered at {at:?} for the slots {slots:?}"
        );
    }

    fn secs(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    /// B, in the middle of the queue, hangs up: its slot passes unused, and E is answered after
    /// D, not with it (the unconditional refund gave E the 30 s of D).
    #[tokio::test]
    async fn a_slot_the_fallback_gave_in_the_middle_of_its_queue_passes_unused() {
        let share = Arc::new(Share::new());
        let gateway = gateway_without_redis(&share, None).await;
        let since = tokio::time::Instant::now();
        let a = send(&gateway, &share, secs(10), since).await;
        let b = send(&gateway, &share, secs(20), since).await;
        let c = send(&gateway, &share, secs(30), since).await;
        let d = send(&gateway, &share, secs(40), since).await;
        hang_up(b).await;
        assert_eq!(share.queue(), secs(40), "B's slot is not the end of the queue");
        assert_eq!(share.counts(), [0, 0, 1], "refund_n, refund_slot gave back, kept");
        let e = send(&gateway, &share, secs(50), since).await;
        assert_eq!(answered(a).await, secs(0));
        let mut at = Vec::new();
        for client in [c, d, e] {
            at.push(answered(client).await);
        }
        assert_answered_at(&at, &[secs(20), secs(30), secs(40)]);
    }

    /// D, the last, hangs up: E is given its slot exactly (the end the share named is the TAT
    /// it stored); then E and C, each the end of the queue in its turn, give theirs back too.
    #[tokio::test]
    async fn the_last_slot_the_fallback_gave_goes_to_the_next_request() {
        let share = Arc::new(Share::new());
        let gateway = gateway_without_redis(&share, None).await;
        let since = tokio::time::Instant::now();
        let a = send(&gateway, &share, secs(10), since).await;
        let b = send(&gateway, &share, secs(20), since).await;
        let c = send(&gateway, &share, secs(30), since).await;
        let d = send(&gateway, &share, secs(40), since).await;
        hang_up(d).await;
        assert_eq!(share.queue(), secs(30));
        let e = send(&gateway, &share, secs(40), since).await;
        hang_up(e).await;
        hang_up(c).await;
        assert_eq!(share.queue(), secs(20));
        assert_eq!(share.counts(), [0, 3, 0], "refund_n, refund_slot gave back, kept");
        let f = send(&gateway, &share, secs(30), since).await;
        assert_eq!(answered(a).await, secs(0));
        let at = [answered(b).await, answered(f).await];
        assert_answered_at(&at, &[secs(10), secs(20)]);
    }

    /// A wait above the layer's maximum (15 s) is refused by the share itself, in the decision:
    /// nothing is counted, so nothing is refunded. The refusal says when the wait fits.
    #[tokio::test]
    async fn a_wait_above_the_maximum_is_refused_by_the_fallback() {
        let share = Arc::new(Share::new());
        let gateway = gateway_without_redis(&share, Some(secs(15))).await;
        let since = tokio::time::Instant::now();
        let a = send(&gateway, &share, secs(10), since).await;
        let b = send(&gateway, &share, secs(20), since).await;
        // 20 s: above 15 s. The queue stays 20 s long whoever refuses (the layer gives back
        // what the share admitted), so the count of refunds tells them apart.
        let mut service = gateway.clone();
        std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx))
            .await
            .unwrap();
        let request = Request::get("/").header("x-api-key", "k").body(()).unwrap();
        let refused = service.call(request).await.unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["retry-after"], "5");
        assert_eq!(share.queue(), secs(20));
        assert_eq!(share.counts(), [0, 0, 0], "no refund: nothing was counted");
        assert_eq!(answered(a).await, secs(0));
        assert_answered_at(&[answered(b).await], &[secs(10)]);
    }
}
