//! Which algorithm a distributed limiter runs, and its parameters turned into the integer
//! microseconds of its Lua script, checked once at construction.

use std::sync::LazyLock;
use std::time::Duration;

use super::error::RedisConfigError;
use super::fine_rate::FineRate;
use super::script::LuaScript;
use crate::algorithm::Algorithm;
use crate::{FixedWindow, LeakyBucket, Quota, SlidingLog, SlidingWindow, TokenBucket};

/// The largest span (a tolerance, a window) or count (a window's limit) a script may hold, in
/// microseconds or units: 2^51, so that adding a time below [`MAX_TIME_MICROS`] stays below
/// 2^53, the end of the integers a Lua number (a double) holds exactly. The sliding window's
/// products of a count and a span, which pass it for large limits over long windows, are
/// computed in two exact limbs (`sliding_window.lua`).
pub(crate) const MAX_SPAN_MICROS: u64 = 1 << 51;

/// Times at or after this many microseconds since the epoch (2^52, the year 2112) are refused.
pub(crate) const MAX_TIME_MICROS: u64 = 1 << 52;

/// The largest limit of a sliding log kept in Redis: above [`PACKED_LOG_LIMIT`] the log is a list
/// with one entry per unit, and a request of weight `n` pushes `n` entries in one script (which
/// Redis runs alone).
pub const MAX_LOG_LIMIT: u64 = 1 << 16;

/// The largest limit of a sliding log kept in one packed string (`sliding_log.lua`: one `GET`
/// and, on an admission, one `SETRANGE` and one `PEXPIRE`, or one `PSETEX` when the string is
/// rewritten without its expired records; but each decision copies the string, 12 bytes per
/// admission time it holds). Larger logs are Redis lists searched with `LINDEX`
/// (`sliding_log_list.lua`: a few more calls, none of which copies the log), cheaper past a few
/// hundred entries (`docs/distributed.md`, "Sliding log").
pub const PACKED_LOG_LIMIT: u64 = 256;

/// The algorithm a [`RedisLimiter`](super::RedisLimiter) runs: one of the core's
/// configurations, built from a [`Quota`] exactly as for a local limiter.
///
/// ```
/// use tollgate::distributed::RedisAlgorithm;
/// use tollgate::{SlidingWindow, TokenBucket};
///
/// let bucket: RedisAlgorithm = TokenBucket::new("10/s burst 20".parse()?)?.into();
/// let window: RedisAlgorithm = SlidingWindow::new("100/min".parse()?)?.into();
/// assert_eq!(bucket.capacity(), 20);
/// assert_eq!(window.capacity(), 100);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisAlgorithm {
    /// [`TokenBucket`], by GCRA: the key holds the theoretical arrival time.
    TokenBucket(TokenBucket),
    /// [`LeakyBucket`] shaper, by GCRA: the key holds the time the queue is empty.
    LeakyBucket(LeakyBucket),
    /// [`FixedWindow`]: the key holds the window index, its count and the window's length.
    FixedWindow(FixedWindow),
    /// [`SlidingWindow`] counter: the key holds the window index, both counts and the window's
    /// length.
    SlidingWindow(SlidingWindow),
    /// [`SlidingLog`]: the key holds the admission times in the window: up to
    /// [`PACKED_LOG_LIMIT`], one packed record per distinct time with the units admitted then;
    /// above it, a list with one entry per unit. The limit is at most [`MAX_LOG_LIMIT`].
    SlidingLog(SlidingLog),
}

impl From<TokenBucket> for RedisAlgorithm {
    fn from(algorithm: TokenBucket) -> Self {
        RedisAlgorithm::TokenBucket(algorithm)
    }
}

impl From<LeakyBucket> for RedisAlgorithm {
    fn from(algorithm: LeakyBucket) -> Self {
        RedisAlgorithm::LeakyBucket(algorithm)
    }
}

impl From<FixedWindow> for RedisAlgorithm {
    fn from(algorithm: FixedWindow) -> Self {
        RedisAlgorithm::FixedWindow(algorithm)
    }
}

impl From<SlidingWindow> for RedisAlgorithm {
    fn from(algorithm: SlidingWindow) -> Self {
        RedisAlgorithm::SlidingWindow(algorithm)
    }
}

impl From<SlidingLog> for RedisAlgorithm {
    fn from(algorithm: SlidingLog) -> Self {
        RedisAlgorithm::SlidingLog(algorithm)
    }
}

