//! Named direct limiters' series (feature `metrics`): the decisions of a known sequence by
//! outcome, read back through a recorder of the test's own; threads counting exactly, with
//! more threads than lanes and threads that end and give their lanes to new ones; a limiter
//! dropped and built again under its name; names refused with what to fix; and decisions that
//! allocate nothing once their thread has a lane.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use allocation_counter::measure;
use tollgate::metrics::{LimiterName, LimiterNameError, MAX_NAME_BYTES};
use tollgate::{
    DirectLimiter, FixedWindow, LogLimiter, ManualClock, Outcome, SlidingLog, Timestamp, TokenBucket,
};

use crate::metrics_common::{expected, name, Recorder};

const SEC: u64 = 1_000_000_000;

fn at(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

/// Every kind of request, once: admitted, refused, weighted, peeked, refunded, reset, too heavy;
/// only decisions count.
#[test]
fn a_named_direct_limiter_counts_its_decisions_by_outcome() {
    let recorder = Recorder::new();
    let name = name("direct");
    let bucket = TokenBucket::new("2/s burst 3".parse().unwrap()).unwrap();
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new()).named(name.clone());
    assert_eq!(limiter.meter().map(|meter| meter.name()), Some(&name));
    let now = at(10 * SEC);
    let outcomes = [
        limiter.check_at(now).outcome(),
        limiter.check_n_at(2, now).unwrap().outcome(),
        limiter.check_at(now).outcome(),
        limiter
            .check_n_within_at(1, Duration::from_millis(1), now)
            .unwrap()
            .outcome(),
    ];
    assert_eq!(
        outcomes,
        [
            Outcome::Allowed,
            Outcome::Allowed,
            Outcome::Denied,
            Outcome::Denied
        ]
    );
    // Not decisions: a peek, a refund, a reset, a request heavier than the capacity.
    let _ = limiter.peek_at(now);
    assert!(limiter.refund_n_at(1, now));
    assert!(limiter.reset_at(now));
    assert!(limiter.check_n_at(4, now).is_err());
    // After the reset, a weighted admission and a refusal.
    assert!(limiter.check_n_at(3, now).unwrap().is_allowed());
    assert!(!limiter.check_at(now).is_allowed());

    let published = recorder.published(name.as_str());
    assert_eq!(
        published.values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", 3.0),
            ("tollgate_decisions_total{outcome=refused}", 3.0),
        ])
    );
    assert!(published.histograms.is_empty());
    // A second publish hands over the same totals again.
    assert_eq!(recorder.published(name.as_str()), published);
}

/// The sliding log's direct limiter counts the same way; an unnamed limiter has no meter.
#[test]
fn the_log_limiter_counts_and_an_unnamed_limiter_has_no_meter() {
    let recorder = Recorder::new();
    let name = name("log");
    let clock = ManualClock::starting_at(at(SEC));
    let log = LogLimiter::with_clock(SlidingLog::new("2/s".parse().unwrap()).unwrap(), clock.clone());
    assert!(log.meter().is_none());
    let log = log.named(name.clone());
    let admitted: Vec<bool> = (0..5).map(|_| log.check().is_allowed()).collect();
    assert_eq!(admitted, [true, true, false, false, false]);
    let _ = log.peek();
    assert_eq!(
        recorder.published(name.as_str()).values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", 2.0),
            ("tollgate_decisions_total{outcome=refused}", 3.0),
        ])
    );
    let unnamed = DirectLimiter::new(FixedWindow::new("1/s".parse().unwrap()).unwrap());
    assert!(unnamed.meter().is_none());
}

/// `threads` threads started together, each making `calls` decisions on one limiter at a frozen
/// time, tallying what it was told; the published totals must equal the tallies summed.
fn threads_count_exactly(threads: usize, calls: usize, rounds: usize) {
    let recorder = Recorder::new();
    let name = name("threads");
    // 1,000,000 per 1,000 s at a frozen time: a burst of `burst`, then refusals.
    let burst = (threads * calls * rounds / 2) as u64;
    let quota = tollgate::Quota::new(1, Duration::from_secs(1_000))
        .and_then(|quota| quota.with_burst(burst))
        .unwrap();
    let clock = ManualClock::starting_at(at(SEC));
    let limiter =
        Arc::new(DirectLimiter::with_clock(TokenBucket::new(quota).unwrap(), clock).named(name.clone()));
    let (mut allowed, mut refused) = (0u64, 0u64);
    // Each round's threads end before the next round's start: their lanes are given back and
    // taken again, with the counts on them.
    for _ in 0..rounds {
        let barrier = Arc::new(Barrier::new(threads));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    let admitted = (0..calls).filter(|_| limiter.check().is_allowed()).count() as u64;
                    (admitted, calls as u64 - admitted)
                })
            })
            .collect();
        for worker in workers {
            let (admitted, denied) = worker.join().unwrap();
            allowed += admitted;
            refused += denied;
        }
    }
    assert_eq!(allowed, burst, "the bucket admits exactly its burst");
    assert_eq!(
        recorder.published(name.as_str()).values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", allowed as f64),
            ("tollgate_decisions_total{outcome=refused}", refused as f64),
        ])
    );
}

