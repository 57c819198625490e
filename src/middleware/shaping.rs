//! Shaping: an admitted request waits for its slot; a client that leaves gives the slot back.

use std::time::Duration;

use super::limiter::RateLimiter;

/// Waits `delay` (a tokio timer) for the slot `limiter` gave `key`. If this future is dropped
/// before the slot (the client disconnected, a timeout fired), the slot is given back with
/// [`RateLimiter::refund`], so the requests behind it move up.
pub(crate) async fn wait_for_slot<K, L: RateLimiter<K>>(limiter: &L, key: K, cost: u64, delay: Duration) {
    let mut slot = SlotGuard {
        limiter,
        key: Some(key),
        cost,
    };
    tokio::time::sleep(delay).await;
    // The slot came: it is used, nothing to give back.
    slot.key = None;
}

/// Gives the slot back when dropped while still holding the key.
struct SlotGuard<'a, K, L: RateLimiter<K>> {
    limiter: &'a L,
    key: Option<K>,
    cost: u64,
}

impl<K, L: RateLimiter<K>> Drop for SlotGuard<'_, K, L> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.limiter.refund(key, self.cost);
        }
    }
}
