//! Edges of `u64` time and of each algorithm's arithmetic: the ends of representable time,
//! clocks that step backwards, weightless requests, the exact size of a burst, the exact
//! meaning of `retry_after`, `reset_after` and `remaining`, and the real clocks.
//!
//! Nothing here may panic: the test profile keeps overflow checks on, so any wrapping
//! arithmetic on the decision path fails the test that reaches it.

use std::time::{Duration, SystemTime};

use tollgate::algorithm::{Algorithm, Transition, FRESH_STATE};
use tollgate::{
    Clock, CoarseClock, Decision, DirectLimiter, FixedWindow, FixedWindowState, GcraState, LeakyBucket,
    ManualClock, PreciseClock, Quota, SlidingWindow, SlidingWindowState, Timestamp, TokenBucket,
};

const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;
/// A minute boundary in November 2023: `1_700_000_040 s` is a multiple of 60 s.
const T0: u64 = 1_700_000_040 * SEC;

fn ts(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

fn ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).expect("every duration a decision reports fits in u64 ns")
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn tb(text: &str) -> TokenBucket {
    TokenBucket::new(quota(text)).unwrap()
}

fn lb(text: &str) -> LeakyBucket {
    LeakyBucket::new(quota(text)).unwrap()
}

fn fw(text: &str) -> FixedWindow {
    FixedWindow::new(quota(text)).unwrap()
}

fn sw(text: &str) -> SlidingWindow {
    SlidingWindow::new(quota(text)).unwrap()
}

fn at<A: Algorithm>(algorithm: A, now: u64) -> DirectLimiter<A, ManualClock> {
    DirectLimiter::with_clock(algorithm, ManualClock::starting_at(ts(now)))
}

/// How many weight-1 requests pass one after another at `now`, starting from `state`
/// (stopping, and failing, past `bound`).
fn units_passing<A: Algorithm>(algorithm: &A, mut state: u64, now: u64, bound: u64) -> u64 {
    let mut passed = 0;
    loop {
        let transition = algorithm.decide(state, ts(now), 1);
        if !transition.decision.is_allowed() {
            return passed;
        }
        state = transition.state;
        passed += 1;
        assert!(passed <= bound, "more than {bound} units pass at {now}");
    }
}

/// What must hold for every decision, whatever the state and time.
fn assert_sane(d: &Decision, cost: u64, capacity: u64, context: &str) {
    assert!(
        d.remaining() <= capacity,
        "{context}: remaining above capacity: {d:?}"
    );
    if d.is_allowed() {
        assert_eq!(d.retry_after(), Duration::ZERO, "{context}: {d:?}");
        assert!(d.remaining() <= capacity - cost, "{context}: {d:?}");
    } else {
        // (That a refusal never says "retry now" is checked, with the rest of retry_after's
        // promise, by `assert_retry_exact`.)
        assert_eq!(d.delay(), Duration::ZERO, "{context}: {d:?}");
        if cost > 0 {
            assert!(d.remaining() < cost, "{context}: refused although {d:?} remain");
        }
    }
}

/// `retry_after` of a refusal is exact: the same request at `now + retry_after` passes, one
/// nanosecond earlier it does not. A request that can never pass says `u64::MAX` ns.
fn assert_retry_exact<A: Algorithm>(algorithm: &A, state: u64, now: u64, cost: u64, context: &str) {
    let d = algorithm.decide(state, ts(now), cost).decision;
    assert!(!d.is_allowed(), "{context}: expected a refusal at {now}");
    let retry = ns(d.retry_after());
    assert!(retry > 0, "{context}: refused at {now} with retry_after 0: {d:?}");
    if retry == u64::MAX {
        let last = algorithm.decide(state, Timestamp::MAX, cost).decision;
        assert!(
            !last.is_allowed(),
            "{context}: 'never' at {now}, but passes at the end of time"
        );
        return;
    }
    let then = now
        .checked_add(retry)
        .unwrap_or_else(|| panic!("{context}: retry_after {retry} from {now} is past the end of time"));
    let later = algorithm.decide(state, ts(then), cost).decision;
    assert!(
        later.is_allowed(),
        "{context}: refused at {now} with retry_after {retry} ns, still refused then: {later:?}"
    );
    let before = algorithm.decide(state, ts(then - 1), cost).decision;
    assert!(
        !before.is_allowed(),
        "{context}: refused at {now} with retry_after {retry} ns, but passes 1 ns earlier"
    );
}

/// `reset_after` is exact: from `state` at `now`, after `reset` the limiter answers exactly as a
/// fresh one would (for every weight), and one nanosecond earlier it does not. A limiter that
/// is never fresh again before the end of representable time says `u64::MAX` ns.
fn assert_reset_exact<A: Algorithm>(algorithm: &A, state: u64, now: u64, reset: u64, context: &str) {
    let capacity = algorithm.capacity();
    if reset == u64::MAX && now > 0 {
        let used = algorithm.decide(state, Timestamp::MAX, 1).decision;
        let fresh = algorithm.decide(FRESH_STATE, Timestamp::MAX, 1).decision;
        assert_ne!(
            used, fresh,
            "{context}: 'never fresh' at {now}, but fresh at the end of time"
        );
        return;
    }
    let then = now
        .checked_add(reset)
        .unwrap_or_else(|| panic!("{context}: reset_after {reset} from {now} is past the end of time"));
    for cost in [1, 2.min(capacity), capacity] {
        let used = algorithm.decide(state, ts(then), cost).decision;
        let fresh = algorithm.decide(FRESH_STATE, ts(then), cost).decision;
        assert_eq!(
            used, fresh,
            "{context}: at {now} reset_after {reset} ns, but then (cost {cost}) it is not fresh"
        );
        // (Far from the end of time, where every unit of a fresh limiter still has a slot.)
        if then <= u64::MAX / 2 {
            assert!(fresh.is_allowed(), "{context}");
            assert_eq!(fresh.remaining(), capacity - cost, "{context}");
        }
    }
    if reset > 0 {
        let used = algorithm.decide(state, ts(then - 1), 1).decision;
        let fresh = algorithm.decide(FRESH_STATE, ts(then - 1), 1).decision;
        assert_ne!(
            used, fresh,
            "{context}: at {now} reset_after {reset} ns, but it is already fresh 1 ns earlier"
        );
    }
}

/// Every decision the pure algorithm makes from `state` at `now`, for a few weights, is sane
/// and its `remaining`, `retry_after` and `reset_after` are exact.
fn assert_exact_everywhere<A: Algorithm>(algorithm: &A, state: u64, now: u64, context: &str) {
    let capacity = algorithm.capacity();
    for cost in [1, 2.min(capacity), capacity] {
        let context = format!("{context}, cost {cost} at {now}, state {state:#x}");
        let Transition {
            state: next,
            decision,
        } = algorithm.decide(state, ts(now), cost);
        assert_sane(&decision, cost, capacity, &context);
        assert_eq!(
            units_passing(algorithm, next, now, capacity),
            decision.remaining(),
            "{context}: remaining is not what passes: {decision:?}"
        );
        if decision.is_allowed() {
            assert_ne!(
                next, state,
                "{context}: admitted weight {cost} without counting it"
            );
        } else {
            assert_refusal_stores_the_same(algorithm, state, next, now, cost, &context);
            assert_retry_exact(algorithm, state, now, cost, &context);
        }
        assert_reset_exact(algorithm, next, now, ns(decision.reset_after()), &context);
    }
}

