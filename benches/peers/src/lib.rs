//! tollgate beside its peers, floors and stripped references, for the comparison benchmarks
//! (`benches/`), the memory probe (`src/bin/keyed_memory.rs`), the thread-scaling probe
//! (`src/bin/scaling.rs`) and the instruction counts (`src/bin/instructions.rs`, under callgrind).
//!
//! This package is `publish = false` and lives in its own workspace member so that the peers
//! (governor, with its DashMap, futures and parking_lot; ratelimit) never enter tollgate's
//! dependency tree.
//!
//! Every scenario is written once, against one of two small traits: [`Direct`] (a single-key
//! limiter, built for each path by a [`DirectContender`]) and [`Keyed`] (a limiter over `u64`
//! keys). The timed loops are in [`timing`], reached through [`DirectLoops`] and [`KeyedLoops`]
//! and compiled once, here, for every limiter type (`src/compiled_loops.rs`); the Zipf-like key
//! order is in [`zipf`].
//!
//! Run everything and write `docs/benchmarks.md` with its pictures: `benches/run`.

mod changeable;
mod compiled_loops;
mod direct;
mod float_bucket;
mod floor;
mod keyed;
mod keyed_floor;
mod minimal_gcra;
mod minimal_windows;
pub mod timing;
pub mod zipf;

pub use changeable::{
    tollgate_fixed_window_live, tollgate_sliding_window_live, tollgate_token_bucket_live, DirectSet,
    KeyedSet, TollgateKeyedLive, TollgateKeyedSet, TollgateLive, TollgateLogLive, TollgateSet,
};
pub use direct::{
    tollgate_fixed_window, tollgate_fixed_window_wide, tollgate_leaky_bucket, tollgate_sliding_window,
    tollgate_sliding_window_wide, tollgate_token_bucket, Direct, DirectContender, GovernorDirect,
    GovernorDirectLimiter, MutexBucketDirect, RatelimitDirect, TollgateDirect, TollgateElapsed, TollgateLog,
    ALLOWED_RUN,
};
pub use float_bucket::{FloatTokenBucket, MutexTokenBucket};
pub use floor::{ClockRead, ClockReadLoadCas, GovernorClockRead, InstantRead, Nothing};
#[cfg(feature = "metrics")]
pub use keyed::TollgateKeyedMetered;
pub use keyed::{
    governor, governor_quota, governor_unsized, tollgate, tollgate_bucket, Governor, GovernorKeyed, Keyed,
    KeyedContender, Tollgate, TollgateKeyed, TollgateKeyedWindow, BURST, LONG_LIVED_BURST, LONG_LIVED_PERIOD,
    PERIOD,
};
pub use keyed_floor::{
    ClockReadHashLoadCas16, ClockReadHashLoadTagCas8, ClockReadHashPlaceLoadCas16,
    ClockReadHashPlaceLoadTagCas8, KeyedFloor, KeyedFloorContender,
};
pub use minimal_gcra::{MinimalBucket, MinimalGcra};
pub use minimal_windows::{MinimalFixed, MinimalFixedWindow, MinimalSliding, MinimalSlidingWindow};
pub use timing::{DirectLoops, KeyedLoops};
