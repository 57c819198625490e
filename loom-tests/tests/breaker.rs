//! loom models of the circuit breaker in front of Redis (`src/breaker.rs`, used by
//! `tollgate::distributed::RedisLimiter`): after a failure, decisions skip Redis for a pause;
//! once it is over, the callers that notice race for the one probe with a compare-and-swap on
//! the breaker's word, so exactly one of them asks Redis and the others answer by the failure
//! policy. The shipped `Breaker` runs on loom's atomics here (`--cfg tollgate_loom`).
//!
//! Invariants, in every execution loom explores: (1) among callers that arrive after the pause,
//! exactly one takes the probe, whatever they read first; (2) a caller inside the pause never
//! does; (3) a success racing a failure leaves the breaker either closed or paused until the
//! failure's time plus the pause, never some third state. The broken twin elects the prober
//! with a load and a store instead of the CAS, and loom finds two probes in one pause.
//!
//! Every racing caller runs on a spawned thread and the model's own thread only sets the
//! breaker up, joins and checks: loom 0.7.3 does not run a spawned thread ahead of the main
//! thread's next access when the spawned one starts with a load (tokio-rs/loom#392), so a party
//! on the main thread explores fewer orders.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::assert_violation;
use tollgate::Breaker;

/// The pause after a failure, in ns (the breaker's own time unit).
const PAUSE: u64 = 1_000;
/// What the invariant's own panics start with, so that a twin is rejected on it alone.
const VIOLATION: &str = "VIOLATION";

/// What the models need of a breaker: elect probers and record a failure, at given times.
trait Elect: Send + Sync + 'static {
    fn paused_at(failure: u64) -> Self;
    fn should_ask_at(&self, now: u64) -> bool;
}

impl Elect for Breaker {
    fn paused_at(failure: u64) -> Breaker {
        let breaker = Breaker::new(Duration::from_nanos(PAUSE));
        breaker.failed_at(failure);
        breaker
    }

    fn should_ask_at(&self, now: u64) -> bool {
        Breaker::should_ask_at(self, now)
    }
}

/// The broken twin: the shipped election with its CAS replaced by a load and a store.
struct RacyBreaker {
    skip_until: AtomicU64,
}

impl Elect for RacyBreaker {
    fn paused_at(failure: u64) -> RacyBreaker {
        RacyBreaker {
            skip_until: AtomicU64::new(failure + PAUSE),
        }
    }

    fn should_ask_at(&self, now: u64) -> bool {
        // Relaxed: as the shipped breaker; the flaw is the missing CAS, not the ordering.
        let until = self.skip_until.load(Ordering::Relaxed);
        if until == 0 {
            return true;
        }
        if now < until {
            return false;
        }
        // Relaxed: as above.
        self.skip_until.store(now + PAUSE, Ordering::Relaxed);
        true
    }
}

/// Three callers after a failure at 0, each on its own thread, at `times[0]`, `times[1]` and
/// `times[2]`. Returns how many took the probe.
fn probes<B: Elect>(times: [u64; 3]) -> usize {
    let breaker = Arc::new(B::paused_at(0));
    let callers: Vec<_> = times
        .iter()
        .map(|&now| {
            let breaker = Arc::clone(&breaker);
            thread::spawn(move || breaker.should_ask_at(now))
        })
        .collect();
    callers
        .into_iter()
        .map(|caller| caller.join().expect("no panic"))
        .filter(|&probe| probe)
        .count()
}

/// Invariant (1): all three callers arrive after the pause (at different times, so that a
/// later one also finds the earlier ones' new pause unexpired): exactly one probe.
fn one_probe_per_pause<B: Elect>() {
    loom::model(|| {
        let probes = probes::<B>([PAUSE, PAUSE + 3, PAUSE + 7]);
        assert!(probes == 1, "{VIOLATION}: {probes} probes in one pause");
    });
}

#[test]
fn exactly_one_caller_after_the_pause_takes_the_probe() {
    one_probe_per_pause::<Breaker>();
}

/// Invariant (2): one caller still inside the pause never probes; of the two after it, one does.
#[test]
fn a_caller_inside_the_pause_never_probes() {
    loom::model(|| {
        let breaker = Arc::new(Breaker::paused_at(0));
        let early = {
            let breaker = Arc::clone(&breaker);
            thread::spawn(move || breaker.should_ask_at(PAUSE - 1))
        };
        let late = {
            let breaker = Arc::clone(&breaker);
            thread::spawn(move || breaker.should_ask_at(PAUSE))
        };
        let last = {
            let breaker = Arc::clone(&breaker);
            thread::spawn(move || breaker.should_ask_at(PAUSE + 1))
        };
        assert!(
            !early.join().expect("no panic"),
            "{VIOLATION}: a probe inside the pause"
        );
        let probes =
            usize::from(late.join().expect("no panic")) + usize::from(last.join().expect("no panic"));
        assert!(probes == 1, "{VIOLATION}: {probes} probes in one pause");
    });
}

/// Invariant (3): a success (Redis answered a probe) racing a failure (another request timed
/// out at 5) leaves the breaker closed or paused until 5 + the pause: a caller at that instant
/// is asked exactly when the success came last.
#[test]
fn a_success_racing_a_failure_leaves_one_of_their_states() {
    loom::model(|| {
        let breaker = Arc::new(Breaker::paused_at(0));
        let failing = {
            let breaker = Arc::clone(&breaker);
            thread::spawn(move || breaker.failed_at(5))
        };
        let succeeding = {
            let breaker = Arc::clone(&breaker);
            thread::spawn(move || breaker.succeeded())
        };
        failing.join().expect("no panic");
        succeeding.join().expect("no panic");
        // Closed: asked at any time. Paused until 5 + PAUSE: not asked just before it, and
        // asked (the probe) at it.
        let before = breaker.should_ask_at(4 + PAUSE);
        let at = breaker.should_ask_at(5 + PAUSE);
        assert!(at, "{VIOLATION}: not asked once the last pause is over");
        let closed = before;
        if !closed {
            // Paused: the probe at 5 + PAUSE opened a new pause.
            assert!(
                !breaker.should_ask_at(5 + PAUSE),
                "{VIOLATION}: a second probe in one pause"
            );
        }
    });
}

/// The twin: loom must find two probes in one pause, and reject it on the invariant.
#[test]
fn load_then_store_election_is_rejected() {
    assert_violation(
        VIOLATION,
        "the load-then-store breaker",
        one_probe_per_pause::<RacyBreaker>,
    );
}
