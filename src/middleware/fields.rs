//! The response fields that tell a client its limit: `RateLimit-Policy`, `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers, structured fields), `Retry-After`, and the legacy
//! `X-RateLimit-*`.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use super::policy::Policy;
use crate::Decision;

static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
static X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
static X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// A duration in whole seconds, rounded up (a client told 0 would retry too early).
pub(crate) fn ceil_secs(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0))
}

/// `n` in decimal, written on the stack.
struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    fn new(mut n: u64) -> Decimal {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// Appends `n` in decimal.
#[cfg(test)]
fn push_decimal(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(Decimal::new(n).as_bytes());
}

/// `n` as a header value, in one allocation (`HeaderValue::from(u64)` takes two: a buffer
/// with room to spare, and the `Bytes` header sharing it).
fn decimal_value(n: u64) -> HeaderValue {
    // Digits are always a valid value.
    HeaderValue::from_bytes(Decimal::new(n).as_bytes()).unwrap_or_else(|_| HeaderValue::from(n))
}

/// Which fields a layer writes, with what it can prepare once.
#[derive(Clone, Debug)]
pub(crate) struct Fields {
    /// The policy name as an sf-string, quotes included: `"default"`.
    name: String,
    /// `RateLimit-Policy`, the same on every response.
    policy_value: HeaderValue,
    /// `X-RateLimit-Limit`, the same on every response.
    limit_value: HeaderValue,
    /// Whether admitted responses carry the fields too.
    pub(crate) on_admitted: bool,
    /// Whether the legacy `X-RateLimit-Limit/Remaining/Reset` are written too.
    pub(crate) legacy: bool,
}

impl Fields {
    /// The fields of a policy whose name [`quote_policy_name`] wrote.
    pub(crate) fn new(name: QuotedName, policy: Policy) -> Fields {
        let value = format!("{};q={};w={}", name.0, policy.quota, ceil_secs(policy.window));
        // The quoted name is printable ASCII and the rest digits, so this never falls back.
        let policy_value = HeaderValue::try_from(value).unwrap_or_else(|_| HeaderValue::from_static(""));
        Fields {
            name: name.0,
            policy_value,
            limit_value: decimal_value(policy.quota),
            on_admitted: false,
            legacy: false,
        }
    }

    /// The fields for an admitted request: `t` is the time until the quota is whole again.
    pub(crate) fn admitted(&self, decision: &Decision) -> PreparedFields {
        self.prepare(decision.remaining(), decision.reset_after())
    }

    /// Writes the fields: `remaining` units pass now, `t` is `reset` in whole seconds, rounded up.
    pub(crate) fn write_values(&self, headers: &mut HeaderMap, remaining: u64, reset: Duration) {
        self.prepare(remaining, reset).write(headers);
    }

    /// The field values, ready to be written on a response that does not exist yet.
    pub(crate) fn prepare(&self, remaining: u64, reset: Duration) -> PreparedFields {
        let reset = ceil_secs(reset);
        // `"name";r=R;t=T`, written by hand: `format!` costs more than the rest of the field.
        let (r, t) = (Decimal::new(remaining), Decimal::new(reset));
        let (r, t) = (r.as_bytes(), t.as_bytes());
        // Exactly the value's length: `Bytes` then takes the buffer as it is, where spare room
        // would cost it a second allocation.
        let mut value = Vec::with_capacity(self.name.len() + 6 + r.len() + t.len());
        value.extend_from_slice(self.name.as_bytes());
        value.extend_from_slice(b";r=");
        value.extend_from_slice(r);
        value.extend_from_slice(b";t=");
        value.extend_from_slice(t);
        debug_assert_eq!(value.len(), value.capacity());
        PreparedFields {
            policy: self.policy_value.clone(),
            // The name is printable ASCII and the rest digits, so the value is always valid.
            ratelimit: HeaderValue::from_maybe_shared(Bytes::from(value)).ok(),
            legacy: self.legacy.then(|| {
                (
                    self.limit_value.clone(),
                    decimal_value(remaining),
                    decimal_value(reset),
                )
            }),
        }
    }
}

/// The fields of one decision, ready to be written.
#[derive(Debug)]
pub(crate) struct PreparedFields {
    policy: HeaderValue,
    ratelimit: Option<HeaderValue>,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`, when asked for.
    legacy: Option<(HeaderValue, HeaderValue, HeaderValue)>,
}

impl PreparedFields {
    /// Writes the fields on `headers`.
    ///
    /// The IETF fields are lists: a response that already carries another layer's policy gets
    /// this one appended (one more field line). The legacy fields hold one policy: the first
    /// layer to write them (the innermost) keeps them.
    pub(crate) fn write(self, headers: &mut HeaderMap) {
        headers.append(RATELIMIT_POLICY.clone(), self.policy);
        if let Some(ratelimit) = self.ratelimit {
            headers.append(RATELIMIT.clone(), ratelimit);
        }
        if let Some((limit, remaining, reset)) = self.legacy {
            if !headers.contains_key(&X_RATELIMIT_LIMIT) {
                headers.insert(X_RATELIMIT_LIMIT.clone(), limit);
                headers.insert(X_RATELIMIT_REMAINING.clone(), remaining);
                headers.insert(X_RATELIMIT_RESET.clone(), reset);
            }
        }
    }
}

/// A policy name written as a structured-field string, quotes included: `"default"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QuotedName(String);

impl QuotedName {
    /// The name used when none is given.
    pub(crate) fn default_name() -> QuotedName {
        QuotedName("\"default\"".to_owned())
    }
}

/// `name` as a structured-field string (`"` and `\\` escaped).
///
/// # Errors
/// [`PolicyNameError`] when `name` is empty or not printable ASCII.
pub(crate) fn quote_policy_name(name: &str) -> Result<QuotedName, PolicyNameError> {
    if name.is_empty() || !name.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(PolicyNameError {
            name: name.to_owned(),
        });
    }
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for c in name.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    Ok(QuotedName(quoted))
}

/// Writes `Retry-After` in whole seconds, rounded up.
pub(crate) fn write_retry_after(headers: &mut HeaderMap, retry_after: Duration) {
    headers.insert(RETRY_AFTER, HeaderValue::from(ceil_secs(retry_after)));
}

/// A policy name that cannot be written in the `RateLimit` fields: empty, or not printable
/// ASCII.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyNameError {
    /// The name asked for.
    pub name: String,
}

