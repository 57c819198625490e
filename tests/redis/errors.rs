//! Every configuration the distributed limiter refuses is a typed error at construction, and
//! the decision path's own errors are typed too. No server is needed: the connection is lazy.

use std::future::Future;
use std::time::Duration;

use tollgate::distributed::{
    FailurePolicy, RedisAlgorithm, RedisCheckError, RedisConfigError, RedisLimiter, MAX_LOG_LIMIT,
};
use tollgate::{
    CostTooLarge, FixedWindow, LeakyBucket, ManualClock, Quota, SlidingLog, SlidingWindow, Timestamp,
    TokenBucket,
};

/// Nothing listens here (port 1 is never a Redis); connections are only tried on decisions.
const NOWHERE: &str = "redis://127.0.0.1:1/";

async fn build(algorithm: impl Into<RedisAlgorithm>) -> Result<RedisLimiter, RedisConfigError> {
    RedisLimiter::builder(NOWHERE, algorithm, FailurePolicy::FailOpen)
        .connect()
        .await
}

fn days(count: u64, days: u64) -> Quota {
    Quota::new(count, Duration::from_secs(days * 86_400)).unwrap()
}

#[tokio::test]
async fn gcra_products_past_exact_integers_are_refused_with_the_largest_burst() {
    // T = 1 day = 86_400_000_000 µs; burst * T must stay at most 2^51 µs.
    let max_burst = (1u64 << 51) / 86_400_000_000;
    let fits = TokenBucket::new(days(1, 1).with_burst(max_burst).unwrap()).unwrap();
    assert!(build(fits).await.is_ok());
    let too_large = TokenBucket::new(days(1, 1).with_burst(max_burst + 1).unwrap()).unwrap();
    match build(too_large).await {
        Err(RedisConfigError::BeyondExactIntegers {
            algorithm,
            value,
            max,
            ..
        }) => {
            assert_eq!(
                (algorithm, value, max),
                ("token bucket", max_burst + 1, max_burst)
            );
        }
        other => panic!("{other:?}"),
    }
    let shaper = LeakyBucket::new(days(1, 1).with_burst(max_burst + 1).unwrap()).unwrap();
    assert!(matches!(
        build(shaper).await,
        Err(RedisConfigError::BeyondExactIntegers { algorithm: "leaky bucket", max, .. }) if max == max_burst
    ));
}

/// `limit * w` past 2^51 µs no longer refuses a sliding window (it once did, past 26,062 per
/// day): the script multiplies such products in two exact limbs, so every limit a sliding window
/// takes (`u32::MAX`) builds, for a window as long as a script holds (2^51 µs).
#[tokio::test]
async fn sliding_window_products_past_exact_integers_are_multiplied_exactly() {
    // 25,000 days (68 years) is below 2^51 µs (about 71 years).
    for window in [days(u64::from(u32::MAX), 1), days(u64::from(u32::MAX), 25_000)] {
        assert!(
            build(SlidingWindow::new(window).unwrap()).await.is_ok(),
            "{window:?}"
        );
    }
}

#[tokio::test]
async fn windows_past_exact_integers_are_refused() {
    // 2^51 µs is about 71 years; a 100-year window is past it.
    let century = days(1, 36_525);
    let error = build(FixedWindow::new(century).unwrap()).await.unwrap_err();
    assert!(
        matches!(error, RedisConfigError::BeyondExactIntegers { algorithm: "fixed window counter", max, .. }
            if max == 1 << 51),
        "{error:?}"
    );
    assert!(matches!(
        build(SlidingLog::new(century).unwrap()).await,
        Err(RedisConfigError::BeyondExactIntegers {
            algorithm: "sliding window log",
            ..
        })
    ));
}

#[tokio::test]
async fn windows_must_be_whole_microseconds() {
    let quota = Quota::new(5, Duration::from_nanos(1_500_500)).unwrap();
    for algorithm in [
        RedisAlgorithm::from(FixedWindow::new(quota).unwrap()),
        SlidingWindow::new(quota).unwrap().into(),
        SlidingLog::new(quota).unwrap().into(),
    ] {
        assert!(
            matches!(build(algorithm).await, Err(RedisConfigError::NotWholeMicros { window, .. })
                if window == Duration::from_nanos(1_500_500)),
            "{}",
            algorithm.name()
        );
    }
    // The buckets round their interval up to whole microseconds instead (never admitting more).
    assert!(build(TokenBucket::new(quota).unwrap()).await.is_ok());
}

