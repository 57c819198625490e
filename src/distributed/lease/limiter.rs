//! The keyed leased limiter: decisions on this process's leases, round trips for the requests
//! they do not hold, refreshes on a task.

use std::fmt;
use std::sync::Arc;

use redis::Value;

use super::clock::LocalClock;
use super::counters::{LeaseCounters, LeaseCounts};
use super::ledger::{Ask, Grant, LeaseTable, Spend};
use super::scripts;
use crate::distributed::classify::classify;
use crate::distributed::limiter::{packed_arguments, Mode};
use crate::distributed::{
    DecidedBy, Failure, FailurePolicy, RedisAlgorithm, RedisCheckError, RedisConfigError, RedisDecision,
    RedisFailureCause, RedisLimiter, RedisResetError,
};
use crate::meter::Metering;
use crate::{CostTooLarge, Decision};

/// A keyed limiter that spends, locally, units it leased from a quota shared through Redis
/// (`docs/distributed.md`, "Leases"): built with [`RedisLimiterBuilder::leased`](crate::distributed::RedisLimiterBuilder::leased).
///
/// It answers what a [`RedisLimiter`] answers (a [`RedisDecision`], with the same weights,
/// [`peek`](Self::peek), failure policy and tower layer), from the same Redis keys, so leased
/// and per-decision instances of one prefix share each key's quota. A decision the lease holds
/// is made here, without a round trip ([`DecidedBy::Lease`]); one it does not is Redis's, one
/// round trip that also brings the key's next lease. The whole fleet never admits more than
/// the quota: every unit was taken from it in Redis before it is spent, and spent only while
/// it is valid. What it costs: a unit leased and not spent is a unit the rest of the fleet is
/// refused, until it passes (a bucket's slot when its time comes, a window's units when it
/// ends) or is given back ([`release`](Self::release), or dropping the limiter in a tokio
/// runtime).
///
/// Cheap to share across tasks (`Arc` it, or use it through a reference); a refresh runs on a
/// task of the tokio runtime that made the decision which started it.
///
/// ```no_run
/// use tollgate::distributed::{DecidedBy, FailurePolicy, RedisLimiter};
/// use tollgate::FixedWindow;
///
/// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = RedisLimiter::builder(
///     "redis://127.0.0.1:6379/",
///     FixedWindow::new("6000/min".parse()?)?,
///     FailurePolicy::FailClosed { retry_after: std::time::Duration::from_secs(1) },
/// )
/// .leased()
/// .connect()
/// .await?;
/// let answer = limiter.check("client-192.0.2.1").await?;
/// // The first request of a key is Redis's; later ones mostly the lease's.
/// assert!(matches!(answer.decided_by, DecidedBy::Redis | DecidedBy::Lease));
/// # Ok(())
/// # }
/// ```
pub struct LeasedLimiter {
    pub(super) shared: Arc<Shared>,
    /// Its meter, once named (feature `metrics`): each caller's own, so that naming it needs
    /// no access to what its refresh tasks share.
    pub(crate) metering: Metering,
}

/// What the limiter and its refresh tasks share.
pub(super) struct Shared {
    /// The per-decision limiter: its connection, breakers, keys, clock, deadline and policy
    /// (and its peeks and resets).
    pub(super) redis: RedisLimiter,
    /// The quota the leases are taken from, as the limiter was built: the one every lease
    /// script is sent and every spend is read under (`table`'s rule), whatever
    /// [`RedisLimiter::set_algorithm`] later does to `redis`.
    pub(super) algorithm: RedisAlgorithm,
    /// `algorithm`'s script parameters.
    pub(super) params: [u64; 2],
    pub(super) table: LeaseTable,
    pub(super) clock: LocalClock,
    pub(super) counters: LeaseCounters,
}

/// Why a round trip gave no grant.
enum Missed {
    /// The failure policy answers.
    Failure(Failure),
    /// A typed error about the key, whatever the policy.
    Key(RedisCheckError),
}

