//! A decision in flight: a client that leaves before a remote limiter answers does not take the
//! slot it was counted with.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::key::KeyExtractor;
use super::layer::Shared;
use super::limiter::{LimiterError, Origin, RateLimiter};
use crate::{Decision, Outcome};

/// What a decision in flight gives: the limiter's answer, and the key, handed back.
type Decided<K> = (Result<(Decision, Origin), LimiterError>, K);

/// The decision itself, boxed so that it can move to a task of its own when dropped.
type Deciding<K> = Pin<Box<dyn Future<Output = Decided<K>> + Send>>;

/// The decision of a limiter that decides elsewhere ([`RateLimiter::decide_within`]: a remote
/// store's round trip), in flight.
///
/// A remote store counts the request when it runs the decision, whether or not anyone is left
/// to read the answer. So, dropped before the answer arrived (the client hung up, a timeout
/// fired), this does not drop the decision: it lets it finish on a task of its own, on the
/// tokio runtime it is dropped on, and gives back what an admission with a wait counted, as a
/// [`Slot`](super::shaping::Slot) dropped before its request reaches the service does
/// ([`RateLimiter::refund`], with the decision's [`Origin`]). An admission without a wait is
/// kept, as it is when its client leaves while the service behind is not ready yet; a refusal
/// counted nothing. Without a runtime on the dropping thread nothing is started (and nothing
/// panics): the decision is dropped, and its slot, if it took one, passes unused.
pub(crate) struct InFlight<L: RateLimiter<X::Key> + 'static, X: KeyExtractor> {
    shared: Arc<Shared<L, X>>,
    cost: u64,
    /// `None` once the answer is in.
    deciding: Option<Deciding<X::Key>>,
}

impl<L, X> InFlight<L, X>
where
    L: RateLimiter<X::Key> + 'static,
    X: KeyExtractor,
{
    /// Starts deciding a request of weight `cost` for `key` with the layer's limiter, allowing
    /// the layer's maximum wait.
    pub(crate) fn start(shared: Arc<Shared<L, X>>, key: X::Key, cost: u64) -> Self {
        let limiter = Arc::clone(&shared);
        let deciding: Deciding<X::Key> = Box::pin(async move {
            let decided = limiter.limiter.decide_within(&key, cost, limiter.max_delay).await;
            (decided, key)
        });
        InFlight {
            shared,
            cost,
            deciding: Some(deciding),
        }
    }
}

impl<L: RateLimiter<X::Key> + 'static, X: KeyExtractor> Future for InFlight<L, X> {
    type Output = Decided<X::Key>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Polled again after the answer: never ready again, as futures may. Taken out while
        // polled: a decision that panics is then dropped as the panic unwinds, never handed to
        // a task by `Drop` (polled again, it would only panic again).
        let Some(mut deciding) = this.deciding.take() else {
            return Poll::Pending;
        };
        match deciding.as_mut().poll(cx) {
            Poll::Ready(decided) => Poll::Ready(decided),
            Poll::Pending => {
                this.deciding = Some(deciding);
                Poll::Pending
            }
        }
    }
}

impl<L: RateLimiter<X::Key> + 'static, X: KeyExtractor> Drop for InFlight<L, X> {
    fn drop(&mut self) {
        let Some(deciding) = self.deciding.take() else {
            return;
        };
        // tokio's `rt`: the runtime the request was served on.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let cost = self.cost;
        runtime.spawn(async move {
            let (decided, key) = deciding.await;
            // Only an admission that would have waited holds a slot the layer gives back.
            if let Ok((decision, origin)) = decided {
                if decision.outcome() == Outcome::Allowed && !decision.delay().is_zero() {
                    shared.limiter.refund(key, cost, origin);
                }
            }
        });
    }
}

impl<L: RateLimiter<X::Key> + 'static, X: KeyExtractor> fmt::Debug for InFlight<L, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("answered", &self.deciding.is_none())
            .field("cost", &self.cost)
            .finish_non_exhaustive()
    }
}
