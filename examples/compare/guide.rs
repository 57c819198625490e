//! The closing section, "Which algorithm should I use?": one recommendation per algorithm, each
//! backed by figures this run has just printed and pointing at the row that holds them.

use crate::lineup::{COUNTER, FIXED, LOG, SHAPER, TOKEN};
use crate::table::{bullet, paragraph, percent, seconds};
use crate::{accuracy, boundary, burst, memory, overload, worked_example};

/// What each scenario measured, for the guide to cite.
#[derive(Debug)]
pub(crate) struct Results {
    /// Scenario 1.
    pub(crate) burst: burst::Summary,
    /// Scenario 2.
    pub(crate) boundary: boundary::Summary,
    /// Scenario 3.
    pub(crate) overload: overload::Summary,
    /// Scenario 4.
    pub(crate) worked_example: worked_example::Summary,
    /// Scenario 5.
    pub(crate) accuracy: accuracy::Summary,
    /// The state per key.
    pub(crate) memory: memory::Summary,
}

/// Prints the guide.
pub(crate) fn print(results: &Results) {
    let Results {
        burst,
        boundary,
        overload,
        worked_example,
        accuracy,
        memory,
    } = results;
    let limit = accuracy.limit;
    let steady = overload.steady_seconds;
    let smooth = |a: usize| format!("{:.2}", overload.decided[a].std_dev);
    let empty = |a: usize| overload.decided[a].zero_seconds;
    println!("## Which algorithm should I use?\n");
    paragraph(
        "Each answer cites the run above by scenario and table; the row is the algorithm's own \
         unless another is named.",
    );
    let quota = memory.quota;
    let packed = memory.packed;
    let log = &accuracy.all[LOG];
    bullet(&format!(
        "**\"At most {limit} per minute\", exactly, for small limits: the sliding window log.** \
         No window of any client held more than {} (scenario 5, worst window), and across the minute boundary it let {} of {} through (scenario 2). It pays in \
         memory, {} bytes per key at `{quota}` where the others keep {packed} (state per key), and \
         under overload it admits in blocks: a standard deviation of {} per second and {} empty \
         seconds of {steady} (scenario 3).",
        log.worst_window,
        boundary.admitted[LOG],
        boundary.sent,
        memory.ring,
        smooth(LOG),
        empty(LOG),
    ));
    let bucket = &accuracy.all[TOKEN];
    bullet(&format!(
        "**Smooth, cheap and burst-tolerant, for public APIs: the token bucket.** After a quiet \
         spell it admits a full bucket at once, {} of {} (scenario 1); under overload exactly the \
         rate, every second (scenario 3, standard deviation {}); {packed} bytes per key. The burst \
         comes on top of the rate: one window held {} of its admissions (scenario 5, worst window).",
        burst.admitted[TOKEN],
        burst.sent,
        smooth(TOKEN),
        bucket.worst_window,
    ));
    let shaper = &accuracy.all[SHAPER];
    bullet(&format!(
        "**Spacing requests for a downstream that must not see bursts: the leaky bucket shaper.** \
         It admits what the token bucket admits, but its requests proceed one every {}, the last \
         {} after the burst began (scenario 1); under overload, never more than {} in a second, \
         from the first second on (scenario 3, row \"leaky bucket, by departure\", peak); and no \
         60 s saw more than {} of them proceed in scenario 2 (most in 60 s), or {} in scenario 5 \
         (worst window, row \"leaky bucket, by departure\"). The caller waits `Decision::delay` before sending.",
        seconds(burst.shaper_gap),
        seconds(burst.shaper_last),
        overload.shaper_departures.peak,
        boundary.most[SHAPER],
        shaper.worst_departure_window,
    ));
    let fixed = &accuracy.all[FIXED];
    bullet(&format!(
        "**Quotas aligned with billing periods: the fixed window.** It counts per calendar window \
         in {packed} bytes per key and never refused a request needlessly ({} needlessly refused, \
         scenario 5). Its price is the boundary spike: {} of {} passed within 2 s across a minute \
         boundary (scenario 2), and under overload it admits in blocks, {} \
         empty seconds of {steady} (scenario 3).",
        fixed.needlessly_refused,
        boundary.admitted[FIXED],
        boundary.sent,
        empty(FIXED),
    ));
    let counter = &accuracy.all[COUNTER];
    let quiet = &accuracy.quiet[COUNTER];
    let [even, early, late] = worked_example.counted;
    bullet(&format!(
        "**A cheap approximation of the log: the sliding window counter.** {packed} bytes per key, \
         {} of {} at the minute boundary (scenario 2), the smoothest window under overload (scenario \
         3, standard deviation {}). It decided {} of requests differently from the log, and {} for \
         clients the log never limited (scenario 5), where Cloudflare measured {} on its own traffic \
         ({}). Its estimate is exact \
         when the previous window's requests were spread evenly ({} against the log's {}, scenario \
         4, \"{}\"), not otherwise ({} against {} and {}).",
        boundary.admitted[COUNTER],
        boundary.sent,
        smooth(COUNTER),
        percent(
            counter.wrongly_admitted + counter.wrongly_refused,
            counter.requests
        ),
        percent(quiet.wrongly_refused, quiet.requests),
        accuracy.cloudflare,
        accuracy.cloudflare_source,
        even[COUNTER],
        even[LOG],
        worked_example.spreads[0],
        early[COUNTER],
        early[LOG],
        late[LOG],
    ));
    println!();
}
