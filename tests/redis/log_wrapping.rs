//! The packed Redis log's integer reply, its window search and its rewrite, at edges the other
//! Redis log tests do not reach. Every decision is compared with the local `LogLimiter`.
//!
//! - Counts modulo 2^32: every log the tests build counts from 0, so no test ever reads a log
//!   whose counts wrap. Here the Redis log's counts are shifted (every record's count and the
//!   trailer's two, by the same amount modulo 2^32) between decisions, so that the wrap falls
//!   before, inside and after the window, and the searches, the refusal's blocking record and
//!   the rewrite all cross it.
//! - The one-integer refusal's reset digit at its largest (`reset == w`, decided at the newest
//!   record) and one past it (the clock 1 µs behind the newest record: packed).

use std::time::Duration;

use crate::redis_common::{client_time_limiter, raw_connection, shared_database, SharedDatabase};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tollgate::distributed::DecidedBy;
use tollgate::{Decision, LogLimiter, ManualClock, Quota, SlidingLog, Timestamp};

const BASE_MICROS: u64 = 1_700_000_040_000_000;

/// Shifts every count of the packed log at `key` (each record's and the trailer's two) by the
/// same amount modulo 2^32, keeping its TTL: the same log, counted from another start. The
/// amount puts the wrap just before or after the count of record `pick % (records + 1)` (0:
/// the trailer's count before the first record), `delta` units away.
async fn shift_counts(raw: &mut redis::aio::MultiplexedConnection, key: &str, pick: u64, delta: u32) {
    let log: Option<Vec<u8>> = raw.get(key).await.unwrap();
    let Some(mut log) = log else { return };
    assert!(
        log.len() >= 28 && (log.len() - 16) % 12 == 0,
        "{} bytes",
        log.len()
    );
    let records = (log.len() - 16) / 12;
    let count_at = |log: &[u8], at: usize| u32::from_le_bytes(log[at..at + 4].try_into().unwrap());
    let chosen = match pick as usize % (records + 1) {
        0 => 12 * records,
        record => 12 * (record - 1) + 8,
    };
    // The chosen count becomes `2^32 - delta`... or `delta` past the wrap.
    let offset = count_at(&log, chosen).wrapping_neg().wrapping_add(delta);
    let mut add = |at: usize| {
        let count = count_at(&log, at);
        log[at..at + 4].copy_from_slice(&count.wrapping_add(offset).to_le_bytes());
    };
    for record in 0..records {
        add(12 * record + 8);
    }
    add(12 * records);
    add(12 * records + 4);
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(log)
        .arg("KEEPTTL")
        .query_async(raw)
        .await
        .unwrap();
}

/// xorshift64*: a failure replays.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_log_whose_counts_wrap_decides_as_the_local_limiter() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    // (limit, window in s): a short log, one that keeps records that left, and the largest.
    for (limit, window) in [(7u64, 16u64), (40, 80), (256, 600)] {
        let clock = ManualClock::new();
        let quota = Quota::new(limit, Duration::from_secs(window)).unwrap();
        let log = SlidingLog::new(quota).unwrap();
        let local = LogLimiter::with_clock(log, ManualClock::new());
        let remote = client_time_limiter(&server, log, &clock, &format!("wrap{limit}:")).await;
        let key = remote.redis_key("k");
        let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ limit);
        let (mut at, mut admitted, mut refused) = (100_000u64, 0, 0);
        for step in 0..1_500 {
            // Every few steps, the counts start elsewhere: the wrap lands 0 to limit units from
            // either end of the log, or anywhere.
            if step % 3 == 0 {
                let pick = random.below(1 << 20);
                let delta = (random.below(5) as u32).wrapping_sub(2);
                shift_counts(&mut raw, &key, pick, delta).await;
            }
            at = match random.below(100) {
                0..60 => at + random.below(window / 8 + 1),
                60..80 => at,
                80..90 => at + random.below(2 * window),
                _ => at - random.below(window / 2),
            };
            let weight = match random.below(10) {
                0..7 => 1,
                7 => 0,
                _ => random.below(limit + 1),
            };
            let now = Timestamp::from_nanos((BASE_MICROS + at * 1_000_000) * 1_000);
            clock.set(now);
            let expected = local.check_n_at(weight, now).unwrap();
            let answer = remote.check_n("k", weight).await.unwrap();
            let context = format!("limit {limit}: step {step} at {at} s, weight {weight}");
            assert_eq!(answer.decided_by, DecidedBy::Redis, "{context}");
            assert_eq!(answer.decision, expected, "{context}");
            if weight > 0 {
                admitted += u32::from(expected.is_allowed());
                refused += u32::from(!expected.is_allowed());
            }
        }
        assert!(
            admitted >= 50 && refused >= 50,
            "limit {limit}: {admitted}/{refused}"
        );
    }
}

/// A refusal decided at the newest record has `reset == w`, the reset digit's largest value
/// (one integer); 1 µs behind it, `w + 1` (packed). Both read as the local limiter's.
///
/// A window of a few µs gives the key a TTL of 1 ms of the server's real time, which the test
/// takes off (`PERSIST`) after each call; on a loaded machine the key can expire first. Such a
/// run (the key gone after a call that should have left it) is started again, on a fresh key,
/// up to 20 times: every run that completes compares every step.
#[tokio::test(flavor = "current_thread")]
async fn a_refusal_at_and_just_behind_the_newest_record_reads_as_the_local_one() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    for (limit, window) in [(1u64, 1u64), (2, 10_000_000), (256, 3)] {
        let mut completed = false;
        for attempt in 0..20 {
            // Each attempt on a prefix of its own: nothing of an earlier one is read.
            let prefix = format!("edge{limit}-{window}-{attempt}:");
            if refusals_at_the_newest_record(&server, &mut raw, limit, window, &prefix).await {
                completed = true;
                break;
            }
        }
        assert!(
            completed,
            "limit {limit}, w {window} µs: the key expired in every attempt"
        );
    }
}

/// One run of the steps on a fresh key under `prefix`, each compared with the local log:
/// `false` as soon as the key expired before the test took its TTL off (nothing more is
/// compared), `true` when every step was.
async fn refusals_at_the_newest_record(
    server: &SharedDatabase,
    raw: &mut MultiplexedConnection,
    limit: u64,
    window: u64,
    prefix: &str,
) -> bool {
    let clock = ManualClock::new();
    let quota = Quota::new(limit, Duration::from_micros(window)).unwrap();
    let log = SlidingLog::new(quota).unwrap();
    let local = LogLimiter::with_clock(log, ManualClock::new());
    let remote = client_time_limiter(server, log, &clock, prefix).await;
    let key = remote.redis_key("k");
    let t = BASE_MICROS;
    let steps: [(u64, u64); 5] = [
        (t, limit),
        (t, 1),
        (t - 1, 1),
        (t - 1, limit),
        (t + window - 1, 1),
    ];
    for (index, (micros, weight)) in steps.into_iter().enumerate() {
        let now = Timestamp::from_nanos(micros * 1_000);
        clock.set(now);
        let expected: Decision = local.check_n_at(weight, now).unwrap();
        let answer = remote.check_n("k", weight).await.unwrap();
        // The first step admits, so the key exists from then on, unless it expired before this.
        let _: bool = raw.persist(&key).await.unwrap();
        if !raw.exists::<_, bool>(&key).await.unwrap() {
            return false;
        }
        let context = format!("limit {limit}, w {window} µs: step {index}");
        assert_eq!(answer.decided_by, DecidedBy::Redis, "{context}");
        assert_eq!(answer.decision, expected, "{context}");
    }
    true
}
