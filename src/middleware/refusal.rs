//! The responses the layer answers with itself: refusals and errors, for HTTP and gRPC.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use http::{Method, Response, StatusCode};
use http_body_util::Full;

use super::fields::{ceil_secs, write_retry_after, Fields};

static GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
static GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

/// gRPC's `RESOURCE_EXHAUSTED`.
const GRPC_RESOURCE_EXHAUSTED: u16 = 8;

/// The request's content type when it is a gRPC call (the layer then answers in gRPC, with
/// this content type), `None` otherwise.
///
/// A gRPC call is a `POST` (gRPC and gRPC-Web send every call so): another method with a gRPC
/// content type is answered in HTTP, so that a refusal of a `GET` is never a `200` that a cache
/// could keep and serve.
///
/// gRPC's content types, as the gRPC and gRPC-Web specifications define them (ASCII case
/// ignored): `application/grpc`, `application/grpc-web` and `application/grpc-web-text`, each
/// alone or with a `+<subtype>` (`application/grpc+proto`, `application/grpc-web+json`...).
/// Media-type parameters after `;` are allowed; anything else (`application/grpcfoo`,
/// `application/grpc+`) is not gRPC.
pub(crate) fn grpc_content_type<'a>(method: &Method, headers: &'a HeaderMap) -> Option<&'a HeaderValue> {
    if method != Method::POST {
        return None;
    }
    headers
        .get(CONTENT_TYPE)
        .filter(|value| is_grpc_media_type(value.as_bytes()))
}

fn is_grpc_media_type(value: &[u8]) -> bool {
    let essence = value
        .split(|&byte| byte == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let Some(rest) = strip_prefix_ignore_case(essence, b"application/grpc") else {
        return false;
    };
    let rest = strip_prefix_ignore_case(rest, b"-web-text")
        .or_else(|| strip_prefix_ignore_case(rest, b"-web"))
        .unwrap_or(rest);
    match rest {
        [] => true,
        [b'+', subtype @ ..] => !subtype.is_empty() && subtype.iter().copied().all(is_token_byte),
        _ => false,
    }
}

fn strip_prefix_ignore_case<'a>(bytes: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let (head, rest) = bytes.split_at_checked(prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then_some(rest)
}

/// An HTTP token character (RFC 9110 `tchar`).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// A refused request: `429 Too Many Requests` (HTTP) or `grpc-status: 8` (gRPC), with
/// `Retry-After` and the rate-limit fields. `grpc` is the content type of a gRPC request.
pub(crate) fn too_many_requests(
    fields: &Fields,
    remaining: u64,
    retry_after: Duration,
    grpc: Option<&HeaderValue>,
) -> Response<Full<Bytes>> {
    let message = format!("too many requests: retry after {} s", ceil_secs(retry_after));
    let mut response = match grpc {
        Some(content_type) => grpc_error(content_type, GRPC_RESOURCE_EXHAUSTED, &message),
        None => plain(StatusCode::TOO_MANY_REQUESTS, message),
    };
    fields.write_values(response.headers_mut(), remaining, retry_after);
    write_retry_after(response.headers_mut(), retry_after);
    response
}

/// An answer that is not a refusal over quota: a request without a key, a limiter that
/// could not decide, a full table. `grpc` is the content type of a gRPC request.
pub(crate) fn error(
    status: StatusCode,
    message: String,
    grpc: Option<&HeaderValue>,
) -> Response<Full<Bytes>> {
    match grpc {
        Some(content_type) => grpc_error(content_type, grpc_code(status), &message),
        None => plain(status, message),
    }
}

