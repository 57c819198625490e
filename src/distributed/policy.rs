//! What a distributed limiter answers when Redis cannot: the failure policy, chosen at
//! construction, and the answer's record of which path decided.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::cause::RedisFailureCause;
use super::limiter::Mode;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::time::duration_to_nanos_saturating;
use crate::{CostTooLarge, Decision, DirectLimiter, KeyedLimiter, KeyedLogLimiter, LogLimiter, Timestamp};

/// What a [`RedisLimiter`](super::RedisLimiter) answers when Redis does not (down, restarting,
/// slower than the deadline, or answering an error of its own).
#[derive(Clone)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Admit every request, uncounted
    /// ([`Outcome::AllowedUntracked`](crate::Outcome::AllowedUntracked), remaining
    /// `capacity - cost`): the service stays up, unprotected, while Redis is away.
    FailOpen,
    /// Refuse every request ([`Outcome::Denied`](crate::Outcome::Denied), remaining 0), with this
    /// retry-after: no quota is ever exceeded, and nothing is served while Redis is away.
    FailClosed {
        /// The retry-after each refusal reports.
        retry_after: Duration,
    },
    /// Decide with a local tollgate limiter, typically a keyed one configured with this
    /// instance's share of the quota (the quota divided by the fleet's size).
    ///
    /// A request heavier than the local limiter's capacity (a share can be smaller than the
    /// heaviest request Redis admits) cannot pass it: it is refused
    /// ([`Outcome::Denied`](crate::Outcome::Denied), remaining 0) with a retry-after of the
    /// limiter's probe interval
    /// ([`probe_interval`](super::RedisLimiterBuilder::probe_interval), by default
    /// [`DEFAULT_PROBE_INTERVAL`](super::DEFAULT_PROBE_INTERVAL)), the pause before Redis is
    /// asked again: it may pass as soon as Redis answers.
    Fallback(Arc<dyn LocalFallback>),
}

impl FailurePolicy {
    /// [`FailurePolicy::Fallback`] to `limiter`.
    pub fn fallback(limiter: impl LocalFallback + 'static) -> FailurePolicy {
        FailurePolicy::Fallback(Arc::new(limiter))
    }

    /// Gives back `cost` units for `key` that this policy admitted while Redis was away and that
    /// were never used (a shaped request abandoned before its slot): to the
    /// [`Fallback`](FailurePolicy::Fallback) limiter that counted them
    /// ([`LocalFallback::refund_n`]), never to Redis, which did not count them. Returns whether
    /// anything was given back: always `false` for [`FailOpen`](FailurePolicy::FailOpen) (it
    /// counts nothing) and [`FailClosed`](FailurePolicy::FailClosed) (it admits nothing).
    pub fn refund_n(&self, key: &str, cost: u64) -> bool {
        match self {
            FailurePolicy::FailOpen | FailurePolicy::FailClosed { .. } => false,
            FailurePolicy::Fallback(local) => local.refund_n(key, cost),
        }
    }

    /// [`refund_n`](Self::refund_n) of a slot the [`Fallback`](FailurePolicy::Fallback) limiter
    /// gave `key` and that ended its queue at `end` ([`LocalFallback::check_slot`] named it):
    /// given back only if it still does ([`LocalFallback::refund_slot`]), so that the requests
    /// queued behind it keep their spacing. Returns whether anything was given back: always
    /// `false` for the other policies.
    pub fn refund_slot(&self, key: &str, cost: u64, end: Timestamp) -> bool {
        match self {
            FailurePolicy::FailOpen | FailurePolicy::FailClosed { .. } => false,
            FailurePolicy::Fallback(local) => local.refund_slot(key, cost, end),
        }
    }

    /// Forgets what this policy counted for `key` while Redis was away: the
    /// [`Fallback`](FailurePolicy::Fallback) limiter's [`LocalFallback::reset`]. Returns whether
    /// the key was still being limited there: always `false` for the other policies, which count
    /// nothing.
    pub fn reset(&self, key: &str) -> bool {
        match self {
            FailurePolicy::FailOpen | FailurePolicy::FailClosed { .. } => false,
            FailurePolicy::Fallback(local) => local.reset(key),
        }
    }

