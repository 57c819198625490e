//! Typed errors: every bad input is refused at construction, never on the decision path.

use std::fmt;
use std::time::Duration;

/// A quota or algorithm configuration that tollgate refuses to build.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The count (requests per period, or the window's limit) is zero.
    ZeroCount,
    /// The period (or window) is zero.
    ZeroPeriod,
    /// The period does not fit in a `u64` of nanoseconds (about 584 years).
    PeriodOverflow {
        /// The period asked for, or `Duration::MAX` for a period parsed from a string that is
        /// longer than a `Duration` holds (the [`ParseQuotaError`](crate::ParseQuotaError)'s
        /// message gives that period as written).
        period: Duration,
    },
    /// An explicit burst of zero.
    ZeroBurst,
    /// `burst` times the emission interval does not fit in a `u64` of nanoseconds.
    BurstTooLarge {
        /// The burst asked for.
        burst: u64,
        /// The largest burst that fits with this rate.
        max: u64,
    },
    /// The window's limit is more than its state counts, whatever the window: a sliding window
    /// keeps its two counts in 32 bits each ([`SlidingWindow::MAX_LIMIT`], `u32::MAX`), a fixed
    /// window its count in 63 ([`FixedWindow::MAX_LIMIT`], `2^63 - 1`). (Every smaller limit
    /// works: one that does not fit one 64-bit word beside the window index takes a 128-bit
    /// state.)
    ///
    /// [`SlidingWindow::MAX_LIMIT`]: crate::SlidingWindow::MAX_LIMIT
    /// [`FixedWindow::MAX_LIMIT`]: crate::FixedWindow::MAX_LIMIT
    LimitTooLarge {
        /// The limit asked for.
        limit: u64,
        /// The largest limit the algorithm takes.
        max: u64,
        /// The window.
        window: Duration,
    },
    /// A burst was given to a window algorithm, which has none (its limit is its burst).
    BurstNotSupported {
        /// The algorithm that was asked for.
        algorithm: &'static str,
    },
    /// A bucket's emission interval `T = period / count`, which the buckets keep in whole
    /// nanoseconds rounded up, would run more than 1% slower than the quota (a rate near or
    /// above one unit per nanosecond, or one that divides its period badly at a few dozen
    /// nanoseconds per unit). Count in larger units (kibibytes rather than bytes).
    ///
    /// Both buckets ([`TokenBucket`](crate::TokenBucket), [`LeakyBucket`](crate::LeakyBucket))
    /// run such a rate exactly in a 128-bit state, and refuse only one whose count is above
    /// `u32::MAX`.
    RateTooFine {
        /// The count asked for.
        count: u64,
        /// The period asked for.
        period: Duration,
        /// The whole-nanosecond interval the bucket would run at.
        interval: Duration,
    },
    /// A bucket's emission interval is longer than [`MAX_EMISSION_INTERVAL`]: its first unit
    /// would be due past the end of representable time (the year 2554), so it could never
    /// admit anything.
    ///
    /// [`MAX_EMISSION_INTERVAL`]: crate::algorithm::MAX_EMISSION_INTERVAL
    IntervalTooLong {
        /// The interval `period / count`, rounded up to whole nanoseconds.
        interval: Duration,
        /// The longest interval a bucket runs at.
        max: Duration,
    },
    /// The sliding window log keeps one 8-byte timestamp per unit of its limit, allocated at
    /// once (it is exact because it remembers every unit), so its limit is bounded by memory:
    /// at most [`SlidingLog::MAX_LIMIT`](crate::SlidingLog::MAX_LIMIT), 2^24 units, 128 MiB per
    /// log (through Redis, at most 65,536: one list entry per unit, pushed by one script).
    LogTooLarge {
        /// The limit asked for.
        limit: u64,
        /// The largest limit a sliding window log accepts.
        max: u64,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaError::ZeroCount => f.write_str("the count of a quota must be at least 1"),
            QuotaError::ZeroPeriod => f.write_str("the period (window) of a quota must be longer than zero"),
            QuotaError::PeriodOverflow { period } => write!(f, "a period of {period:?} {PERIOD_LIMIT}"),
            QuotaError::ZeroBurst => f.write_str("a burst must be at least 1"),
            QuotaError::BurstTooLarge { burst, max } => write!(
                f,
                "a burst of {burst} does not fit the packed state at this rate (at most {max})"
            ),
            QuotaError::LimitTooLarge { limit, max, window } => write!(
                f,
                "a limit of {limit} per {window:?} is more than this window counts (at most {max}, whatever the \
                 window: a sliding window keeps its counts in 32 bits, a fixed window in 63)"
            ),
            QuotaError::BurstNotSupported { algorithm } => write!(
                f,
                "the {algorithm} has no burst: its limit per window is its burst (drop `burst`, or use a token bucket)"
            ),
            QuotaError::RateTooFine {
                count,
                period,
                interval,
            } => {
                let asked = u128::from(period_nanos(*period));
                let run = u128::from(period_nanos(*interval)) * u128::from(*count);
                // Parts per 10,000 slower than asked, rounded down (only shown, never decided on).
                let slower = run.saturating_sub(asked) * 10_000 / run.max(1);
                write!(
                    f,
                    "{count} per {period:?} needs an emission interval of {period:?} / {count}, kept in whole \
                     nanoseconds and rounded up so as never to admit more: {interval:?} per unit, {}.{:02}% \
                     slower than asked (at most 1%); count in larger units (for example kibibytes, not bytes)",
                    slower / 100,
                    slower % 100
                )
            }
            QuotaError::IntervalTooLong { interval, max } => write!(
                f,
                "one unit per {interval:?} is too slow for a bucket (at most one per {max:?}): its first \
                 unit would be due after the end of representable time"
            ),
            QuotaError::LogTooLarge { limit, max } => write!(
                f,
                "a sliding window log of limit {limit} would allocate 8 bytes per unit of its limit at once \
                 (it is exact because it keeps every unit's time): at most {max}, 128 MiB per log (through \
                 Redis at most 65536); use a sliding window counter for larger limits"
            ),
        }
    }
}

