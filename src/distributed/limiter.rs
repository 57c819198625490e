//! The distributed limiter: one script call per decision over one multiplexed, self-healing
//! connection, with a deadline and a failure policy.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ErrorKind, RedisError, ServerErrorKind, Value};

use super::algorithm::{Program, RedisAlgorithm};
use super::breaker::Breaker;
use super::error::{RedisCheckError, RedisConfigError, RedisResetError};
use super::policy::{Failure, FailurePolicy, RedisDecision};
use super::refund::Refund;
#[cfg(feature = "tower")]
use super::refund_queue::RefundQueue;
use super::reply;
use super::time::TimeSource;
use crate::clock::Clock;
use crate::{CostTooLarge, Decision};

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
/// `{prefix}{{key}}:{algorithm}`, so every key of a limit shares one hash tag, and it expires as
/// soon as its state is the same as a fresh key's. The connection is to the one node of the URL:
/// Redis Cluster is not supported (a key on another node is
/// [`RedisCheckError::ClusterRedirect`]).
///
/// The connection is a redis-rs [`ConnectionManager`]: one multiplexed connection, shared by
/// every concurrent decision, that reconnects by itself. A decision that gets no answer within
/// the deadline, or gets a connection or server error, is answered by the [`FailurePolicy`],
/// and [`RedisDecision::decided_by`] says so. A key that holds a foreign value is a typed
/// [`RedisCheckError`], never a panic.
///
/// Must be built and used inside a tokio runtime with its timer and IO drivers enabled
/// (`enable_all`); [`connect`](RedisLimiterBuilder::connect) refuses a runtime without timers
/// ([`RedisConfigError::RuntimeWithoutTimers`]) or without IO
/// ([`RedisConfigError::RuntimeWithoutIo`]) rather than let a decision panic.
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
    connection: ConnectionManager,
    algorithm: RedisAlgorithm,
    program: Program,
    prefix: String,
    time: TimeSource,
    deadline: Duration,
    policy: FailurePolicy,
    /// The breaker's pause, also the retry-after of a request the fallback can never admit.
    probe_interval: Duration,
    /// Shared with the refunds in flight (see [`Refund`]).
    breaker: Arc<Breaker>,
    /// The tower layer's refunds, each key's sent in the order given back.
    #[cfg(feature = "tower")]
    refunds: RefundQueue,
}

impl RedisLimiter {
    /// Starts building a limiter on the Redis at `url` (`redis://host:port/db`), running
    /// `algorithm`, answering by `policy` when Redis does not.
    pub fn builder(
        url: impl Into<String>,
        algorithm: impl Into<RedisAlgorithm>,
        policy: FailurePolicy,
    ) -> RedisLimiterBuilder {
        RedisLimiterBuilder {
            url: url.into(),
            algorithm: algorithm.into(),
            policy,
            prefix: DEFAULT_PREFIX.to_owned(),
            time: TimeSource::Server,
            deadline: DEFAULT_DEADLINE,
            probe_interval: DEFAULT_PROBE_INTERVAL,
        }
    }

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
    /// makes the next request leave with the last one waiting; the tower layer gives a shaped
    /// request's slot back only while it still ends the key's queue (`docs/distributed.md`,
    /// "Refunds"). There is no public `refund_slot` beside it: the slot's end is the TAT the
    /// script stored, on the server's clock by default, which no public decision carries (the
    /// same section says why).
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

    /// The round trip [`refund_n`](Self::refund_n) makes, owning all it needs (to run on a
    /// task of its own), or `None` when there is nothing to ask Redis.
    ///
    /// With `end`, the refund of a slot (`check_slot`'s admission): it gives back only if the
    /// key's TAT still equals `end`, in whole microseconds (rounded down: the slot's end is
    /// whole microseconds, and a time that is not, the client's clock before the script's
    /// rounding, rounds down to it). An end past the times a script holds matches no TAT:
    /// nothing to ask.
    pub(super) fn prepare_refund(
        &self,
        key: &str,
        cost: u64,
        end: Option<crate::Timestamp>,
    ) -> Result<Option<Refund>, RedisCheckError> {
        CostTooLarge::check(cost, self.program.capacity)?;
        if !self.program.refunds {
            return Ok(None);
        }
        let end = match end.map(|end| end.as_nanos() / 1_000) {
            Some(end) if end >= MAX_EXACT_MICROS => return Ok(None),
            end => end,
        };
        let now = self.time.now_argument()?;
        Ok(Some(Refund {
            connection: self.connection.clone(),
            breaker: Arc::clone(&self.breaker),
            key: self.redis_key(key),
            arguments: packed_arguments(cost, self.program.params, now),
            slot_end: end,
            deadline: self.deadline,
        }))
    }

