//! The distributed limiter: one script call per decision over one multiplexed, self-healing
//! connection (to one Redis, or to a Redis Cluster), with a deadline and a failure policy.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::algorithm::{Program, RedisAlgorithm};
use super::breakers::Breakers;
use super::builder::Target;
use super::cause::RedisFailureCause;
use super::classify::classify;
use super::connection::Connection;
use super::error::{RedisCheckError, RedisResetError};
use super::live::Configured;
use super::policy::{Failure, FailurePolicy, RedisDecision};
use super::refund::Refund;
use super::reply;
use super::time::TimeSource;
use crate::sync::{AtomicU64, Snapshot};
use crate::{CostTooLarge, Decision, Timestamp};

/// 2^53: the integers a Lua number holds exactly. No TAT a script stored is at or past it.
const MAX_EXACT_MICROS: u64 = 1 << 53;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "tollgate:";
/// The default per-decision deadline.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(50);
/// How long, by default, decisions skip Redis after it failed (one probe goes through per
/// interval).
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// A rate limiter shared by every process that uses the same Redis, key prefix and algorithm.
///
/// Each decision is **one round trip**: an `EVALSHA` of the algorithm's Lua script (loaded
/// again by itself after a `NOSCRIPT`, as after a server restart), which reads and writes the
/// key's state atomically in integer arithmetic, and answers the same [`Decision`](crate::Decision)
/// a local limiter would ([`RedisDecision::decision`]). The key in Redis is
/// `{prefix}{{key}}:{algorithm}`, so every key of a limit shares one hash tag (one slot of a
/// Redis Cluster), and it expires as soon as its state is the same as a fresh key's.
///
/// [`builder`](Self::builder) connects to the one Redis of a URL, through a redis-rs
/// `ConnectionManager`: one multiplexed connection, shared by every concurrent decision, made
/// again by itself after a failure. [`cluster_builder`](Self::cluster_builder) connects to a
/// Redis Cluster from a list of seed nodes, through redis-rs's cluster client: one multiplexed
/// connection per node, each decision sent to the master of its key's slot, redirections
/// followed and topology changes retried within the deadline (`docs/distributed.md`, "Redis
/// Cluster"). A decision that gets no answer within the deadline, or gets a connection or server
/// error, is answered by the [`FailurePolicy`], and [`RedisDecision::decided_by`] says so, and
/// [`RedisDecision::failure`] why ([`Failure::cause`]). A key that holds a foreign value is a
/// typed [`RedisCheckError`], never a panic. [`verify`](Self::verify) (or
/// [`connect_checked`](super::RedisLimiterBuilder::connect_checked)) tells at start whether the
/// configuration can work at all.
///
/// Must be built and used inside a tokio runtime with its timer and IO drivers enabled
/// (`enable_all`); [`connect`](super::RedisLimiterBuilder::connect) refuses a runtime without
/// timers ([`RuntimeWithoutTimers`](super::RedisConfigError::RuntimeWithoutTimers)) or without
/// IO ([`RuntimeWithoutIo`](super::RedisConfigError::RuntimeWithoutIo)) rather than let a
/// decision panic.
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::distributed::{DecidedBy, FailurePolicy, RedisLimiter};
/// use tollgate::TokenBucket;
///
/// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = RedisLimiter::builder(
///     "redis://127.0.0.1:6379/",
///     TokenBucket::new("10/s burst 20".parse()?)?,
///     FailurePolicy::FailClosed { retry_after: Duration::from_secs(1) },
/// )
/// .connect()
/// .await?;
/// let answer = limiter.check("client-192.0.2.1").await?;
/// if answer.is_allowed() {
///     // serve the request
/// } else {
///     // 429, Retry-After: answer.decision.retry_after()
/// }
/// assert_eq!(answer.decided_by, DecidedBy::Redis);
/// # Ok(())
/// # }
/// ```
pub struct RedisLimiter {
    pub(super) connection: Connection,
    /// Its URL, or its seed nodes (for [`verify`](Self::verify)).
    pub(super) target: Target,
    /// The algorithm and its script call, read as one snapshot per call and replaced whole by
    /// [`set_algorithm`](Self::set_algorithm).
    pub(super) configured: Snapshot<Configured>,
    /// How many times `set_algorithm` replaced them.
    pub(super) changes: AtomicU64,
    pub(super) prefix: String,
    pub(super) time: TimeSource,
    pub(super) deadline: Duration,
    pub(super) policy: FailurePolicy,
    /// The breakers' pause, also the retry-after of a request the fallback can never admit.
    pub(super) probe_interval: Duration,
    /// One breaker, or one per slot group of a cluster; shared with the refunds in flight (see
    /// [`Refund`]).
    pub(super) breakers: Arc<Breakers>,
    /// Counts its decisions and round trips once named (feature `metrics`).
    pub(crate) metering: crate::meter::Metering,
}

