//! The fleet's admissions against the token bucket's bound: in every interval [t, t + W) one
//! key admits at most `burst + W / interval` (GCRA: after n admissions from t the key's TAT is
//! at least t + n * interval, and one more needs the TAT within `burst - 1` intervals of now).
//!
//! Each admission is known by the interval [sent, done] of the system clock within which it was
//! decided (Redis's `TIME` and every process read the same clock on one machine; a lease's local
//! decision has sent = done within microseconds). An interval counts only when it lies wholly in
//! [t, t + W): the count is then at most the true one, so any excess is a certain
//! over-admission, with no clock-skew allowance to state (the check can only miss an excess
//! hidden among decisions that straddle an interval's ends; `max_decision_us` in the results
//! says how long the longest took).

/// An admission: its key and the interval [sent, done] it was decided in, µs since the epoch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Admission {
    pub(crate) key: usize,
    pub(crate) sent: u64,
    pub(crate) done: u64,
}

/// The worst interval of one length: admitted in it less what the quota allows there.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Worst {
    /// Admitted minus allowed (negative: that much under the bound).
    pub(crate) excess: i64,
    /// The interval's length, ms.
    pub(crate) window_ms: u64,
    /// Admitted in it.
    pub(crate) admitted: u64,
    /// What the bound allows in it.
    pub(crate) allowed: u64,
}

/// The interval lengths checked, ms: a tenth of the quota's period and the period itself.
pub(crate) const WINDOWS_MS: [u64; 2] = [100, 1_000];

/// The worst interval over every key and every length of [`WINDOWS_MS`].
pub(crate) fn worst(admissions: &[Admission], rate: f64, burst: u64) -> Option<Worst> {
    let mut by_key: Vec<Vec<(u64, u64)>> = Vec::new();
    for admission in admissions {
        if by_key.len() <= admission.key {
            by_key.resize_with(admission.key + 1, Vec::new);
        }
        by_key[admission.key].push((admission.sent, admission.done));
    }
    let mut found: Option<Worst> = None;
    for mut intervals in by_key.into_iter().filter(|intervals| !intervals.is_empty()) {
        intervals.sort_unstable();
        for window_ms in WINDOWS_MS {
            let width = window_ms * 1_000;
            // `burst + W / interval`, W / interval = W * rate (whole units).
            let allowed = burst + (window_ms as f64 * rate / 1_000.0).floor() as u64;
            // The largest count is reached with t at some admission's `sent`.
            for (first, &(start, _)) in intervals.iter().enumerate() {
                let admitted = intervals[first..]
                    .iter()
                    .take_while(|&&(sent, _)| sent < start + width)
                    .filter(|&&(_, done)| done < start + width)
                    .count() as u64;
                let excess = admitted as i64 - allowed as i64;
                if found.is_none_or(|worst| excess > worst.excess) {
                    found = Some(Worst {
                        excess,
                        window_ms,
                        admitted,
                        allowed,
                    });
                }
            }
        }
    }
    found
}
