//! `KeyedLimiter`, the lock-free table of keys: its promises to one caller at a time, its
//! decisions against a map of pure states, and threads racing on its slots with admissions
//! counted exactly.
//!
//! One test binary (`cargo test -p tollgate --test keyed`).

#[path = "../keyed_common/mod.rs"]
mod keyed_common;

mod behaviour;
mod capacity;
mod live_changes;
mod properties_keyed_limiter;
mod stress;
