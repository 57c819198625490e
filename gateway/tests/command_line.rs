//! The command line of the real binary: errors (exit status and message), defaults, the
//! banner and the per-second line.

mod common;

use std::time::Duration;

use common::{run, Gateway};

/// The exit status and standard error of a refused command line.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let output = run(args);
    assert!(
        output.stdout.is_empty(),
        "{args:?} printed {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn flag_errors_exit_2_and_show_the_expected_form() {
    for (args, says) in [
        (
            &["--listen", "foo"][..],
            "invalid value 'foo' for '--listen <ADDR>'",
        ),
        (&["--listen", "foo"], "expected e.g. 127.0.0.1:8080"),
        (
            &["--capacity", "-1"],
            "expected a whole number from 1, e.g. 100000",
        ),
        (&["--quota", "fast"], "for example `100/min`"),
        (
            &["--key", "cookie"],
            "expected e.g. peer, header:x-api-key or xff:10.0.0.0/8",
        ),
        (
            &["--algorithm", "sliding", "--quota", "5/s burst 10"],
            "has no burst",
        ),
        (&["--frobnicate"], "unexpected argument '--frobnicate'"),
    ] {
        let (status, stderr) = refused(args);
        assert_eq!(status, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn a_flag_given_twice_is_refused() {
    let (status, stderr) = refused(&["--quota", "1/s", "--quota", "2/s"]);
    assert_eq!(status, Some(2));
    assert!(
        stderr.contains("the argument '--quota <QUOTA>' cannot be used multiple times"),
        "{stderr}"
    );
}

#[test]
fn help_is_clap_s() {
    let output = run(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--config <FILE>",
        "--when-full <POLICY>",
        "--trust-any-forwarder",
        "--metrics <ADDR>",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
}

#[test]
fn a_trusted_range_holding_everyone_is_refused_unless_asked_for() {
    for everyone in ["xff:0.0.0.0/0", "xff:::/0", "forwarded:0.0.0.0/1,128.0.0.0/1"] {
        let (status, stderr) = refused(&["--key", everyone]);
        assert_eq!(status, Some(2), "{everyone}: {stderr}");
        assert!(stderr.contains("any client could pick its own key"), "{stderr}");
        assert!(stderr.contains("--trust-any-forwarder"), "{stderr}");
    }
    let gateway = Gateway::start(&[
        "--key",
        "xff:0.0.0.0/0",
        "--trust-any-forwarder",
        "--quota",
        "1/min",
    ]);
    // Trusting everyone, each client picks its key: two forwarded addresses, two quotas.
    for client in ["192.0.2.1", "192.0.2.2"] {
        let response = gateway.get("/", &[("x-forwarded-for", client)]);
        assert_eq!(response.status, 200, "{client}");
    }
}

#[test]
fn each_algorithm_starts_on_its_default_quota() {
    // The policy each default announces: the buckets' 5/s burst 10 fills in 2 s; the windows'
    // 5/s is 5 a second.
    for (algorithm, policy, banner) in [
        ("token", "\"default\";q=10;w=2", "token bucket, 5/s burst 10"),
        ("leaky", "\"default\";q=10;w=2", "leaky bucket, 5/s burst 10"),
        ("fixed", "\"default\";q=5;w=1", "fixed window, 5/s"),
        ("sliding", "\"default\";q=5;w=1", "sliding window, 5/s"),
        ("log", "\"default\";q=5;w=1", "sliding log, 5/s"),
    ] {
        let gateway = Gateway::start(&["--algorithm", algorithm]);
        let response = gateway.get("/", &[]);
        assert_eq!(response.status, 200, "{algorithm}");
        assert_eq!(response.header("ratelimit-policy"), Some(policy), "{algorithm}");
        let route = gateway.banner_line("route default: ").unwrap_or_default();
        assert!(route.contains(banner), "{algorithm}: {route}");
    }
}

#[test]
fn the_banner_says_the_configuration_in_words() {
    let gateway = Gateway::start(&[
        "--key",
        "xff:10.0.0.0/8",
        "--ipv6-prefix",
        "56",
        "--when-full",
        "admit",
    ]);
    assert_eq!(
        gateway.banner_line("route "),
        Some("route default: every request, token bucket, 5/s burst 10, per client IP from X-Forwarded-For behind 10.0.0.0/8 (IPv6 by /56)")
    );
    assert_eq!(
        gateway.banner_line("keys: "),
        Some("keys: in memory, room for at least 100000 keys still being limited per route; when full, a new key is admitted, uncounted")
    );
    assert_eq!(
        gateway.banner_line("fields: "),
        Some("fields: RateLimit on every response")
    );
    assert!(
        gateway.banner.iter().all(|line| !line.contains('{')),
        "{:?}",
        gateway.banner
    );
}

#[test]
fn the_per_second_line_is_quiet_when_nothing_happened() {
    let gateway = Gateway::start(&["--quota", "1/min"]);
    let idle = gateway.lines_within(Duration::from_millis(2500));
    assert!(idle.is_empty(), "{idle:?}");
    assert_eq!(gateway.get("/", &[]).status, 200);
    assert_eq!(gateway.get("/", &[]).status, 429);
    let line = gateway.wait_for(|line| line.text.contains("admitted"));
    let line = line.unwrap_or_default();
    assert!(line.contains("admitted        1  refused        1"), "{line}");
}

#[test]
fn a_missing_file_fails_the_start_with_its_name() {
    let output = run(&["--config", "/nonexistent/gateway.toml"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("tollgate-gateway: /nonexistent/gateway.toml: "),
        "{stderr}"
    );
}
