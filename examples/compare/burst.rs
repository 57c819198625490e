//! Scenario 1, burst after idle: a bucket of capacity 10 refilled 2 per second (`2/s burst
//! 10`), and windows of the same rate and burst (`10/5s`). The client empties every limiter
//! with 10 requests at t = 0, stays silent for 10 s, then sends 20 requests within 1 ms: how
//! much of a burst each algorithm forgives after a quiet spell, and when the admitted requests
//! go ahead.

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Lineup, NAMES, SHAPER};
use crate::svg::{LineChart, Series, COLOURS};
use crate::table::{paragraph, seconds, Table};
use crate::{Picture, BASE, SECOND};

const DRAIN: u64 = 10;
const SILENCE: u64 = 10 * SECOND;
const BURST: u64 = 20;
/// The burst's requests are this far apart: 20 of them within 1 ms.
const SPACING: u64 = 50_000;

/// What the closing guide cites from this scenario.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// Requests of the burst sent.
    pub(crate) sent: u64,
    /// Requests of the burst each algorithm admitted.
    pub(crate) admitted: [u64; 5],
    /// When the shaper's last admitted request proceeds, in ns after the burst's first request.
    pub(crate) shaper_last: u64,
    /// The gap between two of the shaper's departures, in ns.
    pub(crate) shaper_gap: u64,
}

/// Runs the scenario, prints its table and returns its picture.
pub(crate) fn run() -> Result<(Picture, Summary), Box<dyn Error>> {
    let bucket: Quota = "2/s burst 10".parse()?;
    let window: Quota = "10/5s".parse()?;
    println!("## Scenario 1: burst after idle\n");
    paragraph(&format!(
        "A client sends {DRAIN} requests at t = 0 s, which empties every limiter, stays silent for \
         {} s, then sends {BURST} requests {} µs apart. It shows how much of a burst each algorithm \
         forgives after a quiet spell, and when the admitted requests go ahead. Limits: buckets \
         `{bucket}` (a bucket of {} tokens refilled {} per second), windows `{window}` (the same rate \
         and burst).",
        SILENCE / SECOND,
        SPACING / 1_000,
        bucket.burst(),
        bucket.count(),
    ));
    let clock = ManualClock::starting_at(Timestamp::from_nanos(BASE));
    let lineup = Lineup::new(bucket, window, &clock)?;
    let mut drained = [0u64; 5];
    for _ in 0..DRAIN {
        for (a, answer) in lineup.check().iter().enumerate() {
            drained[a] += u64::from(answer.allowed);
        }
    }
    let start = BASE + SILENCE;
    // Per algorithm: (request number, when it proceeds, ns after the burst's first request).
    let mut proceeds: [Vec<(u64, u64)>; 5] = Default::default();
    for i in 0..BURST {
        let at = start + i * SPACING;
        clock.set(Timestamp::from_nanos(at));
        for (a, answer) in lineup.check().iter().enumerate() {
            if answer.allowed {
                proceeds[a].push((i + 1, at - start + answer.delay_nanos));
            }
        }
    }
    let mut table = Table::new(&[
        "algorithm",
        "drain",
        "burst",
        "first refused",
        "admitted ones proceed",
    ]);
    for (a, name) in NAMES.iter().enumerate() {
        let first_refused = (1..=BURST)
            .find(|n| !proceeds[a].iter().any(|(i, _)| i == n))
            .map_or("none".to_string(), |n| format!("#{n}"));
        table.row(vec![
            name.to_string(),
            drained[a].to_string(),
            proceeds[a].len().to_string(),
            first_refused,
            schedule(&proceeds[a]),
        ]);
    }
    table.print();
    paragraph(&format!(
        "drain: requests admitted of the {DRAIN} at t = 0 s. burst: requests admitted of the {BURST} \
         (the others are refused). first refused: the burst's first refused request. admitted ones \
         proceed: when, counted from the burst's first request."
    ));
    let shaper = &proceeds[SHAPER];
    let summary = Summary {
        sent: BURST,
        admitted: std::array::from_fn(|a| proceeds[a].len() as u64),
        shaper_last: shaper.last().map_or(0, |p| p.1),
        shaper_gap: shaper.windows(2).map(|w| w[1].1 - w[0].1).max().unwrap_or(0),
    };

    let mut series: Vec<Series> = vec![Series {
        name: "requests sent".to_string(),
        points: cumulative((1..=BURST).map(|i| (i - 1) * SPACING)),
        colour: "#999999",
        dash: "",
        width: 6.0,
    }];
    let widths = [5.0, 2.5, 3.5, 2.0, 1.5];
    let dashes = ["", "", "8 4", "3 3", "1 3"];
    for (a, name) in NAMES.iter().enumerate() {
        series.push(Series {
            name: name.to_string(),
            points: cumulative(proceeds[a].iter().map(|p| p.1)),
            colour: COLOURS[a],
            dash: if a == SHAPER { "" } else { dashes[a] },
            width: widths[a],
        });
    }
    let picture = Picture {
        file: "compare-burst-after-idle.svg",
        svg: LineChart {
            title: "1. Burst after idle: 20 requests within 1 ms after 10 s of silence".to_string(),
            x_label: "seconds after the burst's first request (when each admitted request proceeds)"
                .to_string(),
            y_label: "requests proceeding (cumulative)".to_string(),
            x_range: (-0.75, 5.5),
            y_range: (0.0, 21.0),
            series,
            rules: vec![(10.0, "capacity 10".to_string())],
        }
        .render(),
    };
    Ok((picture, summary))
}

/// Step points of a running count, starting at zero before the first time.
fn cumulative(times: impl Iterator<Item = u64>) -> Vec<(f64, f64)> {
    let mut points = vec![(-1.0, 0.0)];
    for (n, at) in times.enumerate() {
        points.push((at as f64 / SECOND as f64, (n + 1) as f64));
    }
    points
}

/// "at once", or the first and last departure and their spacing when the shaper spreads them.
fn schedule(proceeds: &[(u64, u64)]) -> String {
    match (proceeds.first(), proceeds.last()) {
        (None, _) | (_, None) => "nothing admitted".to_string(),
        (Some(first), Some(last)) if last.1 < SECOND / 100 => {
            format!("at once (within {:.2} ms)", (last.1 - first.1) as f64 / 1e6)
        }
        (Some(first), Some(last)) => {
            let gaps: Vec<u64> = proceeds.windows(2).map(|w| w[1].1 - w[0].1).collect();
            let spacing = match (gaps.iter().min(), gaps.iter().max()) {
                (Some(lo), Some(hi)) if hi - lo < 100_000 => format!(", every {}", seconds(*hi)),
                _ => String::new(),
            };
            format!("{} to {}{spacing}", seconds(first.1), seconds(last.1))
        }
    }
}
