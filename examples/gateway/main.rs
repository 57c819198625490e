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
use std::hash::Hash;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tollgate::algorithm::Algorithm;
use tollgate::middleware::{AnnouncedPolicy, HeaderKey, KeyExtractor, PeerAddrLayer, PeerIp, RateLimitLayer};
use tollgate::{FixedWindow, KeyedLimiter, LeakyBucket, SlidingWindow, TokenBucket, WhenFull};
use tower::{Layer, Service};

use counters::{Count, Counters};
use flags::{AlgorithmChoice, Flags, KeyChoice, USAGE};
use upstream::Upstream;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let Some(flags) = Flags::parse(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };
    let upstream = match &flags.upstream {
        Some(base) => Upstream::proxy(base.clone()),
        None => Upstream::Hello,
    };
    let listener = TcpListener::bind(flags.listen).await?;
    println!(
        "gateway on http://{} -> {}",
        listener.local_addr()?,
        flags
            .upstream
            .as_ref()
            .map_or("built-in hello".to_owned(), ToString::to_string)
    );
    if !flags.limit {
        println!("no rate limit (--no-limit)");
        return serve(listener, upstream).await;
    }
    match flags.algorithm {
        AlgorithmChoice::Token => with_key(listener, upstream, &flags, TokenBucket::new(flags.quota)?).await,
        AlgorithmChoice::Leaky => with_key(listener, upstream, &flags, LeakyBucket::new(flags.quota)?).await,
        AlgorithmChoice::Fixed => with_key(listener, upstream, &flags, FixedWindow::new(flags.quota)?).await,
        AlgorithmChoice::Sliding => {
            with_key(listener, upstream, &flags, SlidingWindow::new(flags.quota)?).await
        }
    }
}

async fn with_key<A>(
    listener: TcpListener,
    upstream: Upstream,
    flags: &Flags,
    algorithm: A,
) -> Result<(), Box<dyn Error>>
where
    A: Algorithm + AnnouncedPolicy + std::fmt::Debug + 'static,
{
    println!(
        "limit: {:?} at {} per key, keyed by {:?}",
        flags.algorithm, flags.quota, flags.key
    );
    match &flags.key {
        KeyChoice::Peer => limited(listener, upstream, flags, algorithm, PeerIp).await,
        KeyChoice::Header(name) => {
            limited(listener, upstream, flags, algorithm, HeaderKey::new(name.clone())).await
        }
        KeyChoice::ClientIp(client_ip) => {
            limited(listener, upstream, flags, algorithm, client_ip.clone()).await
        }
    }
}

async fn limited<A, X>(
    listener: TcpListener,
    upstream: Upstream,
    flags: &Flags,
    algorithm: A,
    extractor: X,
) -> Result<(), Box<dyn Error>>
where
    A: Algorithm + AnnouncedPolicy + 'static,
    X: KeyExtractor,
    X::Key: Hash + Eq + Clone,
{
    let limiter = KeyedLimiter::<X::Key, A>::new(algorithm, flags.capacity)?.when_full(WhenFull::Refuse);
    let mut layer = RateLimitLayer::builder(limiter, extractor)
        .legacy_fields(flags.legacy)
        .fields_on_admitted(flags.admitted_fields);
    if let Some(max) = flags.max_delay {
        layer = layer.max_delay(max);
    }
    serve(listener, layer.build().layer(upstream)).await
}

/// Accepts connections for ever, serving HTTP/1.1 and HTTP/2 (prior knowledge) with `service`
/// behind a counter of admitted and refused requests.
async fn serve<S, B>(listener: TcpListener, service: S) -> Result<(), Box<dyn Error>>
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let counters = Arc::new(Counters::default());
    Arc::clone(&counters).print_every_second();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                eprintln!("accept: {error}");
                continue;
            }
        };
        let counted = Count {
            inner: service.clone(),
            counters: Arc::clone(&counters),
        };
        let service = TowerToHyperService::new(PeerAddrLayer::new(peer).layer(counted));
        tokio::spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            // A client that goes away mid-request is not the gateway's error.
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
