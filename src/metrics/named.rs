//! Naming a limiter: its meter, from then on, counts what it decides (see the [module](super)).

use std::hash::Hash;

use super::meter::Meter;
use super::name::LimiterName;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::live::LogQuota;
use crate::meter::Metering;
use crate::{DirectLimiter, KeyedLimiter, KeyedLogLimiter, LogLimiter};

impl<A: Algorithm, C: Clock> DirectLimiter<A, C> {
    /// The same limiter, counting its decisions under `name` (feature `metrics`): the series of
    /// [`tollgate::metrics`](super), handed to the recorder by
    /// [`publish`](super::publish). A name given again replaces the first.
    pub fn named(mut self, name: LimiterName) -> Self {
        self.metering = Metering::plain(name);
        self
    }

    /// The meter it counts with, once [named](Self::named) (feature `metrics`).
    pub fn meter(&self) -> Option<&Meter> {
        self.metering.meter()
    }
}

impl<K: Hash + ?Sized, A: Algorithm, C: Clock> KeyedLimiter<K, A, C> {
    /// The same limiter, counting its decisions, the keys it holds, its capacity and its
    /// reclaims under `name` (feature `metrics`): the series of
    /// [`tollgate::metrics`](super), handed to the recorder by
    /// [`publish`](super::publish). A name given again replaces the first.
    pub fn named(mut self, name: LimiterName) -> Self {
        self.metering = Metering::keyed(name, self.capacity(), self.len());
        self
    }

    /// The meter it counts with, once [named](Self::named) (feature `metrics`).
    pub fn meter(&self) -> Option<&Meter> {
        self.metering.meter()
    }
}

impl<C: Clock, L: LogQuota> LogLimiter<C, L> {
    /// The same limiter, counting its decisions under `name` (feature `metrics`), as
    /// [`DirectLimiter::named`].
    pub fn named(mut self, name: LimiterName) -> Self {
        self.metering = Metering::plain(name);
        self
    }

    /// The meter it counts with, once [named](Self::named) (feature `metrics`).
    pub fn meter(&self) -> Option<&Meter> {
        self.metering.meter()
    }
}

impl<K: Hash + ?Sized, C: Clock, L: LogQuota> KeyedLogLimiter<K, C, L> {
    /// The same limiter, counting its decisions, the keys it holds, its capacity and its
    /// reclaims (logs reused for new keys) under `name` (feature `metrics`), as
    /// [`KeyedLimiter::named`].
    pub fn named(mut self, name: LimiterName) -> Self {
        self.metering = Metering::keyed(name, self.capacity(), self.len());
        self
    }

    /// The meter it counts with, once [named](Self::named) (feature `metrics`).
    pub fn meter(&self) -> Option<&Meter> {
        self.metering.meter()
    }
}

#[cfg(feature = "redis")]
impl crate::distributed::RedisLimiter {
    /// The same limiter, counting its decisions, its round trips to Redis (their number, their
    /// time, their failures by cause) and its failure policy's decisions under `name` (feature
    /// `metrics`): the series of [`tollgate::metrics`](super), handed to the recorder by
    /// [`publish`](super::publish), but for the round trips' time, recorded at each one.
    pub fn named(mut self, name: LimiterName) -> Self {
        self.metering = Metering::redis(name);
        self
    }

    /// The meter it counts with, once [named](Self::named) (feature `metrics`).
    pub fn meter(&self) -> Option<&Meter> {
        self.metering.meter()
    }
}

#[cfg(feature = "redis")]
impl crate::distributed::LeasedLimiter {
    /// The same limiter, counting under `name` (feature `metrics`) what
    /// [`RedisLimiter::named`](crate::distributed::RedisLimiter::named) counts (its decisions,
    /// those spent from its leases included, its round trips, their time, their failures by
    /// cause, its failure policy's decisions) and its leases: their round trips, their sizes, the
    /// units given back. A decision spent from a lease counts on the thread's own lane, as a
    /// local limiter's does. A name given again replaces the first.
    pub fn named(mut self, name: LimiterName) -> Self {
        self.metering = Metering::leased(name);
        self
    }

    /// The meter it counts with, once [named](Self::named) (feature `metrics`).
    pub fn meter(&self) -> Option<&Meter> {
        self.metering.meter()
    }
}

#[cfg(feature = "redis")]
impl crate::distributed::DirectLeasedLimiter {
    /// The same limiter, counting its decisions and its leases under `name` (feature
    /// `metrics`), as [`LeasedLimiter::named`](crate::distributed::LeasedLimiter::named).
    pub fn named(self, name: LimiterName) -> Self {
        self.map_keyed(|keyed| keyed.named(name))
    }

    /// The meter it counts with, once [named](Self::named) (feature `metrics`).
    pub fn meter(&self) -> Option<&Meter> {
        self.keyed().meter()
    }
}
