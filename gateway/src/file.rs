//! The configuration file (TOML): its schema, and how it becomes [`Settings`] under the flags
//! that win over it. `gateway/gateway.toml` is a commented sample; `docs/gateway.md` describes
//! every field.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use crate::flags::{default_listen, Flags};
use crate::forms::{self, AlgorithmChoice, KeyChoice, RedisAwayChoice, WhenFullChoice};
use crate::settings::{FieldSettings, Limits, NamedPolicy, RedisTarget, RouteSettings, Settings, Store};
use crate::trust::trusts_everyone;

/// The whole file. Unknown fields are errors: a misspelt option would otherwise be ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    listen: Option<String>,
    upstream: Option<String>,
    metrics: Option<String>,
    #[serde(default)]
    trust_any_forwarder: bool,
    table: Option<TableSection>,
    redis: Option<RedisSection>,
    fields: Option<FieldsSection>,
    #[serde(default, rename = "route")]
    routes: Vec<RouteSection>,
}

/// `[table]`: the keys each route keeps in this process.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableSection {
    capacity: Option<i64>,
    when_full: Option<WhenFullChoice>,
}

/// `[redis]`: the keys kept in Redis instead, shared by every gateway on it: one Redis (`url`)
/// or a Redis Cluster (`cluster`, its seed nodes), one of the two.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RedisSection {
    url: Option<String>,
    cluster: Option<Vec<String>>,
    when_away: Option<RedisAwayChoice>,
    lease: Option<bool>,
}

/// `[fields]`: the `RateLimit` fields responses carry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldsSection {
    legacy: Option<bool>,
    on_admitted: Option<bool>,
}

/// One `[[route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteSection {
    name: String,
    path: Option<String>,
    method: Option<String>,
    key: Option<String>,
    ipv6_prefix: Option<i64>,
    algorithm: Option<AlgorithmChoice>,
    quota: Option<String>,
    policies: Option<Vec<PolicySection>>,
    max_delay_ms: Option<i64>,
}

/// One of a route's `policies`: `{ name = "burst", quota = "10/s" }`, its algorithm the route's
/// unless it names its own.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicySection {
    name: String,
    quota: String,
    algorithm: Option<AlgorithmChoice>,
}

/// The form of `policies`, for the errors about it.
const POLICIES_FORM: &str =
    "policies = [{ name = \"burst\", quota = \"10/s\" }, { name = \"daily\", quota = \"10000/day\" }]";

/// Reads the file at `path` under `flags`: the settings, or what to fix, naming the file and
/// the field.
pub(crate) fn read(path: &Path, flags: &Flags) -> Result<(Settings, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let settings = settings(&text, flags).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((settings, text))
}

