//! loom models of the 128-bit state in a [`DirectLimiter`](tollgate::DirectLimiter): its
//! compare-and-swap loop on the 16-byte word (`cell::update_wide`), reached from the 64-bit one
//! through the window's general path, or through a bucket's weightless branch (the token
//! bucket's or the shaper's, at a rate whole nanoseconds cannot hold, kept exactly). Each with a
//! broken twin loom must reject. Quotas: 2 per 1 s window, built wide (`with_wide_state`, the
//! layout of a limit too large for one word); 3 per 10 ns, burst 3, for the buckets.
//!
//! Invariant of every model here (see `loom_tests::Model`): in every execution, the threads'
//! decisions and the final 128-bit state are those of some sequential order of the same
//! requests, replayed with the pure `decide_wide`. So no over-admission, and no lost update.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, Model, RacyWideLimiter, Request, Shipped};
use tollgate::algorithm::Algorithm;
use tollgate::{FixedWindow, LeakyBucket, Quota, SlidingWindow, TokenBucket};

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

fn sliding() -> std::result::Result<SlidingWindow, Box<dyn std::error::Error>> {
    let window = SlidingWindow::new(Quota::per_second(2)?)?.with_wide_state();
    assert!(window.is_wide());
    Ok(window)
}

/// After one request at 0.5 s (window 0), requests at 1.0 s and 1.5 s (window 1): whichever
/// comes first passes and the other is refused (the previous window still weighs 1, then 0.5).
/// The one at 1.0 s, first, moves the state to window 1.
fn sliding_two_threads() -> std::result::Result<Model<SlidingWindow>, Box<dyn std::error::Error>> {
    let model = Model::new(sliding()?)
        .setup(&[Request::at(ms(500))])
        .thread(&[Request::at(ms(1000))])
        .thread(&[Request::at(ms(1500))]);
    assert_eq!(model.admitted_totals(), [1]);
    Ok(model)
}

/// Requests at 0.5 s and 0.9 s (window 0) and 1.2 s (window 1): two pass in every order.
fn sliding_three_threads() -> std::result::Result<Model<SlidingWindow>, Box<dyn std::error::Error>> {
    let model = Model::new(sliding()?)
        .thread(&[Request::at(ms(500))])
        .thread(&[Request::at(ms(900))])
        .thread(&[Request::at(ms(1200))]);
    assert_eq!(model.admitted_totals(), [2]);
    Ok(model)
}

/// A fixed window of 3, wide: two threads ask for 2 units each at 0.5 s; one passes.
fn fixed_two_threads() -> std::result::Result<Model<FixedWindow>, Box<dyn std::error::Error>> {
    let window = FixedWindow::new(Quota::per_second(3)?)?.with_wide_state();
    let model = Model::new(window)
        .thread(&[Request::weighted(2, ms(500))])
        .thread(&[Request::weighted(2, ms(500))]);
    assert_eq!(model.admitted_totals(), [1]);
    Ok(model)
}

/// A token bucket of 3 per 10 ns, burst 3 (wide): two threads ask for 2 units each at the same
/// instant; one passes.
fn bucket_two_threads() -> std::result::Result<Model<TokenBucket>, Box<dyn std::error::Error>> {
    let bucket = TokenBucket::new(Quota::new(3, std::time::Duration::from_nanos(10))?.with_burst(3)?)?;
    assert!(bucket.is_wide());
    let model = Model::new(bucket)
        .thread(&[Request::weighted(2, ms(500))])
        .thread(&[Request::weighted(2, ms(500))]);
    assert_eq!(model.admitted_totals(), [1]);
    Ok(model)
}

/// A shaper of 3 per 10 ns, burst 3 (wide): two threads ask for 2 units each at the same
/// instant; one is given its slot at once, the other is refused (its slots would pass the
/// queue's room).
fn shaper_two_threads() -> std::result::Result<Model<LeakyBucket>, Box<dyn std::error::Error>> {
    let shaper = LeakyBucket::new(Quota::new(3, std::time::Duration::from_nanos(10))?.with_burst(3)?)?;
    assert!(shaper.is_wide());
    let model = Model::new(shaper)
        .thread(&[Request::weighted(2, ms(500))])
        .thread(&[Request::weighted(2, ms(500))]);
    assert_eq!(model.admitted_totals(), [1]);
    Ok(model)
}

/// The shipped limiter: every execution decides as some sequential order.
#[test]
fn wide_sliding_two_threads_decide_as_some_sequential_order() -> Result {
    sliding_two_threads()?.check::<Shipped<SlidingWindow>>();
    Ok(())
}

/// Its broken twin: the 128-bit state loaded, decided, then stored (no compare-and-swap).
#[test]
fn wide_sliding_two_threads_racy_twin_is_rejected() -> Result {
    sliding_two_threads()?.assert_rejected::<RacyWideLimiter<SlidingWindow>>();
    Ok(())
}

#[test]
fn wide_sliding_three_threads_decide_as_some_sequential_order() -> Result {
    sliding_three_threads()?.check::<Shipped<SlidingWindow>>();
    Ok(())
}

#[test]
fn wide_sliding_three_threads_racy_twin_is_rejected() -> Result {
    sliding_three_threads()?.assert_rejected::<RacyWideLimiter<SlidingWindow>>();
    Ok(())
}

#[test]
fn wide_fixed_two_threads_decide_as_some_sequential_order() -> Result {
    fixed_two_threads()?.check::<Shipped<FixedWindow>>();
    Ok(())
}

#[test]
fn wide_fixed_two_threads_racy_twin_is_rejected() -> Result {
    fixed_two_threads()?.assert_rejected::<RacyWideLimiter<FixedWindow>>();
    Ok(())
}

#[test]
fn wide_bucket_two_threads_decide_as_some_sequential_order() -> Result {
    bucket_two_threads()?.check::<Shipped<TokenBucket>>();
    Ok(())
}

#[test]
fn wide_bucket_two_threads_racy_twin_is_rejected() -> Result {
    bucket_two_threads()?.assert_rejected::<RacyWideLimiter<TokenBucket>>();
    Ok(())
}

#[test]
fn wide_shaper_two_threads_decide_as_some_sequential_order() -> Result {
    shaper_two_threads()?.check::<Shipped<LeakyBucket>>();
    Ok(())
}

#[test]
fn wide_shaper_two_threads_racy_twin_is_rejected() -> Result {
    shaper_two_threads()?.assert_rejected::<RacyWideLimiter<LeakyBucket>>();
    Ok(())
}
