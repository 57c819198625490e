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
        /// The period asked for.
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
    /// The window's limit does not fit beside the window index in the packed 64-bit state.
    LimitTooLarge {
        /// The limit asked for.
        limit: u64,
        /// The largest limit that fits for this window.
        max: u64,
        /// The window.
        window: Duration,
    },
    /// A burst was given to a window algorithm, which has none (its limit is its burst).
    BurstNotSupported {
        /// The algorithm that was asked for.
        algorithm: &'static str,
    },
    /// The sliding window log keeps one 8-byte timestamp per unit of its limit, preallocated;
    /// this limit would need more than it allows per log.
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
            QuotaError::PeriodOverflow { period } => write!(
                f,
                "a period of {period:?} does not fit in 64 bits of nanoseconds (at most about 584 years)"
            ),
            QuotaError::ZeroBurst => f.write_str("a burst must be at least 1"),
            QuotaError::BurstTooLarge { burst, max } => write!(
                f,
                "a burst of {burst} does not fit the packed state at this rate (at most {max})"
            ),
            QuotaError::LimitTooLarge { limit, max, window } => write!(
                f,
                "a limit of {limit} per {window:?} does not fit the packed state (at most {max} for this window)"
            ),
            QuotaError::BurstNotSupported { algorithm } => write!(
                f,
                "the {algorithm} has no burst: its limit per window is its burst (drop `burst`, or use a token bucket)"
            ),
            QuotaError::LogTooLarge { limit, max } => write!(
                f,
                "a sliding window log of limit {limit} would preallocate 8 bytes per unit of its limit; \
                 at most {max} (use a sliding window counter for larger limits)"
            ),
        }
    }
}

impl std::error::Error for QuotaError {}

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
    /// A table for this many keys would not fit in the address space.
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
                "a keyed limiter for {capacity} keys would not fit in memory (16 bytes per slot, 10 slots per 7 keys)"
            ),
        }
    }
}

impl std::error::Error for CapacityError {}
