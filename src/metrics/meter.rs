//! A named limiter's counts: per-thread lanes of decision counters, what it is (direct, keyed
//! with its capacity, Redis), and its place in the registry that [`publish`](super::publish)
//! reads.

use std::fmt;
use std::sync::Arc;

use super::name::LimiterName;
use super::registry;
use super::thread;
use crate::lanes::{thread as lane, Lanes};
use crate::{Decision, Outcome};

/// What a meter counts per thread, one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Count {
    /// [`Outcome::Allowed`].
    Allowed = 0,
    /// [`Outcome::Denied`].
    Refused = 1,
    /// [`Outcome::TableFull`].
    TableFull = 2,
    /// [`Outcome::AllowedUntracked`].
    Untracked = 3,
    /// The tower layer's: the limiter could not decide.
    Unavailable = 4,
    /// The tower layer's: no key, and the layer answered.
    NoKey = 5,
    /// A keyed table's: a key was given a slot.
    Inserted = 6,
    /// A keyed table's: an idle key was forgotten for a new one.
    Reclaimed = 7,
}

/// Counters per lane.
pub(crate) const COUNTS: usize = 8;

// A decision is counted at its outcome's own index: the hot path casts, it does not match.
const _: () = assert!(
    Outcome::Allowed as usize == Count::Allowed as usize
        && Outcome::Denied as usize == Count::Refused as usize
        && Outcome::TableFull as usize == Count::TableFull as usize
        && Outcome::AllowedUntracked as usize == Count::Untracked as usize
);

impl Count {
    /// The decisions' `outcome` labels, by counter.
    pub(crate) const OUTCOMES: [(Count, &'static str); 6] = [
        (Count::Allowed, "allowed"),
        (Count::Refused, "refused"),
        (Count::TableFull, "table_full"),
        (Count::Untracked, "untracked"),
        (Count::Unavailable, "unavailable"),
        (Count::NoKey, "no_key"),
    ];
}

/// What kind of limiter a meter counts for: which series it has beside its decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A direct limiter (or a limiter of the caller's own, [`Meter::new`]): decisions only.
    Plain,
    /// A keyed table built for `capacity` keys: the keys it holds, its capacity, reclaims.
    Keyed { capacity: usize },
    /// A Redis limiter: its round trips, their latency, failures and the failure policy.
    #[cfg(feature = "redis")]
    Redis,
    /// A leased Redis limiter: a Redis limiter's series, and its leases' (round trips, sizes,
    /// units given back).
    #[cfg(feature = "redis")]
    Leased,
}

/// Everything a meter counted, summed over its lanes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) counts: [u64; COUNTS],
    #[cfg(feature = "redis")]
    pub(crate) redis: super::redis::RedisTotals,
    #[cfg(feature = "redis")]
    pub(crate) lease: super::lease::LeaseTotals,
}

impl Totals {
    /// Adds `other` to these totals.
    pub(crate) fn add(&mut self, other: &Totals) {
        for (total, more) in self.counts.iter_mut().zip(other.counts) {
            *total = total.wrapping_add(more);
        }
        #[cfg(feature = "redis")]
        self.redis.add(&other.redis);
        #[cfg(feature = "redis")]
        self.lease.add(&other.lease);
    }

    pub(crate) fn count(&self, count: Count) -> u64 {
        self.counts[count as usize]
    }

    /// Keys held: inserted less reclaimed (0 if a racing read saw a reclaim before its insert).
    pub(crate) fn keys_held(&self) -> u64 {
        self.count(Count::Inserted)
            .saturating_sub(self.count(Count::Reclaimed))
    }
}

/// The counts of one named limiter, shared by the limiter, the tower layer in front of it, and
/// the registry (weakly).
pub(crate) struct MeterShared {
    pub(crate) name: LimiterName,
    pub(crate) kind: Kind,
    lanes: Lanes<COUNTS>,
    /// A Redis limiter's own counts.
    #[cfg(feature = "redis")]
    pub(crate) redis: Option<super::redis::RedisCounts>,
    /// A leased limiter's lease counts.
    #[cfg(feature = "redis")]
    pub(crate) lease: Option<super::lease::LeaseSeries>,
}

