//! Routes of several named policies (`policies = [...]` in the file), over real TCP: every
//! policy announced in `RateLimit-Policy`, the one nearest to refusal in `RateLimit`, all or
//! nothing (a refusal by one policy spends nothing of the others), and one policy's quota
//! changed live on reload while the other keeps its counters.

mod common;

use common::{ConfigFile, Gateway};

/// A route keyed by API key, limited by `policies`.
fn config(policies: &str) -> String {
    format!(
        r#"
[[route]]
name = "api"
key = "header:x-api-key"
algorithm = "log"
policies = [{policies}]
"#
    )
}

const ALICE: &[(&str, &str)] = &[("x-api-key", "alice")];

/// The `RateLimit` field up to its `t=` (the seconds left move with the clock).
fn reported(response: &common::Response) -> Option<&str> {
    let field = response.header("ratelimit")?;
    Some(field.split(";t=").next().unwrap_or(field))
}

#[test]
fn every_policy_is_announced_and_the_nearest_refusal_reported() {
    let file = ConfigFile::new(&config(
        r#"{ name = "burst", quota = "2/min" }, { name = "daily", quota = "5/h", algorithm = "fixed" }"#,
    ));
    let gateway = Gateway::start(&["--config", file.arg()]);
    assert_eq!(
        gateway.banner_line("route api:"),
        Some("route api: every request, all of [burst sliding log 2/min, daily fixed window 5/h], per x-api-key header")
    );
    let policies = Some(r#""burst";q=2;w=60, "daily";q=5;w=3600"#);

    let first = gateway.get("/", ALICE);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("ratelimit-policy"), policies);
    // 1 left of the burst's 2, 4 of the daily 5: the burst is nearer to refusing.
    assert_eq!(reported(&first), Some(r#""burst";r=1"#));
    assert_eq!(reported(&gateway.get("/", ALICE)), Some(r#""burst";r=0"#));

    let refused = gateway.get("/", ALICE);
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("ratelimit-policy"), policies);
    assert_eq!(reported(&refused), Some(r#""burst";r=0"#));

    // Another key has its own counters in every policy.
    assert_eq!(
        reported(&gateway.get("/", &[("x-api-key", "bob")])),
        Some(r#""burst";r=1"#)
    );
}

#[test]
fn a_refusal_spends_no_policy_and_one_policy_changes_live_on_reload() {
    let file = ConfigFile::new(&config(
        r#"{ name = "burst", quota = "3/min" }, { name = "daily", quota = "2/h" }"#,
    ));
    let gateway = Gateway::start(&["--config", file.arg()]);
    assert_eq!(reported(&gateway.get("/", ALICE)), Some(r#""daily";r=1"#));
    assert_eq!(reported(&gateway.get("/", ALICE)), Some(r#""daily";r=0"#));
    // The daily policy refuses: the unit the burst policy took for it is given back.
    let refused = gateway.get("/", ALICE);
    assert_eq!(refused.status, 429);
    assert_eq!(reported(&refused), Some(r#""daily";r=0"#));

    file.write_unseen(&config(
        r#"{ name = "burst", quota = "3/min" }, { name = "daily", quota = "9/h" }"#,
    ));
    gateway.signal("HUP");
    let line = gateway
        .wait_for(|line| line.text.starts_with("reload"))
        .unwrap_or_default();
    assert!(
        line.ends_with("(policy burst: counters kept; policy daily: quota changed live, counters kept)"),
        "{line}"
    );

    // Had the refusal spent a burst unit, the burst (3 spent of 3) would refuse now. It
    // admits, its last unit; the daily log keeps its 2 units and admits 7 more under 9/h.
    let after = gateway.get("/", ALICE);
    assert_eq!(after.status, 200);
    assert_eq!(
        after.header("ratelimit-policy"),
        Some(r#""burst";q=3;w=60, "daily";q=9;w=3600"#)
    );
    assert_eq!(reported(&after), Some(r#""burst";r=0"#));
    let refused = gateway.get("/", ALICE);
    assert_eq!(refused.status, 429);
    assert_eq!(reported(&refused), Some(r#""burst";r=0"#));
}
