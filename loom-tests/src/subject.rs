//! What a model runs against: the limiter that ships, or a broken twin.

use tollgate::algorithm::Algorithm;
use tollgate::{Decision, DirectLimiter, ManualClock};

use crate::Request;

/// A limiter a [`Model`](crate::Model) can drive from several loom threads.
pub trait Subject<A>: Send + Sync + 'static {
    /// A limiter that has never admitted anything. Called inside the loom model, so it may
    /// create loom atomics.
    fn fresh(algorithm: A) -> Self;

    /// Decides `request` at its own timestamp, counting it if admitted.
    fn decide(&self, request: &Request) -> Decision;

    /// The raw state, 128 bits (a 64-bit state zero-extended).
    fn state_word(&self) -> u128;
}

/// The limiter that ships: tollgate's [`DirectLimiter`], whose state word is a loom `AtomicU64`
/// under `--cfg tollgate_loom` (and, for a wide state, tollgate's 128-bit word: a loom `Mutex`
/// per word, `src/sync/loom_u128.rs`). The clock is never read (every request brings its
/// timestamp).
pub type Shipped<A> = DirectLimiter<A, ManualClock>;

impl<A: Algorithm + 'static> Subject<A> for Shipped<A> {
    fn fresh(algorithm: A) -> Self {
        DirectLimiter::with_clock(algorithm, ManualClock::new())
    }

    fn decide(&self, request: &Request) -> Decision {
        match request.cost {
            1 => self.check_at(request.now),
            cost => self
                .check_n_at(cost, request.now)
                .expect("a model's requests fit the capacity"),
        }
    }

    fn state_word(&self) -> u128 {
        self.raw_state_wide()
    }
}