    /// The queue of the tower layer's refunds (see [`RefundQueue`]).
    #[cfg(feature = "tower")]
    pub(super) fn refunds(&self) -> &RefundQueue {
        &self.refunds
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> &RedisAlgorithm {
        &self.algorithm
    }

    /// The emission interval the script runs a bucket at; `None` for the other algorithms.
    #[cfg(feature = "tower")]
    pub(crate) fn bucket_interval(&self) -> Option<std::time::Duration> {
        self.program.reader.bucket_interval()
    }

    /// The heaviest request that can ever pass.
    pub fn capacity(&self) -> u64 {
        self.program.capacity
    }

    /// What this limiter answers by when Redis does not.
    pub fn failure_policy(&self) -> &FailurePolicy {
        &self.policy
    }

    /// The key that holds `key`'s state in Redis: `{prefix}{{key}}:{algorithm}`.
    pub fn redis_key(&self, key: &str) -> String {
        self.key_with_suffix(key, self.program.suffix)
    }

    fn key_with_suffix(&self, key: &str, suffix: &str) -> String {
        format!("{}{{{key}}}:{suffix}", self.prefix)
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
        let redis_key = self.redis_key(key);
        let mut call = super::reset::script(&self.algorithm).prepare_invoke();
        call.key(&redis_key);
        if let Some(other) = self.program.other_suffix {
            call.key(self.key_with_suffix(key, other));
        }
        let (arguments, length) = packed_arguments(0, self.program.params, now);
        call.arg(&arguments[..length]);
        let mut connection = self.connection.clone();
        let answer = tokio::time::timeout(self.deadline, call.invoke_async::<Value>(&mut connection)).await;
        match answer {
            Ok(Ok(reply)) => {
                self.breaker.succeeded();
                // A reply of another shape (never expected): the keys are deleted, but whether
                // they were limiting is unknown.
                super::reset::still_limited(&self.program.reader, &reply)
                    .ok_or(RedisResetError::Failed(Failure::Reply))
            }
            Ok(Err(error)) => match classify(&error, redis_key, None) {
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
        Ok(self.call(key, cost, mode).await?.0)
    }

    /// Decides one request of weight `cost` for `key` that will wait at most `max_delay` for
    /// its slot, and counts it if admitted: for the leaky bucket, a request that would wait
    /// longer is refused by the script, with nothing counted, and an admission comes with the
    /// end of its slot (the TAT the script stored, as a timestamp of whole microseconds), which
    /// [`prepare_refund`](Self::prepare_refund) compares. The other algorithms never delay a
    /// request: their decision is `check_n`'s, without an end.
    ///
    /// When Redis does not answer, a [`Fallback`](FailurePolicy::Fallback) is asked the same,
    /// whatever its algorithm ([`LocalFallback::check_slot`](super::LocalFallback::check_slot)),
    /// and its admission comes with the end of the slot it gave, on its own clock.
    #[cfg(feature = "tower")]
    pub(crate) async fn check_slot(
        &self,
        key: &str,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(RedisDecision, Option<crate::Timestamp>), RedisCheckError> {
        self.call(key, cost, Mode::Slot(max_delay)).await
    }

    /// One decision in `mode`, and, for a `'slot'` admission, the end of its slot: the TAT
    /// Redis stored, or the end the fallback named.
    async fn call(
        &self,
        key: &str,
        cost: u64,
        mode: Mode,
    ) -> Result<(RedisDecision, Option<crate::Timestamp>), RedisCheckError> {
        CostTooLarge::check(cost, self.program.capacity)?;
        let now = self.time.now_argument()?;
        let redis_key = self.redis_key(key);
        let other_key = self
            .program
            .other_suffix
            .map(|other| self.key_with_suffix(key, other));
        let (arguments, length) = packed_arguments(cost, self.program.params, now);
        let mut call = self.program.script.prepare_invoke();
        call.key(&redis_key);
        if let Some(other_key) = &other_key {
            call.key(other_key);
        }
        call.arg(&arguments[..length]);
        match mode {
            Mode::Check => {}
            Mode::Peek => {
                call.arg("peek");
            }
            #[cfg(feature = "tower")]
            Mode::Slot(max) => {
                // Only the shaper's script has a `'slot'` mode; the others never delay.
                if matches!(self.program.reader, super::algorithm::Reader::LeakyBucket(_)) {
                    call.arg("slot");
                    if let Some(max) = max.map(slot_micros) {
                        call.arg(&max.to_le_bytes()[..]);
                    }
                }
            }
        }
        let failure = if self.breaker.should_ask() {
            let mut connection = self.connection.clone();
            let answer =
                tokio::time::timeout(self.deadline, call.invoke_async::<Value>(&mut connection)).await;
            let failure = match answer {
                Ok(Ok(reply)) => match self.read(&reply, cost, mode) {
                    Some((decision, end)) => {
                        self.breaker.succeeded();
                        // Whole microseconds below 2^53 (checked by `reply`): exact in ns.
                        let end = end.map(|end| crate::Timestamp::from_nanos(end.saturating_mul(1_000)));
                        return Ok((RedisDecision::by_redis(decision), end));
                    }
                    None => Failure::Reply,
                },
                Ok(Err(error)) => classify(&error, redis_key, other_key).inspect_err(|_| {
                    // Redis answered (about the key's content): it is up.
                    self.breaker.succeeded();
                })?,
                Err(_elapsed) => Failure::Timeout,
            };
            if matches!(failure, Failure::Timeout | Failure::Connection) {
                self.breaker.failed();
            }
            failure
        } else {
            Failure::RecentlyDown
        };
        let (decision, decided_by, end) =
            self.policy
                .decide(key, cost, mode, self.program.capacity, self.probe_interval);
        let decision = RedisDecision {
            decision,
            decided_by,
            failure: Some(failure),
        };
        Ok((decision, end))
    }

    /// A script's reply, read for `mode`: the decision, and a `'slot'` admission's end (µs).
    fn read(&self, reply: &Value, cost: u64, mode: Mode) -> Option<(Decision, Option<u64>)> {
        match (mode, &self.program.reader) {
            #[cfg(feature = "tower")]
            (Mode::Slot(max), super::algorithm::Reader::LeakyBucket(shaper)) => {
                // The script's maximum, in whole µs, back in ns: the same refusals (see `reply`).
                let max = max.map(|max| slot_micros(max).saturating_mul(1_000));
                reply::slot_decision(shaper, reply, cost, max)
            }
            _ => reply::decision(&self.program.reader, reply, cost).map(|decision| (decision, None)),
        }
    }
}

/// What a decision asks (of the script, or of the failure policy when Redis does not answer):
/// to count (`check_n`), to peek, or (through the tower layer) to count with the slot's end
/// and a longest wait (the shaper's script alone has this mode; the others' is `Check`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    Check,
    Peek,
    #[cfg(feature = "tower")]
    Slot(Option<Duration>),
}

/// A longest wait as the shaper's script takes it: whole µs (truncated), at most the largest
/// span a script holds, above which no backlog reaches the maximum.
#[cfg(feature = "tower")]
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

/// Splits Redis errors into the typed errors about the key's content or the deployment, which
/// no policy fixes, and the failures the policy answers.
///
/// `key` is the key the script decides on; `other`, the same client's key in the log's other
/// encoding, which the log scripts also read (an error about it names it: `TOLLGATE_OTHER_*`).
pub(super) fn classify(
    error: &RedisError,
    key: String,
    other: Option<String>,
) -> Result<Failure, RedisCheckError> {
    match error.code() {
        Some("WRONGTYPE") => return Err(RedisCheckError::WrongType { key }),
        // The same before Redis 7.0, wrapped in an `ERR` (the scripts' own `TOLLGATE_*` errors
        // are replies, never wrapped): the `GET` of the decided key met another type.
        Some("ERR") if is_wrapped_script_error(error, "WRONGTYPE") => {
            return Err(RedisCheckError::WrongType { key })
        }
        Some("TOLLGATE_STATE") => return Err(RedisCheckError::CorruptState { key }),
        Some("TOLLGATE_OTHER_WRONGTYPE") => {
            return Err(RedisCheckError::WrongType {
                key: other.unwrap_or(key),
            })
        }
        Some("TOLLGATE_OTHER_STATE") => {
            return Err(RedisCheckError::CorruptState {
                key: other.unwrap_or(key),
            })
        }
        _ => {}
    }
    // No reply within the connection's response timeout (set to the deadline): the server is
    // slow, not unreachable.
    if error.is_timeout() {
        return Ok(Failure::Timeout);
    }
    if let ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask) = error.kind() {
        // The same key is redirected on every call: a cluster behind a one-node client.
        let node = error.redirect_node().map_or_else(
            || error.detail().unwrap_or_default().to_owned(),
            |(node, _slot)| node.to_owned(),
        );
        return Err(RedisCheckError::ClusterRedirect { key, node });
    }
    Ok(match error.kind() {
        // Memory full under `noeviction`: an error reply redis-rs does not name (`Extension`),
        // told apart for the operators' alerts.
        ErrorKind::Extension if error.code() == Some("OOM") => Failure::OutOfMemory,
        // The same before Redis 7.0, which wraps a script's error in an `ERR` of its own.
        ErrorKind::Server(_) if is_script_out_of_memory(error) => Failure::OutOfMemory,
        // An error reply whose code redis-rs does not name (`BUSY`, `MISCONF`, `NOREPLICAS`...)
        // is `Extension`: Redis answered all the same.
        ErrorKind::Server(_) | ErrorKind::Extension => Failure::Server,
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => Failure::Reply,
        _ => Failure::Connection,
    })
}

/// Whether this thread runs in a tokio runtime whose timers work, so that no decision's
/// deadline panics later. Tokio has no query for its time driver, and creating a timer without
/// one panics: the one timer created here tells, once, at construction. (The panic hook still
/// reports that panic; with `panic = "abort"` it aborts here, at construction.)
fn runtime_has_timers() -> Result<(), RedisConfigError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(RedisConfigError::RuntimeWithoutTimers);
    }
    std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO)))
        .map_err(|_| RedisConfigError::RuntimeWithoutTimers)
}

