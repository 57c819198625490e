//! The rate-limit layer over real TCP on loopback, with a real HTTP client: refusals, their
//! fields, recovery on a manual clock, keys, spoofing, per-route layers, errors.

use std::future::{ready, Future};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::middleware_common::{api_key, clock, get, http1_client, post, serve, Hello};
use http::{Method, Request, Response, StatusCode};
use tollgate::middleware::{
    ClientIp, LimiterError, MissingKey, OnLimiterError, PeerIp, Policy, RateLimitLayer, RateLimiter,
    RouteFilter,
};
use tollgate::{
    Decision, FixedWindow, KeyedLimiter, KeyedLogLimiter, ManualClock, SlidingLog, SlidingWindow,
    TokenBucket, WhenFull,
};
use tower::{Layer, Service, ServiceBuilder};

type Error = Box<dyn std::error::Error>;

#[tokio::test]
async fn requests_pass_until_the_quota_is_spent_then_429_until_the_retry_time() -> Result<(), Error> {
    let clock = clock();
    // 3 per minute: a token every 20 s, bursts of 3.
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("3/min".parse()?)?, 1_000, clock.clone())?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .fields_on_admitted(true)
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let alice = [("x-api-key", "alice")];

    for remaining in [2, 1, 0] {
        let answer = get(&client, address, "/", &alice).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.body, "hello\n");
        assert_eq!(answer.header("ratelimit-policy"), r#""default";q=3;w=60"#);
        // Admitted: t is when more quota comes (the draft's "additional quota is made
        // available"): the next token, 20 s away however many are spent.
        assert_eq!(
            answer.header("ratelimit"),
            format!(r#""default";r={remaining};t=20"#)
        );
        assert_eq!(answer.header("retry-after"), "");
    }

    let refused = get(&client, address, "/", &alice).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), "20");
    assert_eq!(refused.header("ratelimit-policy"), r#""default";q=3;w=60"#);
    // The same state as the last admitted response, the same meaning: t=20 on both.
    assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=20"#);
    assert_eq!(refused.body, "too many requests: retry after 20 s\n");

    // 0.5 s short of the retry time: still refused, told 1 s (rounded up).
    clock.advance(Duration::from_millis(19_500));
    let early = get(&client, address, "/", &alice).await;
    assert_eq!(early.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(early.header("retry-after"), "1");
    assert_eq!(early.header("ratelimit"), r#""default";r=0;t=1"#);

    // At the retry time: one more passes, and only one.
    clock.advance(Duration::from_millis(500));
    assert_eq!(get(&client, address, "/", &alice).await.status, StatusCode::OK);
    assert_eq!(
        get(&client, address, "/", &alice).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    Ok(())
}

#[tokio::test]
async fn a_sub_second_policy_is_announced_at_its_true_rate() -> Result<(), Error> {
    let clock = clock();
    // One at a time, ten a second.
    let limiter = KeyedLimiter::<String, _, _>::with_clock(
        TokenBucket::new("10/s burst 1".parse()?)?,
        100,
        clock.clone(),
    )?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .fields_on_admitted(true)
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let mut admitted = 0;
    for _ in 0..10 {
        let answer = get(&client, address, "/", &[("x-api-key", "k")]).await;
        admitted += u32::from(answer.status == StatusCode::OK);
        // Not `q=1;w=1` (a window of 100 ms rounded up to a second, the quota left as it was).
        assert_eq!(answer.header("ratelimit-policy"), r#""default";q=10;w=1"#);
        clock.advance(Duration::from_millis(100));
    }
    assert_eq!(admitted, 10, "the limiter gives what the policy announces");
    Ok(())
}

#[tokio::test]
async fn the_exact_sliding_log_limits_through_the_same_layer() -> Result<(), Error> {
    let clock = clock();
    let limiter =
        KeyedLogLimiter::<String, _>::with_clock(SlidingLog::new("2/min".parse()?)?, 1_000, clock.clone())?;
    let address = serve(RateLimitLayer::new(limiter, api_key()).layer(Hello), true).await;
    let client = http1_client();
    let alice = [("x-api-key", "alice")];
    assert_eq!(get(&client, address, "/", &alice).await.status, StatusCode::OK);
    clock.advance(Duration::from_secs(15));
    assert_eq!(get(&client, address, "/", &alice).await.status, StatusCode::OK);

    // The first unit leaves the window 60 s after it was admitted: 45 s from now.
    let refused = get(&client, address, "/", &alice).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), "45");
    assert_eq!(refused.header("ratelimit-policy"), r#""default";q=2;w=60"#);
    assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=45"#);

    clock.advance(Duration::from_secs(45));
    assert_eq!(get(&client, address, "/", &alice).await.status, StatusCode::OK);
    assert_eq!(
        get(&client, address, "/", &alice).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    Ok(())
}

#[tokio::test]
async fn distinct_keys_are_limited_independently() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(FixedWindow::new("2/min".parse()?)?, 1_000, clock())?;
    let address = serve(RateLimitLayer::new(limiter, api_key()).layer(Hello), true).await;
    let client = http1_client();
    let statuses = |key: &'static str| {
        let client = client.clone();
        async move {
            let mut statuses = Vec::new();
            for _ in 0..3 {
                statuses.push(
                    get(&client, address, "/", &[("x-api-key", key)])
                        .await
                        .status
                        .as_u16(),
                );
            }
            statuses
        }
    };
    assert_eq!(statuses("alice").await, [200, 200, 429]);
    assert_eq!(statuses("bob").await, [200, 200, 429]);
    assert_eq!(statuses("carol").await, [200, 200, 429]);
    Ok(())
}

#[tokio::test]
async fn the_peer_ip_is_a_key() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<IpAddr, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 1_000, clock())?;
    let shared = Arc::new(limiter);
    let address = serve(
        RateLimitLayer::new(Arc::clone(&shared), PeerIp).layer(Hello),
        true,
    )
    .await;
    let client = http1_client();
    assert_eq!(get(&client, address, "/", &[]).await.status, StatusCode::OK);
    assert_eq!(
        get(&client, address, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The key was the loopback address, and the limiter is the one we still hold.
    assert!(!shared.peek(&"127.0.0.1".parse()?).is_allowed());
    Ok(())
}

#[tokio::test]
async fn a_spoofed_leftmost_forwarded_for_is_ignored() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<IpAddr, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 1_000, clock())?;
    // The test client connects from loopback: it plays the trusted proxy.
    let client_ip = ClientIp::new(["127.0.0.0/8".parse()?]);
    let address = serve(RateLimitLayer::new(limiter, client_ip).layer(Hello), true).await;
    let client = http1_client();
    let xff = |value: &'static str| [("x-forwarded-for", value)];

    assert_eq!(
        get(&client, address, "/", &xff("6.6.6.6, 203.0.113.7"))
            .await
            .status,
        StatusCode::OK
    );
    // The same client with a new made-up left-most address is still the same client.
    for spoofed in [
        "7.7.7.7, 203.0.113.7",
        "8.8.8.8, 9.9.9.9, 203.0.113.7",
        "203.0.113.7",
    ] {
        let answer = get(&client, address, "/", &xff(spoofed)).await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{spoofed}");
    }
    // Trusted hops to the right are skipped.
    let answer = get(&client, address, "/", &xff("203.0.113.7, 127.0.0.9")).await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the same proxy has its own quota, whatever it writes on the left.
    assert_eq!(
        get(&client, address, "/", &xff("203.0.113.7, 203.0.113.8"))
            .await
            .status,
        StatusCode::OK
    );
    Ok(())
}

