//! A coarse clock whose upkeep thread cannot be spawned reads the precise time, so limiters on it
//! still refill. quanta sets its coarse time before spawning the thread, so after a failed spawn
//! that time would stay frozen: a bucket on it would admit its burst and then nothing, ever (1 of
//! 20 requests spaced 50 ms apart at `100/s burst 1`).
//!
//! No test harness: the harness spawns a thread per test, and the standard library reads
//! `RUST_MIN_STACK` once, at the first spawn. Set here before any thread exists, a minimum stack
//! larger than the address space makes every spawn fail, quanta's upkeep thread's included.

use std::thread;
use std::time::Duration;

use tollgate::{Clock, CoarseClock, DirectLimiter, TokenBucket};

fn main() {
    // No other thread exists yet: nothing can read the environment concurrently.
    std::env::set_var("RUST_MIN_STACK", "1000000000000000");
    assert!(
        thread::Builder::new().spawn(|| ()).is_err(),
        "the test needs thread spawning to fail"
    );

    let clock = CoarseClock::new();
    assert!(
        !clock.is_coarse(),
        "without its upkeep thread the clock reads the precise time"
    );
    let before = clock.now();
    thread::sleep(Duration::from_millis(20));
    let after = clock.now();
    assert!(
        after.as_nanos() - before.as_nanos() >= 20_000_000,
        "the clock advanced {} ns over a 20 ms sleep",
        after.as_nanos() - before.as_nanos()
    );

    let quota = "100/s burst 1".parse().unwrap();
    let limiter = DirectLimiter::with_clock(TokenBucket::new(quota).unwrap(), clock);
    let mut admitted = 0;
    for _ in 0..5 {
        admitted += u32::from(limiter.check().is_allowed());
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        admitted, 5,
        "one request every 20 ms at 100/s burst 1: every one passes"
    );
    println!("coarse clock without upkeep: reads the precise time, 5 of 5 admitted");
}
