//! The tower layer over a shaper at a rate whole nanoseconds cannot hold (`4294967295/s`, kept
//! exactly in 128 bits), served without TCP on tokio's paused clock: a request waits at least
//! its slot (rounded up to whole nanoseconds, never early), a wait past `max_delay` is refused
//! with nothing counted, and a client that leaves before its slot gives nothing back (its slot
//! passes unused), as the wide shaper documents.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tollgate::algorithm::Algorithm;
use tollgate::middleware::RateLimitLayer;
use tollgate::{KeyedLimiter, LeakyBucket, ManualClock};
use tower::Layer;

use crate::middleware_common::{api_key, clock, Hello};
use crate::shaping::hold;

type Error = Box<dyn std::error::Error>;

/// About 100 ms of slots at `4294967295/s`.
const TENTH: u64 = 429_496_730;

/// `k` slots of `1 / 4294967295` s, rounded up to whole nanoseconds.
fn slots_up(k: u64) -> Duration {
    let nanos = (u128::from(k) * 1_000_000_000).div_ceil(u128::from(u32::MAX));
    Duration::from_nanos(u64::try_from(nanos).expect("within a second"))
}

/// A keyed shaper of `4294967295/s` whose clock stands still, its queue up to a second long.
fn wide_shaper() -> Result<Arc<KeyedLimiter<String, LeakyBucket, ManualClock>>, Error> {
    let shaper = LeakyBucket::new("4294967295/s burst 4294967295".parse()?)?;
    assert!(shaper.is_wide());
    Ok(Arc::new(KeyedLimiter::with_clock(shaper, 100, clock())?))
}

#[tokio::test(start_paused = true)]
async fn a_wide_shaper_waits_at_least_its_slot_and_refuses_past_the_maximum() -> Result<(), Error> {
    let limiter = wide_shaper()?;
    let key = "k".to_owned();
    let layer = RateLimitLayer::builder(Arc::clone(&limiter), api_key())
        .max_delay(Duration::from_millis(150))
        .build();
    let mut service = layer.layer(Hello);
    // About 100 ms of queue ahead of the request, taken outside the layer.
    assert!(limiter.check_n(&key, TENTH)?.is_allowed());
    let slot = slots_up(TENTH);
    assert_eq!(limiter.peek(&key).delay(), slot);
    let since = tokio::time::Instant::now();
    let answered = hold(&mut service).await.await.expect("answered");
    assert_eq!(answered.status(), StatusCode::OK);
    // Tokio's timers count whole milliseconds: the wait is the slot, rounded up to one.
    let waited = since.elapsed();
    assert!(
        waited >= slot && waited < slot + Duration::from_millis(2),
        "waited {waited:?} for a slot {slot:?} away"
    );
    // Another 100 ms of queue: the next request would wait about 200 ms, past the maximum.
    assert!(limiter.check_n(&key, TENTH)?.is_allowed());
    let before = limiter.peek(&key);
    assert_eq!(before.delay(), slots_up(2 * TENTH + 1));
    let refused = hold(&mut service).await.await.expect("answered");
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limiter.peek(&key), before, "a refusal counts nothing");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_client_leaving_a_wide_shaper_gives_nothing_back() -> Result<(), Error> {
    let limiter = wide_shaper()?;
    let key = "k".to_owned();
    let mut service = RateLimitLayer::new(Arc::clone(&limiter), api_key()).layer(Hello);
    assert!(limiter.check_n(&key, TENTH)?.is_allowed());
    // The request at the end of the queue is given its slot, then its client hangs up.
    let held = hold(&mut service).await;
    assert_eq!(limiter.peek(&key).delay(), slots_up(TENTH + 1));
    drop(held);
    // Its slot is not given back: the next request still comes after it.
    assert_eq!(limiter.peek(&key).delay(), slots_up(TENTH + 1));
    Ok(())
}
