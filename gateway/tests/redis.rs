//! Routes counted in a real `redis-server`: two gateways share one quota per key; a Redis
//! configuration no retry mends (a wrong or missing password, a database past the server's)
//! stops the start with its cause, before the gateway listens, and keeps the running table on a
//! reload; a reload changes a route's quota live, its keys keeping their counts in Redis; a
//! Redis that is away is said at start with its cause, answered by the chosen failure policy,
//! and named in the per-second line.

mod common;

use common::{free_port, run, ConfigFile, Gateway, RedisServer};

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

/// Runs a gateway on `url` that must not start: its stderr, after checking that it exited with
/// status 1 and printed nothing on stdout (no banner: it never listened).
fn refused_start(url: &str) -> String {
    let output = run(&[&PER_API_KEY[..], &["--redis", url, "--listen", "127.0.0.1:0"]].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{url}: {stderr}");
    assert_eq!(stdout, "", "{url}: {stderr}");
    stderr
}

#[test]
fn a_wrong_or_missing_password_stops_the_start() {
    let redis = RedisServer::start_with(&["--requirepass", "secret"]);
    let port = redis.port;
    let wrong = refused_start(&format!("redis://:hunter2@127.0.0.1:{port}/"));
    assert!(
        wrong.starts_with(&format!(
            "tollgate-gateway: route `default`: Redis at redis://:***@127.0.0.1:{port}/: \
             authentication failed (WRONGPASS): the user or password of the URL is not the server's"
        )),
        "{wrong}"
    );
    assert!(!wrong.contains("hunter2"), "{wrong}");
    let none = refused_start(&format!("redis://127.0.0.1:{port}/"));
    assert!(
        none.starts_with(&format!(
            "tollgate-gateway: route `default`: Redis at redis://127.0.0.1:{port}/: \
             authentication required (NOAUTH): the server has a password and the URL gives none"
        )),
        "{none}"
    );
    let right = Gateway::start(
        &[
            &PER_API_KEY[..],
            &["--redis", &format!("redis://:secret@127.0.0.1:{port}/")],
        ]
        .concat(),
    );
    assert!(
        right.lines_seen().iter().all(|line| !line.stderr),
        "{:?}",
        right.lines_seen()
    );
    assert_eq!(right.get("/", &[("x-api-key", "alice")]).status, 200);
}

#[test]
fn a_database_past_the_server_s_stops_the_start() {
    let redis = RedisServer::start_with(&["--databases", "4"]);
    let port = redis.port;
    let past = refused_start(&format!("redis://127.0.0.1:{port}/9"));
    assert!(
        past.starts_with(&format!(
            "tollgate-gateway: route `default`: Redis at redis://127.0.0.1:{port}/9: \
             no such database (ERR DB index is out of range)"
        )),
        "{past}"
    );
    let last = Gateway::start(
        &[
            &PER_API_KEY[..],
            &["--redis", &format!("redis://127.0.0.1:{port}/3")],
        ]
        .concat(),
    );
    assert_eq!(last.get("/", &[("x-api-key", "alice")]).status, 200);
}

#[test]
fn a_reload_onto_a_wrong_password_keeps_the_running_configuration() {
    let redis = RedisServer::start_with(&["--requirepass", "secret"]);
    let file = |password: &str| {
        format!(
            "[redis]\nurl = \"redis://:{password}@127.0.0.1:{}/\"\n\
             [[route]]\nname = \"api\"\nkey = \"header:x-api-key\"\nquota = \"3/min\"\n",
            redis.port
        )
    };
    let config = ConfigFile::new(&file("secret"));
    let gateway = Gateway::start(&["--config", config.arg()]);
    assert_eq!(gateway.get("/", &[("x-api-key", "alice")]).status, 200);
    config.write(&file("hunter2"));
    let failed = gateway.wait_for(|line| line.text.starts_with("reload (file changed)"));
    let failed = failed.unwrap_or_default();
    assert!(
        failed.starts_with("reload (file changed) failed, the running configuration stays: ")
            && failed.contains("route `api`: Redis at redis://:***@127.0.0.1:")
            && failed.contains("authentication failed (WRONGPASS)"),
        "{failed}"
    );
    let statuses: Vec<u16> = (0..3)
        .map(|_| gateway.get("/", &[("x-api-key", "alice")]).status)
        .collect();
    assert_eq!(statuses, [200, 200, 429]);
}

#[test]
fn a_redis_away_is_said_at_start_with_its_cause_and_answered_by_the_policy() {
    let port = free_port();
    let url = format!("redis://:secret@127.0.0.1:{port}/");
    let refusing = Gateway::start(&[&PER_API_KEY[..], &["--redis", &url]].concat());
    let warning = refusing.lines_seen().into_iter().find(|line| line.stderr);
    let warning = warning.map(|line| line.text).unwrap_or_default();
    assert_eq!(
        warning,
        format!(
            "tollgate-gateway: warning: route default: Redis at redis://:***@127.0.0.1:{port}/: \
             connection refused: nothing listens at that host and port (check the address, and that \
             Redis runs); its requests are refused (429, retry after 1 s) until Redis answers"
        )
    );
    let refused = refusing.get("/", &[("x-api-key", "alice")]);
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), Some("1"));
    let reported = refusing.wait_for(|line| line.stderr && line.text.contains("decided without Redis"));
    let reported = reported.unwrap_or_default();
    assert!(
        reported.ends_with(
            "s  decided without Redis (away or failing): 1 on route default; last failure: \
             connection refused: nothing listens at that host and port (check the address, and that Redis runs)"
        ),
        "{reported}"
    );
    assert!(!reported.contains("secret"), "{reported}");

    let admitting =
        Gateway::start(&[&PER_API_KEY[..], &["--redis", &url, "--when-redis-away", "admit"]].concat());
    let statuses: Vec<u16> = (0..4)
        .map(|_| admitting.get("/", &[("x-api-key", "alice")]).status)
        .collect();
    assert_eq!(statuses, [200; 4]);
    // The four decisions may fall in two seconds: the count is checked above, on one request.
    let reported = admitting.wait_for(|line| line.stderr && line.text.contains("decided without Redis"));
    let reported = reported.unwrap_or_default();
    assert!(
        reported.contains("on route default; last failure: connection refused"),
        "{reported}"
    );
}

