//! A quota changed while keys are in flight (lowered, a window lengthened or shortened, a
//! rolling change across a fleet, a log quota crossing the packed limit of 256): the keys
//! counted under the old quota keep deciding under the new one, by Redis, never an error; the
//! limits `docs/distributed.md` states ("Changing a quota", "A changed window") are pinned.

use std::time::Duration;

use crate::redis_common::{client_time_limiter, raw_connection, shared_database, RedisUrl};
use redis::AsyncCommands;
use tollgate::distributed::{DecidedBy, RedisAlgorithm, RedisDecision, RedisLimiter};
use tollgate::{
    FixedWindow, LeakyBucket, ManualClock, Quota, SlidingLog, SlidingWindow, Timestamp, TokenBucket,
};

/// An operator lowers a quota while keys are in flight (a common reaction to abuse): the keys
/// counted under the old quota keep deciding under the new one, refused while they hold more
/// than it allows, never an error. Client time, frozen, so that nothing drains meanwhile.
#[tokio::test(flavor = "current_thread")]
async fn a_lowered_quota_refuses_keys_counted_under_the_old_one() {
    let server = shared_database();
    let at = Timestamp::from_secs(1_800_000_000);
    let (high, low): (Quota, Quota) = ("10/min".parse().unwrap(), "4/min".parse().unwrap());
    let pairs: [(RedisAlgorithm, RedisAlgorithm); 5] = [
        (
            TokenBucket::new(high).unwrap().into(),
            TokenBucket::new(low).unwrap().into(),
        ),
        (
            LeakyBucket::new(high).unwrap().into(),
            LeakyBucket::new(low).unwrap().into(),
        ),
        (
            FixedWindow::new(high).unwrap().into(),
            FixedWindow::new(low).unwrap().into(),
        ),
        (
            SlidingWindow::new(high).unwrap().into(),
            SlidingWindow::new(low).unwrap().into(),
        ),
        (
            SlidingLog::new(high).unwrap().into(),
            SlidingLog::new(low).unwrap().into(),
        ),
    ];
    for (before, after) in pairs {
        let name = before.name();
        let clock = ManualClock::starting_at(at);
        let before = client_time_limiter(&server, before, &clock, "lowered:").await;
        let after = client_time_limiter(&server, after, &clock, "lowered:").await;
        let admitted = before.check_n("abuser", 8).await.unwrap();
        assert!(admitted.is_allowed(), "{name}: 8 of 10 under the old quota");
        // 8 counted, 4 allowed now: refused (every algorithm), by Redis, with nothing left.
        let refused = after.check("abuser").await.unwrap();
        assert_eq!(refused.decided_by, DecidedBy::Redis, "{name}");
        assert!(refused.failure.is_none(), "{name}: {:?}", refused.failure);
        assert!(!refused.is_allowed(), "{name}: admitted past the lowered quota");
        assert_eq!(refused.decision.remaining(), 0, "{name}");
        // A key the old quota never saw gets the new quota.
        let fresh = after.check_n("newcomer", 4).await.unwrap();
        assert!(fresh.is_allowed(), "{name}");
        assert!(!after.check("newcomer").await.unwrap().is_allowed(), "{name}");
    }
}

/// `8:30` UTC on a day: inside an hour and a day, with the hour's end before the day's.
const HALF_PAST_EIGHT: u64 = 1_800_000_000 + 1_800;

/// Fills `key` under `before`'s window, then asks under `after`'s (same prefix, same client key)
/// at the same instant. Returns the limiter of the new quota and the answer it gave.
async fn after_a_window_change(
    server: &impl RedisUrl,
    clock: &ManualClock,
    before: RedisAlgorithm,
    after: RedisAlgorithm,
    prefix: &str,
) -> (RedisLimiter, RedisDecision) {
    let before = client_time_limiter(server, before, clock, prefix).await;
    let after = client_time_limiter(server, after, clock, prefix).await;
    assert!(before.check_n("k", 10).await.unwrap().is_allowed());
    let answer = after.check("k").await.unwrap();
    (after, answer)
}