/// What a refusal at `now` may store (`after`, from `before`): the state it was decided on, or,
/// for the sliding window, that state moved forward to a later window, which decides the same
/// request at `now` the same way, and which a second refusal stores again unchanged.
fn assert_refusal_stores_the_same<A: Algorithm>(
    algorithm: &A,
    before: u64,
    after: u64,
    now: u64,
    cost: u64,
    context: &str,
) {
    if after == before {
        return;
    }
    let first = algorithm.decide(before, ts(now), cost);
    let again = algorithm.decide(after, ts(now), cost);
    assert_eq!(
        again.decision, first.decision,
        "{context}: a refusal stored a state that decides otherwise"
    );
    assert_eq!(again.state, after, "{context}: a second refusal wrote again");
}

/// A deterministic pseudo-random sequence (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The ends of time
// ---------------------------------------------------------------------------------------------

const EDGE_TIMES: [u64; 8] = [0, 1, 2, SEC, u64::MAX / 2, u64::MAX - SEC, u64::MAX - 1, u64::MAX];

/// Runs every entry point at every edge time, then every edge time again on the used state
/// (backwards and forwards), checking each decision's invariants. Nothing may panic.
fn survive_edges<A: Algorithm + Copy>(algorithm: A, name: &str) {
    let capacity = algorithm.capacity();
    for start in EDGE_TIMES {
        let limiter = at(algorithm, start);
        let context = format!("{name} from {start}");
        assert_sane(&limiter.peek(), 1, capacity, &context);
        assert_sane(&limiter.peek_n(capacity).unwrap(), capacity, capacity, &context);
        assert_sane(&limiter.check_n(0).unwrap(), 0, capacity, &context);
        assert_sane(&limiter.check(), 1, capacity, &context);
        assert_sane(
            &limiter.check_n(2.min(capacity)).unwrap(),
            2.min(capacity),
            capacity,
            &context,
        );
        assert_sane(&limiter.check_n(capacity).unwrap(), capacity, capacity, &context);
        for _ in 0..capacity.min(50) + 2 {
            assert_sane(&limiter.check(), 1, capacity, &context);
        }
        for now in EDGE_TIMES {
            let context = format!("{context}, then at {now}");
            assert_sane(&limiter.peek_at(ts(now)), 1, capacity, &context);
            assert_sane(
                &limiter.peek_n_at(capacity, ts(now)).unwrap(),
                capacity,
                capacity,
                &context,
            );
            assert_sane(&limiter.check_at(ts(now)), 1, capacity, &context);
            assert_sane(&limiter.check_n_at(0, ts(now)).unwrap(), 0, capacity, &context);
            assert_sane(
                &limiter.check_n_at(capacity, ts(now)).unwrap(),
                capacity,
                capacity,
                &context,
            );
        }
    }
}

#[test]
fn every_algorithm_survives_every_edge_time() {
    for text in [
        "10/s burst 5",
        "1/s",
        "1/ns",
        "1/ns burst 18446744073709551615",
        // The longest interval a bucket runs at (`MAX_EMISSION_INTERVAL`, 2^63 ns).
        "1/9223372036854775808ns",
    ] {
        survive_edges(tb(text), &format!("token bucket {text}"));
        survive_edges(lb(text), &format!("leaky bucket {text}"));
    }
    survive_edges(tb("1/s burst 18446744073"), "token bucket, largest burst at 1/s");
    for text in [
        "5/s",
        "100/min",
        "1/2ns",
        "3/7ns",
        "1/18446744073709551615ns",
        "536870911/s",
    ] {
        survive_edges(fw(text), &format!("fixed window {text}"));
    }
    for text in [
        "5/s",
        "100/min",
        "1/4ns",
        "3/7000ns",
        "1/18446744073709551615ns",
        "16383/s",
    ] {
        survive_edges(sw(text), &format!("sliding window {text}"));
    }
}

#[test]
fn decide_never_panics_on_any_state_word() {
    // The pure functions are public: they must survive words no limiter would ever store.
    let states = [
        0,
        1,
        u64::MAX,
        u64::MAX - 1,
        1 << 63,
        (1 << 63) - 1,
        0x5555_5555_5555_5555,
        0xAAAA_AAAA_AAAA_AAAA,
        T0,
    ];
    let times = [0, 1, T0, u64::MAX / 2, u64::MAX - 1, u64::MAX];
    fn sweep<A: Algorithm>(algorithm: A, states: &[u64], times: &[u64]) {
        let capacity = algorithm.capacity();
        for &state in states {
            for &now in times {
                for cost in [0, 1, capacity, capacity.saturating_add(1), u64::MAX] {
                    let t = algorithm.decide(state, ts(now), cost);
                    if cost > capacity {
                        assert!(
                            !t.decision.is_allowed(),
                            "cost {cost} over capacity {capacity} passed"
                        );
                    }
                    if !t.decision.is_allowed() {
                        assert_refusal_stores_the_same(
                            &algorithm,
                            state,
                            t.state,
                            now,
                            cost,
                            "any state word",
                        );
                    }
                }
            }
        }
    }
    sweep(tb("10/s burst 5"), &states, &times);
    sweep(tb("1/ns burst 18446744073709551615"), &states, &times);
    sweep(lb("3/s burst 2"), &states, &times);
    sweep(fw("5/s"), &states, &times);
    sweep(fw("1/2ns"), &states, &times);
    sweep(sw("5/s"), &states, &times);
    sweep(sw("1/4ns"), &states, &times);
    sweep(sw("16383/s"), &states, &times);
}

#[test]
fn first_request_at_every_edge_time() {
    // Windows: a fresh limiter admits anywhere, up to and including the last nanosecond, and
    // records the window it admitted in.
    for now in EDGE_TIMES {
        for algorithm in [fw("5/s"), fw("7/3s")] {
            let limiter = at(algorithm, now);
            let d = limiter.check();
            assert!(d.is_allowed(), "fixed window at {now}");
            assert_eq!(d.remaining(), algorithm.limit() - 1);
            let state = FixedWindowState::from_raw(limiter.raw_state());
            let w = ns(algorithm.window());
            assert_eq!((state.index(&algorithm), state.count(&algorithm)), (now / w, 1));
        }
        let algorithm = sw("5/s");
        let limiter = at(algorithm, now);
        let d = limiter.check();
        assert!(d.is_allowed(), "sliding window at {now}");
        assert_eq!(d.remaining(), 4);
        let state = SlidingWindowState::from_raw(limiter.raw_state());
        assert_eq!(
            (
                state.index(&algorithm),
                state.previous(&algorithm),
                state.current(&algorithm)
            ),
            (now / SEC, 0, 1)
        );
    }

    // Buckets: admitted iff the request's slot (now + T) is representable.
    for text in ["10/s burst 5", "1/s", "1/ns"] {
        let token = tb(text);
        let leaky = lb(text);
        let t = ns(token.emission_interval());
        for now in EDGE_TIMES.into_iter().chain([u64::MAX - t, u64::MAX - t + 1]) {
            let fits = now.checked_add(t).is_some();
            for (name, d, state) in [
                ("token", at(token, now).check(), {
                    let l = at(token, now);
                    let _ = l.check();
                    l.raw_state()
                }),
                ("leaky", at(leaky, now).check(), {
                    let l = at(leaky, now);
                    let _ = l.check();
                    l.raw_state()
                }),
            ] {
                let context = format!("{name} {text} at {now}");
                assert_eq!(d.is_allowed(), fits, "{context}: {d:?}");
                if fits {
                    assert_eq!(GcraState::from_raw(state).tat(), now + t, "{context}");
                    assert_eq!(d.reset_after(), Duration::from_nanos(t), "{context}");
                } else {
                    assert_eq!(state, FRESH_STATE, "{context}: a refusal was counted");
                    assert_eq!(d.retry_after(), Duration::from_nanos(u64::MAX), "{context}");
                    assert_eq!(d.remaining(), 0, "{context}");
                }
            }
        }
    }
}

