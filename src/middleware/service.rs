//! The service the layer makes: extract the key, decide, refuse or wait, forward.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{Either, Full};
use pin_project_lite::pin_project;
use tower::Service;

use super::fields::{write_retry_after, Fields, PreparedFields};
use super::in_flight::InFlight;
use super::key::KeyExtractor;
use super::layer::{OnLimiterError, Shared};
use super::limiter::{LimiterError, Origin, RateLimiter};
use super::refusal::{self, grpc_content_type};
use super::shaping::Slot;
use crate::{Decision, Outcome};

/// Every request weighs one unit.
const COST: u64 = 1;

/// The body of a limited service's responses: the inner service's (`Left`), or the layer's own
/// refusal or error (`Right`).
pub type LimitedBody<B> = Either<B, Full<Bytes>>;

/// The service [`RateLimitLayer`](super::RateLimitLayer) wraps around `S`.
///
/// Cloning it shares the limiter. `poll_ready` is the inner service's, and only a request
/// forwarded at once uses the readiness it reserved: a refused request never reaches the inner
/// service, and a request that waits (a shaping delay, a limiter deciding elsewhere) waits on a
/// clone of the inner service, polled ready only once the wait is over. Either way, what the
/// inner service reserved in `poll_ready` (a concurrency permit, a buffer slot) is released by
/// the call, not held while the request waits: one client's queue never blocks another client.
/// The price: a shaped request leaves at its slot only if the inner service is ready then; if
/// it stalls past several slots, the requests whose slots passed leave together when it is
/// ready again.
pub struct RateLimit<S, L, X: KeyExtractor> {
    inner: S,
    shared: Arc<Shared<L, X>>,
}

impl<S, L, X: KeyExtractor> RateLimit<S, L, X> {
    pub(crate) fn new(inner: S, shared: Arc<Shared<L, X>>) -> Self {
        RateLimit { inner, shared }
    }

    /// The wrapped service.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, L, X: KeyExtractor> Clone for RateLimit<S, L, X> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, L, X: KeyExtractor> fmt::Debug for RateLimit<S, L, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("layer", &self.shared)
            .finish()
    }
}

impl<S, L, X, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, L, X>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    ReqBody: Send + 'static,
    ResBody: 'static,
    L: RateLimiter<X::Key> + 'static,
    X: KeyExtractor,
    X::Key: Clone,
{
    type Response = Response<LimitedBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // A request forwarded at once is served by the instance polled ready; a fresh clone
        // waits for the next request. Any other request (refused, or waiting for its slot or
        // for a limiter deciding elsewhere) drops the ready instance at once, so that what the
        // inner service reserved in `poll_ready` (a concurrency permit, a buffer slot) is not
        // held while nothing is forwarded; a waiting request polls another fresh clone ready
        // once its wait is over.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        let shared = &self.shared;
        let (head, body) = request.into_parts();
        if shared.route.as_ref().is_some_and(|route| !route.matches(&head)) {
            return ResponseFuture::inner(call_now(ready, head, body), None);
        }
        let grpc = grpc_content_type(&head.method, &head.headers);
        let key = match shared.extractor.extract(&head) {
            Ok(key) => key,
            Err(error) => match shared.missing_key.resolve(&error, grpc) {
                Ok(key) => key,
                Err(answer) => {
                    crate::meter::no_key::<X::Key, _>(&shared.limiter);
                    return ResponseFuture::own(*answer);
                }
            },
        };
        // The fast path: a limiter in memory decides here, and an admitted request with no wait
        // reaches the inner service in place: no box, no `Arc` (what it may still allocate is
        // its key, when the extractor's key owns memory, and its `RateLimit` field, when
        // admitted responses carry the fields).
        let (decision, origin, reporting) =
            match shared.limiter.decide_now_reporting(&key, COST, shared.max_delay) {
                Some(Ok(decided)) => decided,
                Some(Err(error)) => match limiter_error(shared, error, grpc) {
                    Ok(answer) => return ResponseFuture::own(answer),
                    // Failing open is the rare path: boxed, so that the fast path stays as small.
                    Err(error) => {
                        let forwarded = call_with_fields(ready, head, body, None);
                        return ResponseFuture::slow(Box::pin(failed_open(forwarded, error)));
                    }
                },
                // A limiter that decides asynchronously.
                None => {
                    drop(ready);
                    let grpc = grpc.cloned();
                    let inner = self.inner.clone();
                    let slow = decide_later(Arc::clone(shared), inner, head, body, key, grpc);
                    return ResponseFuture::slow(Box::pin(slow));
                }
            };
        let announced = shared.fields.load(&shared.limiter);
        let policy = announced.of(reporting);
        let fields = match answer(shared, policy, &decision, origin, grpc) {
            Answer::Forward(fields) => fields,
            Answer::Refuse(refused) => return ResponseFuture::own(refused),
        };
        let delay = decision.delay();
        if delay.is_zero() {
            return ResponseFuture::inner(call_now(ready, head, body), fields);
        }
        drop(ready);
        // A wait for its slot. The slot is held from here on: a response future dropped before
        // the request reaches the inner service, even before its first poll, gives it back.
        match hold_slot(shared, policy, key, delay, origin, grpc) {
            Ok(slot) => {
                let shaped = wait_and_forward(slot, self.inner.clone(), head, body, fields);
                ResponseFuture::slow(Box::pin(shaped))
            }
            Err(refused) => ResponseFuture::own(*refused),
        }
    }
}

