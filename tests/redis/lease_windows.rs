//! The window leases' scripts and sizes: `sliding_window.lua`'s `'lease'` mode grants exactly
//! the most units that pass and no more (against exact integers, on states of this window's
//! length and of others), `window_return.lua` gives units back into a sliding window counter's
//! state, processes that barely spend hold little of a long window, and a sliding window counter
//! whose previous window leaves nothing free is not asked again for every request.

use std::sync::Arc;

use tollgate::distributed::{LeasedLimiter, RedisAlgorithm, RedisDecision, TimeSource};
use tollgate::{FixedWindow, ManualClock, SlidingWindow, Timestamp};

use crate::lease_fleet::{check_spaced, leased, settle};
use crate::lease_lifetime::drain;
use crate::redis_common::{raw_connection, shared_database};

/// A script as the limiter sends it: `prologue.lua`, then the body of the file named.
macro_rules! script {
    ($body:literal) => {
        concat!(
            include_str!("../../src/distributed/prologue.lua"),
            include_str!(concat!("../../src/distributed/", $body))
        )
    };
}

/// Eight processes each see a key of `800/h` twice; then a per-decision client on the same key
/// spends what is left of the window. A process that barely spends asks for what its pace
/// wants (an interval's share of an hour's quota is under a unit): the eight hold at most 15
/// units each, and what they hold plus what the client then admits is exactly the 784 left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_that_barely_spend_hold_little_of_a_long_window() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    let algorithms: [RedisAlgorithm; 2] = [
        FixedWindow::new("800/h".parse().unwrap()).unwrap().into(),
        SlidingWindow::new("800/h".parse().unwrap()).unwrap().into(),
    ];
    for algorithm in algorithms {
        let name = algorithm.name();
        let prefix = format!("barely:{}:", name.replace(' ', "-"));
        let mut limiters = Vec::new();
        for _ in 0..8 {
            let limiter = Arc::new(leased(&server, algorithm, frozen.clone(), &prefix).await);
            for _ in 0..2 {
                assert!(check_spaced(&limiter, "k").await.is_allowed(), "{name}");
            }
            limiters.push(limiter);
        }
        settle(&limiters).await;
        let held: u64 = limiters.iter().map(|l| l.units_held()).sum();
        let admitted = drain(&server, algorithm, frozen.clone(), &prefix, "k").await;
        // Each process's second request asks for twice its pace, one unit in an instant counted
        // over an eighth of an interval: 16, the request's own included. An eighth of what is
        // free, 98 each, would leave the client 784 - 8 * 98.
        assert!(held <= 8 * 15, "{name}: the eight processes hold {held} units");
        assert_eq!(admitted + held, 784, "{name}: held {held}, admitted {admitted}");
    }
}

/// The most `n` with `p*(w-e) + (c+n)*w <= limit*w`, in exact integers.
fn exact_free(limit: u64, w: u64, e: u64, p: u64, c: u64) -> i128 {
    let room =
        i128::from(limit) * i128::from(w) - i128::from(p) * i128::from(w - e) - i128::from(c) * i128::from(w);
    room.div_euclid(i128::from(w))
}

/// Little-endian `i64`s, packed as the scripts read them.
fn packed(words: [i64; 4]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_le_bytes()).collect()
}

/// Writes `state` (index, previous, current, window) to `key`, then calls `sliding_window.lua` in
/// its `'lease'` mode on it for `want` units, with the packed argument `[cost, w, limit, now]`:
/// the reply.
async fn lease_mode(
    raw: &mut redis::aio::MultiplexedConnection,
    key: &str,
    state: [i64; 4],
    [cost, w, limit, now]: [u64; 4],
    want: u64,
) -> Vec<u8> {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(packed(state))
        .query_async(raw)
        .await
        .unwrap();
    redis::cmd("EVAL")
        .arg(script!("sliding_window.lua"))
        .arg(1)
        .arg(key)
        .arg(packed([cost as i64, w as i64, limit as i64, now as i64]))
        .arg("lease")
        .arg((want as i64).to_le_bytes().to_vec())
        .query_async(raw)
        .await
        .unwrap()
}

