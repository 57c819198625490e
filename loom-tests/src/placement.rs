//! Where keys land in a keyed table: deterministic hashing for loom, and keys chosen by home slot.
//!
//! # Why the hash must be fixed
//! `KeyedLimiter::with_clock` seeds its hasher with `ahash::RandomState::new()`, which mixes a
//! per-instance counter into the hash seed: every limiter, so every loom execution (each builds its
//! own limiter), would put the same keys in other slots and scan the table in another order.
//! loom needs each execution to make the same choices as the one it replays, or it explores a
//! space that is not the model's (and stops with "Is the model fully deterministic?"). So the
//! keyed models install, once per process and before any limiter is built, an ahash
//! `RandomSource` that always gives the same seed ([`deterministic_hashing`]): every limiter in
//! the process then hashes alike. (ahash's fixed keys still come from the OS once per process,
//! so which slot is home to which key changes from run to run: hence [`Placement`].)
//!
//! # Why models choose keys by home slot
//! The races worth modelling need keys in given places: two keys whose chains start at the same
//! slot, a key whose home is the slot a filler key holds. [`Placement`] computes a key's home
//! the way `KeyedLimiter::locate` does (one shard, since these tables are far below the 1,024
//! slots a second shard needs; the rotated hash scaled to the shard's length) with a hasher
//! seeded the same way, and finds keys with the home a model asks for. `tests/keyed_placement.rs`
//! checks these predictions against what the table does.

use std::sync::Once;

use ahash::random_state::{set_random_source, RandomSource};
use ahash::RandomState;

/// The hash seed every `ahash::RandomState::new()` in the process gets once
/// [`deterministic_hashing`] has run.
const SEED: usize = 0x7011_6a7e;

/// An ahash source of "randomness" that always gives [`SEED`].
struct FixedSeed;

impl RandomSource for FixedSeed {
    fn gen_hasher_seed(&self) -> usize {
        SEED
    }
}

/// Makes every `KeyedLimiter` (every `ahash::RandomState::new()`) built from now on in this
/// process hash keys alike. Idempotent; every entry point of the keyed harness calls it first.
///
/// # Panics
/// When some `ahash::RandomState` was created in this process before the first call (its random
/// source is then fixed to ahash's default and cannot be replaced).
pub fn deterministic_hashing() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if set_random_source(FixedSeed).is_err() {
            panic!(
                "an ahash RandomState was created before the keyed models fixed the hash seed: \
                 call loom_tests::deterministic_hashing() before building any KeyedLimiter"
            );
        }
    });
}

/// Keys per slot the table is sized for, as in `src/keyed.rs`: `n` keys get `ceil(n * 10 / 7)`
/// slots.
const LOAD_NUMERATOR: usize = 7;
const LOAD_DENOMINATOR: usize = 10;
/// The smallest table with a second shard, as in `src/keyed.rs` (`MIN_SHARD_SLOTS * 2`).
const TWO_SHARDS: usize = 2 * 1024;

/// The slots of a keyed table built for `capacity` keys, and the home slot of each key in it.
#[derive(Clone, Debug)]
pub struct Placement {
    slots: usize,
    hasher: RandomState,
}

impl Placement {
    /// The placement in a table for `capacity` keys (a `KeyedLimiter<u64, _, _>`).
    ///
    /// # Panics
    /// When the table would have more than one shard (the models use tiny tables only).
    pub fn for_capacity(capacity: usize) -> Placement {
        deterministic_hashing();
        let slots = (capacity * LOAD_DENOMINATOR).div_ceil(LOAD_NUMERATOR);
        assert!(
            (1..TWO_SHARDS).contains(&slots),
            "{capacity} keys: not a one-shard table"
        );
        Placement {
            slots,
            hasher: RandomState::new(),
        }
    }

    /// Slots in the table (`KeyedLimiter::slots()`).
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The slot where `key`'s probe chain starts.
    pub fn home(&self, key: u64) -> usize {
        // Hashed as `KeyedLimiter::locate` hashes it, a `&u64` (`K = u64`, `key: &K`): the very
        // call, whatever ahash does with the type.
        #[allow(clippy::needless_borrows_for_generic_args)]
        let hash = self.hasher.hash_one(&key);
        ((u128::from(hash.rotate_left(32)) * self.slots as u128) >> 64) as usize
    }

    /// The first key, counting from 1, whose home is `home` and that is none of `others`.
    ///
    /// # Panics
    /// When `home` is not a slot of the table.
    pub fn key_at(&self, home: usize, others: &[u64]) -> u64 {
        assert!(home < self.slots, "slot {home} of {}", self.slots);
        (1..)
            .find(|key| self.home(*key) == home && !others.contains(key))
            .expect("some key has every home")
    }
}
