//! Metrics (feature `metrics`): what named limiters decided, through the
//! [`metrics`](https://docs.rs/metrics/0.24) facade, so that any of its exporters (Prometheus,
//! StatsD, OpenTelemetry...) serves them.
//!
//! ```
//! use tollgate::metrics::LimiterName;
//! use tollgate::{KeyedLimiter, TokenBucket};
//!
//! let limiter = KeyedLimiter::<str, _>::new(TokenBucket::new("10/s".parse()?)?, 10_000)?
//!     .named(LimiterName::new("api")?);
//! assert!(limiter.check("alice").is_allowed());
//! // Before each scrape (or on a timer, for an exporter that pushes):
//! tollgate::metrics::publish();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Which limiters
//! A limiter records only once it is named: [`DirectLimiter::named`](crate::DirectLimiter::named),
//! [`KeyedLimiter::named`](crate::KeyedLimiter::named),
//! [`LogLimiter::named`](crate::LogLimiter::named),
//! [`KeyedLogLimiter::named`](crate::KeyedLogLimiter::named), and with feature `redis`
//! `RedisLimiter::named`, `LeasedLimiter::named` and `DirectLeasedLimiter::named`. An unnamed limiter records nothing (its decisions test one
//! pointer), and without the feature nothing is compiled in. The tower layer (feature `tower`)
//! counts its own outcomes under the name of the limiter it decides with
//! (`RateLimiter::meter`), and nothing in front of an unnamed one. Limiters that share a name
//! are summed; a limiter dropped leaves its counts to its name, so that one built again under
//! the same name (a route whose quota changed) continues its series.
//!
//! # Series
//! Every series carries the label `limiter`, the name.
//!
//! | series | kind | labels | what |
//! |---|---|---|---|
//! | [`tollgate_decisions_total`](DECISIONS) | counter | `outcome` | decisions (`check`, `check_n`, `check_n_within`, `check_slot`; not peeks, refunds or resets), by outcome: `allowed`, `refused` (over quota), `table_full` (a keyed table had no room for a new key: the full-table refusals), `untracked` (admitted uncounted: a full table under `WhenFull::Admit`, Redis away under fail open); and the tower layer's `unavailable` (the limiter could not decide: a `LimiterError`, whatever `OnLimiterError` then did) and `no_key` (no key, and `MissingKey` answered the request itself) |
//! | [`tollgate_keys_held`](KEYS_HELD) | gauge | | keyed tables: keys held, idle ones not yet reclaimed included (`len()`) |
//! | [`tollgate_keys_capacity`](KEYS_CAPACITY) | gauge | | keyed tables: the keys the table was built for (`capacity()`) |
//! | [`tollgate_keys_reclaimed_total`](KEYS_RECLAIMED) | counter | | keyed tables: idle keys forgotten to make room for new ones |
//! | [`tollgate_redis_calls_total`](REDIS_CALLS) | counter | | Redis: round trips of decisions and peeks (not refunds or resets) |
//! | [`tollgate_redis_call_seconds`](REDIS_CALL_SECONDS) | histogram | | Redis: each of those round trips' time, up to its deadline |
//! | [`tollgate_redis_errors_total`](REDIS_ERRORS) | counter | `cause` | Redis: round trips that failed, by [`RedisFailureCause`](crate::distributed::RedisFailureCause) (`timeout`, `connection_refused`, `cluster_down`, `out_of_memory`...: the variant in snake case) |
//! | [`tollgate_redis_policy_decisions_total`](REDIS_POLICY_DECISIONS) | counter | `policy` | Redis: decisions the failure policy made instead (`fail_open`, `fail_closed`, `fallback`), Redis failing or recently down |
//! | [`tollgate_redis_lease_calls_total`](REDIS_LEASE_CALLS) | counter | | leased Redis limiters: round trips of the lease scripts, a request's or a refresh's (each also one of `tollgate_redis_calls_total`) |
//! | [`tollgate_redis_lease_units`](REDIS_LEASE_UNITS) | histogram | | leased Redis limiters: each lease's units, beyond the request that asked for it (a grant of the request's weight alone is no lease) |
//! | [`tollgate_redis_lease_returned_units_total`](REDIS_LEASE_RETURNED_UNITS) | counter | | leased Redis limiters: units given back to Redis unused (`release`) |
//!
//! A leased limiter's decisions are those it answers, from its leases or from Redis; its
//! `tollgate_redis_calls_total` are its lease round trips and its peeks that Redis answered.
//! `allowed` and `refused` are published from the first [`publish`], the other outcomes, causes
//! and policies once they have happened.
//!
//! # Exact and sampled
//! The counters are exact: every decision is counted once, and [`publish`] hands the recorder
//! their sums as they are at that call ([`Counter::absolute`](metrics::Counter::absolute)).
//! The two gauges are sampled by [`publish`] too: nothing reaches the recorder between two
//! calls. `tollgate_keys_held` is the keys the table's slow path inserted less the idle keys it
//! reclaimed, counted as they happen: `len()`, exact when no insert is in flight. The latency
//! histogram and the lease-size histogram are the series recorded as they happen, one sample per
//! round trip or lease, through the recorder installed at that moment (a lease refreshed on a
//! task: that task's thread's). So call [`publish`] before each scrape (the gateway's
//! `/metrics` does), or from a timer for an exporter that pushes.
//!
//! # Cost
//! A decision's count is a plain load and store on the counting thread's own cache line: each
//! thread takes a lane (a small number, its own line in every meter) at its first count and
//! gives it back when it ends, and [`publish`] sums the lanes. So no two cores write one line,
//! and no decision pays a locked instruction (an uncontended `lock xadd` is several ns, a third
//! of a hot-key decision, and contended it is the very bottleneck tollgate avoids). The slow
//! paths (a new key, a reclaim) note their events in the thread's local storage, counted when
//! the path ends. The Redis series use shared atomics and a clock read per round trip, nothing
//! next to the round trip; a leased limiter's decision spent from its lease counts on the
//! thread's lane, as a local limiter's. Figures, with the commands that measure them: `docs/metrics.md`.
//!
//! A thread's first count on a named limiter claims its lane, which registers the thread's
//! exit hook (one allocation, once per thread); a thread past the lanes (four per CPU, at
//! least 16, at most 256, in use at once) counts on the meter's shared line, exactly but with a
//! locked add.

