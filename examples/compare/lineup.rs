//! The five algorithms side by side, each a limiter of its own on one shared manual clock.

use std::error::Error;

use tollgate::algorithm::Algorithm;
use tollgate::{
    Decision, DirectLimiter, FixedWindow, LeakyBucket, LogLimiter, ManualClock, Quota, SlidingLog,
    SlidingWindow, TokenBucket,
};

/// The part of a [`Decision`] the comparison reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    /// Whether the request passes.
    pub(crate) allowed: bool,
    /// Units that would still pass now.
    pub(crate) remaining: u64,
    /// How long an admitted request waits for its slot (the shaper only).
    pub(crate) delay_nanos: u64,
}

impl From<Decision> for Answer {
    fn from(decision: Decision) -> Answer {
        Answer {
            allowed: decision.is_allowed(),
            remaining: decision.remaining(),
            delay_nanos: u64::try_from(decision.delay().as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

/// What the comparison needs of a limiter: decide now (counting an admission), or look without
/// counting. `DirectLimiter` and the sliding window log both answer it.
pub(crate) trait Limiter {
    /// Decides one request of weight 1 at the clock's time, and counts it if admitted.
    fn check(&self) -> Answer;
    /// What `check` would answer, without counting anything.
    fn peek(&self) -> Answer;
}

impl<A: Algorithm> Limiter for DirectLimiter<A, ManualClock> {
    fn check(&self) -> Answer {
        DirectLimiter::check(self).into()
    }

    fn peek(&self) -> Answer {
        DirectLimiter::peek(self).into()
    }
}

impl Limiter for LogLimiter<ManualClock> {
    fn check(&self) -> Answer {
        LogLimiter::check(self).into()
    }

    fn peek(&self) -> Answer {
        LogLimiter::peek(self).into()
    }
}

/// The five algorithms, in the order every table and picture lists them.
pub(crate) const NAMES: [&str; 5] = [
    "token bucket",
    "leaky bucket (shaper)",
    "fixed window",
    "sliding window counter",
    "sliding window log",
];

/// Index of the token bucket in [`NAMES`].
pub(crate) const TOKEN: usize = 0;
/// Index of the shaper in [`NAMES`]: the only one whose admitted requests may wait.
pub(crate) const SHAPER: usize = 1;
/// Index of the fixed window in [`NAMES`].
pub(crate) const FIXED: usize = 2;
/// Index of the sliding window counter in [`NAMES`].
pub(crate) const COUNTER: usize = 3;
/// Index of the exact log in [`NAMES`]: the ground truth.
pub(crate) const LOG: usize = 4;

/// One limiter per algorithm, all reading one manual clock.
pub(crate) struct Lineup {
    limiters: [Box<dyn Limiter>; 5],
}

impl Lineup {
    /// The buckets get `bucket` (rate and burst), the three windows `window` (limit per window).
    pub(crate) fn new(bucket: Quota, window: Quota, clock: &ManualClock) -> Result<Lineup, Box<dyn Error>> {
        Ok(Lineup {
            limiters: [
                Box::new(DirectLimiter::with_clock(
                    TokenBucket::new(bucket)?,
                    clock.clone(),
                )),
                Box::new(DirectLimiter::with_clock(
                    LeakyBucket::new(bucket)?,
                    clock.clone(),
                )),
                Box::new(DirectLimiter::with_clock(
                    FixedWindow::new(window)?,
                    clock.clone(),
                )),
                Box::new(DirectLimiter::with_clock(
                    SlidingWindow::new(window)?,
                    clock.clone(),
                )),
                Box::new(LogLimiter::with_clock(SlidingLog::new(window)?, clock.clone())),
            ],
        })
    }

    /// Every algorithm decides one request at the clock's time.
    pub(crate) fn check(&self) -> [Answer; 5] {
        std::array::from_fn(|i| self.limiters[i].check())
    }

    /// Every algorithm's answer at the clock's time, without counting.
    pub(crate) fn peek(&self) -> [Answer; 5] {
        std::array::from_fn(|i| self.limiters[i].peek())
    }
}
