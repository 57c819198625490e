//! The service the layer makes: extract the key, decide, refuse or wait, forward.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Full};
use tower::Service;

use super::fields::PreparedFields;
use super::key::KeyExtractor;
use super::layer::{MissingKey, OnLimiterError, Shared};
use super::limiter::{LimiterError, RateLimiter};
use super::refusal::{self, is_grpc};
use super::shaping::wait_for_slot;
use crate::{Decision, Outcome};

/// Every request weighs one unit.
const COST: u64 = 1;

/// The body of a limited service's responses: the inner service's (`Left`), or the layer's own
/// refusal or error (`Right`).
pub type LimitedBody<B> = Either<B, Full<Bytes>>;

/// The service [`RateLimitLayer`](super::RateLimitLayer) wraps around `S`.
///
/// Cloning it shares the limiter. `poll_ready` is the inner service's; a refused request never
/// reaches the inner service.
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
        // The instance polled ready serves this request; a fresh clone waits for the next one.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let shared = &self.shared;
        let (head, body) = request.into_parts();
        if shared.route.as_ref().is_some_and(|route| !route.matches(&head)) {
            return ResponseFuture::inner(inner.call(Request::from_parts(head, body)), None);
        }
        let grpc = is_grpc(&head.headers);
        let key = match shared.extractor.extract(&head) {
            Ok(key) => key,
            Err(error) => match &shared.missing_key {
                MissingKey::Use(key) => key.clone(),
                MissingKey::Respond(status) => {
                    return ResponseFuture::own(refusal::error(*status, error.to_string(), grpc))
                }
            },
        };
        // The fast path: a limiter in memory decides here, and only an admitted request with
        // no wait reaches the inner service, with nothing else to allocate or share.
        let decision = match shared.limiter.decide_now(&key, COST) {
            Some(Ok(decision)) if decision.delay().is_zero() || !decision.is_allowed() => decision,
            Some(Err(error)) => match limiter_error(shared, error, grpc) {
                Some(answer) => return ResponseFuture::own(answer),
                None => return ResponseFuture::inner(inner.call(Request::from_parts(head, body)), None),
            },
            // A wait for a slot, or a limiter that decides asynchronously.
            decided => {
                let slow = limit(Arc::clone(shared), inner, head, body, key, decided, grpc);
                return ResponseFuture::slow(Box::pin(slow));
            }
        };
        match answer(shared, &decision, grpc) {
            Answer::Refuse(refused) => ResponseFuture::own(refused),
            Answer::Forward(fields) => {
                ResponseFuture::inner(inner.call(Request::from_parts(head, body)), fields)
            }
        }
    }
}

/// What the layer does with a decided request.
enum Answer {
    /// Forward it, and write these fields on the response (none when admitted responses carry
    /// none).
    Forward(Option<PreparedFields>),
    /// Answer it with the layer's own refusal.
    Refuse(Response<Full<Bytes>>),
}

fn answer<L, X: KeyExtractor>(shared: &Shared<L, X>, decision: &Decision, grpc: bool) -> Answer {
    let fields = &shared.fields;
    match decision.outcome() {
        Outcome::Allowed | Outcome::AllowedUntracked => {
            Answer::Forward(fields.on_admitted.then(|| fields.admitted(decision)))
        }
        Outcome::Denied => {
            let retry_after = decision.retry_after();
            Answer::Refuse(refusal::too_many_requests(
                fields,
                decision.remaining(),
                retry_after,
                grpc,
            ))
        }
        Outcome::TableFull => {
            let message = "the rate limiter has no room for a new client: retry later".to_owned();
            Answer::Refuse(refusal::error(StatusCode::SERVICE_UNAVAILABLE, message, grpc))
        }
    }
}

/// The answer when the limiter cannot decide: an error response, or `None` to forward the
/// request unlimited.
fn limiter_error<L, X: KeyExtractor>(
    shared: &Shared<L, X>,
    error: LimiterError,
    grpc: bool,
) -> Option<Response<Full<Bytes>>> {
    match shared.on_error {
        OnLimiterError::Admit => None,
        OnLimiterError::Refuse(status) => Some(refusal::error(status, error.to_string(), grpc)),
    }
}

