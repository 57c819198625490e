//! The sliding window log: exact, at the price of `O(limit)` memory per log and a short lock
//! per decision.
//!
//! - [`config`]: [`SlidingLog`], the validated limit and window;
//! - [`ring`]: the timestamps of the newest admitted units, allocated once;
//! - [`state`]: a log's whole state, its ring and the latest time a decision counted at;
//! - [`decide`]: the pure decision over a ring, unit-tested on its own;
//! - [`direct`] and [`keyed`]: the limiters, which run the decision under a lock from
//!   `crate::sync` (loom's under `--cfg tollgate_loom`); the keyed one in the locked table
//!   `crate::keyed::locked`, which [`per_key`] fits the log into; both take the locked
//!   table's loom fault switches (`LogFaults`, `src/keyed/locked/faults.rs`);
//! - [`live`]: a limit and window changed while the limiters run (`set_quota`), and [`undo`]:
//!   an admission given back exactly (a policy set's refusal).
//!
//! Why a lock and not a compare-and-swap: `docs/design.md`, "Sliding window log".

mod config;
mod decide;
mod direct;
mod keyed;
mod live;
mod per_key;
mod ring;
mod state;
mod undo;

pub use config::SlidingLog;
pub use direct::LogLimiter;
pub use keyed::KeyedLogLimiter;
#[cfg(all(test, not(tollgate_loom)))]
pub(crate) use state::LogState;