#[test]
fn a_slot_past_the_end_of_time_is_refused_never_wrapped() {
    fn case<A: Algorithm + Copy>(algorithm: A, name: &str) {
        let now = u64::MAX - 2 * SEC - SEC / 2;
        let limiter = at(algorithm, now);
        assert!(limiter.check().is_allowed(), "{name}");
        assert!(limiter.check().is_allowed(), "{name}");
        let tat = limiter.raw_state();
        assert_eq!(tat, now + 2 * SEC, "{name}");
        let refused = limiter.check();
        assert!(
            !refused.is_allowed(),
            "{name}: a wrapped slot would have been admitted"
        );
        assert_eq!(refused.retry_after(), Duration::from_nanos(u64::MAX), "{name}");
        // About 584 years.
        let years = refused.retry_after().as_secs() / (365 * 86_400 + 86_400 / 4);
        assert_eq!(years, 584, "{name}");
        assert_eq!(limiter.raw_state(), tat, "{name}: the refusal was counted");
        // Nor later, nor with weight 2, nor at the last nanosecond.
        for t in [now + SEC, u64::MAX - SEC / 2, u64::MAX - 1, u64::MAX] {
            assert!(!limiter.check_at(ts(t)).is_allowed(), "{name} at {t}");
            assert!(
                !limiter.check_n_at(2, ts(t)).unwrap().is_allowed(),
                "{name} at {t}"
            );
        }
        assert_eq!(limiter.raw_state(), tat, "{name}");
    }
    // 1/s with a burst of 3, 2.5 s before the end: two slots fit, the third would end at
    // u64::MAX + 0.5 s.
    case(tb("1/s burst 3"), "token");
    case(lb("1/s burst 3"), "leaky");
}

#[test]
fn the_largest_valid_burst_works_at_both_ends_of_time() {
    // 1/s: burst * T = 18_446_744_073 s, 0.7 s short of u64::MAX ns.
    let max = 18_446_744_073;
    let tau = max * SEC;
    let bucket = tb(&format!("1/s burst {max}"));
    let limiter = at(bucket, 0);
    let one = limiter.check();
    assert_eq!((one.remaining(), ns(one.reset_after())), (max - 1, SEC));
    assert!(limiter.check_n_at(max - 2, ts(SEC / 2)).unwrap().is_allowed());
    assert_eq!(limiter.raw_state(), tau - SEC);
    // Weight 2 would need the slot [tau - 1 s, tau + 1 s): past u64::MAX, so never.
    let refused = limiter.check_n_at(2, ts(SEC / 2)).unwrap();
    assert!(!refused.is_allowed());
    assert_eq!(refused.retry_after(), Duration::from_nanos(u64::MAX));
    assert!(limiter.check_at(ts(SEC / 2)).is_allowed());
    assert_eq!(limiter.raw_state(), tau);
    // Drained at the 584-year horizon: the next slot would end at tau + 1 s, past u64::MAX,
    // so nothing ever passes again (and the refusal says "never", not "in 1 s").
    let never = limiter.check_at(ts(SEC));
    assert!(!never.is_allowed());
    assert_eq!(never.retry_after(), Duration::from_nanos(u64::MAX));
    assert!(!limiter.check_at(Timestamp::MAX).is_allowed());
    assert_eq!(limiter.raw_state(), tau);

    // All of it at once on a fresh bucket.
    let limiter = at(bucket, 0);
    let all = limiter.check_n(max).unwrap();
    assert!(all.is_allowed());
    assert_eq!((all.remaining(), ns(all.reset_after())), (0, tau));

    // The whole burst, as late as it still fits: it ends exactly at u64::MAX.
    let limiter = at(bucket, u64::MAX - tau);
    assert!(limiter.check_n(max).unwrap().is_allowed());
    assert_eq!(limiter.raw_state(), u64::MAX);
    let never = limiter.check();
    assert!(!never.is_allowed());
    assert_eq!(never.retry_after(), Duration::from_nanos(u64::MAX));
    // One nanosecond later the whole burst no longer fits, but one less does.
    let limiter = at(bucket, u64::MAX - tau + 1);
    assert!(!limiter.check_n(max).unwrap().is_allowed());
    assert_eq!(limiter.raw_state(), FRESH_STATE);
    assert!(limiter.check_n(max - 1).unwrap().is_allowed());

    // T = 1 ns and a burst of u64::MAX: tolerance is u64::MAX itself.
    let limiter = at(tb("1/ns burst 18446744073709551615"), 0);
    assert!(limiter.check_n(u64::MAX).unwrap().is_allowed());
    assert_eq!(limiter.raw_state(), u64::MAX);
    for t in [0, 1, u64::MAX - 1, u64::MAX] {
        assert!(!limiter.check_at(ts(t)).is_allowed(), "at {t}");
    }
}

#[test]
fn the_first_request_ever_at_a_huge_timestamp_works() {
    // Year 2477, and later: no "elapsed since 0" arithmetic may overflow.
    for now in [
        16_000_000_000 * SEC,
        u64::MAX / 2 + 12_345,
        u64::MAX - 3_600 * SEC,
    ] {
        for (name, d, capacity) in [
            ("token", at(tb("10/s burst 5"), now).check(), 5),
            ("leaky", at(lb("10/s burst 5"), now).check(), 5),
            ("fixed", at(fw("100/min"), now).check(), 100),
            ("sliding", at(sw("100/min"), now).check(), 100),
        ] {
            assert!(d.is_allowed(), "{name} at {now}");
            assert_eq!(d.remaining(), capacity - 1, "{name} at {now}");
        }
        let limiter = at(tb("10/s burst 5"), now);
        assert_eq!(limiter.check_n(5).unwrap().remaining(), 0);
        assert_eq!(limiter.raw_state(), now + 5 * 100_000_000);
    }
}

// ---------------------------------------------------------------------------------------------
// Clocks that step backwards
// ---------------------------------------------------------------------------------------------

fn full_is_refused_in_the_past<A: Algorithm + Copy>(algorithm: A, name: &str, t: u64, past: &[u64]) {
    let limiter = at(algorithm, t);
    let capacity = algorithm.capacity();
    assert!(limiter.check_n(capacity).unwrap().is_allowed(), "{name}");
    let full = limiter.raw_state();
    for &back in past {
        for cost in [1, capacity] {
            assert!(
                !limiter.peek_n_at(cost, ts(back)).unwrap().is_allowed(),
                "{name}: full at {t}, peek {cost} at {back} passes"
            );
            assert!(
                !limiter.check_n_at(cost, ts(back)).unwrap().is_allowed(),
                "{name}: full at {t}, check {cost} at {back} passes"
            );
        }
        assert_eq!(
            limiter.raw_state(),
            full,
            "{name}: a refusal at {back} changed the state"
        );
        assert_retry_exact(&algorithm, full, back, 1, &format!("{name} back at {back}"));
    }
    // And still full at `t` itself.
    assert!(!limiter.check_at(ts(t)).is_allowed(), "{name}");
}