impl RedisLimiter {
    /// Decides one request of weight 1 for `key`, and counts it if admitted.
    ///
    /// # Errors
    /// See [`check_n`](Self::check_n).
    pub async fn check(&self, key: &str) -> Result<RedisDecision, RedisCheckError> {
        self.decide(key, 1, false).await
    }

    /// Decides one request of weight `cost` for `key`, and counts it if admitted.
    ///
    /// # Errors
    /// [`RedisCheckError::CostTooLarge`] when `cost` exceeds the [capacity](Self::capacity)
    /// (Redis is not asked); [`RedisCheckError::WrongType`] or
    /// [`RedisCheckError::CorruptState`] when the key holds something else than this limiter's
    /// state; [`RedisCheckError::TimeOutOfRange`] for a client time past 2^52 µs. Redis being
    /// unreachable or slow is not an error: the failure policy answers.
    pub async fn check_n(&self, key: &str, cost: u64) -> Result<RedisDecision, RedisCheckError> {
        self.decide(key, cost, false).await
    }

    /// What [`check`](Self::check) would answer, without counting anything.
    ///
    /// # Errors
    /// As for [`check_n`](Self::check_n).
    pub async fn peek(&self, key: &str) -> Result<RedisDecision, RedisCheckError> {
        self.decide(key, 1, true).await
    }

    /// What [`check_n`](Self::check_n) would answer, without counting anything.
    ///
    /// # Errors
    /// As for [`check_n`](Self::check_n).
    pub async fn peek_n(&self, key: &str, cost: u64) -> Result<RedisDecision, RedisCheckError> {
        self.decide(key, cost, true).await
    }

    /// Gives back `cost` units admitted earlier and never used for `key`, unconditionally: the
    /// next request, from any instance of the fleet, may take their place. Returns whether
    /// anything was given back. A slot in the middle of a shaper's queue given back this way
    /// makes the next request leave with the last one waiting; [`refund_slot`](Self::refund_slot)
    /// gives a shaped request's slot back only while it still ends the key's queue
    /// (`docs/distributed.md`, "Refunds").
    ///
    /// The semantics of the local [`refund_n`](crate::KeyedLimiter::refund_n): only the buckets
    /// ([`RedisAlgorithm::TokenBucket`], [`RedisAlgorithm::LeakyBucket`]) give units back, in
    /// one `EVALSHA` (`gcra_refund.lua`, on the key of [`check_n`](Self::check_n)) that moves
    /// the TAT back by `cost * T`, never behind now, and keeps the key expiring when its state
    /// is fresh again; a full bucket (no key, or a TAT at or before now) stays full (`false`).
    /// The windows and the log cannot tell when their units were admitted: `false`, without
    /// asking Redis. Timed as decisions are (the server's `TIME`, or the client's clock).
    ///
    /// Best effort: when Redis does not answer within the deadline, fails, or was found down
    /// less than a probe interval ago, nothing is given back (`false`) and the failure policy
    /// is not involved. A refund's failure does not make later decisions skip Redis (a
    /// decision finds out by itself); its answer does tell them Redis is back.
    ///
    /// # Errors
    /// [`RedisCheckError::CostTooLarge`] when `cost` exceeds the [capacity](Self::capacity)
    /// (Redis is not asked); [`RedisCheckError::WrongType`] or
    /// [`RedisCheckError::CorruptState`] when the key holds something else than this limiter's
    /// state; [`RedisCheckError::TimeOutOfRange`] for a client time past 2^52 µs.
    pub async fn refund_n(&self, key: &str, cost: u64) -> Result<bool, RedisCheckError> {
        match self.prepare_refund(key, cost, None)? {
            Some(refund) => refund.run().await,
            None => Ok(false),
        }
    }