/// Calls `ready`, the instance polled ready, with the request made of `head` and `body`.
fn call_now<S, ReqBody>(mut ready: S, head: Parts, body: ReqBody) -> S::Future
where
    S: Service<Request<ReqBody>>,
{
    ready.call(Request::from_parts(head, body))
}

/// What the layer does with a decided request.
enum Answer {
    /// Forward it, and write these fields on the response (none when admitted responses carry
    /// none).
    Forward(Option<PreparedFields>),
    /// Answer it with the layer's own refusal.
    Refuse(Response<Full<Bytes>>),
}

/// `fields` are the reporting policy's (the limiter's own, or a policy set's refusing or
/// nearest one). `origin` says who decided: the time until more quota (`t`) follows from the
/// policy's refill only when the limiter itself did; a stand-in (a remote store's local fallback, with its own
/// share of the quota) or a fail-open admission gets `r` alone. A refusal's retry-after is
/// later for a full queue (`Fields::refused_retry`) only when the limiter itself decided, as
/// only then is the policy's shaping that of the decision: a fallback's share may be a token
/// bucket or a window, whose reset-after is no queue to wait for.
fn answer<L, X: KeyExtractor>(
    shared: &Shared<L, X>,
    fields: &Fields,
    decision: &Decision,
    origin: Origin,
    grpc: Option<&HeaderValue>,
) -> Answer {
    match decision.outcome() {
        Outcome::Allowed | Outcome::AllowedUntracked => {
            Answer::Forward(fields.on_admitted.then(|| match origin {
                Origin::Limiter | Origin::Slot { .. } => fields.admitted(decision, shared.max_delay),
                Origin::Fallback | Origin::FallbackSlot { .. } | Origin::Uncounted => {
                    fields.prepare(decision.remaining(), None)
                }
            }))
        }
        Outcome::Denied => {
            let retry_after = match origin {
                Origin::Limiter | Origin::Slot { .. } => fields.refused_retry(decision, shared.max_delay),
                Origin::Fallback | Origin::FallbackSlot { .. } | Origin::Uncounted => decision.retry_after(),
            };
            Answer::Refuse(refusal::too_many_requests(
                fields,
                decision.remaining(),
                retry_after,
                grpc,
            ))
        }
        Outcome::TableFull => {
            let message = "the rate limiter has no room for a new client: retry later".to_owned();
            let mut response = refusal::error(StatusCode::SERVICE_UNAVAILABLE, message, grpc);
            // When room is due to appear (a key's debt runs out), say when (RFC 9110 allows
            // Retry-After on a 503).
            if !decision.retry_after().is_zero() {
                write_retry_after(response.headers_mut(), decision.retry_after());
            }
            Answer::Refuse(response)
        }
    }
}

/// What a client refused because the limiter could not decide is told: nothing of why, which
/// may name the server's internals (a remote store's node, a key).
const LIMITER_ERROR_MESSAGE: &str = "the rate limiter could not decide: retry later";

