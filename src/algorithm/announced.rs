//! The policy each of the crate's algorithms announces (feature `tower`): what the tower layer
//! states in its `RateLimit-Policy` field ([`AnnouncedPolicy`]).

use super::{FixedWindow, LeakyBucket, SlidingWindow, TokenBucket};
use crate::policy::{bucket_policy, AnnouncedPolicy, Policy, Refill};

impl AnnouncedPolicy for TokenBucket {
    fn policy(&self) -> Policy {
        bucket_policy(self.quota(), self.emission_interval(), false)
    }
}

impl AnnouncedPolicy for LeakyBucket {
    fn policy(&self) -> Policy {
        bucket_policy(self.quota(), self.emission_interval(), true)
    }
}

impl AnnouncedPolicy for FixedWindow {
    fn policy(&self) -> Policy {
        Policy {
            refill: Refill::AtWindowEnd,
            ..Policy::new(self.limit(), self.window())
        }
    }
}

impl AnnouncedPolicy for SlidingWindow {
    fn policy(&self) -> Policy {
        Policy {
            refill: Refill::Sliding,
            ..Policy::new(self.limit(), self.window())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::ExactWindow;

    #[test]
    fn each_algorithm_announces_its_quota() -> Result<(), Box<dyn std::error::Error>> {
        let minute = Duration::from_secs(60);
        assert_eq!(
            TokenBucket::new("100/min".parse()?)?.policy(),
            Policy {
                quota: 100,
                window: minute,
                refill: Refill::Steady {
                    interval: Duration::from_millis(600),
                    shaped: false,
                },
                exact: ExactWindow::of(minute),
            }
        );
        assert_eq!(
            LeakyBucket::new("10/s burst 20".parse()?)?.policy(),
            Policy {
                quota: 20,
                window: Duration::from_secs(2),
                refill: Refill::Steady {
                    interval: Duration::from_millis(100),
                    shaped: true,
                },
                exact: ExactWindow::of(Duration::from_secs(2)),
            }
        );
        assert_eq!(
            FixedWindow::new("100/min".parse()?)?.policy(),
            Policy {
                quota: 100,
                window: minute,
                refill: Refill::AtWindowEnd,
                exact: ExactWindow::of(minute),
            }
        );
        assert_eq!(
            SlidingWindow::new("7/250ms".parse()?)?.policy(),
            Policy {
                refill: Refill::Sliding,
                ..Policy::new(7, Duration::from_millis(250))
            }
        );
        Ok(())
    }
}