impl RedisAlgorithm {
    /// The heaviest single request that can ever pass (as for the local limiter).
    pub fn capacity(&self) -> u64 {
        match self {
            RedisAlgorithm::TokenBucket(a) => a.capacity(),
            RedisAlgorithm::LeakyBucket(a) => a.capacity(),
            RedisAlgorithm::FixedWindow(a) => a.capacity(),
            RedisAlgorithm::SlidingWindow(a) => a.capacity(),
            RedisAlgorithm::SlidingLog(a) => a.limit(),
        }
    }

    /// The algorithm's name, as error messages say it.
    pub fn name(&self) -> &'static str {
        match self {
            RedisAlgorithm::TokenBucket(_) => "token bucket",
            RedisAlgorithm::LeakyBucket(_) => "leaky bucket",
            RedisAlgorithm::FixedWindow(_) => "fixed window counter",
            RedisAlgorithm::SlidingWindow(_) => "sliding window counter",
            RedisAlgorithm::SlidingLog(_) => "sliding window log",
        }
    }

    /// The Lua source of the algorithm's script (for inspection and benchmarks).
    pub fn script_source(&self) -> &'static str {
        match self {
            RedisAlgorithm::TokenBucket(_) | RedisAlgorithm::LeakyBucket(_) => GCRA_SCRIPT,
            RedisAlgorithm::FixedWindow(_) => FIXED_WINDOW_SCRIPT,
            RedisAlgorithm::SlidingWindow(_) => SLIDING_WINDOW_SCRIPT,
            RedisAlgorithm::SlidingLog(a) if a.limit() <= PACKED_LOG_LIMIT => SLIDING_LOG_SCRIPT,
            RedisAlgorithm::SlidingLog(_) => SLIDING_LOG_LIST_SCRIPT,
        }
    }

    /// The script and its parameters, after checking that every intermediate value stays an
    /// exact integer in Lua.
    pub(crate) fn program(&self) -> Result<Program, RedisConfigError> {
        let name = self.name();
        let mut other_suffix = None;
        let (suffix, params, reader) = match *self {
            RedisAlgorithm::TokenBucket(a) => match FineRate::of(name, &a.quota())? {
                Some(rate) => ("tb2", [0; 2], Reader::Fine { rate, shaper: false }),
                None => {
                    let (params, bucket) = gcra(name, a.emission_interval(), a.capacity())?;
                    let bucket =
                        TokenBucket::new(bucket).map_err(|_| too_large(name, a.capacity(), params))?;
                    ("tb2", params, Reader::TokenBucket(bucket))
                }
            },
            RedisAlgorithm::LeakyBucket(a) => match FineRate::of(name, &a.quota())? {
                Some(rate) => ("lb2", [0; 2], Reader::Fine { rate, shaper: true }),
                None => {
                    let (params, bucket) = gcra(name, a.emission_interval(), a.capacity())?;
                    let shaper =
                        LeakyBucket::new(bucket).map_err(|_| too_large(name, a.capacity(), params))?;
                    ("lb2", params, Reader::LeakyBucket(shaper))
                }
            },
            RedisAlgorithm::FixedWindow(a) => {
                let window = whole_micros(name, a.window())?;
                let limit = at_most(name, "limit", a.limit(), MAX_SPAN_MICROS)?;
                ("fw3", [window, limit], Reader::FixedWindow { limit })
            }
            RedisAlgorithm::SlidingWindow(a) => {
                let window = whole_micros(name, a.window())?;
                // Every limit a sliding window takes (`u32::MAX`) is below this: where `limit *
                // w` passes 2^51 the script multiplies in two exact limbs.
                let limit = at_most(name, "limit", a.limit(), MAX_SPAN_MICROS)?;
                ("sw3", [window, limit], Reader::SlidingWindow(a))
            }
            RedisAlgorithm::SlidingLog(a) => {
                let window = whole_micros(name, a.window())?;
                if a.limit() > MAX_LOG_LIMIT {
                    return Err(RedisConfigError::LogTooLarge {
                        limit: a.limit(),
                        max: MAX_LOG_LIMIT,
                    });
                }
                // Each script also reads the other encoding's key when its own is missing (the
                // quota crossed PACKED_LOG_LIMIT): its units still count.
                let (suffix, other) = if a.limit() <= PACKED_LOG_LIMIT {
                    ("log2", "log")
                } else {
                    ("log", "log2")
                };
                other_suffix = Some(other);
                let limit = a.limit();
                (suffix, [window, limit], Reader::Log { window, limit })
            }
        };
        Ok(Program {
            script: LuaScript::new(self.script_source()),
            refunds: matches!(
                self,
                RedisAlgorithm::TokenBucket(_) | RedisAlgorithm::LeakyBucket(_)
            ),
            suffix,
            other_suffix,
            params,
            reader,
            capacity: self.capacity(),
        })
    }
}