impl fmt::Display for PolicyNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the policy name {:?} cannot be written in a RateLimit field (use 1 or more printable ASCII characters)",
            self.name
        )
    }
}

impl std::error::Error for PolicyNameError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DirectLimiter, ManualClock, TokenBucket};

    #[test]
    fn decimals_are_written_exactly() {
        for n in [0, 7, 10, 99, 1_000_000, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(12)), 12);
        assert_eq!(ceil_secs(Duration::from_millis(12_001)), 13);
        assert_eq!(ceil_secs(Duration::MAX), u64::MAX);
    }

    #[test]
    fn fields_are_structured_and_rounded_up() -> Result<(), Box<dyn std::error::Error>> {
        let policy = Policy {
            quota: 100,
            window: Duration::from_secs(60),
        };
        let mut fields = Fields::new(QuotedName::default_name(), policy);
        fields.legacy = true;
        let limiter = DirectLimiter::with_clock(TokenBucket::new("1/1500ms".parse()?)?, ManualClock::new());
        let mut headers = HeaderMap::new();
        fields.admitted(&limiter.check()).write(&mut headers);
        assert_eq!(headers["ratelimit-policy"], r#""default";q=100;w=60"#);
        assert_eq!(headers["ratelimit"], r#""default";r=0;t=2"#);
        let refused = limiter.check();
        let mut headers = HeaderMap::new();
        fields.write_values(&mut headers, refused.remaining(), refused.retry_after());
        write_retry_after(&mut headers, refused.retry_after());
        assert_eq!(headers["ratelimit"], r#""default";r=0;t=2"#);
        assert_eq!(headers["retry-after"], "2");
        assert_eq!(headers["x-ratelimit-limit"], "100");
        assert_eq!(headers["x-ratelimit-remaining"], "0");
        assert_eq!(headers["x-ratelimit-reset"], "2");
        Ok(())
    }

    #[test]
    fn policy_names_are_escaped_or_refused() -> Result<(), Box<dyn std::error::Error>> {
        let policy = Policy {
            quota: 1,
            window: Duration::from_millis(1),
        };
        let fields = Fields::new(quote_policy_name(r#"say "hi" \o/"#)?, policy);
        assert_eq!(fields.policy_value, r#""say \"hi\" \\o/";q=1;w=1"#);
        assert_eq!(
            quote_policy_name(""),
            Err(PolicyNameError { name: String::new() })
        );
        assert!(quote_policy_name("tab\there").is_err());
        assert!(quote_policy_name("é").is_err());
        Ok(())
    }
}
