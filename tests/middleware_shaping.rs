//! Shaping through the layer with the leaky bucket, over real TCP: admitted requests wait for
//! their slots, a wait beyond the maximum is refused, a client that leaves gives its slot back.
#![cfg(feature = "tower")]

mod middleware_common;

use std::sync::Arc;
use std::time::Duration;

use http::{Request, StatusCode};
use middleware_common::{api_key, clock, get, http1_client, serve, Hello, Stamp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate::middleware::RateLimitLayer;
use tollgate::{KeyedLimiter, LeakyBucket, ManualClock};
use tower::{Layer, Service};

type Error = Box<dyn std::error::Error>;

// Tokio's clock is paused: it moves only to the next timer when every task waits, so the wait
// each request measures (from entering the server to reaching the application) is exactly the
// timer the layer set, whatever the machine's load. The delays themselves come from the
// limiter's manual clock, which stands still: every request is decided at the same instant.
#[tokio::test(start_paused = true)]
async fn shaped_requests_wait_for_their_slots() -> Result<(), Error> {
    // A slot every 100 ms; one proceeds at once and up to 3 wait.
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(LeakyBucket::new("10/s burst 4".parse()?)?, 100, clock())?;
    let address = serve(Stamp(RateLimitLayer::new(limiter, api_key()).layer(Hello)), true).await;
    let client = http1_client();

    let requests = (0..5).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { get(&client, address, "/", &[("x-api-key", "k")]).await })
    });
    let mut waits = Vec::new();
    let mut refused = Vec::new();
    for request in requests {
        let answer = request.await?;
        match answer.status {
            StatusCode::OK => waits.push(answer.header("x-waited-ns").parse::<u64>()?),
            _ => refused.push(answer),
        }
    }
    waits.sort_unstable();
    let slot = Duration::from_millis(100).as_nanos() as u64;
    assert_eq!(waits, [0, slot, 2 * slot, 3 * slot]);
    // The fifth finds the queue full: refused, told to come back when the first slot drains.
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused[0].header("retry-after"), "1");
    assert_eq!(refused[0].header("ratelimit-policy"), r#""default";q=10;w=1"#);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_maximum_is_refused_and_its_slot_given_back() -> Result<(), Error> {
    let clock = clock();
    let limiter = KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("10/s burst 5".parse()?)?,
        100,
        clock.clone(),
    )?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .max_delay(Duration::from_millis(150))
        .build();
    let address = serve(Stamp(layer.layer(Hello)), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];

    let first = get(&client, address, "/", &key).await;
    assert_eq!(
        (first.status, first.header("x-waited-ns")),
        (StatusCode::OK, "0".to_owned())
    );
    let second = get(&client, address, "/", &key).await;
    assert_eq!(
        (second.status, second.header("x-waited-ns")),
        (StatusCode::OK, "100000000".to_owned())
    );
    // The third would wait 200 ms: refused, to retry in 50 ms (1 s, rounded up).
    let third = get(&client, address, "/", &key).await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(third.header("retry-after"), "1");
    assert_eq!(third.header("ratelimit"), r#""default";r=0;t=1"#);
    // Its slot was given back: 50 ms later (on the limiter's clock) the next request is given
    // that slot, 150 ms away, within the maximum (without the refund it would be 250 ms away).
    clock.advance(Duration::from_millis(50));
    let fourth = get(&client, address, "/", &key).await;
    assert_eq!(
        (fourth.status, fourth.header("x-waited-ns")),
        (StatusCode::OK, "150000000".to_owned())
    );
    Ok(())
}

#[tokio::test]
async fn a_client_that_leaves_while_waiting_gives_its_slot_back() -> Result<(), Error> {
    // A slot every 10 s: a waiting request stays waiting for the whole test.
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("1/10s burst 3".parse()?)?,
        100,
        clock(),
    )?);
    let address = serve(
        RateLimitLayer::new(Arc::clone(&limiter), api_key()).layer(Hello),
        true,
    )
    .await;
    let key = "k".to_owned();
    let next_delay = |limiter: &KeyedLimiter<String, LeakyBucket, ManualClock>| limiter.peek(&key).delay();
    let until = |wanted: Duration| {
        let limiter = Arc::clone(&limiter);
        async move {
            // Polls the shared limiter until the server's side has happened (a bounded wait on
            // a condition, not a sleep standing in for one).
            while next_delay(&limiter) != wanted {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };

    assert_eq!(
        get(&http1_client(), address, "/", &[("x-api-key", "k")])
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(next_delay(&limiter), Duration::from_secs(10));

    // A client asks, is given the slot 10 s away, and hangs up while waiting for it.
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: test\r\nx-api-key: k\r\n\r\n")
        .await?;
    tokio::time::timeout(Duration::from_secs(30), until(Duration::from_secs(20))).await?;
    drop(stream);

    // The server notices, drops the waiting request, and the slot comes back.
    tokio::time::timeout(Duration::from_secs(30), until(Duration::from_secs(10))).await?;

    // A client that stays is answered after its slot (not 20 s: the freed slot is its own).
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: test\r\nx-api-key: k\r\n\r\n")
        .await?;
    tokio::time::timeout(Duration::from_secs(30), until(Duration::from_secs(20))).await?;
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut byte)).await;
    assert!(early.is_err(), "the request waits for its slot 10 s away");
    Ok(())
}

