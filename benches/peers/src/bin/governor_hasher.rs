//! How much of governor's keyed time is its default hasher: governor's keyed limiter as
//! `RateLimiter::keyed` builds it (a DashMap with std's `RandomState`, SipHash-1-3), which the
//! keyed benchmarks measure, against the same limiter with ahash (governor's documented
//! `DashMapStateStore::with_capacity_and_hasher`, a random seed per map as tollgate's per
//! limiter), and tollgate, in one loop shape, on the same keys and quota (one per 10 s, burst
//! [`tollgate_peers::BURST`]): 5,000,000 decisions in turn over 1, 1,000 and 1,000,000 keys, each
//! limiter filled first, median of 7 rounds, on both clock kinds.
//!
//! ```text
//! cargo build -p tollgate-peers --profile bench --benches --bin governor_hasher
//! target/release/governor_hasher
//! ```
//!
//! The keyed benchmarks run governor as `RateLimiter::keyed` builds it, its default; this probe
//! shows how much of the gap between the two is that default hasher.

use std::hint::black_box;
use std::time::Instant;

use governor::clock::{QuantaClock, QuantaUpkeepClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use tollgate::clock::COARSE_UPKEEP_INTERVAL;
use tollgate::{CoarseClock, PreciseClock};

#[inline(never)]
fn in_turn<R>(check: &impl Fn(&u64) -> R, iters: u64, count: u64) -> f64 {
    let mut key = 0;
    let start = Instant::now();
    for _ in 0..iters {
        black_box(check(black_box(&key)));
        key += 1;
        if key == count {
            key = 0;
        }
    }
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds = 7;
    let iters = 5_000_000;
    for clock in ["precise", "coarse"] {
        let upkeep =
            (clock == "coarse").then(|| QuantaUpkeepClock::from_interval(COARSE_UPKEEP_INTERVAL).unwrap());
        for keys in [1u64, 1_000, 1_000_000] {
            let cap = keys.max(10_000) as usize;
            let mut rows: Vec<(&str, Vec<f64>)> = vec![
                ("tollgate", vec![]),
                ("governor (SipHash, default)", vec![]),
                ("governor (ahash)", vec![]),
            ];
            for _ in 0..rounds {
                macro_rules! gov {
                    ($c:expr, $h:expr) => {{
                        let l: governor::RateLimiter<u64, DashMapStateStore<u64, _>, _, NoOpMiddleware<_>> =
                            governor::RateLimiter::new(
                                tollgate_peers::governor_quota(),
                                DashMapStateStore::<u64, _>::with_capacity_and_hasher(cap, $h),
                                $c,
                            );
                        for k in 0..keys {
                            assert!(l.check_key(&k).is_ok());
                        }
                        let ns = in_turn(&|k: &u64| l.check_key(k), iters, keys);
                        assert!(l.check_key(&0).is_ok());
                        ns
                    }};
                }
                macro_rules! toll {
                    ($c:expr) => {{
                        let l = tollgate_peers::tollgate(cap, $c);
                        for k in 0..keys {
                            assert_eq!(l.check(&k).outcome(), tollgate::Outcome::Allowed);
                        }
                        let ns = in_turn(&|k: &u64| l.check(k), iters, keys);
                        assert!(l.check(&0).is_allowed());
                        ns
                    }};
                }
                match &upkeep {
                    None => {
                        rows[0].1.push(toll!(PreciseClock::new()));
                        rows[1]
                            .1
                            .push(gov!(QuantaClock::default(), std::hash::RandomState::new()));
                        rows[2]
                            .1
                            .push(gov!(QuantaClock::default(), ahash::RandomState::new()));
                    }
                    Some(u) => {
                        rows[0].1.push(toll!(CoarseClock::new()));
                        rows[1].1.push(gov!(u.clone(), std::hash::RandomState::new()));
                        rows[2].1.push(gov!(u.clone(), ahash::RandomState::new()));
                    }
                }
            }
            for (name, v) in rows {
                println!(
                    "{clock:7} keys {keys:>9}  {name:30} median {:6.2} ns  (rounds: {:?})",
                    median(v.clone()),
                    v.iter().map(|x| (x * 100.0).round() / 100.0).collect::<Vec<_>>()
                );
            }
        }
    }
}