/// The scripts keep a bucket's interval as whole microseconds and a remainder in `1/d` µs
/// (`d` the interval's denominator in lowest terms): every rate whose `d` is at most 2^43 is
/// accepted (every count up to `u32::MAX`, whatever the period). A finer denominator (a count
/// of about 9e12 per 1,000 days, coprime to the period) is refused with the largest one.
#[tokio::test]
async fn a_bucket_rate_is_accepted_unless_its_denominator_passes_exact_integers() {
    for quota in [
        "300000/s",
        "30000/s",
        "70000/s",
        "7/ms",
        "2/99us",
        "3/s",
        "1/49499ns",
    ] {
        let quota: Quota = quota.parse().unwrap();
        assert!(build(TokenBucket::new(quota).unwrap()).await.is_ok(), "{quota:?}");
        assert!(build(LeakyBucket::new(quota).unwrap()).await.is_ok(), "{quota:?}");
    }
    let coprime = Quota::new(9_000_000_000_001, Duration::from_secs(1_000 * 86_400)).unwrap();
    for algorithm in [
        RedisAlgorithm::from(TokenBucket::new(coprime).unwrap()),
        LeakyBucket::new(coprime).unwrap().into(),
    ] {
        match build(algorithm).await {
            Err(error @ RedisConfigError::BeyondExactIntegers { value, max, .. }) => {
                assert_eq!((value, max), (9_000_000_000_001, 1 << 43));
                assert!(error.to_string().contains("count in larger units"), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_log_too_large_for_one_key_is_refused_with_the_maximum() {
    assert!(
        build(SlidingLog::new(Quota::per_minute(MAX_LOG_LIMIT).unwrap()).unwrap())
            .await
            .is_ok()
    );
    let log = SlidingLog::new(Quota::per_minute(MAX_LOG_LIMIT + 1).unwrap()).unwrap();
    match build(log).await {
        Err(RedisConfigError::LogTooLarge { limit, max }) => {
            assert_eq!((limit, max), (MAX_LOG_LIMIT + 1, MAX_LOG_LIMIT))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bad_urls_prefixes_and_deadlines_are_refused() {
    let bucket = TokenBucket::new(Quota::per_second(10).unwrap()).unwrap();
    let bad_url = RedisLimiter::builder("http://not-redis", bucket, FailurePolicy::FailOpen)
        .connect()
        .await;
    match bad_url {
        Err(error @ RedisConfigError::InvalidUrl { .. }) => {
            let message = error.to_string();
            assert!(message.contains("expected `redis://"), "{message}");
            assert!(
                !message.contains("not-redis"),
                "the URL may hold a password: {message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let brace = RedisLimiter::builder(NOWHERE, bucket, FailurePolicy::FailOpen)
        .prefix("a{b")
        .connect()
        .await;
    assert!(matches!(brace, Err(RedisConfigError::BraceInPrefix { prefix }) if prefix == "a{b"));
    let zero = RedisLimiter::builder(NOWHERE, bucket, FailurePolicy::FailOpen)
        .deadline(Duration::ZERO)
        .connect()
        .await;
    assert!(matches!(zero, Err(RedisConfigError::ZeroDeadline)));
}

#[tokio::test]
async fn decision_errors_are_typed_and_need_no_server() {
    let bucket = TokenBucket::new("10/s burst 4".parse().unwrap()).unwrap();
    let limiter = build(bucket).await.unwrap();
    assert_eq!(limiter.capacity(), 4);
    assert_eq!(
        limiter.check_n("k", 5).await,
        Err(RedisCheckError::CostTooLarge(CostTooLarge {
            cost: 5,
            capacity: 4
        }))
    );
    assert_eq!(
        limiter.peek_n("k", u64::MAX).await,
        Err(RedisCheckError::CostTooLarge(CostTooLarge {
            cost: u64::MAX,
            capacity: 4
        }))
    );
    // A client time past 2^52 µs (the year 2112) is refused rather than rounded in Lua.
    let late = Timestamp::from_nanos((1u64 << 52) * 1_000);
    let limiter = RedisLimiter::builder(NOWHERE, bucket, FailurePolicy::FailOpen)
        .client_time(ManualClock::starting_at(late))
        .connect()
        .await
        .unwrap();
    assert_eq!(
        limiter.check("k").await,
        Err(RedisCheckError::TimeOutOfRange { now: late })
    );
    let limiter = RedisLimiter::builder(NOWHERE, bucket, FailurePolicy::FailOpen)
        .client_time(ManualClock::starting_at(Timestamp::MAX))
        .connect()
        .await
        .unwrap();
    assert!(matches!(
        limiter.check("k").await,
        Err(RedisCheckError::TimeOutOfRange { .. })
    ));
}

/// Every decision waits for Redis under a tokio timer: a runtime without one (or no runtime at
/// all) is refused when the limiter is built, instead of a panic at the first decision.
#[test]
fn a_runtime_without_timers_is_refused_at_construction() {
    let connect = || {
        RedisLimiter::builder(
            NOWHERE,
            TokenBucket::new("10/s burst 10".parse().unwrap()).unwrap(),
            FailurePolicy::FailOpen,
        )
        .connect()
    };
    let io_only = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let answer = io_only.block_on(connect());
    assert!(
        matches!(answer, Err(RedisConfigError::RuntimeWithoutTimers)),
        "{answer:?}"
    );
    // No runtime at all: polled once by hand (`connect` does not wait on anything).
    let mut outside = std::pin::pin!(connect());
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let answer = outside.as_mut().poll(&mut context);
    assert!(
        matches!(
            answer,
            std::task::Poll::Ready(Err(RedisConfigError::RuntimeWithoutTimers))
        ),
        "{answer:?}"
    );
    // With its timer, the same runtime builds it.
    let full = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert!(full.block_on(connect()).is_ok());
}

/// The connection, made at the first decision, needs tokio's IO driver: a runtime with timers
/// but no IO is refused when the limiter is built (it passed, and the first decision panicked).
#[test]
fn a_runtime_without_io_is_refused_at_construction() {
    let time_only = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let answer = time_only.block_on(
        RedisLimiter::builder(
            NOWHERE,
            TokenBucket::new("10/s burst 10".parse().unwrap()).unwrap(),
            FailurePolicy::FailOpen,
        )
        .connect(),
    );
    assert!(
        matches!(answer, Err(RedisConfigError::RuntimeWithoutIo)),
        "{answer:?}"
    );
}