fn plain(status: StatusCode, mut message: String) -> Response<Full<Bytes>> {
    message.push('\n');
    let mut response = Response::new(Full::new(Bytes::from(message)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A gRPC "trailers-only" answer: HTTP 200, no message, the status in the headers, and the
/// request's own `content_type` (a gRPC-Web client is answered in gRPC-Web).
fn grpc_error(content_type: &HeaderValue, code: u16, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, content_type.clone());
    headers.insert(GRPC_STATUS.clone(), HeaderValue::from(code));
    // grpc-message is percent-encoded: keep printable ASCII except '%', encode the rest.
    let mut encoded = String::with_capacity(message.len());
    for byte in message.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    if let Ok(value) = HeaderValue::try_from(encoded) {
        headers.insert(GRPC_MESSAGE.clone(), value);
    }
    response
}

/// The gRPC status code closest to an HTTP status. The gateway errors are UNAVAILABLE, as in
/// gRPC's own mapping of HTTP statuses: the code clients retry.
fn grpc_code(status: StatusCode) -> u16 {
    match status {
        StatusCode::BAD_REQUEST => 3,       // INVALID_ARGUMENT
        StatusCode::UNAUTHORIZED => 16,     // UNAUTHENTICATED
        StatusCode::FORBIDDEN => 7,         // PERMISSION_DENIED
        StatusCode::NOT_FOUND => 12,        // UNIMPLEMENTED
        StatusCode::TOO_MANY_REQUESTS => 8, // RESOURCE_EXHAUSTED
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT => 14, // UNAVAILABLE
        _ => 13, // INTERNAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::middleware::fields::QuotedName;
    use crate::policy::Policy;

    #[test]
    fn http_statuses_map_to_the_closest_grpc_codes() {
        for (status, code) in [
            (StatusCode::BAD_REQUEST, 3),
            (StatusCode::UNAUTHORIZED, 16),
            (StatusCode::FORBIDDEN, 7),
            (StatusCode::NOT_FOUND, 12),
            (StatusCode::TOO_MANY_REQUESTS, 8),
            (StatusCode::BAD_GATEWAY, 14),
            (StatusCode::SERVICE_UNAVAILABLE, 14),
            (StatusCode::GATEWAY_TIMEOUT, 14),
            (StatusCode::INTERNAL_SERVER_ERROR, 13),
        ] {
            assert_eq!(grpc_code(status), code, "{status}");
        }
    }

    #[test]
    fn grpc_is_recognised_by_its_exact_content_types() {
        let mut headers = HeaderMap::new();
        assert_eq!(grpc_content_type(&Method::POST, &headers), None);
        for (value, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("application/grpc+json", true),
            ("application/grpc+my.codec-v2", true),
            ("Application/GRPC", true),
            ("application/grpc-web", true),
            ("Application/GRPC-web+proto", true),
            ("application/grpc-web-text", true),
            ("application/grpc-web-text+proto", true),
            ("application/grpc; charset=utf-8", true),
            ("application/grpc+proto ; x=y", true),
            ("application/json", false),
            ("application/grp", false),
            ("application/grpcfoo", false),
            ("application/grpc+", false),
            ("application/grpc+pro to", false),
            ("application/grpc-", false),
            ("application/grpc-webfoo", false),
            ("application/grpc-web-", false),
            ("application/grpc-web-textual", false),
            ("application/grpc-text", false),
            ("application/grpc/proto", false),
            ("text/application/grpc", false),
            ("", false),
        ] {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
            let expected = grpc.then(|| HeaderValue::from_static(value));
            assert_eq!(
                grpc_content_type(&Method::POST, &headers),
                expected.as_ref(),
                "{value}"
            );
            // Only a POST is a gRPC call.
            for method in [Method::GET, Method::HEAD, Method::PUT] {
                assert_eq!(grpc_content_type(&method, &headers), None, "{method} {value}");
            }
        }
    }

    #[test]
    fn grpc_refusals_carry_the_request_content_type() {
        let policy = Policy::new(5, Duration::from_secs(1));
        let fields = Fields::new(QuotedName::default_name(), policy);
        for content_type in [
            "application/grpc-web+proto",
            "application/grpc-web-text",
            "application/grpc+json",
        ] {
            let content_type = HeaderValue::from_static(content_type);
            let refused = too_many_requests(&fields, 0, Duration::from_millis(1500), Some(&content_type));
            assert_eq!(refused.status(), StatusCode::OK);
            assert_eq!(refused.headers()[CONTENT_TYPE], content_type);
            assert_eq!(refused.headers()["grpc-status"], "8");
            assert_eq!(refused.headers()["retry-after"], "2");
            let failed = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "down".into(),
                Some(&content_type),
            );
            assert_eq!(failed.headers()[CONTENT_TYPE], content_type);
            assert_eq!(failed.headers()["grpc-status"], "14");
        }
        let plain = too_many_requests(&fields, 0, Duration::from_secs(1), None);
        assert_eq!(plain.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(plain.headers()[CONTENT_TYPE], "text/plain; charset=utf-8");
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        let grpc = HeaderValue::from_static("application/grpc");
        let response = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "100% down: é".into(),
            Some(&grpc),
        );
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(response.headers()["grpc-message"], "100%25 down: %C3%A9");
    }
}