#[cfg(feature = "redis")]
mod lease;
mod meter;
mod name;
mod named;
#[cfg(feature = "redis")]
mod redis;
mod registry;
mod thread;

pub use meter::Meter;
pub use name::{LimiterName, LimiterNameError, MAX_NAME_BYTES};

pub(crate) use meter::{Count, Kind, TableEventsGuard};

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};

/// Decisions, by `limiter` and `outcome`.
pub const DECISIONS: &str = "tollgate_decisions_total";
/// Keys a keyed table holds, by `limiter` (sampled at [`publish`]).
pub const KEYS_HELD: &str = "tollgate_keys_held";
/// Keys a keyed table was built for, by `limiter`.
pub const KEYS_CAPACITY: &str = "tollgate_keys_capacity";
/// Idle keys a keyed table forgot for new ones, by `limiter`.
pub const KEYS_RECLAIMED: &str = "tollgate_keys_reclaimed_total";
/// A Redis limiter's round trips, by `limiter`.
pub const REDIS_CALLS: &str = "tollgate_redis_calls_total";
/// A Redis limiter's round trips' time in seconds, by `limiter` (a histogram).
pub const REDIS_CALL_SECONDS: &str = "tollgate_redis_call_seconds";
/// A Redis limiter's failed round trips, by `limiter` and `cause`.
pub const REDIS_ERRORS: &str = "tollgate_redis_errors_total";
/// A Redis limiter's decisions made by its failure policy, by `limiter` and `policy`.
pub const REDIS_POLICY_DECISIONS: &str = "tollgate_redis_policy_decisions_total";
/// A leased Redis limiter's round trips of its lease scripts, by `limiter`.
pub const REDIS_LEASE_CALLS: &str = "tollgate_redis_lease_calls_total";
/// The units of each lease a leased Redis limiter took, by `limiter` (a histogram).
pub const REDIS_LEASE_UNITS: &str = "tollgate_redis_lease_units";
/// Units a leased Redis limiter gave back to Redis unused, by `limiter`.
pub const REDIS_LEASE_RETURNED_UNITS: &str = "tollgate_redis_lease_returned_units_total";

