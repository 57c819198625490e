//! Five rate-limiting algorithms on the same traffic: the token bucket, the leaky bucket
//! shaper, the fixed window, the sliding window counter and the exact sliding window log.
//!
//! Replays five deterministic scenarios on a manual clock, prints a Markdown table for each and
//! writes one SVG picture per scenario to `docs/img/compare-*.svg`; `docs/algorithms.md` quotes
//! this run. The scenarios:
//!
//! 1. Burst after idle: a bucket of capacity 10 refilled 2 per second (windows of 10 per 5 s),
//!    emptied, left idle for 10 s, then sent 20 requests within 1 ms.
//! 2. The boundary spike: 100 per minute, 100 requests at 00:59 and 100 at 01:01; a fixed window
//!    admits all 200.
//! 3. Steady overload: 600 per minute, one request every 50 ms for 5 minutes.
//! 4. The sliding window counter's worked example: 100 per minute, 80 requests in the previous
//!    window and 30 in the current one at 01:15, 25% into it: the counter estimates
//!    `30 + 80 * 0.75 = 90 < 100` and admits; the log's exact count beside it.
//! 5. Accuracy at scale: more than ten million requests from 10,000 clients, every algorithm
//!    compared request by request with the exact log.
//!
//! The run ends with "Which algorithm should I use?", drawn from the figures it printed.
//!
//! Run: `cargo run --release --example compare` (a few seconds; scenario 5 replays more than ten
//! million requests, and the run prints how long it took).

mod accuracy;
mod boundary;
mod burst;
mod guide;
mod lineup;
mod memory;
mod overload;
mod rng;
mod svg;
mod table;
mod traffic;
mod trailing;
mod worked_example;

use std::error::Error;
use std::path::Path;
use std::time::Instant;

/// One second in nanoseconds.
pub(crate) const SECOND: u64 = 1_000_000_000;
/// Where every scenario's clock starts: 2027-01-15T08:00:00Z, a whole minute (and hour) since
/// the UNIX epoch, so that windows begin at the scenario's 00:00.
pub(crate) const BASE: u64 = 1_800_000_000 * SECOND;

/// A scenario's picture: the file name under `docs/img/` and the SVG document.
#[derive(Debug)]
pub(crate) struct Picture {
    file: &'static str,
    svg: String,
}

fn main() -> Result<(), Box<dyn Error>> {
    let started = Instant::now();
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs").join("img");
    std::fs::create_dir_all(&images)?;
    let write = |picture: Picture| -> Result<(), Box<dyn Error>> {
        std::fs::write(images.join(picture.file), picture.svg)?;
        table::paragraph(&format!("Picture: `docs/img/{}`.", picture.file));
        Ok(())
    };
    println!("# tollgate: five rate-limiting algorithms on the same traffic\n");
    table::paragraph(
        "Each scenario sends the same requests, on a manual clock, to five limiters: the token \
         bucket, the leaky bucket shaper, the fixed window, the sliding window counter and the \
         sliding window log, which remembers every admission and is exact. Under each table, one \
         sentence says what its columns count.",
    );
    let (picture, burst) = burst::run()?;
    write(picture)?;
    let (picture, boundary) = boundary::run()?;
    write(picture)?;
    let (picture, overload) = overload::run()?;
    write(picture)?;
    let (picture, worked_example) = worked_example::run()?;
    write(picture)?;
    let at_scale = Instant::now();
    let (picture, accuracy) = accuracy::run()?;
    let at_scale = at_scale.elapsed();
    write(picture)?;
    let memory = memory::report()?;
    table::paragraph(&format!(
        "The run took {:.1} s, scenario 5 {:.1} s of it.",
        started.elapsed().as_secs_f64(),
        at_scale.as_secs_f64()
    ));
    guide::print(&guide::Results {
        burst,
        boundary,
        overload,
        worked_example,
        accuracy,
        memory,
    });
    Ok(())
}
