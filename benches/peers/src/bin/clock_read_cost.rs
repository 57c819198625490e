//! What a clock read costs a keyed decision whose slot is not in the cache: the 1,000,000-key
//! rows and the inserts, where the precise clock adds far more than its own read time on some
//! machines.
//!
//! ```text
//! cargo build -p tollgate-peers --profile bench --bin clock_read_cost
//! target/release/clock_read_cost [ROUNDS]
//! ```
//!
//! Two scenarios, each over 1,000,000 keys spread by a multiplication (so that consecutive keys
//! land on unrelated slots): `insert`, a table built for 1,000,000 keys filled from empty (the
//! build untimed), and `present`, one decision for each key of a table that already holds all
//! of them. Each runs with five ways of taking the time:
//!
//! - `fixed`: `check_at` with a time read once before the loop: no clock read per decision;
//! - `fixed + TSC read`: the same, and a bare read of the time-stamp counter after each decision
//!   (`quanta::Clock::raw`), its value unused;
//! - `fixed + coarse read`: the same with the coarse clock's read instead;
//! - `precise`: `check` on a `PreciseClock` (the TSC, read after the lookup);
//! - `coarse`: `check` on a `CoarseClock`.
//!
//! Prints ns per decision for each round, then each row's median over the rounds.

use std::hint::black_box;
use std::time::Instant;

use tollgate::{Clock, CoarseClock, KeyedLimiter, PreciseClock, Timestamp, TokenBucket};
use tollgate_peers::tollgate_bucket;

const KEYS: u64 = 1_000_000;

/// Key `i` of the run: spread over the table by an odd multiplier.
fn key(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[derive(Clone, Copy)]
enum Time {
    Fixed,
    FixedAndTsc,
    FixedAndCoarse,
    Precise,
    Coarse,
}

impl Time {
    const ALL: [Time; 5] = [
        Time::Fixed,
        Time::FixedAndTsc,
        Time::FixedAndCoarse,
        Time::Precise,
        Time::Coarse,
    ];

    fn name(self) -> &'static str {
        match self {
            Time::Fixed => "fixed",
            Time::FixedAndTsc => "fixed + TSC read",
            Time::FixedAndCoarse => "fixed + coarse read",
            Time::Precise => "precise",
            Time::Coarse => "coarse",
        }
    }
}

/// ns per decision of one pass over every key, on `limiter`, the time taken as `time` says.
fn pass<C: Clock>(limiter: &KeyedLimiter<u64, TokenBucket, C>, time: Time) -> f64 {
    let fixed = PreciseClock::new().now();
    let counter = quanta::Clock::new();
    let coarse = CoarseClock::new();
    let start = Instant::now();
    for i in 0..KEYS {
        let key = key(i);
        let decision = match time {
            Time::Fixed => limiter.check_at(&key, fixed),
            Time::FixedAndTsc => {
                let decision = limiter.check_at(&key, fixed);
                black_box(counter.raw());
                decision
            }
            Time::FixedAndCoarse => {
                let decision = limiter.check_at(&key, fixed);
                black_box(coarse.now());
                decision
            }
            Time::Precise | Time::Coarse => limiter.check(&key),
        };
        let _ = black_box(decision);
    }
    start.elapsed().as_nanos() as f64 / KEYS as f64
}

/// A limiter for `KEYS` keys on the clock `time` asks for.
fn limiter_for(time: Time) -> Box<dyn Fn(bool) -> f64> {
    fn run<C: Clock + 'static>(clock: impl Fn() -> C + 'static, time: Time) -> Box<dyn Fn(bool) -> f64> {
        Box::new(move |filled| {
            let limiter = KeyedLimiter::with_clock(tollgate_bucket(), KEYS as usize, clock())
                .expect("a table for a million keys fits");
            if filled {
                let now = Timestamp::from_nanos(1);
                for i in 0..KEYS {
                    assert!(limiter.check_at(&key(i), now).is_allowed());
                }
            }
            let ns = pass(&limiter, time);
            assert_eq!(limiter.len() as u64, KEYS, "every key is in the table");
            ns
        })
    }
    match time {
        Time::Coarse => run(CoarseClock::new, time),
        _ => run(PreciseClock::new, time),
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|arg| arg.parse().expect("ROUNDS is a number"))
        .unwrap_or(3);
    let mut results: Vec<(String, Vec<f64>)> = Vec::new();
    for round in 1..=rounds {
        for (scenario, filled) in [("insert", false), ("present", true)] {
            for time in Time::ALL {
                let ns = limiter_for(time)(filled);
                let row = format!("{scenario:8} {:20}", time.name());
                println!("round {round}: {row} {ns:7.1} ns");
                match results.iter_mut().find(|(name, _)| *name == row) {
                    Some((_, values)) => values.push(ns),
                    None => results.push((row, vec![ns])),
                }
            }
        }
    }
    println!("\nmedian of {rounds} rounds (ns per decision):");
    for (row, values) in &mut results {
        println!("{row} {:7.1}", median(values));
    }
}