/// `sliding_window.lua`'s `'lease'` mode on 3,000 states written directly (limits from 7 per
/// 3 µs to 2^51 per 2^51 µs, `4294967295/d` among them; the time anywhere in the window; costs
/// 0, 1 and any; any want): it grants exactly `max(cost, min(want, ceil(free / 2)))`, `free`
/// the most units that pass in exact integers, and refuses exactly when the cost does not pass.
#[tokio::test(flavor = "current_thread")]
async fn the_lease_mode_grants_exactly_half_of_what_passes() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let shapes: [(u64, u64); 6] = [
        (4_294_967_295, 86_400_000_000),
        (1_000_000, 60_000_000),
        (10, 1_000_000),
        (2_251_799_813_685_248, 2_251_799_813_685_248),
        (1 << 40, 3_600_000_000),
        (7, 3),
    ];
    let mut bad = Vec::new();
    let mut checked = 0;
    for round in 0..3000u64 {
        let (limit, w) = shapes[(round % 6) as usize];
        let index = 1_700_000_000_000_000 / w + 1;
        let e = match next() % 3 {
            0 => next() % w,
            1 => w / 2,
            _ => [0, w / 4, 3 * (w / 4), w - 1][(next() % 4) as usize],
        };
        let now = index * w + e;
        if now >= 1 << 52 {
            continue;
        }
        let p = match next() % 4 {
            0 => 0,
            1 => limit,
            _ => next() % (limit + 1),
        };
        let c = match next() % 4 {
            0 => 0,
            1 => limit - (next() % 3).min(limit),
            _ => next() % (limit + 1),
        };
        let cost = match next() % 3 {
            0 => 0,
            1 => 1,
            _ => next() % (limit + 1),
        };
        let want = cost + next() % (limit + 1);
        let key = format!("lease-mode:{round}");
        let state = [index as i64, p as i64, c as i64, w as i64];
        let reply = lease_mode(&mut raw, &key, state, [cost, w, limit, now], want).await;
        assert_eq!(
            reply.len(),
            40,
            "limit {limit} w {w} p {p} c {c} cost {cost} want {want} e {e}"
        );
        let word = |at: usize| i64::from_le_bytes(reply[at..at + 8].try_into().unwrap());
        let granted = word(0) as i128;
        let free = exact_free(limit, w, e, p, c);
        let refused = cost > 0 && i128::from(cost) > free;
        let expected = if refused {
            0
        } else {
            i128::from(cost).max(i128::from(want).min((free.max(0) + 1) / 2))
        };
        assert_eq!((word(8), word(16)), (p as i64, c as i64));
        checked += 1;
        assert!(
            granted <= free.max(i128::from(cost * u64::from(!refused))) || granted == 0,
            "over: {limit} {w} e{e} p{p} c{c} cost{cost} want{want}: {granted} > {free}"
        );
        if granted != expected {
            bad.push(format!(
                "{limit}/{w} e{e} p{p} c{c} cost{cost} want{want}: granted {granted}, exact {expected}"
            ));
        }
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut raw).await.unwrap();
    }
    assert!(checked > 2_000, "{checked} states decided");
    assert!(
        bad.is_empty(),
        "{} of {checked} differ from the exact grant: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}

/// A sliding window counter whose previous window's count weighs the whole limit: once the
/// lease has nothing and Redis, on what it last said, has no unit to grant, weightless requests
/// are decided by the lease and start no refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_previous_window_that_fills_the_limit_starts_no_refresh() {
    let server = shared_database();
    let window = SlidingWindow::new("100/h".parse().unwrap()).unwrap();
    let w: i64 = 3_600_000_000;
    let index: i64 = 1_700_000_000_000_000 / w + 1;
    // A fifth into window `index`: the previous window's 100 weigh 80.
    let start = Timestamp::from_nanos((index * w + w / 5) as u64 * 1_000);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    let limiter = Arc::new(leased(&server, window, frozen, "previous-full:").await);
    let key = limiter.redis_key("k");
    let mut raw = raw_connection(&server).await;
    let state = packed([index, 100, 0, w]);
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg(state)
        .query_async(&mut raw)
        .await
        .unwrap();
    let mut admitted = 0;
    for _ in 0..40 {
        admitted += u64::from(check_spaced(&limiter, "k").await.is_allowed());
    }
    let before = limiter.counts();
    for _ in 0..20 {
        assert!(check_spaced_n(&limiter, "k", 0).await.is_allowed());
    }
    let after = limiter.counts();
    // A fifth into the window the previous one's 100 weigh 80: 20 pass.
    assert_eq!(admitted, 20);
    assert_eq!(after.round_trips, before.round_trips, "{before:?} {after:?}");
}

/// [`check_spaced`] for a weight of `cost`.
async fn check_spaced_n(limiter: &Arc<LeasedLimiter>, key: &str, cost: u64) -> RedisDecision {
    let refreshes = limiter.counts().refreshes;
    let answer = limiter.check_n(key, cost).await.unwrap();
    if limiter.counts().refreshes > refreshes {
        settle(std::slice::from_ref(limiter)).await;
    }
    answer
}