impl std::error::Error for QuotaError {}

/// What a period too long for a quota does not fit in: the end of every message about one.
pub(crate) const PERIOD_LIMIT: &str = "does not fit in 64 bits of nanoseconds (at most about 584 years)";

/// A duration the error itself holds, in nanoseconds (saturated: only for messages).
fn period_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A request whose weight can never pass: it exceeds the limiter's capacity.
///
/// Returned by `check_n` instead of a silent, permanent denial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostTooLarge {
    /// The weight asked for.
    pub cost: u64,
    /// The most any single request can weigh with this limiter.
    pub capacity: u64,
}

impl CostTooLarge {
    /// `Ok` when a request of weight `cost` can pass a limiter of `capacity`.
    #[inline]
    pub(crate) fn check(cost: u64, capacity: u64) -> Result<(), CostTooLarge> {
        if cost > capacity {
            return Err(CostTooLarge { cost, capacity });
        }
        Ok(())
    }
}

impl fmt::Display for CostTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a request of weight {} can never pass a limiter of capacity {}",
            self.cost, self.capacity
        )
    }
}

impl std::error::Error for CostTooLarge {}

/// A keyed table that tollgate refuses to build.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CapacityError {
    /// A table for zero keys.
    Zero,
    /// A table for this many keys would not fit in the address space, or the allocator refused
    /// it. A table larger than the machine's memory is not detected (see
    /// [`KeyedLimiter::with_clock`](crate::KeyedLimiter::with_clock)).
    TooLarge {
        /// The capacity asked for.
        capacity: usize,
    },
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityError::Zero => f.write_str("a keyed limiter needs room for at least one key"),
            CapacityError::TooLarge { capacity } => write!(
                f,
                "a keyed limiter for {capacity} keys cannot be allocated: it would not fit in the address space, or the allocator refused it"
            ),
        }
    }
}

impl std::error::Error for CapacityError {}
