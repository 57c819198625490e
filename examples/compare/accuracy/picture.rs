//! Scenario 5's picture.

use super::{Tally, CLIENTS};
use crate::lineup::{LOG, NAMES};
use crate::svg::{BarChart, COLOURS};

/// The shares of requests each approximate algorithm got wrong, as a bar chart.
pub(super) fn render(all: &[Tally; 5]) -> String {
    let approximate = 0..LOG;
    let share = |part: fn(&Tally) -> u64| -> Vec<f64> {
        approximate
            .clone()
            .map(|a| part(&all[a]) as f64 * 100.0 / all[a].requests.max(1) as f64)
            .collect()
    };
    BarChart {
        title: format!(
            "5. Accuracy at scale: {} requests, {CLIENTS} clients, each algorithm against the exact log",
            all[LOG].requests
        ),
        y_label: "share of all requests (log scale)".to_string(),
        categories: approximate.clone().map(|a| NAMES[a].to_string()).collect(),
        measures: vec![
            (
                "wrongly admitted (vs log)".to_string(),
                COLOURS[2],
                share(|t| t.wrongly_admitted),
            ),
            (
                "wrongly refused (vs log)".to_string(),
                COLOURS[0],
                share(|t| t.wrongly_refused),
            ),
            (
                "over-admitted (own history)".to_string(),
                COLOURS[5],
                share(|t| t.over_admitted),
            ),
            (
                "needlessly refused (own history)".to_string(),
                COLOURS[3],
                share(|t| t.needlessly_refused),
            ),
        ],
        format: share_label,
    }
    .render()
}

/// A percentage with two significant digits, or "0".
fn share_label(value: f64) -> String {
    if value <= 0.0 {
        return "0".to_string();
    }
    let decimals = (1 - value.log10().floor() as i32).max(0) as usize;
    format!("{value:.decimals$}%")
}