impl MeterShared {
    /// Everything counted so far.
    pub(crate) fn totals(&self) -> Totals {
        Totals {
            counts: self.lanes.sum(),
            #[cfg(feature = "redis")]
            redis: self
                .redis
                .as_ref()
                .map(|redis| redis.totals())
                .unwrap_or_default(),
            #[cfg(feature = "redis")]
            lease: self
                .lease
                .as_ref()
                .map(|lease| lease.totals())
                .unwrap_or_default(),
        }
    }
}

impl Drop for MeterShared {
    /// The limiter is gone: its counts stay in its name's totals, so that a limiter built again
    /// under the same name (a route whose quota changed) continues its series.
    fn drop(&mut self) {
        registry::retire(&self.name, &self.totals());
    }
}

/// The counts of a named limiter (see the [module](super)): cloning it shares them.
///
/// The limiters make their own when named ([`DirectLimiter::named`](crate::DirectLimiter::named)
/// and the others); [`Meter::new`] makes one for a limiter of the caller's own, such as an
/// implementation of the tower layer's `RateLimiter`, whose `meter` the layer then counts its
/// own outcomes with.
#[derive(Clone)]
pub struct Meter {
    shared: Arc<MeterShared>,
}

impl Meter {
    /// A meter for a limiter of the caller's own, counting its decisions under `name`
    /// ([`record`](Self::record)).
    pub fn new(name: LimiterName) -> Meter {
        Meter::of_kind(name, Kind::Plain)
    }

    /// A meter for a limiter of `kind`, in the registry from now on.
    pub(crate) fn of_kind(name: LimiterName, kind: Kind) -> Meter {
        let shared = Arc::new(MeterShared {
            kind,
            lanes: Lanes::new(lane::lanes_per_meter()),
            #[cfg(feature = "redis")]
            redis: matches!(kind, Kind::Redis | Kind::Leased)
                .then(|| super::redis::RedisCounts::new(name.as_str())),
            #[cfg(feature = "redis")]
            lease: (kind == Kind::Leased).then(|| super::lease::LeaseSeries::new(name.as_str())),
            name,
        });
        registry::register(&shared);
        Meter { shared }
    }

    /// The name its series carry.
    pub fn name(&self) -> &LimiterName {
        &self.shared.name
    }

    /// Counts `decision` under its outcome.
    #[inline(always)]
    pub fn record(&self, decision: &Decision) {
        self.count(decision.outcome() as usize);
    }

    /// Adds one to counter `count` (an index below [`COUNTS`]), on this thread's lane.
    #[inline(always)]
    pub(crate) fn count(&self, count: usize) {
        self.add(count, 1);
    }

    /// Adds `n` to counter `count` (an index below [`COUNTS`]), on this thread's lane.
    #[inline(always)]
    pub(crate) fn add(&self, count: usize, n: u64) {
        lane::add(&self.shared.lanes, count, n);
    }

    /// Takes the table events this thread noted and counts them: the end of a slow path.
    pub(crate) fn count_table_events(&self) {
        let events = thread::take_events();
        if events.inserted != 0 {
            self.add(Count::Inserted as usize, events.inserted);
        }
        if events.reclaimed != 0 {
            self.add(Count::Reclaimed as usize, events.reclaimed);
        }
    }

    #[cfg(feature = "redis")]
    pub(crate) fn shared(&self) -> &MeterShared {
        &self.shared
    }
}

impl fmt::Debug for Meter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Meter")
            .field("name", &self.shared.name)
            .field("kind", &self.shared.kind)
            .finish_non_exhaustive()
    }
}

/// Clears this thread's noted table events before a slow path, and counts the ones that path
/// noted for `meter` when dropped.
pub(crate) struct TableEventsGuard<'a> {
    meter: &'a Meter,
}

impl<'a> TableEventsGuard<'a> {
    pub(crate) fn new(meter: &'a Meter) -> TableEventsGuard<'a> {
        // Events an unnamed limiter's slow path left are no one's.
        let _ = thread::take_events();
        TableEventsGuard { meter }
    }
}

impl Drop for TableEventsGuard<'_> {
    fn drop(&mut self) {
        self.meter.count_table_events();
    }
}
