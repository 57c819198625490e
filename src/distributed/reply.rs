//! A script's reply read back into the core's [`Decision`].
//!
//! The bucket and sliding window scripts return the state they decided on (relative to `now`),
//! and the client runs the core's own arithmetic on it, with the parameters the script used: the
//! numbers in the decision are then the local limiter's by construction, and the script does
//! only what must be atomic. The fixed window's numbers are two subtractions; the sliding log's
//! script computes its whole decision.
//!
//! The buckets reply with one integer; the windows with a string of packed little-endian
//! `i64`s (`struct.pack('<i8...')` in Lua), which costs the server less than an array reply;
//! the packed log with one integer where its numbers fit one below 2^53 (cheaper still than
//! packing them), else with a packed string, as the list log always does.

use redis::Value;

use super::algorithm::Reader;
use super::fine_rate::FineRate;
use crate::algorithm::Algorithm;
use crate::{Decision, Timestamp};

/// Nanoseconds per microsecond.
const MICROS: u64 = 1_000;

/// The decision a script's reply encodes; `None` for a reply of another shape, or one that
/// disagrees with the core's arithmetic (never expected: the decision then falls to the failure
/// policy rather than trusting either side).
pub(crate) fn decision(reader: &Reader, reply: &Value, cost: u64) -> Option<Decision> {
    match (reader, reply) {
        (Reader::TokenBucket(bucket), Value::Int(reply)) => {
            gcra(bucket, micros(bucket.emission_interval())?, *reply, cost)
        }
        (Reader::LeakyBucket(shaper), Value::Int(reply)) => {
            gcra(shaper, micros(shaper.emission_interval())?, *reply, cost)
        }
        (Reader::Fine { rate, shaper }, Value::BulkString(bytes)) => {
            rate.decision(integers(bytes)?, cost, *shaper, None)
        }
        (Reader::FixedWindow { limit }, Value::BulkString(bytes)) => {
            let [admitted, count, until_end] = integers(bytes)?;
            fixed_window(*limit, admitted, count, until_end, cost)
        }
        (Reader::SlidingWindow(window), Value::BulkString(bytes)) => {
            let [admitted, previous, current, start] = integers(bytes)?;
            sliding_window(window, admitted, previous, current, start, cost)
        }
        (Reader::Log { .. }, Value::BulkString(bytes)) => {
            let [admitted, remaining, retry_after, reset_after] = integers(bytes)?;
            log(admitted, remaining, retry_after, reset_after)
        }
        (Reader::Log { window, limit }, Value::Int(reply)) => log_integer(*window, *limit, *reply),
        _ => None,
    }
}

/// Whether a decision script's reply to a peek of weight 0 (the reset script's, `reset.lua`)
/// says the key is idle: its state decides every request, now and later, as a fresh key's. The
/// local limiters' `is_idle`, on what the script decided on: a bucket's TAT not after now
/// (`tat - now` is 0), nothing counted in the fixed window that holds now (a stored window
/// that ended counts nothing), neither sliding window count weighing now, no unit of the log in
/// the window (no reset-after). `None` for a reply the core cannot read (as [`decision`]).
pub(crate) fn idle(reader: &Reader, reply: &Value) -> Option<bool> {
    // Read as a decision first: a reply the core disagrees with is no answer.
    let _readable: Decision = decision(reader, reply, 0)?;
    match (reader, reply) {
        (Reader::TokenBucket(_) | Reader::LeakyBucket(_), Value::Int(after)) => Some(*after == 0),
        (Reader::Fine { .. }, Value::BulkString(bytes)) => Some(integers(bytes)? == [0, 0]),
        (Reader::FixedWindow { .. }, Value::BulkString(bytes)) => {
            let [_, count, _] = integers(bytes)?;
            Some(count == 0)
        }
        (Reader::SlidingWindow(_), Value::BulkString(bytes)) => {
            let [_, previous, current, _] = integers(bytes)?;
            Some(previous == 0 && current == 0)
        }
        // Weight 0 is always packed by both log scripts (one integer is a weighted decision's).
        (Reader::Log { .. }, Value::BulkString(bytes)) => {
            let [_, _, _, reset_after] = integers(bytes)?;
            Some(reset_after == 0)
        }
        _ => None,
    }
}

