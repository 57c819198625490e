//! Scenario 5's tables.

use tollgate::Quota;

use super::{Tally, CLIENTS, CLOUDFLARE, CLOUDFLARE_SOURCE, DURATION, SEED};
use crate::lineup::{COUNTER, LOG, NAMES, SHAPER};
use crate::table::{count_and_share, paragraph, percent, thousands, Table};
use crate::traffic::{describe, CLASSES};
use crate::SECOND;

/// Prints the scenario's tables.
pub(super) fn print(quota: Quota, totals: &[[Tally; 5]; 3], all: &[Tally; 5], by_limited: &[[Tally; 5]; 2]) {
    let limit = quota.count();
    let window = format!("(t − {} s, t]", quota.period().as_secs());
    paragraph(&format!(
        "{} clients send {} requests over {} minutes, each client through its own limiter of every \
         algorithm at `{quota}` (buckets: burst {}), the traffic replayed from a seeded generator \
         (seed {SEED:#x}). It measures how often each algorithm decides a request differently from \
         the exact log, and how far each lets a client go over the limit.",
        thousands(CLIENTS),
        thousands(all[LOG].requests),
        DURATION / 60 / SECOND,
        quota.burst(),
    ));
    let mut traffic = Table::new(&["kind", "clients", "requests", "each sends"]);
    for (c, class) in CLASSES.iter().enumerate() {
        traffic.row(vec![
            class.to_string(),
            thousands(totals[c][LOG].clients),
            thousands(totals[c][LOG].requests),
            describe(c),
        ]);
    }
    traffic.print();

    paragraph(
        "**Against the log, request by request.** Every algorithm and the log decide each request, \
         each on its own history of admissions.",
    );
    let mut table = Table::new(&[
        "algorithm",
        "admitted",
        "wrongly admitted",
        "wrongly refused",
        "differ",
    ]);
    for (a, name) in NAMES.iter().enumerate() {
        let t = &all[a];
        table.row(vec![
            name.to_string(),
            count_and_share(t.admitted, t.requests),
            count_and_share(t.wrongly_admitted, t.requests),
            count_and_share(t.wrongly_refused, t.requests),
            percent(t.wrongly_admitted + t.wrongly_refused, t.requests),
        ]);
    }
    table.print();
    paragraph(
        "wrongly admitted: admitted while the log refused the same request; wrongly refused: the \
         reverse; differ: either, as a share of all requests. Once an algorithm's history parts from \
         the log's, later differences partly follow from the first.",
    );
    paragraph("Share of requests decided differently from the log, by kind of client:");
    let mut header = vec!["algorithm"];
    header.extend(CLASSES);
    let mut by_class = Table::new(&header);
    for (a, name) in NAMES.iter().enumerate() {
        let mut row = vec![name.to_string()];
        for class in totals {
            let t = &class[a];
            row.push(percent(t.wrongly_admitted + t.wrongly_refused, t.requests));
        }
        by_class.row(row);
    }
    by_class.print();
    let [quiet, limited] = by_limited;
    paragraph("The same, by whether the log ever refused the client:");
    let mut by_group = Table::new(&[
        "algorithm",
        "quiet: refused",
        "clients hit",
        "limited: admitted",
        "limited: refused",
    ]);
    for (a, name) in NAMES.iter().enumerate() {
        by_group.row(vec![
            name.to_string(),
            count_and_share(quiet[a].wrongly_refused, quiet[a].requests),
            format!("{} of {}", quiet[a].clients_refused, thousands(quiet[a].clients)),
            percent(limited[a].wrongly_admitted, limited[a].requests),
            percent(limited[a].wrongly_refused, limited[a].requests),
        ]);
    }
    by_group.print();
    paragraph(&format!(
        "quiet: the {} clients ({} requests) the log never refused, where every difference is a wrong \
         refusal; refused: their requests wrongly refused; clients hit: quiet clients refused at least \
         once. limited: the {} clients ({} requests) the log refused at least once; the shares of \
         their requests wrongly admitted and wrongly refused.",
        thousands(quiet[LOG].clients),
        thousands(quiet[LOG].requests),
        thousands(limited[LOG].clients),
        thousands(limited[LOG].requests),
    ));
    paragraph(&format!(
        "Cloudflare measured its sliding window counter wrongly allowing or rate limiting {CLOUDFLARE}, \
         on its own traffic ({CLOUDFLARE_SOURCE}). Here the sliding window counter decided {} of all requests and {} of the \
         quiet clients' requests differently from the log.",
        percent(
            all[COUNTER].wrongly_admitted + all[COUNTER].wrongly_refused,
            all[COUNTER].requests
        ),
        percent(quiet[COUNTER].wrongly_refused, quiet[COUNTER].requests),
    ));

    paragraph(&format!(
        "**Against the exact rule, on its own history.** Each algorithm is judged on its own \
         admissions alone, so no drift between two histories enters: a request should pass exactly \
         when fewer than {limit} of the algorithm's admissions fall in {window}."
    ));
    let mut strict = Table::new(&[
        "algorithm",
        "over-admitted",
        "needlessly refused",
        "clients refused",
    ]);
    for (a, name) in NAMES.iter().enumerate() {
        let t = &all[a];
        strict.row(vec![
            name.to_string(),
            count_and_share(t.over_admitted, t.requests),
            count_and_share(t.needlessly_refused, t.requests),
            format!("{} of {}", thousands(t.clients_refused), thousands(t.clients)),
        ]);
    }
    strict.print();
    paragraph(&format!(
        "over-admitted: admitted although its own admissions in {window} had reached {limit} already; \
         needlessly refused: refused although they were below {limit}; clients refused: clients \
         refused at least once."
    ));
    let mut worst = Table::new(&["algorithm", "worst window", "clients over"]);
    let mut rows: Vec<(String, u64, u64, u64)> = NAMES
        .iter()
        .enumerate()
        .map(|(a, name)| {
            let t = &all[a];
            (name.to_string(), t.worst_window, t.clients_over, t.clients)
        })
        .collect();
    let shaper = &all[SHAPER];
    rows.insert(
        SHAPER + 1,
        (
            "leaky bucket, by departure".to_string(),
            shaper.worst_departure_window,
            shaper.clients_over_departing,
            shaper.clients,
        ),
    );
    for (name, most, over, clients) in rows {
        worst.row(vec![
            name,
            format!("{most} (+{})", most.saturating_sub(limit)),
            format!("{} of {}", thousands(over), thousands(clients)),
        ]);
    }
    worst.print();
    paragraph(&format!(
        "worst window: the most of its own admissions in any {window}, and how far above {limit}; \
         clients over: clients whose admissions went above {limit} in some such window. The shaper's \
         second row counts its requests by the time they proceed."
    ));
    let log = &all[LOG];
    let consistent = log.over_admitted == 0 && log.needlessly_refused == 0 && log.worst_window <= limit;
    paragraph(&format!(
        "Cross-check of the log against this example's own trailing-window count: {} over-admitted, \
         {} needlessly refused, worst window {}: {}.",
        log.over_admitted,
        log.needlessly_refused,
        log.worst_window,
        if consistent { "consistent" } else { "MISMATCH" }
    ));
}
