//! The gateway's command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgAction, CommandFactory, Parser};
use http::Uri;
use tollgate::Quota;

use crate::forms::{self, AlgorithmChoice, KeyChoice, RedisAwayChoice, WhenFullChoice};
use crate::settings::{FieldSettings, Limits, RedisTarget, RouteSettings, Settings, Store};
use crate::trust::trusts_everyone;

const AFTER_HELP: &str = "\
With --config FILE the routes come from the file, which is reloaded on SIGHUP and when it
changes; the route flags (--algorithm, --quota, --key, --ipv6-prefix, --max-delay-ms) are then
refused, and every other flag given wins over the file. docs/gateway.md describes the file.

Every second in which anything happened it prints, for that second, the requests admitted
(forwarded upstream), refused (429: over quota, or Redis away), unavailable (503: the key table
was full) and without a key (the layer's answer to a request it could not key).

With --redis or --redis-cluster it asks Redis once per route before it listens: a configuration
no retry mends (a wrong or missing password, a database past the server's, a user without
permission, seeds that are not a cluster) stops it with the cause, exit status 1; Redis refusing
connections or not answering is a warning, and requests are answered by --when-redis-away until
Redis answers. Each second in which that policy decided, a line on stderr says how many times
on each route, and the cause of the last failure.";

/// An HTTP reverse proxy with a tollgate rate limiter in its hot path.
#[derive(Clone, Debug, Parser)]
#[command(name = "tollgate-gateway", version, after_help = AFTER_HELP, allow_negative_numbers = true)]
pub(crate) struct Flags {
    /// A TOML file with the routes, their keys and quotas, and the options below
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Where to listen, e.g. 127.0.0.1:8080 [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR", value_parser = forms::listen)]
    pub(crate) listen: Option<SocketAddr>,

    /// The server to forward to, http://host:port (no path: each request keeps its own)
    /// [default: a built-in upstream answering `hello`]
    #[arg(long, value_name = "URL", value_parser = forms::upstream)]
    pub(crate) upstream: Option<Uri>,

    /// Serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9090
    #[arg(long, value_name = "ADDR", value_parser = forms::listen)]
    pub(crate) metrics: Option<SocketAddr>,

    /// The algorithm limiting each key [default: token]
    #[arg(long, value_name = "NAME", value_enum)]
    pub(crate) algorithm: Option<AlgorithmChoice>,

    /// Per key: `10/s`, `100/min`, `5/s burst 10` (a burst only for token and leaky)
    /// [default: 5/s burst 10 for token and leaky, 5/s for fixed, sliding and log]
    #[arg(long, value_name = "QUOTA", value_parser = forms::quota)]
    pub(crate) quota: Option<Quota>,

    /// peer (the connection's IP, the default), header:NAME (an API key), xff:RANGES (the
    /// client IP in X-Forwarded-For behind these proxies, e.g. xff:10.0.0.0/8,fd00::/8),
    /// forwarded:RANGES (the same from Forwarded, RFC 7239)
    #[arg(long, value_name = "KEY", value_parser = forms::key)]
    pub(crate) key: Option<KeyChoice>,

    /// With an IP key: an IPv6 client is keyed by its first BITS bits (a client given a /64
    /// can change address at every request); 128 keys each address [default: 64]
    #[arg(long, value_name = "BITS", value_parser = forms::ipv6_prefix)]
    pub(crate) ipv6_prefix: Option<u8>,

    /// Each route's key table (not with Redis): room for at least N keys still being limited;
    /// idle keys beyond it are kept until their slots are needed [default: 100000]
    #[arg(long, value_name = "N", value_parser = forms::capacity)]
    pub(crate) capacity: Option<usize>,

    /// A new key when the table is full: refuse (503; a client flooding new keys gets other
    /// new clients refused) or admit (unlimited, uncounted, until room appears)
    /// [default: refuse]
    #[arg(long, value_name = "POLICY", value_enum)]
    pub(crate) when_full: Option<WhenFullChoice>,

    /// Decide through Redis, e.g. redis://127.0.0.1:6379/: every gateway with the same URL,
    /// route and quota shares one quota per key
    #[arg(long, value_name = "URL", value_parser = forms::redis_url)]
    pub(crate) redis: Option<String>,

    /// Decide through a Redis Cluster, found from a few of its nodes, e.g.
    /// redis://10.0.0.5:6379,redis://10.0.0.6:6379: each key is counted on the master of its
    /// slot (not with --redis)
    #[arg(
        long,
        value_name = "URL[,URL...]",
        value_parser = forms::redis_seed,
        value_delimiter = ',',
        action = ArgAction::Set,
        conflicts_with = "redis"
    )]
    pub(crate) redis_cluster: Option<Vec<String>>,

    /// While Redis does not answer: refuse (429, retry after 1 s) or admit (uncounted)
    /// [default: refuse]
    #[arg(long, value_name = "POLICY", value_enum)]
    pub(crate) when_redis_away: Option<RedisAwayChoice>,

    /// With Redis: spend units leased from each key's quota in Redis here, a round trip per
    /// lease instead of per request; the gateways together still never pass the quota
    /// (token bucket, fixed window, sliding window)
    #[arg(long)]
    pub(crate) lease: bool,

    /// Leaky bucket only: the longest a request may wait for its slot, e.g. 1000
    #[arg(long = "max-delay-ms", value_name = "MS", value_parser = forms::max_delay_ms)]
    pub(crate) max_delay: Option<Duration>,

    /// Also write X-RateLimit-Limit/Remaining/Reset
    #[arg(long)]
    pub(crate) legacy: bool,

    /// Write the RateLimit fields on refusals only, not on admitted responses
    #[arg(long)]
    pub(crate) no_admitted_fields: bool,

    /// Accept an xff: or forwarded: key whose trusted ranges hold every public address (any
    /// client could then pick its own key): only where every connection comes through your
    /// proxies
    #[arg(long)]
    pub(crate) trust_any_forwarder: bool,

    /// No rate limiter (a baseline for load tests; no limiter option may be given with it)
    #[arg(long)]
    pub(crate) no_limit: bool,
}

