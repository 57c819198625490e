//! Every named limiter's meter, by name, and what [`publish`](super::publish) hands the
//! recorder: the sums of the live meters' lanes, plus what the meters already dropped under the
//! same name counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use metrics::{Key, Label, Level, Metadata, Recorder};

use super::meter::{Count, Kind, MeterShared, Totals};
use super::name::LimiterName;
use super::{DECISIONS, KEYS_CAPACITY, KEYS_HELD, KEYS_RECLAIMED};

/// The metadata every tollgate series is registered with.
pub(super) const METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The meters of one name.
#[derive(Default)]
struct Entry {
    /// The meters of the limiters alive (or being dropped) under this name.
    live: Vec<Weak<MeterShared>>,
    /// What the dropped ones counted.
    retired: Totals,
    /// Whether a keyed table ever had this name: its gauges are published (0 once none is
    /// left).
    keyed: bool,
    /// Whether a Redis limiter ever had this name: its series are published.
    #[cfg(feature = "redis")]
    redis: bool,
    /// Whether a leased limiter ever had this name: its lease series are published.
    #[cfg(feature = "redis")]
    leased: bool,
}

/// Every name's meters.
static REGISTRY: Mutex<BTreeMap<LimiterName, Entry>> = Mutex::new(BTreeMap::new());

fn registry() -> MutexGuard<'static, BTreeMap<LimiterName, Entry>> {
    // Nothing panics while holding it; were it poisoned, its counts are still whole numbers.
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Adds a new meter under its name.
pub(super) fn register(meter: &Arc<MeterShared>) {
    let mut registry = registry();
    let entry = registry.entry(meter.name.clone()).or_default();
    entry.live.retain(|live| live.strong_count() > 0);
    entry.live.push(Arc::downgrade(meter));
    match meter.kind {
        Kind::Plain => {}
        Kind::Keyed { .. } => entry.keyed = true,
        #[cfg(feature = "redis")]
        Kind::Redis => entry.redis = true,
        #[cfg(feature = "redis")]
        Kind::Leased => {
            entry.redis = true;
            entry.leased = true;
        }
    }
}

/// Keeps what a dropped meter counted in its name's totals.
pub(super) fn retire(name: &LimiterName, totals: &Totals) {
    if let Some(entry) = registry().get_mut(name) {
        entry.retired.add(totals);
        entry.live.retain(|live| live.strong_count() > 0);
    }
}

/// One name's totals and gauges, as read by [`publish`].
struct Reading {
    totals: Totals,
    keys_held: u64,
    capacity: u64,
}

/// Hands every name's counts and gauges to `recorder`.
pub(super) fn publish(recorder: &dyn Recorder) {
    // The meters read are dropped only once the registry is unlocked: a meter's drop locks it.
    let mut read = Vec::new();
    {
        let registry = registry();
        for (name, entry) in registry.iter() {
            let mut reading = Reading {
                totals: entry.retired.clone(),
                keys_held: 0,
                capacity: 0,
            };
            for meter in entry.live.iter().filter_map(Weak::upgrade) {
                let totals = meter.totals();
                if let Kind::Keyed { capacity } = meter.kind {
                    reading.keys_held = reading.keys_held.saturating_add(totals.keys_held());
                    reading.capacity = reading.capacity.saturating_add(capacity as u64);
                }
                reading.totals.add(&totals);
                read.push(meter);
            }
            emit(recorder, name, entry, &reading);
        }
    }
    drop(read);
}

/// The series of one name.
fn emit(recorder: &dyn Recorder, name: &LimiterName, entry: &Entry, reading: &Reading) {
    let limiter = || Label::new("limiter", name.as_str().to_owned());
    let totals = &reading.totals;
    for (count, outcome) in Count::OUTCOMES {
        let value = totals.count(count);
        // Allowed and refused always; the others once they happen.
        if value > 0 || matches!(count, Count::Allowed | Count::Refused) {
            let key = Key::from_parts(DECISIONS, vec![limiter(), Label::new("outcome", outcome)]);
            recorder.register_counter(&key, &METADATA).absolute(value);
        }
    }
    if entry.keyed {
        let key = Key::from_parts(KEYS_RECLAIMED, vec![limiter()]);
        recorder
            .register_counter(&key, &METADATA)
            .absolute(totals.count(Count::Reclaimed));
        // Precision: a gauge is an f64; key counts stay far below 2^53.
        let key = Key::from_parts(KEYS_HELD, vec![limiter()]);
        recorder
            .register_gauge(&key, &METADATA)
            .set(reading.keys_held as f64);
        let key = Key::from_parts(KEYS_CAPACITY, vec![limiter()]);
        recorder
            .register_gauge(&key, &METADATA)
            .set(reading.capacity as f64);
    }
    #[cfg(feature = "redis")]
    if entry.redis {
        super::redis::emit(recorder, limiter, &totals.redis);
    }
    #[cfg(feature = "redis")]
    if entry.leased {
        super::lease::emit(recorder, limiter, &totals.lease);
    }
}
