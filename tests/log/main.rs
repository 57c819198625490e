//! The sliding window log (`LogLimiter`, `KeyedLogLimiter`): its promises to one caller at a
//! time, its decisions against a plain list of admitted requests (long rings included), and
//! threads counting admissions exactly.
//!
//! One test binary (`cargo test -p tollgate --test log`).

#[path = "../reference/mod.rs"]
mod reference;

mod behaviour;
mod live_changes;
mod long_rings;
mod properties_sliding_log;
mod stress;
