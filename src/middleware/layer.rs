//! The layer and its configuration, shared by every service it makes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use tower::Layer;

use super::announcement::Announcement;
use super::fields::{quote_policy_name, PolicyNameError, QuotedName};
use super::key::{KeyError, KeyExtractor};
use super::limiter::RateLimiter;
use super::refusal;
use super::route::RouteFilter;
use super::service::RateLimit;

/// What the layer does with a request whose key cannot be read ([`KeyExtractor`] failed).
/// Non-exhaustive: a later version may add ways to answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissingKey<K> {
    /// Answer by who is at fault (the default): `400 Bad Request` when the request lacks what
    /// the client must send (a missing or unreadable key header, an unreadable forwarding
    /// header: [`KeyError::is_client_error`]), `500 Internal Server Error` when the server lacks
    /// what it must provide (no peer address: a configuration error). The 400's body says what
    /// the request lacks and nothing of the server's configuration; the 500's says how to fix
    /// the server.
    #[default]
    Reject,
    /// Answer with this status, whatever the reason (a 4xx body says only what the request
    /// lacks; any other status's body says the whole reason, with its fix).
    Respond(StatusCode),
    /// Limit the request under this key (all keyless requests then share one quota). A client
    /// can make its own request keyless: leave out a key header, or, behind a proxy that appends
    /// to the `Forwarded` line the client sent, open a quote the proxy's entry then falls inside
    /// ([`KeyError::MalformedForwarded`]). With `Use`, such a client leaves its own quota for the
    /// shared one (and spends it for every other keyless request); the default,
    /// [`Reject`](Self::Reject), answers it with a 400.
    Use(K),
}

impl<K: Clone> MissingKey<K> {
    /// The key to limit a keyless request under, or the layer's answer to it (boxed: the rare,
    /// larger case). `grpc` is the content type of a gRPC request.
    pub(crate) fn resolve(
        &self,
        error: &KeyError,
        grpc: Option<&HeaderValue>,
    ) -> Result<K, Box<Response<Full<Bytes>>>> {
        let status = match self {
            MissingKey::Use(key) => return Ok(key.clone()),
            MissingKey::Respond(status) => *status,
            MissingKey::Reject if error.is_client_error() => StatusCode::BAD_REQUEST,
            MissingKey::Reject => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let message = if status.is_client_error() {
            error.client_reason()
        } else {
            error.to_string()
        };
        Err(Box::new(refusal::error(status, message, grpc)))
    }
}

/// What the layer does when the limiter cannot decide ([`LimiterError`](super::LimiterError)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLimiterError {
    /// Fail closed: answer with this status (the default: `503 Service Unavailable`) and a
    /// `Retry-After` of [`RateLimitBuilder::limiter_error_retry_after`] (default 1 s), so that
    /// clients do not retry at once; no `RateLimit` fields, as there is no decision to tell.
    /// The client is told only that the limiter could not decide (the body, or a gRPC
    /// request's `grpc-message`), never why: the reason may name the server's internals. The
    /// response carries the [`LimiterError`](super::LimiterError) in its extensions, for a
    /// layer outside to log.
    Refuse(StatusCode),
    /// Fail open: forward the request unlimited, without rate-limit fields. The upstream's
    /// response carries the [`LimiterError`](super::LimiterError) in its extensions, so that a
    /// layer outside can log why a request went through unlimited.
    Admit,
}

impl Default for OnLimiterError {
    fn default() -> Self {
        OnLimiterError::Refuse(StatusCode::SERVICE_UNAVAILABLE)
    }
}

/// The default `Retry-After` of a fail-closed refusal: long enough that clients do not hammer a
/// limiter that is away, short enough that they come back soon after it is back.
const DEFAULT_ERROR_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The configuration every service of one layer shares, with the limiter itself.
pub(crate) struct Shared<L, X: KeyExtractor> {
    pub(crate) limiter: L,
    pub(crate) extractor: X,
    pub(crate) missing_key: MissingKey<X::Key>,
    pub(crate) on_error: OnLimiterError,
    /// The `Retry-After` of a fail-closed refusal ([`OnLimiterError::Refuse`]); none when zero.
    pub(crate) error_retry_after: Duration,
    /// The fields of the limiter's policies.
    pub(crate) fields: Announcement,
    pub(crate) max_delay: Option<Duration>,
    pub(crate) route: Option<RouteFilter>,
}