#[test]
fn threads_count_exactly_on_their_lanes() {
    threads_count_exactly(8, 20_000, 1);
}

/// More threads at once than a meter has lanes (at least 16, four per CPU, at most 256): the
/// ones past them count on the shared line, exactly too.
#[test]
fn threads_past_the_lanes_count_exactly() {
    threads_count_exactly(300, 500, 1);
}

/// Threads that end give their lanes back; the next round's threads take them, and continue
/// their counts.
#[test]
fn lanes_given_back_and_taken_again_keep_their_counts() {
    threads_count_exactly(6, 5_000, 5);
}

/// A limiter dropped leaves its counts to its name: one built again under the same name (a
/// route whose quota changed) continues its series.
#[test]
fn a_limiter_built_again_under_its_name_continues_its_series() {
    let recorder = Recorder::new();
    let name = name("rebuilt");
    let bucket = || TokenBucket::new("1/s burst 2".parse().unwrap()).unwrap();
    let first = DirectLimiter::with_clock(bucket(), ManualClock::new()).named(name.clone());
    for _ in 0..3 {
        let _ = first.check();
    }
    drop(first);
    let second = DirectLimiter::with_clock(bucket(), ManualClock::new()).named(name.clone());
    let _ = second.check();
    assert_eq!(
        recorder.published(name.as_str()).values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", 3.0),
            ("tollgate_decisions_total{outcome=refused}", 1.0),
        ])
    );
}

/// A named limiter's decisions allocate nothing once their thread has its lane (its first count
/// claims it, which registers the thread's exit hook, once).
#[test]
fn named_decisions_allocate_nothing_once_the_thread_has_its_lane() {
    let seen = measure(|| drop(std::hint::black_box(Box::new(7u64))));
    assert_eq!(seen.count_total, 1, "the counting allocator is not in place");
    let bucket = TokenBucket::new("100/s burst 10".parse().unwrap()).unwrap();
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new()).named(name("allocations"));
    // On a thread of its own, so that its first count is this test's.
    thread::spawn(move || {
        let _ = limiter.check();
        let counted = measure(|| {
            for i in 0..10_000u64 {
                let _ = std::hint::black_box(limiter.check_at(at(SEC + i * 1_000_000)));
            }
        });
        assert_eq!(counted.count_total, 0, "{} allocations", counted.count_total);
    })
    .join()
    .unwrap();
}

/// Names that cannot be: each refused with what to fix.
#[test]
fn names_are_checked() {
    assert_eq!(
        LimiterName::new("api").map(|name| name.to_string()),
        Ok("api".to_owned())
    );
    assert_eq!("".parse::<LimiterName>(), Err(LimiterNameError::Empty));
    let long = "x".repeat(MAX_NAME_BYTES + 1);
    assert_eq!(
        LimiterName::new(&long),
        Err(LimiterNameError::TooLong {
            bytes: MAX_NAME_BYTES + 1
        })
    );
    assert!(LimiterName::new(&long[1..]).is_ok());
    assert_eq!(
        LimiterName::try_from("a\nb"),
        Err(LimiterNameError::ControlCharacter { at: 1 })
    );
    assert_eq!(
        LimiterNameError::Empty.to_string(),
        "a limiter's name is empty: give it 1 to 128 bytes of text, such as `api` (a limiter without a name records nothing)"
    );
    assert_eq!(
        LimiterNameError::TooLong { bytes: 129 }.to_string(),
        "a limiter's name is 129 bytes long: it may be at most 128"
    );
    assert_eq!(
        LimiterNameError::ControlCharacter { at: 1 }.to_string(),
        "a limiter's name holds a control character at byte 1: use printable text on one line"
    );
}
