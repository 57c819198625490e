//! Shaping: an admitted request waits for its slot; a client that leaves gives the slot back.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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
/// Redis limiter's local fallback: a `KeyedLimiter`'s, a Redis shaper's, a keyed or direct
/// fallback's) goes back only if it is still the end of the key's queue: no request of the key
/// has been given a slot after it since (other than ones given back in their turn). Then the
/// key's bucket moves back one interval and the next request takes the slot exactly. Otherwise
/// nothing is given back and the slot passes unused: the requests behind keep their timers, and
/// the next request is scheduled after the last of them, so two forwarded requests of a key are
/// never less than one interval apart. With one slot every 10 s and A, B, C, D given 0, 10, 20
/// and 30 s, B leaving gives nothing back and E, the next, is given 40 s; D, C and B leaving in
/// that order give back all three. A slot not named ([`Origin::Limiter`], [`Origin::Fallback`]:
/// a `RateLimiter` or `LocalFallback` of your own that keeps the provided methods) goes back as
/// its `refund` (or `refund_n`) gives it.
pub(crate) struct Slot<L: RateLimiter<X::Key>, X: KeyExtractor> {
    shared: Arc<Shared<L, X>>,
    /// `None` once the slot is used.
    key: Option<X::Key>,
    cost: u64,
    /// Where the limiter counted it: where it goes back.
    origin: Origin,
}

impl<L: RateLimiter<X::Key>, X: KeyExtractor> Slot<L, X> {
    /// Holds the slot of weight `cost` the layer's limiter just counted for `key`, at `origin`.
    pub(crate) fn taken(shared: Arc<Shared<L, X>>, key: X::Key, cost: u64, origin: Origin) -> Self {
        Slot {
            shared,
            key: Some(key),
            cost,
            origin,
        }
    }

    /// Waits `delay` (a tokio timer) for the slot, and hands it back, still held: the request
    /// may still have to wait for the inner service to be ready.
    pub(crate) async fn wait(self, delay: Duration) -> Self {
        tokio::time::sleep(delay).await;
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
            .finish_non_exhaustive()
    }
}
