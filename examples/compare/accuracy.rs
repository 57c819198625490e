//! Scenario 5, accuracy at scale: more than ten million requests from 10,000 clients (steady
//! Poisson, on/off bursts, one abusive client per thousand), one limiter per client per
//! algorithm, each algorithm compared request by request with the exact sliding window log, and
//! with the exact rule on its own history.

mod picture;
mod report;

use std::error::Error;

use tollgate::{ManualClock, Quota, Timestamp};

use crate::lineup::{Answer, Lineup, LOG};
use crate::rng::Rng;
use crate::traffic::{Pattern, CLASSES};
use crate::trailing::TrailingWindow;
use crate::{Picture, BASE, SECOND};

const CLIENTS: u64 = 10_000;
const DURATION: u64 = 30 * 60 * SECOND;
const SEED: u64 = 0x7011_6a7e_2026_1130;
/// Cloudflare's published figure for its sliding window counter: the share of requests it
/// wrongly allowed or rate limited, and the traffic measured.
const CLOUDFLARE: &str = "0.003% of 400 million requests from 270,000 sources";
/// Where Cloudflare published it: "How we built rate limiting capable of scaling to millions of
/// domains".
const CLOUDFLARE_SOURCE: &str = "https://blog.cloudflare.com/counting-things-a-lot-of-different-things/";

/// What one algorithm did with one class of clients.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    /// Requests decided.
    pub(crate) requests: u64,
    /// Requests admitted.
    pub(crate) admitted: u64,
    /// Admitted while the log, on its own history, refused the same request.
    pub(crate) wrongly_admitted: u64,
    /// Refused while the log, on its own history, admitted the same request.
    pub(crate) wrongly_refused: u64,
    /// Admitted although its own admissions in `(t - w, t]` already reached the limit.
    pub(crate) over_admitted: u64,
    /// Refused although its own admissions in `(t - w, t]` were below the limit.
    pub(crate) needlessly_refused: u64,
    /// The most of its admissions in any `(t - w, t]`, by decision time.
    pub(crate) worst_window: u64,
    /// The same by the time the request proceeds (differs for the shaper only).
    pub(crate) worst_departure_window: u64,
    /// Clients whose admissions, by decision time, exceeded the limit in some window.
    pub(crate) clients_over: u64,
    /// Clients whose admissions, by the time they proceed, exceeded the limit in some window.
    pub(crate) clients_over_departing: u64,
    /// Clients refused at least once.
    pub(crate) clients_refused: u64,
    /// Clients counted.
    pub(crate) clients: u64,
}

/// What the closing guide cites from this scenario.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// The limit per window.
    pub(crate) limit: u64,
    /// Every client, per algorithm.
    pub(crate) all: [Tally; 5],
    /// The clients the log never refused, per algorithm.
    pub(crate) quiet: [Tally; 5],
    /// Cloudflare's published figure.
    pub(crate) cloudflare: &'static str,
    /// Where Cloudflare published it.
    pub(crate) cloudflare_source: &'static str,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.admitted += other.admitted;
        self.wrongly_admitted += other.wrongly_admitted;
        self.wrongly_refused += other.wrongly_refused;
        self.over_admitted += other.over_admitted;
        self.needlessly_refused += other.needlessly_refused;
        self.worst_window = self.worst_window.max(other.worst_window);
        self.worst_departure_window = self.worst_departure_window.max(other.worst_departure_window);
        self.clients_over += other.clients_over;
        self.clients_over_departing += other.clients_over_departing;
        self.clients_refused += other.clients_refused;
        self.clients += other.clients;
    }
}

/// One algorithm's view of one client: its own admissions, by decision and by departure.
struct Track {
    decided: TrailingWindow,
    departed: TrailingWindow,
    tally: Tally,
}

/// Runs the scenario, prints its tables and returns its picture.
pub(crate) fn run() -> Result<(Picture, Summary), Box<dyn Error>> {
    let quota: Quota = "100/min".parse()?;
    let limit = quota.count();
    let window = quota.period().as_nanos() as u64;
    println!("## Scenario 5: accuracy at scale\n");
    let mut totals = [[Tally::default(); 5]; CLASSES.len()];
    // By whether the log ever refused the client: 0 never, 1 at least once.
    let mut by_limited = [[Tally::default(); 5]; 2];
    let mut arrivals = Vec::new();
    let mut tracks: [Track; 5] = std::array::from_fn(|_| Track {
        decided: TrailingWindow::new(window),
        departed: TrailingWindow::new(window),
        tally: Tally::default(),
    });
    for client in 0..CLIENTS {
        let mut rng = Rng::new(SEED, client);
        let pattern = Pattern::for_client(client, &mut rng);
        // Each client starts at its own point of the minute, so that windows do not align.
        let start = BASE + rng.exponential_nanos(20.0 * SECOND as f64) % window;
        pattern.arrivals(&mut rng, start, DURATION, &mut arrivals);
        let clock = ManualClock::starting_at(Timestamp::from_nanos(start));
        let lineup = Lineup::new(quota, quota, &clock)?;
        for track in tracks.iter_mut() {
            track.decided.clear();
            track.departed.clear();
            track.tally = Tally {
                clients: 1,
                ..Tally::default()
            };
        }
        for &at in &arrivals {
            clock.set(Timestamp::from_nanos(at));
            let answers = lineup.check();
            let truth = answers[LOG].allowed;
            for (track, answer) in tracks.iter_mut().zip(answers) {
                record(track, answer, truth, at, limit);
            }
        }
        for track in tracks.iter_mut() {
            track.tally.clients_over = u64::from(track.tally.worst_window > limit);
            track.tally.clients_over_departing = u64::from(track.tally.worst_departure_window > limit);
            track.tally.clients_refused = u64::from(track.tally.admitted < track.tally.requests);
        }
        let limited = tracks[LOG].tally.clients_refused as usize;
        for (a, track) in tracks.iter().enumerate() {
            totals[pattern.class()][a].add(&track.tally);
            by_limited[limited][a].add(&track.tally);
        }
    }
    let mut all = [Tally::default(); 5];
    for class in &totals {
        for (a, tally) in class.iter().enumerate() {
            all[a].add(tally);
        }
    }
    report::print(quota, &totals, &all, &by_limited);
    let picture = Picture {
        file: "compare-accuracy-at-scale.svg",
        svg: picture::render(&all),
    };
    let summary = Summary {
        limit,
        all,
        quiet: by_limited[0],
        cloudflare: CLOUDFLARE,
        cloudflare_source: CLOUDFLARE_SOURCE,
    };
    Ok((picture, summary))
}

/// Counts one algorithm's answer to one request.
fn record(track: &mut Track, answer: Answer, truth: bool, at: u64, limit: u64) {
    let tally = &mut track.tally;
    tally.requests += 1;
    let before = track.decided.count_at(at);
    if answer.allowed {
        tally.admitted += 1;
        tally.wrongly_admitted += u64::from(!truth);
        tally.over_admitted += u64::from(before >= limit);
        tally.worst_window = tally.worst_window.max(track.decided.push(at));
        let departs = at.saturating_add(answer.delay_nanos);
        tally.worst_departure_window = tally.worst_departure_window.max(track.departed.push(departs));
    } else {
        tally.wrongly_refused += u64::from(truth);
        tally.needlessly_refused += u64::from(before < limit);
    }
}
