//! The responses the layer answers with itself: refusals and errors, for HTTP and gRPC.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body_util::Full;

use super::fields::{ceil_secs, write_retry_after, Fields};

static GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
static GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

/// gRPC's `RESOURCE_EXHAUSTED`.
const GRPC_RESOURCE_EXHAUSTED: u16 = 8;

/// Whether the request is a gRPC call (`content-type: application/grpc`, `application/grpc+proto`...).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.as_bytes().get(..16))
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"application/grpc"))
}

/// A refused request: `429 Too Many Requests` (HTTP) or `grpc-status: 8` (gRPC), with
/// `Retry-After` and the rate-limit fields.
pub(crate) fn too_many_requests(
    fields: &Fields,
    remaining: u64,
    retry_after: Duration,
    grpc: bool,
) -> Response<Full<Bytes>> {
    let message = format!("too many requests: retry after {} s", ceil_secs(retry_after));
    let mut response = if grpc {
        grpc_error(GRPC_RESOURCE_EXHAUSTED, &message)
    } else {
        plain(StatusCode::TOO_MANY_REQUESTS, message)
    };
    fields.write_values(response.headers_mut(), remaining, retry_after);
    write_retry_after(response.headers_mut(), retry_after);
    response
}

/// An answer that is not a refusal over quota: a request without a key, a limiter that
/// could not decide, a full table.
pub(crate) fn error(status: StatusCode, message: String, grpc: bool) -> Response<Full<Bytes>> {
    if grpc {
        grpc_error(grpc_code(status), &message)
    } else {
        plain(status, message)
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

/// A gRPC "trailers-only" answer: HTTP 200, no message, the status in the headers.
fn grpc_error(code: u16, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
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

/// The gRPC status code closest to an HTTP status.
fn grpc_code(status: StatusCode) -> u16 {
    match status {
        StatusCode::BAD_REQUEST => 3,       // INVALID_ARGUMENT
        StatusCode::UNAUTHORIZED => 16,     // UNAUTHENTICATED
        StatusCode::FORBIDDEN => 7,         // PERMISSION_DENIED
        StatusCode::TOO_MANY_REQUESTS => 8, // RESOURCE_EXHAUSTED
        StatusCode::SERVICE_UNAVAILABLE => 14,
        _ => 13, // INTERNAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_is_recognised_by_content_type() {
        let mut headers = HeaderMap::new();
        assert!(!is_grpc(&headers));
        for (value, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("Application/GRPC-web", true),
            ("application/json", false),
            ("application/grp", false),
        ] {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_grpc(&headers), grpc, "{value}");
        }
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        let response = error(StatusCode::SERVICE_UNAVAILABLE, "100% down: é".into(), true);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(response.headers()["grpc-message"], "100%25 down: %C3%A9");
    }
}
