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
    --upstream URL         the server to forward to, http://host:port (no path: each
                           request keeps its own) [default: a built-in upstream answering `hello`]
    --algorithm NAME       token | leaky | fixed | sliding | log    [default: token]
    --quota QUOTA          per key: `10/s`, `100/min`, `5/s burst 10` [default: 5/s burst 10]
    --key KEY              peer               the connection's IP   [default]
                           header:NAME        a header (an API key)
                           xff:CIDR,...       the client IP in X-Forwarded-For behind these proxies
                           forwarded:CIDR,... the same from Forwarded (RFC 7239)
    --ipv6-prefix BITS     with an IP key: an IPv6 client is keyed by its first BITS bits (a
                           client given a /64 can change address at every request); 128 keys
                           each address                           [default: 64]
    --capacity N           keys tracked at once (not with --redis)  [default: 100000]
    --redis URL            decide through Redis (redis://host:port/): every gateway with the
                           same URL, algorithm and quota shares one quota per key
                           (needs --features tower,redis; fails closed while Redis is away:
                           429, retry after 1 s)
    --max-delay-ms MS      leaky bucket only: the longest a request may wait for its slot
    --legacy               also write X-RateLimit-Limit/Remaining/Reset
    --no-admitted-fields   write the RateLimit fields on refusals only, not on admitted responses
    --no-limit             no rate limiter (a baseline for load tests; no limiter option
                           may be given with it)
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
    /// The prefix an IPv6 client's address is cut to when keying by IP.
    pub(crate) ipv6_prefix: u8,
    pub(crate) capacity: usize,
    pub(crate) max_delay: Option<Duration>,
    pub(crate) legacy: bool,
    pub(crate) admitted_fields: bool,
    pub(crate) limit: bool,
    pub(crate) redis: Option<String>,
}

impl Flags {
    /// Reads the flags; `Ok(None)` for `--help`. Options that would be ignored (a limiter's
    /// options with `--no-limit`, `--max-delay-ms` without the leaky bucket...) are errors, and
    /// so is `--redis` in a build without the `redis` feature: a gateway that starts is the
    /// gateway its command line asked for.
    pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Flags>, Box<dyn Error>> {
        let mut flags = Flags {
            listen: "127.0.0.1:8080".parse()?,
            upstream: None,
            algorithm: AlgorithmChoice::Token,
            quota: "5/s burst 10".parse()?,
            key: KeyChoice::Peer,
            ipv6_prefix: 64,
            capacity: 100_000,
            max_delay: None,
            legacy: false,
            admitted_fields: true,
            limit: true,
            redis: None,
        };
        // The options given that configure the limiter, in order.
        let mut limiter_options: Vec<&'static str> = Vec::new();
        while let Some(flag) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| format!("{flag} needs a value (see --help)"))
            };
            let option: &'static str = match flag.as_str() {
                "--help" | "-h" => return Ok(None),
                "--listen" => {
                    flags.listen = value()?.parse().map_err(|e| format!("--listen: {e}"))?;
                    continue;
                }
                "--upstream" => {
                    flags.upstream = Some(upstream(&value()?)?);
                    continue;
                }
                "--no-limit" => {
                    flags.limit = false;
                    continue;
                }
                "--algorithm" => {
                    flags.algorithm = algorithm(&value()?)?;
                    "--algorithm"
                }
                "--quota" => {
                    flags.quota = value()?.parse().map_err(|e| format!("--quota: {e}"))?;
                    "--quota"
                }
                "--key" => {
                    flags.key = key(&value()?)?;
                    "--key"
                }
                "--ipv6-prefix" => {
                    let text = value()?;
                    flags.ipv6_prefix =
                        text.parse().ok().filter(|&bits| bits <= 128).ok_or_else(|| {
                            format!("--ipv6-prefix `{text}`: a number of bits from 0 to 128")
                        })?;
                    "--ipv6-prefix"
                }
                "--capacity" => {
                    let text = value()?;
                    flags.capacity = text.parse().map_err(|e| format!("--capacity `{text}`: {e}"))?;
                    if flags.capacity == 0 {
                        return Err("--capacity 0: the key table needs room for at least one key".into());
                    }
                    "--capacity"
                }
                "--max-delay-ms" => {
                    let ms: u64 = value()?.parse().map_err(|e| format!("--max-delay-ms: {e}"))?;
                    flags.max_delay = Some(Duration::from_millis(ms));
                    "--max-delay-ms"
                }
                "--redis" => {
                    flags.redis = Some(value()?);
                    "--redis"
                }
                "--legacy" => {
                    flags.legacy = true;
                    "--legacy"
                }
                "--no-admitted-fields" => {
                    flags.admitted_fields = false;
                    "--no-admitted-fields"
                }
                other => return Err(format!("unknown option `{other}` (see --help)").into()),
            };
            limiter_options.push(option);
        }
        flags.check(&limiter_options)?;
        Ok(Some(flags))
    }

    /// Refuses combinations in which an option would be ignored.
    fn check(&self, limiter_options: &[&str]) -> Result<(), Box<dyn Error>> {
        if let (false, Some(option)) = (self.limit, limiter_options.first()) {
            return Err(
                format!("{option} configures the rate limiter, and --no-limit runs without one").into(),
            );
        }
        if limiter_options.contains(&"--ipv6-prefix") && matches!(self.key, KeyChoice::Header(_)) {
            return Err(
                "--ipv6-prefix: only an IP key (--key peer, xff:..., forwarded:...) has an address to cut"
                    .into(),
            );
        }
        if self.max_delay.is_some() && self.algorithm != AlgorithmChoice::Leaky {
            return Err(format!(
                "--max-delay-ms: only the leaky bucket (--algorithm leaky) makes requests wait; {:?} never does",
                self.algorithm
            )
            .into());
        }
        if let Some(url) = &self.redis {
            if !cfg!(feature = "redis") {
                return Err(format!(
                    "--redis {url}: this gateway was built without the `redis` feature \
                     (cargo run --release --features tower,redis --example gateway -- ...)"
                )
                .into());
            }
            if limiter_options.contains(&"--capacity") {
                return Err(
                    "--capacity: with --redis the keys live in Redis, not in a table of the gateway".into(),
                );
            }
        }
        Ok(())
    }
}

