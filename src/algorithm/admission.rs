//! What an admission leaves for its exact undo ([`Algorithm::undo`](super::Algorithm::undo)).

use crate::{Decision, Outcome, Timestamp};

/// One admission a limiter made: when it was decided, its weight, and when its decision said
/// the limiter would be full again. Enough to undo it exactly a moment later
/// ([`Algorithm::undo`](super::Algorithm::undo)): a [`PolicySet`](crate::PolicySet) gives back
/// the units the policies before a refusing one took.
///
/// ```
/// use tollgate::algorithm::{Admission, Algorithm, FRESH_STATE};
/// use tollgate::{FixedWindow, Timestamp};
///
/// let window = FixedWindow::new("10/min".parse()?)?;
/// let now = Timestamp::from_secs(90);
/// let admitted = window.decide(FRESH_STATE, now, 3);
/// let undone = window.undo(admitted.state, &Admission::new(now, 3, &admitted.decision));
/// // The window's 3 units are given back: the next decision is a fresh window's.
/// assert_eq!(window.decide(undone, now, 10).decision, window.decide(FRESH_STATE, now, 10).decision);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Admission {
    at: Timestamp,
    cost: u64,
    end: Timestamp,
}

impl Admission {
    /// The admission of `cost` units decided at `at`, whose `decision` said the limiter would
    /// be full again after its [`reset_after`](Decision::reset_after).
    ///
    /// `at` is the time the limiter decided at: the `now` passed to
    /// [`decide`](super::Algorithm::decide), or, for a sliding log, the time it recorded the
    /// units at (later than the request's own when the clock stepped back). A `decision` that
    /// counted nothing (a refusal, an untracked admission) is an admission of weight 0, whose
    /// undo gives nothing back.
    pub fn new(at: Timestamp, cost: u64, decision: &Decision) -> Admission {
        Admission {
            at,
            cost: match decision.outcome() {
                Outcome::Allowed => cost,
                Outcome::Denied | Outcome::TableFull | Outcome::AllowedUntracked => 0,
            },
            end: at.saturating_add(decision.reset_after()),
        }
    }

    /// When it was decided.
    pub const fn at(&self) -> Timestamp {
        self.at
    }

    /// Its weight: 0 for a decision that counted nothing.
    pub const fn cost(&self) -> u64 {
        self.cost
    }

    /// When its decision said the limiter would be full again: its time plus its reset-after
    /// (a bucket's new TAT; the end of the window a fixed window counted it in; the end of the
    /// window after the one a sliding window counted it in; when a log's newest unit leaves).
    pub const fn end(&self) -> Timestamp {
        self.end
    }
}
