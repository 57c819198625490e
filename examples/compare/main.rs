//! Five rate-limiting algorithms on the same traffic: the token bucket, the leaky bucket
//! shaper, the fixed window, the sliding window counter and the exact sliding window log.
//!
//! Replays five deterministic scenarios on a manual clock, prints a Markdown table for each and
//! writes one SVG picture per scenario to `docs/img/compare-*.svg`. `docs/algorithms.md` quotes
//! this run.
//!
//! Run: `cargo run --release --example compare` (a few seconds; scenario 5 replays more than ten
//! million requests, and the run prints how long it took).

mod accuracy;
mod boundary;
mod burst;
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
    println!("# tollgate: five algorithms compared (`cargo run --release --example compare`)\n");
    let mut written = Vec::new();
    for run in [
        burst::run,
        boundary::run,
        overload::run,
        worked_example::run,
        accuracy::run,
    ] {
        let picture = run()?;
        std::fs::write(images.join(picture.file), picture.svg)?;
        written.push(picture.file);
    }
    memory::report()?;
    for file in written {
        println!("wrote docs/img/{file}");
    }
    println!("\nthe whole run took {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
