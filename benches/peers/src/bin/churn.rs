//! The cost of a new key in a keyed table that many more keys have passed through than it holds.
//!
//! ```text
//! cargo run -p tollgate-peers --release --bin churn -- [CAPACITY] [ROUNDS]
//! ```
//!
//! A `KeyedLimiter<u64, TokenBucket>` built for `CAPACITY` keys (default 100,000) sees, each
//! round, `CAPACITY / 2` keys it has never seen (each charged once, so each carries a tenth of a
//! second of debt), then the same keys once more (present now); then ten seconds pass and every
//! key is idle, so the next round's new keys reuse their slots. Time is an argument
//! (`check_at`), so only the table is measured. Prints, for some rounds, the mean ns per new key
//! and per present key (wall clock over the whole pass), `len()` (keys held, idle ones included),
//! `active_at(now)` (keys still being limited) and how long that count's scan of every slot took.
//!
//! A table whose lookups for an absent key walked to the first never-used slot got slower with
//! every round, as the never-used slots ran out; a table whose lookups stop at the home's reach
//! does not (`docs/design.md`, "The keyed table").

use std::hint::black_box;
use std::time::{Duration, Instant};

use tollgate::{KeyedLimiter, ManualClock, Quota, Timestamp, TokenBucket};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let capacity: usize = args.next().map_or(Ok(100_000), |arg| arg.parse())?;
    let rounds: u64 = args.next().map_or(Ok(60), |arg| arg.parse())?;
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(
        TokenBucket::new(Quota::per_second(10)?)?,
        capacity,
        ManualClock::new(),
    )?;
    let per_round = (capacity / 2) as u64;
    println!("table for {capacity} keys, {per_round} new keys a round");
    println!("| round | ns per new key | ns per present key | len() | active() | µs for active() |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for round in 0..rounds {
        let now = Timestamp::from_nanos(1 + round * Duration::from_secs(10).as_nanos() as u64);
        let keys = round * per_round..(round + 1) * per_round;
        let start = Instant::now();
        for key in keys.clone() {
            let _ = black_box(limiter.check_at(&key, now));
        }
        let new = start.elapsed().as_nanos() as f64 / per_round as f64;
        let start = Instant::now();
        for key in keys {
            let _ = black_box(limiter.check_at(&key, now));
        }
        let present = start.elapsed().as_nanos() as f64 / per_round as f64;
        if round < 4 || round % 8 == 0 || round + 1 == rounds {
            let start = Instant::now();
            let active = limiter.active_at(now);
            let scan = start.elapsed().as_micros();
            println!(
                "| {round} | {new:.0} | {present:.0} | {} | {active} | {scan} |",
                limiter.len()
            );
        }
    }
    Ok(())
}