/// Ends a key's sized ask that got no answer (the round trip failed, or its future was
/// dropped), so that the key may ask again.
struct AskGuard<'a> {
    table: &'a LeaseTable,
    hash: u64,
    armed: bool,
}

impl Drop for AskGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.table.abandon(self.hash);
        }
    }
}

impl LeasedLimiter {
    /// Decides one request of weight 1 for `key`, and counts it if admitted.
    ///
    /// # Errors
    /// See [`check_n`](Self::check_n).
    pub async fn check(&self, key: &str) -> Result<RedisDecision, RedisCheckError> {
        self.check_n(key, 1).await
    }

    /// Decides one request of weight `cost` for `key`, and counts it if admitted: from this
    /// process's lease when it holds the request, without a round trip; else by Redis.
    ///
    /// # Errors
    /// As [`RedisLimiter::check_n`]: [`RedisCheckError::CostTooLarge`] above the capacity,
    /// [`RedisCheckError::WrongType`] or [`RedisCheckError::CorruptState`] for a key holding
    /// something else, [`RedisCheckError::TimeOutOfRange`] for a client time past 2^52 µs.
    pub async fn check_n(&self, key: &str, cost: u64) -> Result<RedisDecision, RedisCheckError> {
        self.shared.check_n(&self.metering, key, cost).await
    }

    /// What [`check`](Self::check) would answer, without counting anything.
    ///
    /// # Errors
    /// As for [`check_n`](Self::check_n).
    pub async fn peek(&self, key: &str) -> Result<RedisDecision, RedisCheckError> {
        self.peek_n(key, 1).await
    }

    /// What [`check_n`](Self::check_n) would answer, without counting anything: this
    /// process's lease's answer when it holds the request, else Redis's peek.
    ///
    /// # Errors
    /// As for [`check_n`](Self::check_n).
    pub async fn peek_n(&self, key: &str, cost: u64) -> Result<RedisDecision, RedisCheckError> {
        let shared = &self.shared;
        CostTooLarge::check(cost, shared.capacity())?;
        let local = shared.clock.now()?;
        let hash = shared.table.hash(key.as_bytes());
        match shared.table.peek(hash, local, cost) {
            Spend::Lease { decision, .. } | Spend::Refused { decision } => Ok(by_lease(decision)),
            Spend::Ask(_) => self.metering.peeked(shared.redis.peek_n(key, cost)).await,
        }
    }

    /// Forgets everything counted for `key`, for the whole fleet ([`RedisLimiter::reset`]),
    /// and this process's lease of it. Other processes' leases of `key` are theirs: they still
    /// spend them, on top of the fresh quota.
    ///
    /// # Errors
    /// As [`RedisLimiter::reset`].
    pub async fn reset(&self, key: &str) -> Result<bool, RedisResetError> {
        let shared = &self.shared;
        let hash = shared.table.hash(key.as_bytes());
        if let Ok(local) = shared.clock.now() {
            let _ = shared.table.forget(hash, local);
        }
        shared.redis.reset(key).await
    }

    /// Gives back to Redis what this process's leases still hold and Redis can take back: a
    /// bucket's last range while it still ends its key's queue (`gcra_refund.lua` with the
    /// range's end), a window's units while it lasts (`window_return.lua`). Nothing is
    /// spent from them afterwards (a later request asks for a new lease). Returns the units
    /// given back. Dropping the limiter in a tokio runtime does the same on a task; a process
    /// that stops awaits this instead, to know its units are back before it exits. What is not
    /// given back passes unused (a slot when its time comes, a window's units when it ends).
    pub async fn release(&self) -> u64 {
        self.shared.release(&self.metering).await
    }

    /// One round trip that tells whether this configuration can work at all:
    /// [`RedisLimiter::verify`].
    ///
    /// # Errors
    /// As [`RedisLimiter::verify`].
    pub async fn verify(&self) -> Result<(), RedisConfigError> {
        self.shared.redis.verify().await
    }