#[tokio::test]
async fn a_client_inside_a_trusted_range_is_taken_for_a_proxy() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<IpAddr, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 1_000, clock())?;
    // The test client connects from loopback: it plays the trusted proxy, which appended the
    // real client 127.5.5.5; that client, inside the trusted range too, writes the left entry.
    let client_ip = ClientIp::new(["127.0.0.0/8".parse()?]);
    let address = serve(RateLimitLayer::new(limiter, client_ip).layer(Hello), true).await;
    let client = http1_client();
    // The statuses of five requests whose `X-Forwarded-For` is `header(1..=5)`.
    let statuses = |header: fn(u32) -> String| {
        let client = &client;
        async move {
            let mut statuses = Vec::new();
            for spoof in 1..=5 {
                let xff = header(spoof);
                statuses.push(
                    get(client, address, "/", &[("x-forwarded-for", &xff)])
                        .await
                        .status
                        .as_u16(),
                );
            }
            statuses
        }
    };
    // Every entry trusted: the key is the right-most, which the proxy wrote, not the client.
    assert_eq!(
        statuses(|spoof| format!("127.66.66.{spoof}, 127.5.5.5")).await,
        [200, 429, 429, 429, 429]
    );
    // The documented limit (`ClientIp`, "The trusted ranges must hold your proxies and nothing
    // else"): an untrusted address written on the left is taken for the client, so a client
    // inside a trusted range picks its key, each made-up address a fresh quota.
    assert_eq!(
        statuses(|spoof| format!("203.0.113.{spoof}, 127.5.5.6")).await,
        [200, 200, 200, 200, 200]
    );
    Ok(())
}