/// A [`tower::Layer`] limiting each client (key) with one shared limiter.
///
/// Clones of the layer, and every service it makes (one per connection, per clone), decide
/// with the same limiter: unlike tower's own `RateLimit`, the quota is per client, not per
/// service instance. Build it with [`new`](Self::new) or [`builder`](Self::builder).
///
/// The service answers refusals itself, so its response body is
/// [`LimitedBody<B>`](super::LimitedBody): the inner service's body or the layer's own.
pub struct RateLimitLayer<L, X: KeyExtractor> {
    shared: Arc<Shared<L, X>>,
}

impl<L: RateLimiter<X::Key>, X: KeyExtractor> RateLimitLayer<L, X> {
    /// A layer limiting requests by the key `extractor` reads, with `limiter`, and the
    /// defaults: `Retry-After` and the `RateLimit` fields on refusals (the policy named
    /// `"default"`), none on admitted responses, no legacy fields, any shaping delay the limiter
    /// gives, 400 or 500 for a request without a key ([`MissingKey::Reject`]: the request's
    /// fault or the server's), 503 with `Retry-After: 1` when the limiter cannot decide.
    pub fn new(limiter: L, extractor: X) -> RateLimitLayer<L, X> {
        RateLimitLayer::builder(limiter, extractor).build()
    }

    /// A builder starting from the defaults of [`new`](Self::new).
    pub fn builder(limiter: L, extractor: X) -> RateLimitBuilder<L, X> {
        let fields = Announcement::new(&limiter, QuotedName::default_name());
        RateLimitBuilder {
            shared: Shared {
                limiter,
                extractor,
                missing_key: MissingKey::default(),
                on_error: OnLimiterError::default(),
                error_retry_after: DEFAULT_ERROR_RETRY_AFTER,
                fields,
                max_delay: None,
                route: None,
            },
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.shared.limiter
    }
}

impl<L, X: KeyExtractor> Clone for RateLimitLayer<L, X> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, L, X: KeyExtractor> Layer<S> for RateLimitLayer<L, X> {
    type Service = RateLimit<S, L, X>;

    fn layer(&self, inner: S) -> RateLimit<S, L, X> {
        RateLimit::new(inner, Arc::clone(&self.shared))
    }
}

impl<L, X: KeyExtractor> fmt::Debug for RateLimitLayer<L, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<L, X: KeyExtractor> fmt::Debug for Shared<L, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("fields", &self.fields)
            .field("on_error", &self.on_error)
            .field("error_retry_after", &self.error_retry_after)
            .field("max_delay", &self.max_delay)
            .field("route", &self.route)
            .finish_non_exhaustive()
    }
}

/// Configures a [`RateLimitLayer`].
///
/// ```
/// use std::time::Duration;
/// use tollgate::middleware::{HeaderKey, MissingKey, RateLimitLayer};
/// use tollgate::{KeyedLimiter, LeakyBucket};
///
/// // Shape each API key to 10 requests a second, queueing up to 20, waiting at most 1 s.
/// let limiter = KeyedLimiter::<String, _>::new(LeakyBucket::new("10/s burst 20".parse()?)?, 10_000)?;
/// let layer = RateLimitLayer::builder(limiter, HeaderKey::new(http::HeaderName::from_static("x-api-key")))
///     .missing_key(MissingKey::Use("anonymous".to_owned()))
///     .max_delay(Duration::from_secs(1))
///     .legacy_fields(true)
///     .policy_name("per-api-key")?
///     .build();
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimitBuilder<L, X: KeyExtractor> {
    shared: Shared<L, X>,
}

impl<L: RateLimiter<X::Key>, X: KeyExtractor> RateLimitBuilder<L, X> {
    /// What to do with a request whose key cannot be read (default: [`MissingKey::Reject`],
    /// 400 or 500 by who is at fault).
    pub fn missing_key(mut self, behaviour: MissingKey<X::Key>) -> Self {
        self.shared.missing_key = behaviour;
        self
    }

    /// What to do when the limiter cannot decide (default: respond 503, with the `Retry-After`
    /// of [`limiter_error_retry_after`](Self::limiter_error_retry_after)).
    pub fn on_limiter_error(mut self, behaviour: OnLimiterError) -> Self {
        self.shared.on_error = behaviour;
        self
    }

    /// The `Retry-After` of a refusal because the limiter could not decide
    /// ([`OnLimiterError::Refuse`]), in whole seconds, rounded up (default: 1 s): without it a
    /// client retries at once, while the limiter is still away. No decision tells how long
    /// that lasts: choose about the time your limiter's store takes to come back, or to be
    /// given up on (a remote store's reconnection). `Duration::ZERO` sends none. The refusal
    /// carries no `RateLimit` fields, whatever this says: there is no quota to tell.
    pub fn limiter_error_retry_after(mut self, retry_after: Duration) -> Self {
        self.shared.error_retry_after = retry_after;
        self
    }

