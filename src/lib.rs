//! Lock-free rate limiting: every admission is one clock read and one compare-and-swap, and
//! every refusal one clock read and one load (it writes nothing, but a sliding window's first in
//! each new window), on one `AtomicU64` for a
//! direct limiter and on the key's 16-byte slot for a keyed one (the exact sliding window log,
//! which keeps a timestamp per unit, takes a short lock instead, and so does a keyed window whose
//! limit needs a 128-bit state, which a direct limiter swaps with a 16-byte compare-and-swap).
//!
//! ```
//! use tollgate::{DirectLimiter, Quota, TokenBucket};
//!
//! // 10 requests per second, bursts of up to 20.
//! let limiter = DirectLimiter::new(TokenBucket::new("10/s burst 20".parse()?)?);
//! let decision = limiter.check();
//! if decision.is_allowed() {
//!     // serve the request
//! } else {
//!     // answer 429, with `Retry-After: decision.retry_after()`
//! }
//! assert!(decision.is_allowed());
//! assert_eq!(decision.remaining(), 19);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Algorithms
//! Each is a pure function over a packed 64-bit state ([`algorithm`]), run by a limiter inside
//! one compare-and-swap loop; a window whose limit does not fit one word beside its window index
//! (a `50000/s` sliding window) takes a 128-bit state, chosen from the quota at construction
//! ([`Algorithm::is_wide`](algorithm::Algorithm::is_wide)): a 16-byte compare-and-swap in a
//! direct limiter, a short lock per key in a keyed one. Every limit up to `u32::MAX` works for
//! both windows, at every window length:
//!
//! | algorithm | what it guarantees |
//! |---|---|
//! | [`TokenBucket`] (GCRA) | bursts up to `burst`, then `count` per `period` |
//! | [`LeakyBucket`] | a shaper: requests leave at exactly `count` per `period`, early ones wait ([`Decision::delay`]) |
//! | [`FixedWindow`] | at most `limit` per aligned window (up to `2 * limit` across a boundary) |
//! | [`SlidingWindow`] | the current window's count plus the previous one's, weighted by overlap |
//! | [`SlidingLog`] ([`LogLimiter`], [`KeyedLogLimiter`]) | exact: at most `limit` in any window `(now - w, now]`; one timestamp per unit, a short lock instead of a CAS |
//!
//! Every one answers the same [`Decision`]: allowed or not, remaining, retry-after, reset-after
//! (and the shaper's delay). Requests may weigh more than one unit ([`DirectLimiter::check_n`]);
//! only admitted requests are counted; [`DirectLimiter::peek`] answers without counting.
//!
//! # Quotas and errors
//! A [`Quota`] is built in code or parsed from a string (`"100/min"`, `"10/s burst 20"`). Bad
//! input is a typed error at construction ([`QuotaError`], [`ParseQuotaError`]); a request that
//! could never pass is a [`CostTooLarge`]. Nothing on the decision path panics.
//!
//! # Clocks
//! [`PreciseClock`] reads quanta on every decision; [`CoarseClock`] reads a timestamp refreshed
//! every millisecond by one shared thread (cheaper; its lag of up to 1 ms, which varies between
//! readings, lets a quota over a real span stretch by up to that lag); [`SystemClock`] reads the
//! system time, for processes that must share one timeline (the other two drift from it by parts
//! per million); [`ManualClock`] moves only when told. A clock may step backwards: no limiter
//! panics or refills because of it, and none admits more: what a limiter admits, replayed on a
//! clock that never goes back (the running maximum of the times its decisions of weight 1 or
//! more were made at, refusals included), is admitted there too. The buckets decide at the
//! earlier time, so a step back can only refuse more (for up to about as long as the step); the
//! windows decide in the window of the latest such decision (a sliding window's refusal in a
//! later window stores the window moved there); the sliding log decides at the latest such time,
//! as if the clock had stood still. Weightless requests and peeks count nothing and move
//! nothing. A keyed limiter's forgotten keys are the exception: `docs/design.md`, "Time that
//! goes backwards".
//!
//! # Features
//! None is on by default; the limiters above need none.
//! - `tower`: `tollgate::middleware`, a tower layer (axum, hyper, tonic) that answers a refused
//!   request with `429`, `Retry-After` and the `RateLimit` fields.
//! - `redis`: `tollgate::distributed`, limiters that share one quota through Redis (one Lua
//!   script per decision, the server's clock by default). On Rust 1.87, let Cargo pick dependency versions
//!   that build on it (`resolver = "3"`, the default of edition 2024, or
//!   `CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback`): the newest `redis` releases need 1.88.
//! - `metrics`: `tollgate::metrics`, what named limiters decide (by outcome), the keys their
//!   tables hold, and their Redis round trips, through the `metrics` facade (any exporter),
//!   counted per thread so that counting never contends; without it nothing is compiled in.
//!
//! The design (bit layouts, the CAS loop, orderings, clocks) is in `docs/design.md`.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod algorithm;
// The loom models check the Redis backend's breaker without building the backend.
#[cfg(all(tollgate_loom, not(feature = "redis")))]
#[path = "distributed/breaker.rs"]
mod breaker;
// And the leases' local side (`loom-tests/tests/lease.rs`).
mod cell;
pub mod clock;
mod decision;
mod direct;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod distributed;
mod error;
mod keyed;
pub mod live;
// The per-thread counters of the metrics and of leased limiters, modelled by loom on their own.
#[cfg(any(feature = "metrics", feature = "redis", tollgate_loom))]
mod lanes;
#[cfg(all(tollgate_loom, not(feature = "redis")))]
#[path = "distributed/lease/ledger/mod.rs"]
mod ledger;
mod meter;
#[cfg(all(feature = "metrics", not(tollgate_loom)))]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod middleware;
#[cfg(feature = "tower")]
mod policy;
pub mod policy_set;
mod quota;
mod sliding_log;
mod sync;
mod time;

pub use algorithm::{
    FixedWindow, FixedWindowState, GcraState, LeakyBucket, SlidingWindow, SlidingWindowState, TokenBucket,
};
#[cfg(all(tollgate_loom, not(feature = "redis")))]
#[doc(hidden)]
pub use breaker::Breaker;
pub use clock::{Clock, CoarseClock, ManualClock, PreciseClock, SystemClock};
pub use decision::{Decision, Outcome};
pub use direct::DirectLimiter;
#[cfg(all(tollgate_loom, feature = "redis"))]
#[doc(hidden)]
pub use distributed::Breaker;
#[cfg(all(tollgate_loom, feature = "redis"))]
#[doc(hidden)]
pub use distributed::{Ask, Grant, Held, LeaseFaults, LeaseRule, LeaseTable, Sizing, Spend};
pub use error::{CapacityError, CostTooLarge, QuotaError};
#[cfg(tollgate_loom)]
pub use keyed::locked::LogFaults;
#[cfg(tollgate_loom)]
pub use keyed::Faults;
pub use keyed::{KeyedLimiter, WhenFull};
#[cfg(tollgate_loom)]
#[doc(hidden)]
pub use lanes::{LaneClaims, Lanes, MAX_LANES};
#[cfg(all(tollgate_loom, not(feature = "redis")))]
#[doc(hidden)]
pub use ledger::{Ask, Grant, Held, LeaseFaults, LeaseRule, LeaseTable, Sizing, Spend};
pub use live::{Live, QuotaChangeError};
pub use policy_set::{PolicySet, SetDecision};
pub use quota::{ParseQuotaError, Quota};
pub use sliding_log::{KeyedLogLimiter, LogLimiter, SlidingLog};
pub use time::Timestamp;

/// The README's examples, run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