#[test]
fn a_full_limiter_stays_full_when_the_clock_steps_back() {
    let t = T0 + 17 * SEC + 123;
    // Buckets: the burst was taken at t; nothing earlier can find tokens.
    for (name, token, leaky) in [
        ("10/s burst 5", tb("10/s burst 5"), lb("10/s burst 5")),
        ("1/min burst 1", tb("1/min burst 1"), lb("1/min burst 1")),
    ] {
        let tau = ns(token.emission_interval()) * token.capacity();
        let past = [t - 1, t - tau / 2, t - tau, t - tau - 1, t - 10 * tau, 1, 0];
        full_is_refused_in_the_past(token, &format!("token {name}"), t, &past);
        full_is_refused_in_the_past(leaky, &format!("leaky {name}"), t, &past);
    }
    // Windows: full in the window holding t; earlier windows (which had room) are not reopened.
    for (w, fixed, sliding) in [(SEC, fw("5/s"), sw("5/s")), (MIN, fw("100/min"), sw("100/min"))] {
        let start = t / w * w;
        let past = [
            t - 1,
            start,
            start - 1,
            start - w,
            start - w - 1,
            t - w,
            t - 10 * w,
            1,
            0,
        ];
        full_is_refused_in_the_past(fixed, &format!("fixed {w}"), t, &past);
        full_is_refused_in_the_past(sliding, &format!("sliding {w}"), t, &past);
    }
}

#[test]
fn the_clock_stepping_back_across_a_window_boundary() {
    // Fixed window 5/s: 3 in the window [k, k+1), then the clock goes back into window k-1,
    // which was empty: it is still window k that counts, with room for exactly 2.
    let k = T0 + 10 * SEC;
    let fixed = fw("5/s");
    let limiter = at(fixed, k + 10);
    assert!(limiter.check_n(3).unwrap().is_allowed());
    let back = ts(k - 1);
    assert_eq!(limiter.check_n_at(2, back).unwrap().remaining(), 0);
    let refused = limiter.check_at(back);
    assert!(!refused.is_allowed());
    // The next window starts at k + 1 s: 1 s + 1 ns from the stepped-back clock.
    assert_eq!(ns(refused.retry_after()), SEC + 1);
    let state = FixedWindowState::from_raw(limiter.raw_state());
    assert_eq!((state.index(&fixed), state.count(&fixed)), (k / SEC, 5));

    // Sliding window 10/s: 10 in window k-1, 4 at k + 0.5 s (the previous window weighs 5).
    // Back to k - 1 ns: decided at the start of window k, where the previous weighs all 10.
    let sliding = sw("10/s");
    let limiter = at(sliding, k - SEC / 2);
    assert!(limiter.check_n(10).unwrap().is_allowed());
    assert!(limiter.check_n_at(4, ts(k + SEC / 2)).unwrap().is_allowed());
    // Room for exactly one more (which a peek counts in its own `remaining`).
    assert_eq!(limiter.peek_n_at(0, ts(k + SEC / 2)).unwrap().remaining(), 1);
    assert!(limiter.peek_at(ts(k + SEC / 2)).is_allowed());
    let refused = limiter.check_at(ts(k - 1));
    assert!(!refused.is_allowed());
    assert_eq!(refused.remaining(), 0);
    // The one remaining unit passes once 10 * (1 - e) + 4 + 1 <= 10, at e = 0.5 s.
    assert_eq!(ns(refused.retry_after()), SEC / 2 + 1);
    let state = SlidingWindowState::from_raw(limiter.raw_state());
    assert_eq!(
        (
            state.index(&sliding),
            state.previous(&sliding),
            state.current(&sliding)
        ),
        (k / SEC, 10, 4)
    );
}

/// Runs a random walk of the clock (small and large jumps, both ways) and checks, before every
/// admission, that the same request would also pass at the latest time the walk has reached:
/// stepping back never admits more.
fn backwards_never_admits_more<A: Algorithm + Copy>(algorithm: A, name: &str, scale: u64, seed: u64) {
    let mut rng = Rng(seed);
    let limiter = at(algorithm, T0);
    let capacity = algorithm.capacity();
    let mut now = T0;
    let mut latest = T0;
    for step in 0..3_000 {
        now = match rng.below(10) {
            0..=4 => now + rng.below(scale),
            5 => now.saturating_sub(rng.below(4)),
            6 => now.saturating_sub(rng.below(scale)),
            7 => now.saturating_sub(rng.below(10 * scale)),
            8 => now + rng.below(10 * scale),
            _ => now,
        };
        latest = latest.max(now);
        let cost = if rng.below(4) == 0 {
            1 + rng.below(capacity)
        } else {
            1
        };
        let state = limiter.raw_state();
        let d = limiter.check_n_at(cost, ts(now)).unwrap();
        let context = format!("{name}, step {step}: cost {cost} at {now} (latest {latest})");
        assert_sane(&d, cost, capacity, &context);
        if d.is_allowed() {
            assert!(
                algorithm.decide(state, ts(latest), cost).decision.is_allowed(),
                "{context}: admitted in the past, but not at the latest time"
            );
        } else {
            assert_refusal_stores_the_same(&algorithm, state, limiter.raw_state(), now, cost, &context);
            assert!(
                !algorithm
                    .decide(state, ts(now.saturating_sub(1)), cost)
                    .decision
                    .is_allowed(),
                "{context}: refused now, but passes 1 ns earlier"
            );
        }
    }
}

#[test]
fn a_clock_that_steps_back_never_admits_more() {
    for seed in 1..=4 {
        backwards_never_admits_more(tb("10/s burst 5"), "token", 300_000_000, seed);
        backwards_never_admits_more(lb("10/s burst 5"), "leaky", 300_000_000, seed);
        backwards_never_admits_more(tb("3/s burst 1"), "token policer", 500_000_000, seed);
        backwards_never_admits_more(fw("5/s"), "fixed", 400_000_000, seed);
        backwards_never_admits_more(sw("5/s"), "sliding", 400_000_000, seed);
        backwards_never_admits_more(sw("20/min"), "sliding minute", 20 * SEC, seed);
    }
}

// ---------------------------------------------------------------------------------------------
// Weightless requests
// ---------------------------------------------------------------------------------------------

/// `check_n(0)` at `now` is allowed, answers what `peek_n(0)` answers, and leaves the state
/// word exactly as it was. Problems are collected, so that one run lists every case.
fn zero_cost_is_a_no_op<A: Algorithm>(
    limiter: &DirectLimiter<A, ManualClock>,
    now: u64,
    context: &str,
    problems: &mut Vec<String>,
) {
    let before = limiter.raw_state();
    let peeked = limiter.peek_n_at(0, ts(now)).unwrap();
    let d = limiter.check_n_at(0, ts(now)).unwrap();
    if !d.is_allowed() {
        problems.push(format!("{context}: a weightless request was refused: {d:?}"));
    }
    if d != peeked {
        problems.push(format!(
            "{context}: check_n(0) answered {d:?}, peek_n(0) {peeked:?}"
        ));
    }
    let after = limiter.raw_state();
    if after != before {
        problems.push(format!(
            "{context}: check_n(0) at {now} changed the state word from {before:#x} to {after:#x}"
        ));
    }
}

