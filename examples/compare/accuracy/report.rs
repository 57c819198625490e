//! Scenario 5's tables.

use tollgate::Quota;

use super::{Tally, CLIENTS, CLOUDFLARE, DURATION, SEED};
use crate::lineup::{LOG, NAMES, SHAPER};
use crate::table::{percent, Table};
use crate::traffic::CLASSES;
use crate::SECOND;

/// Prints the scenario's tables.
pub(super) fn print(quota: Quota, totals: &[[Tally; 5]; 3], all: &[Tally; 5], by_limited: &[[Tally; 5]; 2]) {
    let clients: Vec<String> = (0..CLASSES.len())
        .map(|c| {
            format!(
                "{} {} clients ({} requests)",
                totals[c][LOG].clients, CLASSES[c], totals[c][LOG].requests
            )
        })
        .collect();
    println!(
        "Every algorithm `{quota}` (buckets: burst 100), one limiter per client per algorithm. {} \
         requests from {CLIENTS} clients over {} minutes (seed {SEED:#x}): {}. Steady rates are \
         log-uniform in 5-130/min; on/off clients are silent for 90 s and send for 15 s on average, at \
         120-600/min while on; abusive clients send 1,000/min.\n",
        all[LOG].requests,
        DURATION / 60 / SECOND,
        clients.join(", ")
    );
    println!(
        "**Decided differently from the log.** Every algorithm runs on its own state (its own \
         history of admissions); the log runs on its own. For each request, compare the two \
         decisions.\n"
    );
    let mut table = Table::new(&[
        "algorithm",
        "admitted",
        "wrongly admitted",
        "wrongly refused",
        "decided differently",
        "share of requests",
    ]);
    for (a, name) in NAMES.iter().enumerate() {
        let t = &all[a];
        let differing = t.wrongly_admitted + t.wrongly_refused;
        table.row(vec![
            name.to_string(),
            format!("{} ({})", t.admitted, percent(t.admitted, t.requests)),
            format!(
                "{} ({})",
                t.wrongly_admitted,
                percent(t.wrongly_admitted, t.requests)
            ),
            format!(
                "{} ({})",
                t.wrongly_refused,
                percent(t.wrongly_refused, t.requests)
            ),
            differing.to_string(),
            percent(differing, t.requests),
        ]);
    }
    table.print();
    println!(
        "Cloudflare reported {CLOUDFLARE} wrongly allowed or rate limited by its sliding window \
         counter; here the sliding window counter decided {} of {} requests differently from the log.\n",
        percent(all[3].wrongly_admitted + all[3].wrongly_refused, all[3].requests),
        all[3].requests
    );
    println!("Decided differently, by kind of client:\n");
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
    println!(
        "Decided differently, by whether the client ever reached the limit: {} clients ({} requests) \
         were never refused by the log, {} clients ({} requests) were refused at least once. For the \
         first group every difference is a wrong refusal (false positive).\n",
        quiet[LOG].clients, quiet[LOG].requests, limited[LOG].clients, limited[LOG].requests
    );
    let mut by_group = Table::new(&[
        "algorithm",
        "never limited: wrongly refused",
        "clients wrongly refused",
        "limited: wrongly admitted",
        "limited: wrongly refused",
    ]);
    for (a, name) in NAMES.iter().enumerate() {
        by_group.row(vec![
            name.to_string(),
            format!(
                "{} ({})",
                quiet[a].wrongly_refused,
                percent(quiet[a].wrongly_refused, quiet[a].requests)
            ),
            format!("{} of {}", quiet[a].clients_refused, quiet[a].clients),
            percent(limited[a].wrongly_admitted, limited[a].requests),
            percent(limited[a].wrongly_refused, limited[a].requests),
        ]);
    }
    by_group.print();
    println!(
        "**Against the exact rule, on its own history** (the stricter, cleaner measure: no drift \
         between two histories). Over-admitted: admitted although the algorithm's own admissions in \
         (t − 60 s, t] had already reached 100. Needlessly refused: refused although they were \
         below 100. Worst window: the most of its own admissions in any (t − 60 s, t] (the shaper's \
         also by the time its requests proceed); overshoot is that minus 100.\n"
    );
    let mut strict = Table::new(&[
        "algorithm",
        "over-admitted",
        "needlessly refused",
        "worst window (overshoot)",
        "worst window by departure",
        "clients above the limit",
        "clients ever refused",
    ]);
    let limit = quota.count();
    for (a, name) in NAMES.iter().enumerate() {
        let t = &all[a];
        strict.row(vec![
            name.to_string(),
            format!("{} ({})", t.over_admitted, percent(t.over_admitted, t.requests)),
            format!(
                "{} ({})",
                t.needlessly_refused,
                percent(t.needlessly_refused, t.requests)
            ),
            format!("{} (+{})", t.worst_window, t.worst_window.saturating_sub(limit)),
            if a == SHAPER {
                format!(
                    "{} (+{})",
                    t.worst_departure_window,
                    t.worst_departure_window.saturating_sub(limit)
                )
            } else {
                "same".to_string()
            },
            format!("{} of {}", t.clients_over, t.clients),
            format!("{} of {}", t.clients_refused, t.clients),
        ]);
    }
    strict.print();
    let log = &all[LOG];
    let consistent = log.over_admitted == 0 && log.needlessly_refused == 0 && log.worst_window <= limit;
    println!(
        "Cross-check of the log against this example's own trailing-window count: {} over-admitted, {} \
         needlessly refused, worst window {}: {}.\n",
        log.over_admitted,
        log.needlessly_refused,
        log.worst_window,
        if consistent { "consistent" } else { "MISMATCH" }
    );
}
