//! Shows each of the five algorithms deciding the same traffic on a manual clock, one line per
//! request: a burst of 12 requests at once, then one request every 100 ms for a second, under
//! the quota `10/s burst 5` (the windows get its count and period, `10/s`: they take no burst).
//!
//! Run: `cargo run --example algorithms [QUOTA]`, for example
//! `cargo run --example algorithms "5/s burst 2"`. For the five algorithms compared over whole
//! scenarios, with a guide to choosing one, see `cargo run --release --example compare` and
//! `docs/algorithms.md`.

use std::time::Duration;

use tollgate::algorithm::Algorithm;
use tollgate::{
    Clock, Decision, DirectLimiter, FixedWindow, LeakyBucket, LogLimiter, ManualClock, Quota, SlidingLog,
    SlidingWindow, Timestamp, TokenBucket,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota: Quota = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => "10/s burst 5".parse()?,
    };
    let window_quota = Quota::new(quota.count(), quota.period())?;
    println!("quota {quota} (windows: {window_quota})");
    println!("traffic: 12 requests at t=0.5s, then one every 100 ms until t=1.5s\n");

    direct("token bucket (GCRA)", TokenBucket::new(quota)?);
    direct("leaky bucket (shaper)", LeakyBucket::new(quota)?);
    direct("fixed window", FixedWindow::new(window_quota)?);
    direct("sliding window counter", SlidingWindow::new(window_quota)?);
    let clock = start();
    let log = LogLimiter::with_clock(SlidingLog::new(window_quota)?, clock.clone());
    run("sliding window log (exact)", &clock, || log.check());
    Ok(())
}

/// The traffic's clock, at its first request.
fn start() -> ManualClock {
    ManualClock::starting_at(Timestamp::from_nanos(500_000_000))
}

/// One of the packed algorithms, in a `DirectLimiter`.
fn direct<A: Algorithm>(name: &str, algorithm: A) {
    let clock = start();
    let limiter = DirectLimiter::with_clock(algorithm, clock.clone());
    run(name, &clock, || limiter.check());
}

/// The traffic through `check`, which decides at `clock`'s time.
fn run(name: &str, clock: &ManualClock, check: impl Fn() -> Decision) {
    println!("== {name}");
    let mut admitted = 0;
    for _ in 0..12 {
        admitted += report(clock, check());
    }
    for _ in 0..10 {
        clock.advance(Duration::from_millis(100));
        admitted += report(clock, check());
    }
    println!("   admitted {admitted} of 22\n");
}

fn report(clock: &ManualClock, decision: Decision) -> u32 {
    let at = clock.now().as_nanos() as f64 / 1e9;
    if decision.is_allowed() {
        let delay = match decision.delay() {
            Duration::ZERO => String::new(),
            delay => format!(", waits {delay:?}"),
        };
        println!(
            "   t={at:.3}s  allowed  remaining {:>2}{delay}, full again in {:?}",
            decision.remaining(),
            decision.reset_after()
        );
        1
    } else {
        println!(
            "   t={at:.3}s  DENIED   remaining {:>2}, retry after {:?}",
            decision.remaining(),
            decision.retry_after()
        );
        0
    }
}
