//! The lease arithmetic on plain values: spends, installs, sizing, give-backs.

use std::time::Duration;

use super::*;
use crate::{Outcome, Quota};

/// `T` = 1 ms, burst 100.
const T: u64 = 1_000;
const BURST: u64 = 100;

fn bucket_rule() -> LeaseRule {
    let quota = Quota::new(1, Duration::from_micros(T))
        .unwrap()
        .with_burst(BURST)
        .unwrap();
    LeaseRule::Bucket {
        bucket: TokenBucket::new(quota).unwrap(),
        interval: T,
        tolerance: BURST * T,
    }
}

/// On a client's clock (no margin): local times are the timeline.
const SIZING: Sizing = Sizing {
    max_lease: 40,
    interval: 100_000,
    margin: false,
};

/// An ask for `cost` of `want` units, sized.
fn sized(cost: u64, want: u64) -> Ask {
    Ask {
        cost,
        want,
        sized: true,
        #[cfg(tollgate_loom)]
        snapshot: Held::default(),
    }
}

/// A held bucket lease of `units` slots from `start`, granted at `start` (the key's first).
fn bucket_lease(start: u64, units: u64) -> Held {
    let mut held = Held::default();
    let grant = Grant::Bucket {
        granted: units,
        start,
        now: start,
    };
    assert_eq!(
        bucket_rule().install(&mut held, &sized(0, units), &grant, start, start, &SIZING),
        0
    );
    held
}

fn admitted(spend: Spend) -> bool {
    matches!(spend, Spend::Lease { decision, .. } if decision.is_allowed())
}

#[test]
fn a_lease_at_a_frozen_time_is_spent_exactly_once_per_slot() {
    let rule = bucket_rule();
    let mut held = bucket_lease(1_000_000, 10);
    for spent in 0..10 {
        assert!(
            admitted(rule.spend(&mut held, &SIZING, 1_000_000, 1)),
            "unit {spent}"
        );
    }
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_000_000, 1),
        Spend::Ask(_)
    ));
    assert_eq!(rule.units(&held, &SIZING, 1_000_000), 0);
}

#[test]
fn slots_whose_time_passed_are_lost() {
    let rule = bucket_rule();
    let mut held = bucket_lease(1_000_000, 10);
    // 4.5 slots later, the first four slots and half of the fifth have passed.
    assert_eq!(rule.units(&held, &SIZING, 1_004_500), 5);
    for _ in 0..5 {
        assert!(admitted(rule.spend(&mut held, &SIZING, 1_004_500, 1)));
    }
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_004_500, 1),
        Spend::Ask(_)
    ));
    // Past the lease's end, nothing is left.
    let held = bucket_lease(1_000_000, 10);
    assert_eq!(rule.units(&held, &SIZING, 1_010_000), 0);
}

#[test]
fn a_spend_never_takes_a_slot_past_the_burst_ahead_of_now() {
    let rule = bucket_rule();
    // A range running 150 slots ahead (no script grants one, but the local check alone must
    // hold the bound): only the slots within the burst (100 ms) of the reading are spent, then
    // one more per slot of time.
    let mut held = bucket_lease(1_000_000, 10);
    held.to = 1_150_000;
    let mut spent = 0;
    while admitted(rule.spend(&mut held, &SIZING, 1_000_000, 1)) {
        spent += 1;
    }
    assert_eq!(spent, 100);
    assert!(admitted(rule.spend(&mut held, &SIZING, 1_001_000, 1)));
    assert!(!admitted(rule.spend(&mut held, &SIZING, 1_001_000, 1)));
}