    /// The answer when Redis did not give one, to a decision in `mode`, and the end of the slot
    /// the fallback gave (for `Mode::Slot`, when its [`LocalFallback::check_slot`] names it).
    pub(super) fn decide(
        &self,
        key: &str,
        cost: u64,
        mode: Mode,
        capacity: u64,
        probe_interval: Duration,
    ) -> (Decision, DecidedBy, Option<Timestamp>) {
        match self {
            FailurePolicy::FailOpen => (
                Decision::untracked(Decision::allowed(capacity - cost, 0, 0)),
                DecidedBy::FailOpen,
                None,
            ),
            FailurePolicy::FailClosed { retry_after } => (
                Decision::denied(0, duration_to_nanos_saturating(*retry_after), 0),
                DecidedBy::FailClosed,
                None,
            ),
            FailurePolicy::Fallback(local) => {
                let decided = match mode {
                    Mode::Check => local.check_n(key, cost).map(|decision| (decision, None)),
                    Mode::Peek => local.peek_n(key, cost).map(|decision| (decision, None)),
                    Mode::Slot(max_delay) => local.check_slot(key, cost, max_delay),
                };
                // A request heavier than the local limiter's capacity (a share of the quota)
                // cannot pass it while Redis is away; it may pass once Redis is back, which is
                // asked again after a probe interval.
                let retry_after = duration_to_nanos_saturating(probe_interval);
                let (decision, end) = decided.unwrap_or((Decision::denied(0, retry_after, 0), None));
                (decision, DecidedBy::Fallback, end)
            }
        }
    }
}

impl fmt::Debug for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailurePolicy::FailOpen => f.write_str("FailOpen"),
            FailurePolicy::FailClosed { retry_after } => f
                .debug_struct("FailClosed")
                .field("retry_after", retry_after)
                .finish(),
            FailurePolicy::Fallback(_) => f.write_str("Fallback(..)"),
        }
    }
}

/// A local limiter a [`FailurePolicy::Fallback`] decides with, per key. Implemented for the
/// keyed limiters over `str` keys, and for the direct ones (which ignore the key).
pub trait LocalFallback: Send + Sync {
    /// Decides a request of weight `cost` for `key`, and counts it if admitted.
    ///
    /// # Errors
    /// [`CostTooLarge`] when `cost` exceeds the local limiter's capacity.
    fn check_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge>;

    /// What [`check_n`](Self::check_n) would answer, without counting anything.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    fn peek_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge>;

    /// Gives back `cost` units this limiter admitted for `key` and that were never used (a
    /// shaped request abandoned before its slot), with the semantics of
    /// [`KeyedLimiter::refund_n`]: only the buckets give back. Returns whether anything was
    /// given back; the default gives nothing back (`false`).
    ///
    /// The tower layer calls it for an admission whose [`check_slot`](Self::check_slot) named
    /// no slot.
    fn refund_n(&self, key: &str, cost: u64) -> bool {
        let _ = (key, cost);
        false
    }

    /// Decides a request of weight `cost` for `key` that will wait at most `max_delay` for its
    /// slot (`None`: no maximum), and counts it if admitted; and, for an admission, the end of
    /// the slot it was given, which [`refund_slot`](Self::refund_slot) compares. This is what
    /// the tower layer asks of the fallback (for every algorithm, whatever Redis runs).
    ///
    /// A shaper refuses a request that would wait longer than `max_delay` in the same step as
    /// the decision, with nothing counted (see [`KeyedLimiter::check_n_within`]); the end is
    /// the time the decision was made at, read once, plus its
    /// [`reset_after`](Decision::reset_after) (`None` for a refusal or an untracked admission).
    /// The keyed and direct limiters implement it so.
    ///
    /// The default is [`check_n`](Self::check_n)'s decision with no end: the layer then refuses
    /// a wait above its maximum itself and gives the slot back with
    /// [`refund_n`](Self::refund_n), unconditionally, as before this method existed. An
    /// implementation that returns an end must give it meaning in `refund_slot`.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    fn check_slot(
        &self,
        key: &str,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(Decision, Option<Timestamp>), CostTooLarge> {
        let _ = max_delay;
        self.check_n(key, cost).map(|decision| (decision, None))
    }