/// Bucket bounds, in seconds, for [`REDIS_CALL_SECONDS`], for an exporter that takes them
/// (`metrics-exporter-prometheus`'s `set_buckets_for_metric`): 100 µs to 250 ms, around a round
/// trip on a local network (a few hundred µs) and the default deadline (50 ms).
pub const REDIS_CALL_SECONDS_BUCKETS: [f64; 11] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

/// Hands every named limiter's counts, and its keyed table's gauges, to the recorder: the one
/// installed for this thread ([`metrics::with_local_recorder`]), else the global one. Call it
/// before each scrape, or on a timer; see the [module](self) for what is exact and what is
/// sampled.
///
/// It locks the list of named limiters and reads each one's lanes (a few hundred loads per
/// limiter): a call per scrape, not per request.
pub fn publish() {
    metrics::with_recorder(registry::publish);
}

/// Describes every series to the recorder (its help text and unit), as [`publish`] finds it:
/// once, after installing the recorder.
pub fn describe() {
    describe_counter!(
        DECISIONS,
        Unit::Count,
        "Decisions of a named limiter, by outcome: allowed, refused (over quota), table_full (no room for a new key), untracked (admitted uncounted); and the tower layer's unavailable (the limiter could not decide) and no_key."
    );
    describe_gauge!(
        KEYS_HELD,
        Unit::Count,
        "Keys a keyed table holds, idle ones not yet reclaimed included."
    );
    describe_gauge!(KEYS_CAPACITY, Unit::Count, "Keys a keyed table was built for.");
    describe_counter!(
        KEYS_RECLAIMED,
        Unit::Count,
        "Idle keys a keyed table forgot to make room for new ones."
    );
    describe_counter!(
        REDIS_CALLS,
        Unit::Count,
        "Round trips of a Redis limiter's decisions and peeks."
    );
    describe_histogram!(
        REDIS_CALL_SECONDS,
        Unit::Seconds,
        "Time of each round trip of a Redis limiter's decisions and peeks, up to its deadline."
    );
    describe_counter!(
        REDIS_ERRORS,
        Unit::Count,
        "Round trips of a Redis limiter that failed, by cause."
    );
    describe_counter!(
        REDIS_POLICY_DECISIONS,
        Unit::Count,
        "Decisions a Redis limiter's failure policy made instead of Redis, by policy."
    );
    describe_counter!(
        REDIS_LEASE_CALLS,
        Unit::Count,
        "Round trips of a leased Redis limiter's lease scripts, a request's or a refresh's."
    );
    describe_histogram!(
        REDIS_LEASE_UNITS,
        Unit::Count,
        "Units of each lease a leased Redis limiter took, beyond the request that asked for it."
    );
    describe_counter!(
        REDIS_LEASE_RETURNED_UNITS,
        Unit::Count,
        "Units a leased Redis limiter gave back to Redis unused."
    );
}

/// Notes table events on this thread (see `thread::note`), for the seam in `crate::meter`.
#[inline]
pub(crate) fn note_table_events(inserted: u64, reclaimed: u64) {
    thread::note(inserted, reclaimed);
}