/// Whether this thread's tokio runtime has its IO driver, which the connection (made lazily,
/// at the first decision) needs. Tokio has no query for it either: registering one socket with
/// it tells, once, at construction, as for the timers. Where no socket can be made here, the
/// connection will tell, as failures the policy answers.
fn runtime_has_io() -> Result<(), RedisConfigError> {
    let Ok(socket) = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)) else {
        return Ok(());
    };
    // Tokio takes a socket that does not block (registering one that does is a misuse).
    if socket.set_nonblocking(true).is_err() {
        return Ok(());
    }
    std::panic::catch_unwind(|| drop(tokio::net::UdpSocket::from_std(socket)))
        .map_err(|_| RedisConfigError::RuntimeWithoutIo)
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("prefix", &self.prefix)
            .field("algorithm", &self.program.suffix)
            .field("capacity", &self.program.capacity)
            .field("time", &self.time)
            .field("deadline", &self.deadline)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Configures a [`RedisLimiter`]; see [`RedisLimiter::builder`]. Its `Debug` output hides the
/// URL's password ([`redacted_url`](super::redacted_url)).
#[must_use = "a builder does nothing until `connect` is awaited"]
pub struct RedisLimiterBuilder {
    url: String,
    algorithm: RedisAlgorithm,
    policy: FailurePolicy,
    prefix: String,
    time: TimeSource,
    deadline: Duration,
    probe_interval: Duration,
}