/// The decision a shaper's reply to a `'slot'` call (`gcra.lua`) encodes, with the end of the
/// slot an admission took (µs since the epoch, the TAT the script stored): `None` for a refusal,
/// or for an admission of weight 0, which takes no slot. `max_delay` (ns) is the longest wait the
/// call allowed: the core decides the rebuilt state within it too, so that a refusal for a
/// longer wait agrees. `None` for a reply of another shape or one the core disagrees with.
pub(crate) fn slot_decision(
    shaper: &crate::LeakyBucket,
    reply: &Value,
    cost: u64,
    max_delay: Option<u64>,
) -> Option<(Decision, Option<u64>)> {
    let interval = micros(shaper.emission_interval())?;
    match reply {
        Value::Int(reply) => {
            let decision = gcra_within(shaper, interval, *reply, cost, max_delay)?;
            // Only a weightless request is admitted without its slot's end.
            (!decision.is_allowed() || cost == 0).then_some((decision, None))
        }
        Value::BulkString(bytes) => {
            let [after, end] = integers(bytes)?;
            let decision = gcra_within(shaper, interval, after, cost, max_delay)?;
            // The end is the TAT, `now + after` with `now` non-negative: at least `after`.
            let end = u64::try_from(end)
                .ok()
                .filter(|&end| end >= after.unsigned_abs())?;
            (decision.is_allowed() && after >= 0 && cost > 0).then_some((decision, Some(end)))
        }
        _ => None,
    }
}

/// [`slot_decision`] for a shaper whose interval is not whole microseconds: its replies are
/// pairs (`fine_rate.rs`), a refusal `[-1 - lead, remainder]`, an admission `[lead, remainder,
/// end, end's remainder]` (16 or 32 bytes); the end in nanoseconds, rounded up. `max_delay`
/// is the longest wait the call allowed, whole µs, as the script compared it.
pub(crate) fn fine_slot_decision(
    rate: &FineRate,
    reply: &Value,
    cost: u64,
    max_delay: Option<u64>,
) -> Option<(Decision, Option<u64>)> {
    let Value::BulkString(bytes) = reply else {
        return None;
    };
    if let Some(pair) = integers(bytes) {
        let decision = rate.decision(pair, cost, true, max_delay)?;
        // Only a weightless request is admitted without its slot's end.
        return (!decision.is_allowed() || cost == 0).then_some((decision, None));
    }
    let [after, after_rem, end, end_rem] = integers(bytes)?;
    let decision = rate.decision([after, after_rem], cost, true, max_delay)?;
    // The end is the TAT, `now + after` with `now` non-negative: at least `after`.
    let end = rate
        .end_nanos(end, end_rem)
        .filter(|_| end >= after && after >= 0)?;
    (decision.is_allowed() && cost > 0).then_some((decision, Some(end)))
}

fn micros(duration: std::time::Duration) -> Option<u64> {
    u64::try_from(duration.as_micros()).ok()
}

/// The `N` integers of a reply packed by the script's `struct.pack('<i8...')`: exactly `N`
/// little-endian signed 64-bit integers. (A packed string costs the server a fraction of what
/// an array reply does: `docs/distributed.md`, "Speed".)
fn integers<const N: usize>(bytes: &[u8]) -> Option<[i64; N]> {
    if bytes.len() != N * 8 {
        return None;
    }
    let mut numbers = [0; N];
    for (number, chunk) in numbers.iter_mut().zip(bytes.chunks_exact(8)) {
        *number = i64::from_le_bytes(chunk.try_into().ok()?);
    }
    Some(numbers)
}

/// The GCRA reply: admitted, `tat - now + cost * T`; refused, `-1 - (tat - now)`. The bucket is
/// rebuilt at time 0 with the TAT that far ahead, and decided again by the core.
/// `interval` is the bucket's `T` in microseconds (a whole number: the bucket was built so).
fn gcra(algorithm: &impl Algorithm, interval: u64, reply: i64, cost: u64) -> Option<Decision> {
    gcra_within(algorithm, interval, reply, cost, None)
}

/// [`gcra`] for a call that allowed a wait of at most `max_delay` ns (`None`: any), decided
/// again by the core's `decide_within`. The script refuses a wait above `max_delay / 1000`
/// whole µs, which for a backlog of whole µs is the same as above `max_delay` ns.
fn gcra_within(
    algorithm: &impl Algorithm,
    interval: u64,
    reply: i64,
    cost: u64,
    max_delay: Option<u64>,
) -> Option<Decision> {
    let backlog = match u64::try_from(reply) {
        Ok(after) => after.checked_sub(cost.checked_mul(interval)?)?,
        Err(_) => u64::try_from(-1 - reply).ok()?,
    };
    let state = backlog.checked_mul(MICROS)?;
    let decision = match max_delay {
        Some(max) => algorithm.decide_within(state, Timestamp::UNIX_EPOCH, cost, max),
        None => algorithm.decide(state, Timestamp::UNIX_EPOCH, cost),
    }
    .decision;
    (decision.is_allowed() == (reply >= 0)).then_some(decision)
}

