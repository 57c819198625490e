//! The limiter's breakers (see `breaker.rs`), each with the cause of its last failure: one for
//! a single Redis; on a cluster, one per group of [`SLOTS_PER_GROUP`] hash slots, so that a
//! master that fails sends only its own slots' decisions to the failure policy, and the other
//! masters' keys are still decided by Redis.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use super::breaker::Breaker;
use super::cause::RedisFailureCause;

/// The hash slots of a Redis Cluster (`CLUSTER KEYSLOT` answers below it).
pub(crate) const SLOTS: u16 = 16_384;

/// Slots per breaker on a cluster: 256 breakers of 64 consecutive slots. A master serves whole
/// ranges of slots (three masters: 5,461 or 5,462 each), so a group straddles two masters only at
/// a range's edge (or after single slots were moved): one failing master then pauses Redis, for
/// one probe interval, for the keys of the other's slots in that group too.
pub(crate) const SLOTS_PER_GROUP: u16 = 64;

/// One breaker and the cause of the failure that last opened it.
#[derive(Debug)]
pub(crate) struct Guard {
    breaker: Breaker,
    /// [`RedisFailureCause::code`] of the last failure.
    cause: AtomicU8,
}

impl Guard {
    fn new(pause: Duration) -> Guard {
        Guard {
            breaker: Breaker::new(pause),
            cause: AtomicU8::new(RedisFailureCause::Timeout.code()),
        }
    }

    /// `Ok` when this call should ask Redis; else the cause of the failure that opened the
    /// breaker less than a pause ago.
    pub(crate) fn should_ask(&self) -> Result<(), RedisFailureCause> {
        if self.breaker.should_ask() {
            return Ok(());
        }
        // Relaxed: the byte is self-contained (only read for the report); a stale one names the
        // failure before the last.
        Err(RedisFailureCause::from_code(self.cause.load(Ordering::Relaxed)))
    }

    /// Redis failed for `cause`: skip it for a pause.
    pub(crate) fn failed(&self, cause: RedisFailureCause) {
        // Relaxed: as in `should_ask`.
        self.cause.store(cause.code(), Ordering::Relaxed);
        self.breaker.failed();
    }

    /// Redis answered: ask it every time again.
    pub(crate) fn succeeded(&self) {
        self.breaker.succeeded();
    }
}

/// The breakers of one limiter, and the cause of the last failure any of them met.
#[derive(Debug)]
pub(crate) struct Breakers {
    guards: Box<[Guard]>,
    /// [`RedisFailureCause::code`] of the last failure, or [`NO_FAILURE`].
    last: AtomicU8,
}

/// `Breakers::last` before any failure.
const NO_FAILURE: u8 = u8::MAX;

impl Breakers {
    /// One breaker for a single Redis.
    pub(crate) fn single(pause: Duration) -> Breakers {
        Breakers {
            guards: Box::new([Guard::new(pause)]),
            last: AtomicU8::new(NO_FAILURE),
        }
    }

    /// One breaker per group of [`SLOTS_PER_GROUP`] slots of a cluster.
    pub(crate) fn cluster(pause: Duration) -> Breakers {
        Breakers {
            guards: (0..SLOTS / SLOTS_PER_GROUP).map(|_| Guard::new(pause)).collect(),
            last: AtomicU8::new(NO_FAILURE),
        }
    }

    /// Redis failed for `cause` on the key whose breaker is `guard` (one of these): skip it for
    /// a pause, and remember the cause as the limiter's last.
    pub(crate) fn failed(&self, guard: &Guard, cause: RedisFailureCause) {
        self.note(cause);
        guard.failed(cause);
    }

    /// A call failed for `cause` without pausing Redis (an error reply: Redis answered): only
    /// remember the cause as the limiter's last.
    pub(crate) fn note(&self, cause: RedisFailureCause) {
        // Relaxed: a report, read by a caller that wants the latest cause; nothing else is
        // published through it.
        self.last.store(cause.code(), Ordering::Relaxed);
    }

    /// The cause of the last failure of any breaker, or `None` when Redis never failed.
    pub(crate) fn last_failure(&self) -> Option<RedisFailureCause> {
        // Relaxed: as in `failed`.
        match self.last.load(Ordering::Relaxed) {
            NO_FAILURE => None,
            code => Some(RedisFailureCause::from_code(code)),
        }
    }

    /// The breaker of the Redis key `key`: the one of a single Redis, or of `key`'s slot group.
    pub(crate) fn of(&self, key: &str) -> &Guard {
        match self.guards.len() {
            1 => &self.guards[0],
            groups => &self.guards[usize::from(slot(key.as_bytes()) / SLOTS_PER_GROUP) % groups],
        }
    }
}

/// The hash slot of `key` in a Redis Cluster: CRC16 (XMODEM) of its hash tag (the bytes between
/// its first `{` and the first `}` after it, when there are any), or of the whole key, modulo
/// 16384 (<https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/>, "Hash
/// tags").
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&byte| byte == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&byte| byte == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `CLUSTER KEYSLOT` of Redis 7.0.15 for these keys (the cluster tests compare every key
    /// they use with the server's answer too): a tag, two tags (the first counts), an empty tag
    /// (the whole key counts), an unclosed brace, and a client key that starts with `}` (its
    /// log keys fall in two slots).
    #[test]
    fn slots_are_those_redis_computes() {
        for (key, expected) in [
            ("a", 15_495),
            ("b", 3_300),
            ("c", 7_365),
            ("tollgate:{a}:tb2", 15_495),
            ("x{a}y{b}", 15_495),
            ("{}a", 10_875),
            ("a{", 14_311),
            ("tollgate:{}x}:log2", 13_406),
            ("tollgate:{}x}:log", 9_479),
            ("tollgate:{a}b}:log2", 15_495),
        ] {
            assert_eq!(slot(key.as_bytes()), expected, "{key}");
        }
    }

    #[test]
    fn a_cluster_has_one_breaker_per_slot_group() {
        let breakers = Breakers::cluster(Duration::from_secs(60));
        assert_eq!(breakers.guards.len(), 256);
        // "a" is in slot 15495 (group 242), "b" in slot 3300 (group 51).
        breakers
            .of("tollgate:{a}:tb2")
            .failed(RedisFailureCause::ConnectionRefused);
        assert_eq!(
            breakers.of("other:{a}:fw3").should_ask(),
            Err(RedisFailureCause::ConnectionRefused)
        );
        assert_eq!(breakers.of("tollgate:{b}:tb2").should_ask(), Ok(()));
        assert_eq!(breakers.last_failure(), None);
        breakers.failed(
            breakers.of("tollgate:{b}:tb2"),
            RedisFailureCause::AuthenticationFailed,
        );
        assert_eq!(
            breakers.last_failure(),
            Some(RedisFailureCause::AuthenticationFailed)
        );
        assert_eq!(
            breakers.of("tollgate:{b}:tb2").should_ask(),
            Err(RedisFailureCause::AuthenticationFailed)
        );
        breakers.of("tollgate:{a}:tb2").succeeded();
        assert_eq!(breakers.of("tollgate:{a}:tb2").should_ask(), Ok(()));
        let single = Breakers::single(Duration::from_secs(60));
        single.of("tollgate:{a}:tb2").failed(RedisFailureCause::Timeout);
        assert_eq!(
            single.of("tollgate:{b}:tb2").should_ask(),
            Err(RedisFailureCause::Timeout)
        );
    }
}
