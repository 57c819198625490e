//! Where a sliding log's limiter reads its limit and window: a [`SlidingLog`] fixed for its
//! life, or a [`Live<SlidingLog>`](super::Live) its `set_quota` changes.

use std::ops::Deref;

use super::{Current, Live};
use crate::SlidingLog;

mod sealed {
    /// Only tollgate's two log configurations.
    pub trait Sealed {}
}

/// The configuration a [`LogLimiter`](crate::LogLimiter) or
/// [`KeyedLogLimiter`](crate::KeyedLogLimiter) reads: a [`SlidingLog`] (the default, fixed for
/// the limiter's life) or a [`Live<SlidingLog>`](super::Live), whose limit and window the
/// limiter's `set_quota` changes ([`LogLimiter::set_quota`](crate::LogLimiter::set_quota)).
/// Sealed: the limiter must grow its logs before a larger limit is read.
pub trait LogQuota: sealed::Sealed + Send + Sync {
    /// What a decision reads: the configuration itself, or one snapshot of it.
    #[doc(hidden)]
    type Current<'a>: Deref<Target = SlidingLog>
    where
        Self: 'a;

    /// The configuration now.
    #[doc(hidden)]
    fn current(&self) -> Self::Current<'_>;

    /// How many times it has been changed ([`Live::changes`]); 0 for a fixed one.
    #[doc(hidden)]
    fn changes(&self) -> u64 {
        0
    }
}

impl sealed::Sealed for SlidingLog {}

impl LogQuota for SlidingLog {
    type Current<'a> = &'a SlidingLog;

    #[inline(always)]
    fn current(&self) -> &SlidingLog {
        self
    }
}

impl sealed::Sealed for Live<SlidingLog> {}

impl LogQuota for Live<SlidingLog> {
    type Current<'a> = Current<SlidingLog>;

    #[inline(always)]
    fn current(&self) -> Current<SlidingLog> {
        Live::current(self)
    }

    fn changes(&self) -> u64 {
        Live::changes(self)
    }
}
