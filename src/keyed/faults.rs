//! Deliberate flaws for the broken twins of the loom models (`loom-tests/tests/keyed_*.rs`).
//!
//! Each flag removes one step of the table's protocol, so that the models can show loom finds
//! the bug that step prevents. Only `--cfg tollgate_loom` builds can set them; in every other
//! build they are the constant [`Faults::NONE`] and the compiler removes the checks.

/// Steps of the keyed table's protocol that a broken twin leaves out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(tollgate_loom), allow(unreachable_pub, dead_code))]
pub struct Faults {
    /// A claim becomes a member at once, without settling against other claims of its key.
    pub promote_unsettled: bool,
    /// A member may be reclaimed for another key while it still carries debt.
    pub reclaim_busy: bool,
    /// A decision's CAS checks only the state half of the slot, not which key holds it.
    pub update_ignores_key: bool,
    /// A free slot is claimed by a plain store after reading it free, not by CAS.
    pub claim_by_store: bool,
    /// A slot further from the key's home than the home's reach is claimed without raising
    /// the reach first.
    pub claim_out_of_reach: bool,
    /// A kill that fails because its claim changed first (promoted by another thread) counts as
    /// done, so the settle goes on as if the claim were dead.
    pub kill_ignores_failure: bool,
    /// A new key that finds every usable slot claimed for other keys is told the table is full
    /// at once, without waiting for those claims to settle.
    pub no_wait_for_claims: bool,
    /// A new key whose scan chose an `Empty` slot past its used home becomes a member there at
    /// once (the reach raised first), without a claim or a settle, as a key whose home is
    /// `Empty` does.
    pub insert_at_any_empty: bool,
    /// A decision, refund or reset on a member stores its new word over whatever the slot
    /// holds, instead of a CAS from the word it read.
    pub update_by_store: bool,
}

#[cfg_attr(not(tollgate_loom), allow(unreachable_pub))]
impl Faults {
    /// The shipped protocol: no step left out.
    pub const NONE: Faults = Faults {
        promote_unsettled: false,
        reclaim_busy: false,
        update_ignores_key: false,
        claim_by_store: false,
        claim_out_of_reach: false,
        kill_ignores_failure: false,
        no_wait_for_claims: false,
        insert_at_any_empty: false,
        update_by_store: false,
    };
}