    /// Gives back the slot of `cost` units that [`check_slot`](Self::check_slot) gave `key` by
    /// Redis ([`DecidedBy::Redis`](super::DecidedBy::Redis)) and that ended the key's queue at
    /// `end` (the end `check_slot` named), only if it still does: no request of the key, from any
    /// instance of the fleet, has been given a slot after it since (other than ones given back in
    /// their turn). Otherwise the slot passes unused, and the requests queued behind it keep
    /// their spacing. Returns whether anything was given back. The refund for a shaped request
    /// whose client left before its slot, with the semantics of the local
    /// [`refund_slot`](crate::KeyedLimiter::refund_slot).
    ///
    /// One `EVALSHA` of `gcra_refund.lua` with the slot's end, which moves the TAT back by
    /// `cost * T` (never behind now) only if it still equals `end`; for the windows and the log,
    /// `false` without asking Redis, as for [`refund_n`](Self::refund_n). A slot the failure
    /// policy's fallback gave ([`DecidedBy::Fallback`](super::DecidedBy::Fallback), its end on
    /// the fallback's clock) goes back with [`FailurePolicy::refund_slot`] instead, never to
    /// Redis, which did not count it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::distributed::{DecidedBy, RedisLimiter};
    ///
    /// # async fn serve(limiter: RedisLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// let (answer, end) = limiter.check_slot("client-192.0.2.1", 1, Some(Duration::from_secs(2))).await?;
    /// // ... the client leaves before its slot:
    /// match (answer.decided_by, end) {
    ///     (DecidedBy::Redis, Some(end)) => {
    ///         limiter.refund_slot("client-192.0.2.1", 1, end).await?;
    ///     }
    ///     (DecidedBy::Fallback, Some(end)) => {
    ///         limiter.failure_policy().refund_slot("client-192.0.2.1", 1, end);
    ///     }
    ///     _ => {}
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Best effort, as [`refund_n`](Self::refund_n).
    ///
    /// # Errors
    /// As for [`refund_n`](Self::refund_n).
    pub async fn refund_slot(&self, key: &str, cost: u64, end: Timestamp) -> Result<bool, RedisCheckError> {
        match self.prepare_refund(key, cost, Some(end))? {
            Some(refund) => refund.run().await,
            None => Ok(false),
        }
    }

