//! The quota a limiter announces in the `RateLimit-Policy` field.

use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::{FixedWindow, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket};

/// A quota as the IETF RateLimit fields state it (draft-ietf-httpapi-ratelimit-headers):
/// `quota` units per `window`, written `q` and `w` (`w` in whole seconds, rounded up).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// `q`: the units the policy allows per window.
    pub quota: u64,
    /// `w`: the window.
    pub window: Duration,
}

/// An algorithm whose parameters can be announced as a [`Policy`].
///
/// - Windows ([`FixedWindow`], [`SlidingWindow`], [`SlidingLog`]): `limit` per window.
/// - Buckets ([`TokenBucket`], [`LeakyBucket`]): `burst` per the time an empty bucket takes to
///   fill again (`burst * period / count`): `"100/min"` is `q=100;w=60`, `"10/s burst 20"` is
///   `q=20;w=2`.
pub trait AnnouncedPolicy {
    /// The policy this algorithm enforces.
    fn policy(&self) -> Policy;
}

/// `burst` units per `burst` emission intervals (validated at construction to fit a `u64`).
fn bucket_policy(burst: u64, interval: Duration) -> Policy {
    let interval = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
    Policy {
        quota: burst,
        window: Duration::from_nanos(burst.saturating_mul(interval)),
    }
}

impl AnnouncedPolicy for TokenBucket {
    fn policy(&self) -> Policy {
        bucket_policy(self.capacity(), self.emission_interval())
    }
}

impl AnnouncedPolicy for LeakyBucket {
    fn policy(&self) -> Policy {
        bucket_policy(self.capacity(), self.emission_interval())
    }
}

impl AnnouncedPolicy for FixedWindow {
    fn policy(&self) -> Policy {
        Policy {
            quota: self.limit(),
            window: self.window(),
        }
    }
}

impl AnnouncedPolicy for SlidingWindow {
    fn policy(&self) -> Policy {
        Policy {
            quota: self.limit(),
            window: self.window(),
        }
    }
}

impl AnnouncedPolicy for SlidingLog {
    fn policy(&self) -> Policy {
        Policy {
            quota: self.limit(),
            window: self.window(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_algorithm_announces_its_quota() -> Result<(), Box<dyn std::error::Error>> {
        let minute = Duration::from_secs(60);
        assert_eq!(
            TokenBucket::new("100/min".parse()?)?.policy(),
            Policy {
                quota: 100,
                window: minute
            }
        );
        assert_eq!(
            LeakyBucket::new("10/s burst 20".parse()?)?.policy(),
            Policy {
                quota: 20,
                window: Duration::from_secs(2)
            }
        );
        assert_eq!(
            FixedWindow::new("100/min".parse()?)?.policy(),
            Policy {
                quota: 100,
                window: minute
            }
        );
        assert_eq!(
            SlidingWindow::new("7/250ms".parse()?)?.policy(),
            Policy {
                quota: 7,
                window: Duration::from_millis(250)
            }
        );
        assert_eq!(
            SlidingLog::new("5/10s".parse()?)?.policy(),
            Policy {
                quota: 5,
                window: Duration::from_secs(10)
            }
        );
        Ok(())
    }
}