/// The answer when the limiter cannot decide: an error response with a fixed message and the
/// layer's `Retry-After`, carrying `error` in its extensions for the operator (a layer outside
/// can log it), or `Err(error)` to
/// forward the request unlimited ([`failed_open`] puts the error on the forwarded response).
fn limiter_error<L: RateLimiter<X::Key>, X: KeyExtractor>(
    shared: &Shared<L, X>,
    error: LimiterError,
    grpc: Option<&HeaderValue>,
) -> Result<Response<Full<Bytes>>, LimiterError> {
    crate::meter::unavailable::<X::Key, _>(&shared.limiter);
    match shared.on_error {
        OnLimiterError::Admit => Err(error),
        OnLimiterError::Refuse(status) => {
            let mut response = refusal::error(status, LIMITER_ERROR_MESSAGE.to_owned(), grpc);
            // When to retry, so that clients do not retry at once (RFC 9110 allows it on any
            // status); no RateLimit fields: no decision, no quota to tell.
            if !shared.error_retry_after.is_zero() {
                write_retry_after(response.headers_mut(), shared.error_retry_after);
            }
            response.extensions_mut().insert(error);
            Ok(response)
        }
    }
}

/// A request forwarded although the limiter could not decide (fail open): its response carries
/// the `LimiterError` in its extensions, as a refusal's does, so that the operator learns why
/// the request went through unlimited.
async fn failed_open<B, E>(
    forwarded: impl Future<Output = Result<Response<LimitedBody<B>>, E>>,
    error: LimiterError,
) -> Result<Response<LimitedBody<B>>, E> {
    let mut response = forwarded.await?;
    response.extensions_mut().insert(error);
    Ok(response)
}

/// The slot of an admitted request given a `delay`, counted at `origin`, held from now on; or,
/// for a wait above the maximum, the slot given back and the refusal (boxed: a refusal is the
/// rare, larger case).
fn hold_slot<L, X>(
    shared: &Arc<Shared<L, X>>,
    fields: &Fields,
    key: X::Key,
    delay: Duration,
    origin: Origin,
    grpc: Option<&HeaderValue>,
) -> Result<Slot<L, X>, Box<Response<Full<Bytes>>>>
where
    L: RateLimiter<X::Key>,
    X: KeyExtractor,
{
    if let Some(max) = shared.max_delay.filter(|&max| delay > max) {
        // Too long a wait, admitted by a limiter that does not refuse it itself (the defaults
        // of `RateLimiter::decide_now_within` and `decide_within`, or a stand-in that names no
        // slot): give the slot back and say when the wait would fit.
        shared.limiter.refund(key, COST, origin);
        let refused = refusal::too_many_requests(fields, 0, delay - max, grpc);
        return Err(Box::new(refused));
    }
    Ok(Slot::taken(Arc::clone(shared), key, COST, origin, delay))
}

/// The asynchronous path of a limiter that decides elsewhere (`decide_now_within` gave `None`):
/// `inner` is a clone not polled ready yet, polled only once the decision forwards the request.
async fn decide_later<S, L, X, ReqBody, ResBody>(
    shared: Arc<Shared<L, X>>,
    inner: S,
    head: Parts,
    body: ReqBody,
    key: X::Key,
    grpc: Option<HeaderValue>,
) -> Result<Response<LimitedBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    L: RateLimiter<X::Key> + 'static,
    X: KeyExtractor,
{
    let grpc = grpc.as_ref();
    // Dropped before the answer, the decision finishes on a task of its own, and gives back
    // the slot it took (a remote store counted it all the same).
    let (decided, key) = InFlight::start(Arc::clone(&shared), key, COST).await;
    let (decision, origin) = match decided {
        Ok(decided) => decided,
        Err(error) => {
            return match limiter_error(&shared, error, grpc) {
                Ok(answer) => Ok(answer.map(Either::Right)),
                Err(error) => failed_open(forward(inner, head, body, None), error).await,
            }
        }
    };
    // A limiter that decides elsewhere reports its first policy.
    let (fields, slot) = {
        let announced = shared.fields.load(&shared.limiter);
        let policy = announced.of(Some(0));
        let fields = match answer(&shared, policy, &decision, origin, grpc) {
            Answer::Forward(fields) => fields,
            Answer::Refuse(refused) => return Ok(refused.map(Either::Right)),
        };
        let delay = decision.delay();
        if delay.is_zero() {
            (fields, None)
        } else {
            (fields, Some(hold_slot(&shared, policy, key, delay, origin, grpc)))
        }
    };
    let Some(slot) = slot else {
        return forward(inner, head, body, fields).await;
    };
    match slot {
        Ok(slot) => wait_and_forward(slot, inner, head, body, fields).await,
        Err(refused) => Ok(refused.map(Either::Right)),
    }
}