    /// The round trip [`refund_n`](Self::refund_n) (without `end`) or
    /// [`refund_slot`](Self::refund_slot) (with it) makes, owning all it needs (to run on a task
    /// of its own), or `None` when there is nothing to ask Redis.
    ///
    /// With `end`, the refund of a slot (`check_slot`'s admission): it gives back only if the
    /// key's TAT still equals `end`, in whole microseconds (rounded down: the slot's end is
    /// whole microseconds, and a time that is not, the client's clock before the script's
    /// rounding, rounds down to it); for a bucket whose interval is not whole microseconds, in
    /// nanoseconds (the script rounds the TAT up to them, as the slot's end was). An end past
    /// the times a script holds matches no TAT: nothing to ask.
    ///
    /// # Errors
    /// As for [`refund_n`](Self::refund_n).
    pub(crate) fn prepare_refund(
        &self,
        key: &str,
        cost: u64,
        end: Option<Timestamp>,
    ) -> Result<Option<Refund>, RedisCheckError> {
        let configured = self.configured.load();
        let program = &configured.program;
        CostTooLarge::check(cost, program.capacity)?;
        if !program.refunds {
            return Ok(None);
        }
        let end = match end.map(|end| (end.as_nanos() / 1_000, end.as_nanos() % 1_000)) {
            Some((end, _)) if end >= MAX_EXACT_MICROS => return Ok(None),
            Some((end, nanos)) => {
                let mut bytes = [0; 16];
                bytes[..8].copy_from_slice(&end.to_le_bytes());
                bytes[8..].copy_from_slice(&nanos.to_le_bytes());
                // `'<i8'` µs; a fine bucket's `'<i8i8'`, µs and the nanoseconds after them.
                let fine = matches!(program.reader, super::algorithm::Reader::Fine { .. });
                Some((bytes, if fine { 16 } else { 8 }))
            }
            None => None,
        };
        let now = self.time.now_argument()?;
        Ok(Some(Refund {
            connection: self.connection.clone(),
            breakers: Arc::clone(&self.breakers),
            key: self.key_with_suffix(key, program.suffix),
            arguments: program.arguments(cost, now),
            slot_end: end,
            deadline: self.deadline,
        }))
    }

    /// The algorithm and its parameters, as they are now.
    pub fn algorithm(&self) -> RedisAlgorithm {
        self.configured.load().algorithm
    }

    /// The emission interval the script runs a bucket at: the quota's `period / count` exactly
    /// (whole microseconds and a remainder in `1/d` µs where it is not whole µs), reported
    /// rounded up to whole nanoseconds. `None` for the windows and the log.
    pub fn bucket_interval(&self) -> Option<Duration> {
        self.configured.load().program.reader.bucket_interval()
    }

    /// The heaviest request that can ever pass.
    pub fn capacity(&self) -> u64 {
        self.configured.load().program.capacity
    }

    /// What this limiter answers by when Redis does not.
    pub fn failure_policy(&self) -> &FailurePolicy {
        &self.policy
    }

    /// The cause of the last failure of a decision (any key, any node: no answer, a failed
    /// connection, an error reply such as `CLUSTERDOWN` or `NOAUTH`), or `None` when every
    /// decision so far was Redis's: for a service's log or status line, beside the decisions its
    /// failure policy made. It stays after Redis answers again; compare it between reports, or
    /// read each decision's [`RedisDecision::failure`] for the cause of that decision.
    pub fn last_failure(&self) -> Option<RedisFailureCause> {
        self.breakers.last_failure()
    }

    /// The key that holds `key`'s state in Redis: `{prefix}{{key}}:{algorithm}`.
    pub fn redis_key(&self, key: &str) -> String {
        self.key_with_suffix(key, self.configured.load().program.suffix)
    }

    pub(super) fn key_with_suffix(&self, key: &str, suffix: &str) -> String {
        format!("{}{{{key}}}:{suffix}", self.prefix)
    }

    /// The same client's key in the log's other encoding, which the log scripts also read
    /// (`KEYS[2]`); `None` for the other algorithms, and on a cluster for a client key that is
    /// empty or starts with `}`: its hash tag is then empty, Redis hashes each whole key, and the
    /// two keys fall in different slots, which no script may touch together (`CROSSSLOT`). Such a
    /// log then counts its own encoding's units only (`docs/distributed.md`, "Redis Cluster").
    fn other_key(&self, program: &Program, key: &str) -> Option<String> {
        let other = program.other_suffix?;
        let tag_is_empty = key.is_empty() || key.starts_with('}');
        if tag_is_empty && self.connection.is_cluster() {
            return None;
        }
        Some(self.key_with_suffix(key, other))
    }