#[test]
fn a_contiguous_grant_extends_the_range_and_another_becomes_the_next() {
    let rule = bucket_rule();
    let mut held = bucket_lease(1_000_000, 4);
    let contiguous = Grant::Bucket {
        granted: 3,
        start: 1_004_000,
        now: 1_000_100,
    };
    rule.install(
        &mut held,
        &sized(0, 3),
        &contiguous,
        1_000_100,
        1_000_100,
        &SIZING,
    );
    assert_eq!((held.from, held.to, held.next_to), (1_000_000, 1_007_000, 0));
    // Another process took slots after ours: the next grant is a second range.
    let apart = Grant::Bucket {
        granted: 5,
        start: 1_020_000,
        now: 1_000_200,
    };
    rule.install(&mut held, &sized(0, 5), &apart, 1_000_200, 1_000_200, &SIZING);
    assert_eq!((held.next_from, held.next_to), (1_020_000, 1_025_000));
    // 6 whole slots left of the first range at 1.0002 s (its first slot's time has begun),
    // and the second's 5.
    assert_eq!(rule.units(&held, &SIZING, 1_000_200), 11);
    let mut spent = 0;
    while admitted(rule.spend(&mut held, &SIZING, 1_000_200, 1)) {
        spent += 1;
    }
    assert_eq!(spent, 11);
    assert_eq!(held.known, 1_025_000);
}

#[test]
fn a_request_heavier_than_the_range_moves_to_the_next_and_the_rest_passes() {
    let rule = bucket_rule();
    let mut held = bucket_lease(1_000_000, 2);
    let apart = Grant::Bucket {
        granted: 5,
        start: 1_020_000,
        now: 1_000_000,
    };
    rule.install(&mut held, &sized(0, 5), &apart, 1_000_000, 1_000_000, &SIZING);
    assert!(admitted(rule.spend(&mut held, &SIZING, 1_000_000, 3)));
    assert_eq!((held.from, held.to, held.next_to), (1_023_000, 1_025_000, 0));
}

#[test]
fn what_redis_refused_is_refused_without_a_round_trip() {
    let rule = bucket_rule();
    let mut held = Held::default();
    // Redis refused at 1 s with the queue ending 100 ms ahead: the bucket is empty.
    let refused = Grant::Bucket {
        granted: 0,
        start: 1_100_000,
        now: 1_000_000,
    };
    let ask = match rule.spend(&mut held, &SIZING, 1_000_000, 1) {
        Spend::Ask(ask) => ask,
        other => panic!("{other:?}"),
    };
    assert_eq!((ask.cost, ask.want, ask.sized), (1, 1, true));
    rule.install(&mut held, &ask, &refused, 1_000_000, 1_000_000, &SIZING);
    match rule.spend(&mut held, &SIZING, 1_000_500, 1) {
        Spend::Refused { decision } => {
            assert_eq!(decision.outcome(), Outcome::Denied);
            assert_eq!(decision.retry_after(), Duration::from_micros(500));
        }
        other => panic!("{other:?}"),
    }
    // A slot later one unit is free: a process that has spent nothing yet asks for it.
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_001_000, 1),
        Spend::Ask(_)
    ));
    // A process spending 20 units per interval wants 40 at a time, but waits only until a
    // sixteenth of the burst (6) is free: refused while fewer are, asking once that many are.
    let mut busy = held;
    busy.asking = false;
    busy.spent = 20;
    busy.since = 1_000_000 - SIZING.interval;
    for refused_at in [1_001_000, 1_005_000] {
        assert!(matches!(
            rule.spend(&mut busy, &SIZING, refused_at, 1),
            Spend::Refused { .. }
        ));
    }
    assert!(matches!(
        rule.spend(&mut busy, &SIZING, 1_006_000, 1),
        Spend::Ask(_)
    ));
    // A weightless request is admitted, on what Redis said.
    assert!(admitted(rule.spend(&mut held, &SIZING, 1_000_500, 0)));
}

