//! `KeyedLimiter`, the lock-free table of keys: its promises to one caller at a time, its
//! decisions against a map of pure states, and threads racing on its slots with admissions
//! counted exactly; (feature `metrics`) named tables' series.
//!
//! One test binary (`cargo test -p tollgate --test keyed`).

#[path = "../keyed_common/mod.rs"]
mod keyed_common;
#[cfg(feature = "metrics")]
#[path = "../metrics_common/mod.rs"]
mod metrics_common;

mod behaviour;
mod capacity;
mod live_changes;
#[cfg(feature = "metrics")]
mod metrics;
mod properties_keyed_limiter;
mod stress;
mod wide_token_bucket;