    /// The policy's name in the `RateLimit-Policy` and `RateLimit` fields (default
    /// `"default"`); give each stacked layer its own. (A [`PolicySet`](crate::PolicySet)'s
    /// policies are announced under their own names.)
    ///
    /// # Errors
    /// [`PolicyNameError`] when `name` is empty or not printable ASCII.
    pub fn policy_name(mut self, name: &str) -> Result<Self, PolicyNameError> {
        let fields = &self.shared.fields;
        let (on_admitted, legacy) = (fields.on_admitted(), fields.legacy());
        self.shared.fields = fields.configured(
            &self.shared.limiter,
            quote_policy_name(name)?,
            on_admitted,
            legacy,
        );
        Ok(self)
    }

    /// Whether admitted responses carry `RateLimit-Policy` and `RateLimit` (and the legacy
    /// fields, when on) too; refusals for the quota always do (a refusal because the limiter
    /// could not decide has no decision to tell). Default: no, as writing them costs about as
    /// much as the decision itself (`benches/gateway_load.sh` measures both).
    ///
    /// A shaped request's fields describe the moment it is sent on, its slot, not the earlier
    /// moment it was admitted: the queue in front of it has drained meanwhile, so `t` and `r`
    /// are those of the queue its decision left, its wait later (its own slot, nothing in
    /// front). The decision knows of no request of the key admitted during the wait (each
    /// takes one more unit), nor of a wait for the service behind to be ready after the slot. A decision by a
    /// stand-in (a remote store's local fallback) is announced as it was decided: the layer
    /// cannot tell the share's algorithm.
    pub fn fields_on_admitted(mut self, on: bool) -> Self {
        let fields = &self.shared.fields;
        let (name, legacy) = (fields.name().clone(), fields.legacy());
        self.shared.fields = fields.configured(&self.shared.limiter, name, on, legacy);
        self
    }

    /// Whether the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`
    /// (the `q`, `r` and `t` of the IETF fields: `Reset` in seconds from now, absent when `t`
    /// is) are written beside the IETF fields (default: no).
    pub fn legacy_fields(mut self, on: bool) -> Self {
        let fields = &self.shared.fields;
        let (name, on_admitted) = (fields.name().clone(), fields.on_admitted());
        self.shared.fields = fields.configured(&self.shared.limiter, name, on_admitted, on);
        self
    }

    /// The longest a shaped request may wait for its slot; a request that would be given a
    /// longer delay is refused with 429 and told to retry when the wait would fit. The limiter
    /// refuses it itself, counting nothing ([`RateLimiter::decide_now_within`]: a
    /// [`KeyedLimiter`](crate::KeyedLimiter), or a limiter that decides elsewhere and overrides
    /// [`RateLimiter::decide_within`], with its stand-ins); a limiter that does not gets the slot
    /// it gave refunded.
    /// Default: any delay the limiter gives (for the leaky bucket, at most `burst - 1` slots).
    ///
    /// The fields of the limiter's own decisions count what this maximum lets through: an
    /// admitted response's `r` is the requests sent now that would wait no longer (each waits
    /// one slot more than the one before), `t` when one more would, and a refusal for a full
    /// queue says to retry when the queue has room and the wait fits. A decision by a stand-in
    /// (a remote store's local fallback, [`Origin::Fallback`](super::Origin::Fallback) or
    /// [`Origin::FallbackSlot`](super::Origin::FallbackSlot)) is
    /// announced as it is: an admission's `r` is the share's own remaining (for a leaky share,
    /// its queue's room, of which this maximum may let fewer through), and a refusal's
    /// retry-after the share's own; the layer cannot tell the share's algorithm from its
    /// decisions. The maximum itself holds whoever decided.
    pub fn max_delay(mut self, max: Duration) -> Self {
        self.shared.max_delay = Some(max);
        self
    }

    /// Limits only the requests `route` matches; the others pass through untouched.
    pub fn only_for(mut self, route: RouteFilter) -> Self {
        self.shared.route = Some(route);
        self
    }

    /// The layer.
    pub fn build(self) -> RateLimitLayer<L, X> {
        RateLimitLayer {
            shared: Arc::new(self.shared),
        }
    }
}

impl<L, X: KeyExtractor> fmt::Debug for RateLimitBuilder<L, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}
