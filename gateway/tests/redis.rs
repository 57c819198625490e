//! Routes counted in a real `redis-server`: two gateways share one quota per key, and a Redis
//! that is away is said at start and answered by the chosen failure policy.

mod common;

use common::{free_port, Gateway, RedisServer};

const PER_API_KEY: [&str; 4] = ["--key", "header:x-api-key", "--quota", "3/min"];

#[test]
fn two_gateways_share_one_quota() {
    let redis = RedisServer::start();
    let url = redis.url();
    let first = Gateway::start(&[&PER_API_KEY[..], &["--redis", &url]].concat());
    let second = Gateway::start(&[&PER_API_KEY[..], &["--redis", &url]].concat());
    assert!(
        first
            .banner_line("keys: in Redis at redis://127.0.0.1:")
            .is_some(),
        "{:?}",
        first.banner
    );
    let statuses: Vec<u16> = [&first, &second, &first, &second]
        .iter()
        .map(|gateway| gateway.get("/", &[("x-api-key", "alice")]).status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(second.get("/", &[("x-api-key", "bob")]).status, 200);
}

#[test]
fn a_redis_away_is_said_at_start_and_answered_by_the_policy() {
    let url = format!("redis://:secret@127.0.0.1:{}/", free_port());
    let refusing = Gateway::start(&[&PER_API_KEY[..], &["--redis", &url]].concat());
    let warning = refusing.lines_seen().into_iter().find(|line| line.stderr);
    let warning = warning.map(|line| line.text).unwrap_or_default();
    assert!(
        warning.starts_with("tollgate-gateway: warning: route default: Redis at redis://:***@127.0.0.1:"),
        "{warning}"
    );
    assert!(!warning.contains("secret"), "{warning}");
    let refused = refusing.get("/", &[("x-api-key", "alice")]);
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), Some("1"));

    let admitting =
        Gateway::start(&[&PER_API_KEY[..], &["--redis", &url, "--when-redis-away", "admit"]].concat());
    let statuses: Vec<u16> = (0..4)
        .map(|_| admitting.get("/", &[("x-api-key", "alice")]).status)
        .collect();
    assert_eq!(statuses, [200; 4]);
}