/// The client's complaint about a URL, as tollgate's own error: the `redis` crate's error type
/// stays out of tollgate's API.
fn invalid_url(error: RedisError) -> RedisConfigError {
    RedisConfigError::InvalidUrl {
        reason: error.to_string(),
    }
}

impl fmt::Debug for RedisLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiterBuilder")
            .field("url", &super::redacted_url(&self.url))
            .field("algorithm", &self.algorithm)
            .field("policy", &self.policy)
            .field("prefix", &self.prefix)
            .field("time", &self.time)
            .field("deadline", &self.deadline)
            .field("probe_interval", &self.probe_interval)
            .finish()
    }
}

impl RedisLimiterBuilder {
    /// The prefix of every key ([`DEFAULT_PREFIX`] unless set). Limits that must not share
    /// counts need distinct prefixes; it may not contain a brace.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Times decisions by `clock` instead of the server's `TIME` (see [`TimeSource`]).
    pub fn client_time(self, clock: impl Clock + 'static) -> Self {
        self.time(TimeSource::client(clock))
    }

    /// Where `now` comes from ([`TimeSource::Server`] unless set).
    pub fn time(mut self, time: TimeSource) -> Self {
        self.time = time;
        self
    }

    /// How long a decision waits for Redis before the failure policy answers
    /// ([`DEFAULT_DEADLINE`] unless set).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// After a timeout or a connection failure, how long decisions go straight to the failure
    /// policy without asking Redis, except one probe per interval ([`DEFAULT_PROBE_INTERVAL`]
    /// unless set). While Redis is down, requests then wait for nothing instead of the deadline.
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval;
        self
    }

    /// Validates the configuration and sets up the connection. The connection is made lazily:
    /// a limiter built while Redis is down answers by its failure policy until Redis is back.
    ///
    /// Must run inside the tokio runtime the limiter will decide in, built with its timer and
    /// IO drivers (`enable_all`): each decision waits for Redis under a tokio timer.
    ///
    /// # Errors
    /// [`RedisConfigError`]: an invalid URL, a prefix with a brace, a zero deadline, a window
    /// that is not whole microseconds, parameters past exact integers in Lua, or no tokio
    /// runtime with timers and IO here ([`RedisConfigError::RuntimeWithoutTimers`],
    /// [`RedisConfigError::RuntimeWithoutIo`]).
    pub async fn connect(self) -> Result<RedisLimiter, RedisConfigError> {
        runtime_has_timers()?;
        runtime_has_io()?;
        if self.prefix.contains(['{', '}']) {
            return Err(RedisConfigError::BraceInPrefix { prefix: self.prefix });
        }
        if self.deadline.is_zero() {
            return Err(RedisConfigError::ZeroDeadline);
        }
        let program = self.algorithm.program()?;
        let client = Client::open(self.url.as_str()).map_err(invalid_url)?;
        let config = ConnectionManagerConfig::new()
            // Retry soon after a restart; the deadline, not the backoff, bounds each decision.
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(500))
            .set_connection_timeout(Some(Duration::from_secs(1)))
            // Answers later than the deadline are dropped, so that a hung server does not pile up
            // requests in the connection.
            .set_response_timeout(Some(self.deadline));
        let connection = ConnectionManager::new_lazy_with_config(client, config).map_err(invalid_url)?;
        Ok(RedisLimiter {
            connection,
            algorithm: self.algorithm,
            program,
            prefix: self.prefix,
            time: self.time,
            deadline: self.deadline,
            policy: self.policy,
            probe_interval: self.probe_interval,
            breaker: Arc::new(Breaker::new(self.probe_interval)),
            #[cfg(feature = "tower")]
            refunds: RefundQueue::default(),
        })
    }
}

