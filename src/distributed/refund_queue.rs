//! The tower layer's refunds through Redis, sent one after the other in the order the slots
//! were given back.
//!
//! A shaped request whose client leaves gives its slot back only if it still ends its key's
//! queue (`gcra_refund.lua` compares), so clients D, C and B leaving in that order give back all
//! three only if Redis runs D's refund before C's and C's before B's. A task per refund lets a
//! multi-threaded runtime send them in any order, and then all but one can find the queue ending
//! elsewhere and give nothing back (a review lost a refund in 24 to 76 of 200 such rounds). One
//! task per limiter drains a queue of them instead, one round trip at a time.

use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc::{self, error::SendError, UnboundedReceiver, UnboundedSender};

use super::refund::Refund;

/// The refunds waiting to be sent, and the task that sends them.
#[derive(Debug, Default)]
pub(crate) struct RefundQueue {
    /// The sending end of the running drain's queue; `None` before the first refund, and
    /// replaced when that drain's runtime has shut down.
    sender: Mutex<Option<UnboundedSender<Refund>>>,
}

impl RefundQueue {
    /// Queues `refund` behind those given back before it, starting the drain on the current
    /// tokio runtime if none runs. Outside a runtime, nothing is given back (best effort, as
    /// every refund of the layer).
    pub(crate) fn push(&self, refund: Refund) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // A lock on this cold path only (a client leaving a shaped wait), held to send: two
        // refunds queued from two threads keep the order they took it in.
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let refund = match sender.as_ref() {
            Some(queue) => match queue.send(refund) {
                Ok(()) => return,
                // The drain's runtime has shut down: start another on this one.
                Err(SendError(refund)) => refund,
            },
            None => refund,
        };
        let (queue, waiting) = mpsc::unbounded_channel();
        runtime.spawn(drain(waiting));
        // The receiver was just made and is held by the drain: this cannot fail.
        let _ = queue.send(refund);
        *sender = Some(queue);
    }
}

/// Sends the refunds one after the other: each waits for the one before it to be answered
/// (or to fail, within the limiter's deadline).
async fn drain(mut waiting: UnboundedReceiver<Refund>) {
    while let Some(refund) = waiting.recv().await {
        // Best effort: nobody is left to tell.
        let _ = refund.run().await;
    }
}