/// The settings `text` describes, with `flags` winning over it.
pub(crate) fn settings(text: &str, flags: &Flags) -> Result<Settings, String> {
    let file: File = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    let listen = match (flags.listen, &file.listen) {
        (Some(listen), _) => listen,
        (None, Some(text)) => forms::listen(text).map_err(|e| format!("listen: {e}"))?,
        (None, None) => default_listen(),
    };
    let upstream = match (&flags.upstream, &file.upstream) {
        (Some(upstream), _) => Some(upstream.clone()),
        (None, Some(text)) => Some(forms::upstream(text).map_err(|e| format!("upstream: {e}"))?),
        (None, None) => None,
    };
    let metrics = match (flags.metrics, &file.metrics) {
        (Some(metrics), _) => Some(metrics),
        (None, Some(text)) => Some(forms::listen(text).map_err(|e| format!("metrics: {e}"))?),
        (None, None) => None,
    };
    let store = flags.store(file_store(&file)?);
    if let (Store::Redis { .. }, Some(option)) = (&store, flags.table_option()) {
        return Err(format!(
            "{option}: the keys live in Redis ([redis], --redis or --redis-cluster), not in a table of the gateway"
        ));
    }
    // The file cannot hold both [table] and [redis]: Redis here comes from a flag.
    if let (Store::Redis { .. }, Some(_), Some(option)) = (&store, &file.table, flags.redis_option()) {
        return Err(format!(
            "[table]: with {option} the keys live in Redis, not in a table of the gateway; remove [table]"
        ));
    }
    if let (Store::Table { .. }, Some(_)) = (&store, flags.when_redis_away) {
        return Err(
            "--when-redis-away: only with Redis ([redis] in the file, --redis or --redis-cluster)".to_owned(),
        );
    }
    if let (Store::Table { .. }, true) = (&store, flags.lease) {
        return Err(
            "--lease: leases are taken from Redis; give [redis] in the file, --redis or --redis-cluster"
                .to_owned(),
        );
    }
    let fields = flags.fields(FieldSettings {
        legacy: file.fields.as_ref().and_then(|f| f.legacy).unwrap_or(false),
        on_admitted: file.fields.as_ref().and_then(|f| f.on_admitted).unwrap_or(true),
    });
    if file.routes.is_empty() {
        return Err(
            "no [[route]]: every request would pass unlimited; add one (see gateway/gateway.toml), \
                    or run with --no-limit"
                .to_owned(),
        );
    }
    let trust_any = file.trust_any_forwarder || flags.trust_any_forwarder;
    let mut names = HashSet::new();
    let mut routes = Vec::with_capacity(file.routes.len());
    for section in &file.routes {
        let route = route(section, trust_any).map_err(|e| format!("route `{}`: {e}", section.name))?;
        if !names.insert(route.name.clone()) {
            return Err(format!(
                "route `{}` is named twice; each route needs its own name",
                route.name
            ));
        }
        if let (Store::Redis { .. }, false) = (&store, route.policies.is_empty()) {
            return Err(format!(
                "route `{}`: policies: several policies per route are decided all or nothing in this \
                 gateway's memory, not in Redis; give the route one quota (quota = \"10/s\"), or count in \
                 [table] instead of [redis]",
                route.name
            ));
        }
        routes.push(route);
    }
    Ok(Settings {
        listen,
        upstream,
        metrics,
        limits: Some(Limits {
            routes,
            store,
            fields,
        }),
    })
}

/// A TOML error on one line (the parser's own spans several, with a picture): where, and why.
fn toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end().replace('\n', " ");
    let Some(at) = error.span().map(|span| span.start.min(text.len())) else {
        return message;
    };
    let before = text.get(..at).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before.chars().rev().take_while(|&c| c != '\n').count() + 1;
    format!("line {line}, column {column}: {message}")
}

/// The file's `[table]` or `[redis]`, if either.
fn file_store(file: &File) -> Result<Option<Store>, String> {
    match (&file.table, &file.redis) {
        (Some(_), Some(_)) => Err(
            "[table] and [redis]: keys live in one or the other; remove [table] \
                                   (with Redis the keys live in Redis)"
                .to_owned(),
        ),
        (Some(table), None) => Ok(Some(Store::Table {
            capacity: match table.capacity {
                Some(keys) => {
                    forms::capacity(&keys.to_string()).map_err(|e| format!("table.capacity: {e}"))?
                }
                None => Store::DEFAULT_CAPACITY,
            },
            when_full: table.when_full.unwrap_or(WhenFullChoice::Refuse),
        })),
        (None, Some(redis)) => Ok(Some(Store::Redis {
            target: redis_target(redis)?,
            when_away: redis.when_away.unwrap_or(RedisAwayChoice::Refuse),
            lease: redis.lease.unwrap_or(false),
        })),
        (None, None) => Ok(None),
    }
}

/// The `[redis]` section's `url` or `cluster`, checked: exactly one of them.
fn redis_target(redis: &RedisSection) -> Result<RedisTarget, String> {
    match (&redis.url, &redis.cluster) {
        (Some(_), Some(_)) => Err(
            "[redis]: `url` (one Redis) and `cluster` (a Redis Cluster's nodes) name two stores; keep one"
                .to_owned(),
        ),
        (None, None) => Err(
            "[redis]: no Redis named; give url = \"redis://127.0.0.1:6379/\" for one Redis, \
             or cluster = [\"redis://127.0.0.1:7000\", \"redis://127.0.0.1:7001\"] for a Redis Cluster"
                .to_owned(),
        ),
        (Some(url), None) => Ok(RedisTarget::Single(
            forms::redis_url(url).map_err(|e| format!("redis.url: {e}"))?,
        )),
        (None, Some(seeds)) if seeds.is_empty() => {
            Err("redis.cluster: no seed node; list a few of the cluster's nodes, \
             e.g. [\"redis://127.0.0.1:7000\", \"redis://127.0.0.1:7001\"]"
                .to_owned())
        }
        (None, Some(seeds)) => seeds
            .iter()
            .map(|seed| forms::redis_seed(seed).map_err(|e| format!("redis.cluster: {e}")))
            .collect::<Result<Vec<String>, String>>()
            .map(RedisTarget::Cluster),
    }
}

