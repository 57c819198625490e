//! Leases: a share of the fleet-wide quota taken from Redis in one round trip and spent
//! locally, without a round trip per decision, with a stated bound.
//!
//! [`LeasedLimiter`] (keyed) and [`DirectLeasedLimiter`] (one quota) decide on units taken from
//! the same Redis keys a [`RedisLimiter`](super::RedisLimiter) uses, for the token bucket and
//! the fixed window, built with every option of [`RedisLimiter::builder`](super::RedisLimiter::builder)
//! or [`cluster_builder`](super::RedisLimiter::cluster_builder) and then
//! [`leased`](super::RedisLimiterBuilder::leased):
//!
//! - a lease is taken **from** the quota in Redis (`gcra_lease.lua`: a range of emission slots;
//!   `fixed_window_lease.lua`: units counted in the current window), so the fleet never admits
//!   more than the quota: every unit spent holds a slot or a count of its own, spent only while
//!   it is valid on the lease's timeline (`ledger`);
//! - a key seen once costs one round trip, as per decision (a lease of exactly the request's
//!   weight); a key spent often gets leases sized on its spending (twice the units spent per
//!   [`lease_interval`](LeasedLimiterBuilder::lease_interval), at most
//!   [`max_lease`](LeasedLimiterBuilder::max_lease), and at most half of what the quota has
//!   left), refreshed on a task when half of the last one is spent, so a steady client never
//!   waits for Redis;
//! - a request the lease does not hold is decided by Redis (one round trip, the per-decision
//!   answer), or refused locally when the key's last answer says Redis would refuse it;
//! - while Redis is away, a process spends what it holds, then the failure policy decides.
//!
//! What this costs, and the bound, each with its test: `docs/distributed.md`, "Leases".

mod builder;
mod clock;
mod counters;
mod direct;
#[cfg(feature = "tower")]
mod key_bytes;
#[cfg(feature = "tower")]
mod layer;
pub(crate) mod ledger;
mod limiter;
mod scripts;

pub use builder::{
    LeaseConfigError, LeasedLimiterBuilder, DEFAULT_LEASE_INTERVAL, DEFAULT_LEASE_KEYS,
    DEFAULT_MAX_LEASE_SHARE,
};
pub use counters::LeaseCounts;
pub use direct::DirectLeasedLimiter;
pub use limiter::LeasedLimiter;