#[tokio::test]
async fn a_request_without_a_key_gets_the_configured_behaviour() -> Result<(), Error> {
    let client = http1_client();
    let bucket = || -> Result<_, Error> {
        Ok(KeyedLimiter::<String, _, _>::with_clock(
            TokenBucket::new("1/min".parse()?)?,
            100,
            clock(),
        )?)
    };

    // Default: the client left its key out, so 400 (never a 5xx a client can cause at will),
    // saying which header is missing.
    let address = serve(RateLimitLayer::new(bucket()?, api_key()).layer(Hello), true).await;
    let answer = get(&client, address, "/", &[]).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.body, "the request has no `x-api-key` header\n");
    // An empty key is the client's fault too.
    let answer = get(&client, address, "/", &[("x-api-key", "")]).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    // So is a key sent twice: a layer in front may have checked the other one, and each made-up
    // second value would be a fresh quota. Whichever comes first, the request is refused.
    for keys in [
        [("x-api-key", "real"), ("x-api-key", "made-up")],
        [("x-api-key", "made-up"), ("x-api-key", "real")],
    ] {
        let answer = get(&client, address, "/", &keys).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert!(answer.body.contains("sent more than once"), "{}", answer.body);
    }

    // A chosen status: a 4xx body still names only what the request lacks.
    let layer = RateLimitLayer::builder(bucket()?, api_key())
        .missing_key(MissingKey::Respond(StatusCode::UNAUTHORIZED))
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let answer = get(&client, address, "/", &[]).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer.body, "the request has no `x-api-key` header\n");

    // A default key: keyless requests share one quota.
    let layer = RateLimitLayer::builder(bucket()?, api_key())
        .missing_key(MissingKey::Use("anonymous".to_owned()))
        .build();
    let address = serve(layer.layer(Hello), true).await;
    assert_eq!(get(&client, address, "/", &[]).await.status, StatusCode::OK);
    assert_eq!(
        get(&client, address, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        get(&client, address, "/", &[("x-api-key", "alice")]).await.status,
        StatusCode::OK
    );
    Ok(())
}

#[tokio::test]
async fn an_unreadable_forwarding_header_is_the_clients_fault() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<IpAddr, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 100, clock())?;
    let client_ip = ClientIp::new(["127.0.0.0/8".parse()?]);
    let address = serve(RateLimitLayer::new(limiter, client_ip).layer(Hello), true).await;
    let answer = get(
        &http1_client(),
        address,
        "/",
        &[("x-forwarded-for", "1.2.3.4, unknown")],
    )
    .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    // Nothing of the configuration (which entries are trusted), no echo of the entry.
    assert_eq!(answer.body, "the request's forwarding header cannot be read\n");
    Ok(())
}

#[tokio::test]
async fn missing_connection_info_is_a_clear_error_with_its_fix() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<IpAddr, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 100, clock())?;
    // Served without PeerAddrLayer: no request carries its peer address.
    let address = serve(RateLimitLayer::new(limiter, PeerIp).layer(Hello), false).await;
    let answer = get(&http1_client(), address, "/", &[]).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(answer.body.contains("no peer address"), "{}", answer.body);
    assert!(
        answer.body.contains("PeerAddrLayer::new(remote_addr)"),
        "the fix: {}",
        answer.body
    );
    Ok(())
}