#[test]
fn a_first_lease_is_the_request_and_later_ones_follow_the_spending() {
    let mut held = Held::default();
    assert_eq!(held.next_want(&SIZING, 5_000_000, 3, 0), 3);
    assert_eq!(held.ask(&SIZING, 5_000_000, 3, 0), 3);
    held.anchor(5_000_000, 5_000_000);
    held.spent = 3;
    // 3 units in 1 ms: counted over an eighth of the interval (12.5 ms), 24 per interval.
    assert_eq!(held.ask(&SIZING, 5_001_000, 1, 0), 40);
    held.spent = 2;
    assert_eq!(held.next_want(&SIZING, 5_001_000, 1, 0), 32);
    // 30 units over 200 ms, sized for 100 ms: 2 * 15; the span restarts, its pace kept.
    held.spent = 30;
    assert_eq!(held.ask(&SIZING, 5_200_000, 1, 0), 30);
    assert_eq!((held.spent, held.since, held.pace), (0, 5_200_000, 15));
    // Within the next interval, nothing spent yet: the last span's pace.
    assert_eq!(held.next_want(&SIZING, 5_210_000, 1, 0), 30);
    // Never above the largest lease, never below the request.
    held.spent = 1_000;
    assert_eq!(held.next_want(&SIZING, 5_400_000, 1, 0), 40);
    assert_eq!(held.next_want(&SIZING, 5_400_000, 50, 0), 50);
}

#[test]
fn a_key_spent_slowly_asks_for_an_intervals_share_of_what_its_quota_has_free() {
    let wide = Sizing {
        max_lease: 1_000,
        ..SIZING
    };
    let want = |spend: Spend| match spend {
        Spend::Ask(ask) => ask.want,
        other => panic!("{other:?}"),
    };
    // The bucket (one slot a millisecond, burst 100; an interval of 100 ms passes 100 slots): 8
    // slots leased and spent at once; its pace alone would ask for 2, but 92 of the burst's 100
    // slots are free: the refresh at half the lease asks for an eighth of them, 11. A request
    // an interval later, the lease spent, asks for 12 (the whole burst is free again).
    let rule = bucket_rule();
    let refreshes = |sizing: &Sizing| {
        let mut held = bucket_lease(1_000_000, 8);
        let mut refreshes = Vec::new();
        for _ in 0..8 {
            match rule.spend(&mut held, sizing, 1_000_000, 1) {
                Spend::Lease { decision, refresh } if decision.is_allowed() => {
                    refreshes.extend(refresh.map(|ask| ask.want))
                }
                other => panic!("{other:?}"),
            }
        }
        (refreshes, held)
    };
    let (asked, mut held) = refreshes(&wide);
    assert_eq!(asked, [(BURST - 8) / 8]);
    held.asking = false;
    assert_eq!(want(rule.spend(&mut held, &wide, 1_100_000, 1)), BURST / 8);
    // With an interval of 4 ms, 4 slots pass in one: the floor is 4, not 11.
    let short = Sizing {
        interval: 4_000,
        ..wide
    };
    assert_eq!(refreshes(&short).0, [4]);
    // The window of a second, limit 800: the key's first request counted 1. The next, 100 µs
    // later, asks for the 799 left spread over the 999.9 ms left, one interval's share (79); in
    // a later window, for the limit over a whole window (80). Both at most an eighth of what is
    // free.
    let window = |length: u64| {
        let rule = LeaseRule::Window {
            limit: 800,
            length,
            sliding: None,
        };
        let mut held = Held::default();
        let grant = Grant::Window {
            granted: 1,
            count: 0,
            previous: 0,
            end: 1_000_000 + length,
            now: 1_000_000,
        };
        assert_eq!(
            rule.install(&mut held, &sized(1, 1), &grant, 1_000_000, 1_000_000, &wide),
            0
        );
        (rule, held)
    };
    let (rule, mut held) = window(1_000_000);
    assert_eq!(want(rule.spend(&mut held, &wide, 1_000_100, 1)), 79);
    held.asking = false;
    assert_eq!(want(rule.spend(&mut held, &wide, 2_000_100, 1)), 80);
    // Never above the largest lease.
    held.asking = false;
    assert_eq!(
        want(rule.spend(&mut held, &SIZING, 2_000_200, 1)),
        SIZING.max_lease
    );
    // An hour's window: an interval's share is under a unit, and the key asks for what its
    // pace wants alone (2), so a process that stops spending holds next to nothing.
    let (rule, mut held) = window(3_600_000_000);
    assert_eq!(want(rule.spend(&mut held, &wide, 1_000_100, 1)), 2);
}

