//! The workloads of the fleet bench and the request trace each process replays: arrival times
//! (a Poisson process, seeded, so the leased and the exact run of a workload replay the same
//! trace) and, for many keys, each request's key drawn with Zipf popularity.

use std::time::Duration;

/// The processes of the fleet.
pub(crate) const PROCESSES: usize = 4;

/// The hot key's quota: 400 a second with a burst of 400 (one emission slot every 2.5 ms).
pub(crate) const HOT_QUOTA: &str = "400/s burst 400";
/// The quota of each of the 1,000 Zipf keys.
pub(crate) const ZIPF_QUOTA: &str = "50/s burst 50";
/// The Zipf workload's keys.
pub(crate) const ZIPF_KEYS: usize = 1_000;

/// How the requests of a workload arrive.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pattern {
    /// Poisson arrivals at the offered rate, all the time.
    Steady,
    /// Poisson arrivals at the offered rate while on, none while off.
    OnOff { on: Duration, off: Duration },
}

/// One workload: a quota, its keys, what the fleet offers and how.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    /// Its name in the report and the results file.
    pub(crate) name: &'static str,
    /// The token bucket's quota, per key.
    pub(crate) quota: &'static str,
    /// The quota's rate in units per second (the same number as in `quota`).
    pub(crate) rate: f64,
    /// The quota's burst.
    pub(crate) burst: u64,
    /// 1: one hot key; more: keys drawn with Zipf popularity (s = 1).
    pub(crate) keys: usize,
    /// Requests per second the whole fleet offers (while on, for on/off).
    pub(crate) offered: f64,
    pub(crate) pattern: Pattern,
}

impl Workload {
    /// What it offers, described for the report.
    pub(crate) fn pattern_text(&self) -> String {
        let keys = if self.keys == 1 {
            "one key".to_owned()
        } else {
            format!("{} keys, Zipf s = 1", self.keys)
        };
        match self.pattern {
            Pattern::Steady => format!("{keys}, Poisson arrivals"),
            Pattern::OnOff { on, off } => format!(
                "{keys}, Poisson arrivals {} ms on, {} ms off",
                on.as_millis(),
                off.as_millis()
            ),
        }
    }
}

/// Every workload, in the report's order.
pub(crate) fn workloads() -> Vec<Workload> {
    let hot = |name, times: f64| Workload {
        name,
        quota: HOT_QUOTA,
        rate: 400.0,
        burst: 400,
        keys: 1,
        offered: 400.0 * times,
        pattern: Pattern::Steady,
    };
    vec![
        hot("hot key at 0.5x", 0.5),
        hot("hot key at 1x", 1.0),
        hot("hot key at 10x", 10.0),
        // The most popular key gets 1/H(1000) = 13% of the requests, about 5x its quota; the
        // tenth about 0.5x; most keys see a few requests.
        Workload {
            name: "1,000 keys, Zipf",
            quota: ZIPF_QUOTA,
            rate: 50.0,
            burst: 50,
            keys: ZIPF_KEYS,
            offered: 2_000.0,
            pattern: Pattern::Steady,
        },
        // 4x the quota for 250 ms in every second: 1x on average.
        Workload {
            pattern: Pattern::OnOff {
                on: Duration::from_millis(250),
                off: Duration::from_millis(750),
            },
            ..hot("hot key, on/off bursts", 4.0)
        },
    ]
}

/// One request of a process's trace: when (µs after the start) and which key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub(crate) at_us: u64,
    pub(crate) key: usize,
}

/// xorshift64*: a fixed, seeded sequence (no dependency needed for a trace).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        (bits as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// The trace of process `process` for `workload` over `duration`: the same for both runs.
pub(crate) fn trace(
    workload: &Workload,
    workload_index: usize,
    process: usize,
    duration: Duration,
) -> Vec<Arrival> {
    let mut rng = Rng::new(((workload_index as u64) << 8) + process as u64 + 1);
    let per_process = workload.offered / PROCESSES as f64;
    let end = duration.as_micros() as f64;
    // The cumulative Zipf weights of the keys (rank k weighs 1/k).
    let cumulative: Vec<f64> = (1..=workload.keys)
        .scan(0.0, |sum, rank| {
            *sum += 1.0 / rank as f64;
            Some(*sum)
        })
        .collect();
    let total = cumulative.last().copied().unwrap_or(1.0);
    let mut arrivals = Vec::new();
    let mut at = 0.0;
    loop {
        at += -rng.unit().ln() / per_process * 1e6;
        if let Pattern::OnOff { on, off } = workload.pattern {
            let (on, cycle) = (on.as_micros() as f64, (on + off).as_micros() as f64);
            // Arrivals run on the on-phases' time only: skip each off-phase.
            let phase = at % cycle;
            if phase >= on {
                at += cycle - phase;
            }
        }
        if at >= end {
            return arrivals;
        }
        let key = if workload.keys == 1 {
            0
        } else {
            let draw = rng.unit() * total;
            cumulative
                .partition_point(|&sum| sum < draw)
                .min(workload.keys - 1)
        };
        arrivals.push(Arrival {
            at_us: at as u64,
            key,
        });
    }
}
