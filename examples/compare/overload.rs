//! Scenario 3, steady overload: every algorithm allows `600/min` (10 per second); one client
//! sends 20 per second (one request every 50 ms) for 5 minutes. The requests admitted in each
//! second show how evenly each algorithm spreads what it admits.

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Lineup, NAMES, SHAPER};
use crate::svg::{Series, StackedChart, COLOURS};
use crate::table::{paragraph, Table};
use crate::{Picture, BASE, SECOND};

/// The traffic starts 20 s into a minute, so that windows do not begin with it.
const OFFSET: u64 = 20 * SECOND;
const SPACING: u64 = 50_000_000;
const DURATION_SECS: u64 = 300;
/// Steady state: after the buckets' burst and the first window are spent.
const STEADY_FROM: usize = 60;
/// The shaper's last departures come up to a minute after the traffic stops.
const SHOWN_SECS: usize = 360;

/// One row of the table: requests admitted per second.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Smoothness {
    /// Over the whole run.
    pub(crate) admitted: u64,
    /// Mean per second, in the steady state.
    pub(crate) mean: f64,
    /// Standard deviation per second, in the steady state.
    pub(crate) std_dev: f64,
    /// The fewest in one second, in the steady state.
    pub(crate) min: u64,
    /// The most in one second, in the steady state.
    pub(crate) max: u64,
    /// Seconds with nothing admitted, in the steady state.
    pub(crate) zero_seconds: usize,
    /// The most in any second of the run.
    pub(crate) peak: u64,
}

impl Smoothness {
    /// The statistics of per-second counts.
    fn of(counts: &[u64]) -> Smoothness {
        let steady = &counts[STEADY_FROM..DURATION_SECS as usize];
        let mean = steady.iter().sum::<u64>() as f64 / steady.len() as f64;
        let variance = steady.iter().map(|c| (*c as f64 - mean).powi(2)).sum::<f64>() / steady.len() as f64;
        Smoothness {
            admitted: counts.iter().sum(),
            mean,
            std_dev: variance.sqrt(),
            min: steady.iter().min().copied().unwrap_or(0),
            max: steady.iter().max().copied().unwrap_or(0),
            zero_seconds: steady.iter().filter(|c| **c == 0).count(),
            peak: counts.iter().max().copied().unwrap_or(0),
        }
    }
}

/// What the closing guide cites from this scenario.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// Each algorithm by decision time.
    pub(crate) decided: [Smoothness; 5],
    /// The shaper by the time its requests proceed.
    pub(crate) shaper_departures: Smoothness,
    /// Seconds in the steady state.
    pub(crate) steady_seconds: usize,
}

/// Runs the scenario, prints its table and returns its picture.
pub(crate) fn run() -> Result<(Picture, Summary), Box<dyn Error>> {
    let quota: Quota = "600/min".parse()?;
    let sent = DURATION_SECS * SECOND / SPACING;
    println!("## Scenario 3: steady overload\n");
    paragraph(&format!(
        "Every algorithm allows `{quota}`, {} per second (buckets: burst {}). One client sends a \
         request every {} ms, twice that rate, for {DURATION_SECS} s, starting {} s into a minute. It \
         shows how evenly each algorithm spreads what it admits.",
        quota.count() * SECOND / quota.period().as_nanos() as u64,
        quota.burst(),
        SPACING / 1_000_000,
        OFFSET / SECOND,
    ));
    let start = BASE + OFFSET;
    let clock = ManualClock::starting_at(Timestamp::from_nanos(start));
    let lineup = Lineup::new(quota, quota, &clock)?;
    // Admitted per second of decision time; for the shaper also per second of departure.
    let mut per_second = [[0u64; SHOWN_SECS]; 5];
    let mut departures = [0u64; SHOWN_SECS];
    for i in 0..sent {
        let offset = i * SPACING;
        clock.set(Timestamp::from_nanos(start + offset));
        for (a, answer) in lineup.check().iter().enumerate() {
            if answer.allowed {
                per_second[a][(offset / SECOND) as usize] += 1;
                if a == SHAPER {
                    let second = ((offset + answer.delay_nanos) / SECOND) as usize;
                    departures[second.min(SHOWN_SECS - 1)] += 1;
                }
            }
        }
    }
    let mut table = Table::new(&[
        "algorithm",
        "admitted",
        "mean/s",
        "std dev",
        "min",
        "max",
        "empty s",
        "peak",
    ]);
    let mut rows: Vec<(String, &[u64])> = NAMES
        .iter()
        .enumerate()
        .map(|(a, n)| (n.to_string(), &per_second[a][..]))
        .collect();
    rows.insert(
        SHAPER + 1,
        ("leaky bucket, by departure".to_string(), &departures[..]),
    );
    for (name, counts) in &rows {
        let stats = Smoothness::of(counts);
        table.row(vec![
            name.clone(),
            stats.admitted.to_string(),
            format!("{:.2}", stats.mean),
            format!("{:.2}", stats.std_dev),
            stats.min.to_string(),
            stats.max.to_string(),
            stats.zero_seconds.to_string(),
            stats.peak.to_string(),
        ]);
    }
    table.print();
    paragraph(&format!(
        "admitted: of the {sent} sent. mean/s, std dev, min, max: requests admitted per second over \
         seconds {STEADY_FROM} to {DURATION_SECS}, after the first window and the buckets' initial \
         burst; empty s: seconds in that span with none admitted; peak: the most admitted in any \
         second of the run. The shaper decides at once but its requests proceed later: its second \
         row counts them by the second in which they proceed."
    ));
    let summary = Summary {
        decided: std::array::from_fn(|a| Smoothness::of(&per_second[a])),
        shaper_departures: Smoothness::of(&departures),
        steady_seconds: DURATION_SECS as usize - STEADY_FROM,
    };

    let widths = [2.0, 2.0, 2.5, 2.0, 2.0, 2.0];
    let panels = rows
        .iter()
        .enumerate()
        .map(|(r, (name, counts))| {
            // Row order: the five algorithms with the shaper's departures after the shaper.
            let colour = match r {
                0 | 1 => COLOURS[r],
                2 => COLOURS[5],
                _ => COLOURS[r - 1],
            };
            Series {
                name: if r == SHAPER {
                    "leaky bucket, by decision".to_string()
                } else {
                    name.clone()
                },
                points: counts
                    .iter()
                    .enumerate()
                    .map(|(s, c)| (s as f64, *c as f64))
                    .collect(),
                colour,
                dash: "",
                width: widths[r],
            }
        })
        .collect();
    let picture = Picture {
        file: "compare-steady-overload.svg",
        svg: StackedChart {
            title: "3. Steady overload: 20 requests/s against 600/min for 5 minutes".to_string(),
            x_label: "seconds since the traffic began".to_string(),
            y_label: "requests admitted in that second".to_string(),
            x_range: (0.0, SHOWN_SECS as f64),
            y_range: (0.0, 22.0),
            y_ticks: vec![0.0, 10.0, 20.0],
            panels,
            rule: 10.0,
        }
        .render(),
    };
    Ok((picture, summary))
}
