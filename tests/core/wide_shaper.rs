//! The leaky bucket shaper at `4294967295/s` and `4294967295/ms` (rates whole nanoseconds cannot
//! hold: a 128-bit state, exact) and at `1000000000/s` (one slot per nanosecond exactly: the
//! 64-bit state, which decides the same way), direct and keyed: each request's delay is its
//! exact slot rounded up; a maximum wait refuses, storing nothing, exactly the requests
//! whose rounded delay is above it; slots are not given back (`refund_slot`, `refund_n`, `undo`
//! return `false` and keep the state, and a `PolicySet` keeps the slot a later policy refused);
//! and a live change keeps the time unit or is refused.

use std::time::Duration;

use tollgate::algorithm::{Admission, Algorithm};
use tollgate::live::{Live, QuotaChangeError};
use tollgate::{
    DirectLimiter, FixedWindow, KeyedLimiter, LeakyBucket, ManualClock, PolicySet, Quota, Timestamp,
};

const T0: u64 = 1_700_000_000_000_000_000;
const BURST: u64 = 1_000;

/// The three rates, as `(count, period ns)`.
const RATES: [(u64, u64); 3] = [
    (u32::MAX as u64, 1_000_000_000),
    (1_000_000_000, 1_000_000_000),
    (u32::MAX as u64, 1_000_000),
];

/// Whether a rate of `RATES` is kept in 128 bits: all but exactly one per nanosecond.
fn is_wide((count, period): (u64, u64)) -> bool {
    count != period
}

fn shaper(rate: (u64, u64)) -> LeakyBucket {
    let (count, period) = rate;
    let quota = Quota::new(count, Duration::from_nanos(period))
        .and_then(|quota| quota.with_burst(BURST))
        .unwrap();
    let shaper = LeakyBucket::new(quota).unwrap();
    assert_eq!(shaper.is_wide(), is_wide(rate), "{quota}");
    assert_eq!(shaper.quota(), quota);
    // The gap rounded up: 1 ns for each of these rates.
    assert_eq!(shaper.emission_interval(), Duration::from_nanos(1));
    shaper
}

/// `k` slots of `period / count` ns, rounded up to whole nanoseconds.
fn slots_up((count, period): (u64, u64), k: u64) -> Duration {
    let nanos = (u128::from(k) * u128::from(period)).div_ceil(u128::from(count));
    Duration::from_nanos(u64::try_from(nanos).unwrap())
}