impl Flags {
    /// Reads the command line, or exits with clap's message (status 2; 0 for `--help`).
    pub(crate) fn read() -> Flags {
        let flags = Flags::parse();
        if let Err(error) = flags.check() {
            error.exit();
        }
        flags
    }

    /// Refuses combinations in which an option would be ignored, and a trusted range that
    /// trusts everyone: a gateway that starts is the gateway its command line asked for.
    pub(crate) fn check(&self) -> Result<(), clap::Error> {
        let refuse = |message: String| Err(Flags::command().error(ErrorKind::ArgumentConflict, message));
        if self.no_limit {
            if let Some(option) = self.limiter_options().first() {
                return refuse(format!(
                    "{option} configures the rate limiter, and --no-limit runs without one"
                ));
            }
        }
        if self.config.is_some() {
            if let Some(option) = self.route_options().first() {
                return refuse(format!(
                    "{option}: with --config the routes come from the file; set it in a [[route]] there"
                ));
            }
            return Ok(());
        }
        if self.ipv6_prefix.is_some() && matches!(self.key, Some(KeyChoice::Header(_))) {
            return refuse(
                "--ipv6-prefix: only an IP key (--key peer, xff:..., forwarded:...) has an address to cut"
                    .into(),
            );
        }
        let algorithm = self.algorithm.unwrap_or(AlgorithmChoice::Token);
        if self.max_delay.is_some() && algorithm != AlgorithmChoice::Leaky {
            return refuse(format!(
                "--max-delay-ms: only the leaky bucket (--algorithm leaky) makes requests wait; the {algorithm} never does"
            ));
        }
        if let Some(quota) = self.quota {
            if let Err(error) = algorithm.accepts(quota) {
                return refuse(format!("--quota {quota}: {error}"));
            }
        }
        if let Some(redis) = self.redis_option() {
            if let Some(option) = self.table_option() {
                return refuse(format!(
                    "{option}: with {redis} the keys live in Redis, not in a table of the gateway"
                ));
            }
        } else if self.when_redis_away.is_some() {
            return refuse(
                "--when-redis-away: only with --redis (e.g. --redis redis://127.0.0.1:6379/) or --redis-cluster"
                    .into(),
            );
        } else if self.lease {
            return refuse(
                "--lease: leases are taken from Redis; give --redis (e.g. --redis redis://127.0.0.1:6379/) \
                 or --redis-cluster"
                    .into(),
            );
        }
        if self.lease
            && !matches!(
                algorithm,
                AlgorithmChoice::Token | AlgorithmChoice::Fixed | AlgorithmChoice::Sliding
            )
        {
            return refuse(format!(
                "--lease: the {algorithm} cannot be leased; lease a token bucket (--algorithm token), a \
                 fixed window (--algorithm fixed) or a sliding window (--algorithm sliding), or decide \
                 each request in Redis without --lease"
            ));
        }
        if let (Some(KeyChoice::ClientIp { extractor, .. }), false) = (&self.key, self.trust_any_forwarder) {
            if let Some(family) = trusts_everyone(extractor.trusted()) {
                return refuse(format!(
                    "--key: its trusted ranges hold every public {family} address, so any client could pick its own key \
                     by writing the forwarding header; trust only your proxies (e.g. --key xff:10.0.0.0/8), \
                     or give --trust-any-forwarder if every connection comes through them"
                ));
            }
        }
        Ok(())
    }

