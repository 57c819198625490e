//! loom models of the per-thread lanes (`src/lanes.rs`, the counters of the `metrics` feature
//! and of leased limiters' local decisions): a thread that
//! counts claims a lane (the lowest free bit of the claims' word, set with one `fetch_or`),
//! counts on it with a plain load and store, and gives it back (`fetch_and`); a sum reads every
//! lane. The shipped `LaneClaims` and `Lanes` run on loom's atomics here (`--cfg tollgate_loom`).
//!
//! Invariants, in every execution loom explores: (1) two threads claiming at once get two
//! lanes, so the counts they add all reach the sum; (2) a lane given back and claimed again by
//! another thread keeps the counts its first owner wrote: the second owner continues from them,
//! and the sum is every count added. The broken twins: a claim by a load and a store (two
//! threads take one lane, and one's plain store overwrites the other's count), and a hand-over
//! with `Relaxed` orderings (the new owner may read the lane's count from before the old
//! owner's, and write it back).
//!
//! Every racing party runs on a spawned thread and the model's own thread only sets up, joins
//! and checks (loom 0.7.3 does not run a spawned thread ahead of the main thread's next access
//! when the spawned one starts with a load, tokio-rs/loom#392).
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::assert_violation;
use tollgate::{LaneClaims, Lanes};

/// What the invariants' own panics start with, so that a twin is rejected on it alone.
const VIOLATION: &str = "VIOLATION";
/// Counts each owner adds to its lane, one at a time.
const ADDS: u64 = 2;

/// What the models need of the claims: a lane, and giving it back.
trait Claims: Send + Sync + 'static {
    fn fresh() -> Self;
    fn claim(&self) -> Option<usize>;
    fn give_back(&self, lane: usize);
}

impl Claims for LaneClaims {
    fn fresh() -> LaneClaims {
        LaneClaims::new()
    }

    fn claim(&self) -> Option<usize> {
        LaneClaims::claim(self)
    }

    fn give_back(&self, lane: usize) {
        LaneClaims::give_back(self, lane);
    }
}

/// The first broken twin: a lane claimed with a load and a store instead of a `fetch_or`.
struct LoadStoreClaims {
    word: AtomicU64,
}

impl Claims for LoadStoreClaims {
    fn fresh() -> LoadStoreClaims {
        LoadStoreClaims {
            word: AtomicU64::new(0),
        }
    }

    fn claim(&self) -> Option<usize> {
        // Acquire and Release: as the shipped claim and hand-over; the flaw is the missing
        // read-modify-write.
        let seen = self.word.load(Ordering::Acquire);
        let lane = (!seen).trailing_zeros() as usize;
        self.word.store(seen | 1 << lane, Ordering::Release);
        Some(lane)
    }

    fn give_back(&self, lane: usize) {
        // Release: as the shipped give-back.
        self.word.fetch_and(!(1 << lane), Ordering::Release);
    }
}

/// The second broken twin: the shipped read-modify-writes, with `Relaxed` orderings.
struct RelaxedClaims {
    word: AtomicU64,
}

impl Claims for RelaxedClaims {
    fn fresh() -> RelaxedClaims {
        RelaxedClaims {
            word: AtomicU64::new(0),
        }
    }

    fn claim(&self) -> Option<usize> {
        let mut seen = self.word.load(Ordering::Relaxed);
        loop {
            let bit = 1u64 << (!seen).trailing_zeros();
            // Relaxed: the flaw under test (the shipped claim is Acquire).
            let before = self.word.fetch_or(bit, Ordering::Relaxed);
            if before & bit == 0 {
                return Some(bit.trailing_zeros() as usize);
            }
            seen = before | bit;
        }
    }

    fn give_back(&self, lane: usize) {
        // Relaxed: the flaw under test (the shipped give-back is Release).
        self.word.fetch_and(!(1 << lane), Ordering::Relaxed);
    }
}

/// One owner's turn: claims a lane, adds [`ADDS`] to counter 0 on it, one at a time, and gives
/// it back when `gives_back`. Returns the lane.
fn count<C: Claims>(claims: &C, lanes: &Lanes<1>, gives_back: bool) -> usize {
    let lane = claims.claim().expect("a free lane");
    for _ in 0..ADDS {
        assert!(
            lanes.add_on_lane(lane, 0, 1),
            "{VIOLATION}: lane {lane} is past the lanes"
        );
    }
    if gives_back {
        claims.give_back(lane);
    }
    lane
}

/// Invariant (1): two owners claiming at once, each keeping its lane.
fn two_owners_at_once<C: Claims>() {
    loom::model(|| {
        let claims = Arc::new(C::fresh());
        let lanes = Arc::new(Lanes::<1>::new(4));
        let owners: Vec<_> = (0..2)
            .map(|_| {
                let (claims, lanes) = (Arc::clone(&claims), Arc::clone(&lanes));
                thread::spawn(move || count(&*claims, &lanes, false))
            })
            .collect();
        let taken: Vec<usize> = owners
            .into_iter()
            .map(|owner| owner.join().expect("no panic"))
            .collect();
        let sum = lanes.sum()[0];
        assert!(
            sum == 2 * ADDS,
            "{VIOLATION}: {sum} counted of {}, lanes {taken:?}",
            2 * ADDS
        );
        assert!(taken[0] != taken[1], "{VIOLATION}: one lane for two owners");
    });
}

/// Invariant (2): an owner gives its lane back while another claims one; whichever lane the
/// second gets (the first one's, or another), every count reaches the sum.
fn a_lane_handed_over<C: Claims>() {
    loom::model(|| {
        let claims = Arc::new(C::fresh());
        let lanes = Arc::new(Lanes::<1>::new(4));
        let owners: Vec<_> = [true, false]
            .into_iter()
            .map(|gives_back| {
                let (claims, lanes) = (Arc::clone(&claims), Arc::clone(&lanes));
                thread::spawn(move || count(&*claims, &lanes, gives_back))
            })
            .collect();
        for owner in owners {
            owner.join().expect("no panic");
        }
        let sum = lanes.sum()[0];
        assert!(sum == 2 * ADDS, "{VIOLATION}: {sum} counted of {}", 2 * ADDS);
    });
}

#[test]
fn two_owners_at_once_take_two_lanes() {
    two_owners_at_once::<LaneClaims>();
}

#[test]
fn a_lane_handed_over_keeps_its_counts() {
    a_lane_handed_over::<LaneClaims>();
}

/// The first twin: loom must find two owners of one lane, and reject it on the invariant.
#[test]
fn a_claim_by_load_and_store_is_rejected() {
    assert_violation(
        VIOLATION,
        "the load-and-store claim",
        two_owners_at_once::<LoadStoreClaims>,
    );
}

/// The second twin: loom must find a new owner that reads its lane's count from before the
/// previous owner's, and reject it on the invariant.
#[test]
fn a_relaxed_hand_over_is_rejected() {
    assert_violation(
        VIOLATION,
        "the relaxed hand-over",
        a_lane_handed_over::<RelaxedClaims>,
    );
}