fn zero_cost_scenarios<A: Algorithm + Copy>(algorithm: A, name: &str, step: u64, problems: &mut Vec<String>) {
    // Fresh, at the epoch and later.
    zero_cost_is_a_no_op(&at(algorithm, 0), 0, &format!("{name}: fresh at 0"), problems);
    zero_cost_is_a_no_op(&at(algorithm, T0), T0, &format!("{name}: fresh at T0"), problems);
    // Partly used, then full, at the same instant.
    let limiter = at(algorithm, T0);
    assert!(limiter.check().is_allowed());
    zero_cost_is_a_no_op(&limiter, T0, &format!("{name}: one admitted"), problems);
    assert!(limiter
        .check_n_at(algorithm.capacity() - 1, ts(T0))
        .unwrap()
        .is_allowed());
    zero_cost_is_a_no_op(&limiter, T0, &format!("{name}: full"), problems);
    // Later (each on its own copy of the full limiter): part refilled, fully refilled, in the
    // next window, long after.
    for later in [step / 2, step, 2 * step, 1_000 * step] {
        let limiter = at(algorithm, T0);
        assert!(limiter.check_n(algorithm.capacity()).unwrap().is_allowed());
        let context = format!("{name}: full at T0, then +{later} ns");
        zero_cost_is_a_no_op(&limiter, T0 + later, &context, problems);
    }
}