    /// Gives back the slot of `cost` units for `key` that ended its queue at `end` (as
    /// [`check_slot`](Self::check_slot) named it), only if it still does, with the semantics of
    /// [`KeyedLimiter::refund_slot`]: a slot in the middle of the queue passes unused, so that
    /// the requests behind it keep their spacing. Returns whether anything was given back.
    ///
    /// The default gives nothing back (`false`), like `refund_n`'s, and not `refund_n`: an
    /// unconditional refund of a slot in the middle of the queue makes two requests leave
    /// together, while a slot kept costs one unused interval. It is called only with an end
    /// that `check_slot` returned, which the default `check_slot` never does.
    fn refund_slot(&self, key: &str, cost: u64, end: Timestamp) -> bool {
        let _ = (key, cost, end);
        false
    }

    /// Forgets what this limiter counted for `key`, with the semantics of
    /// [`KeyedLimiter::reset`]. Returns whether the key was still being limited. The default,
    /// and a direct limiter (one quota shared by every key, which one key's reset must not
    /// empty), forget nothing (`false`).
    fn reset(&self, key: &str) -> bool {
        let _ = key;
        false
    }
}

impl<A: Algorithm, C: Clock> LocalFallback for KeyedLimiter<str, A, C> {
    fn check_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        KeyedLimiter::check_n(self, key, cost)
    }

    fn peek_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        KeyedLimiter::peek_n(self, key, cost)
    }

    fn refund_n(&self, key: &str, cost: u64) -> bool {
        KeyedLimiter::refund_n(self, key, cost)
    }

    fn check_slot(
        &self,
        key: &str,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(Decision, Option<Timestamp>), CostTooLarge> {
        KeyedLimiter::check_slot(self, key, cost, max_delay)
    }

    fn refund_slot(&self, key: &str, cost: u64, end: Timestamp) -> bool {
        KeyedLimiter::refund_slot(self, key, cost, end)
    }

    fn reset(&self, key: &str) -> bool {
        KeyedLimiter::reset(self, key)
    }
}

impl<C: Clock> LocalFallback for KeyedLogLimiter<str, C> {
    fn check_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        KeyedLogLimiter::check_n(self, key, cost)
    }

    fn peek_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        KeyedLogLimiter::peek_n(self, key, cost)
    }

    fn reset(&self, key: &str) -> bool {
        KeyedLogLimiter::reset(self, key)
    }
}

impl<A: Algorithm, C: Clock> LocalFallback for DirectLimiter<A, C> {
    fn check_n(&self, _key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        DirectLimiter::check_n(self, cost)
    }

    fn peek_n(&self, _key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        DirectLimiter::peek_n(self, cost)
    }

    fn refund_n(&self, _key: &str, cost: u64) -> bool {
        DirectLimiter::refund_n(self, cost)
    }

    fn check_slot(
        &self,
        _key: &str,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(Decision, Option<Timestamp>), CostTooLarge> {
        DirectLimiter::check_slot(self, cost, max_delay)
    }

    fn refund_slot(&self, _key: &str, cost: u64, end: Timestamp) -> bool {
        DirectLimiter::refund_slot(self, cost, end)
    }
}

impl<C: Clock> LocalFallback for LogLimiter<C> {
    fn check_n(&self, _key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        LogLimiter::check_n(self, cost)
    }

    fn peek_n(&self, _key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        LogLimiter::peek_n(self, cost)
    }
}

/// Which path decided a distributed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecidedBy {
    /// The script on the Redis server: the fleet-wide quota.
    Redis,
    /// Redis did not answer; [`FailurePolicy::FailOpen`] admitted the request uncounted.
    FailOpen,
    /// Redis did not answer; [`FailurePolicy::FailClosed`] refused the request.
    FailClosed,
    /// Redis did not answer; the [`FailurePolicy::Fallback`] limiter decided.
    Fallback,
    /// A [`LeasedLimiter`](super::LeasedLimiter) decided without a round trip, on units it
    /// leased from the fleet-wide quota (or, for a refusal, on what Redis last said of it):
    /// `docs/distributed.md`, "Leases".
    Lease,
}

