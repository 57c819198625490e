//! How much traffic a limiter lets through: a count per period, and an optional burst.

mod parse;

use std::fmt;
use std::time::Duration;

pub use parse::ParseQuotaError;

use crate::error::QuotaError;

/// A rate: `count` requests per `period`, with an optional `burst`.
///
/// Each algorithm reads it in its own way:
///
/// | algorithm | `count` / `period` | `burst` (defaults to `count`) |
/// |---|---|---|
/// | [`TokenBucket`](crate::TokenBucket) | refill rate | bucket capacity |
/// | [`LeakyBucket`](crate::LeakyBucket) | drain rate | requests accepted at once: one proceeds, `burst - 1` wait |
/// | [`FixedWindow`](crate::FixedWindow), [`SlidingWindow`](crate::SlidingWindow) | limit per window | not allowed (an error) |
///
/// A quota is validated when it is built (zero count, zero period, a period that overflows 64
/// bits of nanoseconds) and again by each algorithm (whether it fits the packed state). It can be
/// written as a string; see [`Quota::from_str`](#impl-FromStr-for-Quota) for the grammar.
///
/// ```
/// use std::time::Duration;
/// use tollgate::Quota;
///
/// let a: Quota = "10/s burst 20".parse()?;
/// let b = Quota::per_second(10)?.with_burst(20)?;
/// assert_eq!(a, b);
/// assert_eq!(a.period(), Duration::from_secs(1));
/// assert_eq!("100 / 5min".parse::<Quota>()?, Quota::new(100, Duration::from_secs(300))?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    count: u64,
    period_nanos: u64,
    burst: Option<u64>,
}

impl Quota {
    /// `count` requests per `period`.
    ///
    /// # Errors
    /// [`QuotaError::ZeroCount`], [`QuotaError::ZeroPeriod`], or [`QuotaError::PeriodOverflow`]
    /// when the period does not fit in a `u64` of nanoseconds.
    pub fn new(count: u64, period: Duration) -> Result<Quota, QuotaError> {
        if count == 0 {
            return Err(QuotaError::ZeroCount);
        }
        let period_nanos =
            u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodOverflow { period })?;
        if period_nanos == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        Ok(Quota {
            count,
            period_nanos,
            burst: None,
        })
    }

    /// `count` requests per second.
    ///
    /// # Errors
    /// [`QuotaError::ZeroCount`] when `count` is zero.
    pub fn per_second(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(1))
    }

    /// `count` requests per minute.
    ///
    /// # Errors
    /// [`QuotaError::ZeroCount`] when `count` is zero.
    pub fn per_minute(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(60))
    }

    /// `count` requests per hour.
    ///
    /// # Errors
    /// [`QuotaError::ZeroCount`] when `count` is zero.
    pub fn per_hour(count: u64) -> Result<Quota, QuotaError> {
        Quota::new(count, Duration::from_secs(3600))
    }

    /// The same rate with an explicit burst.
    ///
    /// # Errors
    /// [`QuotaError::ZeroBurst`] when `burst` is zero.
    pub fn with_burst(self, burst: u64) -> Result<Quota, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        Ok(Quota {
            burst: Some(burst),
            ..self
        })
    }

    /// Requests per period.
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// The period (for window algorithms: the window).
    pub const fn period(&self) -> Duration {
        Duration::from_nanos(self.period_nanos)
    }

    /// The period in nanoseconds.
    pub(crate) const fn period_nanos(&self) -> u64 {
        self.period_nanos
    }

    /// The burst: the explicit one, else `count`.
    pub const fn burst(&self) -> u64 {
        match self.burst {
            Some(burst) => burst,
            None => self.count,
        }
    }

    /// The burst only if one was given explicitly.
    pub const fn explicit_burst(&self) -> Option<u64> {
        self.burst
    }
}

/// Writes the quota in the grammar [`Quota::from_str`](#impl-FromStr-for-Quota) reads back,
/// with the period in nanoseconds when it is not a whole number of a larger unit.
impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/", self.count)?;
        parse::write_period(f, self.period_nanos)?;
        if let Some(burst) = self.burst {
            write!(f, " burst {burst}")?;
        }
        Ok(())
    }
}