    /// The units this process's leases can still spend now, every key's: what it would strand
    /// if it stopped without [`release`](Self::release). Locks each key's lease in turn (for
    /// reports and tests, not for the request path).
    pub fn units_held(&self) -> u64 {
        self.shared
            .clock
            .now()
            .map_or(0, |local| self.shared.table.units(local))
    }

    /// What this limiter counted of its leases since it was built.
    pub fn counts(&self) -> LeaseCounts {
        self.shared.counters.snapshot()
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> RedisAlgorithm {
        self.shared.algorithm
    }

    /// The heaviest request that can ever pass.
    pub fn capacity(&self) -> u64 {
        self.shared.capacity()
    }

    /// The most units one lease holds.
    pub fn max_lease(&self) -> u64 {
        self.shared.table.sizing().max_lease
    }

    /// What this limiter answers by when Redis does not (and this process's lease does not
    /// hold the request).
    pub fn failure_policy(&self) -> &FailurePolicy {
        self.shared.redis.failure_policy()
    }

    /// The cause of the last failure of a round trip ([`RedisLimiter::last_failure`]).
    pub fn last_failure(&self) -> Option<RedisFailureCause> {
        self.shared.redis.last_failure()
    }

    /// The key that holds `key`'s state in Redis: `{prefix}{{key}}:{algorithm}`.
    pub fn redis_key(&self, key: &str) -> String {
        self.shared.redis.redis_key(key)
    }

    /// The per-decision limiter on the same keys, connection and policy.
    pub fn per_decision(&self) -> &RedisLimiter {
        &self.shared.redis
    }
}

/// A decision made on what this process holds.
fn by_lease(decision: Decision) -> RedisDecision {
    RedisDecision {
        decision,
        decided_by: DecidedBy::Lease,
        failure: None,
    }
}

impl Shared {
    /// The heaviest request that can ever pass, under the quota the leases are taken from.
    #[inline]
    pub(super) fn capacity(&self) -> u64 {
        self.table.rule().capacity()
    }

    /// See [`LeasedLimiter::check_n`].
    pub(super) async fn check_n(
        self: &Arc<Self>,
        metering: &Metering,
        key: &str,
        cost: u64,
    ) -> Result<RedisDecision, RedisCheckError> {
        CostTooLarge::check(cost, self.capacity())?;
        let local = self.clock.now()?;
        let hash = self.table.hash(key.as_bytes());
        match self.spend(metering, key, hash, local, cost) {
            Ok(decision) => Ok(decision),
            Err(ask) => self.ask(metering, key, hash, ask).await,
        }
    }

    /// The decision from what this process holds, starting a refresh if the lease ran low; or
    /// the round trip to make.
    #[inline]
    fn spend(
        self: &Arc<Self>,
        metering: &Metering,
        key: &str,
        hash: u64,
        local: u64,
        cost: u64,
    ) -> Result<RedisDecision, Ask> {
        match self.table.spend(hash, local, cost) {
            Spend::Ask(ask) => Err(ask),
            spend => Ok(self.decided_locally(metering, key, hash, spend)),
        }
    }

    /// The decision from what this process holds, or `None` (nothing changed) when Redis must
    /// decide: the tower layer's synchronous path.
    #[cfg(feature = "tower")]
    #[inline]
    pub(super) fn spend_locally(
        self: &Arc<Self>,
        metering: &Metering,
        key: &str,
        hash: u64,
        local: u64,
        cost: u64,
    ) -> Option<RedisDecision> {
        let spend = self.table.spend_locally(hash, local, cost)?;
        Some(self.decided_locally(metering, key, hash, spend))
    }

    /// A local spend's answer, counted on this thread's lane of `metering`; a refresh it asked
    /// for is started (`key` is copied for it).
    fn decided_locally(
        self: &Arc<Self>,
        metering: &Metering,
        key: &str,
        hash: u64,
        spend: Spend,
    ) -> RedisDecision {
        self.counters.local_decision();
        let decision = match spend {
            Spend::Lease { decision, refresh } => {
                if let Some(ask) = refresh {
                    self.start_refresh(metering, key.to_owned(), hash, ask);
                }
                decision
            }
            Spend::Refused { decision } => decision,
            // Not a local decision (never passed here).
            Spend::Ask(_) => Decision::denied(0, 0, 0),
        };
        by_lease(metering.counted(decision))
    }