fn fixed_window(limit: u64, admitted: i64, count: i64, until_end: i64, cost: u64) -> Option<Decision> {
    let count = u64::try_from(count).ok()?;
    let until_end = u64::try_from(until_end).ok()?.checked_mul(MICROS)?;
    let if_counted = |count: u64| if count > 0 { until_end } else { 0 };
    match admitted {
        1 => {
            let total = count.checked_add(cost).filter(|&total| total <= limit)?;
            Some(Decision::allowed(limit - total, if_counted(total), 0))
        }
        0 => Some(Decision::denied(
            limit.saturating_sub(count),
            until_end,
            if_counted(count),
        )),
        _ => None,
    }
}

/// The sliding window reply: the counts the script decided on, and where the window starts
/// relative to now (µs), decided again by the core's arithmetic on those counts.
fn sliding_window(
    window: &crate::SlidingWindow,
    admitted: i64,
    previous: i64,
    current: i64,
    start_minus_now: i64,
    cost: u64,
) -> Option<Decision> {
    let (previous, current) = (u64::try_from(previous).ok()?, u64::try_from(current).ok()?);
    // The window's start relative to now: `-elapsed`, or how far the clock went back before it.
    let ahead = u64::try_from(start_minus_now.max(0)).ok()?.checked_mul(MICROS)?;
    // `unsigned_abs`, not `-`: an (unexpected) `i64::MIN` must be refused, not overflow.
    let elapsed = start_minus_now.min(0).unsigned_abs().checked_mul(MICROS)?;
    let decision = window.decide_placed(previous, current, ahead, elapsed, cost)?;
    (decision.is_allowed() == (admitted == 1) && (admitted == 0 || admitted == 1)).then_some(decision)
}

/// The log's reply: `{admitted, remaining, retry_after_us, reset_after_us}`.
fn log(admitted: i64, remaining: i64, retry_after: i64, reset_after: i64) -> Option<Decision> {
    let remaining = u64::try_from(remaining).ok()?;
    let retry_after = u64::try_from(retry_after).ok()?.checked_mul(MICROS)?;
    let reset_after = u64::try_from(reset_after).ok()?.checked_mul(MICROS)?;
    match admitted {
        1 => Some(Decision::allowed(remaining, reset_after, 0)),
        0 => Some(Decision::denied(remaining, retry_after, reset_after)),
        _ => None,
    }
}

