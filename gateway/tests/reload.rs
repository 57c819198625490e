//! Reloading the configuration file: on SIGHUP and when the file changes, a route whose quota
//! changed takes it live and keeps its counters, an unchanged one keeps its counters, another
//! algorithm or window rebuilds (and the log says why), a connection kept open across the
//! reload goes on, and a file that does not read keeps the running configuration.

mod common;

use common::{ConfigFile, Gateway};

/// Two routes on 3 a minute per client; `CHANGED` is the quota of the first.
fn config(changed: &str) -> String {
    format!(
        r#"
[[route]]
name = "changed"
path = "/changed"
quota = "{changed}"

[[route]]
name = "steady"
path = "/steady"
quota = "3/min"
"#
    )
}

/// The `r` of a response's `RateLimit` field.
fn remaining(response: &common::Response) -> Option<&str> {
    let field = response.header("ratelimit")?;
    field.split(';').find_map(|part| part.strip_prefix("r="))
}

#[test]
fn sighup_changes_a_quota_live_and_keeps_every_counter() {
    let file = ConfigFile::new(&config("3/min").replace(
        "quota = \"3/min\"\n\n[[route]]",
        "quota = \"3/min\"\nalgorithm = \"log\"\n\n[[route]]",
    ));
    let gateway = Gateway::start(&["--config", file.arg()]);
    let mut kept = gateway.connect();
    assert_eq!(remaining(&kept.send("GET", "/steady", &[])), Some("2"));
    assert_eq!(remaining(&kept.send("GET", "/steady", &[])), Some("1"));
    let first = kept.send("GET", "/changed", &[]);
    assert_eq!(first.header("ratelimit-policy"), Some("\"changed\";q=3;w=60"));
    assert_eq!(remaining(&kept.send("GET", "/changed", &[])), Some("1"));

    // Same length and modification time: only the signal tells the gateway.
    file.write_unseen(&config("5/min").replace(
        "quota = \"5/min\"\n\n[[route]]",
        "quota = \"5/min\"\nalgorithm = \"log\"\n\n[[route]]",
    ));
    gateway.signal("HUP");
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert_eq!(
        line,
        "reload (SIGHUP): route changed: /changed, sliding log, 3/min, per client IP (IPv6 by /64) -> \
         /changed, sliding log, 5/min, per client IP (IPv6 by /64) (quota changed live, counters kept); \
         route steady unchanged"
    );

    // The connection opened before the reload goes on, under the new table. The log keeps its
    // 2 units and the raised limit admits the difference at once (`KeyedLogLimiter::set_quota`):
    // 5 - 2 - 1 = 2 left.
    let after = kept.send("GET", "/changed", &[]);
    assert_eq!(after.status, 200);
    assert_eq!(after.header("ratelimit-policy"), Some("\"changed\";q=5;w=60"));
    assert_eq!(remaining(&after), Some("2"));
    // The unchanged route kept its limiter: one request left of three, not three.
    let steady = kept.send("GET", "/steady", &[]);
    assert_eq!(remaining(&steady), Some("0"));
    assert_eq!(kept.send("GET", "/steady", &[]).status, 429);
}

#[test]
fn a_quota_lowered_below_what_was_spent_refuses_at_once() {
    let file = ConfigFile::new(&config("3/min"));
    let gateway = Gateway::start(&["--config", file.arg()]);
    assert_eq!(remaining(&gateway.get("/changed", &[])), Some("2"));
    assert_eq!(remaining(&gateway.get("/changed", &[])), Some("1"));

    file.write_unseen(&config("1/min"));
    gateway.signal("HUP");
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(line.contains("(quota changed live, counters kept)"), "{line}");

    // The token bucket keeps its debt in time (`TokenBucket`'s `Retune`): 2 units of 20 s are
    // 40 s of the new 60 s bucket, less than the one unit it now holds, so it refuses at once.
    let refused = gateway.get("/changed", &[]);
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("ratelimit-policy"), Some("\"changed\";q=1;w=60"));
}