/// Whether `error` is the `OOM` of a script's first write as Redis before 7.0 answers it: an
/// `ERR` reply that wraps the command's own error after a `-` (`ERR Error running script (call
/// to f_...): @user_script:41: @user_script: 41: -OOM command not allowed when used memory >
/// 'maxmemory'.`). Redis 7.0 and later answer the command's own code, `OOM`.
fn is_script_out_of_memory(error: &RedisError) -> bool {
    is_wrapped_script_error(error, "OOM")
}

/// Whether `error` is a command's `code` error inside a script, as Redis before 7.0 answers it
/// (wrapped in an `ERR`, as for [`is_script_out_of_memory`]).
fn is_wrapped_script_error(error: &RedisError, code: &str) -> bool {
    error.code() == Some("ERR")
        && error.detail().is_some_and(|detail| {
            detail.starts_with("Error running script")
                && detail.match_indices(": -").any(|(at, _)| {
                    detail[at + 3..]
                        .strip_prefix(code)
                        .is_some_and(|rest| rest.starts_with(' '))
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(kind: ServerErrorKind, description: &'static str, detail: &str) -> RedisError {
        RedisError::from((ErrorKind::Server(kind), description, detail.to_owned()))
    }

    /// A builder logged with `{:?}` must not write the Redis password into the log.
    #[test]
    fn a_builder_debug_hides_the_password() {
        let bucket = crate::TokenBucket::new("10/s".parse().unwrap()).unwrap();
        let builder = RedisLimiter::builder(
            "redis://default:hunter2@redis.internal:6379/0",
            bucket,
            FailurePolicy::FailOpen,
        );
        let shown = format!("{builder:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("redis://default:***@redis.internal:6379/0"),
            "{shown}"
        );
    }

    #[test]
    fn cluster_redirects_are_a_typed_error_naming_the_node() {
        for kind in [ServerErrorKind::Moved, ServerErrorKind::Ask] {
            let error = server_error(kind, "key moved", "3999 127.0.0.1:17002");
            assert_eq!(
                classify(&error, "tollgate:{k}:tb2".to_owned(), None),
                Err(RedisCheckError::ClusterRedirect {
                    key: "tollgate:{k}:tb2".to_owned(),
                    node: "127.0.0.1:17002".to_owned(),
                })
            );
        }
    }

    #[test]
    fn other_server_errors_fall_to_the_policy() {
        for kind in [
            ServerErrorKind::ReadOnly,
            ServerErrorKind::BusyLoading,
            ServerErrorKind::ClusterDown,
        ] {
            let error = server_error(kind, "server error", "detail");
            assert_eq!(classify(&error, "k".to_owned(), None), Ok(Failure::Server));
        }
    }

    /// Error codes redis-rs does not name are `ErrorKind::Extension`: still Redis's answer,
    /// never a connection failure (which would also open the breaker).
    #[test]
    fn unnamed_server_errors_fall_to_the_policy_as_server_errors() {
        for code in ["BUSY", "MISCONF", "NOREPLICAS"] {
            let error = redis::make_extension_error(code.to_owned(), Some("detail".to_owned()));
            assert_eq!(error.kind(), ErrorKind::Extension);
            assert_eq!(
                classify(&error, "k".to_owned(), None),
                Ok(Failure::Server),
                "{code}"
            );
        }
    }

    /// `OOM` is what a script's write gets with memory full under `noeviction`
    /// (`tests/redis_memory.rs`): a failure of its own, for the operators' alerts.
    #[test]
    fn out_of_memory_is_its_own_failure() {
        let error = redis::make_extension_error(
            "OOM".to_owned(),
            Some("command not allowed when used memory > 'maxmemory'.".to_owned()),
        );
        assert_eq!(error.kind(), ErrorKind::Extension);
        assert_eq!(classify(&error, "k".to_owned(), None), Ok(Failure::OutOfMemory));
    }

    /// Before Redis 7.0 a script's error reply does not keep the code of the command that
    /// failed in it: the same `OOM` of a script's first write reaches the client wrapped in an
    /// `ERR` (the reply below, as Redis 5 and 6 send it). It is memory all the same.
    #[test]
    fn out_of_memory_inside_a_script_before_redis_7_is_its_own_failure() {
        let reply = b"-ERR Error running script (call to f_8f55ae4a3be429c6d38c5d5db3e80edf89197b64): \
            @user_script:41: @user_script: 41: -OOM command not allowed when used memory > 'maxmemory'.\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(error.code(), Some("ERR"));
        assert_eq!(classify(&error, "k".to_owned(), None), Ok(Failure::OutOfMemory));
        // Another script error stays a server error.
        let reply = b"-ERR Error running script (call to f_8f): @user_script:3: -BUSYKEY Target key name already exists.\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(classify(&error, "k".to_owned(), None), Ok(Failure::Server));
    }

    /// Likewise a key of another type met by a script's `GET` (Redis 5 and 6): the typed error
    /// that Redis 7 gives, not a failure for the policy to answer (which, failing open, would
    /// admit that key's every request uncounted). A `WRONGTYPE` only named in the message of
    /// another error is not one.
    #[test]
    fn a_key_of_another_type_inside_a_script_before_redis_7_is_a_typed_error() {
        let reply = b"-ERR Error running script (call to f_84c51cec304677c1c8508656a2f0d8a820275e33): \
            @user_script:29: @user_script: 29: -WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(
            classify(&error, "tollgate:{k}:tb2".to_owned(), None),
            Err(RedisCheckError::WrongType {
                key: "tollgate:{k}:tb2".to_owned()
            })
        );
        let reply = b"-ERR Error running script (call to f_8f): @user_script:3: -BUSYKEY not -WRONGTYPEs\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(classify(&error, "k".to_owned(), None), Ok(Failure::Server));
    }
}