    /// The per-decision deadline.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Forgets everything counted for `key`, for the whole fleet: the next request for `key`,
    /// from any instance, is decided as a new key's. One `EVALSHA` (`reset.lua`) that deletes
    /// the key's state (and, for a sliding log, the same client's key in the log's other
    /// encoding, see `docs/distributed.md`, "Sliding log"), and a [`FailurePolicy::reset`] of
    /// this instance's fallback limiter, if it has one (other instances' fallbacks keep their
    /// counts).
    ///
    /// Returns whether the key was still being limited, as the local
    /// [`reset`](crate::KeyedLimiter::reset) does: the script first runs the algorithm's own
    /// decision script as a peek of weight 0 (which writes nothing) at the time decisions are
    /// timed by (the server's `TIME`, or the client's clock), so an idle key answers `false`
    /// even while Redis still holds it (its TTL is rounded up to the millisecond, and on a
    /// client's clock it runs on the server's). A key holding something that is not this
    /// limiter's state is deleted all the same, and answers whether there was anything.
    ///
    /// For an operator's or an application's decision, not for the request path. Redis is asked
    /// even while recent failures make decisions skip it; a reset's failure does not make them
    /// skip it either, and its answer tells them Redis is back. A decision racing it on another
    /// instance is counted either before the reset (and forgotten) or after it (and kept).
    ///
    /// # Errors
    /// [`RedisResetError::Failed`] when Redis does not answer within the deadline, the
    /// connection fails, or Redis answers an error (the fallback's key is forgotten all the
    /// same); [`RedisResetError::ClusterRedirect`] as for a decision;
    /// [`RedisResetError::TimeOutOfRange`] for a client time past 2^52 µs (Redis is not asked;
    /// the fallback's key is forgotten).
    pub async fn reset(&self, key: &str) -> Result<bool, RedisResetError> {
        let _ = self.policy.reset(key);
        let now = self.time.now_argument().map_err(|error| match error {
            RedisCheckError::TimeOutOfRange { now } => RedisResetError::TimeOutOfRange { now },
            // `now_argument` fails only for a time out of range.
            _ => RedisResetError::Failed(Failure::Reply),
        })?;
        let configured = self.configured.load();
        let program = &configured.program;
        let redis_key = self.key_with_suffix(key, program.suffix);
        let other_key = self.other_key(program, key);
        let keys = [redis_key.as_str(), other_key.as_deref().unwrap_or_default()];
        let keys = &keys[..if other_key.is_some() { 2 } else { 1 }];
        let (arguments, length) = program.arguments(0, now);
        let script = super::reset::script(&configured.algorithm);
        let args: [&[u8]; 1] = [&arguments[..length]];
        let answer = tokio::time::timeout(self.deadline, self.connection.run(script, keys, &args)).await;
        let breaker = self.breakers.of(&redis_key);
        match answer {
            Ok(Ok(reply)) => {
                breaker.succeeded();
                // A reply of another shape (never expected): the keys are deleted, but whether
                // they were limiting is unknown.
                super::reset::still_limited(&program.reader, &reply)
                    .ok_or(RedisResetError::Failed(Failure::Reply))
            }
            Ok(Err(error)) => match classify(&error, redis_key, None, self.connection.is_cluster()) {
                Ok(failure) => Err(RedisResetError::Failed(failure)),
                Err(RedisCheckError::ClusterRedirect { key, node }) => {
                    Err(RedisResetError::ClusterRedirect { key, node })
                }
                // The script answers no error about a key's content (it deletes it all the
                // same): something else answered.
                Err(_) => Err(RedisResetError::Failed(Failure::Reply)),
            },
            Err(_elapsed) => Err(RedisResetError::Failed(Failure::Timeout)),
        }
    }

    async fn decide(&self, key: &str, cost: u64, peek: bool) -> Result<RedisDecision, RedisCheckError> {
        let mode = if peek { Mode::Peek } else { Mode::Check };
        let (answer, _) = self.call(key, cost, mode).await?;
        self.metering.redis_decided(&answer, !peek);
        Ok(answer)
    }