/// The packed log's one-integer reply (`sliding_log.lua`, "Returns"), for a log of `limit` units
/// per `window` µs: an admission is `(at - now) * (limit + 1) + remaining`, its reset
/// `window + at - now`; a refusal is `-1 - ((retry_after * (window + 1) + reset_after) *
/// (limit + 1) + remaining)`, with `reset_after <= window`. Digits in mixed radix: every
/// admission reads as one, and a refusal whose retry is past its reset (never sent) is refused.
fn log_integer(window: u64, limit: u64, reply: i64) -> Option<Decision> {
    let radix = limit.checked_add(1)?;
    match u64::try_from(reply) {
        Ok(admitted) => {
            let reset_after = window.checked_add(admitted / radix)?.checked_mul(MICROS)?;
            Some(Decision::allowed(admitted % radix, reset_after, 0))
        }
        Err(_) => {
            // `-1 - reply` is at most `i64::MAX`, even for `i64::MIN`: no overflow.
            let refused = u64::try_from(-1 - reply).ok()?;
            let times = refused / radix;
            let window_radix = window.checked_add(1)?;
            let reset_after = (times % window_radix).checked_mul(MICROS)?;
            let retry_after = (times / window_radix).checked_mul(MICROS)?;
            // A refusal counts units in the window, so its blocking unit leaves by the reset.
            (retry_after <= reset_after && reset_after > 0)
                .then(|| Decision::denied(refused % radix, retry_after, reset_after))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LeakyBucket, Quota, SlidingWindow, TokenBucket};
    use std::time::Duration;

    fn bucket() -> TokenBucket {
        TokenBucket::new(
            Quota::new(1, Duration::from_millis(100))
                .unwrap()
                .with_burst(5)
                .unwrap(),
        )
        .unwrap()
    }

    /// A reply whose window started more than a window before now (which only Redis can send:
    /// a local state always moves to the window holding now) weighs the previous count at 0,
    /// without an overflow.
    #[test]
    fn a_window_that_started_over_a_window_ago_weighs_nothing() {
        let window = SlidingWindow::new("100/min".parse().unwrap()).unwrap();
        let d = sliding_window(&window, 1, 80, 30, -61_000_000, 1).expect("believed");
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), 69);
    }

    #[test]
    fn gcra_replies_become_the_cores_decisions() {
        // Admitted with the TAT 300 ms ahead after a weight-2 request: 2 units remain.
        let admitted = gcra(&bucket(), 100_000, 300_000, 2).unwrap();
        assert!(admitted.is_allowed());
        assert_eq!(admitted.remaining(), 2);
        assert_eq!(admitted.reset_after(), Duration::from_millis(300));
        // Refused with the TAT 450 ms ahead: a weight-1 request passes in 50 ms.
        let refused = gcra(&bucket(), 100_000, -1 - 450_000, 1).unwrap();
        assert!(!refused.is_allowed());
        assert_eq!(refused.retry_after(), Duration::from_millis(50));
        assert_eq!(refused.reset_after(), Duration::from_millis(450));
        // The shaper's wait is the backlog before the request.
        let shaper = LeakyBucket::new(
            Quota::new(1, Duration::from_millis(100))
                .unwrap()
                .with_burst(5)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            gcra(&shaper, 100_000, 300_000, 1).unwrap().delay(),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn slot_replies_carry_the_slots_end_and_agree_with_the_core_within_the_maximum() {
        let shaper = LeakyBucket::new("10/s burst 5".parse().unwrap()).unwrap();
        // Admitted 300 ms ahead, the TAT at 1_000_300_000 µs: its slot ends there.
        let admitted = slot_decision(&shaper, &packed(&[300_000, 1_000_300_000]), 1, None).unwrap();
        assert_eq!(admitted.0.delay(), Duration::from_millis(200));
        assert_eq!(admitted.1, Some(1_000_300_000));
        // Refused for a wait of 200 ms above a maximum of 150 ms: the core refuses it too, and
        // tells 50 ms; without the maximum the core admits it, so the reply is not believed.
        let refused = slot_decision(&shaper, &Value::Int(-1 - 200_000), 1, Some(150_000_000)).unwrap();
        assert_eq!((refused.0.is_allowed(), refused.1), (false, None));
        assert_eq!(refused.0.retry_after(), Duration::from_millis(50));
        assert_eq!(slot_decision(&shaper, &Value::Int(-1 - 200_000), 1, None), None);
        // An admission without its end, an end before `after`, or a refusal with one.
        assert_eq!(slot_decision(&shaper, &Value::Int(300_000), 1, None), None);
        assert_eq!(slot_decision(&shaper, &packed(&[300_000, 7]), 1, None), None);
        assert_eq!(
            slot_decision(&shaper, &packed(&[-1 - 600_000, 1_000_300_000]), 1, None),
            None
        );
        let extremes = [i64::MIN, -2, -1, 0, 1, i64::MAX];
        for &a in &extremes {
            for &b in &extremes {
                let _ = slot_decision(&shaper, &packed(&[a, b]), 1, Some(u64::MAX));
                let _ = slot_decision(&shaper, &Value::Int(a), 1, Some(0));
            }
        }
    }

    #[test]
    fn gcra_replies_that_disagree_with_the_core_are_refused() {
        // "Admitted" with the TAT past the tolerance, or below the request's own need.
        assert_eq!(gcra(&bucket(), 100_000, 900_000, 1), None);
        assert_eq!(gcra(&bucket(), 100_000, 50_000, 1), None);
        // "Refused" where the core admits.
        assert_eq!(gcra(&bucket(), 100_000, -1, 1), None);
    }

    #[test]
    fn window_replies_become_decisions() {
        let admitted = fixed_window(10, 1, 4, 2_000, 3).unwrap();
        assert_eq!(
            (admitted.remaining(), admitted.reset_after()),
            (3, Duration::from_millis(2))
        );
        let refused = fixed_window(10, 0, 9, 2_000, 3).unwrap();
        assert_eq!(
            (refused.remaining(), refused.retry_after()),
            (1, Duration::from_millis(2))
        );
        assert_eq!(fixed_window(10, 1, 9, 2_000, 3), None);
        let window = SlidingWindow::new("100/min".parse().unwrap()).unwrap();
        // The usual worked example: 80 before, 30 now, 15 s into the window: admitted, 9 remain.
        let example = sliding_window(&window, 1, 80, 30, -15_000_000, 1).unwrap();
        assert_eq!(example.remaining(), 9);
        assert_eq!(sliding_window(&window, 0, 80, 30, -15_000_000, 1), None);
    }

    /// A packed log of 10 units per minute, as `Reader` for replies.
    const LOG: Reader = Reader::Log {
        window: 60_000_000,
        limit: 10,
    };

    #[test]
    fn log_integer_replies_read_as_their_packed_twins() {
        let (window, limit) = (5_000_000, 10);
        let reader = Reader::Log { window, limit };
        let read = |reply: i64| decision(&reader, &Value::Int(reply), 1);
        // Admitted at `now` with 7 units left: the reset is the window.
        assert_eq!(read(7), decision(&reader, &packed(&[1, 7, 0, 5_000_000]), 1));
        assert_eq!(read(7).map(|d| d.reset_after()), Some(Duration::from_secs(5)));
        // Admitted 3 µs past the clock (it went back), 2 units left.
        assert_eq!(
            read(3 * 11 + 2),
            decision(&reader, &packed(&[1, 2, 0, 5_000_003]), 1)
        );
        // Refused: passes in 1.2 s, resets in 4.999 s, none left; and 10 left (all digits
        // at their largest but the retry).
        let refused = -1 - ((1_200_000 * 5_000_001 + 4_999_000) * 11);
        assert_eq!(
            read(refused),
            decision(&reader, &packed(&[0, 0, 1_200_000, 4_999_000]), 1)
        );
        let full = -1 - ((4_000_000 * 5_000_001 + 5_000_000) * 11 + 10);
        assert_eq!(
            read(full),
            decision(&reader, &packed(&[0, 10, 4_000_000, 5_000_000]), 1)
        );
        assert!(!read(full).unwrap().is_allowed());
        // A retry past the reset, or a refusal with nothing to reset: never sent.
        assert_eq!(read(-1 - ((2 * 5_000_001 + 1) * 11)), None);
        assert_eq!(read(-1), None);
    }

    /// A reply packed as the scripts pack it: little-endian `i64`s.
    fn packed(numbers: &[i64]) -> Value {
        Value::BulkString(numbers.iter().flat_map(|n| n.to_le_bytes()).collect())
    }

    #[test]
    fn malformed_replies_are_refused() {
        let reader = Reader::TokenBucket(bucket());
        assert_eq!(decision(&reader, &Value::Nil, 1), None);
        assert_eq!(decision(&LOG, &packed(&[1]), 1), None);
        assert_eq!(decision(&LOG, &packed(&[2; 4]), 1), None);
        // One byte short, one byte too many, or the integers as an array: not a reply of ours.
        let Value::BulkString(mut bytes) = packed(&[0, 0, 7, 9]) else {
            unreachable!()
        };
        bytes.push(0);
        assert_eq!(decision(&LOG, &Value::BulkString(bytes.clone()), 1), None);
        bytes.truncate(31);
        assert_eq!(decision(&LOG, &Value::BulkString(bytes), 1), None);
        let array = Value::Array([0, 0, 7, 9].map(Value::Int).to_vec());
        assert_eq!(decision(&LOG, &array, 1), None);
        let log = decision(&LOG, &packed(&[0, 0, 7, 9]), 1);
        assert_eq!(log.map(|d| d.retry_after()), Some(Duration::from_micros(7)));
    }

    #[test]
    fn extreme_integers_in_a_reply_are_refused_or_read_never_a_panic() {
        let extremes = [i64::MIN, i64::MIN + 1, -2, -1, 0, 1, 2, i64::MAX - 1, i64::MAX];
        let readers = [
            Reader::TokenBucket(bucket()),
            Reader::LeakyBucket(LeakyBucket::new("10/s burst 3".parse().unwrap()).unwrap()),
            Reader::FixedWindow { limit: 5 },
            Reader::SlidingWindow(SlidingWindow::new("100/min".parse().unwrap()).unwrap()),
            Reader::Log {
                window: 60_000_000,
                limit: 10,
            },
        ];
        for reader in &readers {
            for &a in &extremes {
                let _ = decision(reader, &Value::Int(a), 1);
                for &b in &extremes {
                    for &c in &extremes {
                        for &d in &extremes {
                            let _ = decision(reader, &packed(&[a, b, c, d]), 1);
                        }
                        let _ = decision(reader, &packed(&[a, b, c]), 1);
                    }
                }
            }
        }
    }
}
