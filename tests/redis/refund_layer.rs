//! Refunds through Redis from the tower layer: a shaped request abandoned while it waits (or
//! before the fleet's answer) gives its slot back in Redis, only while the slot still ends the
//! key's queue there; refunds of a key reach Redis in order, never behind other keys' refunds,
//! from any runtime that runs.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Request, StatusCode};
use tollgate::distributed::{FailurePolicy, RedisLimiter};
use tollgate::middleware::{HeaderKey, RateLimitLayer};
use tollgate::{LeakyBucket, ManualClock, Timestamp};
use tower::{Layer, Service};

use crate::middleware_common::Hello;
use crate::redis_common::{client_time_limiter, raw_connection, shared_database, RedisServer, RedisUrl};

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
    let mut raw = raw_connection(&server).await;
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
    let limiter = client_time_limiter(
        &server,
        LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
        &ManualClock::starting_at(now),
        "p:",
    )
    .await;
    let mut raw = raw_connection(&server).await;
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
    client_time_limiter(
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
    let mut raw = raw_connection(&server).await;
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
    let mut raw = raw_connection(&server).await;
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
    let mut raw = raw_connection(&server).await;
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
    let mut raw = raw_connection(&server).await;
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
    let limiter = Arc::new(setup.block_on(client_time_limiter(&server, bucket, &clock, "p:")));
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
    let mut raw = raw_connection(&server).await;
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
    let limiter = client_time_limiter(
        &server,
        LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
        &ManualClock::starting_at(now),
        "p:",
    )
    .await;
    let mut raw = raw_connection(&server).await;
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
