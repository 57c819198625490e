//! The response fields that tell a client its limit: `RateLimit-Policy`, `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers, structured fields), `Retry-After`, and the legacy
//! `X-RateLimit-*`.
//!
//! `t` has one meaning on every response, the draft's (-10: "the number of seconds until
//! additional quota associated with the quota policy is made available"; -11: "the number of
//! seconds within which the client can use no more than the available quota"): the time until
//! more than `r` units pass. A refusal's is its retry-after; an admitted response's comes from
//! the policy's refill, and is left out when the refill is unknown.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::policy::{ExactWindow, Policy, Refill};
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

/// `n` nanoseconds (at most `u64::MAX`: every duration here comes from a decision's `u64`).
fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
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
    /// The limiter's quota (not scaled as announced): the units it holds when full.
    quota: u64,
    /// How its used units come back.
    refill: Refill,
    /// Whether admitted responses carry the fields too.
    pub(crate) on_admitted: bool,
    /// Whether the legacy `X-RateLimit-Limit/Remaining/Reset` are written too.
    pub(crate) legacy: bool,
    /// Whether a decision of this policy is reported (`RateLimit`, the legacy fields); a
    /// [`silent`](Fields::silent) one writes `RateLimit-Policy` alone.
    reports: bool,
}

/// The largest integer a structured field can carry (RFC 8941, section 3.3.1: at most 15
/// digits): a larger `q` or `r` would make the whole field invalid for a strict parser, so what
/// is announced is clamped to it (less than the limiter gives, never more).
pub(crate) const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// The `q` and `w` announced for `policy`: `w` the window in whole seconds, rounded up (at
/// least 1, as the draft wants, and at most [`SF_INTEGER_MAX`]), and `q` the quota scaled to that
/// window, rounded down: never more than the limiter admits in `w` seconds. Computed from the
/// exact window (a bucket's need not be whole nanoseconds: `"3/s burst 1"` fills in a third of a
/// second, and is announced `q=3;w=1`), and `q` clamped to [`SF_INTEGER_MAX`].
///
/// Scaling assumes the limiter gives its quota again in every window. Two do not:
/// - a bucket runs at its emission interval `T`, the exact one rounded up to whole nanoseconds
///   (up to 1% slower), so `q` is also at most what it admits in `w` seconds starting full
///   ([`bucket_admits`]): `"999999/s burst 1"` (`T` = 1001 ns) is `q=999001;w=1`;
/// - a sliding window counter admits one unit less in a window after a used one
///   ([`sliding_admits`]): `"7/250ms"` is `q=25;w=1`, not 28.
fn announced(policy: Policy) -> (u64, u64) {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let ExactWindow { nanos, per } = policy.exact_window();
    // The window is `nanos / per` ns, so `w` seconds are `w * NANOS_PER_SEC * per` in its units.
    let second = NANOS_PER_SEC * per;
    let nanos = nanos.max(1);
    let quota = u128::from(policy.quota);
    // A structured-field integer has at most 15 digits: a longer window (over 31 million years,
    // only from `Policy::new`) is announced as the longest that fits, with `q` scaled down.
    let w = nanos.div_ceil(second).clamp(1, u128::from(SF_INTEGER_MAX));
    let span = w.checked_mul(second);
    let q = match span {
        Some(span) if span == nanos => quota,
        // Shortened to fit: scaled down. (No overflow in `span`: it is below `nanos`.)
        Some(span) if span < nanos => quota
            .checked_mul(span)
            .map_or_else(|| quota / nanos.div_ceil(span), |units| units / nanos),
        // `span > nanos`, so the scaled quota is at least `quota`: on overflow, `quota` itself
        // still promises no more than the limiter gives.
        span => span
            .and_then(|span| quota.checked_mul(span))
            .map_or(quota, |units| units / nanos),
    };
    let q = match policy.refill {
        Refill::Steady { interval, .. } => q.min(bucket_admits(
            policy.quota,
            interval,
            w.saturating_mul(NANOS_PER_SEC),
        )),
        // Whole windows in the span: at least one unless it was shortened to fit, where the
        // scaled `q` is already below the quota.
        Refill::Sliding => match span.map_or(u128::MAX, |span| span / nanos) {
            0 => q,
            windows => q.min(sliding_admits(policy.quota, windows)),
        },
        Refill::AtWindowEnd | Refill::Unknown => q,
    };
    let q = u64::try_from(q).unwrap_or(u64::MAX).min(SF_INTEGER_MAX);
    (q, u64::try_from(w).unwrap_or(u64::MAX))
}

