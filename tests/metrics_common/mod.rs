//! Reading tollgate's series back (feature `metrics`): [`tollgate::metrics::publish`] into a
//! `metrics-util` `DebuggingRecorder` of the test's own (installed for the calling thread only,
//! so that tests running beside it publish elsewhere), and one limiter's series picked out by
//! its `limiter` label. Used by the `core`, `keyed`, `middleware` and `redis` binaries.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Mutex;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// One limiter's series: each sample by `name{label=value,...}` (its labels in their order,
/// the `limiter` label left out), and each histogram's samples.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Series {
    pub(crate) values: BTreeMap<String, f64>,
    pub(crate) histograms: BTreeMap<String, Vec<f64>>,
}

/// A recorder of the test's own, and the histogram samples a read took but did not hand out
/// yet (a snapshot takes every histogram's samples, by whichever limiter).
pub(crate) struct Recorder {
    recorder: DebuggingRecorder,
    samples: Mutex<BTreeMap<(String, String), Vec<f64>>>,
}

impl Recorder {
    pub(crate) fn new() -> Recorder {
        Recorder {
            recorder: DebuggingRecorder::new(),
            samples: Mutex::default(),
        }
    }

    /// The recorder, for `metrics::set_default_local_recorder` (the Redis latency is recorded
    /// at each round trip, on the thread that makes it).
    pub(crate) fn recorder(&self) -> &DebuggingRecorder {
        &self.recorder
    }

    /// `publish` into this recorder, then the series of `limiter`. Counters read as totals
    /// (`publish` hands over absolute values); histograms as the samples since the last read.
    pub(crate) fn published(&self, limiter: &str) -> Series {
        metrics::with_local_recorder(&self.recorder, tollgate::metrics::publish);
        let mut series = Series::default();
        let mut samples = self.samples.lock().unwrap();
        for (key, _, _, value) in self.recorder.snapshotter().snapshot().into_vec() {
            let key = key.key();
            let Some(owner) = key.labels().find(|label| label.key() == "limiter") else {
                continue;
            };
            let labels: Vec<String> = key
                .labels()
                .filter(|label| label.key() != "limiter")
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            let name = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            match value {
                DebugValue::Histogram(taken) => samples
                    .entry((owner.value().to_owned(), name))
                    .or_default()
                    .extend(taken.into_iter().map(|sample| sample.into_inner())),
                _ if owner.value() != limiter => {}
                DebugValue::Counter(count) => {
                    series.values.insert(name, count as f64);
                }
                DebugValue::Gauge(gauge) => {
                    series.values.insert(name, gauge.into_inner());
                }
            }
        }
        let mine: Vec<_> = samples
            .keys()
            .filter(|(owner, _)| owner == limiter)
            .cloned()
            .collect();
        for key in mine {
            if let Some(taken) = samples.remove(&key) {
                series.histograms.insert(key.1, taken);
            }
        }
        series
    }
}

/// `(series, value)` pairs as a map, to compare with [`Series::values`].
pub(crate) fn expected(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs
        .iter()
        .map(|&(series, value)| (series.to_owned(), value))
        .collect()
}

/// A name unique to this call site and process, so that tests running beside each other never
/// share a series.
pub(crate) fn name(base: &str) -> tollgate::metrics::LimiterName {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Relaxed: a unique number is all that is needed.
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    tollgate::metrics::LimiterName::new(&format!("{base}-{unique}")).expect("a valid name")
}