    /// Decides one request of weight `cost` for `key` that will wait at most `max_delay` for
    /// its slot (`None`: no maximum), and counts it if admitted; and, for an admission, the end
    /// of the slot it was given, which [`refund_slot`](Self::refund_slot) names to give the slot
    /// back if its request is abandoned before it (a shaped request whose client left): the
    /// counterpart of the local [`check_slot`](crate::KeyedLimiter::check_slot), for the fleet.
    ///
    /// For the leaky bucket ([`RedisAlgorithm::LeakyBucket`]), a request that would wait longer
    /// than `max_delay` is refused by the script, with nothing counted (its
    /// [`retry_after`](Decision::retry_after) is when the wait fits), and an admission of weight
    /// above 0 comes with the end of its slot: the TAT the script stored, a timestamp of whole
    /// microseconds on the clock that timed the decision (the server's `TIME` by default), to be
    /// given to `refund_slot` and compared with nothing else. The other algorithms never delay a
    /// request: their decision is [`check_n`](Self::check_n)'s, without an end.
    ///
    /// When Redis does not answer, a [`Fallback`](FailurePolicy::Fallback) is asked the same,
    /// whatever its algorithm ([`LocalFallback::check_slot`](super::LocalFallback::check_slot)),
    /// and its admission comes with the end of the slot it gave, on its own clock
    /// ([`RedisDecision::decided_by`] says which counted it: such a slot goes back with
    /// [`FailurePolicy::refund_slot`]). Fail open and fail closed name no end.
    ///
    /// # Errors
    /// As for [`check_n`](Self::check_n).
    pub async fn check_slot(
        &self,
        key: &str,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(RedisDecision, Option<Timestamp>), RedisCheckError> {
        let answer = self.call(key, cost, Mode::Slot(max_delay)).await?;
        self.metering.redis_decided(&answer.0, true);
        Ok(answer)
    }

    /// One decision in `mode`, and, for a `'slot'` admission, the end of its slot: the TAT
    /// Redis stored, or the end the fallback named.
    async fn call(
        &self,
        key: &str,
        cost: u64,
        mode: Mode,
    ) -> Result<(RedisDecision, Option<Timestamp>), RedisCheckError> {
        // One snapshot of the algorithm for the whole call: the parameters sent, the reply's
        // reading and the failure policy's capacity are one quota's.
        let configured = self.configured.load();
        let program = &configured.program;
        CostTooLarge::check(cost, program.capacity)?;
        let now = self.time.now_argument()?;
        let redis_key = self.key_with_suffix(key, program.suffix);
        let other_key = self.other_key(program, key);
        let keys = [redis_key.as_str(), other_key.as_deref().unwrap_or_default()];
        let keys = &keys[..if other_key.is_some() { 2 } else { 1 }];
        let (arguments, length) = program.arguments(cost, now);
        // The packed arguments, then the mode's: nothing for a check, `'peek'`, or `'slot'` and
        // the longest wait.
        let mut args: [&[u8]; 3] = [&arguments[..length], b"", b""];
        let mut count = 1;
        let max_bytes;
        match mode {
            Mode::Check => {}
            Mode::Peek => {
                args[1] = b"peek";
                count = 2;
            }
            Mode::Slot(max) => {
                // Only the shaper's script has a `'slot'` mode; the others never delay.
                if program.reader.is_shaper() {
                    args[1] = b"slot";
                    count = 2;
                    max_bytes = max.map(|max| slot_micros(max).to_le_bytes());
                    if let Some(max) = &max_bytes {
                        args[2] = &max[..];
                        count = 3;
                    }
                }
            }
        }
        let breaker = self.breakers.of(&redis_key);
        let failure = match breaker.should_ask() {
            Ok(()) => {
                let call = self.connection.run(&program.script, keys, &args[..count]);
                let answer = self
                    .metering
                    .timed(tokio::time::timeout(self.deadline, call))
                    .await;
                let failure = match answer {
                    Ok(Ok(reply)) => match read(program, &reply, cost, mode) {
                        Some((decision, end)) => {
                            breaker.succeeded();
                            let end = end.map(Timestamp::from_nanos);
                            return Ok((RedisDecision::by_redis(decision), end));
                        }
                        None => Failure::Reply,
                    },
                    Ok(Err(error)) => {
                        let cluster = self.connection.is_cluster();
                        classify(&error, redis_key, other_key, cluster).inspect_err(|_| {
                            // Redis answered (about the key's content): it is up.
                            breaker.succeeded();
                        })?
                    }
                    Err(_elapsed) => Failure::Timeout,
                };
                if failure.opens_the_breaker() {
                    self.breakers.failed(breaker, failure.cause());
                } else {
                    self.breakers.note(failure.cause());
                }
                failure
            }
            Err(cause) => Failure::RecentlyDown(cause),
        };
        let (decision, decided_by, end) =
            self.policy
                .decide(key, cost, mode, program.capacity, self.probe_interval);
        let decision = RedisDecision {
            decision,
            decided_by,
            failure: Some(failure),
        };
        Ok((decision, end))
    }
}

/// A script's reply to `program`'s call, read for `mode`: the decision, and a `'slot'`
/// admission's end (ns since the epoch).
fn read(program: &Program, reply: &Value, cost: u64, mode: Mode) -> Option<(Decision, Option<u64>)> {
    // The script's maximum wait, in whole µs (see `reply`).
    let slot_max = |max: Option<Duration>| max.map(slot_micros);
    match (mode, &program.reader) {
        (Mode::Slot(max), super::algorithm::Reader::LeakyBucket(shaper)) => {
            // Whole microseconds below 2^53 (checked by `reply`): exact in ns.
            let max = slot_max(max).map(|max| max.saturating_mul(1_000));
            reply::slot_decision(shaper, reply, cost, max)
                .map(|(decision, end)| (decision, end.map(|end| end.saturating_mul(1_000))))
        }
        (Mode::Slot(max), super::algorithm::Reader::Fine { rate, shaper: true }) => {
            reply::fine_slot_decision(rate, reply, cost, slot_max(max))
        }
        _ => reply::decision(&program.reader, reply, cost).map(|decision| (decision, None)),
    }
}

/// What a decision asks (of the script, or of the failure policy when Redis does not answer):
/// to count (`check_n`), to peek, or to count with the slot's end and a longest wait
/// (`check_slot`: the shaper's script alone has this mode; the others' is `Check`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    Check,
    Peek,
    Slot(Option<Duration>),
}