fn ts(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

/// A full queue at one instant through `check`: the `k`-th request waits exactly `k` slots,
/// rounded up, and the request after the burst is refused until the first slot has passed.
fn fills_its_queue_slot_by_slot(rate: (u64, u64), check: impl Fn(u64) -> tollgate::Decision) {
    for k in 0..BURST {
        let decision = check(T0);
        assert!(decision.is_allowed(), "{rate:?}: request {k}");
        assert_eq!(decision.delay(), slots_up(rate, k), "{rate:?}: request {k}");
        assert_eq!(
            decision.reset_after(),
            slots_up(rate, k + 1),
            "{rate:?}: request {k}"
        );
        assert_eq!(decision.remaining(), BURST - k - 1, "{rate:?}: request {k}");
    }
    let refused = check(T0);
    assert!(!refused.is_allowed(), "{rate:?}");
    assert_eq!(refused.retry_after(), slots_up(rate, 1), "{rate:?}");
    assert_eq!(refused.reset_after(), slots_up(rate, BURST), "{rate:?}");
    let retry = T0 + u64::try_from(slots_up(rate, 1).as_nanos()).unwrap();
    assert!(!check(retry - 1).is_allowed(), "{rate:?}: before its retry-after");
    let passed = check(retry);
    assert!(passed.is_allowed(), "{rate:?}: at its retry-after");
    // It starts where the queue ended, `BURST` slots after T0.
    assert_eq!(
        u128::from(retry) + passed.delay().as_nanos(),
        u128::from(T0) + slots_up(rate, BURST).as_nanos(),
        "{rate:?}"
    );
}

#[test]
fn a_wide_shaper_waits_each_request_its_exact_slot_rounded_up() {
    for rate in RATES {
        let direct = DirectLimiter::with_clock(shaper(rate), ManualClock::new());
        fills_its_queue_slot_by_slot(rate, |at| direct.check_n_at(1, ts(at)).unwrap());
        let keyed = KeyedLimiter::<str, _, _>::with_clock(shaper(rate), 8, ManualClock::new()).unwrap();
        fills_its_queue_slot_by_slot(rate, |at| keyed.check_n_at("tenant", 1, ts(at)).unwrap());
    }
}

/// Half the queue taken at T0: the next request waits 500 slots rounded up. Within a maximum a
/// nanosecond shorter it is refused, nothing stored, and told to retry in a nanosecond; within
/// exactly that wait it is admitted with it.
fn refuses_past_the_maximum_storing_nothing(
    rate: (u64, u64),
    check_n: impl Fn(u64) -> tollgate::Decision,
    within: impl Fn(Duration) -> tollgate::Decision,
    state: impl Fn() -> Option<u128>,
) {
    let half = BURST / 2;
    assert!(check_n(half).is_allowed(), "{rate:?}");
    let wait = slots_up(rate, half);
    let before = state();
    let refused = within(wait - Duration::from_nanos(1));
    assert!(!refused.is_allowed(), "{rate:?}: {refused:?}");
    assert_eq!(refused.remaining(), 0, "{rate:?}");
    assert_eq!(refused.retry_after(), Duration::from_nanos(1), "{rate:?}");
    assert_eq!(refused.reset_after(), wait, "{rate:?}");
    assert_eq!(state(), before, "{rate:?}: a refusal stores nothing");
    let admitted = within(wait);
    assert!(admitted.is_allowed(), "{rate:?}: {admitted:?}");
    assert_eq!(admitted.delay(), wait, "{rate:?}");
    assert_eq!(admitted.reset_after(), slots_up(rate, half + 1), "{rate:?}");
}

#[test]
fn a_wide_shaper_refuses_a_wait_past_the_maximum_storing_nothing() {
    for rate in RATES {
        let direct = DirectLimiter::with_clock(shaper(rate), ManualClock::starting_at(ts(T0)));
        refuses_past_the_maximum_storing_nothing(
            rate,
            |cost| direct.check_n(cost).unwrap(),
            |max| direct.check_n_within(1, max).unwrap(),
            || Some(direct.raw_state_wide()),
        );
        let keyed =
            KeyedLimiter::<str, _, _>::with_clock(shaper(rate), 8, ManualClock::starting_at(ts(T0))).unwrap();
        refuses_past_the_maximum_storing_nothing(
            rate,
            |cost| keyed.check_n("tenant", cost).unwrap(),
            |max| keyed.check_n_within("tenant", 1, max).unwrap(),
            // The keyed table's state is its answers: the next peek is unchanged.
            || Some(keyed.peek_n("tenant", 0).unwrap().reset_after().as_nanos()),
        );
    }
}

/// A slot is never given back: `refund_slot` (even of the slot that ends the queue),
/// `refund_n` and `undo` return `false`, and the next request is decided as if none had been
/// called.
#[test]
fn a_wide_shaper_gives_nothing_back() {
    for rate in RATES.into_iter().filter(|&rate| is_wide(rate)) {
        let direct = DirectLimiter::with_clock(shaper(rate), ManualClock::starting_at(ts(T0)));
        let (first, _) = direct.check_slot(1, None).unwrap();
        let (last, end) = direct.check_slot(3, Some(Duration::from_secs(1))).unwrap();
        assert!(first.is_allowed() && last.is_allowed(), "{rate:?}");
        let state = direct.raw_state_wide();
        assert!(!direct.refund_slot(3, end.expect("admitted")), "{rate:?}");
        assert!(!direct.refund_n(3), "{rate:?}");
        assert!(!direct.undo(&Admission::new(ts(T0), 3, &last)), "{rate:?}");
        assert_eq!(direct.raw_state_wide(), state, "{rate:?}");
        assert_eq!(direct.check().delay(), slots_up(rate, 4), "{rate:?}");

        let keyed =
            KeyedLimiter::<str, _, _>::with_clock(shaper(rate), 8, ManualClock::starting_at(ts(T0))).unwrap();
        let (_, end) = keyed.check_slot("tenant", 4, None).unwrap();
        let (_, last) = keyed.check_n_undoable_at("tenant", 2, ts(T0)).unwrap();
        assert!(
            !keyed.refund_slot("tenant", 4, end.expect("admitted")),
            "{rate:?}"
        );
        assert!(!keyed.refund_n("tenant", 2), "{rate:?}");
        assert!(!keyed.undo("tenant", &last), "{rate:?}");
        assert_eq!(keyed.check("tenant").delay(), slots_up(rate, 6), "{rate:?}");
    }
}

/// A wide shaper's time is in units of `1 / count` ns: it changes live to another period or
/// burst of its count, its queue kept in time; to another count, or to or from a 64-bit
/// shaper, the change is the typed error that changes nothing.
#[test]
fn a_wide_shaper_changes_live_only_within_its_time_unit() {
    let quota = |text: &str| text.parse::<Quota>().unwrap();
    let rate = (u64::from(u32::MAX), 1_000_000_000);
    let limiter = DirectLimiter::with_clock(
        Live::new(LeakyBucket::new(quota("4294967295/s burst 10")).unwrap()),
        ManualClock::starting_at(ts(T0)),
    );
    assert!(limiter.check_n(8).unwrap().is_allowed());
    // The queue ends 8 slots after T0; at half the rate the next request still starts there,
    // and the one after it two slots of the old rate later.
    limiter
        .algorithm()
        .set_quota(quota("4294967295/2s burst 10"))
        .unwrap();
    assert_eq!(limiter.check().delay(), slots_up(rate, 8));
    assert_eq!(limiter.check().delay(), slots_up(rate, 10));
    for next in ["4294967294/s", "10/s"] {
        assert_eq!(
            limiter.algorithm().set_quota(quota(next)),
            Err(QuotaChangeError::TimeUnitChanged {
                from: quota("4294967295/2s burst 10"),
                to: quota(next)
            })
        );
    }
    assert_eq!(limiter.algorithm().changes(), 1);
    let narrow = Live::new(LeakyBucket::new(quota("10/s")).unwrap());
    assert_eq!(
        narrow.set_quota(quota("4294967295/s")),
        Err(QuotaChangeError::TimeUnitChanged {
            from: quota("10/s"),
            to: quota("4294967295/s")
        })
    );
    assert_eq!(narrow.changes(), 0);
    let message = QuotaChangeError::TimeUnitChanged {
        from: quota("4294967295/s"),
        to: quota("10/s"),
    }
    .to_string();
    assert!(message.starts_with("a bucket cannot change"), "{message}");
}

/// A `PolicySet` of a wide shaper and a window that refuses the second request: the shaper's
/// admission is undone, and gives nothing back, so its slot passes unused and the next request
/// through the shaper waits behind it (a 64-bit shaper's undo would give that slot back).
#[test]
fn a_policy_set_undoing_a_wide_shaper_keeps_its_slot() {
    let rate = RATES[0];
    let clock = ManualClock::starting_at(ts(T0));
    let set = PolicySet::new("shape", DirectLimiter::with_clock(shaper(rate), clock.clone()))
        .and_then(|set| {
            set.and(
                "window",
                DirectLimiter::with_clock(FixedWindow::new("1/min".parse().unwrap()).unwrap(), clock),
            )
        })
        .unwrap();
    assert!(set.check(&()).is_allowed());
    let refused = set.check(&());
    assert!(!refused.is_allowed());
    assert_eq!(refused.reporting(), 1, "the window refuses");
    let shaper = set.limiter(0).expect("the shaper");
    assert_eq!(shaper.peek(&(), 1, None).unwrap().delay(), slots_up(rate, 2));
}
