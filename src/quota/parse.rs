//! The quota string grammar: `100/min`, `10/s burst 20`, `5 per 10s`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::Quota;
use crate::error::{QuotaError, PERIOD_LIMIT};

/// Units a period may be written in, with their length in nanoseconds.
const UNITS: &[(&[&str], u64)] = &[
    (&["ns", "nanosecond", "nanoseconds"], 1),
    // `µs` with U+00B5 MICRO SIGN, then with U+03BC GREEK SMALL LETTER MU, which looks the same
    // (and which `ΜS`, uppercase mu, lowercases to).
    (&["us", "µs", "μs", "microsecond", "microseconds"], 1_000),
    (&["ms", "millisecond", "milliseconds"], 1_000_000),
    (&["s", "sec", "secs", "second", "seconds"], 1_000_000_000),
    (&["min", "m", "mins", "minute", "minutes"], 60_000_000_000),
    (&["h", "hr", "hrs", "hour", "hours"], 3_600_000_000_000),
    (&["d", "day", "days"], 86_400_000_000_000),
];

/// Why a string is not a quota. Its message quotes the part that is wrong and says what was
/// expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseQuotaError {
    input: String,
    reason: Reason,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Reason {
    Empty,
    NoSeparator,
    BadCount { what: &'static str, found: String },
    NoPeriod,
    NotAPeriod { found: String },
    NoUnit { found: String },
    UnknownUnit { found: String },
    FractionalPeriod { found: String },
    UnexpectedTail { found: String },
    RepeatedBurst { found: String },
    Invalid(QuotaError),
    PeriodOverflow { found: String, error: QuotaError },
}

impl ParseQuotaError {
    /// The quota error behind it, when the string parsed but described an invalid quota (zero
    /// count, zero period, a period that overflows: see [`QuotaError::PeriodOverflow`] for a
    /// period longer than a `Duration` holds).
    pub fn quota_error(&self) -> Option<&QuotaError> {
        match &self.reason {
            Reason::Invalid(error) | Reason::PeriodOverflow { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl fmt::Display for ParseQuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid quota {:?}: ", self.input)?;
        match &self.reason {
            Reason::Empty => f.write_str("it is empty; expected `<count>/<period>`, for example `100/min`"),
            Reason::NoSeparator => {
                f.write_str("expected `<count>/<period>` (or `<count> per <period>`), for example `100/min`")
            }
            Reason::BadCount { what, found } => {
                write!(
                    f,
                    "the {what} must be a whole number from 1 to {}, found {found:?}",
                    u64::MAX
                )
            }
            Reason::NoPeriod => f.write_str(
                "the period is missing; expected `<count>/<period>`, for example `100/min` or `10/s burst 20`",
            ),
            Reason::NotAPeriod { found } => write!(
                f,
                "expected a period (a unit, after a number or alone: `10s`, `500 ms`, `min`), found {found:?}"
            ),
            Reason::NoUnit { found } => write!(
                f,
                "the period {found:?} has no unit; write one of ns, us, ms, s, min, h, d (for example `10s`)"
            ),
            Reason::FractionalPeriod { found } => write!(
                f,
                "the period {found:?} is not a whole number of its unit; use a smaller unit (`1500ms`, not `1.5s`)"
            ),
            Reason::UnknownUnit { found } => {
                write!(
                    f,
                    "unknown time unit {found:?}; expected one of ns, us, ms, s, min, h, d"
                )
            }
            Reason::UnexpectedTail { found } => {
                write!(
                    f,
                    "unexpected {found:?} after the period; the only option is `burst <count>`"
                )
            }
            Reason::RepeatedBurst { found } => write!(
                f,
                "`burst` is given twice (found {found:?} after the first); expected `burst <count>` once"
            ),
            Reason::Invalid(error) => fmt::Display::fmt(error, f),
            Reason::PeriodOverflow { found, .. } => write!(f, "the period {found:?} {PERIOD_LIMIT}"),
        }
    }
}

/// No source: the message already says what an invalid quota's [`QuotaError`] says (an error
/// chain printer would print it twice); [`ParseQuotaError::quota_error`] gives it typed.
impl std::error::Error for ParseQuotaError {}

/// Parses the quota grammar:
///
/// ```text
/// quota  = count ("/" | "per") period ["burst" count]
/// period = [count] unit            e.g. "s", "10s", "500 ms", "min", "1h"
/// unit   = ns | us | µs | ms | s | sec | m | min | h | hr | d | day   (and plural/long forms)
/// count  = decimal digits, '_' allowed between digits
/// ```
///
/// Whitespace between tokens is optional; letters are case-insensitive. `m` means minutes. The
/// `µ` of `µs` may be U+00B5 MICRO SIGN or U+03BC GREEK SMALL LETTER MU.
///
/// ```
/// use std::time::Duration;
/// use tollgate::Quota;
///
/// let q: Quota = "10 per 500ms burst 3".parse()?;
/// assert_eq!((q.count(), q.period(), q.burst()), (10, Duration::from_millis(500), 3));
///
/// let err = "10/fortnight".parse::<Quota>().unwrap_err();
/// assert!(err.to_string().contains("unknown time unit \"fortnight\""));
/// assert!("0/s".parse::<Quota>().unwrap_err().quota_error().is_some());
/// # Ok::<(), tollgate::ParseQuotaError>(())
/// ```
impl FromStr for Quota {
    type Err = ParseQuotaError;

    fn from_str(input: &str) -> Result<Quota, ParseQuotaError> {
        let fail = |reason| ParseQuotaError {
            input: input.to_owned(),
            reason,
        };
        let text = input.trim();
        if text.is_empty() {
            return Err(fail(Reason::Empty));
        }
        let lower = text.to_lowercase();
        let (count_text, rest) = split_separator(&lower).ok_or_else(|| fail(Reason::NoSeparator))?;
        let count = parse_count(count_text.trim(), "count").map_err(fail)?;
        let (period_text, burst_text) = match burst_keyword(rest) {
            Some(at) => (&rest[..at], Some(rest[at + "burst".len()..].trim())),
            None => (rest, None),
        };
        let period_text = period_text.trim();
        let period_nanos = parse_period(period_text).map_err(fail)?;
        // A period past a u64 of nanoseconds is refused by `Quota::new` with the period asked
        // for (or `Duration::MAX` when even a Duration cannot hold it; the message quotes it).
        let period = match u64::try_from(period_nanos) {
            Ok(nanos) => Duration::from_nanos(nanos),
            Err(_) => u64::try_from(period_nanos / 1_000_000_000)
                .map(|secs| Duration::new(secs, (period_nanos % 1_000_000_000) as u32))
                .unwrap_or(Duration::MAX),
        };
        let mut quota = Quota::new(count, period).map_err(|e| fail(quota_refused(period_text, e)))?;
        if let Some(burst_text) = burst_text {
            let burst = parse_burst(burst_text).map_err(fail)?;
            quota = quota.with_burst(burst).map_err(|e| fail(Reason::Invalid(e)))?;
        }
        Ok(quota)
    }
}

/// `Quota::new`'s error as a reason; an overflow quotes the period as written (`period`), which
/// the error's `Duration` may not hold.
fn quota_refused(period: &str, error: QuotaError) -> Reason {
    match error {
        QuotaError::PeriodOverflow { .. } => Reason::PeriodOverflow {
            found: period.to_owned(),
            error,
        },
        error => Reason::Invalid(error),
    }
}

/// Where the word `burst` starts (not `bursts` or `burstiness`: those are left to the period,
/// whose error then names the unexpected text).
fn burst_keyword(text: &str) -> Option<usize> {
    text.match_indices("burst")
        .map(|(at, _)| at)
        .find(|&at| !text[at + "burst".len()..].starts_with(|c: char| c.is_alphabetic()))
}

/// Splits `count/period` or `count per period` (`per` right after the count's digits, with or
/// without whitespace around it).
fn split_separator(text: &str) -> Option<(&str, &str)> {
    if let Some((count, rest)) = text.split_once('/') {
        return Some((count, rest));
    }
    let count_end = text.find(|c: char| !(c.is_ascii_digit() || c == '_'))?;
    if count_end == 0 {
        return None;
    }
    let rest = text[count_end..].trim_start().strip_prefix("per")?;
    // `100 per` with nothing after it: the whole form is missing, not just a unit.
    (!rest.trim().is_empty()).then_some((&text[..count_end], rest))
}

/// The count after `burst`, which must not hold a second `burst`.
fn parse_burst(text: &str) -> Result<u64, Reason> {
    if burst_keyword(text).is_some() {
        return Err(Reason::RepeatedBurst {
            found: text.to_owned(),
        });
    }
    parse_count(text, "burst")
}

/// A whole number with optional `_` separators. Zero parses (the quota rejects it with a typed
/// error); anything else that is not a `u64` is a parse error.
fn parse_count(text: &str, what: &'static str) -> Result<u64, Reason> {
    let digits: String = text.chars().filter(|&c| c != '_').collect();
    let well_formed = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !text.starts_with('_')
        && !text.ends_with('_');
    well_formed
        .then(|| digits.parse::<u64>().ok())
        .flatten()
        .ok_or_else(|| Reason::BadCount {
            what,
            found: text.to_owned(),
        })
}

/// `[count] unit` to nanoseconds (a `u128` cannot overflow: both factors are `u64`s).
fn parse_period(text: &str) -> Result<u128, Reason> {
    // `10/`, `10/burst 5`: nothing between the separator and the end or `burst`.
    if text.is_empty() {
        return Err(Reason::NoPeriod);
    }
    let unit_at = text
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = (text[..unit_at].trim(), text[unit_at..].trim());
    // `1.5s`, `1,5s`: a fraction, not a unit named `.5s`.
    let mut after = unit.chars();
    if !number.is_empty()
        && matches!(after.next(), Some('.' | ','))
        && after.next().is_some_and(|c| c.is_ascii_digit())
    {
        return Err(Reason::FractionalPeriod {
            found: text.to_owned(),
        });
    }
    if unit.is_empty() {
        return Err(Reason::NoUnit {
            found: text.to_owned(),
        });
    }
    let multiplier = if number.is_empty() {
        1
    } else {
        parse_count(number, "period")?
    };
    let nanos = unit_nanos(unit).ok_or_else(|| unit_error(text, unit))?;
    Ok(u128::from(multiplier) * u128::from(nanos))
}

/// Why `unit`, the part of the period `text` after its number, is not a unit: one word is an
/// unknown unit; several are a period followed by something else (`s queue 4`) when the first
/// is a unit, else no period at all (`per s` in `10 per per s`).
fn unit_error(text: &str, unit: &str) -> Reason {
    let mut words = unit.split_whitespace();
    let first = words.next().unwrap_or(unit);
    if words.next().is_none() {
        Reason::UnknownUnit {
            found: unit.to_owned(),
        }
    } else if unit_nanos(first).is_some() {
        Reason::UnexpectedTail {
            found: unit.to_owned(),
        }
    } else {
        Reason::NotAPeriod {
            found: text.to_owned(),
        }
    }
}

/// The length of the unit named `name`, in nanoseconds.
fn unit_nanos(name: &str) -> Option<u64> {
    UNITS
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|&(_, nanos)| nanos)
}

/// Writes a period in the largest unit that divides it.
pub(super) fn write_period(f: &mut fmt::Formatter<'_>, nanos: u64) -> fmt::Result {
    let (names, unit_nanos) = UNITS
        .iter()
        .rev()
        .find(|(_, unit_nanos)| nanos.is_multiple_of(*unit_nanos))
        .copied()
        .unwrap_or(UNITS[0]);
    let name = names[0];
    match nanos / unit_nanos {
        1 => f.write_str(name),
        n => write!(f, "{n}{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Quota, ParseQuotaError> {
        s.parse()
    }

    #[test]
    fn reads_the_documented_forms() {
        let q = parse("100/min").unwrap();
        assert_eq!(
            (q.count(), q.period(), q.explicit_burst()),
            (100, Duration::from_secs(60), None)
        );
        let q = parse("10/s burst 20").unwrap();
        assert_eq!(
            (q.count(), q.period(), q.burst()),
            (10, Duration::from_secs(1), 20)
        );
        assert_eq!(
            parse(" 5 PER 10 Seconds ").unwrap(),
            Quota::new(5, Duration::from_secs(10)).unwrap()
        );
        assert_eq!(parse("1_000/1h").unwrap(), Quota::per_hour(1000).unwrap());
        assert_eq!(parse("3/250us").unwrap().period(), Duration::from_micros(250));
        assert_eq!(parse("3/2m").unwrap().period(), Duration::from_secs(120));
        assert_eq!(parse("7/d").unwrap().period(), Duration::from_secs(86_400));
        // Whitespace around `per` is optional, and any whitespace will do.
        let five_per_ten = Quota::new(5, Duration::from_secs(10)).unwrap();
        for text in [
            "5per10s",
            "5 per10s",
            "5per 10s",
            "5\tper\t10s",
            "5\nper 10s",
            "5_per_10s",
        ] {
            assert_eq!(
                parse(text).ok(),
                (!text.contains('_')).then_some(five_per_ten),
                "{text:?}"
            );
        }
    }

    #[test]
    fn micro_sign_and_greek_mu_both_mean_microseconds() {
        // U+00B5 MICRO SIGN and U+03BC GREEK SMALL LETTER MU look alike; uppercase mu (U+039C,
        // also the micro sign's uppercase) lowercases to U+03BC.
        for text in [
            "3/250us",
            "3/250\u{b5}s",
            "3/250\u{b5}S",
            "3/250\u{3bc}s",
            "3/250\u{39c}S",
            "3 per 250 \u{3bc}s",
        ] {
            assert_eq!(
                parse(text).map(|q| q.period()),
                Ok(Duration::from_micros(250)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["100/min", "10/s burst 20", "3/1500ms", "1/7ns", "9/2h burst 1"] {
            let q = parse(text).unwrap();
            assert_eq!(parse(&q.to_string()).unwrap(), q, "{text} -> {q}");
        }
        assert_eq!(parse("10/60s").unwrap().to_string(), "10/min");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let cases = [
            ("", "empty"),
            ("100", "expected `<count>/<period>`"),
            ("abc/s", "count must be a whole number"),
            ("-1/s", "count must be a whole number"),
            ("99999999999999999999/s", "count must be a whole number"),
            ("10/fortnight", "unknown time unit \"fortnight\""),
            ("10/10", "has no unit"),
            ("10/s burst", "burst must be a whole number"),
            ("10/s burst x", "burst must be a whole number"),
            ("10/s queue 4", "unexpected \"s queue 4\""),
            ("_1/s", "count must be a whole number"),
            ("10/1.5s", "not a whole number of its unit"),
            ("10/s bursts 20", "unexpected \"s bursts 20\""),
            ("10 per 2,5 min", "not a whole number of its unit"),
            ("five per s", "expected `<count>/<period>`"),
        ];
        for (text, needle) in cases {
            let message = parse(text).unwrap_err().to_string();
            assert!(message.contains(needle), "{text:?}: {message}");
        }
    }

    #[test]
    fn invalid_quotas_keep_their_typed_error() {
        assert_eq!(
            parse("0/s").unwrap_err().quota_error(),
            Some(&QuotaError::ZeroCount)
        );
        assert_eq!(
            parse("5/0s").unwrap_err().quota_error(),
            Some(&QuotaError::ZeroPeriod)
        );
        assert_eq!(
            parse("5/s burst 0").unwrap_err().quota_error(),
            Some(&QuotaError::ZeroBurst)
        );
        assert!(matches!(
            parse("5/1000000d").unwrap_err().quota_error(),
            Some(QuotaError::PeriodOverflow { .. })
        ));
    }
}
