//! Why a quota cannot be changed live.

use std::fmt;
use std::time::Duration;

use crate::QuotaError;

/// A live quota change that tollgate refuses: the running limiter keeps its quota, unchanged.
///
/// A change is live (the limiter keeps its states, in flight decisions see the old quota or the
/// new one) when the new quota reads every state the old one stored: any change of a bucket
/// (its state is a time), any change of a sliding log (its state is the admission times), a
/// window's limit within what its state holds. A window's length, or a limit past what its
/// state holds, is not: build a new limiter for it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaChangeError {
    /// The algorithm refuses the new quota itself, as it would at construction.
    Invalid(QuotaError),
    /// A window counter's state counts whole windows of its length since the UNIX epoch: under
    /// another length its window index would be read in the wrong unit, and its counts put in
    /// the wrong window. Build a new limiter for the new window.
    WindowChanged {
        /// The algorithm.
        algorithm: &'static str,
        /// The running window.
        from: Duration,
        /// The window asked for.
        to: Duration,
    },
    /// A sliding log keeps only the units that can still count in its window (the newest of
    /// them, as many as its limit); a longer window would count units it has already dropped.
    /// A shorter window, or any limit, is live. Build a new limiter for a longer window.
    WindowLengthened {
        /// The running window.
        from: Duration,
        /// The window asked for.
        to: Duration,
    },
    /// The new limit needs a window's 128-bit state, and the limiter holds 64-bit ones (chosen
    /// at construction from the first quota: [`Algorithm::is_wide`]). Build a new limiter for
    /// the new limit, or build the first one with its state in 128 bits
    /// ([`FixedWindow::with_wide_state`], [`SlidingWindow::with_wide_state`]), which holds
    /// every limit.
    ///
    /// [`Algorithm::is_wide`]: crate::algorithm::Algorithm::is_wide
    /// [`FixedWindow::with_wide_state`]: crate::FixedWindow::with_wide_state
    /// [`SlidingWindow::with_wide_state`]: crate::SlidingWindow::with_wide_state
    NeedsWideState {
        /// The algorithm.
        algorithm: &'static str,
        /// The limit asked for.
        limit: u64,
        /// The largest limit the running 64-bit state holds.
        max: u64,
    },
    /// A window built with its state in 128 bits was offered to replace one in 64 bits, or the
    /// other way round: the limiter holds one kind of cell. Offer the same layout
    /// ([`Live::set_quota`](crate::Live::set_quota) chooses it).
    LayoutChanged {
        /// The algorithm.
        algorithm: &'static str,
    },
    /// A bucket (a token bucket or a shaper) whose rate whole nanoseconds cannot hold within 1%
    /// keeps its time in 128 bits, in units of `1 / count` ns ([`Algorithm::is_wide`]): a
    /// change to or from such a rate, or to another count of one, would read its state in the
    /// wrong unit. Any other change of a bucket is live (a wide one's period and burst too).
    /// Build a new limiter for the new rate.
    ///
    /// [`Algorithm::is_wide`]: crate::algorithm::Algorithm::is_wide
    TimeUnitChanged {
        /// The running quota.
        from: crate::Quota,
        /// The quota asked for.
        to: crate::Quota,
    },
    /// A sliding log's larger limit needs more room in every log (8 bytes per unit), and the
    /// allocator refused it. The logs keep what they had; the limiter keeps its limit.
    LogMemory {
        /// The limit asked for.
        limit: u64,
    },
}

impl fmt::Display for QuotaChangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaChangeError::Invalid(error) => write!(f, "the new quota is refused: {error}"),
            QuotaChangeError::WindowChanged { algorithm, from, to } => write!(
                f,
                "a {algorithm} cannot change its window live ({from:?} to {to:?}): its state counts whole \
                 windows of {from:?}; build a new limiter for the new window"
            ),
            QuotaChangeError::WindowLengthened { from, to } => write!(
                f,
                "a sliding window log cannot lengthen its window live ({from:?} to {to:?}): it keeps only the \
                 units that can still count in {from:?}, and a longer window would count the ones it dropped; \
                 build a new limiter for the longer window (a shorter one, or any limit, is live)"
            ),
            QuotaChangeError::NeedsWideState { algorithm, limit, max } => write!(
                f,
                "a limit of {limit} needs the {algorithm}'s 128-bit state, and this limiter holds 64-bit \
                 states (at most {max} for its window); build a new limiter, or build it with_wide_state()"
            ),
            QuotaChangeError::LayoutChanged { algorithm } => write!(
                f,
                "the {algorithm} offered keeps its state in another width (64 or 128 bits) than the \
                 running one; offer the same layout (set_quota chooses it)"
            ),
            QuotaChangeError::TimeUnitChanged { from, to } => write!(
                f,
                "a bucket cannot change from {from} to {to} live: a rate whole nanoseconds cannot \
                 hold within 1% keeps its time in units of 1/count ns, and one of the two needs that unit \
                 where the other needs another; build a new limiter for {to}"
            ),
            QuotaChangeError::LogMemory { limit } => write!(
                f,
                "a sliding log limit of {limit} needs 8 bytes per unit in every log, and the allocator \
                 refused them; the limiter keeps its limit"
            ),
        }
    }
}

impl std::error::Error for QuotaChangeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QuotaChangeError::Invalid(error) => Some(error),
            _ => None,
        }
    }
}

impl From<QuotaError> for QuotaChangeError {
    fn from(error: QuotaError) -> Self {
        QuotaChangeError::Invalid(error)
    }
}
