//! The local clock a leased limiter reads on every decision, in microseconds: on the server's
//! clock a monotonic one (the leases' timeline is then reached through each key's anchor); on a
//! client's clock, that clock itself (the timeline).

use std::sync::Arc;

use crate::clock::Clock;
use crate::distributed::algorithm::MAX_TIME_MICROS;
use crate::distributed::{RedisCheckError, TimeSource};
use crate::PreciseClock;

#[derive(Clone)]
pub(super) enum LocalClock {
    /// Monotonic, from quanta; the timeline is the Redis server's `TIME`.
    Server(PreciseClock),
    /// The client's clock, which is the timeline (its readings are sent as `now`).
    Client(Arc<dyn Clock>),
}

impl LocalClock {
    pub(super) fn of(time: &TimeSource) -> LocalClock {
        match time {
            TimeSource::Client(clock) => LocalClock::Client(Arc::clone(clock)),
            _ => LocalClock::Server(PreciseClock::new()),
        }
    }

    /// Whether local readings map onto the timeline with the drift margin (`Sizing::margin`).
    pub(super) fn needs_margin(&self) -> bool {
        matches!(self, LocalClock::Server(_))
    }

    /// The local time, µs.
    ///
    /// # Errors
    /// [`RedisCheckError::TimeOutOfRange`] for a client time at or past 2^52 µs.
    #[inline]
    pub(super) fn now(&self) -> Result<u64, RedisCheckError> {
        let now = match self {
            LocalClock::Server(clock) => clock.now(),
            LocalClock::Client(clock) => clock.now(),
        };
        let micros = now.as_nanos() / 1_000;
        if micros >= MAX_TIME_MICROS {
            return Err(RedisCheckError::TimeOutOfRange { now });
        }
        Ok(micros)
    }

    /// The script's `now` argument for a request sent at local time `sent`: the client's
    /// reading itself, or none (the script reads `TIME`).
    pub(super) fn argument(&self, sent: u64) -> Option<i64> {
        match self {
            // Below 2^52 (checked by `now`): fits an i64.
            LocalClock::Client(_) => Some(sent as i64),
            LocalClock::Server(_) => None,
        }
    }
}
