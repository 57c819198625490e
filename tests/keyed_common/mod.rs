//! Shared by the keyed limiter's integration tests: the four algorithms at one quota, a frozen
//! instant, and small helpers over the public API.

// Each test binary uses only some of these helpers.
#![allow(dead_code)]

use std::time::Duration;

use tollgate::algorithm::Algorithm;
use tollgate::{Decision, FixedWindow, LeakyBucket, Quota, SlidingWindow, Timestamp, TokenBucket};

pub(crate) const SEC: u64 = 1_000_000_000;

/// A minute boundary (1_700_000_040 s) plus 15 s and 7 ns: inside a one-second window, a quarter
/// into a one-minute one, on no boundary of either.
pub(crate) const T0: u64 = 1_700_000_040 * SEC + 15 * SEC + 7;

pub(crate) fn ts(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

pub(crate) fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

/// The four algorithms, each allowing exactly `limit` units at one frozen instant and fully
/// recovered (idle) two seconds after it: `limit` per second (bucket burst = count).
pub(crate) fn token_bucket(limit: u64) -> TokenBucket {
    TokenBucket::new(quota(&format!("{limit}/s"))).unwrap()
}

pub(crate) fn leaky_bucket(limit: u64) -> LeakyBucket {
    LeakyBucket::new(quota(&format!("{limit}/s"))).unwrap()
}

pub(crate) fn fixed_window(limit: u64) -> FixedWindow {
    FixedWindow::new(quota(&format!("{limit}/s"))).unwrap()
}

pub(crate) fn sliding_window(limit: u64) -> SlidingWindow {
    SlidingWindow::new(quota(&format!("{limit}/s"))).unwrap()
}

/// How long after a frozen burst every algorithm built above is idle again for every key:
/// the buckets refill within one second, a sliding window forgets a count two windows on.
pub(crate) const RECOVERY: Duration = Duration::from_secs(3);

/// The decisions an algorithm gives a fresh key for `costs` in a row at `now`: what a key that
/// was forgotten (or never seen) must be told, and never more.
pub(crate) fn fresh_run<A: Algorithm>(algorithm: &A, now: Timestamp, costs: &[u64]) -> Vec<Decision> {
    let mut state = tollgate::algorithm::FRESH_STATE;
    costs
        .iter()
        .map(|&cost| {
            let t = algorithm.decide(state, now, cost);
            state = t.state;
            t.decision
        })
        .collect()
}

/// Whether two decisions agree on everything but the outcome.
pub(crate) fn same_numbers(a: &Decision, b: &Decision) -> bool {
    a.remaining() == b.remaining()
        && a.retry_after() == b.retry_after()
        && a.reset_after() == b.reset_after()
        && a.delay() == b.delay()
}

/// A small deterministic generator (SplitMix64), so that runs are reproducible without a
/// random-number crate.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}
