//! Building a leased limiter: a [`RedisLimiterBuilder`] with every option of the per-decision
//! limiter, then the leases' own (their largest size, the span they are sized for, how many keys
//! this process holds leases for).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::clock::LocalClock;
use super::counters::LeaseCounters;
use super::direct::DirectLeasedLimiter;
use super::ledger::{LeaseRule, LeaseTable, Sizing};
use super::limiter::{LeasedLimiter, Shared};
use crate::distributed::algorithm::Reader;
use crate::distributed::{RedisConfigError, RedisLimiter, RedisLimiterBuilder};
use crate::CapacityError;

/// The share of the burst (or of the window's limit) one lease holds at most, unless
/// `max_lease` is set: a quarter. Each grant is also at most half of what is free, so while
/// several processes ask, each lease is smaller still. The fleet bench's hot key at half its
/// quota measures what it spares (`docs/benchmarks.md`, "Leases").
pub const DEFAULT_MAX_LEASE_SHARE: u64 = 4;

/// The span a lease is sized for, unless set: a key's next lease holds twice the units it spent
/// in the last such span.
pub const DEFAULT_LEASE_INTERVAL: Duration = Duration::from_millis(100);

/// The keys a keyed leased limiter holds leases for, unless set: keys beyond it are decided by
/// Redis, one round trip each.
pub const DEFAULT_LEASE_KEYS: usize = 10_000;

impl RedisLimiterBuilder {
    /// A limiter that leases units from this limiter's quota in Redis and spends them locally
    /// (`docs/distributed.md`, "Leases"): the same keys, prefix, clock, deadline, probe
    /// interval and failure policy. For the token bucket, the fixed window and the sliding window
    /// counter.
    ///
    /// ```no_run
    /// use tollgate::distributed::{FailurePolicy, RedisLimiter};
    /// use tollgate::TokenBucket;
    ///
    /// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::builder(
    ///     "redis://127.0.0.1:6379/",
    ///     TokenBucket::new("1000/s burst 1000".parse()?)?,
    ///     FailurePolicy::FailOpen,
    /// )
    /// .prefix("api:")
    /// .leased()
    /// .connect()
    /// .await?;
    /// let answer = limiter.check("client-192.0.2.1").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn leased(self) -> LeasedLimiterBuilder {
        LeasedLimiterBuilder {
            redis: self,
            max_lease: None,
            interval: DEFAULT_LEASE_INTERVAL,
            keys: DEFAULT_LEASE_KEYS,
        }
    }
}

/// Configures a [`LeasedLimiter`] or a [`DirectLeasedLimiter`]; see
/// [`RedisLimiterBuilder::leased`].
#[must_use = "a builder does nothing until `connect` is awaited"]
pub struct LeasedLimiterBuilder {
    redis: RedisLimiterBuilder,
    max_lease: Option<u64>,
    interval: Duration,
    keys: usize,
}

impl fmt::Debug for LeasedLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedLimiterBuilder")
            .field("redis", &self.redis)
            .field("max_lease", &self.max_lease)
            .field("interval", &self.interval)
            .field("keys", &self.keys)
            .finish()
    }
}

impl LeasedLimiterBuilder {
    /// The most units one lease holds (a quarter of the burst or of the window's limit, at
    /// least 1, unless set: [`DEFAULT_MAX_LEASE_SHARE`]). Larger leases spare round trips; each strands more units when its
    /// process stops, and holds more of the quota away from the other processes.
    pub fn max_lease(mut self, units: u64) -> Self {
        self.max_lease = Some(units);
        self
    }

    /// The span a lease is sized for ([`DEFAULT_LEASE_INTERVAL`] unless set): a key's next
    /// lease holds twice the units this process spent in the last such span, so a key spent at
    /// a steady rate asks Redis about once per span.
    pub fn lease_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// How many keys this process holds leases for ([`DEFAULT_LEASE_KEYS`] unless set): about
    /// 150 bytes each. A key that finds no room is decided by Redis, one round trip per
    /// request, until a key's lease is spent or has passed.
    pub fn keys(mut self, keys: usize) -> Self {
        self.keys = keys;
        self
    }

    /// Builds the keyed limiter, as [`RedisLimiterBuilder::connect`] builds the per-decision one.
    ///
    /// # Errors
    /// [`LeaseConfigError`]: every error of [`RedisLimiterBuilder::connect`], an algorithm
    /// other than the token bucket and the fixed window, a largest lease of 0, a lease interval
    /// under a microsecond, a number of keys of 0 or past memory.
    pub async fn connect(self) -> Result<LeasedLimiter, LeaseConfigError> {
        let (max_lease, interval, keys) = (self.max_lease, self.interval, self.keys);
        let redis = self.redis.connect().await.map_err(LeaseConfigError::Redis)?;
        build(redis, max_lease, interval, keys)
    }

    /// [`connect`](Self::connect), then [`LeasedLimiter::verify`].
    ///
    /// # Errors
    /// Those of [`connect`](Self::connect), and of [`RedisLimiter::verify`].
    pub async fn connect_checked(self) -> Result<LeasedLimiter, LeaseConfigError> {
        let limiter = self.connect().await?;
        limiter.verify().await.map_err(LeaseConfigError::Redis)?;
        Ok(limiter)
    }

