//! The sliding window log: exact, at the price of `O(limit)` memory per log and a short lock
//! per decision.
//!
//! - [`config`]: [`SlidingLog`], the validated limit and window;
//! - [`ring`]: the timestamps of the newest admitted units, allocated once;
//! - [`state`]: a log's whole state, its ring and the latest time a decision counted at;
//! - [`decide`]: the pure decision over a ring, unit-tested on its own;
//! - [`direct`] and [`keyed`] (with [`shard`]): the limiters, which run the decision under a
//!   lock from `crate::sync` (loom's under `--cfg tollgate_loom`);
//! - [`faults`]: steps of the locking that loom's broken twins leave out.
//!
//! Why a lock and not a compare-and-swap: `docs/design.md`, "Sliding window log".

mod config;
mod decide;
mod direct;
mod faults;
mod keyed;
mod ring;
mod shard;
mod state;

pub use config::SlidingLog;
pub use direct::LogLimiter;
#[cfg(tollgate_loom)]
pub use faults::LogFaults;
pub use keyed::KeyedLogLimiter;