/// A quota whose window grows (10/h to 10/d) reads the keys written under the old window: the
/// units counted this hour count today, decided by Redis with a retry-after within the day
/// (the stored hour index, read as a day index, once overflowed the reply and fell to the
/// failure policy), and the key then lives until the day's end, not the hour's.
#[tokio::test(flavor = "current_thread")]
async fn a_lengthened_window_keeps_counting_the_old_windows_units() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let (hour, day): (Quota, Quota) = ("10/h".parse().unwrap(), "10/d".parse().unwrap());
    let to_midnight = Duration::from_secs(86_400 - 8 * 3_600 - 1_800);
    let pairs: [(RedisAlgorithm, RedisAlgorithm, Duration); 2] = [
        (
            FixedWindow::new(hour).unwrap().into(),
            FixedWindow::new(day).unwrap().into(),
            to_midnight,
        ),
        (
            SlidingWindow::new(hour).unwrap().into(),
            SlidingWindow::new(day).unwrap().into(),
            // The whole day's count leaves the sliding window as the next day ends.
            to_midnight + Duration::from_secs(86_400),
        ),
    ];
    for (before, after, most) in pairs {
        let name = before.name();
        let clock = ManualClock::starting_at(Timestamp::from_secs(HALF_PAST_EIGHT));
        let (after, first) = after_a_window_change(&server, &clock, before, after, "longer:").await;
        for answer in [first, after.check("k").await.unwrap()] {
            assert_eq!(answer.decided_by, DecidedBy::Redis, "{name}: {answer:?}");
            assert!(!answer.is_allowed(), "{name}: admitted past 10 a day");
            let retry = answer.decision.retry_after();
            assert!(
                retry > Duration::ZERO && retry <= most,
                "{name}: retry after {retry:?}"
            );
        }
        // The refusal wrote the state again under the day: the key outlives the hour.
        let ttl: i64 = raw.pttl(after.redis_key("k")).await.unwrap();
        assert!(ttl > 3_600_000, "{name}: the key expires in {ttl} ms");
        // Two hours later, the same day: still refused.
        clock.advance(Duration::from_secs(2 * 3_600));
        let later = after.check("k").await.unwrap();
        assert_eq!(later.decided_by, DecidedBy::Redis, "{name}");
        assert!(!later.is_allowed(), "{name}: the hour's units were lost");
    }
}

/// A known limit (`docs/distributed.md`, "A changed window"): a log's key expires when its
/// newest unit leaves the window it was admitted under, and a refusal does not move that, so
/// after the window is lengthened a client refused until then loses its units when the old key
/// expires. Pinned so that a change to it is seen: a full log of 5 per 1 s, read under 5 per
/// 10 s, refuses at 0.1 s, then admits again at 1.5 s, where a local log still refuses. (The
/// margins, 0.9 s before the old key's expiry and 0.5 s after it, are for a loaded machine.)
#[tokio::test(flavor = "current_thread")]
async fn a_lengthened_log_window_loses_its_units_when_the_old_key_expires() {
    let server = shared_database();
    for limit in [5, 300] {
        let clock = ManualClock::new();
        let base = 1_700_000_000_000_000u64; // µs
        let at = |us: u64| Timestamp::from_nanos((base + us) * 1_000);
        clock.set(at(0));
        let short = SlidingLog::new(Quota::new(limit, Duration::from_secs(1)).unwrap()).unwrap();
        let long = SlidingLog::new(Quota::new(limit, Duration::from_secs(10)).unwrap()).unwrap();
        let before = client_time_limiter(&server, short, &clock, "lengthened:").await;
        let after = client_time_limiter(&server, long, &clock, "lengthened:").await;
        let name = format!("client-{limit}");
        assert!(before.check_n(&name, limit).await.unwrap().is_allowed());
        // The key's TTL (1 s) runs on the server's clock: both clocks move on together.
        tokio::time::sleep(Duration::from_millis(100)).await;
        clock.set(at(100_000));
        assert!(!after.check(&name).await.unwrap().is_allowed(), "limit {limit}");
        tokio::time::sleep(Duration::from_millis(1_400)).await;
        clock.set(at(1_500_000));
        let local = tollgate::LogLimiter::with_clock(long, ManualClock::new());
        assert!(local.check_n_at(limit, at(0)).unwrap().is_allowed());
        assert!(!local.check_at(at(1_500_000)).is_allowed());
        assert!(
            after.check(&name).await.unwrap().is_allowed(),
            "limit {limit}: the old key was expected to have expired with its units"
        );
    }
}

