//! The harness shared by tollgate's loom models (the models themselves are in `tests/`; how to
//! run them, and why with which `LOOM_MAX_PREEMPTIONS`, is in `README.md`).
//!
//! A model is a `Model`: one algorithm, a few requests made before any thread starts, and the
//! requests each of two or three threads makes, every one at a fixed timestamp (loom has no
//! clock). `Model::check` runs it under `loom::model` against a `Subject`: the limiter that
//! ships (`Shipped`, a `tollgate::DirectLimiter` whose atomics are loom's under
//! `--cfg tollgate_loom`) or a deliberately broken twin (`RacyLimiter`,
//! `WritingDenialLimiter`). In every execution loom explores it asserts that what the threads
//! observed (each decision, and the final state word) is what *some* sequential order of the
//! same requests gives, replayed with the pure `Algorithm::decide` on a plain `u64`.
//! `Model::assert_rejected` asserts that loom finds an execution breaking that invariant.
//!
//! Everything here is compiled only under `--cfg tollgate_loom` (so these docs name items
//! without linking them); without the cfg the crate is empty.

#[cfg(tollgate_loom)]
mod model;
#[cfg(tollgate_loom)]
mod replay;
#[cfg(tollgate_loom)]
mod subject;
#[cfg(tollgate_loom)]
mod twins;

#[cfg(tollgate_loom)]
pub use model::{Model, VIOLATION};
#[cfg(tollgate_loom)]
pub use replay::{ms, Outcome, Request};
#[cfg(tollgate_loom)]
pub use subject::{Shipped, Subject};
#[cfg(tollgate_loom)]
pub use twins::{RacyLimiter, WritingDenialLimiter};
