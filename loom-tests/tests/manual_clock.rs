//! loom models of `ManualClock` (`src/clock/manual.rs`), whose clones share one `AtomicU64`:
//! `advance` is a read-modify-write loop (`fetch_update`, `Relaxed`), `set` a store. The
//! shipped clock runs on loom's atomics here (`--cfg tollgate_loom`).
//!
//! Invariant, in every execution loom explores: concurrent advances from clones all count (the
//! final time is the start plus their sum). The broken twin advances with a load and a separate
//! store, and loom finds an advance lost.
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
use tollgate::{Clock, ManualClock, Timestamp};

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
        let others: Vec<_> = [1, 2]
            .into_iter()
            .map(|secs| {
                let clock = clock.clone();
                thread::spawn(move || clock.advance(Duration::from_secs(secs)))
            })
            .collect();
        clock.advance(Duration::from_secs(4));
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