    /// A request's round trip: Redis decides it, and the lease it grants is installed.
    pub(super) async fn ask(
        &self,
        metering: &Metering,
        key: &str,
        hash: u64,
        ask: Ask,
    ) -> Result<RedisDecision, RedisCheckError> {
        let mut guard = AskGuard {
            table: &self.table,
            hash,
            armed: ask.sized,
        };
        let redis_key = self.redis.redis_key(key);
        let failure = match self.round_trip(metering, &redis_key, &ask).await {
            Ok((grant, sent)) => {
                guard.armed = false;
                self.install(metering, key, hash, &ask, &grant, sent);
                match self.table.rule().answer(&grant, ask.cost) {
                    Some(decision) => {
                        let answer = RedisDecision::by_redis(decision);
                        metering.redis_decided(&answer, true);
                        return Ok(answer);
                    }
                    None => Failure::Reply,
                }
            }
            Err(Missed::Key(error)) => return Err(error),
            Err(Missed::Failure(failure)) => failure,
        };
        drop(guard);
        let redis = &self.redis;
        let (decision, decided_by, _) =
            redis
                .policy
                .decide(key, ask.cost, Mode::Check, self.capacity(), redis.probe_interval);
        let answer = RedisDecision {
            decision,
            decided_by,
            failure: Some(failure),
        };
        metering.redis_decided(&answer, true);
        Ok(answer)
    }