#[test]
fn a_refresh_starts_when_half_of_the_lease_is_spent() {
    let rule = bucket_rule();
    let mut held = bucket_lease(1_000_000, 8);
    for _ in 0..3 {
        match rule.spend(&mut held, &SIZING, 1_000_000, 1) {
            Spend::Lease { refresh: None, .. } => {}
            other => panic!("{other:?}"),
        }
    }
    match rule.spend(&mut held, &SIZING, 1_000_000, 1) {
        Spend::Lease {
            refresh: Some(ask), ..
        } => assert_eq!((ask.cost, ask.sized), (0, true)),
        other => panic!("{other:?}"),
    }
    // One refresh at a time.
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_000_000, 1),
        Spend::Lease { refresh: None, .. }
    ));
}

#[test]
fn an_install_keeps_the_spends_made_while_its_ask_was_in_flight() {
    let rule = bucket_rule();
    let mut held = bucket_lease(1_000_000, 4);
    held.asking = true;
    let ask = sized(0, 4);
    for _ in 0..4 {
        assert!(admitted(rule.spend(&mut held, &SIZING, 1_000_000, 1)));
    }
    let contiguous = Grant::Bucket {
        granted: 4,
        start: 1_004_000,
        now: 1_000_000,
    };
    rule.install(&mut held, &ask, &contiguous, 1_000_000, 1_000_000, &SIZING);
    assert!(!held.asking);
    assert_eq!(rule.units(&held, &SIZING, 1_000_000), 4);
}

#[test]
fn the_last_range_goes_back_and_is_not_spent_after() {
    let rule = bucket_rule();
    let mut held = bucket_lease(1_000_000, 10);
    assert!(admitted(rule.spend(&mut held, &SIZING, 1_000_000, 3)));
    let back = rule.give_back(&mut held, &SIZING, 1_000_000).unwrap();
    assert_eq!(
        back,
        GiveBack {
            end: 1_010_000,
            units: 7
        }
    );
    assert_eq!(rule.units(&held, &SIZING, 1_000_000), 0);
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_000_000, 1),
        Spend::Ask(_)
    ));
    assert_eq!(rule.give_back(&mut held, &SIZING, 1_000_000), None);
}

#[test]
fn a_window_lease_is_spent_within_its_window_only() {
    let rule = LeaseRule::Window {
        limit: 10,
        length: 1_000_000,
        sliding: None,
    };
    let mut held = Held::default();
    let grant = Grant::Window {
        granted: 6,
        count: 2,
        previous: 0,
        end: 2_000_000,
        now: 1_500_000,
    };
    let ask = sized(1, 6);
    rule.install(&mut held, &ask, &grant, 1_500_000, 1_500_000, &SIZING);
    assert_eq!(rule.answer(&grant, 1).map(|d| d.remaining()), Some(7));
    for spent in 0..5 {
        match rule.spend(&mut held, &SIZING, 1_600_000, 1) {
            Spend::Lease { decision, .. } => assert_eq!(decision.remaining(), 6 - spent),
            other => panic!("{other:?}"),
        }
    }
    // The window holds 8 of 10: a request of 3 is refused without a round trip.
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_600_000, 3),
        Spend::Refused { .. }
    ));
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_600_000, 2),
        Spend::Ask(_)
    ));
    // Units left at the window's end pass.
    let mut held = Held::default();
    rule.install(&mut held, &ask, &grant, 1_500_000, 1_500_000, &SIZING);
    assert_eq!(rule.units(&held, &SIZING, 1_999_999), 5);
    assert_eq!(rule.units(&held, &SIZING, 2_000_000), 0);
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 2_000_000, 1),
        Spend::Ask(_)
    ));
}