    /// The options given that configure the limiter.
    fn limiter_options(&self) -> Vec<&'static str> {
        let mut given = self.route_options();
        for (option, is_given) in [
            ("--config", self.config.is_some()),
            ("--capacity", self.capacity.is_some()),
            ("--when-full", self.when_full.is_some()),
            ("--redis", self.redis.is_some()),
            ("--redis-cluster", self.redis_cluster.is_some()),
            ("--when-redis-away", self.when_redis_away.is_some()),
            ("--lease", self.lease),
            ("--legacy", self.legacy),
            ("--no-admitted-fields", self.no_admitted_fields),
            ("--trust-any-forwarder", self.trust_any_forwarder),
        ] {
            if is_given {
                given.push(option);
            }
        }
        given
    }

    /// The flag given for a Redis store, if any.
    pub(crate) fn redis_option(&self) -> Option<&'static str> {
        if self.redis.is_some() {
            Some("--redis")
        } else {
            self.redis_cluster.as_ref().map(|_| "--redis-cluster")
        }
    }

    /// The Redis the flags name, if any (clap refuses both at once).
    fn redis_target(&self) -> Option<RedisTarget> {
        match (&self.redis, &self.redis_cluster) {
            (Some(url), _) => Some(RedisTarget::Single(url.clone())),
            (None, Some(seeds)) => Some(RedisTarget::Cluster(seeds.clone())),
            (None, None) => None,
        }
    }

    /// The first option given for a table of keys in the gateway.
    pub(crate) fn table_option(&self) -> Option<&'static str> {
        if self.capacity.is_some() {
            Some("--capacity")
        } else {
            self.when_full.map(|_| "--when-full")
        }
    }

    /// The options given that describe the quick start's one route.
    fn route_options(&self) -> Vec<&'static str> {
        [
            ("--algorithm", self.algorithm.is_some()),
            ("--quota", self.quota.is_some()),
            ("--key", self.key.is_some()),
            ("--ipv6-prefix", self.ipv6_prefix.is_some()),
            ("--max-delay-ms", self.max_delay.is_some()),
        ]
        .into_iter()
        .filter_map(|(option, given)| given.then_some(option))
        .collect()
    }

    /// The quick start: one route for every request, from the flags alone (checked).
    pub(crate) fn quick_start(&self) -> Result<Settings, String> {
        let limits = if self.no_limit {
            None
        } else {
            let algorithm = self.algorithm.unwrap_or(AlgorithmChoice::Token);
            let quota = match self.quota {
                Some(quota) => quota,
                None => algorithm
                    .default_quota()
                    .map_err(|e| format!("the {algorithm}'s default quota: {e}"))?,
            };
            let route = RouteSettings {
                name: RouteSettings::QUICK_START_NAME.to_owned(),
                path: None,
                method: None,
                key: self.key.clone().unwrap_or(KeyChoice::Peer),
                ipv6_prefix: self.ipv6_prefix.unwrap_or(RouteSettings::DEFAULT_IPV6_PREFIX),
                algorithm,
                quota,
                policies: Vec::new(),
                max_delay: self.max_delay,
            };
            Some(Limits {
                routes: vec![route],
                store: self.store(None),
                fields: self.fields(FieldSettings {
                    legacy: false,
                    on_admitted: true,
                }),
            })
        };
        Ok(Settings {
            listen: self.listen.unwrap_or_else(default_listen),
            upstream: self.upstream.clone(),
            metrics: self.metrics,
            limits,
        })
    }

    /// The store the flags ask for, over the file's (`None`: no file, or none in it): a Redis
    /// named by a flag replaces the file's, which keeps its `when_away`.
    pub(crate) fn store(&self, file: Option<Store>) -> Store {
        match (self.redis_target(), file) {
            (Some(target), Some(Store::Redis { when_away, lease, .. })) => Store::Redis {
                target,
                when_away: self.when_redis_away.unwrap_or(when_away),
                lease: self.lease || lease,
            },
            (Some(target), _) => Store::Redis {
                target,
                when_away: self.when_redis_away.unwrap_or(RedisAwayChoice::Refuse),
                lease: self.lease,
            },
            (
                None,
                Some(Store::Redis {
                    target,
                    when_away,
                    lease,
                }),
            ) => Store::Redis {
                target,
                when_away: self.when_redis_away.unwrap_or(when_away),
                lease: self.lease || lease,
            },
            (None, Some(Store::Table { capacity, when_full })) => Store::Table {
                capacity: self.capacity.unwrap_or(capacity),
                when_full: self.when_full.unwrap_or(when_full),
            },
            (None, None) => Store::Table {
                capacity: self.capacity.unwrap_or(Store::DEFAULT_CAPACITY),
                when_full: self.when_full.unwrap_or(WhenFullChoice::Refuse),
            },
        }
    }

    /// The fields the flags ask for, over `file`'s.
    pub(crate) fn fields(&self, file: FieldSettings) -> FieldSettings {
        FieldSettings {
            legacy: file.legacy || self.legacy,
            on_admitted: file.on_admitted && !self.no_admitted_fields,
        }
    }
}

