//! A policy set that tollgate refuses to build.

use std::fmt;

/// Why a policy could not be added to a [`PolicySet`](super::PolicySet).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicySetError {
    /// The set holds [`MAX_POLICIES`](super::MAX_POLICIES) already: a decision keeps every
    /// policy's answer on the stack, in a fixed array.
    TooMany {
        /// The most a set holds.
        max: usize,
    },
    /// Two policies of one set share a name (the names tell them apart in the decisions and the
    /// `RateLimit` fields).
    DuplicateName {
        /// The name given twice.
        name: String,
    },
    /// A name that is empty or not printable ASCII (the `RateLimit` fields write it as a
    /// structured-field string).
    InvalidName {
        /// The name given.
        name: String,
    },
}

impl fmt::Display for PolicySetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySetError::TooMany { max } => write!(
                f,
                "a policy set holds at most {max} policies; combine limiters of one quota, or decide with two sets"
            ),
            PolicySetError::DuplicateName { name } => write!(
                f,
                "the policy name {name:?} is given twice; give each policy of a set its own name"
            ),
            PolicySetError::InvalidName { name } => write!(
                f,
                "the policy name {name:?} cannot name a policy (use 1 or more printable ASCII characters)"
            ),
        }
    }
}

impl std::error::Error for PolicySetError {}
