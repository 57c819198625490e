//! Giving back units that were admitted and never used (`refund_n`): a shaped request whose
//! client left frees its place, and no refund ever gives back more than is outstanding.

use std::time::Duration;

use tollgate::{
    DirectLimiter, FixedWindow, KeyedLimiter, LeakyBucket, ManualClock, SlidingWindow, Timestamp, TokenBucket,
};

/// Units a request of weight 1 would leave behind now: a peek reports the remaining after
/// the request it imagines, so a bucket holding `n` units reports `n - 1`.
fn units_left<A: tollgate::algorithm::Algorithm>(
    limiter: &DirectLimiter<A, ManualClock>,
    now: Timestamp,
) -> u64 {
    limiter.peek_at(now).remaining() + 1
}

/// A token bucket of 10 per second (burst 10) on a manual clock.
fn ten_per_second() -> DirectLimiter<TokenBucket, ManualClock> {
    DirectLimiter::with_clock(
        TokenBucket::new("10/s".parse().unwrap()).unwrap(),
        ManualClock::new(),
    )
}

fn at(millis: u64) -> Timestamp {
    Timestamp::from_nanos(millis * 1_000_000)
}

#[test]
fn an_abandoned_slot_goes_to_the_next_request() {
    // 2 per second, one proceeds and two wait.
    let shaper = DirectLimiter::with_clock(
        LeakyBucket::new("2/s burst 3".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let delays: Vec<_> = (0..3).map(|_| shaper.check_at(at(0)).delay()).collect();
    assert_eq!(
        delays,
        [
            Duration::ZERO,
            Duration::from_millis(500),
            Duration::from_millis(1000)
        ]
    );
    assert!(!shaper.check_at(at(0)).is_allowed(), "the queue is full");

    // The request waiting for the 1000 ms slot leaves: its place is free again.
    assert!(shaper.refund_n_at(1, at(0)));
    let next = shaper.check_at(at(0));
    assert!(next.is_allowed());
    assert_eq!(next.delay(), Duration::from_millis(1000));
    assert!(
        !shaper.check_at(at(0)).is_allowed(),
        "exactly one place was freed"
    );
}

#[test]
fn a_refund_never_makes_a_bucket_better_than_full() {
    let bucket = ten_per_second();
    // A fresh bucket has nothing outstanding.
    assert!(!bucket.refund_n_at(5, at(0)));
    assert_eq!(bucket.raw_state(), 0);

    assert!(bucket.check_n_at(3, at(0)).unwrap().is_allowed());
    // Giving back far more than was taken only refills the bucket.
    assert!(bucket.refund_n_at(u64::MAX, at(0)));
    assert_eq!(units_left(&bucket, at(0)), 10);
    assert_eq!(
        (0..20).filter(|_| bucket.check_at(at(0)).is_allowed()).count(),
        10
    );
}

/// A refund never moves a bucket's time behind `now`: a clock that later steps back finds the
/// bucket full at `now`, not fuller than full at the earlier instant.
#[test]
fn a_refund_leaves_the_bucket_full_at_now_not_before() {
    let bucket = ten_per_second();
    assert!(bucket.check_n_at(10, at(1_000)).unwrap().is_allowed());
    assert!(bucket.refund_n_at(u64::MAX, at(1_000)));
    assert_eq!(bucket.raw_state(), 1_000_000_000);
    // Half a second earlier, the bucket that was full at 1 s holds 5.
    assert_eq!(
        (0..20).filter(|_| bucket.check_at(at(500)).is_allowed()).count(),
        5
    );
}

#[test]
fn a_refund_gives_back_exactly_its_units() {
    let bucket = ten_per_second();
    assert!(bucket.check_n_at(10, at(0)).unwrap().is_allowed());
    assert!(!bucket.check_at(at(0)).is_allowed());
    assert!(bucket.refund_n_at(4, at(0)));
    assert_eq!(units_left(&bucket, at(0)), 4);
    assert_eq!((0..20).filter(|_| bucket.check_at(at(0)).is_allowed()).count(), 4);
}

#[test]
fn a_refund_after_the_bucket_refilled_gives_nothing_back() {
    let bucket = ten_per_second();
    assert!(bucket.check_n_at(10, at(0)).unwrap().is_allowed());
    // One second later the bucket is full again: the units are no longer outstanding.
    assert!(!bucket.refund_n_at(10, at(1_000)));
    assert_eq!(units_left(&bucket, at(1_000)), 10);
}

#[test]
fn a_refund_with_a_clock_that_stepped_back_gives_back_no_more_than_its_units() {
    let bucket = ten_per_second();
    assert!(bucket.check_n_at(10, at(500)).unwrap().is_allowed());
    // Refunded "before" the admission: the bucket must not end up fuller than two units' worth.
    assert!(bucket.refund_n_at(2, at(0)));
    assert_eq!(units_left(&bucket, at(500)), 2);
}

#[test]
fn windows_cannot_tell_when_their_units_were_admitted_so_they_give_nothing_back() {
    let fixed = DirectLimiter::with_clock(
        FixedWindow::new("10/s".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let sliding = DirectLimiter::with_clock(
        SlidingWindow::new("10/s".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    assert!(fixed.check_n_at(10, at(0)).unwrap().is_allowed());
    assert!(sliding.check_n_at(10, at(0)).unwrap().is_allowed());
    let (fixed_before, sliding_before) = (fixed.raw_state(), sliding.raw_state());
    assert!(!fixed.refund_n_at(3, at(0)));
    assert!(!sliding.refund_n_at(3, at(0)));
    assert_eq!(fixed.raw_state(), fixed_before);
    assert_eq!(sliding.raw_state(), sliding_before);
}

#[test]
fn a_keyed_refund_touches_only_its_own_key() {
    let shaper: KeyedLimiter<str, _, _> = KeyedLimiter::with_clock(
        LeakyBucket::new("1/s burst 2".parse().unwrap()).unwrap(),
        100,
        ManualClock::new(),
    )
    .unwrap();
    assert!(
        !shaper.refund_n_at("absent", 1, at(0)),
        "an absent key has nothing outstanding"
    );
    assert_eq!(shaper.len(), 0, "a refund never inserts a key");
    for key in ["a", "b"] {
        assert!(shaper.check_at(key, at(0)).is_allowed());
        assert_eq!(shaper.check_at(key, at(0)).delay(), Duration::from_secs(1));
        assert!(!shaper.check_at(key, at(0)).is_allowed());
    }
    assert!(shaper.refund_n_at("a", 1, at(0)));
    assert!(shaper.check_at("a", at(0)).is_allowed());
    assert!(
        !shaper.check_at("b", at(0)).is_allowed(),
        "b's queue is still full"
    );
}

#[test]
fn concurrent_checks_and_refunds_balance_exactly() {
    // 4 threads each take a unit and give it back 10,000 times on a bucket of 4 at a frozen
    // time: every take must pass (at most 4 are ever outstanding), and the bucket ends full.
    let bucket = DirectLimiter::with_clock(
        TokenBucket::new("4/s".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10_000 {
                    assert!(bucket.check_at(at(0)).is_allowed());
                    assert!(bucket.refund_n_at(1, at(0)));
                }
            });
        }
    });
    assert_eq!(units_left(&bucket, at(0)), 4);
}

/// A refund of any weight, however large, gives back at most what is outstanding: a drained
/// bucket is full again, never more (`2^56` units of a 100 ms interval would wrap to 0 ns if the
/// product wrapped instead of saturating).
#[test]
fn a_refund_of_a_huge_weight_fills_the_bucket_and_no_more() {
    for cost in [u64::MAX, 1 << 56] {
        let limiter = ten_per_second();
        while limiter.check().is_allowed() {}
        assert!(limiter.refund_n(cost), "weight {cost}");
        assert_eq!(limiter.peek().remaining(), 9, "weight {cost}");
        for _ in 0..10 {
            assert!(limiter.check().is_allowed(), "weight {cost}");
        }
        assert!(
            !limiter.check().is_allowed(),
            "weight {cost}: more than the burst came back"
        );
    }
}