/// A shaped request: waits for its `slot` to be due, then for `inner` to be ready, then is
/// forwarded. The slot is given back if this future is dropped (or `inner` fails to get ready)
/// before the request reaches `inner`.
async fn wait_and_forward<S, L, X, ReqBody, ResBody>(
    slot: Slot<L, X>,
    mut inner: S,
    head: Parts,
    body: ReqBody,
    fields: Option<PreparedFields>,
) -> Result<Response<LimitedBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    L: RateLimiter<X::Key>,
    X: KeyExtractor,
{
    let slot = slot.wait().await;
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    // From here the request is the inner service's: the slot is used.
    slot.used();
    call_with_fields(inner, head, body, fields).await
}

/// Polls `inner`, a clone not polled yet, until it is ready, then calls it and writes `fields`
/// on its response.
async fn forward<S, ReqBody, ResBody>(
    mut inner: S,
    head: Parts,
    body: ReqBody,
    fields: Option<PreparedFields>,
) -> Result<Response<LimitedBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    call_with_fields(inner, head, body, fields).await
}

/// Calls `inner`, which was polled ready, and writes `fields` on its response.
async fn call_with_fields<S, ReqBody, ResBody>(
    mut inner: S,
    head: Parts,
    body: ReqBody,
    fields: Option<PreparedFields>,
) -> Result<Response<LimitedBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    let mut response = inner.call(Request::from_parts(head, body)).await?;
    if let Some(fields) = fields {
        fields.write(response.headers_mut());
    }
    Ok(response.map(Either::Left))
}

/// The boxed asynchronous path.
type SlowPath<B, E> = Pin<Box<dyn Future<Output = Result<Response<LimitedBody<B>>, E>> + Send>>;

pin_project! {
    /// The future a [`RateLimit`] service returns: the layer's own answer, the inner service's
    /// (with the rate-limit fields added, in place: no allocation of its own), or the
    /// asynchronous path (a wait for a slot, a limiter deciding elsewhere), boxed.
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, E> {
        Own {
            response: Option<Response<Full<Bytes>>>,
        },
        Inner {
            #[pin]
            future: F,
            fields: Option<PreparedFields>,
        },
        Slow {
            future: SlowPath<B, E>,
        },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    fn own(response: Response<Full<Bytes>>) -> Self {
        ResponseFuture {
            state: State::Own {
                response: Some(response),
            },
        }
    }

    fn inner(future: F, fields: Option<PreparedFields>) -> Self {
        ResponseFuture {
            state: State::Inner { future, fields },
        }
    }

    fn slow(future: SlowPath<B, E>) -> Self {
        ResponseFuture {
            state: State::Slow { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LimitedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            // Polled again after completion: never ready again, as futures may.
            StateProj::Own { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response.map(Either::Right))),
                None => Poll::Pending,
            },
            StateProj::Inner { future, fields } => {
                let mut response = match future.poll(cx) {
                    Poll::Ready(Ok(response)) => response,
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Pending => return Poll::Pending,
                };
                if let Some(fields) = fields.take() {
                    fields.write(response.headers_mut());
                }
                Poll::Ready(Ok(response.map(Either::Left)))
            }
            StateProj::Slow { future } => future.as_mut().poll(cx),
        }
    }
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Own { .. } => "own answer",
            State::Inner { .. } => "inner service",
            State::Slow { .. } => "asynchronous path",
        };
        f.debug_struct("ResponseFuture").field("state", &state).finish()
    }
}