#[tokio::test]
async fn fields_are_configurable() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(SlidingWindow::new("2/10s".parse()?)?, 100, clock())?;
    // By default admitted responses carry no fields; refusals always do.
    let layer = RateLimitLayer::builder(limiter, api_key())
        .legacy_fields(true)
        .policy_name("per-key")?
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];
    let admitted = get(&client, address, "/", &key).await;
    assert_eq!(admitted.status, StatusCode::OK);
    assert_eq!(admitted.header("ratelimit"), "");
    assert_eq!(admitted.header("x-ratelimit-limit"), "");
    get(&client, address, "/", &key).await;
    let refused = get(&client, address, "/", &key).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("ratelimit-policy"), r#""per-key";q=2;w=10"#);
    // The sliding window: at the start of the next window the previous one still weighs 2, so
    // the third request passes half way through it, 15 s from now.
    assert_eq!(refused.header("ratelimit"), r#""per-key";r=0;t=15"#);
    assert_eq!(refused.header("retry-after"), "15");
    assert_eq!(refused.header("x-ratelimit-limit"), "2");
    assert_eq!(refused.header("x-ratelimit-remaining"), "0");
    assert_eq!(refused.header("x-ratelimit-reset"), "15");
    Ok(())
}

#[tokio::test]
async fn per_route_layers_compose() -> Result<(), Error> {
    let clock = clock();
    let logins =
        KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 100, clock.clone())?;
    let all = KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("4/min".parse()?)?, 100, clock)?;
    let login_layer = RateLimitLayer::builder(logins, api_key())
        .only_for(RouteFilter::method(Method::GET).and(RouteFilter::path_prefix("/login")))
        .policy_name("login")?
        .fields_on_admitted(true)
        .build();
    let app = ServiceBuilder::new()
        .layer(
            RateLimitLayer::builder(all, api_key())
                .policy_name("all")?
                .fields_on_admitted(true)
                .build(),
        )
        .layer(login_layer)
        .service(Hello);
    let address = serve(app, true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];

    let first_login = get(&client, address, "/login", &key).await;
    assert_eq!(first_login.status, StatusCode::OK);
    // Both layers state their policy: the fields are lists, the inner layer's first.
    assert_eq!(
        first_login.header("ratelimit-policy"),
        r#""login";q=1;w=60, "all";q=4;w=60"#
    );
    assert_eq!(
        first_login.header("ratelimit"),
        r#""login";r=0;t=60, "all";r=3;t=15"#
    );
    let second_login = get(&client, address, "/login", &key).await;
    assert_eq!(second_login.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        second_login.header("ratelimit-policy"),
        r#""login";q=1;w=60, "all";q=4;w=60"#
    );
    assert_eq!(
        second_login.header("ratelimit"),
        r#""login";r=0;t=60, "all";r=2;t=15"#
    );
    assert_eq!(second_login.header("retry-after"), "60");
    // Other routes are limited only by the global layer (which counted both logins: 2 left).
    assert_eq!(get(&client, address, "/home", &key).await.status, StatusCode::OK);
    assert_eq!(
        get(&client, address, "/login-help", &key).await.status,
        StatusCode::OK
    );
    let spent = get(&client, address, "/home", &key).await;
    assert_eq!(spent.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        spent.header("ratelimit-policy"),
        r#""all";q=4;w=60"#,
        "the login layer was not asked"
    );
    Ok(())
}

#[tokio::test]
async fn a_route_prefix_without_its_leading_slash_still_limits_the_route() -> Result<(), Error> {
    let logins = KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 100, clock())?;
    let layer = RateLimitLayer::builder(logins, api_key())
        .only_for(RouteFilter::path_prefix("login"))
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];
    assert_eq!(get(&client, address, "/login", &key).await.status, StatusCode::OK);
    assert_eq!(
        get(&client, address, "/login", &key).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get(&client, address, "/home", &key).await.status, StatusCode::OK);
    Ok(())
}

/// A limiter that cannot decide, as a remote store that is down, and whose reason names the
/// server's internals (a Redis node, a prefixed key), as a Redis error can.
struct Unreachable;

