//! The gateway's command line.

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use http::{HeaderName, Uri};
use tollgate::middleware::{ClientIp, ForwardedHeader, IpRange};
use tollgate::Quota;

pub(crate) const USAGE: &str = "\
gateway: an HTTP reverse proxy with a tollgate rate limiter in its hot path.

USAGE:
    cargo run --release --features tower --example gateway -- [OPTIONS]

OPTIONS:
    --listen ADDR          where to listen                        [default: 127.0.0.1:8080]
    --upstream URL         the server to forward to, http://host:port
                           [default: a built-in upstream answering `hello`]
    --algorithm NAME       token | leaky | fixed | sliding | log    [default: token]
    --quota QUOTA          per key: `10/s`, `100/min`, `5/s burst 10` [default: 5/s burst 10]
    --key KEY              peer               the connection's IP   [default]
                           header:NAME        a header (an API key)
                           xff:CIDR,...       the client IP in X-Forwarded-For behind these proxies
                           forwarded:CIDR,... the same from Forwarded (RFC 7239)
    --capacity N           keys tracked at once                     [default: 100000]
    --redis URL            decide through Redis (redis://host:port/): every gateway with the
                           same URL, algorithm and quota shares one quota per key
                           (needs --features tower,redis; fails closed while Redis is away)
    --max-delay-ms MS      leaky bucket: the longest a request may wait for its slot
    --legacy               also write X-RateLimit-Limit/Remaining/Reset
    --no-admitted-fields   write the RateLimit fields on refusals only, not on admitted responses
    --no-limit             no rate limiter (a baseline for load tests)
    --help                 this text

Every second it prints, for that second, the requests admitted (forwarded upstream), refused
(429: over quota, or Redis away with --redis), unavailable (503: the key table was full) and
without a key (the layer's answer to a request it could not key).";

/// How requests are keyed.
#[derive(Clone, Debug)]
pub(crate) enum KeyChoice {
    Peer,
    Header(HeaderName),
    ClientIp(ClientIp),
}

/// Which algorithm limits each key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AlgorithmChoice {
    Token,
    Leaky,
    Fixed,
    Sliding,
    Log,
}

#[derive(Clone, Debug)]
pub(crate) struct Flags {
    pub(crate) listen: SocketAddr,
    pub(crate) upstream: Option<Uri>,
    pub(crate) algorithm: AlgorithmChoice,
    pub(crate) quota: Quota,
    pub(crate) key: KeyChoice,
    pub(crate) capacity: usize,
    pub(crate) max_delay: Option<Duration>,
    pub(crate) legacy: bool,
    pub(crate) admitted_fields: bool,
    pub(crate) limit: bool,
    pub(crate) redis: Option<String>,
}

impl Flags {
    /// Reads the flags; `Ok(None)` for `--help`.
    pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Flags>, Box<dyn Error>> {
        let mut flags = Flags {
            listen: "127.0.0.1:8080".parse()?,
            upstream: None,
            algorithm: AlgorithmChoice::Token,
            quota: "5/s burst 10".parse()?,
            key: KeyChoice::Peer,
            capacity: 100_000,
            max_delay: None,
            legacy: false,
            admitted_fields: true,
            limit: true,
            redis: None,
        };
        while let Some(flag) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| format!("{flag} needs a value (see --help)"))
            };
            match flag.as_str() {
                "--help" | "-h" => return Ok(None),
                "--listen" => flags.listen = value()?.parse().map_err(|e| format!("--listen: {e}"))?,
                "--upstream" => flags.upstream = Some(upstream(&value()?)?),
                "--algorithm" => flags.algorithm = algorithm(&value()?)?,
                "--quota" => flags.quota = value()?.parse().map_err(|e| format!("--quota: {e}"))?,
                "--key" => flags.key = key(&value()?)?,
                "--capacity" => flags.capacity = value()?.parse().map_err(|e| format!("--capacity: {e}"))?,
                "--max-delay-ms" => {
                    let ms: u64 = value()?.parse().map_err(|e| format!("--max-delay-ms: {e}"))?;
                    flags.max_delay = Some(Duration::from_millis(ms));
                }
                "--redis" => flags.redis = Some(value()?),
                "--legacy" => flags.legacy = true,
                "--no-admitted-fields" => flags.admitted_fields = false,
                "--no-limit" => flags.limit = false,
                other => return Err(format!("unknown option `{other}` (see --help)").into()),
            }
        }
        Ok(Some(flags))
    }
}

fn upstream(text: &str) -> Result<Uri, Box<dyn Error>> {
    let uri: Uri = text.parse().map_err(|e| format!("--upstream: {e}"))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err(format!(
            "--upstream: `{text}` is not http://host:port (TLS upstreams are not supported)"
        )
        .into());
    }
    Ok(uri)
}

fn algorithm(text: &str) -> Result<AlgorithmChoice, Box<dyn Error>> {
    Ok(match text {
        "token" | "token-bucket" | "gcra" => AlgorithmChoice::Token,
        "leaky" | "leaky-bucket" => AlgorithmChoice::Leaky,
        "fixed" | "fixed-window" => AlgorithmChoice::Fixed,
        "sliding" | "sliding-window" => AlgorithmChoice::Sliding,
        "log" | "sliding-log" => AlgorithmChoice::Log,
        other => {
            return Err(format!("--algorithm: `{other}` is not token, leaky, fixed, sliding or log").into())
        }
    })
}

fn key(text: &str) -> Result<KeyChoice, Box<dyn Error>> {
    let ranges = |list: &str| -> Result<Vec<IpRange>, Box<dyn Error>> {
        list.split(',')
            .map(|range| range.parse::<IpRange>().map_err(|e| format!("--key: {e}").into()))
            .collect()
    };
    Ok(match text.split_once(':') {
        None if text == "peer" => KeyChoice::Peer,
        Some(("header", name)) => {
            KeyChoice::Header(HeaderName::try_from(name).map_err(|e| format!("--key header:{name}: {e}"))?)
        }
        Some(("xff", list)) => KeyChoice::ClientIp(ClientIp::new(ranges(list)?)),
        Some(("forwarded", list)) => {
            KeyChoice::ClientIp(ClientIp::new(ranges(list)?).header(ForwardedHeader::Forwarded))
        }
        _ => {
            return Err(format!(
                "--key: `{text}` is not peer, header:NAME, xff:CIDR,... or forwarded:CIDR,..."
            )
            .into())
        }
    })
}