#[test]
fn a_local_reading_runs_ahead_of_the_anchor_on_the_server_clock() {
    let server = Sizing {
        margin: true,
        ..SIZING
    };
    let mut held = Held::default();
    held.anchor(10_000, 7_000_000);
    assert_eq!(held.line(10_000, &server), 7_000_000);
    assert_eq!(held.line(4_106_000, &server), 7_000_000 + 4_096_000 + 1_000);
    // A reading before the anchor reads as the anchor.
    assert_eq!(held.line(5_000, &server), 7_000_000);
    // A reply sent earlier than the anchor's does not move it back.
    held.anchor(9_000, 6_000_000);
    assert_eq!(held.line(10_000, &server), 7_000_000);
}

#[test]
fn the_table_stores_nothing_when_a_local_spend_needs_a_round_trip() {
    let table = LeaseTable::new(bucket_rule(), SIZING, 4).unwrap();
    let hash = table.hash(b"k");
    assert_eq!(table.spend_locally(hash, 1_000_000, 1), None);
    assert_eq!(table.held(hash), Some(Held::default()));
    let ask = match table.spend(hash, 1_000_000, 1) {
        Spend::Ask(ask) => ask,
        other => panic!("{other:?}"),
    };
    assert!(table.held(hash).unwrap().asking);
    let grant = Grant::Bucket {
        granted: 1,
        start: 1_000_000,
        now: 1_000_000,
    };
    assert_eq!(
        table.install(hash, "k", &ask, &grant, 1_000_000, 1_000_000),
        Some(0)
    );
    assert!(!table.held(hash).unwrap().asking);
    // A key the table does not hold takes no grant.
    assert_eq!(
        table.install(table.hash(b"other"), "other", &ask, &grant, 1_000_000, 1_000_000),
        None
    );
}

/// A sliding window counter's lease: 10 a second, the previous window counted 6. Its units are
/// spent with the core's numbers; a request the lease does not hold is refused locally only
/// when the previous window's weight and what Redis counted refuse it, and asked for otherwise.
#[test]
fn a_sliding_window_lease_weighs_the_previous_window() {
    let window = crate::SlidingWindow::new(Quota::new(10, Duration::from_secs(1)).unwrap()).unwrap();
    let rule = LeaseRule::Window {
        limit: 10,
        length: 1_000_000,
        sliding: Some(window),
    };
    // At the window's start: the request and 2 units more, counted 0 before.
    let grant = Grant::Window {
        granted: 3,
        count: 0,
        previous: 6,
        end: 2_000_000,
        now: 1_000_000,
    };
    let decision = rule.answer(&grant, 1).unwrap();
    assert!(decision.is_allowed());
    // 6 + 1 counted: 3 left.
    assert_eq!(decision.remaining(), 3);
    let mut held = Held::default();
    assert_eq!(
        rule.install(&mut held, &sized(1, 3), &grant, 1_000_000, 1_000_000, &SIZING),
        0
    );
    for remaining in [2, 1] {
        match rule.spend(&mut held, &SIZING, 1_000_000, 1) {
            Spend::Lease { decision, .. } => {
                assert!(decision.is_allowed());
                assert_eq!(decision.remaining(), remaining);
            }
            other => panic!("{other:?}"),
        }
    }
    // 6 + 3 + 2 > 10: refused without a round trip; 6 + 3 + 1 fits: asked.
    match rule.spend(&mut held, &SIZING, 1_000_000, 2) {
        Spend::Refused { decision } => assert!(!decision.is_allowed()),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_000_000, 1),
        Spend::Ask(_)
    ));
    // Half the window later the previous one weighs 3: 3 + 3 + 2 fits.
    held.asking = false;
    assert!(matches!(
        rule.spend(&mut held, &SIZING, 1_500_000, 2),
        Spend::Ask(_)
    ));
    // Past the window's end nothing of the lease is spent.
    held.asking = false;
    assert_eq!(rule.units(&held, &SIZING, 2_000_000), 0);
}
