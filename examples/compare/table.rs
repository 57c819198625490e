//! Tables and paragraphs printed as Markdown, so that `docs/algorithms.md` quotes the run
//! verbatim, and narrow enough to read in a terminal of 100 columns.

use crate::SECOND;

/// A Markdown table: a header row and rows of cells, numeric columns right-aligned.
#[derive(Debug)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub(crate) fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (as many cells as columns).
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// Prints the table, padded so that it also reads well in a terminal.
    pub(crate) fn print(&self) {
        let columns = self.header.len();
        let width = |c: usize| {
            self.rows
                .iter()
                .map(|r| r[c].chars().count())
                .chain([self.header[c].chars().count(), 3])
                .max()
                .unwrap_or(3)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let numeric: Vec<bool> = (0..columns)
            .map(|c| {
                !self.rows.is_empty()
                    && self.rows.iter().all(|r| {
                        r[c].chars()
                            .next()
                            .is_some_and(|ch| ch.is_ascii_digit() || ch == '-' || ch == '+')
                    })
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    if numeric[c] {
                        format!("{cell:>w$}", w = widths[c])
                    } else {
                        format!("{cell:<w$}", w = widths[c])
                    }
                })
                .collect();
            println!("| {} |", padded.join(" | "));
        };
        line(&self.header);
        let rule: Vec<String> = (0..columns)
            .map(|c| {
                let dashes = "-".repeat(widths[c] - 1);
                if numeric[c] {
                    format!("{dashes}:")
                } else {
                    format!("{dashes}-")
                }
            })
            .collect();
        println!(
            "|{}|",
            rule.iter()
                .map(|r| format!(" {r} "))
                .collect::<Vec<_>>()
                .join("|")
        );
        for row in &self.rows {
            line(row);
        }
        println!();
    }
}

/// Lines of prose are wrapped at this many characters.
const LINE: usize = 96;

/// Prints `text` as one Markdown paragraph, wrapped at [`LINE`] characters, and a blank line.
pub(crate) fn paragraph(text: &str) {
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > LINE {
            println!("{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        println!("{line}");
    }
    println!();
}

/// Prints `text` as one item of a Markdown list, wrapped at [`LINE`] characters, its
/// continuation lines indented under the text.
pub(crate) fn bullet(text: &str) {
    let mut line = String::from("-");
    for word in text.split_whitespace() {
        if line.chars().count() + 1 + word.chars().count() > LINE {
            println!("{line}");
            line = String::from(" ");
        }
        line.push(' ');
        line.push_str(word);
    }
    println!("{line}");
}

/// A count with thousands separators: `12,909,371`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A count and its share of `whole`: `1,155,186 (8.95%)`.
pub(crate) fn count_and_share(part: u64, whole: u64) -> String {
    format!("{} ({})", thousands(part), percent(part, whole))
}

/// `part / whole` as a percentage with enough digits for shares as small as Cloudflare's.
pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "n/a".to_string();
    }
    let share = part as f64 * 100.0 / whole as f64;
    if part == 0 {
        "0%".to_string()
    } else if share >= 1.0 {
        format!("{share:.2}%")
    } else {
        format!("{share:.4}%")
    }
}

/// Seconds with millisecond precision.
pub(crate) fn seconds(nanos: u64) -> String {
    format!("{:.3} s", nanos as f64 / 1e9)
}

/// A time since the scenario's 00:00 as `mm:ss.s`.
pub(crate) fn clock_time(nanos: u64) -> String {
    let tenths = nanos / (SECOND / 10);
    format!("{:02}:{:02}.{}", tenths / 600, tenths / 10 % 60, tenths % 10)
}