/// The fewest requests of weight 1 a sliding window counter of `limit` per window admits, when
/// asked at every instant, in a span of `windows` whole windows (at least 1) starting fresh,
/// wherever the span starts: `limit` in the window of its first request, then `limit - 1` in
/// each later one. A window after one that admitted `p >= 1` units admits at most `limit - 1`:
/// `p * (w - e) + (c + 1) * w <= limit * w` needs `c + 1 < limit` for every `e` before the
/// window's end, and `limit - 1` is reached (at the window's end `p` weighs almost nothing).
fn sliding_admits(limit: u64, windows: u128) -> u128 {
    let later = windows.saturating_sub(1);
    u128::from(limit).saturating_add(later.saturating_mul(u128::from(limit.saturating_sub(1))))
}

/// The most requests of weight 1 a bucket of `burst` units, one coming back every `interval`,
/// admits in `span_ns` nanoseconds (at least 1) starting full: the GCRA admits `burst` at once,
/// then one every `interval`, at `interval, 2 * interval, ...`, of which `(span_ns - 1) /
/// interval` come before the span ends.
fn bucket_admits(burst: u64, interval: Duration, span_ns: u128) -> u128 {
    let interval = interval.as_nanos().max(1);
    u128::from(burst).saturating_add(span_ns.saturating_sub(1) / interval)
}

impl Fields {
    /// The fields of a policy whose name [`quote_policy_name`] wrote.
    #[cfg(test)]
    pub(crate) fn new(name: QuotedName, policy: Policy) -> Fields {
        Fields::listed(vec![(name, policy)])
            .pop()
            .unwrap_or_else(|| Fields::silent(HeaderValue::from_static("")))
    }

    /// The fields of each of several policies (a policy set's), in order: each reports its own
    /// decisions, and every one announces the whole list in `RateLimit-Policy`
    /// (`"burst";q=10;w=1, "daily";q=10000;w=86400`).
    pub(crate) fn listed(policies: Vec<(QuotedName, Policy)>) -> Vec<Fields> {
        let items: Vec<(String, u64)> = policies
            .iter()
            .map(|(name, policy)| {
                let (q, w) = announced(*policy);
                (format!("{};q={q};w={w}", name.0), q)
            })
            .collect();
        let policy_value = list_value(items.iter().map(|(item, _)| item.as_str()));
        policies
            .into_iter()
            .zip(items)
            .map(|((name, policy), (_, q))| Fields {
                name: name.0,
                policy_value: policy_value.clone(),
                limit_value: decimal_value(q),
                quota: policy.quota,
                refill: policy.refill,
                on_admitted: false,
                legacy: false,
                reports: true,
            })
            .collect()
    }

    /// Fields that report no decision: `RateLimit-Policy` is `policy_value` (the list
    /// [`listed`](Self::listed) wrote; none when empty), and nothing else is written (a policy
    /// set's member that announces no policy).
    pub(crate) fn silent(policy_value: HeaderValue) -> Fields {
        Fields {
            name: String::new(),
            policy_value,
            limit_value: decimal_value(0),
            quota: 0,
            refill: Refill::Unknown,
            on_admitted: false,
            legacy: false,
            reports: false,
        }
    }

    /// The `RateLimit-Policy` value these fields announce.
    pub(crate) fn policy_value(&self) -> &HeaderValue {
        &self.policy_value
    }

    /// The fields for an admitted request: `r` the units that still pass now, and `t` the time
    /// until more than `r` pass (additional quota is made available), when the policy's refill
    /// tells it. On a shaper with a maximum wait (`max_delay`), both count only the requests
    /// that maximum lets through ([`Fields::admitted_values`]). "Now" is when the request is
    /// sent on: a shaped request's fields are those of its slot ([`Fields::at_slot`]).
    pub(crate) fn admitted(&self, decision: &Decision, max_delay: Option<Duration>) -> PreparedFields {
        let (remaining, more) = self.admitted_values(&self.at_slot(decision), max_delay);
        self.prepare(remaining, more)
    }

    /// An admitted `decision` of a steadily refilled limiter as seen when its request is sent
    /// on, its [`delay`](Decision::delay) later (the response's fields are read then): the
    /// queue is `delay` shorter, so `reset_after` is, and `remaining` is what the bucket holds
    /// with that queue (`quota - ceil(reset_after / interval)`, the GCRA's count); the request
    /// itself waits no more. As the decision itself, it does not know of requests of the key
    /// admitted during the wait (each would take one more unit), nor of a wait for the service
    /// behind to be ready after the slot. A decision without a delay is itself.
    fn at_slot(&self, decision: &Decision) -> Decision {
        let delay = decision.delay();
        let Refill::Steady { interval, .. } = self.refill else {
            return *decision;
        };
        if delay.is_zero() {
            return *decision;
        }
        let reset = decision.reset_after().saturating_sub(delay);
        let queued = reset.as_nanos().div_ceil(interval.as_nanos().max(1));
        let remaining = self
            .quota
            .saturating_sub(u64::try_from(queued).unwrap_or(u64::MAX))
            // Time passing only gives units back.
            .max(decision.remaining());
        Decision::allowed(remaining, u64::try_from(reset.as_nanos()).unwrap_or(u64::MAX), 0)
    }

