//! Resident memory per key of a keyed limiter holding 1,000,000 live keys.
//!
//! One limiter per process, chosen by the argument, so that allocator state never mixes:
//!
//! ```text
//! cargo run -p tollgate-peers --release --bin keyed_memory -- tollgate
//! cargo run -p tollgate-peers --release --bin keyed_memory -- governor
//! cargo run -p tollgate-peers --release --bin keyed_memory -- governor-unsized
//! ```
//!
//! RSS (`VmRSS` in `/proc/self/status`, Linux only) is read before the limiter is built, after
//! it is built, and after every key has been decided once (each key then carries a second of
//! debt, so none is idle). tollgate allocates and writes its whole table at construction;
//! governor's DashMap (`governor` pre-sized for the keys, `governor-unsized` grown from empty)
//! touches its pages as keys arrive. Bytes per key = (RSS after filling - RSS before) / keys.

use std::hint::black_box;
use std::process::ExitCode;

use tollgate::PreciseClock;
use tollgate_peers::Keyed;

const KEYS: u64 = 1_000_000;

/// The resident set size of this process, in bytes.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status is readable (Linux)");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("/proc/self/status has a VmRSS line");
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .expect("VmRSS is a number of kB");
    kib * 1024
}

/// Builds a limiter with `build`, fills it with `KEYS` keys, prints the RSS it added and returns
/// it (still live).
fn measure<L: Keyed>(name: &str, build: impl FnOnce() -> L) -> L {
    let before = rss_bytes();
    let limiter = build();
    let built = rss_bytes();
    for key in 0..KEYS {
        let answer = limiter.check(black_box(&key));
        assert!(
            L::admitted(&answer),
            "{name}: key {key} must be admitted and tracked"
        );
    }
    assert_eq!(limiter.keys() as u64, KEYS, "{name}: every key must be live");
    let filled = rss_bytes();
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    println!("{name}: {KEYS} live keys");
    println!("  RSS before building  {:>9.1} MiB", mib(before));
    println!(
        "  RSS after building   {:>9.1} MiB  (+{:.1} MiB)",
        mib(built),
        mib(built.saturating_sub(before))
    );
    println!(
        "  RSS after filling    {:>9.1} MiB  (+{:.1} MiB)",
        mib(filled),
        mib(filled.saturating_sub(before))
    );
    println!(
        "  bytes per key        {:>9.1}",
        filled.saturating_sub(before) as f64 / KEYS as f64
    );
    limiter
}

fn main() -> ExitCode {
    // Clocks are made (and quanta calibrated) before the first RSS reading.
    let which = std::env::args().nth(1).unwrap_or_default();
    match which.as_str() {
        "tollgate" => {
            let clock = PreciseClock::new();
            let limiter = measure("tollgate", || tollgate_peers::tollgate(KEYS as usize, clock));
            println!(
                "  (table: {} slots of 16 bytes = {:.1} bytes per key at capacity)",
                limiter.slots(),
                (limiter.slots() * 16) as f64 / KEYS as f64
            );
        }
        "governor" => {
            let clock = governor::clock::QuantaClock::default();
            let limiter = measure("governor (DashMap pre-sized)", || {
                tollgate_peers::governor(KEYS as usize, clock)
            });
            drop(black_box(limiter));
        }
        "governor-unsized" => {
            let clock = governor::clock::QuantaClock::default();
            let limiter = measure("governor (DashMap grown from empty)", || {
                tollgate_peers::governor_unsized(clock)
            });
            drop(black_box(limiter));
        }
        _ => {
            eprintln!("usage: keyed_memory tollgate|governor|governor-unsized");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
