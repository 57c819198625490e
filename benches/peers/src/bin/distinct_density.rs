//! Two threads on distinct keys of one keyed table, against one thread, as the table's density
//! changes: how much of the `keyed_distinct` scenario's shortfall is the threads writing the
//! same cache lines for different keys.
//!
//! ```text
//! cargo build -p tollgate-peers --profile bench --benches --bin distinct_density
//! target/release/distinct_density [ROUNDS] [DECISIONS]
//! ```
//!
//! (`--benches` builds the library as the benchmarks link it, with the dev-dependencies'
//! features, so these loops are the benchmarks' machine code: `benches/loop_code.py`. A plain
//! `cargo run --release --bin distinct_density` builds a second library, whose loops may be
//! compiled differently.)
//!
//! As `contention/*/keyed_distinct` does: thread `t` decides its own 1,000 keys
//! (`t * 1000 .. t * 1000 + 1000`) in turn, with the benchmarks' quota (never refused, never
//! idle), on tables built for 10,000 (the benchmark's), 100,000 and 1,000,000 keys. Four 16-byte
//! slots share a 64-byte line, so in a table built for 10,000 keys (14,286 slots) about a fifth of
//! a thread's keys share a line with a key of the other thread; in one for 1,000,000 keys almost
//! none do. Each round, for each table and clock, times `DECISIONS` decisions per thread on one
//! thread, then on two, each on a fresh, filled table; prints ns per decision and the scaling
//! (decisions per second on two threads over one), then each column's median over the rounds.

use std::time::Duration;

use tollgate::{Clock, CoarseClock, PreciseClock};
use tollgate_peers::timing::in_threads;
use tollgate_peers::{tollgate, KeyedLoops, Tollgate};

const KEYS_PER_THREAD: u64 = 1_000;
const TABLES: [usize; 3] = [10_000, 100_000, 1_000_000];

/// ns per decision per thread, `threads` threads on their own keys of a fresh table.
fn per_decision<C: Clock + Clone + Sync>(clock: &C, table: usize, threads: usize, decisions: u64) -> f64
where
    Tollgate<C>: KeyedLoops,
{
    let limiter = tollgate(table, clock.clone());
    for key in 0..KEYS_PER_THREAD * threads as u64 {
        assert!(
            limiter.check(&key).is_allowed(),
            "the benchmark quota admits every decision"
        );
    }
    let run: Duration = in_threads(threads, |thread| {
        limiter.decide_in_turn(decisions, thread as u64 * KEYS_PER_THREAD, KEYS_PER_THREAD)
    });
    run.as_nanos() as f64 / decisions as f64
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One clock's rows: every round over every table, then the medians.
fn rows<C: Clock + Clone + Sync>(name: &str, clock: C, rounds: usize, decisions: u64)
where
    Tollgate<C>: KeyedLoops,
{
    let mut scalings = vec![Vec::new(); TABLES.len()];
    for round in 0..rounds {
        for (column, &table) in TABLES.iter().enumerate() {
            let one = per_decision(&clock, table, 1, decisions);
            let two = per_decision(&clock, table, 2, decisions);
            let scaling = 2.0 * one / two;
            scalings[column].push(scaling);
            println!("| {name} | {round} | {table} | {one:.2} | {two:.2} | {scaling:.2}x |");
        }
    }
    for (column, &table) in TABLES.iter().enumerate() {
        println!(
            "| {name} | median | {table} | | | {:.2}x |",
            median(&mut scalings[column])
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(5), |arg| arg.parse())?;
    if rounds == 0 {
        return Err("ROUNDS must be at least 1".into());
    }
    let decisions: u64 = args.next().map_or(Ok(20_000_000), |arg| arg.parse())?;
    println!("| clock | round | table for | ns, 1 thread | ns, 2 threads (each) | 2 threads ÷ 1 |");
    println!("|---|---:|---:|---:|---:|---:|");
    rows("precise", PreciseClock::new(), rounds, decisions);
    rows("coarse", CoarseClock::new(), rounds, decisions);
    Ok(())
}
