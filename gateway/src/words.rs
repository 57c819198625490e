//! The configuration in words, for the banner and the reload lines: `token bucket, 5/s burst
//! 10, per client IP (IPv6 by /64)`, not `Debug` structs.

use tollgate::distributed::redacted_url;

use crate::forms::{KeyChoice, RedisAwayChoice, WhenFullChoice};
use crate::settings::{FieldSettings, RedisTarget, RouteSettings, Settings, Store};

/// The banner: where it listens and forwards, each route, the store, the fields.
pub(crate) fn banner(settings: &Settings, listening: std::net::SocketAddr) -> Vec<String> {
    let upstream = settings
        .upstream
        .as_ref()
        .map_or("built-in hello".to_owned(), ToString::to_string);
    let mut lines = vec![format!("listening on http://{listening} -> {upstream}")];
    let Some(limits) = &settings.limits else {
        lines.push("no rate limit (--no-limit)".to_owned());
        return lines;
    };
    for route in &limits.routes {
        lines.push(format!("route {}: {}", route.name, route_words(route)));
    }
    if limits
        .routes
        .iter()
        .all(|route| route.path.is_some() || route.method.is_some())
    {
        lines.push("requests matching no route: forwarded without a limit".to_owned());
    }
    lines.push(store_words(&limits.store));
    lines.push(fields_words(limits.fields));
    lines
}

/// `POST /login, token bucket, 5/min, per client IP (IPv6 by /64)`; a route of several policies
/// `/api, all of [burst token bucket 10/s, daily fixed window 10000/d], per x-api-key header`.
pub(crate) fn route_words(route: &RouteSettings) -> String {
    let requests = match (&route.method, &route.path) {
        (None, None) => "every request".to_owned(),
        (Some(method), None) => format!("{method} on every path"),
        (None, Some(path)) => path.clone(),
        (Some(method), Some(path)) => format!("{method} {path}"),
    };
    let waits = route.max_delay.map_or(String::new(), |max| {
        format!(", waiting at most {} ms", max.as_millis())
    });
    let limits = if route.policies.is_empty() {
        format!("{}, {}", route.algorithm, route.quota)
    } else {
        let each: Vec<String> = route
            .policies
            .iter()
            .map(|policy| format!("{} {} {}", policy.name, policy.algorithm, policy.quota))
            .collect();
        format!("all of [{}]", each.join(", "))
    };
    format!(
        "{requests}, {limits}{waits}, {}",
        key_words(&route.key, route.ipv6_prefix)
    )
}

/// `per client IP (IPv6 by /64)`, `per x-api-key header`.
fn key_words(key: &KeyChoice, ipv6_prefix: u8) -> String {
    let ipv6 = match ipv6_prefix {
        128 => "each IPv6 address".to_owned(),
        bits => format!("IPv6 by /{bits}"),
    };
    match key {
        KeyChoice::Peer => format!("per client IP ({ipv6})"),
        KeyChoice::Header(name) => format!("per {name} header"),
        KeyChoice::ClientIp { extractor, forwarded } => {
            let header = if *forwarded {
                "Forwarded"
            } else {
                "X-Forwarded-For"
            };
            let proxies: Vec<String> = extractor.trusted().iter().map(ToString::to_string).collect();
            format!(
                "per client IP from {header} behind {} ({ipv6})",
                proxies.join(", ")
            )
        }
    }
}

/// Where the keys are counted, and what happens when that fails.
pub(crate) fn store_words(store: &Store) -> String {
    match store {
        Store::Table { capacity, when_full } => {
            let full = match when_full {
                WhenFullChoice::Refuse => "a new key is refused (503)",
                WhenFullChoice::Admit => "a new key is admitted, uncounted",
            };
            format!("keys: in memory, room for at least {capacity} keys still being limited per route; when full, {full}")
        }
        Store::Redis {
            target,
            when_away,
            lease,
        } => {
            let away = match when_away {
                RedisAwayChoice::Refuse => "requests are refused (429, retry after 1 s)",
                RedisAwayChoice::Admit => "requests are forwarded, uncounted",
            };
            let away = if *lease {
                format!("{away} once this gateway's leases are spent; each gateway spends units leased from Redis")
            } else {
                away.to_owned()
            };
            match target {
                RedisTarget::Single(url) => format!(
                    "keys: in Redis at {}, shared by every gateway on it; while Redis is away, {away}",
                    redacted_url(url)
                ),
                RedisTarget::Cluster(seeds) => {
                    let seeds: Vec<String> = seeds.iter().map(|seed| redacted_url(seed)).collect();
                    format!(
                        "keys: in the Redis Cluster found from {}, each on the master of its slot, \
                         shared by every gateway on the cluster; while the cluster is away, {away}",
                        seeds.join(", ")
                    )
                }
            }
        }
    }
}

/// Which `RateLimit` fields responses carry.
pub(crate) fn fields_words(fields: FieldSettings) -> String {
    let which = if fields.on_admitted {
        "on every response"
    } else {
        "on refusals only"
    };
    let legacy = if fields.legacy { ", and X-RateLimit-*" } else { "" };
    format!("fields: RateLimit {which}{legacy}")
}