    /// The `r` and `t` of an admitted `decision`.
    ///
    /// On a shaper, the `k`-th more request sent now waits `delay + k * interval` (this
    /// request's wait, then one slot each), and a layer with a maximum wait refuses it when that
    /// is above `max_delay`: only `(max_delay - delay) / interval` more pass, however many
    /// `remaining` says the queue holds. A request sent `s` later waits `s` less, so `r + 1` pass
    /// once `delay + (r + 1) * interval - max_delay` has passed (and the queue has room for
    /// them: [`Fields::next_unit`] when `r` is all of `remaining`).
    fn admitted_values(&self, decision: &Decision, max_delay: Option<Duration>) -> (u64, Option<Duration>) {
        let remaining = decision.remaining();
        let next = self.next_unit(decision);
        let (
            Refill::Steady {
                interval,
                shaped: true,
            },
            Some(max),
        ) = (self.refill, max_delay)
        else {
            return (remaining, next);
        };
        let interval = interval.as_nanos().max(1);
        let (delay, max) = (decision.delay().as_nanos(), max.as_nanos());
        let fit = u64::try_from(max.saturating_sub(delay) / interval).unwrap_or(u64::MAX);
        let r = remaining.min(fit);
        let last_wait = delay.saturating_add((u128::from(r) + 1).saturating_mul(interval));
        let fits_after = nanos(last_wait.saturating_sub(max));
        if r < remaining {
            (r, Some(fits_after))
        } else {
            (r, next.map(|next| next.max(fits_after)))
        }
    }

    /// When the same request passes after a refused `decision` of this policy's limiter (not of
    /// a stand-in with an algorithm of its own): its retry-after; on a shaper with a maximum
    /// wait, later if the request would then still wait above `max_delay`. A request retried
    /// `s` later waits `reset_after - s` for the queue, so it fits once `reset_after -
    /// max_delay` has passed.
    pub(crate) fn refused_retry(&self, decision: &Decision, max_delay: Option<Duration>) -> Duration {
        let retry_after = decision.retry_after();
        match (self.refill, max_delay) {
            (Refill::Steady { shaped: true, .. }, Some(max)) => {
                retry_after.max(decision.reset_after().saturating_sub(max))
            }
            _ => retry_after,
        }
    }

    /// When the next unit comes back after an admitted `decision`: `None` when the limiter is
    /// full (nothing to come back) or its refill is unknown.
    fn next_unit(&self, decision: &Decision) -> Option<Duration> {
        // `quota - remaining - 1`: the used units that come back after the next one.
        let after_next = self.quota.checked_sub(decision.remaining())?.checked_sub(1)?;
        match self.refill {
            // GCRA: `remaining = quota - ceil(reset / interval)`, so the next unit comes
            // `reset - after_next * interval` from now, in (0, interval].
            Refill::Steady { interval, .. } => {
                let back = interval.as_nanos().saturating_mul(u128::from(after_next));
                let next = decision.reset_after().as_nanos().saturating_sub(back);
                Some(nanos(next))
            }
            Refill::AtWindowEnd => Some(decision.reset_after()),
            Refill::Sliding | Refill::Unknown => None,
        }
    }

    /// Writes the fields of a refusal: `remaining` units pass now, and more in `retry_after`
    /// (the same request passes then).
    pub(crate) fn write_values(&self, headers: &mut HeaderMap, remaining: u64, retry_after: Duration) {
        self.prepare(remaining, Some(retry_after)).write(headers);
    }

