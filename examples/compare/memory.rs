//! What each algorithm keeps per key, from the types themselves.

use std::error::Error;
use std::mem::size_of;

use tollgate::{
    DirectLimiter, FixedWindow, LeakyBucket, LogLimiter, ManualClock, Quota, SlidingLog, SlidingWindow,
    TokenBucket,
};

use crate::lineup::NAMES;
use crate::table::Table;

/// Prints the state each algorithm keeps for one key at `100/min`, and the size of a direct
/// limiter holding it.
pub(crate) fn report() -> Result<(), Box<dyn Error>> {
    let quota: Quota = "100/min".parse()?;
    let log = SlidingLog::new(quota)?;
    // The log's ring: one u64 timestamp per unit of the limit, allocated once.
    let ring = log.limit() as usize * size_of::<u64>();
    println!("## State per key, at `{quota}`\n");
    let mut table = Table::new(&["algorithm", "state per key (bytes)", "direct limiter (bytes)"]);
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
        format!("{ring} (8 × limit) + its lock and ring header"),
        format!("{} + {ring} on the heap", size_of::<LogLimiter<ManualClock>>()),
    ]);
    table.print();
    println!(
        "(Direct limiters are padded to their own cache lines; the packed algorithms' state is the one \
         u64, the log's is its ring. A keyed table adds a fingerprint per key: `docs/design.md`.)\n"
    );
    Ok(())
}
