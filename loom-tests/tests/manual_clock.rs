//! loom models of `ManualClock` (`src/clock/manual.rs`), whose clones share one `AtomicU64`:
//! `advance` is a read-modify-write loop (`fetch_update`, `Release`), `set` a store. The
//! shipped clock runs on loom's atomics here (`--cfg tollgate_loom`).
//!
//! Invariants, in every execution loom explores:
//! 1. concurrent advances from clones all count (the final time is the start plus their sum).
//!    The broken twin advances with a load and a separate store, and loom finds an advance lost;
//! 2. a thread that reads a time another thread set sees what that thread did before setting it
//!    (`set` and `advance` release, `now` acquires): a worker that reads the time a driver
//!    advanced to after resetting a limiter decides on the reset state. The broken twin's clock
//!    is all `Relaxed`, and loom finds the worker refused on the state from before the reset.
//!
//! Every racing party runs on a spawned thread and the model's own thread only joins: loom
//! 0.7.3 does not run a spawned thread ahead of the main thread's next access when the spawned
//! one starts with a load (tokio-rs/loom#392), so a party on the main thread explores fewer
//! orders.
//!
//! Not modelled: a `set` (a plain store) racing an `advance`. loom 0.7.3 does not keep a plain
//! store out of the middle of a read-modify-write (tokio-rs/loom#254, #389; fix in PR #391), so
//! it reports, with raw loom atomics and no tollgate code, `store(100)` racing `fetch_add(1)`
//! from 10 ending at 11 after both threads are joined: an execution C11 forbids.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::assert_violation;
use tollgate::{Clock, DirectLimiter, ManualClock, Quota, Timestamp, TokenBucket};

/// What the invariant's own panics start with.
const VIOLATION: &str = "VIOLATION (manual clock)";
const SECOND: u64 = 1_000_000_000;

/// What the models need of a clock shared by clones.
trait Shared: Clone + Send + Sync + 'static {
    fn at(start: Timestamp) -> Self;
    fn advance(&self, by: Duration);
    fn now_nanos(&self) -> u64;
}

impl Shared for ManualClock {
    fn at(start: Timestamp) -> Self {
        ManualClock::starting_at(start)
    }
    fn advance(&self, by: Duration) {
        ManualClock::advance(self, by);
    }
    fn now_nanos(&self) -> u64 {
        self.now().as_nanos()
    }
}

/// The broken twin: `advance` as a load and a separate store.
#[derive(Clone)]
struct RacyClock(Arc<AtomicU64>);

impl Shared for RacyClock {
    fn at(start: Timestamp) -> Self {
        RacyClock(Arc::new(AtomicU64::new(start.as_nanos())))
    }
    fn advance(&self, by: Duration) {
        // Relaxed, as the shipped clock: the flaw is the missing read-modify-write.
        let now = self.0.load(Ordering::Relaxed);
        self.0.store(now + by.as_nanos() as u64, Ordering::Relaxed);
    }
    fn now_nanos(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Invariant (1): three clones advance by 1, 2 and 4 s from 10 s: the clock ends at 17 s.
fn advances_all_count<C: Shared>() {
    loom::model(|| {
        let clock = C::at(Timestamp::from_secs(10));
        let others: Vec<_> = [1, 2, 4]
            .into_iter()
            .map(|secs| {
                let clock = clock.clone();
                thread::spawn(move || clock.advance(Duration::from_secs(secs)))
            })
            .collect();
        for other in others {
            other.join().expect("no panic");
        }
        let now = clock.now_nanos();
        assert!(
            now == 17 * SECOND,
            "{VIOLATION}: {now} ns after advances summing to 7 s from 10 s"
        );
    });
}

#[test]
fn concurrent_advances_all_count() {
    advances_all_count::<ManualClock>();
}

#[test]
fn load_then_store_advance_twin_is_rejected() {
    assert_violation(
        VIOLATION,
        "the load-then-store advance",
        advances_all_count::<RacyClock>,
    );
}

/// The broken twin of invariant (2): the shipped clock's arithmetic, all `Relaxed`.
#[derive(Clone)]
struct RelaxedClock(Arc<AtomicU64>);

impl Clock for RelaxedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// What invariant (2) needs of a clock: one that reads and one that advances.
trait Ticking: Clock + Clone + 'static {
    fn at(start: Timestamp) -> Self;
    fn tick(&self);
}

impl Ticking for ManualClock {
    fn at(start: Timestamp) -> Self {
        ManualClock::starting_at(start)
    }
    fn tick(&self) {
        self.advance(Duration::from_nanos(1));
    }
}

impl Ticking for RelaxedClock {
    fn at(start: Timestamp) -> Self {
        RelaxedClock(Arc::new(AtomicU64::new(start.as_nanos())))
    }
    fn tick(&self) {
        let _ = self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Invariant (2): a bucket of burst 1, emptied at 10 s; a driver resets it and then ticks the
/// clock by 1 ns; a worker that reads the ticked time decides at it, on the reset state, and is
/// admitted. (A worker that reads 10 s decides before the tick, on either state.)
fn a_ticked_time_carries_what_came_before<C: Ticking>() {
    loom::model(|| {
        let clock = C::at(Timestamp::from_secs(10));
        let bucket = TokenBucket::new(Quota::per_second(1).expect("quota")).expect("bucket");
        let limiter = Arc::new(DirectLimiter::with_clock(bucket, clock.clone()));
        assert!(limiter.check().is_allowed());
        let driver = {
            let (limiter, clock) = (Arc::clone(&limiter), clock.clone());
            thread::spawn(move || {
                limiter.reset();
                clock.tick();
            })
        };
        let worker = thread::spawn(move || {
            let now = clock.now();
            if now > Timestamp::from_secs(10) {
                let decision = limiter.check_at(now);
                assert!(
                    decision.is_allowed(),
                    "{VIOLATION}: read the time ticked after a reset and decided before it: {decision:?}"
                );
            }
        });
        driver.join().expect("no panic");
        worker.join().expect("no panic");
    });
}

#[test]
fn a_time_read_carries_what_its_setter_did_before() {
    a_ticked_time_carries_what_came_before::<ManualClock>();
}

#[test]
fn relaxed_clock_twin_is_rejected() {
    assert_violation(
        VIOLATION,
        "the all-Relaxed clock",
        a_ticked_time_carries_what_came_before::<RelaxedClock>,
    );
}