    /// The field values, ready to be written on a response that does not exist yet: `r` is
    /// `remaining` (at most [`SF_INTEGER_MAX`]), `t` (absent when `None`) is `more` in whole
    /// seconds, rounded up (at most `u64::MAX` ns: 11 digits).
    pub(crate) fn prepare(&self, remaining: u64, more: Option<Duration>) -> PreparedFields {
        if !self.reports {
            return PreparedFields {
                policy: (!self.policy_value.is_empty()).then(|| self.policy_value.clone()),
                ratelimit: None,
                legacy: None,
            };
        }
        let remaining = remaining.min(SF_INTEGER_MAX);
        let more = more.map(ceil_secs);
        // `"name";r=R;t=T`, written by hand: `format!` costs more than the rest of the field.
        let r = Decimal::new(remaining);
        let t = more.map(Decimal::new);
        let (r, t) = (r.as_bytes(), t.as_ref().map_or(&[][..], Decimal::as_bytes));
        let t_len = if more.is_some() { 3 + t.len() } else { 0 };
        // Exactly the value's length: `Bytes` then takes the buffer as it is, where spare room
        // would cost it a second allocation.
        let mut value = Vec::with_capacity(self.name.len() + 3 + r.len() + t_len);
        value.extend_from_slice(self.name.as_bytes());
        value.extend_from_slice(b";r=");
        value.extend_from_slice(r);
        if more.is_some() {
            value.extend_from_slice(b";t=");
            value.extend_from_slice(t);
        }
        debug_assert_eq!(value.len(), value.capacity());
        PreparedFields {
            policy: Some(self.policy_value.clone()),
            // The name is printable ASCII and the rest digits, so the value is always valid.
            ratelimit: HeaderValue::from_maybe_shared(Bytes::from(value)).ok(),
            legacy: self.legacy.then(|| {
                (
                    self.limit_value.clone(),
                    decimal_value(remaining),
                    more.map(decimal_value),
                )
            }),
        }
    }
}

