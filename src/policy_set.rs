//! Several policies per request, all or nothing: a request counts against every limiter of a
//! [`PolicySet`] (per key `10/s` and `10000/day`, and a global `50000/s`), and passes only if
//! every one admits it; when one refuses, the units the others took are given back, exactly.
//!
//! - `member`: what the set asks of a limiter ([`SetMember`]): a decision that counts, and
//!   its exact undo ([`Algorithm::undo`](crate::algorithm::Algorithm::undo));
//! - `decision`: the set's answer ([`SetDecision`]);
//! - `error`: a set that cannot be built ([`PolicySetError`]).

mod decision;
mod error;
mod member;

pub use decision::SetDecision;
pub use error::PolicySetError;
pub use member::SetMember;

use std::fmt;

use crate::algorithm::Admission;
use crate::error::CostTooLarge;
use crate::{Decision, Outcome, Timestamp};

/// The most policies one set holds: a decision keeps every policy's answer in a fixed array on
/// the stack, so that it allocates nothing.
pub const MAX_POLICIES: usize = 8;

/// Several limiters, each a named policy, that every request counts against, all or nothing.
///
/// A decision asks the policies in the order they were added, each counting the request if it
/// admits it; at the first refusal it undoes, in reverse order, every admission made so far
/// ([`SetMember::undo`]: exact, for every algorithm, the windows and the log included), and
/// answers that refusal. So a request refused by one policy costs the others nothing (a moment
/// later), and the set never admits what one of its policies refuses.
///
/// ```
/// use tollgate::{DirectLimiter, FixedWindow, KeyedLimiter, ManualClock, PolicySet, TokenBucket};
///
/// let clock = ManualClock::new();
/// let burst = KeyedLimiter::<str, _, _>::with_clock(TokenBucket::new("10/s".parse()?)?, 1_000, clock.clone())?;
/// let daily = KeyedLimiter::<str, _, _>::with_clock(FixedWindow::new("12/d".parse()?)?, 1_000, clock.clone())?;
/// let global = DirectLimiter::with_clock(TokenBucket::new("50000/s".parse()?)?, clock.clone());
/// let set = PolicySet::new("burst", burst)?.and("daily", daily)?.and("global", global)?;
///
/// let first = set.check("alice");
/// assert!(first.is_allowed());
/// assert_eq!(set.name(first.reporting()), "burst"); // 9 left of 10, 11 of 12, 49999 of 50000
/// for _ in 0..9 {
///     assert!(set.check("alice").is_allowed());
/// }
/// let refused = set.check("alice"); // the burst refuses: the daily window's unit is given back
/// assert!(!refused.is_allowed());
/// assert_eq!(set.name(refused.reporting()), "burst");
/// assert_eq!(refused.of(1), None); // the daily window was not asked
/// clock.advance(std::time::Duration::from_secs(1));
/// assert_eq!(set.check("alice").of(1).map(|d| d.remaining()), Some(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Concurrency
/// Each policy decides with its own compare-and-swap (or lock), so two requests racing for the
/// last unit of one policy never both pass it. A request that a later policy refuses holds the
/// units it took from the earlier ones until it gives them back, a moment later: a concurrent
/// request may be refused for those units, and would have been admitted had it come just after.
/// That errs only towards refusing, never towards admitting more than a policy allows.
///
/// The set reads each policy's own clock ([`check`](Self::check)), or one time the caller
/// supplies for all ([`check_at`](Self::check_at)).
pub struct PolicySet<K: ?Sized> {
    policies: Vec<Named<K>>,
}

/// One policy of a set.
struct Named<K: ?Sized> {
    name: String,
    limiter: Box<dyn SetMember<K>>,
}

impl<K: ?Sized> PolicySet<K> {
    /// A set of one policy, `limiter`, named `name`; add the others with [`and`](Self::and).
    ///
    /// # Errors
    /// [`PolicySetError::InvalidName`] when `name` is empty or not printable ASCII (the
    /// `RateLimit` fields write it).
    pub fn new(name: &str, limiter: impl SetMember<K> + 'static) -> Result<PolicySet<K>, PolicySetError> {
        check_name(name)?;
        Ok(PolicySet {
            policies: vec![Named {
                name: name.to_owned(),
                limiter: Box::new(limiter),
            }],
        })
    }

    /// The same set with `limiter` as one more policy, named `name`, asked after the others.
    ///
    /// # Errors
    /// [`PolicySetError`]: the set is full ([`MAX_POLICIES`]), `name` is empty or not printable
    /// ASCII, or another policy has it.
    pub fn and(
        mut self,
        name: &str,
        limiter: impl SetMember<K> + 'static,
    ) -> Result<PolicySet<K>, PolicySetError> {
        if self.policies.len() == MAX_POLICIES {
            return Err(PolicySetError::TooMany { max: MAX_POLICIES });
        }
        check_name(name)?;
        if self.policies.iter().any(|policy| policy.name == name) {
            return Err(PolicySetError::DuplicateName {
                name: name.to_owned(),
            });
        }
        self.policies.push(Named {
            name: name.to_owned(),
            limiter: Box::new(limiter),
        });
        Ok(self)
    }

    /// How many policies it holds.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Always `false`: a set holds at least one policy.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Policy `index`'s name (as given; `""` past the end).
    pub fn name(&self, index: usize) -> &str {
        self.policies.get(index).map_or("", |policy| &policy.name)
    }