/// A quota whose window shrinks (10/d to 10/h): the day's units may all have been admitted this
/// hour, so they count in it (refused, retry-after within the hour or two), and no longer once
/// the hour (for the sliding window, the next one too) has passed.
#[tokio::test(flavor = "current_thread")]
async fn a_shortened_window_counts_the_old_windows_units_in_the_current_one() {
    let server = shared_database();
    let (hour, day): (Quota, Quota) = ("10/h".parse().unwrap(), "10/d".parse().unwrap());
    let pairs: [(RedisAlgorithm, RedisAlgorithm, u64); 2] = [
        (
            FixedWindow::new(day).unwrap().into(),
            FixedWindow::new(hour).unwrap().into(),
            1,
        ),
        (
            SlidingWindow::new(day).unwrap().into(),
            SlidingWindow::new(hour).unwrap().into(),
            2,
        ),
    ];
    for (before, after, hours) in pairs {
        let name = before.name();
        let clock = ManualClock::starting_at(Timestamp::from_secs(HALF_PAST_EIGHT));
        let (after, first) = after_a_window_change(&server, &clock, before, after, "shorter:").await;
        assert_eq!(first.decided_by, DecidedBy::Redis, "{name}: {first:?}");
        assert!(!first.is_allowed(), "{name}: 20 admitted in one hour");
        let retry = first.decision.retry_after();
        assert!(
            retry > Duration::ZERO && retry <= Duration::from_secs(hours * 3_600),
            "{name}: retry after {retry:?}"
        );
        // Once the day's units are out of the sliding window: a whole new hour's quota.
        clock.advance(Duration::from_secs(hours * 3_600));
        let fresh = after.check_n("k", 10).await.unwrap();
        assert_eq!(fresh.decided_by, DecidedBy::Redis, "{name}");
        assert!(fresh.is_allowed(), "{name}: {fresh:?}");
    }
}

/// A shortened sliding window whose old count is past what the new window's state packs
/// (20,000/min to 10/s: a 1 s window's count field holds 16,383): Redis carries the count whole
/// and the reply is decided on it as sent. (A reply rebuilt through a packed state would clamp
/// the count to 16,383: where that admits and the true count refuses, the reply would
/// "disagree" and the failure policy would decide.)
#[tokio::test(flavor = "current_thread")]
async fn a_shortened_window_decides_on_counts_past_its_count_field() {
    let server = shared_database();
    let minute = SlidingWindow::new("20000/min".parse().unwrap()).unwrap();
    let second = SlidingWindow::new("10/s".parse().unwrap()).unwrap();
    assert!(
        second.max_narrow_limit() < 20_000,
        "the count must not fit the new window's field"
    );
    let clock = ManualClock::starting_at(Timestamp::from_secs(HALF_PAST_EIGHT + 10));
    let before = client_time_limiter(&server, minute, &clock, "field:").await;
    let after = client_time_limiter(&server, second, &clock, "field:").await;
    assert!(before.check_n("k", 20_000).await.unwrap().is_allowed());
    // The minute reaches into this second: its 20,000 units count in it (refused), and the
    // refusal writes the state under the 1 s window.
    let converted = after.check("k").await.unwrap();
    assert_eq!(
        (converted.decided_by, converted.failure),
        (DecidedBy::Redis, None)
    );
    assert!(!converted.is_allowed());
    // The next second, 500 us before its end: the 20,000 units of the second before weigh
    // 20,000 * 500 us, 10 units' worth, so one more is refused; it passes once they weigh 9,
    // 450 us before the end: retry after exactly 50 us.
    let late = Timestamp::from_nanos((HALF_PAST_EIGHT + 11) * 1_000_000_000 + 999_500_000);
    clock.set(late);
    let refused = after.check("k").await.unwrap();
    assert_eq!(
        (refused.decided_by, refused.failure),
        (DecidedBy::Redis, None),
        "{refused:?}"
    );
    assert!(!refused.is_allowed(), "{refused:?}");
    assert_eq!(refused.decision.retry_after(), Duration::from_micros(50));
    assert_eq!(refused.decision.remaining(), 0);
    clock.advance(Duration::from_micros(50));
    let admitted = after.check("k").await.unwrap();
    assert_eq!(
        (admitted.decided_by, admitted.failure),
        (DecidedBy::Redis, None),
        "{admitted:?}"
    );
    assert!(admitted.is_allowed(), "{admitted:?}");
}