/// What [`Unreachable`] says: for the operator's eyes only.
const INTERNAL_REASON: &str = "connection refused by 10.0.0.5:6379 for key \"gateway:{alice}\"";

impl RateLimiter<String> for Unreachable {
    fn decide(&self, _: &String, _: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        ready(Err(LimiterError::new(INTERNAL_REASON)))
    }

    fn policy(&self) -> Policy {
        Policy::new(1, Duration::from_secs(1))
    }
}

/// An operator's layer outside the rate limit: logs why the limiter could not decide, from the
/// [`LimiterError`] the layer's answer carries in its extensions.
#[derive(Clone)]
struct LogLimiterErrors<S> {
    inner: S,
    log: Arc<Mutex<Vec<String>>>,
}

impl<S, B, R> Service<Request<B>> for LogLimiterErrors<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let answered = self.inner.call(request);
        let log = Arc::clone(&self.log);
        Box::pin(async move {
            let response = answered.await?;
            if let Some(error) = response.extensions().get::<LimiterError>() {
                log.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(error.to_string());
            }
            Ok(response)
        })
    }
}

/// A gateway of `limiter` with the `on_error` policy, behind [`LogLimiterErrors`] writing to
/// `log`.
async fn logged_gateway<L>(limiter: L, on_error: OnLimiterError, log: &Arc<Mutex<Vec<String>>>) -> SocketAddr
where
    L: RateLimiter<String> + 'static,
{
    let layer = RateLimitLayer::builder(limiter, api_key())
        .on_limiter_error(on_error)
        .build();
    let logged = LogLimiterErrors {
        inner: layer.layer(Hello),
        log: Arc::clone(log),
    };
    serve(logged, true).await
}

#[tokio::test]
async fn a_limiter_that_cannot_decide_gets_the_configured_behaviour() -> Result<(), Error> {
    let client = http1_client();
    let key = [("x-api-key", "k")];
    let log = Arc::new(Mutex::new(Vec::new()));
    let closed = logged_gateway(Unreachable, OnLimiterError::default(), &log).await;
    // The client is told the limiter could not decide, and nothing of why.
    let answer = get(&client, closed, "/", &key).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.body, "the rate limiter could not decide: retry later\n");
    let grpc = post(
        &client,
        closed,
        "/",
        &[key[0], ("content-type", "application/grpc")],
    )
    .await;
    assert_eq!(
        (grpc.status, grpc.header("grpc-status")),
        (StatusCode::OK, "14".to_owned())
    );
    assert_eq!(
        grpc.header("grpc-message"),
        "the rate limiter could not decide: retry later"
    );
    for answer in [&answer, &grpc] {
        assert!(!format!("{answer:?}").contains("10.0.0.5"), "{answer:?}");
    }
    // The operator is told why, from the response's extensions.
    let logged = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let reason = format!("the rate limiter could not decide: {INTERNAL_REASON}");
    assert_eq!(logged, [reason.clone(), reason.clone()]);

    // Failing open, the request goes through unlimited, and its response still carries why, on
    // the asynchronous path (`Unreachable`) and on the fast one (`UnreachableNow`).
    let log = Arc::new(Mutex::new(Vec::new()));
    let open = logged_gateway(Unreachable, OnLimiterError::Admit, &log).await;
    let open_now = logged_gateway(UnreachableNow, OnLimiterError::Admit, &log).await;
    for gateway in [open, open_now] {
        let answer = get(&client, gateway, "/", &key).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.body, "hello\n");
        assert_eq!(answer.header("ratelimit"), "", "no decision, no fields");
    }
    let logged = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(logged, [reason.clone(), reason]);
    Ok(())
}

/// A gateway of `limiter` failing closed (the default), with `retry` as the refusal's
/// `Retry-After` (`None`: the default).
async fn fail_closed<L: RateLimiter<String> + 'static>(limiter: L, retry: Option<Duration>) -> SocketAddr {
    let builder = RateLimitLayer::builder(limiter, api_key());
    let layer = match retry {
        Some(retry) => builder.limiter_error_retry_after(retry).build(),
        None => builder.build(),
    };
    serve(layer.layer(Hello), true).await
}

