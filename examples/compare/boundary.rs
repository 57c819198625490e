//! Scenario 2, the boundary spike: every algorithm allows `100/min`; a client sends 100 requests
//! at 00:59 and 100 more at 01:01 (each group within 0.1 ms). A fixed window of 100 per minute
//! starts counting afresh at 01:00, so it admits all 200 within 2 seconds; the others do not.

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Lineup, NAMES, SHAPER};
use crate::svg::{LineChart, Series, COLOURS};
use crate::table::{clock_time, paragraph, seconds, Table};
use crate::trailing::TrailingWindow;
use crate::{Picture, BASE, SECOND};

const GROUP: u64 = 100;
/// The requests of one group are this far apart (1 µs).
const SPACING: u64 = 1_000;

/// What the closing guide cites from this scenario.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// Requests sent in the two groups together.
    pub(crate) sent: u64,
    /// Requests each algorithm admitted of both groups.
    pub(crate) admitted: [u64; 5],
    /// The most admitted requests proceeding within any 60 s, per algorithm.
    pub(crate) most: [u64; 5],
}

/// Runs the scenario, prints its table and returns its picture.
pub(crate) fn run() -> Result<(Picture, Summary), Box<dyn Error>> {
    let quota: Quota = "100/min".parse()?;
    let window = quota.period().as_nanos() as u64;
    println!("## Scenario 2: the boundary spike\n");
    paragraph(&format!(
        "Every algorithm allows `{quota}` (buckets: burst {}). A client sends {GROUP} requests at 00:59 \
         and {GROUP} more at 01:01, {} µs apart: two seconds across the minute boundary at which a \
         fixed window starts counting afresh. It shows how many requests each algorithm lets through \
         within one minute.",
        quota.burst(),
        SPACING / 1_000,
    ));
    let clock = ManualClock::starting_at(Timestamp::from_nanos(BASE));
    let lineup = Lineup::new(quota, quota, &clock)?;
    let mut admitted = [[0u64; 2]; 5];
    // Per algorithm: decision times of admitted requests, and the most units proceeding in any
    // (t - 60 s, t] (the shaper's by their departure).
    let mut decided: [Vec<u64>; 5] = Default::default();
    let mut trailing: [TrailingWindow; 5] = std::array::from_fn(|_| TrailingWindow::new(window));
    let mut most = [0u64; 5];
    let mut shaper_last = 0;
    for (g, group_start) in [59 * SECOND, 61 * SECOND].into_iter().enumerate() {
        for i in 0..GROUP {
            let at = BASE + group_start + i * SPACING;
            clock.set(Timestamp::from_nanos(at));
            for (a, answer) in lineup.check().iter().enumerate() {
                if answer.allowed {
                    admitted[a][g] += 1;
                    decided[a].push(at - BASE);
                    most[a] = most[a].max(trailing[a].push(at + answer.delay_nanos));
                    if a == SHAPER {
                        shaper_last = at - BASE + answer.delay_nanos;
                    }
                }
            }
        }
    }
    let mut table = Table::new(&["algorithm", "00:59", "01:01", "both", "most in 60 s"]);
    for (a, name) in NAMES.iter().enumerate() {
        table.row(vec![
            name.to_string(),
            admitted[a][0].to_string(),
            admitted[a][1].to_string(),
            (admitted[a][0] + admitted[a][1]).to_string(),
            most[a].to_string(),
        ]);
    }
    table.print();
    let interval = quota.period().as_nanos() as u64 / quota.count();
    paragraph(&format!(
        "00:59, 01:01: requests admitted of each group of {GROUP}; both: of the {}. most in 60 s: the \
         most admitted requests that proceed within any 60 s. The shaper's admitted requests wait \
         for their slots, one every {}, the last proceeding at {}, so no 60 s sees more than {} of \
         them leave.",
        2 * GROUP,
        seconds(interval),
        clock_time(shaper_last),
        most[SHAPER],
    ));
    let summary = Summary {
        sent: 2 * GROUP,
        admitted: std::array::from_fn(|a| admitted[a][0] + admitted[a][1]),
        most,
    };

    let widths = [4.0, 2.5, 3.0, 2.5, 2.0];
    let dashes = ["", "6 3", "", "", "4 3"];
    let series = NAMES
        .iter()
        .enumerate()
        .map(|(a, name)| {
            let mut points = vec![(50.0, 0.0)];
            points.extend(
                decided[a]
                    .iter()
                    .enumerate()
                    .map(|(n, at)| (*at as f64 / 1e9, (n + 1) as f64)),
            );
            Series {
                name: if a == SHAPER {
                    "leaky bucket, admitted".to_string()
                } else {
                    name.to_string()
                },
                points,
                colour: COLOURS[a],
                dash: dashes[a],
                width: widths[a],
            }
        })
        .collect();
    let picture = Picture {
        file: "compare-boundary-spike.svg",
        svg: LineChart {
            title: "2. Boundary spike: 100/min, 100 requests at 00:59 and 100 at 01:01".to_string(),
            x_label: "seconds since 00:00 (decision time)".to_string(),
            y_label: "requests admitted (cumulative)".to_string(),
            x_range: (57.0, 63.0),
            y_range: (0.0, 210.0),
            series,
            rules: vec![(100.0, "limit: 100 per minute".to_string())],
        }
        .render(),
    };
    Ok((picture, summary))
}