    /// Every policy's name, in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.policies.iter().map(|policy| policy.name.as_str())
    }

    /// Policy `index`'s limiter.
    pub fn limiter(&self, index: usize) -> Option<&dyn SetMember<K>> {
        self.policies.get(index).map(|policy| &*policy.limiter)
    }

    /// The heaviest request that can ever pass: the smallest capacity of its policies.
    pub fn capacity(&self) -> u64 {
        self.policies
            .iter()
            .map(|policy| policy.limiter.capacity())
            .min()
            .unwrap_or(0)
    }

    /// How many times its policies' quotas have been changed live, all together.
    pub fn changes(&self) -> u64 {
        self.policies
            .iter()
            .fold(0, |sum, policy| sum.wrapping_add(policy.limiter.changes()))
    }

    /// Decides one request of weight 1 for `key` now (each policy's own clock), counting it
    /// against every policy if all admit it.
    pub fn check(&self, key: &K) -> SetDecision {
        // Every limiter's capacity is at least 1; a capacity lowered live to 0 cannot be.
        self.decide(key, 1, None)
            .unwrap_or_else(|error| self.never(error))
    }

    /// Decides one request of weight `cost` for `key` now, all or nothing.
    ///
    /// # Errors
    /// [`CostTooLarge`] when `cost` exceeds the [capacity](Self::capacity) (checked first:
    /// nothing is counted).
    pub fn check_n(&self, key: &K, cost: u64) -> Result<SetDecision, CostTooLarge> {
        CostTooLarge::check(cost, self.capacity())?;
        self.decide(key, cost, None)
    }

    /// [`check`](Self::check) at a time the caller supplies, for every policy.
    pub fn check_at(&self, key: &K, now: Timestamp) -> SetDecision {
        self.decide(key, 1, Some(now))
            .unwrap_or_else(|error| self.never(error))
    }

    /// [`check_n`](Self::check_n) at a time the caller supplies, for every policy.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    pub fn check_n_at(&self, key: &K, cost: u64, now: Timestamp) -> Result<SetDecision, CostTooLarge> {
        CostTooLarge::check(cost, self.capacity())?;
        self.decide(key, cost, Some(now))
    }

    /// What [`check_n`](Self::check_n) would answer now, counting nothing: every policy
    /// peeked, the first refusal answered.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    pub fn peek_n(&self, key: &K, cost: u64) -> Result<SetDecision, CostTooLarge> {
        self.peek_n_inner(key, cost, None)
    }

    /// [`peek_n`](Self::peek_n) at a time the caller supplies.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    pub fn peek_n_at(&self, key: &K, cost: u64, now: Timestamp) -> Result<SetDecision, CostTooLarge> {
        self.peek_n_inner(key, cost, Some(now))
    }

    fn peek_n_inner(&self, key: &K, cost: u64, now: Option<Timestamp>) -> Result<SetDecision, CostTooLarge> {
        CostTooLarge::check(cost, self.capacity())?;
        let mut decisions = [None; MAX_POLICIES];
        for (index, policy) in self.policies.iter().enumerate() {
            let decision = policy.limiter.peek(key, cost, now)?;
            decisions[index] = Some(decision);
            if !decision.is_allowed() {
                break;
            }
        }
        Ok(SetDecision::new(decisions, self.policies.len()))
    }

    /// The decision: each policy in order, every admission undone, in reverse, at the first
    /// refusal (or error).
    fn decide(&self, key: &K, cost: u64, now: Option<Timestamp>) -> Result<SetDecision, CostTooLarge> {
        let mut decisions = [None; MAX_POLICIES];
        let mut admissions: [Option<Admission>; MAX_POLICIES] = [None; MAX_POLICIES];
        for (index, policy) in self.policies.iter().enumerate() {
            let decided = policy.limiter.decide(key, cost, now);
            let refused = match decided {
                Ok((decision, admission)) => {
                    decisions[index] = Some(decision);
                    // Only a counted admission has units to give back (not an untracked one).
                    if decision.outcome() == Outcome::Allowed {
                        admissions[index] = Some(admission);
                    }
                    (!decision.is_allowed()).then_some(Ok(()))
                }
                // A capacity lowered live since the set's check: nothing of it was counted.
                Err(error) => Some(Err(error)),
            };
            if let Some(refusal) = refused {
                self.undo(key, &admissions[..index]);
                refusal?;
                break;
            }
        }
        Ok(SetDecision::new(decisions, self.policies.len()))
    }

    /// Gives back, in reverse order, the admissions of the first policies.
    fn undo(&self, key: &K, admissions: &[Option<Admission>]) {
        for (policy, admission) in self.policies.iter().zip(admissions).rev() {
            if let Some(admission) = admission {
                policy.limiter.undo(key, admission);
            }
        }
    }

    /// The answer to a weight-1 request a policy's capacity refused (only a capacity lowered
    /// live below 1, which no quota allows): a refusal that never passes.
    #[cold]
    fn never(&self, _: CostTooLarge) -> SetDecision {
        let mut decisions = [None; MAX_POLICIES];
        decisions[0] = Some(Decision::denied(0, u64::MAX, 0));
        SetDecision::new(decisions, self.policies.len())
    }
}

/// `Ok` for a name the `RateLimit` fields can write: printable ASCII, at least one character.
fn check_name(name: &str) -> Result<(), PolicySetError> {
    match !name.is_empty() && name.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        true => Ok(()),
        false => Err(PolicySetError::InvalidName {
            name: name.to_owned(),
        }),
    }
}

impl<K: ?Sized> fmt::Debug for PolicySet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicySet")
            .field(
                "policies",
                &self.policies.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
