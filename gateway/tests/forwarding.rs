//! What a real upstream receives through the gateway, and what the client receives back:
//! hop-by-hop fields removed both ways (RFC 9110 section 7.6.1), the client added to
//! `Forwarded` and `X-Forwarded-For`.

mod common;

use common::{Gateway, RecordingUpstream};

/// Hop-by-hop fields the upstream writes on its answer, with one end-to-end field.
const UPSTREAM_FIELDS: &[(&str, &str)] = &[
    ("connection", "x-upstream-hop"),
    ("x-upstream-hop", "1"),
    ("keep-alive", "timeout=5"),
    ("proxy-authenticate", "Basic realm=\"proxy\""),
    ("trailer", "x-checksum"),
    ("upgrade", "h2c"),
    ("x-upstream-end", "kept"),
];

#[test]
fn hop_by_hop_fields_stop_at_the_gateway_both_ways() {
    let upstream = RecordingUpstream::start(UPSTREAM_FIELDS);
    let gateway = Gateway::start(&["--upstream", &upstream.url(), "--quota", "100/s"]);
    let response = gateway.get(
        "/path?q=1",
        &[
            ("connection", "keep-alive, x-client-hop"),
            ("x-client-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic eDp5"),
            ("te", "trailers"),
            ("trailer", "x-checksum"),
            ("upgrade", "websocket"),
            ("x-client-end", "kept"),
        ],
    );
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"upstream\n");

    let requests = upstream.requests();
    let [received] = requests.as_slice() else {
        panic!("one request upstream, got {requests:?}");
    };
    assert_eq!(received.start, "GET /path?q=1 HTTP/1.1");
    for hop in [
        "x-client-hop",
        "keep-alive",
        "proxy-authorization",
        "te",
        "trailer",
        "upgrade",
        "transfer-encoding",
    ] {
        assert!(
            !received.headers.contains_key(hop),
            "{hop} reached the upstream: {received:?}"
        );
    }
    // hyper's client writes its own `connection` only to close; none of the client's reaches.
    let connection = received.headers.get("connection");
    assert!(
        connection.is_none_or(|values| values.iter().all(|value| !value.contains("x-client-hop"))),
        "{connection:?}"
    );
    assert_eq!(
        received.headers.get("x-client-end"),
        Some(&vec!["kept".to_owned()])
    );

    for hop in [
        "x-upstream-hop",
        "keep-alive",
        "proxy-authenticate",
        "trailer",
        "upgrade",
    ] {
        assert!(
            response.header(hop).is_none(),
            "{hop} reached the client: {response:?}"
        );
    }
    assert!(
        response
            .headers
            .get("connection")
            .is_none_or(|values| values.iter().all(|v| !v.contains("x-upstream-hop"))),
        "{response:?}"
    );
    assert_eq!(response.header("x-upstream-end"), Some("kept"));
}

#[test]
fn the_upstream_learns_the_client_from_forwarded_and_x_forwarded_for() {
    let upstream = RecordingUpstream::start(&[]);
    let gateway = Gateway::start(&["--upstream", &upstream.url(), "--quota", "100/s"]);
    let asked = gateway.address.to_string();
    assert_eq!(gateway.get("/", &[]).status, 200);
    assert_eq!(
        gateway
            .get(
                "/",
                &[
                    ("x-forwarded-for", "203.0.113.7"),
                    ("forwarded", "for=203.0.113.7")
                ]
            )
            .status,
        200
    );
    let requests = upstream.requests();
    let [first, second] = requests.as_slice() else {
        panic!("two requests upstream, got {requests:?}");
    };
    let field =
        |received: &common::Received, name: &str| received.headers.get(name).cloned().unwrap_or_default();
    assert_eq!(field(first, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(
        field(first, "forwarded"),
        [format!("for=127.0.0.1;proto=http;host=\"{asked}\"")]
    );
    assert_eq!(field(first, "host"), [upstream.address.to_string()]);
    // Appended after what the client sent, as a new line of the same field.
    assert_eq!(field(second, "x-forwarded-for"), ["203.0.113.7", "127.0.0.1"]);
    assert_eq!(
        field(second, "forwarded"),
        [
            "for=203.0.113.7".to_owned(),
            format!("for=127.0.0.1;proto=http;host=\"{asked}\"")
        ]
    );
}