/// A validated script call: the script, the key suffix, the two parameters after the common
/// first argument (`cost`), and how to read the reply.
///
/// The suffix names the algorithm (`tb2`, `lb2`, `fw3`, `sw3`; a log's `log2`, packed, or
/// `log`, a list above [`PACKED_LOG_LIMIT`]), so that two algorithms never read each other's
/// state. The windows' states also hold the window's length, so that a quota whose window
/// changed reads them (`docs/distributed.md`, "Changing a quota").
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub(crate) script: LuaScript,
    /// Whether the algorithm can give units back ([`GCRA_REFUND`] on the same key): the
    /// buckets; the windows cannot tell when their units were admitted, as locally.
    pub(crate) refunds: bool,
    pub(crate) suffix: &'static str,
    /// The suffix of a second key the script reads (`KEYS[2]`, same hash tag): for a sliding
    /// log, the other encoding's key, whose units count when the log's own key is missing.
    pub(crate) other_suffix: Option<&'static str>,
    pub(crate) params: [u64; 2],
    pub(crate) reader: Reader,
    pub(crate) capacity: u64,
}

impl Program {
    /// The scripts' first argument for a request of weight `cost` (and `now` on a client's
    /// clock), and how many of its bytes to send: the 24 or 32 of
    /// [`packed_arguments`](super::limiter::packed_arguments), or for a bucket whose interval is
    /// not whole microseconds, its pairs (48 or 56: `FineRate::arguments`).
    pub(crate) fn arguments(&self, cost: u64, now: Option<i64>) -> ([u8; 56], usize) {
        match self.reader {
            Reader::Fine { rate, .. } => rate.arguments(cost, now),
            _ => {
                let (short, length) = super::limiter::packed_arguments(cost, self.params, now);
                let mut bytes = [0; 56];
                bytes[..short.len()].copy_from_slice(&short);
                (bytes, length)
            }
        }
    }
}

impl Reader {
    /// Whether it reads a shaper's replies (the one algorithm with a `'slot'` mode).
    pub(crate) fn is_shaper(&self) -> bool {
        matches!(self, Reader::LeakyBucket(_) | Reader::Fine { shaper: true, .. })
    }

    /// The emission interval the script runs a bucket at (the quota's exact ratio; rounded up
    /// to whole nanoseconds when it is not whole microseconds); `None` for the windows and the
    /// log.
    pub(crate) fn bucket_interval(&self) -> Option<Duration> {
        match self {
            Reader::TokenBucket(bucket) => Some(bucket.emission_interval()),
            Reader::LeakyBucket(shaper) => Some(shaper.emission_interval()),
            Reader::Fine { rate, .. } => Some(Duration::from_nanos(rate.rounded_interval_nanos())),
            Reader::FixedWindow { .. } | Reader::SlidingWindow(_) | Reader::Log { .. } => None,
        }
    }
}

/// How a script's reply becomes a [`Decision`](crate::Decision) (see `reply.rs`): the
/// buckets and the sliding window rebuild the state the script decided on and run the core's
/// own arithmetic on it, with the parameters the script used.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reader {
    /// The bucket, at its interval of whole microseconds as the script runs it.
    TokenBucket(TokenBucket),
    /// The shaper, likewise.
    LeakyBucket(LeakyBucket),
    /// Either bucket at an interval that is not whole microseconds, decided from the script's
    /// pairs of whole µs and remainders (`fine_rate.rs`); `shaper` for the leaky bucket.
    Fine {
        rate: FineRate,
        shaper: bool,
    },
    FixedWindow {
        limit: u64,
    },
    SlidingWindow(SlidingWindow),
    /// The log's script computes the whole decision; its one-integer replies are read with
    /// the window (µs) and the limit the script ran with.
    Log {
        window: u64,
        limit: u64,
    },
}