/// One route, checked: every field in its form, nothing that would be ignored.
fn route(section: &RouteSection, trust_any: bool) -> Result<RouteSettings, String> {
    let name = forms::route_name(&section.name).map_err(|e| format!("name: {e}"))?;
    let path = section
        .path
        .as_deref()
        .map(forms::path_prefix)
        .transpose()
        .map_err(|e| format!("path: {e}"))?;
    let method = section
        .method
        .as_deref()
        .map(forms::method)
        .transpose()
        .map_err(|e| format!("method: {e}"))?;
    let key = match &section.key {
        Some(text) => forms::key(text).map_err(|e| format!("key: {e}"))?,
        None => KeyChoice::Peer,
    };
    if let (KeyChoice::ClientIp { extractor, .. }, false) = (&key, trust_any) {
        if let Some(family) = trusts_everyone(extractor.trusted()) {
            return Err(format!(
                "key: its trusted ranges hold every public {family} address, so any client could pick its own key \
                 by writing the forwarding header; trust only your proxies (e.g. key = \"xff:10.0.0.0/8\"), \
                 or set trust_any_forwarder = true if every connection comes through them"
            ));
        }
    }
    let ipv6_prefix = match section.ipv6_prefix {
        Some(_) if matches!(key, KeyChoice::Header(_)) => {
            return Err(
                "ipv6_prefix: only an IP key (peer, xff:..., forwarded:...) has an address to cut".to_owned(),
            )
        }
        Some(bits) => forms::ipv6_prefix(&bits.to_string()).map_err(|e| format!("ipv6_prefix: {e}"))?,
        None => RouteSettings::DEFAULT_IPV6_PREFIX,
    };
    let algorithm = section.algorithm.unwrap_or(AlgorithmChoice::Token);
    let (quota, policies) = match (&section.quota, &section.policies) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "`quota` and `policies`: give one quota (quota = \"10/s\") or several named policies \
                 ({POLICIES_FORM}), not both"
            ))
        }
        (None, None) => {
            return Err(format!(
                "no quota; give one (quota = \"10/s\") or several named policies ({POLICIES_FORM})"
            ))
        }
        (Some(text), None) => {
            let quota = forms::quota(text).map_err(|e| format!("quota: {e}"))?;
            algorithm
                .accepts(quota)
                .map_err(|e| format!("quota `{quota}`: {e}"))?;
            (quota, Vec::new())
        }
        (None, Some(sections)) => {
            let policies = named_policies(sections, algorithm)?;
            (policies[0].quota, policies)
        }
    };
    if let (Some(_), false) = (section.max_delay_ms, policies.is_empty()) {
        return Err(
            "max_delay_ms: a route with several policies decides at once, and makes no request wait; \
             remove max_delay_ms, or give the route one quota"
                .to_owned(),
        );
    }
    let max_delay = match section.max_delay_ms {
        Some(_) if algorithm != AlgorithmChoice::Leaky => {
            return Err(format!(
                "max_delay_ms: only the leaky bucket (algorithm = \"leaky\") makes requests wait; the {algorithm} never does"
            ))
        }
        Some(ms) => Some(forms::max_delay_ms(&ms.to_string()).map_err(|e| format!("max_delay_ms: {e}"))?),
        None => None,
    };
    Ok(RouteSettings {
        name,
        path,
        method,
        key,
        ipv6_prefix,
        algorithm,
        quota,
        policies,
        max_delay,
    })
}

