//! Scenario 5's clients: who sends what, drawn from a seeded generator. Floats only decide
//! arrival times; every limiter decides on whole nanoseconds.

use crate::rng::Rng;
use crate::SECOND;

/// The kinds of client, in the order the tables list them.
pub(crate) const CLASSES: [&str; 3] = ["steady (Poisson)", "on/off bursts", "abusive"];

/// How one client sends.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pattern {
    /// A Poisson process at a constant rate.
    Steady {
        /// Mean requests per minute.
        per_minute: f64,
    },
    /// Silent periods (mean [`MEAN_OFF_SECS`]) alternating with bursts (mean
    /// [`MEAN_ON_SECS`]) in which it sends as a Poisson process.
    OnOff {
        /// Mean requests per minute while on.
        per_minute_on: f64,
    },
    /// One client per thousand: a Poisson process far above any limit.
    Abusive {
        /// Mean requests per minute.
        per_minute: f64,
    },
}

/// Mean length of an on/off client's silences.
pub(crate) const MEAN_OFF_SECS: f64 = 90.0;
/// Mean length of an on/off client's bursts.
pub(crate) const MEAN_ON_SECS: f64 = 15.0;
/// The share of on/off clients among the well-behaved ones.
pub(crate) const ON_OFF_SHARE: f64 = 0.3;
/// Steady clients' rates are log-uniform between these (per minute).
pub(crate) const STEADY_RATES: (f64, f64) = (5.0, 130.0);
/// On/off clients' rates while on are uniform between these (per minute).
pub(crate) const BURST_RATES: (f64, f64) = (120.0, 600.0);
/// The abusive clients' rate (per minute).
pub(crate) const ABUSIVE_RATE: f64 = 1_000.0;

/// How each kind of client in [`CLASSES`] sends, in words.
pub(crate) fn describe(class: usize) -> String {
    match class {
        0 => format!("at {:.0}-{:.0}/min, log-uniform", STEADY_RATES.0, STEADY_RATES.1),
        1 => format!(
            "at {:.0}-{:.0}/min for {MEAN_ON_SECS:.0} s, then {MEAN_OFF_SECS:.0} s off (means)",
            BURST_RATES.0, BURST_RATES.1
        ),
        _ => format!("at {ABUSIVE_RATE:.0}/min"),
    }
}

impl Pattern {
    /// Client number `client`'s pattern: every thousandth is abusive, the others steady or
    /// on/off at random.
    pub(crate) fn for_client(client: u64, rng: &mut Rng) -> Pattern {
        if client % 1000 == 999 {
            Pattern::Abusive {
                per_minute: ABUSIVE_RATE,
            }
        } else if rng.unit() <= ON_OFF_SHARE {
            Pattern::OnOff {
                per_minute_on: rng.between(BURST_RATES.0, BURST_RATES.1),
            }
        } else {
            let (low, high) = STEADY_RATES;
            Pattern::Steady {
                per_minute: low * (high / low).powf(1.0 - rng.unit()),
            }
        }
    }

    /// The index of its kind in [`CLASSES`].
    pub(crate) fn class(self) -> usize {
        match self {
            Pattern::Steady { .. } => 0,
            Pattern::OnOff { .. } => 1,
            Pattern::Abusive { .. } => 2,
        }
    }

    /// Fills `arrivals` with this client's request times in `[start, start + duration)`, in
    /// increasing order.
    pub(crate) fn arrivals(self, rng: &mut Rng, start: u64, duration: u64, arrivals: &mut Vec<u64>) {
        arrivals.clear();
        let end = start + duration;
        let gap = |per_minute: f64| 60.0 * SECOND as f64 / per_minute;
        match self {
            Pattern::Steady { per_minute } | Pattern::Abusive { per_minute } => {
                let mut at = start + rng.exponential_nanos(gap(per_minute));
                while at < end {
                    arrivals.push(at);
                    at += rng.exponential_nanos(gap(per_minute));
                }
            }
            Pattern::OnOff { per_minute_on } => {
                let mut at = start + rng.exponential_nanos(MEAN_OFF_SECS * SECOND as f64);
                while at < end {
                    let burst_end = at + rng.exponential_nanos(MEAN_ON_SECS * SECOND as f64);
                    at += rng.exponential_nanos(gap(per_minute_on));
                    while at < burst_end.min(end) {
                        arrivals.push(at);
                        at += rng.exponential_nanos(gap(per_minute_on));
                    }
                    at = burst_end + rng.exponential_nanos(MEAN_OFF_SECS * SECOND as f64);
                }
            }
        }
    }
}