/// The `'lease'` mode on 1,000 states written under other window lengths (a quota changed), some
/// stored ahead of now (a client clock that went back): what it grants passes the exact rule on
/// the counts it replies, at the window start it replies, and the state it writes holds them and
/// the grant.
#[tokio::test(flavor = "current_thread")]
async fn the_lease_mode_on_states_of_another_window_length() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let mut seed: u64 = 0x1234_5678_9abc_def1;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let shapes: [(u64, u64); 4] = [
        (4_294_967_295, 86_400_000_000),
        (1_000_000, 60_000_000),
        (10, 1_000_000),
        (1 << 40, 3_600_000_000),
    ];
    let mut checked = 0;
    let mut over = Vec::new();
    for round in 0..1000u64 {
        let (limit, w) = shapes[(round % 4) as usize];
        let sw = [w / 2, w * 2, w / 3 + 1, w * 5 / 4, w / 60][(next() % 5) as usize];
        let now = 1_700_000_000_000_000 + next() % (4 * w);
        let si = (now - (next() % (3 * w))) / sw + (next() % 3) * u64::from(next() % 4 == 0);
        let p = next() % (limit + 1);
        let c = next() % (limit + 1);
        let cost = [0, 1, next() % (limit + 1)][(next() % 3) as usize];
        let want = cost + next() % (limit + 1);
        let key = format!("lease-converted:{round}");
        let state = [si as i64, p as i64, c as i64, sw as i64];
        let reply = lease_mode(&mut raw, &key, state, [cost, w, limit, now], want).await;
        let word = |at: usize| i64::from_le_bytes(reply[at..at + 8].try_into().unwrap());
        let (granted, prev, cur, start_minus_now, replied_now) =
            (word(0), word(8), word(16), word(24), word(32));
        assert_eq!(replied_now, now as i64);
        let start = now as i64 + start_minus_now;
        assert_eq!(start.rem_euclid(w as i64), 0);
        let e = (now as i64 - start).max(0) as u64;
        assert!(e < w);
        let free = exact_free(limit, w, e, prev as u64, cur as u64);
        if granted > 0 && i128::from(granted) > free {
            over.push(format!("{limit}/{w} sw{sw} si{si} now{now} p{p} c{c} cost{cost} want{want}: granted {granted} > free {free} (prev {prev}, cur {cur}, e {e})"));
        }
        // The state written holds the grant.
        let stored: Option<Vec<u8>> = redis::cmd("GET").arg(&key).query_async(&mut raw).await.unwrap();
        if granted > 0 {
            let stored = stored.unwrap();
            let at = |k: usize| i64::from_le_bytes(stored[k..k + 8].try_into().unwrap());
            assert_eq!(
                (at(0) * w as i64, at(8), at(16), at(24)),
                (start, prev, cur + granted, w as i64)
            );
        }
        checked += 1;
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut raw).await.unwrap();
    }
    assert!(checked == 1000, "{checked} states decided");
    assert!(
        over.is_empty(),
        "{} grants past the exact rule: {:?}",
        over.len(),
        &over[..over.len().min(3)]
    );
}

/// `window_return.lua` on a sliding window counter's state: it subtracts at most the window's
/// count, keeps the previous window's count and the key's expiry, and gives nothing back once
/// the window ended or for another window.
#[tokio::test(flavor = "current_thread")]
async fn units_given_back_keep_the_previous_windows_count() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let script = include_str!("../../src/distributed/lease/window_return.lua");
    let w: i64 = 60_000_000;
    let i: i64 = 1_700_000_000_000_000 / w;
    let cases: [(i64, i64, i64, i64, i64); 5] = [
        // units, now, finish, expected back, expected count after
        (10, i * w + 5, (i + 1) * w, 7, 0),
        (3, i * w + 5, (i + 1) * w, 3, 4),
        (3, (i + 1) * w, (i + 1) * w, 0, 7),
        (3, i * w + 5, i * w, 0, 7),
        (0, i * w + 5, (i + 1) * w, 0, 7),
    ];
    for (n, (units, now, finish, back, after)) in cases.into_iter().enumerate() {
        let key = format!("window-return:{n}");
        let state = packed([i, 5, 7, w]);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(state)
            .arg("PX")
            .arg(100_000)
            .query_async(&mut raw)
            .await
            .unwrap();
        let arguments = packed([units, w, 100, now]);
        let got: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg(&key)
            .arg(arguments)
            .arg(finish.to_le_bytes().to_vec())
            .query_async(&mut raw)
            .await
            .unwrap();
        let stored: Vec<u8> = redis::cmd("GET").arg(&key).query_async(&mut raw).await.unwrap();
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut raw).await.unwrap();
        let at = |k: usize| i64::from_le_bytes(stored[k..k + 8].try_into().unwrap());
        assert_eq!(
            (got, stored.len(), at(0), at(8), at(16), at(24)),
            (back, 32, i, 5, after, w),
            "case {n}"
        );
        assert!(ttl > 90_000, "case {n}: {ttl}");
    }
}
