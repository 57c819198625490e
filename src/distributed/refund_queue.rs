//! The tower layer's refunds through Redis, sent in the order each key's slots were given back.
//!
//! A shaped request whose client leaves gives its slot back only if it still ends its key's
//! queue (`gcra_refund.lua` compares), so clients D, C and B leaving in that order give back all
//! three only if Redis runs D's refund before C's and C's before B's. A task per refund lets a
//! multi-threaded runtime send them in any order, and then all but one can find the queue ending
//! elsewhere and give nothing back (a review lost a refund in 24 to 76 of 200 such rounds).
//!
//! So each key's refunds form a chain: the first starts a task on the caller's runtime, which
//! sends it and then every refund of that key queued behind it meanwhile, one round trip at a
//! time, and ends when none is left. Keys do not wait for each other (one queue for every key
//! made a refund wait behind thousands of others, until a new request had taken the slot after
//! its own and it gave nothing back: a review), and each chain runs on a runtime that is running
//! a refund of its key.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::refund::Refund;

/// The refunds of each key waiting behind the one of that key in flight.
type Waiting = Mutex<HashMap<String, VecDeque<Refund>>>;

/// The refunds waiting for the one of their key in flight.
#[derive(Default)]
pub(crate) struct RefundQueue {
    /// A key is present while a chain of its refunds runs; its queue holds those to send next.
    waiting: Arc<Waiting>,
}

impl std::fmt::Debug for RefundQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefundQueue")
            .field("keys", &lock(&self.waiting).len())
            .finish()
    }
}

/// No panic runs under this lock (map and queue operations only), so a poisoned one holds
/// consistent data.
fn lock(waiting: &Waiting) -> MutexGuard<'_, HashMap<String, VecDeque<Refund>>> {
    waiting.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RefundQueue {
    /// Sends `refund` after the refunds of its key given back before it: at once, on a task of
    /// the current tokio runtime, if none of its key is in flight. Outside a runtime, nothing
    /// is given back (best effort, as every refund of the layer).
    pub(crate) fn push(&self, refund: Refund) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            // A lock on this cold path only (a client leaving a shaped wait).
            let mut waiting = lock(&self.waiting);
            if let Some(queue) = waiting.get_mut(&refund.key) {
                queue.push_back(refund);
                return;
            }
            waiting.insert(refund.key.clone(), VecDeque::new());
        }
        // The claim is made here, not in the task: a task dropped before its first poll (its
        // runtime shut down, or never run) still gives the key up.
        let claim = Chain {
            key: refund.key.clone(),
            waiting: Arc::clone(&self.waiting),
            ended: false,
        };
        runtime.spawn(chain(claim, refund));
    }
}

/// Sends `first`, then every refund of its key queued behind it, one after the other; the key
/// leaves the map when none is left, or when the task is dropped (its runtime shut down), so
/// that a later refund of the key starts a new chain instead of waiting behind a dead one.
async fn chain(mut chain: Chain, first: Refund) {
    let mut next = Some(first);
    while let Some(refund) = next {
        // Best effort: nobody is left to tell.
        let _ = refund.run().await;
        let mut waiting = lock(&chain.waiting);
        next = waiting.get_mut(&chain.key).and_then(VecDeque::pop_front);
        if next.is_none() {
            waiting.remove(&chain.key);
            chain.ended = true;
        }
    }
}

/// A running chain's claim on its key.
struct Chain {
    key: String,
    waiting: Arc<Waiting>,
    /// Whether the chain removed its key itself (then another chain may hold it now).
    ended: bool,
}

impl Drop for Chain {
    fn drop(&mut self) {
        if !self.ended {
            // Dropped mid-chain: the refunds queued behind are lost with their runtime.
            lock(&self.waiting).remove(&self.key);
        }
    }
}
