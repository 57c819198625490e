//! Scenario 4, the sliding window counter's worked example: limit 100 per minute, 80 requests
//! in the previous window, and at 01:15, 25% into the current one, 30 so far. The counter
//! weighs the previous window by the share of it the last minute still overlaps and estimates
//! `30 + 80 * 0.75 = 90 < 100`, so it admits one more. The scenario replays these counts with
//! the previous window's 80 spread three ways, and sets the counter's estimate beside what the
//! exact log and the others count.

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Lineup, COUNTER, LOG, NAMES};
use crate::svg::{LineChart, Series, COLOURS};
use crate::table::{paragraph, Table};
use crate::{Picture, BASE, SECOND};

const PREVIOUS: u64 = 80;
const CURRENT: u64 = 30;
/// 01:15, 25% into the second minute.
const ASKED_AT: u64 = 75 * SECOND;
/// The pictures sample every quarter second.
const SAMPLE: u64 = SECOND / 4;

/// Where the previous window's 80 requests fall.
struct Spread {
    /// The table's short name.
    name: &'static str,
    /// The picture's legend.
    legend: &'static str,
    /// The time of request `i` of 80, in ns since 00:00.
    at: fn(u64) -> u64,
    colour: &'static str,
}

const SPREADS: [Spread; 3] = [
    Spread {
        name: "evenly",
        legend: "evenly over 00:00-01:00",
        at: |i| (2 * i + 1) * 750_000_000 / 2,
        colour: COLOURS[0],
    },
    Spread {
        name: "at 00:00",
        legend: "all in 00:00-00:01",
        at: |i| (2 * i + 1) * 12_500_000 / 2,
        colour: COLOURS[3],
    },
    Spread {
        name: "at 00:59",
        legend: "all in 00:59-01:00",
        at: |i| 59 * SECOND + (2 * i + 1) * 12_500_000 / 2,
        colour: COLOURS[2],
    },
];

/// What the closing guide cites from this scenario.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// How the previous window's requests were spread, in the order of `counted`.
    pub(crate) spreads: [&'static str; 3],
    /// What each algorithm counted against the client just before 01:15, per spread.
    pub(crate) counted: [[u64; 5]; 3],
}

/// The counter's estimate in the worked example: the current window's requests plus the
/// previous window's, weighted by the share of it the last minute still overlaps.
fn estimate(window: u64) -> u64 {
    let elapsed = ASKED_AT - window;
    CURRENT + PREVIOUS * (window - elapsed) / window
}

/// The weight of the previous window at 01:15: the share of it the last minute still overlaps.
fn weight(window: u64) -> f64 {
    (2 * window - ASKED_AT) as f64 / window as f64
}

