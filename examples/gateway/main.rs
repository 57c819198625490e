//! An HTTP reverse proxy on 127.0.0.1 with a tollgate limiter in its hot path.
//!
//! ```sh
//! cargo run --release --features tower --example gateway -- --quota "5/s burst 10"
//! curl -i http://127.0.0.1:8080/    # 200 ... then 429 with Retry-After and RateLimit fields
//! ```
//!
//! `--help` lists the options (algorithm, quota, key, upstream); `docs/gateway.md` walks
//! through a session.

mod counters;
mod flags;
mod upstream;

use std::convert::Infallible;
use std::error::Error;
use std::fmt::Display;
use std::hash::Hash;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
#[cfg(feature = "redis")]
use tollgate::distributed::redacted_url as redacted;
use tollgate::middleware::{
    HeaderKey, Ipv6Prefix, KeyExtractor, PeerAddrLayer, PeerIp, RateLimitLayer, RateLimiter,
};
#[cfg(feature = "redis")]
use tollgate::middleware::{LimiterError, Origin};
use tollgate::{
    FixedWindow, KeyedLimiter, KeyedLogLimiter, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
};
use tower::{Layer, Service};

use counters::{Count, Counters, LayerAnswer};
use flags::{AlgorithmChoice, Flags, KeyChoice, USAGE};
use upstream::Upstream;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Display, not Debug: `--capacity 0: ...`, not `Zero`.
            eprintln!("gateway: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Reads the flags, builds the limiter they ask for, and only then listens, prints the banner
/// and serves: a command line the gateway cannot honour fails before anything is printed.
async fn run() -> Result<(), Box<dyn Error>> {
    let Some(flags) = Flags::parse(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };
    let upstream = match &flags.upstream {
        Some(base) => Upstream::proxy(base.clone()),
        None => Upstream::Hello,
    };
    if !flags.limit {
        let listener = listen(&flags).await?;
        println!("no rate limit (--no-limit)");
        return serve(listener, upstream).await;
    }
    // An IPv6 client is keyed by its network (`--ipv6-prefix`, a /64 unless told otherwise).
    let prefix = flags.ipv6_prefix;
    match &flags.key {
        KeyChoice::Peer => with_limiter(upstream, &flags, Ipv6Prefix::new(PeerIp, prefix)?).await,
        KeyChoice::Header(name) => with_limiter(upstream, &flags, HeaderKey::new(name.clone())).await,
        KeyChoice::ClientIp(client_ip) => {
            with_limiter(upstream, &flags, Ipv6Prefix::new(client_ip.clone(), prefix)?).await
        }
    }
}

/// Binds `--listen` and prints the banner's first line.
async fn listen(flags: &Flags) -> Result<TcpListener, Box<dyn Error>> {
    let listener = TcpListener::bind(flags.listen)
        .await
        .map_err(|e| format!("--listen {}: {e}", flags.listen))?;
    println!(
        "gateway on http://{} -> {}",
        listener.local_addr()?,
        flags
            .upstream
            .as_ref()
            .map_or("built-in hello".to_owned(), ToString::to_string)
    );
    Ok(listener)
}

/// The error of an option's value, named: `--quota 0/s: ...`.
fn named<E: Display>(option: &'static str, value: impl Display) -> impl FnOnce(E) -> String {
    move |error| format!("{option} {value}: {error}")
}

/// Builds the limiter the flags ask for, over the extractor's key type, and serves with it.
async fn with_limiter<X>(upstream: Upstream, flags: &Flags, extractor: X) -> Result<(), Box<dyn Error>>
where
    X: KeyExtractor,
    X::Key: Hash + Eq + Clone + Display,
{
    if let Some(url) = &flags.redis {
        return through_redis(upstream, flags, extractor, url).await;
    }
    let (quota, capacity) = (flags.quota, flags.capacity);
    let bad_quota = || named("--quota", quota);
    let bad_capacity = || named("--capacity", capacity);
    match flags.algorithm {
        AlgorithmChoice::Token => {
            let bucket = TokenBucket::new(quota).map_err(bad_quota())?;
            let limiter = KeyedLimiter::<X::Key, _>::new(bucket, capacity).map_err(bad_capacity())?;
            limited(upstream, flags, limiter, extractor).await
        }
        AlgorithmChoice::Leaky => {
            let bucket = LeakyBucket::new(quota).map_err(bad_quota())?;
            let limiter = KeyedLimiter::<X::Key, _>::new(bucket, capacity).map_err(bad_capacity())?;
            limited(upstream, flags, limiter, extractor).await
        }
        AlgorithmChoice::Fixed => {
            let window = FixedWindow::new(quota).map_err(bad_quota())?;
            let limiter = KeyedLimiter::<X::Key, _>::new(window, capacity).map_err(bad_capacity())?;
            limited(upstream, flags, limiter, extractor).await
        }
        AlgorithmChoice::Sliding => {
            let window = SlidingWindow::new(quota).map_err(bad_quota())?;
            let limiter = KeyedLimiter::<X::Key, _>::new(window, capacity).map_err(bad_capacity())?;
            limited(upstream, flags, limiter, extractor).await
        }
        AlgorithmChoice::Log => {
            let log = SlidingLog::new(quota).map_err(bad_quota())?;
            let limiter = KeyedLogLimiter::<X::Key>::new(log, capacity).map_err(bad_capacity())?;
            limited(upstream, flags, limiter, extractor).await
        }
    }
}

/// Every instance started with the same `--redis` URL, algorithm and quota shares one quota
/// per key. While Redis is away the gateway fails closed (429, retry in a second).
#[cfg(feature = "redis")]
async fn through_redis<X>(
    upstream: Upstream,
    flags: &Flags,
    extractor: X,
    url: &str,
) -> Result<(), Box<dyn Error>>
where
    X: KeyExtractor,
    X::Key: Clone + Display,
{
    use tollgate::distributed::{FailurePolicy, RedisAlgorithm, RedisLimiter};
    let quota = flags.quota;
    let bad_quota = || named("--quota", quota);
    let algorithm: RedisAlgorithm = match flags.algorithm {
        AlgorithmChoice::Token => TokenBucket::new(quota).map_err(bad_quota())?.into(),
        AlgorithmChoice::Leaky => LeakyBucket::new(quota).map_err(bad_quota())?.into(),
        AlgorithmChoice::Fixed => FixedWindow::new(quota).map_err(bad_quota())?.into(),
        AlgorithmChoice::Sliding => SlidingWindow::new(quota).map_err(bad_quota())?.into(),
        AlgorithmChoice::Log => SlidingLog::new(quota).map_err(bad_quota())?.into(),
    };
    let policy = FailurePolicy::FailClosed {
        retry_after: std::time::Duration::from_secs(1),
    };
    let shown = redacted(url);
    let limiter = RedisLimiter::builder(url, algorithm, policy)
        .prefix("gateway:")
        .connect()
        .await
        .map_err(named("--redis", &shown))?;
    // The connection is made at the first decision, and a Redis that is away only shows as
    // refusals: ask once now, so that a wrong address or password is said at start.
    let probe = limiter.peek_n("gateway-start", 0).await;
    match probe.as_ref().map(|answer| answer.failure) {
        Ok(None) => {}
        Ok(Some(failure)) => eprintln!(
            "gateway: warning: Redis at {shown} did not answer ({failure:?}); requests are refused (429) until it does"
        ),
        Err(error) => eprintln!("gateway: warning: Redis at {shown}: {error}"),
    }
    limited(upstream, flags, WatchedRedis(limiter), extractor).await
}

/// The Redis limiter, counting the decisions its failure policy made instead of Redis (Redis
/// away: every one a 429, like an over-quota refusal), which the gateway prints each second
/// they happen.
#[cfg(feature = "redis")]
struct WatchedRedis(tollgate::distributed::RedisLimiter);

#[cfg(feature = "redis")]
impl WatchedRedis {
    /// The decision's `origin`, after counting it if Redis did not make it.
    fn watched<T>(answer: Result<(T, Origin), LimiterError>) -> Result<(T, Origin), LimiterError> {
        if let Ok((_, Origin::Uncounted | Origin::Fallback | Origin::FallbackSlot { .. })) = &answer {
            counters::WITHOUT_REDIS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        answer
    }
}

#[cfg(feature = "redis")]
impl<K: Display + Sync> RateLimiter<K> for WatchedRedis {
    fn decide(
        &self,
        key: &K,
        cost: u64,
    ) -> impl std::future::Future<Output = Result<tollgate::Decision, LimiterError>> + Send {
        let decided = self.decide_with_origin(key, cost);
        async move { decided.await.map(|(decision, _)| decision) }
    }

    fn decide_with_origin(
        &self,
        key: &K,
        cost: u64,
    ) -> impl std::future::Future<Output = Result<(tollgate::Decision, Origin), LimiterError>> + Send {
        let decided = self.0.decide_with_origin(key, cost);
        async move { Self::watched(decided.await) }
    }

    fn decide_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<(tollgate::Decision, Origin), LimiterError>> + Send {
        let decided = self.0.decide_within(key, cost, max_delay);
        async move { Self::watched(decided.await) }
    }

    fn policy(&self) -> tollgate::middleware::Policy {
        RateLimiter::<K>::policy(&self.0)
    }

    fn refund(&self, key: K, cost: u64, origin: Origin) {
        self.0.refund(key, cost, origin);
    }
}

/// Never called: `Flags::parse` refuses `--redis` in a build without the `redis` feature, so no
/// URL is ever shown.
#[cfg(not(feature = "redis"))]
fn redacted(_: &str) -> String {
    String::from("(a Redis URL: this gateway was built without the `redis` feature)")
}

/// Never called: `Flags::parse` refuses `--redis` in a build without the `redis` feature.
#[cfg(not(feature = "redis"))]
async fn through_redis<X: KeyExtractor>(
    _: Upstream,
    _: &Flags,
    _: X,
    url: &str,
) -> Result<(), Box<dyn Error>> {
    Err(format!("--redis {url}: this gateway was built without the `redis` feature").into())
}

/// Listens, prints the banner and serves `upstream` behind `limiter`.
async fn limited<L, X>(
    upstream: Upstream,
    flags: &Flags,
    limiter: L,
    extractor: X,
) -> Result<(), Box<dyn Error>>
where
    L: RateLimiter<X::Key> + 'static,
    X: KeyExtractor,
    X::Key: Clone,
{
    let listener = listen(flags).await?;
    println!(
        "limit: {:?} at {} per key, keyed by {:?}{}",
        flags.algorithm,
        flags.quota,
        flags.key,
        flags
            .redis
            .as_ref()
            .map_or(String::new(), |url| format!(", shared through {}", redacted(url)))
    );
    let mut layer = RateLimitLayer::builder(limiter, extractor)
        .legacy_fields(flags.legacy)
        .fields_on_admitted(flags.admitted_fields);
    if let Some(max) = flags.max_delay {
        layer = layer.max_delay(max);
    }
    serve(listener, layer.build().layer(upstream)).await
}

/// How long a connection may stay silent before its first byte, and an HTTP/1.1 request's head
/// take to arrive (also the longest wait for the next request on a kept-alive connection): a
/// client that opens connections and sends nothing, or trickles its headers, holds a
/// descriptor for at most this long.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The first and the longest pause after a failed accept: out of descriptors (`EMFILE`), an
/// accept fails again at once until a connection closes, and retrying at once would spin.
const ACCEPT_PAUSE: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// Accepts connections for ever, serving HTTP/1.1 and HTTP/2 (prior knowledge) with `service`
/// behind a counter of admitted, refused, unavailable and keyless requests.
async fn serve<S, B>(listener: TcpListener, service: S) -> Result<(), Box<dyn Error>>
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + LayerAnswer + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let counters = Arc::new(Counters::default());
    Arc::clone(&counters).print_every_second();
    let mut pause = None;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                pause = None;
                accepted
            }
            Err(error) => {
                // Twice as long each time in a row, up to the longest: one line per pause.
                let next = pause.map_or(ACCEPT_PAUSE.0, |last: Duration| (last * 2).min(ACCEPT_PAUSE.1));
                eprintln!("accept: {error} (next try in {next:?})");
                tokio::time::sleep(next).await;
                pause = Some(next);
                continue;
            }
        };
        let counted = Count {
            inner: service.clone(),
            counters: Arc::clone(&counters),
        };
        let service = TowerToHyperService::new(PeerAddrLayer::new(peer).layer(counted));
        tokio::spawn(async move {
            // The automatic builder waits for the first bytes to tell HTTP/1.1 from HTTP/2, with
            // no timeout of its own: a connection silent that long is closed here.
            let mut first = [0; 1];
            if !matches!(
                tokio::time::timeout(HEAD_TIMEOUT, stream.peek(&mut first)).await,
                Ok(Ok(1..))
            ) {
                return;
            }
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // hyper's head timeout needs a timer to take effect.
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT);
            builder.http2().timer(TokioTimer::new());
            // A client that goes away mid-request is not the gateway's error.
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
