//! Checks `loom_tests::Placement`, which the keyed models rely on to put keys where their races
//! happen: with the hash fixed for the process, the home slot it predicts for a key is the one
//! the table uses, and every limiter in the process hashes alike.
//!
//! Observable through `len()`: in a table holding one idle key, a new key whose chain starts at
//! that key's slot reclaims it (the idle member comes before the empty slot that ends the chain),
//! while one whose chain starts at the next, empty, slot takes that slot.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, Placement};
use tollgate::{KeyedLimiter, ManualClock, Quota, TokenBucket};

/// For tables of 2, 3 and 5 slots (1, 2 and 3 keys), and every slot `h`: key `a` (home `h`)
/// takes 1 s of debt at 0; at 1 s it is idle. Then key `b`, also homed at `h`, reclaims `a`'s
/// slot (`len()` stays 1), while key `c`, homed at `h + 1`, takes that empty slot (`len()` 2).
/// Each table is a fresh limiter, so this also checks that limiters hash alike.
#[test]
fn predicted_homes_are_the_tables() -> Result<(), Box<dyn std::error::Error>> {
    let algorithm = TokenBucket::new(Quota::per_second(1)?)?;
    for capacity in 1..=3 {
        let placement = Placement::for_capacity(capacity);
        let slots = placement.slots();
        for home in 0..slots {
            let a = placement.key_at(home, &[]);
            let b = placement.key_at(home, &[a]);
            let c = placement.key_at((home + 1) % slots, &[a, b]);
            // One thread: loom runs the closure once.
            loom::model(move || {
                let fresh = || {
                    KeyedLimiter::<u64, _, _>::with_clock(algorithm, capacity, ManualClock::new())
                        .expect("a valid capacity")
                };
                let limiter = fresh();
                assert_eq!(limiter.slots(), slots, "{capacity} keys");
                assert!(limiter.check_at(&a, ms(0)).is_allowed());
                assert!(limiter.check_at(&b, ms(1000)).is_allowed());
                assert_eq!(
                    limiter.len(),
                    1,
                    "{b} did not reclaim {a}'s slot {home} of {slots}"
                );

                let limiter = fresh();
                assert!(limiter.check_at(&a, ms(0)).is_allowed());
                assert!(limiter.check_at(&c, ms(1000)).is_allowed());
                assert_eq!(
                    limiter.len(),
                    2,
                    "{c} did not take slot {} of {slots}",
                    (home + 1) % slots
                );
            });
        }
    }
    Ok(())
}
