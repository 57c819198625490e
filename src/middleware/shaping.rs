//! Shaping: an admitted request waits for its slot; a client that leaves gives the slot back.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::key::KeyExtractor;
use super::layer::Shared;
use super::limiter::{Origin, RateLimiter};

/// A slot the limiter gave a key and that is not used yet.
///
/// It owns what a refund needs (the layer's limiter and the key), so it is made the moment the
/// slot is counted: dropped before it is [`used`](Self::used), that is before its request
/// reaches the inner service (the client disconnected, a timeout fired, the response future was
/// dropped, even before its first poll or while the inner service was not ready), it gives the
/// slot back with [`RateLimiter::refund`].
///
/// A slot the limiter named by its end ([`Origin::Slot`], or [`Origin::FallbackSlot`] for a
/// stand-in: a `KeyedLimiter`'s, a remote shaper's, its local fallback's) goes back only if it is still the end of the key's queue: no request of the key
/// has been given a slot after it since (other than ones given back in their turn). Then the
/// key's bucket moves back one interval and the next request takes the slot exactly. Otherwise
/// nothing is given back and the slot passes unused: the requests behind keep their timers, and
/// the next request is scheduled after the last of them, so two forwarded requests of a key are
/// never less than one interval apart. With one slot every 10 s and A, B, C, D given 0, 10, 20
/// and 30 s, B leaving gives nothing back and E, the next, is given 40 s; D, C and B leaving in
/// that order give back all three. A slot not named ([`Origin::Limiter`], [`Origin::Fallback`]:
/// a `RateLimiter` of your own, or a stand-in, that keeps the provided methods) goes back as
/// its `refund` gives it.
pub(crate) struct Slot<L: RateLimiter<X::Key>, X: KeyExtractor> {
    shared: Arc<Shared<L, X>>,
    /// `None` once the slot is used.
    key: Option<X::Key>,
    cost: u64,
    /// Where the limiter counted it: where it goes back.
    origin: Origin,
    /// When the slot comes: the decision's delay from the moment it was held, not from the
    /// first poll of the future that waits for it (which a busy executor or a caller that
    /// awaits later may put off). `None` past the timer's range: wait the delay as given.
    due: Option<Instant>,
    delay: Duration,
}

impl<L: RateLimiter<X::Key>, X: KeyExtractor> Slot<L, X> {
    /// Holds the slot of weight `cost` the layer's limiter just counted for `key`, at `origin`,
    /// due `delay` from now.
    pub(crate) fn taken(
        shared: Arc<Shared<L, X>>,
        key: X::Key,
        cost: u64,
        origin: Origin,
        delay: Duration,
    ) -> Self {
        Slot {
            shared,
            key: Some(key),
            cost,
            origin,
            due: Instant::now().checked_add(delay),
            delay,
        }
    }

    /// Waits (a tokio timer) until the slot is due, and hands it back, still held: the request
    /// may still have to wait for the inner service to be ready.
    pub(crate) async fn wait(self) -> Self {
        match self.due {
            Some(due) => tokio::time::sleep_until(due).await,
            None => tokio::time::sleep(self.delay).await,
        }
        self
    }

    /// The request reached the inner service: the slot is used, nothing to give back.
    pub(crate) fn used(mut self) {
        self.key = None;
    }
}

impl<L: RateLimiter<X::Key>, X: KeyExtractor> Drop for Slot<L, X> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.shared.limiter.refund(key, self.cost, self.origin);
        }
    }
}

impl<L: RateLimiter<X::Key>, X: KeyExtractor> fmt::Debug for Slot<L, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("used", &self.key.is_none())
            .field("cost", &self.cost)
            .field("origin", &self.origin)
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}