#[test]
fn a_weightless_request_is_allowed_and_changes_nothing() {
    let mut problems = Vec::new();
    zero_cost_scenarios(tb("10/s burst 5"), "token", 500_000_000, &mut problems);
    zero_cost_scenarios(lb("10/s burst 5"), "leaky", 500_000_000, &mut problems);
    zero_cost_scenarios(fw("5/s"), "fixed", SEC, &mut problems);
    zero_cost_scenarios(sw("5/s"), "sliding", SEC, &mut problems);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_weightless_request_does_not_change_later_decisions() {
    // A token bucket of burst 1 at T0, asked for nothing; then the clock steps back 1 ns. The
    // bucket was never used, so that request must pass, as it does without the weightless one.
    let untouched = at(tb("10/s burst 1"), T0);
    let probed = at(tb("10/s burst 1"), T0);
    let _ = probed.check_n(0).unwrap();
    let without = untouched.check_at(ts(T0 - 1));
    let with = probed.check_at(ts(T0 - 1));
    assert!(without.is_allowed());
    assert_eq!(with, without, "check_n(0) at T0 changed the answer at T0 - 1 ns");
}

#[test]
fn a_weightless_request_is_allowed_even_after_the_clock_steps_back() {
    let t = T0 + 3 * SEC / 4;
    fn case<A: Algorithm + Copy>(algorithm: A, name: &str, t: u64) {
        let limiter = at(algorithm, t);
        let _ = limiter.check_n(algorithm.capacity()).unwrap();
        for back in [t - 1, t - SEC, 0] {
            let d = limiter.check_n_at(0, ts(back)).unwrap();
            assert!(
                d.is_allowed(),
                "{name}: full at {t}, weight 0 at {back} refused: {d:?}"
            );
        }
    }
    case(tb("10/s burst 5"), "token", t);
    case(lb("10/s burst 5"), "leaky", t);
    case(fw("5/s"), "fixed", t);
    case(sw("5/s"), "sliding", t);
}

// ---------------------------------------------------------------------------------------------
// Exact burst sizes
// ---------------------------------------------------------------------------------------------

/// A full token bucket admits exactly `burst` at one instant, then exactly one per emission
/// interval; idle, it refills to exactly `burst` (not `burst + 1`) after `burst * T`. This pins
/// the burst off-by-one (cf. governor #107, #249).
fn exact_burst(rate: &str, burst: u64) {
    let bucket = tb(&format!("{rate} burst {burst}"));
    let t = ns(bucket.emission_interval());
    let context = format!("{rate} burst {burst}");
    let limiter = at(bucket, T0);
    let count_now = |now: u64| {
        let mut n = 0;
        while limiter.check_at(ts(now)).is_allowed() {
            n += 1;
            assert!(n <= burst, "{context}: more than the burst at {now}");
        }
        n
    };
    assert_eq!(count_now(T0), burst, "{context}: a full bucket");
    let refused = limiter.peek_at(ts(T0));
    assert_eq!(
        (refused.remaining(), ns(refused.retry_after())),
        (0, t),
        "{context}"
    );
    assert_eq!(ns(refused.reset_after()), burst * t, "{context}");
    for k in 1..=5 {
        assert_eq!(
            count_now(T0 + k * t - 1),
            0,
            "{context}: 1 ns before interval {k}"
        );
        assert_eq!(count_now(T0 + k * t), 1, "{context}: interval {k}");
    }
    // Drained at T0 + 5T. Full again exactly burst * T later, one short 1 ns before.
    let drained = T0 + 5 * t;
    // (A weightless peek's `remaining` is what passes at that instant.)
    let available = |now: u64| limiter.peek_n_at(0, ts(now)).unwrap().remaining();
    assert_eq!(available(drained + burst * t - 1), burst - 1, "{context}");
    assert_eq!(available(drained + burst * t), burst, "{context}");
    assert_eq!(count_now(drained + burst * t), burst, "{context}: refilled");
    // A long idle time refills no more than the burst.
    let refilled_at = drained + burst * t;
    assert_eq!(
        count_now(refilled_at + 1_000 * burst * t),
        burst,
        "{context}: long idle"
    );
    // Waiting k intervals after draining gives exactly k.
    let drained = refilled_at + 1_000 * burst * t;
    for k in [1, burst / 2, burst] {
        let limiter = at(bucket, drained);
        assert!(limiter.check_n(burst).unwrap().is_allowed());
        let mut n = 0;
        while limiter.check_at(ts(drained + k * t)).is_allowed() {
            n += 1;
        }
        assert_eq!(n, k, "{context}: {k} intervals after draining");
    }
}

#[test]
fn a_full_token_bucket_admits_exactly_the_burst_then_one_per_interval() {
    for burst in [1, 2, 10, 1_000] {
        for rate in ["10/s", "3/s", "1/min", "7/3ms"] {
            exact_burst(rate, burst);
        }
    }
}

#[test]
fn a_leaky_bucket_of_burst_one_is_a_strict_policer() {
    for (text, t) in [
        ("5/s burst 1", 200_000_000),
        ("3/s burst 1", 333_333_334),
        ("1/ns burst 1", 1),
    ] {
        let policer = lb(text);
        assert_eq!(
            (policer.max_queue(), ns(policer.emission_interval())),
            (0, t),
            "{text}"
        );
        let limiter = at(policer, T0);
        let first = limiter.check();
        assert!(first.is_allowed(), "{text}");
        assert_eq!((first.delay(), first.remaining()), (Duration::ZERO, 0), "{text}");
        let second = limiter.check();
        assert!(!second.is_allowed(), "{text}: a policer queued a request");
        assert_eq!(ns(second.retry_after()), t, "{text}");
        if t > 1 {
            let early = limiter.check_at(ts(T0 + t - 1));
            assert!(!early.is_allowed(), "{text}: 1 ns early");
            assert_eq!(ns(early.retry_after()), 1, "{text}");
        }
        let on_time = limiter.check_at(ts(T0 + t));
        assert!(on_time.is_allowed(), "{text}: on time");
        assert_eq!(on_time.delay(), Duration::ZERO, "{text}: a policer never delays");
        // Every later slot: exactly one, never delayed.
        for k in 2..20 {
            let d = limiter.check_at(ts(T0 + k * t));
            assert!(d.is_allowed() && d.delay() == Duration::ZERO, "{text}: slot {k}");
            assert!(!limiter.check_at(ts(T0 + k * t)).is_allowed(), "{text}: slot {k}");
        }
    }
}

#[test]
fn leaky_delays_are_whole_emission_intervals() {
    for (text, t) in [
        ("2/s burst 5", 500_000_000),
        ("3/s burst 4", 333_333_334),
        ("1000/s burst 100", SEC / 1000),
    ] {
        let shaper = lb(text);
        let burst = shaper.capacity();
        assert_eq!(shaper.max_queue(), burst - 1);
        let limiter = at(shaper, T0);
        for k in 0..burst {
            let d = limiter.check();
            assert!(d.is_allowed(), "{text}: request {k}");
            assert_eq!(ns(d.delay()), k * t, "{text}: request {k}");
            assert_eq!(d.remaining(), burst - 1 - k, "{text}: request {k}");
            assert_eq!(ns(d.reset_after()), (k + 1) * t, "{text}: request {k}");
        }
        let refused = limiter.check();
        assert!(!refused.is_allowed(), "{text}: the queue holds burst - 1");
        assert_eq!(ns(refused.retry_after()), t, "{text}");
        // One slot later one more is accepted, behind the burst - 1 still waiting.
        let d = limiter.check_at(ts(T0 + t));
        assert!(d.is_allowed(), "{text}");
        assert_eq!(ns(d.delay()), (burst - 1) * t, "{text}");
        // Half a slot into an idle queue's last slot: the wait is what is left of it.
        let limiter = at(shaper, T0);
        assert!(limiter.check_n(2).unwrap().is_allowed());
        let d = limiter.check_at(ts(T0 + t / 2));
        assert_eq!(ns(d.delay()), 2 * t - t / 2, "{text}");
        // A weight-2 request waits for its first slot.
        let d = limiter.check_n_at(2, ts(T0 + t / 2)).unwrap();
        if d.is_allowed() {
            assert_eq!(ns(d.delay()), 3 * t - t / 2, "{text}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Windows on the wall clock
// ---------------------------------------------------------------------------------------------

#[test]
fn fixed_windows_are_aligned_to_the_epoch_and_spike_at_the_boundary() {
    // The fixed window's boundary spike: 100/min, 100 at 00:59 and 100 more at 01:01 all pass.
    let window = fw("100/min");
    let limiter = at(window, 59 * SEC);
    for i in 0..100 {
        assert!(limiter.check().is_allowed(), "00:59, request {i}");
    }
    let refused = limiter.check();
    assert!(!refused.is_allowed());
    assert_eq!(
        refused.retry_after(),
        Duration::from_secs(1),
        "the next minute starts at 01:00"
    );
    assert_eq!(refused.reset_after(), Duration::from_secs(1));
    assert!(!limiter.check_at(ts(MIN - 1)).is_allowed());
    let mut admitted = 0;
    for _ in 0..150 {
        admitted += u64::from(limiter.check_at(ts(61 * SEC)).is_allowed());
    }
    assert_eq!(admitted, 100, "01:01");
    // The new minute started at exactly 01:00.
    let limiter = at(window, 59 * SEC);
    assert!(limiter.check_n(100).unwrap().is_allowed());
    assert!(!limiter.check_at(ts(MIN - 1)).is_allowed());
    assert!(limiter.check_at(ts(MIN)).is_allowed());

    // At a real date, windows fall on multiples of their length since the epoch, not since the
    // limiter was made: T0 is a minute boundary.
    for (text, w) in [
        ("100/min", MIN),
        ("5/7s", 7 * SEC),
        ("10/h", 3_600 * SEC),
        ("3/1500ms", 1_500_000_000),
    ] {
        let window = fw(text);
        let boundary = (T0 + 12_345_678_901) / w * w;
        let limiter = at(window, boundary - 1);
        assert!(limiter.check_n(window.limit()).unwrap().is_allowed(), "{text}");
        let refused = limiter.check();
        assert_eq!(
            ns(refused.retry_after()),
            1,
            "{text}: the window ends at a multiple of {w}"
        );
        assert!(limiter.check_at(ts(boundary)).is_allowed(), "{text}");
        let state = FixedWindowState::from_raw(limiter.raw_state());
        assert_eq!(
            (state.index(&window), state.count(&window)),
            (boundary / w, 1),
            "{text}"
        );
    }
}

#[test]
fn sliding_window_worked_example() {
    // Limit 100 per minute. 80 in the previous minute; 25% into the current one, 30 so far:
    // estimate 30 + 80 * 0.75 = 90, so the next request passes with 9 left.
    let window = sw("100/min");
    let limiter = at(window, 30 * SEC);
    assert!(limiter.check_n(80).unwrap().is_allowed());
    let quarter = MIN + 15 * SEC;
    assert!(limiter.check_n_at(30, ts(quarter)).unwrap().is_allowed());
    let next = limiter.check_at(ts(quarter));
    assert!(next.is_allowed());
    assert_eq!(next.remaining(), 9);
    // 9 more, then refused until 80 * (60 - e) / 60 + 40 + 1 <= 100: e = 15.75 s.
    assert!(limiter.check_n_at(9, ts(quarter)).unwrap().is_allowed());
    let refused = limiter.check_at(ts(quarter));
    assert!(!refused.is_allowed());
    assert_eq!(refused.remaining(), 0);
    assert_eq!(refused.retry_after(), Duration::from_millis(750));
    // Full again once the 40 of this minute have slid out: at 03:00.
    assert_eq!(
        refused.reset_after(),
        Duration::from_secs(3 * 60) - Duration::from_secs(75)
    );
    let state = SlidingWindowState::from_raw(limiter.raw_state());
    assert_eq!(
        (
            state.index(&window),
            state.previous(&window),
            state.current(&window)
        ),
        (1, 80, 40)
    );
    // The same through the pure function and a built state.
    let built = window.state(1, 80, 30);
    let d = window.decide(built.raw(), ts(quarter), 1).decision;
    assert_eq!((d.is_allowed(), d.remaining()), (true, 9));
}

// ---------------------------------------------------------------------------------------------
// retry_after, reset_after and remaining are exact
// ---------------------------------------------------------------------------------------------

/// Builds a limiter, runs `setup` (time, weight) on it, and checks through the limiter itself
/// that a request of weight `cost` at `now` is refused with `retry_after == expected_retry`,
/// refused again 1 ns before that, and admitted then (also on a fresh copy sent straight there).
fn retry_through_the_limiter<A: Algorithm + Copy>(
    algorithm: A,
    setup: &[(u64, u64)],
    now: u64,
    cost: u64,
    expected_retry: Duration,
    name: &str,
) {
    let build = || {
        let limiter = at(algorithm, 0);
        for &(t, c) in setup {
            let _ = limiter.check_n_at(c, ts(t)).unwrap();
        }
        limiter
    };
    let limiter = build();
    let refused = limiter.check_n_at(cost, ts(now)).unwrap();
    assert!(!refused.is_allowed(), "{name}");
    assert_eq!(refused.retry_after(), expected_retry, "{name}");
    let retry = ns(expected_retry);
    let clock = limiter.clock().clone();
    clock.set(ts(now + retry - 1));
    assert!(!limiter.check_n(cost).unwrap().is_allowed(), "{name}: 1 ns early");
    clock.set(ts(now + retry));
    assert!(limiter.check_n(cost).unwrap().is_allowed(), "{name}: on time");
    // A fresh copy, straight to the retry time.
    let limiter = build();
    limiter.clock().set(ts(now + retry));
    assert!(
        limiter.check_n(cost).unwrap().is_allowed(),
        "{name}: straight there"
    );
}

#[test]
fn retry_after_is_exact_in_worked_scenarios() {
    let ms = Duration::from_millis;
    retry_through_the_limiter(tb("2/s"), &[(T0, 2)], T0, 1, ms(500), "token 2/s drained");
    retry_through_the_limiter(
        tb("2/s"),
        &[(T0, 2)],
        T0 + 1,
        2,
        ms(1000) - Duration::from_nanos(1),
        "token 2/s, weight 2",
    );
    retry_through_the_limiter(
        tb("3/s burst 2"),
        &[(T0, 2)],
        T0 + 5,
        1,
        Duration::from_nanos(333_333_329),
        "token 3/s",
    );
    retry_through_the_limiter(lb("2/s burst 3"), &[(T0, 3)], T0, 1, ms(500), "leaky 2/s burst 3");
    retry_through_the_limiter(
        lb("2/s burst 3"),
        &[(T0, 3)],
        T0,
        3,
        ms(1500),
        "leaky, whole burst",
    );
    retry_through_the_limiter(
        fw("100/min"),
        &[(59 * SEC, 100)],
        59 * SEC,
        1,
        ms(1000),
        "fixed, 00:59",
    );
    retry_through_the_limiter(
        fw("100/min"),
        &[(59 * SEC, 60)],
        59 * SEC + 7,
        41,
        ms(1000) - Duration::from_nanos(7),
        "fixed, weight 41",
    );
    retry_through_the_limiter(
        sw("100/min"),
        &[(30 * SEC, 80), (75 * SEC, 40)],
        75 * SEC,
        1,
        ms(750),
        "sliding, worked example",
    );
    // Weight 60 no longer fits beside the 40 of this minute: it waits for the next one, where
    // those 40 weigh 40 * (1 - e) and 40 * (1 - e) + 60 <= 100 holds from e = 0.
    retry_through_the_limiter(
        sw("100/min"),
        &[(30 * SEC, 80), (75 * SEC, 40)],
        75 * SEC,
        60,
        Duration::from_secs(45),
        "sliding, weight 60",
    );
    // Weight 100 needs both minutes to have slid out.
    retry_through_the_limiter(
        sw("100/min"),
        &[(30 * SEC, 80), (75 * SEC, 40)],
        75 * SEC,
        100,
        Duration::from_secs(60 + 45),
        "sliding, weight 100",
    );
}

/// A random walk of one limiter (mostly forward, sometimes exactly to the last retry_after,
/// sometimes back), checking after every step that every decision the state allows is exact.
fn exact_everywhere<A: Algorithm + Copy>(algorithm: A, name: &str, scale: u64, seed: u64) {
    let mut rng = Rng(seed);
    let base = T0 + rng.below(1_000) * scale;
    let limiter = at(algorithm, base);
    let capacity = algorithm.capacity();
    let mut now = base;
    let mut last_retry = 0;
    for step in 0..250 {
        now = match rng.below(10) {
            0..=3 => now + rng.below(scale),
            4 | 5 => now + last_retry,
            6 => now + rng.below(4),
            7 => now.saturating_sub(rng.below(2 * scale)),
            8 => now + 3 * scale + rng.below(scale),
            _ => now,
        };
        let cost = match rng.below(4) {
            0 => capacity,
            1 => 1 + rng.below(capacity),
            _ => 1,
        };
        let d = limiter.check_n_at(cost, ts(now)).unwrap();
        last_retry = ns(d.retry_after());
        let state = limiter.raw_state();
        let context = format!("{name}, seed {seed}, step {step}");
        for probe in [now, now + 1, now - 1, now + scale / 3, now + scale] {
            assert_exact_everywhere(&algorithm, state, probe, &context);
        }
    }
}

#[test]
fn retry_reset_and_remaining_are_exact_everywhere() {
    for seed in 1..=3 {
        exact_everywhere(tb("10/s burst 5"), "token 10/s burst 5", 100_000_000, seed);
        exact_everywhere(tb("3/s burst 1"), "token 3/s burst 1", 333_333_334, seed);
        exact_everywhere(tb("7/s burst 20"), "token 7/s burst 20", 142_857_143, seed);
        exact_everywhere(lb("10/s burst 5"), "leaky 10/s burst 5", 100_000_000, seed);
        exact_everywhere(lb("3/s burst 1"), "leaky 3/s burst 1", 333_333_334, seed);
        exact_everywhere(lb("7/s burst 20"), "leaky 7/s burst 20", 142_857_143, seed);
        exact_everywhere(fw("5/s"), "fixed 5/s", SEC, seed);
        exact_everywhere(fw("20/min"), "fixed 20/min", MIN, seed);
        exact_everywhere(fw("3/7s"), "fixed 3/7s", 7 * SEC, seed);
        exact_everywhere(sw("5/s"), "sliding 5/s", SEC, seed);
        exact_everywhere(sw("20/min"), "sliding 20/min", MIN, seed);
        exact_everywhere(sw("7/3s"), "sliding 7/3s", 3 * SEC, seed);
        exact_everywhere(sw("3/16ns"), "sliding 3/16ns", 16, seed);
    }
}

#[test]
fn reset_after_is_exact_through_the_limiter() {
    fn case<A: Algorithm + Copy>(algorithm: A, setup: &[(u64, u64)], name: &str) {
        let limiter = at(algorithm, 0);
        let mut last = None;
        for &(t, c) in setup {
            last = Some((t, limiter.check_n_at(c, ts(t)).unwrap()));
        }
        let (t, d) = last.unwrap();
        assert!(d.is_allowed(), "{name}");
        let reset = ns(d.reset_after());
        let fresh = at(algorithm, 0);
        let capacity = algorithm.capacity();
        let then = ts(t + reset);
        assert_eq!(limiter.peek_at(then), fresh.peek_at(then), "{name}");
        assert_eq!(limiter.peek_at(then).remaining(), capacity - 1, "{name}");
        assert_eq!(
            limiter.peek_n_at(capacity, then),
            fresh.peek_n_at(capacity, then),
            "{name}"
        );
        let early = ts(t + reset - 1);
        assert_ne!(
            limiter.peek_at(early),
            fresh.peek_at(early),
            "{name}: already fresh 1 ns early"
        );
    }
    case(tb("2/s"), &[(T0, 1)], "token, one of two");
    case(tb("3/s burst 4"), &[(T0, 3), (T0 + 5, 1)], "token 3/s");
    case(lb("2/s burst 3"), &[(T0, 3)], "leaky");
    case(fw("100/min"), &[(59 * SEC, 1)], "fixed");
    case(
        sw("100/min"),
        &[(30 * SEC, 80), (75 * SEC, 30)],
        "sliding, both minutes",
    );
    case(
        sw("100/min"),
        &[(30 * SEC, 80), (75 * SEC, 0)],
        "sliding, previous minute only",
    );
}

// ---------------------------------------------------------------------------------------------
// The end of representable time: the promises still hold
// ---------------------------------------------------------------------------------------------

#[test]
fn windows_never_promise_a_retry_past_the_end_of_time() {
    // The last window of a 1 s window is cut short by u64::MAX: no later window exists, so a
    // request refused there can never pass, and `retry_after` must say so (u64::MAX ns, as the
    // buckets do) rather than point at u64::MAX, where the same window still refuses it.
    fn case<A: Algorithm + Copy>(algorithm: A, name: &str) {
        for now in [u64::MAX - 10, u64::MAX - 1, u64::MAX] {
            let limiter = at(algorithm, now);
            assert!(
                limiter.check_n(algorithm.capacity()).unwrap().is_allowed(),
                "{name}"
            );
            assert_retry_exact(
                &algorithm,
                limiter.raw_state(),
                now,
                1,
                &format!("{name} full at {now}"),
            );
        }
    }
    case(fw("5/s"), "fixed");
    case(sw("5/s"), "sliding");
}

#[test]
fn windows_never_promise_a_reset_past_the_end_of_time() {
    fn case<A: Algorithm + Copy>(algorithm: A, name: &str) {
        for now in [u64::MAX - 10, u64::MAX] {
            let limiter = at(algorithm, now);
            let d = limiter.check();
            assert!(d.is_allowed(), "{name}");
            let context = format!("{name}: one admitted at {now}");
            assert_reset_exact(
                &algorithm,
                limiter.raw_state(),
                now,
                ns(d.reset_after()),
                &context,
            );
        }
    }
    case(fw("5/s"), "fixed");
    case(sw("5/s"), "sliding");
}

#[test]
fn bucket_remaining_is_exact_at_the_end_of_time() {
    // T = 100 ms, burst 5, 150 ms before the end: one slot fits, a second would not.
    let now = u64::MAX - 150_000_000;
    assert_exact_everywhere(&tb("10/s burst 5"), FRESH_STATE, now, "token");
    assert_exact_everywhere(&lb("10/s burst 5"), FRESH_STATE, now, "leaky");
}

// ---------------------------------------------------------------------------------------------
// The real clocks
// ---------------------------------------------------------------------------------------------

fn system_now() -> u64 {
    ns(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap())
}

#[test]
fn the_precise_clock_is_monotonic_and_on_the_unix_timeline() {
    let clock = PreciseClock::new();
    let (system, now) = (system_now(), clock.now().as_nanos());
    assert!(now.abs_diff(system) < 5 * SEC, "precise {now} vs system {system}");
    // Monotonic enough: on one thread, never more than a microsecond back.
    let mut last = clock.now();
    for _ in 0..200_000 {
        let next = clock.now();
        assert!(
            next.as_nanos() + 1_000 >= last.as_nanos(),
            "stepped back {} ns",
            last.as_nanos() - next.as_nanos()
        );
        last = last.max(next);
    }
    // It tracks real time.
    let before = clock.now();
    std::thread::sleep(Duration::from_millis(20));
    let slept = clock.now().saturating_duration_since(before);
    assert!(slept >= Duration::from_millis(19), "{slept:?}");
    assert!(slept < Duration::from_secs(10), "{slept:?}");
    // The default clock of a limiter.
    let limiter = DirectLimiter::new(tb("10/s"));
    assert!(limiter.check().is_allowed());
    assert!(limiter.clock().now().as_nanos().abs_diff(system_now()) < 5 * SEC);
}

#[test]
fn coarse_clocks_share_one_upkeep_and_lag_only_a_little() {
    let first = CoarseClock::new();
    let second = CoarseClock::new();
    let precise = PreciseClock::new();
    let system = system_now();
    for clock in [first, second] {
        assert!(clock.now().as_nanos().abs_diff(system) < 5 * SEC);
    }
    // Both advance (the upkeep thread runs), and read the same shared time.
    let start = first.now();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while second.now().saturating_duration_since(start) < Duration::from_millis(50) {
        assert!(
            std::time::Instant::now() < deadline,
            "coarse time does not advance"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(first.now().saturating_duration_since(start) >= Duration::from_millis(50));
    for _ in 0..1_000 {
        let coarse = first.now().as_nanos();
        let exact = precise.now().as_nanos();
        // Coarse time lags (by the upkeep interval, more under load) but is never ahead.
        assert!(
            coarse <= exact + 1_000_000,
            "coarse {coarse} ahead of precise {exact}"
        );
        assert!(
            exact - coarse.min(exact) < 2 * SEC,
            "coarse lags {} ns",
            exact - coarse
        );
    }
    // A third clock after the upkeep started, and a limiter on it.
    let limiter = DirectLimiter::with_clock(fw("5/s"), CoarseClock::new());
    assert!(limiter.check().is_allowed());
}

/// `Algorithm::decide` with a weight above the capacity (which the limiters refuse with
/// `CostTooLarge` before deciding) is denied with a retry-after of "never" by every algorithm:
/// no instant would let it pass, whatever the state. `2^56` units of a 100 ms interval are
/// `390,625 * 2^64` ns: a product that wrapped instead of saturating would read as weightless.
#[test]
fn a_weight_above_the_capacity_is_never_promised_a_retry() {
    const T0: u64 = 1_700_000_000_000_000_000;
    fn never<A: Algorithm>(algorithm: A, name: &str) {
        for cost in [algorithm.capacity() + 1, 1 << 56, u64::MAX] {
            for state in [FRESH_STATE, 1, T0, T0 + 5_000_000_000, u64::MAX] {
                let d = algorithm.decide(state, ts(T0), cost).decision;
                assert!(!d.is_allowed(), "{name}, weight {cost}: {d:?}");
                assert_eq!(
                    ns(d.retry_after()),
                    u64::MAX,
                    "{name} from {state}, weight {cost}: {d:?}"
                );
            }
        }
    }
    never(tb("10/s"), "token bucket");
    never(tb("10/s burst 3"), "token bucket, burst 3");
    never(lb("10/s burst 3"), "leaky bucket");
    never(fw("10/s"), "fixed window");
    never(sw("10/s"), "sliding window");
}

/// `SlidingWindow::state` clamps what does not fit the packed word instead of dropping bits: the
/// counts to `max_narrow_limit` (a 64-bit state's), the index to the window holding the last
/// representable instant.
#[test]
fn sliding_window_states_clamp_what_does_not_fit() {
    let window = sw("100/min");
    let last = u64::MAX / 60_000_000_000;
    let state = window.state(u64::MAX, u64::MAX, 2);
    assert_eq!(state.index(&window), last);
    assert_eq!(state.previous(&window), window.max_narrow_limit());
    assert_eq!(state.current(&window), 2);
    assert_eq!(window.state(last, 1, 2).index(&window), last);
    assert_eq!(window.state(last - 1, 1, 2).index(&window), last - 1);
}
