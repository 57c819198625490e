//! What a policy set answers: the request's one decision, and each policy's own.

use std::fmt;

use super::MAX_POLICIES;
use crate::{Decision, Outcome};

/// The answer of a [`PolicySet`](super::PolicySet): whether the request passes every policy,
/// the decision to tell the client ([`decision`](Self::decision)), which policy it comes from
/// ([`reporting`](Self::reporting)), and each policy's own decision ([`of`](Self::of)).
///
/// - **Refused**: by the first policy (in the set's order) that refused; the policies after it
///   were not asked (their decision is `None`), and the units the policies before it took were
///   given back. [`decision`](Self::decision) is the refusing policy's own.
/// - **Admitted** by every policy: [`reporting`](Self::reporting) is the policy nearest to
///   refusal, the one with the fewest units remaining (the first of those that tie), and
///   [`decision`](Self::decision) is its own, with the longest delay any policy gave (a shaper
///   in the set makes the whole request wait for its slot).
#[derive(Clone, Copy)]
pub struct SetDecision {
    decisions: [Option<Decision>; MAX_POLICIES],
    len: usize,
    reporting: usize,
    decision: Decision,
}

impl SetDecision {
    /// The answer of the policies `decisions[..len]`, decided in order: every one admitted, or
    /// the last one refused (the ones after it not asked).
    pub(crate) fn new(decisions: [Option<Decision>; MAX_POLICIES], len: usize) -> SetDecision {
        let asked = || {
            decisions[..len]
                .iter()
                .enumerate()
                .filter_map(|(i, d)| Some((i, (*d)?)))
        };
        match asked().find(|(_, decision)| !decision.is_allowed()) {
            Some((reporting, decision)) => SetDecision {
                decisions,
                len,
                reporting,
                decision,
            },
            None => {
                // Every policy admitted: the fewest remaining, the first of a tie.
                let (reporting, nearest) = asked()
                    .min_by_key(|(i, decision)| (decision.remaining(), *i))
                    .unwrap_or((0, Decision::table_full(0)));
                let delay = asked()
                    .map(|(_, decision)| decision.delay())
                    .max()
                    .unwrap_or_default();
                let delay = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
                SetDecision {
                    decisions,
                    len,
                    reporting,
                    decision: nearest.with_delay(delay),
                }
            }
        }
    }

    /// The decision to tell the client: the refusing policy's, or (admitted) the one nearest to
    /// refusal's, with the longest delay any policy gave.
    pub const fn decision(&self) -> Decision {
        self.decision
    }

    /// `true` when every policy admitted the request.
    pub const fn is_allowed(&self) -> bool {
        self.decision.is_allowed()
    }

    /// Why the request passes or not: the [`decision`](Self::decision)'s outcome.
    pub const fn outcome(&self) -> Outcome {
        self.decision.outcome()
    }

    /// Which policy (its index in the set) the [`decision`](Self::decision) comes from: the
    /// refusing one, or the one nearest to refusal.
    pub const fn reporting(&self) -> usize {
        self.reporting
    }

    /// Policy `index`'s own decision: `None` for a policy after a refusing one (not asked) or
    /// past the set's end.
    pub fn of(&self, index: usize) -> Option<Decision> {
        self.decisions[..self.len].get(index).copied().flatten()
    }

    /// Every policy's own decision, in the set's order (`None`: not asked).
    pub fn policies(&self) -> impl ExactSizeIterator<Item = Option<Decision>> + '_ {
        self.decisions[..self.len].iter().copied()
    }
}

impl fmt::Debug for SetDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetDecision")
            .field("decision", &self.decision)
            .field("reporting", &self.reporting)
            .field("policies", &&self.decisions[..self.len])
            .finish()
    }
}
