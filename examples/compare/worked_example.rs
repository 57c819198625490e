//! Scenario 4, the seed's worked example: limit 100 per minute, 80 requests in the previous
//! window, 25% into the current one (01:15) with 30 so far. The sliding window counter
//! estimates `30 + 80 * 0.75 = 90` and admits. The same counts, spread three ways over the
//! previous window, against what the exact log and the others say.

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Lineup, LOG, NAMES};
use crate::svg::{LineChart, Series, COLOURS};
use crate::table::Table;
use crate::{Picture, BASE, SECOND};

const SLIDING: usize = 3;
const PREVIOUS: u64 = 80;
const CURRENT: u64 = 30;
/// 01:15, 25% into the second minute.
const ASKED_AT: u64 = 75 * SECOND;
/// The pictures sample every quarter second.
const SAMPLE: u64 = SECOND / 4;

/// Where the previous window's 80 requests fall.
struct Spread {
    name: &'static str,
    /// The time of request `i` of 80, in ns since 00:00.
    at: fn(u64) -> u64,
    colour: &'static str,
}

const SPREADS: [Spread; 3] = [
    Spread {
        name: "evenly over 00:00-01:00",
        at: |i| (2 * i + 1) * 750_000_000 / 2,
        colour: COLOURS[0],
    },
    Spread {
        name: "all in 00:00-00:01",
        at: |i| (2 * i + 1) * 12_500_000 / 2,
        colour: COLOURS[3],
    },
    Spread {
        name: "all in 00:59-01:00",
        at: |i| 59 * SECOND + (2 * i + 1) * 12_500_000 / 2,
        colour: COLOURS[2],
    },
];

/// Runs the scenario, prints its table and returns its picture.
pub(crate) fn run() -> Result<Picture, Box<dyn Error>> {
    let quota: Quota = "100/min".parse()?;
    println!("## Scenario 4: the seed's worked example\n");
    println!(
        "Every algorithm `{quota}` (buckets: burst 100). {PREVIOUS} requests in the previous minute \
         (spread three ways), {CURRENT} in 01:00-01:15 (one every 0.5 s, at the middle of each slot), \
         then one more request at 01:15, 25% into the current window. \"Counted\" is what each \
         limiter holds against the client just before that request, read from a peek as limit − \
         remaining − 1 (for the sliding window counter, its estimate rounded up; for the log, the \
         exact count in (00:15, 01:15]; for the buckets, the tokens missing from a full bucket).\n"
    );
    let mut table = Table::new(&[
        "previous window's 80",
        "algorithm",
        "history admitted (of 110)",
        "counted at 01:15 (limit − remaining)",
        "request at 01:15",
        "remaining after",
    ]);
    let mut series = Vec::new();
    for spread in &SPREADS {
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
            table.row(vec![
                spread.name.to_string(),
                name.to_string(),
                admitted[a].to_string(),
                in_window(quota, &before[a]).to_string(),
                if decided[a].allowed { "admitted" } else { "refused" }.to_string(),
                decided[a].remaining.to_string(),
            ]);
        }
        for (a, dash, width) in [(SLIDING, "", 2.5), (LOG, "6 4", 2.0)] {
            let mut points = std::mem::take(&mut believed[a]);
            points.push((ASKED_AT as f64 / 1e9, in_window(quota, &before[a]) as f64));
            series.push(Series {
                name: format!("{}: {}", if a == LOG { "log" } else { "counter" }, spread.name),
                points,
                colour: spread.colour,
                dash,
                width,
            });
        }
    }
    table.print();
    Ok(Picture {
        file: "compare-worked-example.svg",
        svg: LineChart {
            title: "4. The seed's example: what the counter estimates and the log counts, 00:00-01:15"
                .to_string(),
            x_label: "seconds since 00:00".to_string(),
            y_label: "requests in the last minute, as counted".to_string(),
            x_range: (0.0, 76.0),
            y_range: (0.0, 110.0),
            series,
            rules: vec![
                (100.0, "limit 100".to_string()),
                (90.0, "the seed's 90".to_string()),
            ],
        }
        .render(),
    })
}

/// What a limiter counts in its window, read from a peek: `limit - remaining - 1` when a
/// request would pass (the peek's remaining is after that request), `limit - remaining` when not.
fn in_window(quota: Quota, answer: &crate::lineup::Answer) -> u64 {
    quota
        .count()
        .saturating_sub(answer.remaining + u64::from(answer.allowed))
}