/// A longest wait as the shaper's script takes it: whole µs (truncated), at most the largest
/// span a script holds, above which no backlog reaches the maximum.
fn slot_micros(max: Duration) -> u64 {
    use super::algorithm::MAX_SPAN_MICROS;
    u64::try_from(max.as_micros()).map_or(MAX_SPAN_MICROS, |max| max.min(MAX_SPAN_MICROS))
}

/// The scripts' first argument: `cost`, the algorithm's two parameters and, on a client's clock,
/// `now`, as little-endian 64-bit integers (read by `struct.unpack('<i8i8i8[i8]')`), and how many
/// of the bytes to send: 24, or 32 with `now`. Every value is below 2^53 (checked at
/// construction and by `TimeSource`), so each is the same `i64` and `u64`.
pub(super) fn packed_arguments(cost: u64, params: [u64; 2], now: Option<i64>) -> ([u8; 32], usize) {
    let mut bytes = [0; 32];
    for (chunk, value) in bytes.chunks_exact_mut(8).zip([cost, params[0], params[1]]) {
        chunk.copy_from_slice(&value.to_le_bytes());
    }
    match now {
        Some(now) => {
            bytes[24..].copy_from_slice(&now.to_le_bytes());
            (bytes, 32)
        }
        None => (bytes, 24),
    }
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("connection", &self.connection)
            .field("prefix", &self.prefix)
            .field("algorithm", &self.configured.load().program.suffix)
            .field("capacity", &self.capacity())
            .field("time", &self.time)
            .field("deadline", &self.deadline)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}