/// Two gateways spending units leased from one Redis quota (`--lease`): together they never
/// pass it. A token bucket of 3 per minute refills one unit every 20 s, so in the second these
/// eight requests take, the two gateways admit at most 3 of `alice`'s between them; the same for
/// a sliding window counter of 3 per minute (`--algorithm sliding`).
#[test]
fn two_gateways_on_leases_never_pass_the_quota_together() {
    let redis = RedisServer::start();
    let url = redis.url();
    for algorithm in ["token", "sliding"] {
        let leased = [
            &PER_API_KEY[..],
            &["--redis", &url, "--lease", "--algorithm", algorithm],
        ]
        .concat();
        let first = Gateway::start(&leased);
        let second = Gateway::start(&leased);
        assert!(
            first
                .banner_line("keys: in Redis at ")
                .is_some_and(|line| line.ends_with("; each gateway spends units leased from Redis")),
            "{algorithm}: {:?}",
            first.banner
        );
        let key = [("x-api-key", format!("alice-{algorithm}"))];
        let key = [(key[0].0, key[0].1.as_str())];
        let statuses: Vec<u16> = [&first, &first, &second, &second, &first, &first, &second, &second]
            .iter()
            .map(|gateway| gateway.get("/", &key).status)
            .collect();
        assert_eq!(statuses[0], 200, "{algorithm}: {statuses:?}");
        assert!(
            statuses.iter().all(|&s| s == 200 || s == 429),
            "{algorithm}: {statuses:?}"
        );
        let admitted = statuses.iter().filter(|&&s| s == 200).count();
        assert!(
            admitted <= 3,
            "{algorithm}: {admitted} admitted of a quota of 3: {statuses:?}"
        );
        let other = format!("bob-{algorithm}");
        assert_eq!(
            second.get("/", &[("x-api-key", other.as_str())]).status,
            200,
            "{algorithm}"
        );
    }
}

#[test]
fn a_lease_of_an_algorithm_that_cannot_be_leased_stops_the_start() {
    let redis = RedisServer::start();
    let url = redis.url();
    let output = run(&[
        &PER_API_KEY[..],
        &["--redis", &url, "--lease", "--algorithm", "leaky"],
    ]
    .concat());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--lease: the leaky bucket cannot be leased"),
        "{stderr}"
    );
}

#[test]
fn a_reload_changes_a_redis_route_s_quota_live_and_its_keys_keep_their_counts() {
    let redis = RedisServer::start();
    let file = |quota: &str| {
        format!(
            "[redis]\nurl = \"{}\"\n[[route]]\nname = \"api\"\nkey = \"header:x-api-key\"\nalgorithm = \"log\"\nquota = \"{quota}\"\n",
            redis.url()
        )
    };
    let config = ConfigFile::new(&file("3/min"));
    let gateway = Gateway::start(&["--config", config.arg()]);
    let alice = [("x-api-key", "alice")];
    assert_eq!(gateway.get("/", &alice).status, 200);
    assert_eq!(gateway.get("/", &alice).status, 200);
    config.write_unseen(&file("5/min"));
    gateway.signal("HUP");
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(line.ends_with("(quota changed live, counters kept)"), "{line}");
    // The log in Redis keeps its 2 units, read under 5/min (`RedisLimiter::set_algorithm`).
    let after = gateway.get("/", &alice);
    assert_eq!(after.header("ratelimit-policy"), Some("\"api\";q=5;w=60"));
    let remaining = after.header("ratelimit").and_then(|field| {
        field
            .split(';')
            .find_map(|part| part.strip_prefix("r="))
            .map(str::to_owned)
    });
    assert_eq!(remaining.as_deref(), Some("2"));
}
