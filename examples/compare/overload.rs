//! Scenario 3, steady overload: `600/min` (10 per second), one client sending 20 per second (one
//! request every 50 ms) for 5 minutes. Admitted per second over time shows each algorithm's
//! smoothness.

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Lineup, NAMES, SHAPER};
use crate::svg::{Series, StackedChart, COLOURS};
use crate::table::Table;
use crate::{Picture, BASE, SECOND};

/// The traffic starts 20 s into a minute, so that windows do not begin with it.
const OFFSET: u64 = 20 * SECOND;
const SPACING: u64 = 50_000_000;
const DURATION_SECS: u64 = 300;
/// Steady state: after the buckets' burst and the first window are spent.
const STEADY_FROM: usize = 60;
/// The shaper's last departures come up to a minute after the traffic stops.
const SHOWN_SECS: usize = 360;

/// Runs the scenario, prints its table and returns its picture.
pub(crate) fn run() -> Result<Picture, Box<dyn Error>> {
    let quota: Quota = "600/min".parse()?;
    println!("## Scenario 3: steady overload\n");
    println!(
        "Every algorithm `{quota}` (buckets: burst 600). One client sends a request every 50 ms \
         (20/s, twice the rate) for {DURATION_SECS} s, starting 20 s into a minute. Per-second \
         statistics are over seconds {STEADY_FROM} to {DURATION_SECS} (after the first window and the \
         buckets' initial burst).\n"
    );
    let start = BASE + OFFSET;
    let clock = ManualClock::starting_at(Timestamp::from_nanos(start));
    let lineup = Lineup::new(quota, quota, &clock)?;
    // Admitted per second of decision time; for the shaper also per second of departure.
    let mut per_second = [[0u64; SHOWN_SECS]; 5];
    let mut departures = [0u64; SHOWN_SECS];
    let sent = DURATION_SECS * SECOND / SPACING;
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
        "admitted of 6000",
        "per second: mean",
        "std dev",
        "min",
        "max",
        "seconds with 0",
        "max in any second of the run",
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
        let steady = &counts[STEADY_FROM..DURATION_SECS as usize];
        let mean = steady.iter().sum::<u64>() as f64 / steady.len() as f64;
        let variance = steady.iter().map(|c| (*c as f64 - mean).powi(2)).sum::<f64>() / steady.len() as f64;
        table.row(vec![
            name.clone(),
            counts.iter().sum::<u64>().to_string(),
            format!("{mean:.2}"),
            format!("{:.2}", variance.sqrt()),
            steady.iter().min().copied().unwrap_or(0).to_string(),
            steady.iter().max().copied().unwrap_or(0).to_string(),
            steady.iter().filter(|c| **c == 0).count().to_string(),
            counts.iter().max().copied().unwrap_or(0).to_string(),
        ]);
    }
    table.print();

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
    Ok(Picture {
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
    })
}