/// `127.0.0.1:8080`.
pub(crate) fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Flags, String> {
        let flags = Flags::try_parse_from(std::iter::once("tollgate-gateway").chain(args.iter().copied()))
            .map_err(|error| error.to_string())?;
        flags.check().map_err(|error| error.to_string())?;
        Ok(flags)
    }

    fn error(args: &[&str]) -> String {
        parse(args).err().unwrap_or_default()
    }

    #[test]
    fn errors_name_their_option() {
        let zero = error(&["--capacity", "0"]);
        assert!(zero.contains("'--capacity <N>'"), "{zero}");
        assert!(
            zero.contains("the key table needs room for at least one key"),
            "{zero}"
        );
        let many = error(&["--capacity", "many"]);
        assert!(
            many.contains("invalid value 'many' for '--capacity <N>'"),
            "{many}"
        );
        assert!(many.contains("e.g. 100000"), "{many}");
        assert!(error(&["--quota", "0/s"]).contains("for '--quota <QUOTA>': invalid quota"));
    }

    #[test]
    fn every_value_error_shows_the_expected_form() {
        for (args, form) in [
            (&["--listen", "foo"][..], "e.g. 127.0.0.1:8080"),
            (&["--capacity", "-1"], "e.g. 100000"),
            (&["--ipv6-prefix", "129"], "e.g. 64"),
            (&["--max-delay-ms", "soon"], "e.g. 1000"),
            (&["--quota", "fast"], "for example `100/min`"),
            (
                &["--key", "cookie"],
                "e.g. peer, header:x-api-key or xff:10.0.0.0/8",
            ),
            (&["--key", "xff:10.0.0.0/33"], "such as 10.0.0.0/8"),
            (&["--upstream", "127.0.0.1:3000"], "write http://127.0.0.1:3000"),
            (&["--redis", "127.0.0.1:6379"], "e.g. redis://127.0.0.1:6379/"),
            (&["--metrics", "9090"], "e.g. 127.0.0.1:8080"),
            (
                &["--algorithm", "bucket"],
                "[possible values: token, leaky, fixed, sliding, log]",
            ),
            (&["--when-full", "drop"], "[possible values: refuse, admit]"),
        ] {
            let message = error(args);
            assert!(message.contains(form), "{args:?}: {message}");
        }
    }

    #[test]
    fn a_flag_given_twice_is_an_error() {
        for args in [
            &["--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"][..],
            &["--quota", "1/s", "--quota", "2/s"],
            &["--legacy", "--legacy"],
        ] {
            assert!(error(args).contains("cannot be used multiple times"), "{args:?}");
        }
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
        assert!(error(&["--upstream", "127.0.0.1:3000"])
            .contains("`127.0.0.1:3000` has no scheme; write http://127.0.0.1:3000"));
        assert!(error(&["--upstream", "https://example.com"]).contains("TLS upstreams are not supported"));
        // User information would be sent on as every request's `Host`; a fragment was dropped.
        assert!(error(&["--upstream", "http://user:pw@127.0.0.1:3000"]).contains("user information"));
        assert!(error(&["--upstream", "http://127.0.0.1:3000#frag"]).contains("has a fragment"));
        assert!(error(&["--upstream", "ftp://example.com"]).contains("is not http://host:port"));
    }

    #[test]
    fn options_that_would_be_ignored_are_errors() {
        assert!(error(&["--no-limit", "--redis", "redis://127.0.0.1/"])
            .contains("--redis configures the rate limiter, and --no-limit runs without one"));
        assert!(error(&["--legacy", "--no-limit"])
            .contains("--legacy configures the rate limiter, and --no-limit runs without one"));
        assert!(error(&["--max-delay-ms", "100"]).contains("--max-delay-ms: only the leaky bucket"));
        assert!(error(&["--key", "header:x-api-key", "--ipv6-prefix", "56"]).contains("only an IP key"));
        assert!(error(&["--ipv6-prefix", "129"]).contains("from 0 to 128"));
        assert_eq!(
            parse(&["--key", "xff:10.0.0.0/8", "--ipv6-prefix", "56"]).map(|f| f.ipv6_prefix),
            Ok(Some(56))
        );
        assert!(
            error(&["--algorithm", "fixed", "--max-delay-ms", "100"]).contains("the fixed window never does")
        );
        assert!(parse(&["--algorithm", "leaky", "--max-delay-ms", "100"]).is_ok());
        assert!(parse(&["--no-limit", "--listen", "127.0.0.1:0"]).is_ok());
        assert!(error(&["--redis", "redis://127.0.0.1/", "--capacity", "10"])
            .contains("--capacity: with --redis the keys live in Redis, not in a table of the gateway"));
        assert!(error(&["--redis", "redis://127.0.0.1/", "--when-full", "admit"])
            .contains("--when-full: with --redis the keys live in Redis"));
        assert!(error(&["--when-redis-away", "admit"]).contains("only with --redis"));
        assert!(error(&["--config", "g.toml", "--quota", "1/s"])
            .contains("--quota: with --config the routes come from the file"));
        assert!(error(&["--config", "g.toml", "--no-limit"]).contains("--config configures the rate limiter"));
        assert!(parse(&[
            "--config",
            "g.toml",
            "--listen",
            "127.0.0.1:0",
            "--capacity",
            "10"
        ])
        .is_ok());
    }

    #[test]
    fn a_redis_cluster_is_a_list_of_seeds_exclusive_with_one_redis() {
        let seeds = "redis://127.0.0.1:7000,redis://:pw@127.0.0.1:7001";
        let store = parse(&["--redis-cluster", seeds, "--when-redis-away", "admit"])
            .and_then(|flags| flags.quick_start())
            .map(|settings| settings.limits.map(|limits| limits.store));
        assert_eq!(
            store,
            Ok(Some(Store::Redis {
                target: RedisTarget::Cluster(vec![
                    "redis://127.0.0.1:7000".to_owned(),
                    "redis://:pw@127.0.0.1:7001".to_owned()
                ]),
                when_away: RedisAwayChoice::Admit,
                lease: false,
            }))
        );
        let both = error(&["--redis", "redis://127.0.0.1/", "--redis-cluster", seeds]);
        assert!(both.contains("cannot be used with"), "{both}");
        let twice = error(&["--redis-cluster", seeds, "--redis-cluster", seeds]);
        assert!(twice.contains("cannot be used multiple times"), "{twice}");
        let bare = error(&["--redis-cluster", "redis://127.0.0.1:7000,127.0.0.1:7001"]);
        assert!(
            bare.contains(
                "`127.0.0.1:7001` is not a Redis Cluster node's URL; expected e.g. redis://127.0.0.1:7000"
            ),
            "{bare}"
        );
        assert!(error(&["--redis-cluster", "unix:///tmp/redis.sock"])
            .contains("is not a Redis Cluster node's URL"));
        assert!(error(&["--redis-cluster", seeds, "--capacity", "10"])
            .contains("--capacity: with --redis-cluster the keys live in Redis"));
        assert!(error(&["--no-limit", "--redis-cluster", seeds])
            .contains("--redis-cluster configures the rate limiter"));
    }

    #[test]
    fn a_trusted_range_holding_everyone_needs_its_own_flag() {
        for everyone in [
            "xff:0.0.0.0/0",
            "forwarded:::/0",
            "xff:10.0.0.0/8,0.0.0.0/1,128.0.0.0/1",
        ] {
            let message = error(&["--key", everyone]);
            assert!(message.contains("--trust-any-forwarder"), "{everyone}: {message}");
            assert!(
                parse(&["--key", everyone, "--trust-any-forwarder"]).is_ok(),
                "{everyone}"
            );
        }
        assert!(parse(&["--key", "xff:10.0.0.0/8,fd00::/8"]).is_ok());
    }

    #[test]
    fn each_algorithm_gets_a_default_quota_it_accepts() {
        for algorithm in ["token", "leaky", "fixed", "sliding", "log"] {
            let flags = parse(&["--algorithm", algorithm]).map_err(|e| format!("{algorithm}: {e}"));
            let settings = flags.and_then(|flags| flags.quick_start());
            let route = settings
                .as_ref()
                .ok()
                .and_then(|s| s.limits.as_ref())
                .map(|l| l.routes[0].clone());
            let accepted = route.as_ref().map(|route| route.algorithm.accepts(route.quota));
            assert_eq!(accepted, Some(Ok(())), "{algorithm}");
            let expected = if matches!(algorithm, "token" | "leaky") {
                "5/s burst 10"
            } else {
                "5/s"
            };
            let quota = route.map(|route| route.quota.to_string());
            assert_eq!(quota, Some(expected.to_owned()), "{algorithm}");
        }
    }
}