    /// Builds a limiter of one quota, kept in Redis under the client key `key` (the Redis key
    /// `{prefix}{{key}}:{algorithm}`, shared with every limiter of the same prefix that decides
    /// `key`).
    ///
    /// # Errors
    /// As for [`connect`](Self::connect).
    pub async fn connect_direct(
        self,
        key: impl Into<String>,
    ) -> Result<DirectLeasedLimiter, LeaseConfigError> {
        let key = key.into();
        let keyed = self.keys(1).connect().await?;
        Ok(DirectLeasedLimiter::new(keyed, key))
    }
}

fn build(
    redis: RedisLimiter,
    max_lease: Option<u64>,
    interval: Duration,
    keys: usize,
) -> Result<LeasedLimiter, LeaseConfigError> {
    // The quota the leases are taken from, as the limiter is built: a leased limiter's quota is
    // not changed live (`docs/distributed.md`, "Leases").
    let configured = redis.configured.load();
    let (algorithm, params) = (configured.algorithm, configured.program.params);
    let rule = match configured.program.reader {
        Reader::TokenBucket(bucket) => {
            let [interval, tolerance] = configured.program.params;
            LeaseRule::Bucket {
                bucket,
                interval,
                tolerance,
            }
        }
        // The window's length is whole µs: the Redis configuration checked it.
        Reader::FixedWindow { limit } => LeaseRule::Window {
            limit,
            length: configured.program.params[0],
            sliding: None,
        },
        Reader::SlidingWindow(window) => LeaseRule::Window {
            limit: window.limit(),
            length: configured.program.params[0],
            sliding: Some(window),
        },
        Reader::Fine { shaper: false, .. } => {
            return Err(LeaseConfigError::IntervalNotWholeMicros {
                interval: configured.program.reader.bucket_interval().unwrap_or_default(),
            })
        }
        _ => {
            return Err(LeaseConfigError::NotLeasable {
                algorithm: configured.algorithm.name(),
            })
        }
    };
    let max_lease = match max_lease {
        Some(0) => return Err(LeaseConfigError::ZeroMaxLease),
        Some(units) => units,
        None => (rule.capacity() / DEFAULT_MAX_LEASE_SHARE).max(1),
    };
    let interval = match u64::try_from(interval.as_micros()) {
        Ok(0) => return Err(LeaseConfigError::IntervalTooShort { interval }),
        Ok(micros) => micros.min(crate::distributed::algorithm::MAX_SPAN_MICROS),
        Err(_) => crate::distributed::algorithm::MAX_SPAN_MICROS,
    };
    let clock = LocalClock::of(&redis.time);
    let sizing = Sizing {
        max_lease,
        interval,
        margin: clock.needs_margin(),
    };
    let table = LeaseTable::new(rule, sizing, keys).map_err(LeaseConfigError::Keys)?;
    Ok(LeasedLimiter {
        shared: Arc::new(Shared {
            redis,
            algorithm,
            params,
            table,
            clock,
            counters: LeaseCounters::default(),
        }),
        metering: crate::meter::Metering::NONE,
    })
}

/// A leased limiter that tollgate refuses to build.
#[derive(Debug)]
#[non_exhaustive]
pub enum LeaseConfigError {
    /// The per-decision limiter under it cannot be built (its own error says why).
    Redis(RedisConfigError),
    /// An algorithm whose units are not leased: only the token bucket, the fixed window and the
    /// sliding window counter are (`docs/distributed.md`, "Leases", says why the others are
    /// not).
    NotLeasable {
        /// The algorithm asked for.
        algorithm: &'static str,
    },
    /// A token bucket whose emission interval is not a whole number of microseconds: leases
    /// hand out slots in whole µs. Its per-decision [`RedisLimiter`](crate::distributed::RedisLimiter)
    /// runs it exactly; or lease a quota whose `period / count` is whole µs (such as `1000/s`,
    /// `25000/s`, `1/ms`).
    IntervalNotWholeMicros {
        /// The bucket's interval, rounded up to whole nanoseconds.
        interval: Duration,
    },
    /// A largest lease of 0 units: no lease could ever hold a unit.
    ZeroMaxLease,
    /// A lease interval under a microsecond, the unit of the scripts.
    IntervalTooShort {
        /// The interval asked for.
        interval: Duration,
    },
    /// The table of leases for the number of keys asked for cannot be had.
    Keys(CapacityError),
}

impl fmt::Display for LeaseConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseConfigError::Redis(error) => error.fmt(f),
            LeaseConfigError::NotLeasable { algorithm } => write!(
                f,
                "a {algorithm} cannot be leased: lease a token bucket, a fixed window or a sliding \
                 window counter, or decide the {algorithm} per request with RedisLimiter"
            ),
            LeaseConfigError::IntervalNotWholeMicros { interval } => write!(
                f,
                "a token bucket whose interval ({interval:?} per unit) is not whole microseconds cannot be leased: \
                 decide it per request with RedisLimiter (exact at every rate), or lease a quota whose period / count \
                 is whole microseconds"
            ),
            LeaseConfigError::ZeroMaxLease => {
                f.write_str("a largest lease of 0 units holds nothing: give max_lease at least 1")
            }
            LeaseConfigError::IntervalTooShort { interval } => write!(
                f,
                "a lease interval of {interval:?} is under a microsecond, the unit of the scripts: \
                 give lease_interval at least 1 µs (100 ms unless set)"
            ),
            LeaseConfigError::Keys(error) => write!(f, "the leases' table: {error}"),
        }
    }
}

impl std::error::Error for LeaseConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LeaseConfigError::Redis(error) => Some(error),
            LeaseConfigError::Keys(error) => Some(error),
            _ => None,
        }
    }
}