/// Why Redis did not decide: a category, and for the connection's and the server's failures
/// their [`RedisFailureCause`] ([`cause`](Self::cause) gives one for every category).
///
/// Its `Display` says what happened and what to fix: `Connection(ConnectionRefused)` reads
/// "the connection to Redis failed: connection refused: nothing listens at that host and port
/// (check the address, and that Redis runs)".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// No reply within the per-decision deadline (Redis slow, or reconnecting).
    Timeout,
    /// The connection could not be made or was lost (refused, reset, the password or the
    /// database of the URL refused at set-up...): the connection is made again by itself (see
    /// `docs/distributed.md`, "Failures").
    Connection(RedisFailureCause),
    /// Redis answered with an error of its own (loading, read-only, busy, a cluster's topology
    /// changing...), other than [`OutOfMemory`](Self::OutOfMemory).
    Server(RedisFailureCause),
    /// Redis refused the decision's write for memory (`OOM`: `used_memory` above `maxmemory`
    /// under `noeviction`): the state in Redis is as it was, nothing counted. Apart from
    /// [`Server`](Self::Server) so that operators can alert on it: it lasts until memory is
    /// freed or `maxmemory` raised, and it is not a sign that Redis is down.
    ///
    /// The failure policy answers, as for any failure: the decision could not be made in
    /// Redis, and the policy is what the operator chose for that. The breaker stays closed (as
    /// for every error reply): Redis answered, within one round trip, and the decisions that
    /// write nothing (a refusal, a peek) are still decided by it; an open breaker would send
    /// them to the policy as well (`docs/distributed.md`, "Redis memory").
    OutOfMemory,
    /// Redis answered something that is not a decision.
    Reply,
    /// Redis failed (timed out or lost the connection) less than a probe interval ago, for this
    /// cause (the last failure's), so it was not asked (see
    /// [`RedisLimiterBuilder::probe_interval`](super::RedisLimiterBuilder::probe_interval)). On a
    /// cluster, "Redis" is the slots of the key's group (see `docs/distributed.md`, "Redis
    /// Cluster").
    RecentlyDown(RedisFailureCause),
}

impl Failure {
    /// The cause: the one carried, or the category's own (a timeout, memory, a reply).
    pub fn cause(&self) -> RedisFailureCause {
        match *self {
            Failure::Timeout => RedisFailureCause::Timeout,
            Failure::Connection(cause) | Failure::Server(cause) | Failure::RecentlyDown(cause) => cause,
            Failure::OutOfMemory => RedisFailureCause::OutOfMemory,
            Failure::Reply => RedisFailureCause::UnexpectedReply,
        }
    }

    /// The failure a Redis client's error is: its cause, in the category it belongs to.
    pub(crate) fn from_cause(cause: RedisFailureCause) -> Failure {
        match cause {
            RedisFailureCause::Timeout => Failure::Timeout,
            RedisFailureCause::ConnectionRefused
            | RedisFailureCause::ConnectionLost
            | RedisFailureCause::Unreachable
            | RedisFailureCause::AuthenticationFailed
            | RedisFailureCause::NoSuchDatabase
            | RedisFailureCause::NotACluster => Failure::Connection(cause),
            RedisFailureCause::OutOfMemory => Failure::OutOfMemory,
            RedisFailureCause::UnexpectedReply => Failure::Reply,
            _ => Failure::Server(cause),
        }
    }

    /// Whether decisions should skip Redis for a pause after this failure: Redis did not
    /// answer, or the connection could not be made (an error reply is an answer, within one
    /// round trip).
    pub(crate) fn opens_the_breaker(&self) -> bool {
        matches!(self, Failure::Timeout | Failure::Connection(_))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout => write!(f, "Redis did not answer: {}", RedisFailureCause::Timeout),
            Failure::Connection(cause) => write!(f, "the connection to Redis failed: {cause}"),
            Failure::Server(cause) => write!(f, "Redis answered an error: {cause}"),
            Failure::OutOfMemory => write!(f, "{}", RedisFailureCause::OutOfMemory),
            Failure::Reply => write!(f, "{}", RedisFailureCause::UnexpectedReply),
            Failure::RecentlyDown(cause) => write!(
                f,
                "not asked: Redis failed less than a probe interval ago ({cause})"
            ),
        }
    }
}

/// A distributed decision: the core's [`Decision`], and which path made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[must_use = "a decision that is not looked at limits nothing"]
pub struct RedisDecision {
    /// The answer, the same type a local limiter gives.
    pub decision: Decision,
    /// Which path decided.
    pub decided_by: DecidedBy,
    /// Why Redis did not decide (`None` when it did).
    pub failure: Option<Failure>,
}

impl RedisDecision {
    pub(crate) const fn by_redis(decision: Decision) -> RedisDecision {
        RedisDecision {
            decision,
            decided_by: DecidedBy::Redis,
            failure: None,
        }
    }

    /// `true` when the request may proceed (see [`Decision::is_allowed`]).
    pub const fn is_allowed(&self) -> bool {
        self.decision.is_allowed()
    }
}
