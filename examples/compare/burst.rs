//! Scenario 1, burst after idle: the seed's bucket (capacity 10, refill 2 per second) and
//! windows of the same rate and burst (10 per 5 s). The client drains every limiter at t = 0,
//! stays silent for 10 s, then sends 20 requests within 1 ms.

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Lineup, NAMES, SHAPER};
use crate::svg::{LineChart, Series, COLOURS};
use crate::table::{seconds, Table};
use crate::{Picture, BASE, SECOND};

const DRAIN: u64 = 10;
const SILENCE: u64 = 10 * SECOND;
const BURST: u64 = 20;
/// The burst's requests are this far apart: 20 of them within 1 ms.
const SPACING: u64 = 50_000;

/// Runs the scenario, prints its table and returns its picture.
pub(crate) fn run() -> Result<Picture, Box<dyn Error>> {
    let bucket: Quota = "2/s burst 10".parse()?;
    let window: Quota = "10/5s".parse()?;
    println!("## Scenario 1: burst after idle\n");
    println!(
        "Buckets `{bucket}`, windows `{window}`. At t = 0 s the client sends {DRAIN} requests (a full \
         drain), then nothing for {} s, then {BURST} requests {} µs apart (t = 10 s to 10.00095 s).\n",
        SILENCE / SECOND,
        SPACING / 1_000
    );
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
        "drain at 0 s: admitted",
        "burst: admitted of 20",
        "refused",
        "first refused",
        "the admitted proceed at (after the burst's first request)",
    ]);
    for (a, name) in NAMES.iter().enumerate() {
        let admitted = proceeds[a].len() as u64;
        let first_refused = (1..=BURST)
            .find(|n| !proceeds[a].iter().any(|(i, _)| i == n))
            .map_or("none".to_string(), |n| format!("#{n}"));
        table.row(vec![
            name.to_string(),
            drained[a].to_string(),
            admitted.to_string(),
            (BURST - admitted).to_string(),
            first_refused,
            schedule(&proceeds[a]),
        ]);
    }
    table.print();

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
    Ok(Picture {
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
    })
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
                (Some(lo), Some(hi)) if hi - lo < 100_000 => format!(", one every {}", seconds(*hi)),
                _ => String::new(),
            };
            format!("{} to {}{spacing}", seconds(first.1), seconds(last.1))
        }
    }
}
