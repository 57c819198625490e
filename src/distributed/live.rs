//! A Redis limiter's quota changed live ([`RedisLimiter::set_algorithm`]).
//!
//! The parameters travel with every call (the scripts' first argument), and every state in
//! Redis is read under the parameters of the call that reads it ("Changing a quota" in
//! `docs/distributed.md`: what each algorithm's state becomes). So a change is this instance's
//! own: its next call sends the new parameters, and a call in flight sends the old ones (each
//! call reads one snapshot of the algorithm, for its arguments, its reply and its failure
//! policy). Instances of a fleet that change at different moments each decide the shared keys
//! under their own quota meanwhile.

use super::algorithm::{Program, RedisAlgorithm};
use super::error::RedisConfigError;
use super::limiter::RedisLimiter;
use crate::sync::Ordering;

/// The algorithm and its script call, replaced together.
#[derive(Debug)]
pub(crate) struct Configured {
    pub(crate) algorithm: RedisAlgorithm,
    pub(crate) program: Program,
}

impl RedisLimiter {
    /// Changes the quota live: the next call of this instance sends `algorithm`'s parameters
    /// and reads its reply under them; the keys in Redis keep their states, read under the new
    /// quota as `docs/distributed.md` says ("Changing a quota": a bucket's debt kept in time, a
    /// window's counts kept, a log's units kept, also across the packed log's limit of 256).
    /// A call in flight is decided under the old quota or the new one, never a mix. Other
    /// instances of the fleet keep deciding under their own quota until they change too.
    ///
    /// The failure policy is not changed: a [`Fallback`](super::FailurePolicy::Fallback)'s
    /// share is its own limiter's (a [`Live`](crate::Live) one changes with its own
    /// `set_quota`).
    ///
    /// # Errors
    /// [`RedisConfigError::AlgorithmChanged`] for another algorithm (its keys are another
    /// algorithm's: build a new limiter), and the errors of
    /// [`connect`](super::RedisLimiterBuilder::connect) for parameters a script cannot hold
    /// exactly. The limiter keeps its quota either way.
    pub fn set_algorithm(&self, algorithm: impl Into<RedisAlgorithm>) -> Result<(), RedisConfigError> {
        let algorithm = algorithm.into();
        let running = self.algorithm();
        if std::mem::discriminant(&running) != std::mem::discriminant(&algorithm) {
            return Err(RedisConfigError::AlgorithmChanged {
                from: running.name(),
                to: algorithm.name(),
            });
        }
        let program = algorithm.program()?;
        self.configured.store(Configured { algorithm, program });
        // Relaxed: a count the tower layer reads to notice a change; the parameters are read
        // from their snapshot.
        self.changes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// How many times [`set_algorithm`](Self::set_algorithm) changed the quota.
    pub fn changes(&self) -> u64 {
        // Relaxed: see `set_algorithm`.
        self.changes.load(Ordering::Relaxed)
    }
}