/// A route's `policies`, checked: at least one, at most the library's
/// [`MAX_POLICIES`](tollgate::policy_set::MAX_POLICIES), each name once, each quota one its
/// algorithm (its own, or the route's `algorithm`) accepts.
fn named_policies(
    sections: &[PolicySection],
    algorithm: AlgorithmChoice,
) -> Result<Vec<NamedPolicy>, String> {
    if sections.is_empty() {
        return Err(format!(
            "policies: the list is empty; list at least one ({POLICIES_FORM}), or give one quota (quota = \"10/s\")"
        ));
    }
    let max = tollgate::policy_set::MAX_POLICIES;
    if sections.len() > max {
        return Err(format!(
            "policies: {} listed; a route holds at most {max}",
            sections.len()
        ));
    }
    let mut policies: Vec<NamedPolicy> = Vec::with_capacity(sections.len());
    for section in sections {
        let name = forms::policy_name(&section.name).map_err(|e| format!("policies: name: {e}"))?;
        if policies.iter().any(|policy| policy.name == name) {
            return Err(format!(
                "policies: `{name}` is named twice; each policy needs its own name, e.g. {POLICIES_FORM}"
            ));
        }
        let algorithm = section.algorithm.unwrap_or(algorithm);
        let quota = forms::quota(&section.quota).map_err(|e| format!("policies: `{name}`: quota: {e}"))?;
        algorithm
            .accepts(quota)
            .map_err(|e| format!("policies: `{name}`: quota `{quota}`: {e}"))?;
        policies.push(NamedPolicy {
            name,
            algorithm,
            quota,
        });
    }
    Ok(policies)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn flags(args: &[&str]) -> Flags {
        Flags::try_parse_from(std::iter::once("tollgate-gateway").chain(args.iter().copied()))
            .unwrap_or_else(|error| panic!("{args:?}: {error}"))
    }

    fn error(text: &str) -> String {
        settings(text, &flags(&[])).err().unwrap_or_default()
    }

    #[test]
    fn the_sample_file_reads() {
        let sample = settings(include_str!("../gateway.toml"), &flags(&[]));
        let limits = sample.as_ref().ok().and_then(|s| s.limits.as_ref());
        let names: Vec<&str> = limits.map_or(vec![], |l| l.routes.iter().map(|r| r.name.as_str()).collect());
        assert_eq!(names, ["login", "api", "default"]);
        assert_eq!(
            limits.map(|l| l.store.clone()),
            Some(Store::Table {
                capacity: 100_000,
                when_full: WhenFullChoice::Refuse
            })
        );
    }

    #[test]
    fn the_sample_file_s_commented_route_of_several_policies_reads() {
        let sample = include_str!("../gateway.toml");
        let at = sample
            .find("# [[route]]\n# name = \"reports\"")
            .unwrap_or(sample.len());
        let block: Vec<&str> = sample[at..]
            .lines()
            .take_while(|line| line.starts_with('#'))
            .map(|line| line.trim_start_matches('#').trim_start())
            .collect();
        let read = settings(&block.join("\n"), &flags(&[])).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = read.limits.map_or(vec![], |limits| {
            limits.routes[0].policies.iter().map(|p| p.name.clone()).collect()
        });
        assert_eq!(names, ["burst", "daily"]);
    }

    #[test]
    fn flags_win_over_the_file() {
        let text =
            "listen = \"127.0.0.1:1\"\n[table]\ncapacity = 5\n[[route]]\nname = \"a\"\nquota = \"1/s\"\n";
        let given = flags(&[
            "--listen",
            "127.0.0.1:2",
            "--capacity",
            "7",
            "--no-admitted-fields",
        ]);
        let read = settings(text, &given).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.listen.port(), 2);
        let limits = read.limits.unwrap_or_else(|| panic!("limits"));
        assert_eq!(
            limits.store,
            Store::Table {
                capacity: 7,
                when_full: WhenFullChoice::Refuse
            }
        );
        assert!(!limits.fields.on_admitted);
        let redis = flags(&["--redis", "redis://127.0.0.1:1/", "--capacity", "7"]);
        let refused = settings(text, &redis).err().unwrap_or_default();
        assert!(
            refused.starts_with("--capacity: the keys live in Redis"),
            "{refused}"
        );
        let refused = settings(text, &flags(&["--redis", "redis://127.0.0.1:1/"])).err();
        let refused = refused.unwrap_or_default();
        assert!(
            refused.starts_with("[table]: with --redis the keys live in Redis"),
            "{refused}"
        );
    }

    #[test]
    fn redis_is_one_url_or_a_cluster_and_a_flag_replaces_either() {
        let route = "[[route]]\nname = \"r\"\nquota = \"1/s\"\n";
        let cluster = format!(
            "[redis]\ncluster = [\"redis://127.0.0.1:7000\", \"redis://127.0.0.1:7001\"]\nwhen_away = \"admit\"\n{route}"
        );
        let store = |text: &str, args: &[&str]| {
            settings(text, &flags(args)).map(|read| read.limits.map(|limits| limits.store))
        };
        let seeds = vec![
            "redis://127.0.0.1:7000".to_owned(),
            "redis://127.0.0.1:7001".to_owned(),
        ];
        assert_eq!(
            store(&cluster, &[]),
            Ok(Some(Store::Redis {
                target: RedisTarget::Cluster(seeds),
                when_away: RedisAwayChoice::Admit,
                lease: false
            }))
        );
        assert_eq!(
            store(&cluster, &["--redis", "redis://127.0.0.1:6379/"]),
            Ok(Some(Store::Redis {
                target: RedisTarget::Single("redis://127.0.0.1:6379/".to_owned()),
                when_away: RedisAwayChoice::Admit,
                lease: false
            }))
        );
        let url = format!("[redis]\nurl = \"redis://127.0.0.1:6379/\"\n{route}");
        assert_eq!(
            store(&url, &["--redis-cluster", "redis://127.0.0.1:7002"]),
            Ok(Some(Store::Redis {
                target: RedisTarget::Cluster(vec!["redis://127.0.0.1:7002".to_owned()]),
                when_away: RedisAwayChoice::Refuse,
                lease: false
            }))
        );
        for (section, says) in [
            (
                "url = \"redis://127.0.0.1:6379/\"\ncluster = [\"redis://127.0.0.1:7000\"]",
                "[redis]: `url` (one Redis) and `cluster` (a Redis Cluster's nodes) name two stores; keep one",
            ),
            ("when_away = \"admit\"", "[redis]: no Redis named; give url = "),
            ("cluster = []", "redis.cluster: no seed node; list a few of the cluster's nodes"),
            (
                "cluster = [\"127.0.0.1:7000\"]",
                "redis.cluster: `127.0.0.1:7000` is not a Redis Cluster node's URL",
            ),
        ] {
            let message = error(&format!("[redis]\n{section}\n{route}"));
            assert!(message.contains(says), "{section}: {message}");
        }
        let table = format!("[table]\ncapacity = 5\n{route}");
        let refused = store(&table, &["--redis-cluster", "redis://127.0.0.1:7000"]);
        assert!(refused
            .err()
            .unwrap_or_default()
            .starts_with("[table]: with --redis-cluster the keys live in Redis"),);
    }

    #[test]
    fn several_policies_read_and_each_mistake_says_the_form() {
        let route = |fields: &str| format!("[[route]]\nname = \"r\"\n{fields}\n");
        let read = settings(
            &route(
                "algorithm = \"fixed\"\npolicies = [{ name = \"burst\", quota = \"10/s\", algorithm = \"token\" }, \
                 { name = \"daily\", quota = \"10000/day\" }]",
            ),
            &flags(&[]),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let policies = read.limits.map(|limits| limits.routes[0].policies.clone());
        let quota = |text: &str| forms::quota(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            policies,
            Some(vec![
                NamedPolicy {
                    name: "burst".to_owned(),
                    algorithm: AlgorithmChoice::Token,
                    quota: quota("10/s"),
                },
                NamedPolicy {
                    name: "daily".to_owned(),
                    algorithm: AlgorithmChoice::Fixed,
                    quota: quota("10000/day"),
                },
            ])
        );
        let form = "policies = [{ name = \"burst\", quota = \"10/s\" }, { name = \"daily\", quota = \"10000/day\" }]";
        for (fields, says) in [
            ("policies = []", "route `r`: policies: the list is empty; list at least one ("),
            (
                "policies = [{ name = \"a\", quota = \"1/s\" }, { name = \"a\", quota = \"1/min\" }]",
                "route `r`: policies: `a` is named twice; each policy needs its own name, e.g. ",
            ),
            (
                "quota = \"1/s\"\npolicies = [{ name = \"a\", quota = \"1/s\" }]",
                "route `r`: `quota` and `policies`: give one quota (quota = \"10/s\") or several named policies (",
            ),
            ("path = \"/x\"", "route `r`: no quota; give one (quota = \"10/s\") or several named policies ("),
            (
                "policies = [{ name = \"a b\", quota = \"1/s\" }]",
                "route `r`: policies: name: `a b` is not a policy name; expected letters",
            ),
            (
                "policies = [{ name = \"a\", quota = \"1/s burst 2\", algorithm = \"fixed\" }]",
                "route `r`: policies: `a`: quota `1/s burst 2`: the fixed window counter has no burst",
            ),
            (
                "policies = [{ name = \"a\", quota = \"1/s\", colour = \"red\" }]",
                "unknown field `colour`",
            ),
            (
                "algorithm = \"leaky\"\nmax_delay_ms = 10\npolicies = [{ name = \"a\", quota = \"1/s\" }]",
                "route `r`: max_delay_ms: a route with several policies decides at once",
            ),
        ] {
            let message = error(&route(fields));
            assert!(message.contains(says), "{fields}: {message}");
            if says.ends_with('(') || says.ends_with("e.g. ") {
                assert!(message.contains(form), "{fields}: {message}");
            }
        }
        let nine: Vec<String> = (0..9)
            .map(|n| format!("{{ name = \"p{n}\", quota = \"1/s\" }}"))
            .collect();
        let message = error(&route(&format!("policies = [{}]", nine.join(", "))));
        assert!(
            message.contains("policies: 9 listed; a route holds at most 8"),
            "{message}"
        );
        let redis = format!(
            "[redis]\nurl = \"redis://127.0.0.1:6379/\"\n{}",
            route("policies = [{ name = \"a\", quota = \"1/s\" }]")
        );
        let message = error(&redis);
        assert!(
            message.starts_with("route `r`: policies: several policies per route are decided all or nothing in this gateway's memory, not in Redis; give the route one quota (quota = \"10/s\")"),
            "{message}"
        );
    }

    #[test]
    fn each_mistake_names_its_field() {
        let route = |extra: &str| format!("[[route]]\nname = \"r\"\nquota = \"1/s\"\n{extra}\n");
        for (text, says) in [
            (route("colour = \"red\""), "unknown field `colour`"),
            (
                route("path = \"login\""),
                "route `r`: path: `login` is not a path prefix; expected one starting with /",
            ),
            (
                route("method = \"post\""),
                "route `r`: method: `post` is not a method; expected upper-case",
            ),
            (route("key = \"xff:0.0.0.0/0\""), "set trust_any_forwarder = true"),
            (
                route("key = \"header:x-api-key\"\nipv6_prefix = 56"),
                "ipv6_prefix: only an IP key",
            ),
            (route("max_delay_ms = 10"), "max_delay_ms: only the leaky bucket"),
            (
                route("algorithm = \"sliding\"\nquota = \"1/s burst 2\""),
                "duplicate key",
            ),
            (format!("{}{}", route(""), route("")), "route `r` is named twice"),
            (
                "[table]\ncapacity = 0\n[[route]]\nname = \"r\"\nquota = \"1/s\"\n".to_owned(),
                "table.capacity: the key table needs room",
            ),
            (
                "[table]\n[redis]\nurl = \"redis://127.0.0.1/\"\n".to_owned(),
                "[table] and [redis]",
            ),
            (
                "listen = \"8080\"\n".to_owned(),
                "listen: `8080` is not an address and port",
            ),
            (String::new(), "no [[route]]"),
            (
                route("").replace("name = \"r\"", "name = \"a b\""),
                "name: `a b` is not a route name",
            ),
        ] {
            let message = error(&text);
            assert!(message.contains(says), "{text}: {message}");
        }
        let burst = "[[route]]\nname = \"r\"\nalgorithm = \"sliding\"\nquota = \"1/s burst 2\"\n";
        assert!(
            error(burst).contains("route `r`: quota `1/s burst 2`: the sliding window counter has no burst")
        );
        let trusting =
            "trust_any_forwarder = true\n[[route]]\nname = \"r\"\nquota = \"1/s\"\nkey = \"xff:::/0\"\n";
        assert!(settings(trusting, &flags(&[])).is_ok());
    }
}