/// An upstream base: `http://host:port`, nothing after it (each request's own path and query
/// are forwarded as they are, so a base path would be dropped).
fn upstream(text: &str) -> Result<Uri, Box<dyn Error>> {
    // `http::Uri` drops a fragment without a word, and would keep user information in the
    // authority, which the proxy sends on as the `Host` of every request.
    if text.contains('#') {
        return Err(format!("--upstream: `{text}` has a fragment; give http://host:port").into());
    }
    let uri: Uri = text.parse().map_err(|e| format!("--upstream: {e}"))?;
    if uri
        .authority()
        .is_some_and(|authority| authority.as_str().contains('@'))
    {
        return Err(
            "--upstream: user information (`user:password@`) is not supported; give http://host:port".into(),
        );
    }
    match uri.scheme_str() {
        Some("http") if uri.authority().is_some() => {}
        Some("https") => {
            return Err(format!(
                "--upstream: `{text}`: TLS upstreams are not supported; give http://host:port"
            )
            .into())
        }
        None => return Err(format!("--upstream: `{text}` has no scheme; write http://{text}").into()),
        Some(_) => return Err(format!("--upstream: `{text}` is not http://host:port").into()),
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(format!(
            "--upstream: `{text}` has a path or query; give http://host:port (each request keeps its own path)"
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Flags>, String> {
        Flags::parse(args.iter().map(|arg| (*arg).to_owned())).map_err(|error| error.to_string())
    }

    fn error(args: &[&str]) -> String {
        parse(args).err().unwrap_or_default()
    }

    #[test]
    fn errors_name_their_option() {
        assert_eq!(
            error(&["--capacity", "0"]),
            "--capacity 0: the key table needs room for at least one key"
        );
        assert!(error(&["--capacity", "many"]).starts_with("--capacity `many`: "));
        assert!(error(&["--quota", "0/s"]).starts_with("--quota: "));
    }

    #[test]
    fn an_upstream_base_has_no_path_nor_query() {
        for base in [
            "http://127.0.0.1:3000/api",
            "http://127.0.0.1:3000/?q",
            "http://x/path?q",
        ] {
            assert!(
                error(&["--upstream", base]).contains("has a path or query"),
                "{base}"
            );
        }
        for base in ["http://127.0.0.1:3000", "http://127.0.0.1:3000/"] {
            assert!(parse(&["--upstream", base]).is_ok(), "{base}");
        }
    }

    #[test]
    fn an_upstream_error_says_what_is_missing() {
        assert_eq!(
            error(&["--upstream", "127.0.0.1:3000"]),
            "--upstream: `127.0.0.1:3000` has no scheme; write http://127.0.0.1:3000"
        );
        assert!(error(&["--upstream", "https://example.com"]).contains("TLS upstreams are not supported"));
        // User information would be sent on as every request's `Host`; a fragment was dropped.
        assert!(error(&["--upstream", "http://user:pw@127.0.0.1:3000"]).contains("user information"));
        assert!(error(&["--upstream", "http://127.0.0.1:3000#frag"]).contains("has a fragment"));
        assert!(error(&["--upstream", "ftp://example.com"]).contains("is not http://host:port"));
    }

    #[test]
    fn options_that_would_be_ignored_are_errors() {
        assert_eq!(
            error(&["--no-limit", "--redis", "redis://127.0.0.1/"]),
            "--redis configures the rate limiter, and --no-limit runs without one"
        );
        assert_eq!(
            error(&["--legacy", "--no-limit"]),
            "--legacy configures the rate limiter, and --no-limit runs without one"
        );
        assert!(error(&["--max-delay-ms", "100"]).starts_with("--max-delay-ms: only the leaky bucket"));
        assert!(error(&["--key", "header:x-api-key", "--ipv6-prefix", "56"]).contains("only an IP key"));
        assert!(error(&["--ipv6-prefix", "129"]).contains("from 0 to 128"));
        assert_eq!(
            parse(&["--key", "xff:10.0.0.0/8", "--ipv6-prefix", "56"]).map(|f| f.map(|f| f.ipv6_prefix)),
            Ok(Some(56))
        );
        assert!(error(&["--algorithm", "fixed", "--max-delay-ms", "100"]).contains("Fixed never does"));
        assert!(parse(&["--algorithm", "leaky", "--max-delay-ms", "100"]).is_ok());
        assert!(parse(&["--no-limit", "--listen", "127.0.0.1:0"]).is_ok());
        if cfg!(feature = "redis") {
            assert_eq!(
                error(&["--redis", "redis://127.0.0.1/", "--capacity", "10"]),
                "--capacity: with --redis the keys live in Redis, not in a table of the gateway"
            );
        } else {
            assert!(error(&["--redis", "redis://127.0.0.1/"]).contains("built without the `redis` feature"));
        }
    }
}