/// Runs the scenario, prints its table and returns its picture.
pub(crate) fn run() -> Result<(Picture, Summary), Box<dyn Error>> {
    let quota: Quota = "100/min".parse()?;
    let window = quota.period().as_nanos() as u64;
    let elapsed = ASKED_AT - window;
    println!("## Scenario 4: the sliding window counter's worked example\n");
    paragraph(&format!(
        "Every algorithm allows `{quota}` (buckets: burst {}). A client sends {PREVIOUS} requests in \
         the first minute, spread three ways, and {CURRENT} in 01:00-01:15, one every {} s; at 01:15, \
         {}% into the current window, the sliding window counter estimates {CURRENT} + {PREVIOUS} × \
         {:.2} = {} < {} and admits one more request. It shows how far that estimate, which assumes \
         the previous minute's requests were spread evenly, is from the exact count.",
        quota.burst(),
        elapsed as f64 / CURRENT as f64 / 1e9,
        elapsed * 100 / window,
        weight(window),
        estimate(window),
        quota.count(),
    ));
    let mut table = Table::new(&[
        "first minute",
        "algorithm",
        "admitted",
        "counted",
        "01:15",
        "left",
    ]);
    let mut series = Vec::new();
    let mut counted = [[0u64; 5]; 3];
    for (s, spread) in SPREADS.iter().enumerate() {
        let clock = ManualClock::starting_at(Timestamp::from_nanos(BASE));
        let lineup = Lineup::new(quota, quota, &clock)?;
        let mut history: Vec<u64> = (0..PREVIOUS).map(spread.at).collect();
        history.extend((0..CURRENT).map(|i| 60 * SECOND + (2 * i + 1) * SECOND / 4));
        let mut admitted = [0u64; 5];
        let mut believed: [Vec<(f64, f64)>; 5] = Default::default();
        let mut next = 0;
        let mut sample = 0;
        while sample < ASKED_AT {
            while next < history.len() && history[next] <= sample {
                clock.set(Timestamp::from_nanos(BASE + history[next]));
                for (a, answer) in lineup.check().iter().enumerate() {
                    admitted[a] += u64::from(answer.allowed);
                }
                next += 1;
            }
            clock.set(Timestamp::from_nanos(BASE + sample));
            for (a, answer) in lineup.peek().iter().enumerate() {
                believed[a].push((sample as f64 / 1e9, in_window(quota, answer) as f64));
            }
            sample += SAMPLE;
        }
        clock.set(Timestamp::from_nanos(BASE + ASKED_AT));
        let before = lineup.peek();
        let decided = lineup.check();
        for (a, name) in NAMES.iter().enumerate() {
            counted[s][a] = in_window(quota, &before[a]);
            table.row(vec![
                if a == 0 { spread.name } else { "" }.to_string(),
                name.to_string(),
                admitted[a].to_string(),
                in_window(quota, &before[a]).to_string(),
                if decided[a].allowed { "admitted" } else { "refused" }.to_string(),
                decided[a].remaining.to_string(),
            ]);
        }
        for (a, dash, width) in [(COUNTER, "", 2.5), (LOG, "6 4", 2.0)] {
            let mut points = std::mem::take(&mut believed[a]);
            points.push((ASKED_AT as f64 / 1e9, in_window(quota, &before[a]) as f64));
            series.push(Series {
                name: format!("{}: {}", if a == LOG { "log" } else { "counter" }, spread.legend),
                points,
                colour: spread.colour,
                dash,
                width,
            });
        }
    }
    table.print();
    paragraph(&format!(
        "first minute: its {PREVIOUS} requests spread evenly over 00:00-01:00, or all within the \
         first or the last second of it. admitted: requests admitted of the {} before 01:15. counted: \
         what the limiter holds against the client just before 01:15, read from a peek as limit − \
         remaining − 1 (the counter's estimate rounded up, the log's exact count in (00:15, 01:15], \
         the tokens missing from a full bucket). 01:15: the decision on the request at 01:15; left: \
         remaining after it.",
        PREVIOUS + CURRENT,
    ));
    let summary = Summary {
        spreads: SPREADS.map(|s| s.name),
        counted,
    };
    let picture = Picture {
        file: "compare-worked-example.svg",
        svg: LineChart {
            title: "4. The sliding window counter's worked example: its estimate and the log's count"
                .to_string(),
            x_label: "seconds since 00:00".to_string(),
            y_label: "requests in the last minute, as counted".to_string(),
            x_range: (0.0, 76.0),
            y_range: (0.0, 110.0),
            series,
            rules: vec![
                (100.0, "limit 100".to_string()),
                (
                    estimate(window) as f64,
                    format!(
                        "estimate at 01:15: {CURRENT} + {PREVIOUS} × {:.2} = {}",
                        weight(window),
                        estimate(window)
                    ),
                ),
            ],
        }
        .render(),
    };
    Ok((picture, summary))
}

/// What a limiter counts in its window, read from a peek: `limit - remaining - 1` when a
/// request would pass (the peek's remaining is after that request), `limit - remaining` when not.
fn in_window(quota: Quota, answer: &crate::lineup::Answer) -> u64 {
    quota
        .count()
        .saturating_sub(answer.remaining + u64::from(answer.allowed))
}