#[test]
fn another_algorithm_or_window_rebuilds_and_the_log_says_why() {
    let file = ConfigFile::new(&config("3/min"));
    let gateway = Gateway::start(&["--config", file.arg()]);
    assert_eq!(remaining(&gateway.get("/changed", &[])), Some("2"));

    let fixed = |quota: &str| {
        config(quota).replace(
            &format!("quota = \"{quota}\"\n\n[[route]]"),
            &format!("quota = \"{quota}\"\nalgorithm = \"fixed\"\n\n[[route]]"),
        )
    };
    file.write(&fixed("3/min"));
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(
        line.contains(
            "(rebuilt (algorithm token bucket -> fixed window), new counters); route steady unchanged"
        ),
        "{line}"
    );
    assert_eq!(remaining(&gateway.get("/changed", &[])), Some("2"));

    // A window counter's length cannot change live: its counts would land in the wrong window.
    file.write(&fixed("3/h"));
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(line.contains("(rebuilt (") && line.contains("window"), "{line}");
    assert!(line.contains("new counters); route steady unchanged"), "{line}");
    let fresh = gateway.get("/changed", &[]);
    assert_eq!(fresh.header("ratelimit-policy"), Some("\"changed\";q=3;w=3600"));
    assert_eq!(remaining(&fresh), Some("2"));
}

#[test]
fn a_broken_file_keeps_the_running_configuration_and_says_why() {
    let file = ConfigFile::new(&config("3/min"));
    let gateway = Gateway::start(&["--config", file.arg()]);
    assert_eq!(remaining(&gateway.get("/steady", &[])), Some("2"));

    file.write_unseen(
        &config("3/min").replace("quota = \"3/min\"\n\n[[route]]", "quota = \"3/min\"\n\n[[route]}"),
    );
    gateway.signal("HUP");
    let line = gateway
        .wait_for(|line| line.stderr && line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(
        line.starts_with("reload (SIGHUP) failed, the running configuration stays: "),
        "{line}"
    );
    assert!(line.contains(file.arg()), "{line}");
    assert!(line.contains("gateway.toml: line 7, column "), "{line}");

    let response = gateway.get("/steady", &[]);
    assert_eq!(response.header("ratelimit-policy"), Some("\"steady\";q=3;w=60"));
    assert_eq!(remaining(&response), Some("1"));

    // A quota the algorithm refuses is a broken file too.
    file.write(&config("5/s burst 10").replace(
        "quota = \"5/s burst 10\"",
        "quota = \"5/s burst 10\"\nalgorithm = \"fixed\"",
    ));
    let line = gateway
        .wait_for(|line| line.stderr && line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(line.starts_with("reload (file changed) failed"), "{line}");
    assert!(
        line.contains("route `changed`: quota `5/s burst 10`: the fixed window counter has no burst"),
        "{line}"
    );
    assert_eq!(remaining(&gateway.get("/steady", &[])), Some("0"));
}

#[test]
fn a_changed_file_is_reloaded_without_a_signal() {
    let file = ConfigFile::new(&config("3/min"));
    let gateway = Gateway::start(&["--config", file.arg()]);
    assert_eq!(
        gateway.get("/changed", &[]).header("ratelimit-policy"),
        Some("\"changed\";q=3;w=60")
    );
    assert_eq!(gateway.get("/other", &[]).status, 200);

    let mut next = config("10/min");
    next.push_str("\n[[route]]\nname = \"other\"\nquota = \"1/min\"\n");
    file.write(&next.replace(
        "[[route]]\nname = \"steady\"\npath = \"/steady\"\nquota = \"3/min\"\n",
        "",
    ));
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(
        line.starts_with("reload (file changed): route changed: "),
        "{line}"
    );
    assert!(
        line.contains("route other added: every request, token bucket, 1/min"),
        "{line}"
    );
    assert!(line.ends_with("route steady removed"), "{line}");
    assert_eq!(
        gateway.get("/changed", &[]).header("ratelimit-policy"),
        Some("\"changed\";q=10;w=60")
    );
    // `/steady` now falls to the catch-all route.
    assert_eq!(
        gateway.get("/steady", &[]).header("ratelimit-policy"),
        Some("\"other\";q=1;w=60")
    );
    assert_eq!(gateway.get("/other", &[]).status, 429);
}