/// During a rolling change from 10/d to 10/h, the new length decides: an hourly instance takes
/// the key into its hour; once it decides again in a later hour (the sliding window: two hours
/// on), the day's units are gone for the daily instances too, which admit all but what the
/// hourly one counted since, as `docs/distributed.md` ("Changing a quota") says. That is the most
/// they lose: the key is then theirs again, and they refuse past it.
#[tokio::test(flavor = "current_thread")]
async fn a_rolling_window_change_loses_the_longer_windows_units_at_most_once() {
    let server = shared_database();
    let (hour, day): (Quota, Quota) = ("10/h".parse().unwrap(), "10/d".parse().unwrap());
    // 08:30 plus this much is in a new hour (two for the sliding window) of the same day.
    let pairs: [(RedisAlgorithm, RedisAlgorithm, u64); 2] = [
        (
            FixedWindow::new(day).unwrap().into(),
            FixedWindow::new(hour).unwrap().into(),
            31 * 60,
        ),
        (
            SlidingWindow::new(day).unwrap().into(),
            SlidingWindow::new(hour).unwrap().into(),
            91 * 60,
        ),
    ];
    for (daily, hourly, later) in pairs {
        let name = daily.name();
        let clock = ManualClock::starting_at(Timestamp::from_secs(HALF_PAST_EIGHT));
        let daily = client_time_limiter(&server, daily, &clock, "rolling:").await;
        let hourly = client_time_limiter(&server, hourly, &clock, "rolling:").await;
        assert!(daily.check_n("k", 10).await.unwrap().is_allowed(), "{name}");
        // The day's 10 count in the hourly instance's current hour: refused, and the key is now
        // written under the hour.
        let refused = hourly.check("k").await.unwrap();
        assert_eq!(refused.decided_by, DecidedBy::Redis, "{name}");
        assert!(!refused.is_allowed(), "{name}: {refused:?}");
        clock.advance(Duration::from_secs(later));
        assert!(
            hourly.check("k").await.unwrap().is_allowed(),
            "{name}: a new hour"
        );
        let lost = daily.check_n("k", 9).await.unwrap();
        assert_eq!(lost.decided_by, DecidedBy::Redis, "{name}");
        assert!(
            lost.is_allowed(),
            "{name}: the day's units were expected lost: {lost:?}"
        );
        let bounded = daily.check("k").await.unwrap();
        assert!(
            !bounded.is_allowed(),
            "{name}: more than a second day's quota: {bounded:?}"
        );
    }
}

/// Writes for key `k` of `packed` (a packed log of limit 256 a minute) a log of the packed
/// encoding that holds one record of 256 units at the start of each of `minutes` minutes, then
/// the trailer (`sliding_log.lua`): a valid state, whose records all but the newest have left
/// the packed log's window, written directly (the packed script rewrites a log without such
/// records at its next admission that adds a record, so it never stores this many). Moves
/// `clock` one minute past the last record.
async fn fill_packed_log(
    raw: &mut redis::aio::MultiplexedConnection,
    packed: &RedisLimiter,
    clock: &ManualClock,
    minutes: u32,
) {
    use tollgate::Clock;
    let start = clock.now().as_nanos() / 1_000;
    let mut log = Vec::new();
    for minute in 0..u64::from(minutes) {
        log.extend((start + minute * 60_000_000).to_le_bytes());
        log.extend(((minute as u32 + 1) * 256).to_le_bytes());
    }
    let newest = start + (u64::from(minutes) - 1) * 60_000_000;
    log.extend(0u32.to_le_bytes());
    log.extend((minutes * 256).to_le_bytes());
    log.extend(newest.to_le_bytes());
    let _: () = raw.set(packed.redis_key("k"), log).await.unwrap();
    clock.advance(Duration::from_secs(60 * u64::from(minutes)));
}

/// Admissions of `limiter` among `count` requests of weight 1 on `key`, each decided by Redis.
async fn admitted_of(limiter: &RedisLimiter, key: &str, count: u32) -> u32 {
    let mut admitted = 0;
    for _ in 0..count {
        let answer = limiter.check(key).await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
        admitted += u32::from(answer.is_allowed());
    }
    admitted
}