/// A fail-closed refusal tells the client when to retry (1 s by default, or what the builder
/// says), on the asynchronous path and the fast one, HTTP and gRPC, and claims no quota: no
/// `RateLimit` fields, which would need a decision.
#[tokio::test]
async fn a_fail_closed_refusal_says_when_to_retry_and_nothing_of_a_quota() -> Result<(), Error> {
    let client = http1_client();
    let key = ("x-api-key", "k");
    let grpc = ("content-type", "application/grpc");
    for (retry, expected) in [
        (None, "1"),
        (Some(Duration::from_millis(29_001)), "30"),
        (Some(Duration::ZERO), ""),
    ] {
        let async_path = fail_closed(Unreachable, retry).await;
        let fast_path = fail_closed(UnreachableNow, retry).await;
        for address in [async_path, fast_path] {
            for headers in [&[key][..], &[key, grpc][..]] {
                let answer = match headers.len() {
                    1 => get(&client, address, "/", headers).await,
                    _ => post(&client, address, "/", headers).await,
                };
                let case = format!("{retry:?}, {headers:?}: {answer:?}");
                assert_eq!(answer.header("retry-after"), expected, "{case}");
                assert_eq!(answer.header("ratelimit"), "", "{case}");
                assert_eq!(answer.header("ratelimit-policy"), "", "{case}");
                let refused = match headers.len() {
                    1 => answer.status == StatusCode::SERVICE_UNAVAILABLE,
                    _ => answer.header("grpc-status") == "14",
                };
                assert!(refused, "{case}");
            }
        }
    }
    Ok(())
}

/// [`Unreachable`], deciding at once (the layer's fast path, as a table in memory does).
struct UnreachableNow;

impl RateLimiter<String> for UnreachableNow {
    fn decide(&self, key: &String, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        Unreachable.decide(key, cost)
    }

    fn decide_now(&self, _: &String, _: u64) -> Option<Result<Decision, LimiterError>> {
        Some(Err(LimiterError::new(INTERNAL_REASON)))
    }

    fn policy(&self) -> Policy {
        Unreachable.policy()
    }
}

#[tokio::test]
async fn a_full_table_refuses_new_clients_with_503() -> Result<(), Error> {
    let limiter = KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 1, clock())?
        .when_full(WhenFull::Refuse);
    let slots = limiter.slots();
    let address = serve(RateLimitLayer::new(limiter, api_key()).layer(Hello), true).await;
    let client = http1_client();
    let mut statuses = Vec::new();
    // Every key keeps debt, so once every slot holds one, the next new key finds no room.
    for key in 0..=slots {
        let key = key.to_string();
        statuses.push(get(&client, address, "/", &[("x-api-key", &key)]).await.status);
    }
    assert_eq!(statuses[..slots], vec![StatusCode::OK; slots]);
    assert_eq!(statuses[slots], StatusCode::SERVICE_UNAVAILABLE);
    // The refusal says when room is due: every key's debt (one request of a 1/min bucket at
    // the same frozen time) runs out in 60 s.
    let refused = get(&client, address, "/", &[("x-api-key", "one more")]).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.header("retry-after"), "60");
    Ok(())
}

/// A limiter that only decides asynchronously (as a remote one does): the layer's slow path.
struct AsyncOnly(KeyedLimiter<String, TokenBucket, ManualClock>);

impl RateLimiter<String> for AsyncOnly {
    async fn decide(&self, key: &String, cost: u64) -> Result<Decision, LimiterError> {
        tokio::task::yield_now().await;
        self.0.check_n(key, cost).map_err(LimiterError::from)
    }

    fn policy(&self) -> Policy {
        self.0.policy()
    }
}

#[tokio::test]
async fn an_asynchronous_limiter_limits_the_same_way() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("2/min".parse()?)?, 100, clock())?;
    let layer = RateLimitLayer::builder(AsyncOnly(limiter), api_key())
        .fields_on_admitted(true)
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];
    let first = get(&client, address, "/", &key).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header("ratelimit"), r#""default";r=1;t=30"#);
    assert_eq!(get(&client, address, "/", &key).await.status, StatusCode::OK);
    let refused = get(&client, address, "/", &key).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), "30");
    assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=30"#);
    Ok(())
}
