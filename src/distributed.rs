//! A limiter shared by a fleet: every decision is one atomic Lua script on a Redis server
//! (feature `redis`).
//!
//! [`RedisLimiter`] runs any of the core's algorithms ([`RedisAlgorithm`]: token bucket,
//! leaky bucket shaper, fixed window, sliding window counter, sliding window log), configured
//! from the same [`Quota`](crate::Quota) as a local limiter, and answers the same
//! [`Decision`](crate::Decision), wrapped in a [`RedisDecision`] that says which path decided.
//!
//! - **One round trip** per decision: `EVALSHA` of the algorithm's script (`EVAL` of its source
//!   on a node that answers `NOSCRIPT`), atomic on the server, in integer microseconds (no floats
//!   in any decision; a bucket whose interval is not whole microseconds keeps a remainder in
//!   `1/d` µs beside them, so that every rate runs exactly).
//! - **Time**: the server's `TIME` by default, so instances with skewed clocks share one
//!   timeline; or the caller's clock ([`TimeSource`]).
//! - **Keys**: `{prefix}{{key}}:{algorithm}`: one hash tag per limit (the scripts touch only
//!   keys in `KEYS`, in one slot), and an expiry at the instant the state becomes the same as a
//!   fresh key's, so Redis holds only the keys that are being limited.
//! - **One Redis or a Redis Cluster**: [`RedisLimiter::builder`] connects to the one node of a
//!   URL (a redirect from a cluster node is [`RedisCheckError::ClusterRedirect`]);
//!   [`RedisLimiter::cluster_builder`] to a Redis Cluster from seed nodes, each decision on the
//!   master of its key's slot, redirects followed and topology changes retried within the
//!   deadline, with the same options.
//! - **Runtime**: tokio, with timers and IO enabled; [`RedisLimiterBuilder::connect`] refuses a
//!   runtime without timers ([`RedisConfigError::RuntimeWithoutTimers`]) or without IO
//!   ([`RedisConfigError::RuntimeWithoutIo`]).
//! - **Failures**: a per-decision deadline, a connection that reconnects by itself, and a
//!   [`FailurePolicy`] chosen at construction (fail open, fail closed, or a local fallback).
//!   After a failure the policy answers at once for a pause ([`DEFAULT_PROBE_INTERVAL`]), while
//!   one probe per pause checks whether Redis is back (on a cluster, per group of hash slots).
//!   Each [`Failure`] carries its [`RedisFailureCause`] (a wrong password, a refused
//!   connection, a missing database...); [`RedisLimiter::verify`] and
//!   [`RedisLimiterBuilder::connect_checked`] ask Redis once at start and answer a typed
//!   [`RedisConfigError`] that says what to fix.
//! - **Refunds**: [`RedisLimiter::refund_n`] gives a bucket's unused units back to the fleet (one
//!   more script call, best effort), as the local `refund_n`; [`RedisLimiter::refund_slot`]
//!   gives back a shaped request's slot, named by [`RedisLimiter::check_slot`], only while it
//!   still ends the key's queue. The tower layer starts that call in the background for a
//!   shaped request abandoned before its slot.
//! - **Leases**: [`LeasedLimiter`] and [`DirectLeasedLimiter`] take units from the same
//!   quota in one round trip and spend them locally, without a round trip per decision; the
//!   fleet still never admits more than the quota (`docs/distributed.md`, "Leases").
//! - **Resets**: [`RedisLimiter::reset`] forgets a key for the whole fleet (and in this
//!   instance's fallback), in one script call that answers whether the key was still being
//!   limited, by the algorithm's own decision rule; a reset that does not reach Redis is a
//!   [`RedisResetError`].
//!
//! The scripts, the key layout, the time modes and their precision, Redis Cluster (failover and
//! resharding, with their measured bounds), and what bounds the speed are in
//! `docs/distributed.md`.

mod algorithm;
mod breaker;
mod breakers;
mod builder;
mod cause;
mod classify;
mod connection;
mod error;
mod fine_rate;
// The tower layer's adapter (`RateLimiter` for `RedisLimiter`, and the queue of its refunds),
// on the limiter's public API.
#[cfg(feature = "tower")]
mod layer;
mod lease;
mod limiter;
mod live;
mod policy;
mod redacted;
mod refund;
mod reply;
mod reset;
mod script;
mod time;
mod verify;

pub use algorithm::{RedisAlgorithm, MAX_LOG_LIMIT, PACKED_LOG_LIMIT};
#[cfg(tollgate_loom)]
#[doc(hidden)]
pub use breaker::Breaker;
pub use builder::RedisLimiterBuilder;
pub use cause::RedisFailureCause;
pub use error::{RedisCheckError, RedisConfigError, RedisResetError};
#[cfg(tollgate_loom)]
#[doc(hidden)]
pub use lease::ledger::{Ask, Grant, Held, LeaseFaults, LeaseRule, LeaseTable, Sizing, Spend};
pub use lease::{
    DirectLeasedLimiter, LeaseConfigError, LeaseCounts, LeasedLimiter, LeasedLimiterBuilder,
    DEFAULT_LEASE_INTERVAL, DEFAULT_LEASE_KEYS, DEFAULT_MAX_LEASE_SHARE,
};
pub use limiter::{RedisLimiter, DEFAULT_DEADLINE, DEFAULT_PREFIX, DEFAULT_PROBE_INTERVAL};
pub use policy::{DecidedBy, Failure, FailurePolicy, LocalFallback, RedisDecision};
pub use redacted::redacted_url;
pub use time::TimeSource;