    /// Starts a refresh of `key`'s lease on a task of the current tokio runtime (none: the
    /// refresh is dropped, and a later request asks).
    fn start_refresh(self: &Arc<Self>, metering: &Metering, key: String, hash: u64, ask: Ask) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.table.abandon(hash);
            return;
        };
        self.counters.refresh();
        let shared = Arc::clone(self);
        // An `Arc` with the `metrics` feature; nothing (and `Copy`) without it.
        #[allow(clippy::clone_on_copy)]
        let metering = metering.clone();
        runtime.spawn(async move {
            let mut guard = AskGuard {
                table: &shared.table,
                hash,
                armed: true,
            };
            let redis_key = shared.redis.redis_key(&key);
            match shared.round_trip(&metering, &redis_key, &ask).await {
                Ok((grant, sent)) => {
                    guard.armed = false;
                    shared.install(&metering, &key, hash, &ask, &grant, sent);
                }
                Err(Missed::Failure(failure)) => metering.redis_failed(failure),
                Err(Missed::Key(_)) => {}
            }
        });
    }

    fn install(&self, metering: &Metering, key: &str, hash: u64, ask: &Ask, grant: &Grant, sent: u64) {
        let local = self.clock.now().unwrap_or(sent);
        let dropped = self.table.install(hash, key, ask, grant, sent, local);
        let granted = match *grant {
            Grant::Bucket { granted, .. } | Grant::Window { granted, .. } => granted,
        };
        let own = if granted > 0 { ask.cost.min(granted) } else { 0 };
        // A grant for a key no longer held passes unused.
        self.counters
            .leased(granted - own, dropped.unwrap_or(granted - own));
        if granted > own {
            metering.lease_granted(granted - own);
        }
    }

    /// One call of the lease script for `ask` on `redis_key`, under the key's breaker and the
    /// deadline: the grant, and the local time the call was sent.
    async fn round_trip(
        &self,
        metering: &Metering,
        redis_key: &str,
        ask: &Ask,
    ) -> Result<(Grant, u64), Missed> {
        let redis = &self.redis;
        let breaker = redis.breakers.of(redis_key);
        if let Err(cause) = breaker.should_ask() {
            return Err(Missed::Failure(Failure::RecentlyDown(cause)));
        }
        let sent = self.clock.now().map_err(Missed::Key)?;
        let (arguments, length) = packed_arguments(ask.cost, self.params, self.clock.argument(sent));
        let want = ask.want.to_le_bytes();
        let with_mode: [&[u8]; 3];
        let without_mode: [&[u8]; 2];
        let args: &[&[u8]] = match scripts::lease_mode(self.table.rule()) {
            Some(mode) => {
                with_mode = [&arguments[..length], mode, &want];
                &with_mode
            }
            None => {
                without_mode = [&arguments[..length], &want];
                &without_mode
            }
        };
        let script = scripts::lease_script(self.table.rule());
        self.counters.round_trip();
        let keys = [redis_key];
        let call = redis.connection.run(script, &keys, args);
        let answer = metering
            .lease_timed(tokio::time::timeout(redis.deadline, call))
            .await;
        let failure = match answer {
            Ok(Ok(reply)) => match scripts::grant(self.table.rule(), &reply, ask.cost, ask.want) {
                Some(grant) => {
                    breaker.succeeded();
                    return Ok((grant, sent));
                }
                None => Failure::Reply,
            },
            Ok(Err(error)) => {
                let cluster = redis.connection.is_cluster();
                match classify(&error, redis_key.to_owned(), None, cluster) {
                    Ok(failure) => failure,
                    Err(about_the_key) => {
                        // Redis answered (about the key's content): it is up.
                        breaker.succeeded();
                        return Err(Missed::Key(about_the_key));
                    }
                }
            }
            Err(_elapsed) => Failure::Timeout,
        };
        if failure.opens_the_breaker() {
            redis.breakers.failed(breaker, failure.cause());
        } else {
            redis.breakers.note(failure.cause());
        }
        Err(Missed::Failure(failure))
    }

    /// See [`LeasedLimiter::release`].
    async fn release(&self, metering: &Metering) -> u64 {
        let Ok(local) = self.clock.now() else {
            return 0;
        };
        let script = scripts::give_back_script(self.table.rule());
        let mut given = 0;
        for (key, back) in self.table.give_back(local) {
            let redis = &self.redis;
            let redis_key = redis.redis_key(&key);
            let Ok(sent) = self.clock.now() else {
                break;
            };
            let (arguments, length) = packed_arguments(back.units, self.params, self.clock.argument(sent));
            let end = back.end.to_le_bytes();
            let args: [&[u8]; 2] = [&arguments[..length], &end];
            let keys = [redis_key.as_str()];
            let call = redis.connection.run(script, &keys, &args);
            if let Ok(Ok(reply)) = tokio::time::timeout(redis.deadline, call).await {
                let units = match reply {
                    // `gcra_refund.lua` answers whether the TAT moved back: the whole range.
                    Value::Int(1) if matches!(self.table.rule(), super::ledger::LeaseRule::Bucket { .. }) => {
                        back.units
                    }
                    Value::Int(units) => u64::try_from(units).unwrap_or(0).min(back.units),
                    _ => 0,
                };
                given += units;
            }
        }
        self.counters.given_back(given);
        metering.lease_returned(given);
        given
    }
}

impl Drop for LeasedLimiter {
    /// Gives back what this process's leases still hold, as [`release`](Self::release) does, on
    /// a task of the tokio runtime it is dropped in: the rest of the fleet has those units at
    /// once rather than when they pass. Dropped outside a runtime, or holding nothing, it gives
    /// nothing back (what it holds passes unused, at the end of its lifetime).
    fn drop(&mut self) {
        if self.units_held() == 0 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        // An `Arc` with the `metrics` feature; nothing (and `Copy`) without it.
        #[allow(clippy::clone_on_copy)]
        let metering = self.metering.clone();
        runtime.spawn(async move {
            shared.release(&metering).await;
        });
    }
}

impl fmt::Debug for LeasedLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedLimiter")
            .field("redis", &self.shared.redis)
            .field("max_lease", &self.shared.table.sizing().max_lease)
            .field("lease_interval_us", &self.shared.table.sizing().interval)
            .finish_non_exhaustive()
    }
}