/// A script's source: `prologue.lua` (the packed arguments unpacked, `now` read, a negative
/// weight refused), then the body of the file named.
macro_rules! script {
    ($body:literal) => {
        concat!(include_str!("prologue.lua"), include_str!($body))
    };
}

/// A bucket's script: the prologue, the state read (`gcra_state.lua`), then the body.
macro_rules! gcra_script {
    ($body:literal) => {
        concat!(
            include_str!("prologue.lua"),
            include_str!("gcra_state.lua"),
            include_str!($body)
        )
    };
}

pub(crate) const GCRA_SCRIPT: &str = gcra_script!("gcra.lua");
pub(crate) const FIXED_WINDOW_SCRIPT: &str = script!("fixed_window.lua");
pub(crate) const SLIDING_WINDOW_SCRIPT: &str = script!("sliding_window.lua");
pub(crate) const SLIDING_LOG_SCRIPT: &str = script!("sliding_log.lua");
pub(crate) const SLIDING_LOG_LIST_SCRIPT: &str = script!("sliding_log_list.lua");
pub(crate) const GCRA_REFUND_SCRIPT: &str = gcra_script!("gcra_refund.lua");

/// The buckets' refund script, shared by every limiter (its SHA-1 is computed once): a
/// `'static` script lets a refund started from a destructor own its whole call.
pub(crate) static GCRA_REFUND: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(GCRA_REFUND_SCRIPT));

/// GCRA's arguments for an emission interval of whole microseconds (`FineRate::of` found no
/// remainder: `interval` is exactly `period / count`): `T` and `burst * T`; and the quota the
/// client reads replies with, at that same interval.
fn gcra(name: &'static str, interval: Duration, burst: u64) -> Result<([u64; 2], Quota), RedisConfigError> {
    let interval = ceil_micros(interval);
    let interval = at_most(
        name,
        "emission interval (microseconds)",
        interval,
        MAX_SPAN_MICROS,
    )?;
    let burst = at_most(name, "burst (burst * T)", burst, MAX_SPAN_MICROS / interval)?;
    let quota = Quota::new(1, Duration::from_micros(interval))
        .and_then(|quota| quota.with_burst(burst))
        .map_err(|_| too_large(name, burst, [interval, 0]))?;
    Ok(([interval, burst * interval], quota))
}

/// Unreachable once `gcra` has bounded `burst * T` by 2^51 µs (the core's buckets take up to
/// 2^64 ns); an error all the same, never a panic.
fn too_large(algorithm: &'static str, burst: u64, [interval, _]: [u64; 2]) -> RedisConfigError {
    RedisConfigError::BeyondExactIntegers {
        algorithm,
        parameter: "burst (burst * T)",
        value: burst,
        max: MAX_SPAN_MICROS / interval.max(1),
    }
}

fn ceil_micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

fn whole_micros(algorithm: &'static str, window: Duration) -> Result<u64, RedisConfigError> {
    if !window.subsec_nanos().is_multiple_of(1_000) {
        return Err(RedisConfigError::NotWholeMicros { algorithm, window });
    }
    at_most(
        algorithm,
        "window (microseconds)",
        ceil_micros(window),
        MAX_SPAN_MICROS,
    )
}

fn at_most(
    algorithm: &'static str,
    parameter: &'static str,
    value: u64,
    max: u64,
) -> Result<u64, RedisConfigError> {
    if value > max {
        return Err(RedisConfigError::BeyondExactIntegers {
            algorithm,
            parameter,
            value,
            max,
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every script is the prologue and one body: `ARGV[1]` is unpacked, and a negative weight
    /// refused, once, by the prologue's lines (a body that kept its own copy would unpack twice).
    #[test]
    fn every_script_is_the_prologue_then_its_body() {
        let prologue = include_str!("prologue.lua");
        for source in [
            GCRA_SCRIPT,
            FIXED_WINDOW_SCRIPT,
            SLIDING_WINDOW_SCRIPT,
            SLIDING_LOG_SCRIPT,
            SLIDING_LOG_LIST_SCRIPT,
            GCRA_REFUND_SCRIPT,
        ] {
            assert!(source.starts_with(prologue));
            assert_eq!(source.matches("struct.unpack('<i8i8i8i8', ARGV[1])").count(), 1);
            assert_eq!(source.matches("if cost < 0").count(), 1);
        }
    }
}
