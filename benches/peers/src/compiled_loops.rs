//! Every limiter type the binaries time, with its timed loops compiled here, once.
//!
//! Each line below implements [`DirectLoops`] or [`KeyedLoops`] for one concrete type with
//! non-generic `#[inline(never)]` methods that call the generic loops of [`crate::timing`]. A
//! non-generic function that is not `#[inline]` is codegenned only in the crate that defines it
//! (without LTO), and the generic loop it calls is instantiated where it is called: here. So
//! every benchmark binary and probe calls the same machine code for a type, whatever else it
//! compiles; the loops' `check()` is inlined here as it would be into a binary's own copy.

use std::time::Duration;

use governor::clock::{QuantaClock, QuantaUpkeepClock};
use tollgate::{
    CoarseClock, DirectLimiter, FixedWindow, LeakyBucket, Live, LogLimiter, PreciseClock, SlidingLog,
    SlidingWindow, TokenBucket,
};

use crate::timing::{self, DirectLoops, KeyedLoops};
use crate::{
    ClockRead, ClockReadHashLoadCas16, ClockReadHashLoadTagCas8, ClockReadHashPlaceLoadCas16,
    ClockReadHashPlaceLoadTagCas8, ClockReadLoadCas, DirectSet, Governor, GovernorClockRead,
    GovernorDirectLimiter, InstantRead, KeyedFloor, KeyedSet, MinimalFixedWindow, MinimalGcra,
    MinimalSlidingWindow, MutexTokenBucket, Nothing, Tollgate, TollgateElapsed,
};

/// Compiles [`DirectLoops`] for each type listed.
macro_rules! direct_loops {
    ($($limiter:ty),+ $(,)?) => {$(
        impl DirectLoops for $limiter {
            #[inline(never)]
            fn decide_direct(&self, iters: u64) -> Duration {
                timing::decide_direct(self, iters)
            }
        }
    )+};
}

/// Compiles [`KeyedLoops`] for each type listed.
macro_rules! keyed_loops {
    ($($limiter:ty),+ $(,)?) => {$(
        impl KeyedLoops for $limiter {
            #[inline(never)]
            fn decide_in_turn(&self, iters: u64, first: u64, count: u64) -> Duration {
                timing::decide_in_turn(self, iters, first, count)
            }

            #[inline(never)]
            fn decide_in_sequence(&self, iters: u64, sequence: &[u64], position: &mut usize) -> Duration {
                timing::decide_in_sequence(self, iters, sequence, position)
            }

            #[inline(never)]
            fn decide_each_once(&self, keys: u64) -> Duration {
                timing::decide_each_once(self, keys)
            }
        }
    )+};
}

/// The tollgate limiters, the floors and the references, on one tollgate clock.
macro_rules! on_tollgate_clock {
    ($($clock:ty),+) => {$(
        direct_loops!(
            DirectLimiter<TokenBucket, $clock>,
            DirectLimiter<LeakyBucket, $clock>,
            DirectLimiter<FixedWindow, $clock>,
            DirectLimiter<SlidingWindow, $clock>,
            LogLimiter<$clock>,
            ratelimit::Ratelimiter<TollgateElapsed<$clock>>,
            ClockRead<$clock>,
            ClockReadLoadCas<$clock>,
            ClockReadHashLoadCas16<$clock>,
            ClockReadHashLoadTagCas8<$clock>,
            ClockReadHashPlaceLoadCas16<$clock>,
            ClockReadHashPlaceLoadTagCas8<$clock>,
            MinimalGcra<$clock>,
            MinimalFixedWindow<$clock>,
            MinimalSlidingWindow<$clock>,
            DirectLimiter<Live<TokenBucket>, $clock>,
            DirectLimiter<Live<FixedWindow>, $clock>,
            DirectLimiter<Live<SlidingWindow>, $clock>,
            LogLimiter<$clock, Live<SlidingLog>>,
        );
        keyed_loops!(
            Tollgate<$clock>,
            tollgate::KeyedLimiter<u64, Live<TokenBucket>, $clock>,
            KeyedSet<$clock>,
            tollgate::KeyedLimiter<u64, SlidingWindow, $clock>,
            tollgate::KeyedLimiter<u64, FixedWindow, $clock>,
            KeyedFloor<$clock>,
        );
    )+};
}

/// governor's limiters and clock read, on one governor clock.
macro_rules! on_governor_clock {
    ($($clock:ty),+) => {$(
        direct_loops!(GovernorDirectLimiter<$clock>, GovernorClockRead<$clock>);
        keyed_loops!(Governor<$clock>);
    )+};
}

on_tollgate_clock!(PreciseClock, CoarseClock);
on_governor_clock!(QuantaClock, QuantaUpkeepClock);
direct_loops!(
    DirectSet,
    ratelimit::Ratelimiter<ratelimit::StdClock>,
    MutexTokenBucket,
    InstantRead,
    Nothing
);