/// A sliding log above `PACKED_LOG_LIMIT` is a list under another key than a packed one: a quota
/// that crosses 256 reads the other key's units (the list's or the string's) as its own, in
/// both directions, and the first admission moves them into its own key.
#[tokio::test(flavor = "current_thread")]
async fn a_log_quota_crossing_the_packed_limit_keeps_counting_its_units() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let log = |quota: &str| SlidingLog::new(quota.parse().unwrap()).unwrap();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let list = client_time_limiter(&server, log("300/min"), &clock, "crossing:").await;
    let packed = client_time_limiter(&server, log("200/min"), &clock, "crossing:").await;

    // Lowered, 300/min (a list) to 200/min (packed): 300 counted, none more in this minute.
    assert!(list.check_n("lowered", 256).await.unwrap().is_allowed());
    assert!(list.check_n("lowered", 44).await.unwrap().is_allowed());
    clock.advance(Duration::from_secs(1));
    let refused = packed.check("lowered").await.unwrap();
    assert!(!refused.is_allowed());
    // The 101st oldest unit of the window blocks a request of weight 1: it leaves in 59 s.
    assert_eq!(refused.decision.retry_after(), Duration::from_secs(59));
    assert_eq!(admitted_of(&packed, "lowered", 199).await, 0);
    clock.advance(Duration::from_secs(59));
    assert_eq!(admitted_of(&packed, "lowered", 201).await, 200);
    let list_left: bool = raw.exists(list.redis_key("lowered")).await.unwrap();
    assert!(!list_left, "the list was moved into the packed log");

    // Raised, 200/min (packed) to 300/min (a list): the difference, 100, and no more.
    assert!(packed.check_n("raised", 200).await.unwrap().is_allowed());
    assert_eq!(admitted_of(&list, "raised", 300).await, 100);
    let packed_left: bool = raw.exists(packed.redis_key("raised")).await.unwrap();
    assert!(!packed_left, "the packed log was moved into the list");
    // Back under 200/min (instances of both quotas at once): the list's 300 units still count.
    assert_eq!(admitted_of(&packed, "raised", 10).await, 0);
}

/// A packed log (limit <= 256) keeps records that left its own window until it is rewritten,
/// so a list quota with a longer window can find more than 256 of its units in its window; the
/// list script reads any state of the packed encoding. Moving 10240 of them into the list takes
/// more than one `RPUSH` (Lua's `unpack` takes about 8000 values at most, and the script's error
/// would fall to the failure policy).
#[tokio::test(flavor = "current_thread")]
async fn a_packed_log_of_many_units_moves_into_the_list() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let log = |quota: &str| SlidingLog::new(quota.parse().unwrap()).unwrap();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let packed = client_time_limiter(&server, log("256/min"), &clock, "move:").await;
    let list = client_time_limiter(&server, log("20000/h"), &clock, "move:").await;
    fill_packed_log(&mut raw, &packed, &clock, 40).await;
    // 40 * 256 = 10240 units in the last hour: one more is admitted, and all of them move.
    let answer = list.check("k").await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
    assert!(answer.is_allowed());
    assert_eq!(answer.decision.remaining(), 20_000 - 10_241);
    let entries: u64 = raw.llen(list.redis_key("k")).await.unwrap();
    assert_eq!(entries, 10_241);
    let packed_left: bool = raw.exists(packed.redis_key("k")).await.unwrap();
    assert!(!packed_left, "the packed log was moved into the list");
    // Read from the list now, the same units: 9759 more, not 9760.
    assert!(!list.check_n("k", 9_760).await.unwrap().is_allowed());
    assert!(list.check_n("k", 9_759).await.unwrap().is_allowed());
}

/// The same log above 65536 units in the list's window is a valid state, read at the cost of its
/// records (not `CorruptState`): a 65536/5h limit refuses, by Redis, until the
/// units that block have left: 69120 + 1 - 65536 = 3585 of them, the oldest 15 minutes' worth
/// (256 a minute), so the one admitted at minute 14 leaves 5 h after it, 44 min from now.
#[tokio::test(flavor = "current_thread")]
async fn a_packed_log_of_more_than_65536_units_is_not_corrupt() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let log = |quota: &str| SlidingLog::new(quota.parse().unwrap()).unwrap();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let packed = client_time_limiter(&server, log("256/min"), &clock, "big:").await;
    let list = client_time_limiter(&server, log("65536/5h"), &clock, "big:").await;
    fill_packed_log(&mut raw, &packed, &clock, 270).await;
    let answer = list.check("k").await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
    assert!(!answer.is_allowed());
    assert_eq!(answer.decision.remaining(), 0);
    assert_eq!(answer.decision.retry_after(), Duration::from_secs(44 * 60));
    // 44 min later, the 15 oldest minutes (3840 units) have left: 65280 remain, 256 below the
    // limit, and an admission moves them all into the list.
    clock.advance(Duration::from_secs(44 * 60));
    assert!(!list.check_n("k", 257).await.unwrap().is_allowed());
    let answer = list.check_n("k", 256).await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
    assert!(answer.is_allowed(), "{answer:?}");
}