/// The asynchronous path: a limiter that decides elsewhere (`decided` is `None`), or a shaped
/// request that waits for its slot.
async fn limit<S, L, X, ReqBody, ResBody>(
    shared: Arc<Shared<L, X>>,
    inner: S,
    head: Parts,
    body: ReqBody,
    key: X::Key,
    decided: Option<Result<Decision, LimiterError>>,
    grpc: bool,
) -> Result<Response<LimitedBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    L: RateLimiter<X::Key>,
    X: KeyExtractor,
{
    let decided = match decided {
        Some(decided) => decided,
        None => shared.limiter.decide(&key, COST).await,
    };
    let decision = match decided {
        Ok(decision) => decision,
        Err(error) => {
            return match limiter_error(&shared, error, grpc) {
                Some(answer) => Ok(answer.map(Either::Right)),
                None => forward(inner, head, body, None).await,
            }
        }
    };
    let fields = match answer(&shared, &decision, grpc) {
        Answer::Forward(fields) => fields,
        Answer::Refuse(refused) => return Ok(refused.map(Either::Right)),
    };
    let delay = decision.delay();
    if !delay.is_zero() {
        if let Some(max) = shared.max_delay.filter(|&max| delay > max) {
            // Too long a wait: give the slot back and say when the wait would fit.
            shared.limiter.refund(key, COST);
            let refused = refusal::too_many_requests(&shared.fields, 0, delay - max, grpc);
            return Ok(refused.map(Either::Right));
        }
        wait_for_slot(&shared.limiter, key, COST, delay).await;
    }
    forward(inner, head, body, fields).await
}

/// Calls `inner`, which was polled ready, and writes `fields` on its response.
async fn forward<S, ReqBody, ResBody>(
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

/// The future a [`RateLimit`] service returns: the layer's own answer, the inner service's
/// (with the rate-limit fields added), or the asynchronous path (a wait for a slot, a limiter
/// deciding elsewhere).
pub struct ResponseFuture<F, B, E> {
    state: State<F, B, E>,
}

/// The boxed asynchronous path.
type SlowPath<B, E> = Pin<Box<dyn Future<Output = Result<Response<LimitedBody<B>>, E>> + Send>>;

enum State<F, B, E> {
    Own(Option<Response<Full<Bytes>>>),
    Inner {
        future: Pin<Box<F>>,
        fields: Option<PreparedFields>,
    },
    Slow(SlowPath<B, E>),
}

impl<F, B, E> ResponseFuture<F, B, E> {
    fn own(response: Response<Full<Bytes>>) -> Self {
        ResponseFuture {
            state: State::Own(Some(response)),
        }
    }

    fn inner(future: F, fields: Option<PreparedFields>) -> Self {
        ResponseFuture {
            state: State::Inner {
                future: Box::pin(future),
                fields,
            },
        }
    }

    fn slow(future: SlowPath<B, E>) -> Self {
        ResponseFuture {
            state: State::Slow(future),
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LimitedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().state {
            // Polled again after completion: never ready again, as futures may.
            State::Own(response) => match response.take() {
                Some(response) => Poll::Ready(Ok(response.map(Either::Right))),
                None => Poll::Pending,
            },
            State::Inner { future, fields } => {
                let mut response = match future.as_mut().poll(cx) {
                    Poll::Ready(Ok(response)) => response,
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Pending => return Poll::Pending,
                };
                if let Some(fields) = fields.take() {
                    fields.write(response.headers_mut());
                }
                Poll::Ready(Ok(response.map(Either::Left)))
            }
            State::Slow(future) => future.as_mut().poll(cx),
        }
    }
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Own(_) => "own answer",
            State::Inner { .. } => "inner service",
            State::Slow(_) => "asynchronous path",
        };
        f.debug_struct("ResponseFuture").field("state", &state).finish()
    }
}