/// A `RateLimit-Policy` value listing `items` (an sf-list: items joined by `, `).
fn list_value<'a>(items: impl Iterator<Item = &'a str>) -> HeaderValue {
    let value = items.collect::<Vec<_>>().join(", ");
    // Quoted printable-ASCII names and digits, so this never falls back.
    HeaderValue::try_from(value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The fields of one decision, ready to be written.
#[derive(Debug)]
pub(crate) struct PreparedFields {
    /// `RateLimit-Policy`: none for a limiter that announces no policy.
    policy: Option<HeaderValue>,
    ratelimit: Option<HeaderValue>,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset` (absent with `t`), when asked for.
    legacy: Option<(HeaderValue, HeaderValue, Option<HeaderValue>)>,
}

impl PreparedFields {
    /// Writes the fields on `headers`.
    ///
    /// The IETF fields are lists: a response that already carries another layer's policy gets
    /// this one appended (one more field line). The legacy fields hold one policy: the first
    /// layer to write them (the innermost) keeps them.
    pub(crate) fn write(self, headers: &mut HeaderMap) {
        if let Some(policy) = self.policy {
            headers.append(RATELIMIT_POLICY.clone(), policy);
        }
        if let Some(ratelimit) = self.ratelimit {
            headers.append(RATELIMIT.clone(), ratelimit);
        }
        if let Some((limit, remaining, reset)) = self.legacy {
            if !headers.contains_key(&X_RATELIMIT_LIMIT) {
                headers.insert(X_RATELIMIT_LIMIT.clone(), limit);
                headers.insert(X_RATELIMIT_REMAINING.clone(), remaining);
                if let Some(reset) = reset {
                    headers.insert(X_RATELIMIT_RESET.clone(), reset);
                }
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
    use crate::middleware::AnnouncedPolicy;
    use crate::{DirectLimiter, FixedWindow, LeakyBucket, ManualClock, Quota, SlidingWindow, TokenBucket};

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
        let bucket = TokenBucket::new("1/1500ms".parse()?)?;
        let mut fields = Fields::new(QuotedName::default_name(), bucket.policy());
        fields.legacy = true;
        let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
        let mut headers = HeaderMap::new();
        fields.admitted(&limiter.check(), None).write(&mut headers);
        // 1 per 1.5 s, announced per whole 2 s: still 1 (1.33 rounded down).
        assert_eq!(headers["ratelimit-policy"], r#""default";q=1;w=2"#);
        assert_eq!(headers["ratelimit"], r#""default";r=0;t=2"#);
        let refused = limiter.check();
        let mut headers = HeaderMap::new();
        fields.write_values(&mut headers, refused.remaining(), refused.retry_after());
        write_retry_after(&mut headers, refused.retry_after());
        assert_eq!(headers["ratelimit"], r#""default";r=0;t=2"#);
        assert_eq!(headers["retry-after"], "2");
        assert_eq!(headers["x-ratelimit-limit"], "1");
        assert_eq!(headers["x-ratelimit-remaining"], "0");
        assert_eq!(headers["x-ratelimit-reset"], "2");
        Ok(())
    }

    /// Every request a client sends at once, then again whenever told (`retry_after`), for `span`
    /// from `start` on `clock`, to a fresh limiter (`check`, after `reset`): how many pass.
    fn admitted_greedily(
        check: impl Fn() -> Decision,
        clock: &ManualClock,
        start: crate::Timestamp,
        span: Duration,
    ) -> u64 {
        clock.set(start);
        let end = start.as_nanos() + span.as_nanos() as u64;
        let mut admitted = 0;
        while crate::Clock::now(clock).as_nanos() < end {
            let decision = check();
            if decision.is_allowed() {
                admitted += 1;
            } else {
                clock.advance(decision.retry_after().max(Duration::from_nanos(1)));
            }
        }
        admitted
    }

    /// What `announced` promises, `q` requests in `w` seconds, a client gets: sending greedily
    /// to a fresh limiter for `w` seconds, starting at a window's start or anywhere in it, it is
    /// admitted at least `q` times, for each algorithm, on windows of whole seconds and not.
    #[test]
    fn an_announced_quota_is_admitted_in_its_window() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{LogLimiter, SlidingLog, Timestamp};
        fn check(
            quota: &str,
            policy: Policy,
            window: Duration,
            clock: &ManualClock,
            reset: impl Fn() -> bool,
            decide: impl Fn() -> Decision,
        ) {
            let (q, w) = announced(policy);
            let window = window.as_nanos() as u64;
            // Far from time zero, on a window's start (the windows are aligned to the epoch).
            let base = 1_000_000 * window;
            for offset in [0, 1, window / 3, window / 2, window - 1] {
                reset();
                let start = Timestamp::from_nanos(base + offset);
                let got = admitted_greedily(&decide, clock, start, Duration::from_secs(w));
                assert!(
                    got >= q,
                    "{quota}: announced q={q};w={w}, admitted {got} from offset {offset} ns"
                );
            }
        }
        fn direct<A: crate::algorithm::Algorithm + AnnouncedPolicy>(
            quota: &str,
            algorithm: A,
            window: Duration,
        ) {
            let policy = algorithm.policy();
            let clock = ManualClock::new();
            let limiter = DirectLimiter::with_clock(algorithm, clock.clone());
            check(
                quota,
                policy,
                window,
                &clock,
                || limiter.reset(),
                || limiter.check(),
            );
        }
        for quota in [
            "7/250ms",
            "10/100ms",
            "3/500ms",
            "5 per 1500ms",
            "100/min",
            "5/s",
            "4/300ms",
        ] {
            let parsed: Quota = quota.parse()?;
            let window = parsed.period();
            direct(quota, SlidingWindow::new(parsed)?, window);
            direct(quota, FixedWindow::new(parsed)?, window);
            direct(quota, TokenBucket::new(parsed)?, window);
            let log = SlidingLog::new(parsed)?;
            let clock = ManualClock::new();
            let policy = log.policy();
            let limiter = LogLimiter::with_clock(log, clock.clone());
            check(
                quota,
                policy,
                window,
                &clock,
                || limiter.reset(),
                || limiter.check(),
            );
        }
        Ok(())
    }

    /// A window longer than a structured-field integer of seconds (only from `Policy::new`) is
    /// announced as the longest that fits, its quota scaled down with it.
    #[test]
    fn a_window_past_fifteen_digits_of_seconds_is_shortened_and_its_quota_scaled() {
        let policy = Policy::new(1_000, Duration::from_secs(10_000_000_000_000_000));
        assert_eq!(announced(policy), (99, SF_INTEGER_MAX));
        assert_eq!(announcement(policy), r#""default";q=99;w=999999999999999"#);
        let policy = Policy::new(u64::MAX, Duration::MAX);
        let (q, w) = announced(policy);
        assert_eq!(w, SF_INTEGER_MAX);
        // u64::MAX units per just over u64::MAX seconds: just under one a second, so fewer than
        // w in w seconds (the product overflows: divided by the whole windows' ratio rounded up,
        // 18,447, which costs 0.002%).
        assert!(
            q < SF_INTEGER_MAX && q > SF_INTEGER_MAX - SF_INTEGER_MAX / 10_000,
            "{q}"
        );
    }

    /// The `RateLimit-Policy` value announced for `policy`.
    fn announcement(policy: Policy) -> HeaderValue {
        Fields::new(QuotedName::default_name(), policy).policy_value
    }

    #[test]
    fn windows_that_are_not_whole_seconds_scale_the_quota_down() -> Result<(), Box<dyn std::error::Error>> {
        // 10 a second, one at a time: 10 per second, not 1.
        assert_eq!(
            announcement(TokenBucket::new("10/s burst 1".parse()?)?.policy()),
            r#""default";q=10;w=1"#
        );
        // 7 in the first 250 ms, then 6 in each of the next three (a sliding window counter
        // admits one less after a used window): 25, not 28.
        assert_eq!(
            announcement(SlidingWindow::new("7/250ms".parse()?)?.policy()),
            r#""default";q=25;w=1"#
        );
        // 5 per 1.5 s is 6.67 per 2 s: 6, never more than the limiter gives.
        assert_eq!(
            announcement(FixedWindow::new("5 per 1500ms".parse()?)?.policy()),
            r#""default";q=6;w=2"#
        );
        // Whole seconds are announced as they are.
        assert_eq!(
            announcement(TokenBucket::new("10/s burst 20".parse()?)?.policy()),
            r#""default";q=20;w=2"#
        );
        assert_eq!(
            announcement(LeakyBucket::new("3/min".parse()?)?.policy()),
            r#""default";q=3;w=60"#
        );
        Ok(())
    }

    #[test]
    fn bucket_windows_come_from_the_exact_rate_not_the_rounded_interval(
    ) -> Result<(), Box<dyn std::error::Error>> {
        // Each of these runs at a whole-nanosecond interval rounded up (`3/s`: 333_333_334 ns),
        // but what is announced is the rate asked for.
        for (quota, announced) in [
            ("3/min", r#""default";q=3;w=60"#),
            ("3/s", r#""default";q=3;w=1"#),
            ("7/min", r#""default";q=7;w=60"#),
            ("6/s", r#""default";q=6;w=1"#),
            ("3/s burst 1", r#""default";q=3;w=1"#),
            ("30/s burst 1", r#""default";q=30;w=1"#),
            ("7/day", r#""default";q=7;w=86400"#),
            ("7/h burst 3", r#""default";q=3;w=1543"#),
            ("3/s burst 4", r#""default";q=6;w=2"#),
            ("3/s burst 6", r#""default";q=6;w=2"#),
            ("1/1500ms", r#""default";q=1;w=2"#),
            // ... unless the rounded interval admits fewer: 1001 ns, so 1 + 999_000 in a second.
            ("999999/s burst 1", r#""default";q=999001;w=1"#),
        ] {
            for policy in [
                TokenBucket::new(quota.parse()?)?.policy(),
                LeakyBucket::new(quota.parse()?)?.policy(),
            ] {
                assert_eq!(announcement(policy), announced, "{quota}");
            }
        }
        // A policy whose window was changed after it was built announces that window.
        let mut policy = TokenBucket::new("3/s burst 1".parse()?)?.policy();
        policy.window = Duration::from_secs(10);
        assert_eq!(announcement(policy), r#""default";q=1;w=10"#);
        // ... and one whose quota was (a share of the limiter) keeps the exact window.
        let mut policy = TokenBucket::new("3/s".parse()?)?.policy();
        policy.quota = 1;
        assert_eq!(announcement(policy), r#""default";q=1;w=1"#);
        Ok(())
    }

    /// The `q` and `w` of `policy`'s announcement.
    fn announced_q_w(policy: Policy) -> Result<(u64, u64), Box<dyn std::error::Error>> {
        let value = announcement(policy);
        let (q, w) = value
            .to_str()?
            .split_once(";q=")
            .and_then(|(_, rest)| rest.split_once(";w="))
            .ok_or("no q and w")?;
        Ok((q.parse()?, w.parse()?))
    }

    /// Checks that `bucket`, starting full, admits at least its announced `q` in `w` seconds,
    /// each request sent as soon as it passes.
    fn admits_q_in_w<A>(bucket: A, what: &str) -> Result<(), Box<dyn std::error::Error>>
    where
        A: crate::algorithm::Algorithm + AnnouncedPolicy,
    {
        let (q, w) = announced_q_w(bucket.policy())?;
        let clock = ManualClock::new();
        let limiter = DirectLimiter::with_clock(bucket, clock.clone());
        let (mut admitted, mut elapsed) = (0, Duration::ZERO);
        while elapsed < Duration::from_secs(w) {
            let decision = limiter.check();
            if decision.is_allowed() {
                admitted += 1;
            } else {
                clock.advance(decision.retry_after());
                elapsed += decision.retry_after();
            }
        }
        if admitted < q {
            return Err(format!("{what}: q={q};w={w}, but {admitted} pass in {w} s").into());
        }
        Ok(())
    }

    #[test]
    fn a_bucket_admits_at_least_q_in_w_seconds() -> Result<(), Box<dyn std::error::Error>> {
        // Some at rates whose interval is rounded up (`999999/s`: 1001 ns, 0.1% slower).
        for quota in [
            "3/s",
            "3/s burst 1",
            "6/s",
            "30/s burst 1",
            "3/s burst 4",
            "10/s burst 20",
            "1/1500ms",
            "3/min",
            "7/h burst 3",
            "123456/s burst 1",
            "600000/s burst 1",
            "999999/s burst 1",
            "999999/s burst 10",
        ] {
            let quota: Quota = quota.parse()?;
            admits_q_in_w(TokenBucket::new(quota)?, &format!("token bucket {quota}"))?;
            admits_q_in_w(LeakyBucket::new(quota)?, &format!("leaky bucket {quota}"))?;
        }
        Ok(())
    }

    #[test]
    fn integers_above_fifteen_digits_are_clamped() -> Result<(), Box<dyn std::error::Error>> {
        // RFC 8941 integers have at most 15 digits: more makes the whole field invalid.
        assert_eq!(
            announcement(Policy::new(u64::MAX, Duration::from_nanos(u64::MAX))),
            format!(
                r#""default";q=999999999999999;w={}"#,
                u64::MAX / 1_000_000_000 + 1
            )
            .as_str()
        );
        let bucket = TokenBucket::new(Quota::new(
            u64::MAX / 2,
            Duration::from_secs(u64::MAX / 1_000_000_000),
        )?)?;
        let mut fields = Fields::new(QuotedName::default_name(), bucket.policy());
        fields.legacy = true;
        let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
        let mut headers = HeaderMap::new();
        fields.admitted(&limiter.check(), None).write(&mut headers);
        assert!(limiter.check().remaining() > SF_INTEGER_MAX);
        assert_eq!(
            headers["ratelimit-policy"],
            r#""default";q=999999999999999;w=18446744073"#
        );
        assert!(headers["ratelimit"]
            .to_str()?
            .starts_with(r#""default";r=999999999999999;t="#));
        assert_eq!(headers["x-ratelimit-limit"], "999999999999999");
        assert_eq!(headers["x-ratelimit-remaining"], "999999999999999");
        Ok(())
    }

    /// The `t` of an admitted response after `decision`, as written.
    fn admitted_t(fields: &Fields, decision: &Decision) -> Option<String> {
        let mut headers = HeaderMap::new();
        fields.admitted(decision, None).write(&mut headers);
        let value = headers["ratelimit"].to_str().ok()?.to_owned();
        value.split_once(";t=").map(|(_, t)| t.to_owned())
    }

    #[test]
    fn t_is_when_more_quota_comes_whatever_the_outcome() -> Result<(), Box<dyn std::error::Error>> {
        let clock = ManualClock::new();
        // A token every 20 s: the next one is 20 s away however many are spent.
        let bucket = TokenBucket::new("3/min".parse()?)?;
        let fields = Fields::new(QuotedName::default_name(), bucket.policy());
        let limiter = DirectLimiter::with_clock(bucket, clock.clone());
        for _ in 0..3 {
            assert_eq!(admitted_t(&fields, &limiter.check()).as_deref(), Some("20"));
        }
        assert_eq!(ceil_secs(limiter.check().retry_after()), 20);
        clock.advance(Duration::from_secs(15));
        assert_eq!(ceil_secs(limiter.check().retry_after()), 5);
        clock.advance(Duration::from_secs(5));
        assert_eq!(admitted_t(&fields, &limiter.check()).as_deref(), Some("20"));
        // The shaper: the same arithmetic.
        let shaper = LeakyBucket::new("2/s burst 4".parse()?)?;
        let fields = Fields::new(QuotedName::default_name(), shaper.policy());
        let limiter = DirectLimiter::with_clock(shaper, clock.clone());
        let mut ts = Vec::new();
        for _ in 0..4 {
            ts.push(fields.next_unit(&limiter.check()));
        }
        assert_eq!(ts, [Some(Duration::from_millis(500)); 4]);
        // A fixed window gives everything back when it ends.
        let window = FixedWindow::new("2/10s".parse()?)?;
        let fields = Fields::new(QuotedName::default_name(), window.policy());
        let limiter = DirectLimiter::with_clock(window, ManualClock::new());
        let first = limiter.check();
        assert_eq!(fields.next_unit(&first), Some(first.reset_after()));
        // A sliding window's units come back at times the decision does not tell: no `t`.
        let sliding = SlidingWindow::new("2/10s".parse()?)?;
        let fields = Fields::new(QuotedName::default_name(), sliding.policy());
        let limiter = DirectLimiter::with_clock(sliding, ManualClock::new());
        assert_eq!(admitted_t(&fields, &limiter.check()), None);
        Ok(())
    }

    /// A shaper behind a layer with a maximum wait `max`: whether one more request passes now
    /// (admitted, and its wait at most `max`; above it, its slot goes back, as the layer does).
    fn passes(limiter: &DirectLimiter<LeakyBucket, ManualClock>, max: Duration) -> Option<Decision> {
        let decision = limiter.check();
        if decision.is_allowed() && decision.delay() > max {
            limiter.refund_n(1);
            return None;
        }
        decision.is_allowed().then_some(decision)
    }

    #[test]
    fn with_a_maximum_wait_r_and_t_count_what_it_lets_through() -> Result<(), Box<dyn std::error::Error>> {
        let ms = Duration::from_millis;
        for quota in ["2/s burst 5", "10/s burst 4", "3/s burst 7", "1/10s burst 3"] {
            let shaper = LeakyBucket::new(quota.parse()?)?;
            let fields = Fields::new(QuotedName::default_name(), shaper.policy());
            let interval = shaper.emission_interval();
            for max in [
                ms(0),
                ms(1),
                interval / 2,
                interval,
                interval * 2 + ms(1),
                interval * 100,
            ] {
                for sent in 1..8 {
                    // `sent` requests (those that pass), then the `r` and `t` of the last admitted.
                    let run = |clock: &ManualClock| {
                        let limiter = DirectLimiter::with_clock(shaper, clock.clone());
                        let last = (0..sent).filter_map(|_| passes(&limiter, max)).last();
                        (limiter, last)
                    };
                    let (limiter, Some(last)) = run(&ManualClock::new()) else {
                        continue;
                    };
                    let (r, t) = fields.admitted_values(&last, Some(max));
                    let case = format!("{quota}, max {max:?}, {sent} sent: r={r} t={t:?}");
                    let passed = (0..=r).filter(|_| passes(&limiter, max).is_some()).count();
                    assert_eq!(passed as u64, r, "{case}: now");
                    let clock = ManualClock::new();
                    let (limiter, _) = run(&clock);
                    clock.advance(t.ok_or("a shaper always tells t")?);
                    let passed = (0..=r).filter(|_| passes(&limiter, max).is_some()).count();
                    assert_eq!(passed as u64, r + 1, "{case}: after t");
                }
            }
        }
        Ok(())
    }

    #[test]
    fn a_shaped_admission_is_told_as_at_its_slot() -> Result<(), Box<dyn std::error::Error>> {
        for quota in ["2/s burst 5", "1/10s burst 3", "3/s burst 7", "999999/s burst 10"] {
            let shaper = LeakyBucket::new(quota.parse()?)?;
            let fields = Fields::new(QuotedName::default_name(), shaper.policy());
            for queued in 0..4 {
                let clock = ManualClock::new();
                let limiter = DirectLimiter::with_clock(shaper, clock.clone());
                let Some(decision) = (0..=queued).map(|_| limiter.check()).last() else {
                    continue;
                };
                if !decision.is_allowed() {
                    continue;
                }
                // At its slot, the request leaves: the next one admitted then is told one
                // unit less, and a queue one interval longer.
                let at_slot = fields.at_slot(&decision);
                clock.advance(decision.delay());
                let next = limiter.check();
                let case = format!("{quota}, {queued} queued: {decision:?} -> {at_slot:?}, next {next:?}");
                assert!(next.is_allowed(), "{case}");
                assert_eq!(at_slot.delay(), Duration::ZERO, "{case}");
                assert_eq!(at_slot.remaining(), next.remaining() + 1, "{case}");
                assert_eq!(
                    at_slot.reset_after() + shaper.emission_interval(),
                    next.reset_after(),
                    "{case}"
                );
                if queued == 0 {
                    assert_eq!(at_slot, decision, "{case}: no wait, nothing changes");
                }
            }
        }
        // Nothing changes for a limiter that never delays.
        let bucket = TokenBucket::new("2/s burst 5".parse()?)?;
        let fields = Fields::new(QuotedName::default_name(), bucket.policy());
        let decision = DirectLimiter::with_clock(bucket, ManualClock::new()).check();
        assert_eq!(fields.at_slot(&decision), decision);
        Ok(())
    }

    #[test]
    fn without_a_shaper_the_maximum_wait_changes_nothing() -> Result<(), Box<dyn std::error::Error>> {
        let bucket = TokenBucket::new("2/s burst 5".parse()?)?;
        let fields = Fields::new(QuotedName::default_name(), bucket.policy());
        let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
        let first = limiter.check();
        assert_eq!(
            fields.admitted_values(&first, Some(Duration::ZERO)),
            (4, Some(Duration::from_millis(500)))
        );
        for _ in 0..4 {
            let _ = limiter.check();
        }
        let refused = limiter.check();
        assert_eq!(
            fields.refused_retry(&refused, Some(Duration::ZERO)),
            refused.retry_after()
        );
        Ok(())
    }

    #[test]
    fn policy_names_are_escaped_or_refused() -> Result<(), Box<dyn std::error::Error>> {
        let policy = Policy::new(1, Duration::from_secs(1));
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
