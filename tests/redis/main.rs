//! The distributed limiter (feature `redis`) against real `redis-server` processes: one server
//! shared by the tests that leave it as they found it (each in a database of its own), and a
//! server of its own for every test that kills, restarts, reconfigures, pauses or reads the
//! statistics of its server (`redis_common`).
//!
//! One test binary (`cargo test -p tollgate --features redis --test redis`; the tower layer's
//! cases need `--features redis,tower`).

#[cfg(feature = "metrics")]
#[path = "../metrics_common/mod.rs"]
mod metrics_common;
#[cfg(feature = "tower")]
#[path = "../middleware_common/mod.rs"]
mod middleware_common;
#[path = "../redis_common/mod.rs"]
mod redis_common;
#[path = "../reference/mod.rs"]
mod reference;

mod causes;
mod clock_steps;
mod cluster;
mod cluster_failover;
mod cluster_reshard;
mod errors;
mod faults;
mod fine_rates;
mod fleet;
mod keys;
mod large_limits;
#[cfg(feature = "tower")]
mod layer;
mod lease_behaviour;
mod lease_cluster;
mod lease_fleet;
#[cfg(feature = "tower")]
mod lease_layer;
mod lease_lifetime;
mod lease_properties;
mod lease_windows;
mod live_quota;
mod log_wrapping;
mod memory;
#[cfg(feature = "metrics")]
mod metrics;
mod quota_changes;
mod refund;
#[cfg(feature = "tower")]
mod refund_fallback;
#[cfg(feature = "tower")]
mod refund_layer;
mod reset;
mod same_decisions;
mod scripts;
