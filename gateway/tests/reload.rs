//! Reloading the configuration file: on SIGHUP and when the file changes, a changed route gets
//! its new policy, an unchanged one keeps its counters, a connection kept open across the
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
fn sighup_applies_a_new_quota_and_keeps_unchanged_counters() {
    let file = ConfigFile::new(&config("3/min"));
    let gateway = Gateway::start(&["--config", file.arg()]);
    let mut kept = gateway.connect();
    assert_eq!(remaining(&kept.send("GET", "/steady", &[])), Some("2"));
    assert_eq!(remaining(&kept.send("GET", "/steady", &[])), Some("1"));
    let before = kept.send("GET", "/changed", &[]);
    assert_eq!(before.header("ratelimit-policy"), Some("\"changed\";q=3;w=60"));

    // Same length and modification time: only the signal tells the gateway.
    file.write_unseen(&config("7/min"));
    gateway.signal("HUP");
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert_eq!(
        line,
        "reload (SIGHUP): route changed: /changed, token bucket, 3/min, per client IP (IPv6 by /64) -> \
         /changed, token bucket, 7/min, per client IP (IPv6 by /64) (new counters); route steady unchanged"
    );

    // The connection opened before the reload goes on, under the new table.
    let after = kept.send("GET", "/changed", &[]);
    assert_eq!(after.status, 200);
    assert_eq!(after.header("ratelimit-policy"), Some("\"changed\";q=7;w=60"));
    assert_eq!(remaining(&after), Some("6"));
    // The unchanged route kept its limiter: one request left of three, not three.
    let steady = kept.send("GET", "/steady", &[]);
    assert_eq!(remaining(&steady), Some("0"));
    assert_eq!(kept.send("GET", "/steady", &[]).status, 429);
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