#[tokio::test]
async fn a_response_future_dropped_before_its_first_poll_gives_its_slot_back() -> Result<(), Error> {
    // A slot every 10 s, one at once and up to 3 waiting, on a clock that stands still: the
    // limiter's state only changes when the layer decides or refunds.
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("1/10s burst 4".parse()?)?,
        100,
        clock(),
    )?);
    let mut service = RateLimitLayer::new(Arc::clone(&limiter), api_key()).layer(Hello);
    let key = "k".to_owned();
    let next_delay = || limiter.peek(&key).delay();
    let request = || {
        Request::get("/")
            .header("x-api-key", "k")
            .body(())
            .expect("a valid request")
    };

    // The first request takes the free slot and is answered at once.
    std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
    let first = service.call(request()).await?;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(next_delay(), Duration::from_secs(10));

    // The second is given the slot 10 s away the moment it is called: the slot is counted...
    std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
    let waiting = service.call(request());
    assert_eq!(next_delay(), Duration::from_secs(20));
    // ... and its response future, dropped without ever being polled, gives it back.
    drop(waiting);
    assert_eq!(next_delay(), Duration::from_secs(10));

    // The same with several never-polled requests at once, dropped last first: each gives back
    // its own slot, the end of the queue in its turn.
    let mut waiting: Vec<_> = (0..2).map(|_| service.call(request())).collect();
    assert_eq!(next_delay(), Duration::from_secs(30));
    while let Some(last) = waiting.pop() {
        drop(last);
    }
    assert_eq!(next_delay(), Duration::from_secs(10));
    Ok(())
}

/// The gateway's shaping session (`--algorithm leaky --quota "2/s burst 5" --max-delay-ms
/// 1000`, fields on admitted responses): the queue holds 4 more, but the maximum wait lets only
/// 2 through (0.5 s and 1 s away; the third would wait 1.5 s). `r` counts those 2, and `t` says
/// when 3 pass.
#[tokio::test(start_paused = true)]
async fn with_a_maximum_wait_remaining_counts_only_what_it_lets_through() -> Result<(), Error> {
    let clock = clock();
    let limiter = KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("2/s burst 5".parse()?)?,
        100,
        clock.clone(),
    )?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .fields_on_admitted(true)
        .max_delay(Duration::from_secs(1))
        .build();
    let address = serve(Stamp(layer.layer(Hello)), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];

    let first = get(&client, address, "/", &key).await;
    assert_eq!(first.status, StatusCode::OK);
    // 3 more would pass 0.5 s from now (waiting 0.5, 1 and 1.5 s less 0.5): `t` is 1, rounded up.
    assert_eq!(first.header("ratelimit"), r#""default";r=2;t=1"#);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&client, address, "/", &key).await.status);
    }
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]
    );

    // A second key, told `r` and `t`: after `t`, `r + 1` pass (the limiter's clock is frozen,
    // so these are decided at the same instant, one after the other).
    let key = [("x-api-key", "other")];
    let first = get(&client, address, "/", &key).await;
    assert_eq!(first.header("ratelimit"), r#""default";r=2;t=1"#);
    clock.advance(Duration::from_secs(1));
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&client, address, "/", &key).await.status);
    }
    assert_eq!(statuses, [StatusCode::OK; 3]);
    Ok(())
}

/// A refusal because the queue is full, on a layer whose maximum wait is shorter than the
/// queue: the queue has room again after its retry-after, but the request would then still wait
/// above the maximum. `Retry-After` (and `t`) is when it would fit.
#[tokio::test(start_paused = true)]
async fn a_full_queue_is_retried_when_the_wait_fits_the_maximum() -> Result<(), Error> {
    let clock = clock();
    // A slot every 10 s, at most 2 waiting (20 s of queue), a maximum wait of 15 s.
    let limiter = KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("6/min burst 3".parse()?)?,
        100,
        clock.clone(),
    )?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .max_delay(Duration::from_secs(15))
        .build();
    let address = serve(Stamp(layer.layer(Hello)), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];

    // At once, then 10 s away; the third (20 s away) is above the maximum: refused, and told 5 s.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&client, address, "/", &key).await);
    }
    assert_eq!(statuses[0].status, StatusCode::OK);
    assert_eq!(statuses[1].status, StatusCode::OK);
    assert_eq!(statuses[2].status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(statuses[2].header("retry-after"), "5");
    // 5 s later it is given the slot 15 s away: the queue now ends 25 s away.
    clock.advance(Duration::from_secs(5));
    assert_eq!(get(&client, address, "/", &key).await.status, StatusCode::OK);
    // The queue is full (25 s of 30): room in 5 s, but a request then would wait 20 s. It fits
    // in 10 s.
    let full = get(&client, address, "/", &key).await;
    assert_eq!(full.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(full.header("retry-after"), "10");
    assert_eq!(full.header("ratelimit"), r#""default";r=0;t=10"#);
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        get(&client, address, "/", &key).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "5 s later it would still wait 20 s"
    );
    clock.advance(Duration::from_secs(5));
    let fits = get(&client, address, "/", &key).await;
    assert_eq!(
        (fits.status, fits.header("x-waited-ns")),
        (StatusCode::OK, Duration::from_secs(15).as_nanos().to_string())
    );
    Ok(())
}
