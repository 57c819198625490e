//! Whose clock a distributed decision is timed by.

use std::fmt;
use std::sync::Arc;

use super::algorithm::MAX_TIME_MICROS;
use super::error::RedisCheckError;
use crate::clock::Clock;

/// Where a distributed limiter takes `now` from.
///
/// - [`TimeSource::Server`] (the default): the script reads the Redis server's `TIME`, in
///   microseconds. Every instance of a fleet then decides on one timeline, whatever their own
///   clocks say; a decision is timed when the script runs, that is up to one network hop after
///   the request was sent.
/// - [`TimeSource::Client`]: the caller's clock, in nanoseconds, rounded **down** to whole
///   microseconds (an earlier time never admits more). For tests and replays, and for fleets
///   whose clocks are synchronised: instances whose clocks differ by `d` see refills and window
///   boundaries `d` apart. Give such a fleet a [`SystemClock`](crate::SystemClock): the precise
///   and coarse clocks drift from the system time by parts per million, differently in each
///   process.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum TimeSource {
    /// The Redis server's clock (`TIME`, microseconds).
    #[default]
    Server,
    /// A clock of the caller's, read once per decision and sent with it.
    Client(Arc<dyn Clock>),
}

impl TimeSource {
    /// A client-supplied clock.
    pub fn client(clock: impl Clock + 'static) -> TimeSource {
        TimeSource::Client(Arc::new(clock))
    }

    /// The script's `now` argument: microseconds since the epoch, or `None` for the server's
    /// clock (the script then reads `TIME`).
    pub(crate) fn now_argument(&self) -> Result<Option<i64>, RedisCheckError> {
        match self {
            TimeSource::Server => Ok(None),
            TimeSource::Client(clock) => {
                let now = clock.now();
                let micros = now.as_nanos() / 1_000;
                if micros >= MAX_TIME_MICROS {
                    return Err(RedisCheckError::TimeOutOfRange { now });
                }
                // Below 2^52, so it fits an i64.
                Ok(Some(micros as i64))
            }
        }
    }
}

impl fmt::Debug for TimeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeSource::Server => f.write_str("Server"),
            TimeSource::Client(clock) => write!(f, "Client(now = {:?})", clock.now()),
        }
    }
}
