//! `/metrics` scraped over HTTP after a known sequence of requests and a reload, in the
//! Prometheus text format: the gateway's own series beside the library's (`tollgate::metrics`,
//! the route's limiter named after the route).

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Client, ConfigFile, Gateway, RedisServer, PATIENCE};

const CONFIG: &str = r#"
metrics = "127.0.0.1:0"

[table]
capacity = 5

[[route]]
name = "api"
path = "/api"
key = "header:x-api-key"
quota = "2/min"
"#;

/// Every sample of a scrape, by series (`name{labels}`), with the comment lines checked.
fn scrape(address: SocketAddr) -> BTreeMap<String, f64> {
    let response = Client::connect(address).send("GET", "/metrics", &[]);
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = String::from_utf8(response.body).expect("UTF-8");
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            assert!(
                comment.starts_with("HELP tollgate_") || comment.starts_with("TYPE tollgate_"),
                "{line}"
            );
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not a sample: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("not a value: {line}"));
        samples.insert(series.to_owned(), value);
    }
    samples
}

#[test]
fn requests_reloads_and_keys_are_scraped() {
    let file = ConfigFile::new(CONFIG);
    let gateway = Gateway::start(&["--config", file.arg()]);
    let metrics = gateway.banner_line("metrics on http://").unwrap_or_default();
    let metrics: SocketAddr = metrics
        .trim_start_matches("metrics on http://")
        .trim_end_matches("/metrics")
        .parse()
        .expect("the banner's metrics address");

    let statuses: Vec<u16> = [
        ("/api", Some("alice")),
        ("/api", Some("alice")),
        ("/api", Some("alice")),
        ("/api", None),
        ("/open", None),
        ("/open", None),
    ]
    .into_iter()
    .map(|(path, key)| {
        let headers: Vec<(&str, &str)> = key.map(|key| ("x-api-key", key)).into_iter().collect();
        gateway.get(path, &headers).status
    })
    .collect();
    assert_eq!(statuses, [200, 200, 429, 400, 200, 200]);
    file.write_unseen(CONFIG);
    gateway.signal("HUP");
    assert!(gateway
        .wait_for(|line| line.text.starts_with("reload (SIGHUP): "))
        .is_some());

    // The keys gauge is sampled once a second.
    let deadline = Instant::now() + PATIENCE;
    let samples = loop {
        let samples = scrape(metrics);
        if samples.get("tollgate_gateway_keys{route=\"api\"}") == Some(&1.0) || Instant::now() > deadline {
            break samples;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let expected: BTreeMap<String, f64> = [
        (
            "tollgate_gateway_requests_total{route=\"api\",outcome=\"admitted\"}",
            2.0,
        ),
        (
            "tollgate_gateway_requests_total{route=\"api\",outcome=\"refused\"}",
            1.0,
        ),
        (
            "tollgate_gateway_requests_total{route=\"api\",outcome=\"unavailable\"}",
            0.0,
        ),
        (
            "tollgate_gateway_requests_total{route=\"api\",outcome=\"no_key\"}",
            1.0,
        ),
        (
            "tollgate_gateway_requests_total{route=\"(none)\",outcome=\"unlimited\"}",
            2.0,
        ),
        ("tollgate_gateway_reloads_total{result=\"applied\"}", 1.0),
        ("tollgate_gateway_keys{route=\"api\"}", 1.0),
        // The library's: the route's limiter, named `api`, kept across the reload.
        (
            "tollgate_decisions_total{limiter=\"api\",outcome=\"allowed\"}",
            2.0,
        ),
        (
            "tollgate_decisions_total{limiter=\"api\",outcome=\"refused\"}",
            1.0,
        ),
        (
            "tollgate_decisions_total{limiter=\"api\",outcome=\"no_key\"}",
            1.0,
        ),
        ("tollgate_keys_held{limiter=\"api\"}", 1.0),
        ("tollgate_keys_capacity{limiter=\"api\"}", 5.0),
        ("tollgate_keys_reclaimed_total{limiter=\"api\"}", 0.0),
    ]
    .into_iter()
    .map(|(series, value)| (series.to_owned(), value))
    .collect();
    assert_eq!(samples, expected);

    let other = Client::connect(metrics).send("GET", "/", &[]);
    assert_eq!(other.status, 404);
}

/// A route counted in a real `redis-server`: its decisions, its round trips to Redis and their
/// time (a histogram of buckets) beside the gateway's own series.
#[test]
fn a_redis_route_serves_its_round_trips() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&[
        "--key",
        "header:x-api-key",
        "--quota",
        "3/min",
        "--redis",
        &redis.url(),
        "--metrics",
        "127.0.0.1:0",
    ]);
    let metrics: SocketAddr = gateway
        .banner_line("metrics on http://")
        .unwrap_or_default()
        .trim_start_matches("metrics on http://")
        .trim_end_matches("/metrics")
        .parse()
        .expect("the banner's metrics address");
    let statuses: Vec<u16> = (0..4)
        .map(|_| gateway.get("/", &[("x-api-key", "alice")]).status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429]);
    let samples = scrape(metrics);
    let route = |series: &str| samples.get(series).copied();
    for (series, value) in [
        (
            "tollgate_gateway_requests_total{route=\"default\",outcome=\"admitted\"}",
            3.0,
        ),
        (
            "tollgate_decisions_total{limiter=\"default\",outcome=\"allowed\"}",
            3.0,
        ),
        (
            "tollgate_decisions_total{limiter=\"default\",outcome=\"refused\"}",
            1.0,
        ),
        ("tollgate_redis_calls_total{limiter=\"default\"}", 4.0),
        ("tollgate_redis_call_seconds_count{limiter=\"default\"}", 4.0),
        (
            "tollgate_redis_call_seconds_bucket{limiter=\"default\",le=\"+Inf\"}",
            4.0,
        ),
    ] {
        assert_eq!(route(series), Some(value), "{series} in {samples:?}");
    }
    let sum = route("tollgate_redis_call_seconds_sum{limiter=\"default\"}").unwrap_or_default();
    assert!(sum > 0.0 && sum < 4.0, "{sum}");
    // No failure, no decision by the failure policy, no key table.
    assert!(
        samples
            .keys()
            .all(|series| !series.starts_with("tollgate_redis_errors")
                && !series.starts_with("tollgate_redis_policy")
                && !series.starts_with("tollgate_keys")),
        "{samples:?}"
    );
}
