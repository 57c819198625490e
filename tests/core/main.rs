//! The algorithms and their direct limiters (`DirectLimiter`, with a few keyed and log cases
//! where a behaviour spans them): every decision against an exact reference model, the ends of
//! time and of the arithmetic, every typed error, refunds and resets, rounding, shaping with a
//! maximum wait, threads counting admissions exactly, decisions that allocate nothing, and
//! (feature `metrics`) named limiters' series.
//!
//! One test binary (`cargo test -p tollgate --test core`); each module is one concept.

#[path = "../keyed_common/mod.rs"]
mod keyed_common;
#[cfg(feature = "metrics")]
#[path = "../metrics_common/mod.rs"]
mod metrics_common;
#[path = "../reference/mod.rs"]
mod reference;

mod allocations;
mod bucket_properties;
mod clock_steps;
mod edges;
mod errors;
mod large_limits;
mod live_changes;
mod live_stress;
#[cfg(feature = "metrics")]
mod metrics;
mod policy_sets;
mod properties_fixed_window;
mod properties_leaky_bucket;
mod properties_sliding_window;
mod properties_token_bucket;
mod properties_wide_shaper;
mod properties_wide_token_bucket;
mod properties_wide_windows;
mod refund;
mod reset;
mod rounding;
mod shaper_within;
mod stress;
mod undo;
mod wide_shaper;
mod wide_stress;
