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
//! The keyed table's models (`tests/keyed_*.rs`) are `KeyedModel`s: a `KeyedLimiter<u64, _, _>`
//! for a few keys, requests for several keys made before, in and after the threads, and an
//! invariant against a specification of the table on plain values (`src/keyed_spec.rs`: a map
//! of at most `slots` keys, each its own limiter, idle keys forgettable), which every sequential
//! order of the requests replayed on the shipped table must also meet. Their broken twins are
//! the shipped table with one protocol step left out (`tollgate::Faults`). `Placement` fixes the
//! table's hash for loom and picks keys by home slot. The sliding log's models
//! (`tests/sliding_log*.rs`) are `LogModel`s, whose invariant compares each execution with every
//! sequential order replayed on the shipped log; their twins leave out a step of the log's
//! locking (`tollgate::LogFaults`). `README.md` says more.
//!
//! Everything here is compiled only under `--cfg tollgate_loom` (so these docs name items
//! without linking them); without the cfg the crate is empty.

#[cfg(tollgate_loom)]
mod keyed;
#[cfg(tollgate_loom)]
mod keyed_spec;
#[cfg(tollgate_loom)]
mod model;
#[cfg(tollgate_loom)]
mod placement;
#[cfg(tollgate_loom)]
mod rejection;
#[cfg(tollgate_loom)]
mod replay;
#[cfg(tollgate_loom)]
mod sliding_log;
#[cfg(tollgate_loom)]
mod subject;
#[cfg(tollgate_loom)]
mod twins;

#[cfg(tollgate_loom)]
pub use keyed::{
    Answer, KeyedModel, KeyedOutcome, KeyedRequest, DEFAULT_KEYED_PREEMPTION_BOUND, KEYED_VIOLATION,
};
#[cfg(tollgate_loom)]
pub use model::{Model, VIOLATION};
#[cfg(tollgate_loom)]
pub use placement::{deterministic_hashing, Placement};
#[cfg(tollgate_loom)]
pub use rejection::assert_violation;
#[cfg(tollgate_loom)]
pub use replay::{ms, Outcome, Request};
#[cfg(tollgate_loom)]
pub use sliding_log::{LogModel, LogOutcome, LogRequest, LOG_VIOLATION};
#[cfg(tollgate_loom)]
pub use subject::{Shipped, Subject};
#[cfg(tollgate_loom)]
pub use twins::{admit_by_cas, RacyLimiter, RacyWideLimiter, WritingDenialLimiter};
