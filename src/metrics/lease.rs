//! The place of the Redis leases' series, which the leases add beside the Redis limiter's own
//! (`redis.rs`): a lease's round trips, the size of each lease taken, and the units given back
//! unused. Counted as the Redis series are (on the meter's `RedisCounts`, shared atomics: a
//! lease is a round trip) and emitted beside them (`redis::emit`), under the names
//! `tollgate_redis_lease_calls_total`, `tollgate_redis_lease_units` (a histogram of lease sizes)
//! and `tollgate_redis_lease_returned_units_total`, each with the `limiter` label. Nothing
//! here yet.
