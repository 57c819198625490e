//! Points in time, as whole nanoseconds since the UNIX epoch.

use std::time::Duration;

/// A point in time: whole nanoseconds since the UNIX epoch (1970-01-01T00:00:00Z).
///
/// Every decision takes one. A `u64` of nanoseconds lasts until the year 2554; the limiters
/// handle the far end on purpose (a request whose slot would fall past `u64::MAX` is refused,
/// never wrapped). The clocks in [`crate::clock`] produce timestamps; tests and callers that
/// bring their own time use [`Timestamp::from_nanos`].
///
/// ```
/// use std::time::Duration;
/// use tollgate::Timestamp;
///
/// let t = Timestamp::from_nanos(1_500);
/// assert_eq!(t.saturating_add(Duration::from_nanos(500)).as_nanos(), 2_000);
/// assert_eq!(Timestamp::from_secs(2).as_nanos(), 2_000_000_000);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The UNIX epoch itself.
    pub const UNIX_EPOCH: Timestamp = Timestamp(0);
    /// The last representable instant (in the year 2554).
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    /// A timestamp `nanos` nanoseconds after the UNIX epoch.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Timestamp {
        Timestamp(nanos)
    }

    /// A timestamp `secs` seconds after the UNIX epoch, saturating at [`Timestamp::MAX`].
    #[must_use]
    pub const fn from_secs(secs: u64) -> Timestamp {
        Timestamp(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the UNIX epoch.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self + duration`, saturating at [`Timestamp::MAX`].
    #[must_use]
    pub fn saturating_add(self, duration: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(duration_to_nanos_saturating(duration)))
    }

    /// How long after `earlier` this timestamp is; zero if it is not after it.
    #[must_use]
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// A duration as whole nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn duration_to_nanos_saturating(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
