//! What each algorithm keeps per key, from the types themselves.

use std::error::Error;
use std::mem::size_of;

use tollgate::{
    DirectLimiter, FixedWindow, LeakyBucket, LogLimiter, ManualClock, Quota, SlidingLog, SlidingWindow,
    TokenBucket,
};

use crate::lineup::NAMES;
use crate::table::{paragraph, Table};

/// What the closing guide cites from this table.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    /// The quota the table is for.
    pub(crate) quota: Quota,
    /// Bytes of state per key of the four packed algorithms.
    pub(crate) packed: usize,
    /// Bytes of the log's ring per key.
    pub(crate) ring: usize,
}

/// Prints the state each algorithm keeps for one key at `100/min`, and the size of a direct
/// limiter holding it.
pub(crate) fn report() -> Result<Summary, Box<dyn Error>> {
    let quota: Quota = "100/min".parse()?;
    let log = SlidingLog::new(quota)?;
    // The log's ring: one u64 timestamp per unit of the limit, allocated once.
    let ring = log.limit() as usize * size_of::<u64>();
    println!("## State per key, at `{quota}`\n");
    paragraph(
        "What one key costs each algorithm, in bytes, from the types themselves (`size_of`) and the \
         log's ring of one timestamp per unit of the limit.",
    );
    let mut table = Table::new(&["algorithm", "state per key", "limiter"]);
    let packed = [
        size_of::<DirectLimiter<TokenBucket, ManualClock>>(),
        size_of::<DirectLimiter<LeakyBucket, ManualClock>>(),
        size_of::<DirectLimiter<FixedWindow, ManualClock>>(),
        size_of::<DirectLimiter<SlidingWindow, ManualClock>>(),
    ];
    for (name, direct) in NAMES.iter().zip(packed) {
        table.row(vec![
            name.to_string(),
            size_of::<u64>().to_string(),
            direct.to_string(),
        ]);
    }
    table.row(vec![
        NAMES[4].to_string(),
        format!("{ring} + lock, header"),
        format!("{} + {ring} on the heap", size_of::<LogLimiter<ManualClock>>()),
    ]);
    table.print();
    paragraph(&format!(
        "state per key: the one `u64` the packed algorithms keep, or the log's ring ({} bytes × the \
         limit of {}) plus its lock and the ring's header. limiter: a whole `DirectLimiter` or \
         `LogLimiter`, padded to its own cache lines. A keyed table adds a fingerprint per key: \
         `docs/design.md`.",
        size_of::<u64>(),
        log.limit(),
    ));
    Ok(Summary {
        quota,
        packed: size_of::<u64>(),
        ring,
    })
}
