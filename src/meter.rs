//! Where the limiters count for `tollgate::metrics`: each limiter's [`Metering`] field and the
//! hooks its decision paths call, one line each.
//!
//! With the `metrics` feature, a named limiter's `Metering` holds its meter and the hooks count;
//! an unnamed one's holds nothing and the hooks test that and return. Without the feature,
//! `Metering` has no size and every hook is an empty function inlined away: nothing is compiled
//! in (the same instructions per decision, `docs/metrics.md`, "Cost").

#[cfg(all(feature = "metrics", not(tollgate_loom)))]
pub(crate) use on::*;

#[cfg(not(all(feature = "metrics", not(tollgate_loom))))]
pub(crate) use off::*;

#[cfg(all(feature = "metrics", not(tollgate_loom)))]
mod on {
    use crate::metrics::{Count, Kind, LimiterName, Meter, TableEventsGuard};
    use crate::Decision;

    /// A limiter's meter: `None` until it is named.
    #[derive(Clone, Debug, Default)]
    pub(crate) struct Metering(Option<Meter>);

    impl Metering {
        /// An unnamed limiter's: it counts nothing.
        pub(crate) const NONE: Metering = Metering(None);

        /// A direct limiter's, or the sliding log's.
        pub(crate) fn plain(name: LimiterName) -> Metering {
            Metering(Some(Meter::of_kind(name, Kind::Plain)))
        }

        /// A keyed table's, built for `capacity` keys, holding `held` keys now.
        pub(crate) fn keyed(name: LimiterName, capacity: usize, held: usize) -> Metering {
            let meter = Meter::of_kind(name, Kind::Keyed { capacity });
            meter.add(Count::Inserted as usize, held as u64);
            Metering(Some(meter))
        }

        /// A Redis limiter's.
        #[cfg(feature = "redis")]
        pub(crate) fn redis(name: LimiterName) -> Metering {
            Metering(Some(Meter::of_kind(name, Kind::Redis)))
        }

        /// The meter, if the limiter is named.
        pub(crate) fn meter(&self) -> Option<&Meter> {
            self.0.as_ref()
        }

        /// `decision`, counted under its outcome.
        #[inline(always)]
        pub(crate) fn counted(&self, decision: Decision) -> Decision {
            if let Some(meter) = &self.0 {
                meter.record(&decision);
            }
            decision
        }

        /// [`counted`](Self::counted) for a decision and the time it was made at.
        #[inline(always)]
        pub(crate) fn counted_at<T>(&self, decided: (Decision, T)) -> (Decision, T) {
            (self.counted(decided.0), decided.1)
        }

        /// Held across a keyed table's slow path: the keys it inserts and the idle keys it
        /// reclaims are counted when it is dropped.
        #[inline]
        pub(crate) fn table_events(&self) -> Option<TableEventsGuard<'_>> {
            self.0.as_ref().map(TableEventsGuard::new)
        }

        /// Runs `call`, one round trip to Redis, counted and timed.
        #[cfg(feature = "redis")]
        pub(crate) async fn timed<F: std::future::Future>(&self, call: F) -> F::Output {
            match &self.0 {
                Some(meter) => meter.timed(call).await,
                None => call.await,
            }
        }

        /// Counts a Redis limiter's answer (see `Meter::redis_decided`).
        #[cfg(feature = "redis")]
        pub(crate) fn redis_decided(&self, answer: &crate::distributed::RedisDecision, counts: bool) {
            if let Some(meter) = &self.0 {
                meter.redis_decided(answer, counts);
            }
        }

        /// A leased Redis limiter's.
        #[cfg(feature = "redis")]
        pub(crate) fn leased(name: LimiterName) -> Metering {
            Metering(Some(Meter::of_kind(name, Kind::Leased)))
        }

        /// Runs `call`, one round trip of a lease script, counted as a Redis round trip and a
        /// lease round trip, and timed.
        #[cfg(feature = "redis")]
        pub(crate) async fn lease_timed<F: std::future::Future>(&self, call: F) -> F::Output {
            match &self.0 {
                Some(meter) => {
                    meter.lease_call();
                    meter.timed(call).await
                }
                None => call.await,
            }
        }

        /// Runs `call`, a Redis limiter's peek, counting its round trip and timing it unless
        /// it made none (Redis recently down, a request refused before it), and its failure by
        /// cause.
        #[cfg(feature = "redis")]
        pub(crate) async fn peeked(
            &self,
            call: impl std::future::Future<
                Output = Result<crate::distributed::RedisDecision, crate::distributed::RedisCheckError>,
            >,
        ) -> Result<crate::distributed::RedisDecision, crate::distributed::RedisCheckError> {
            let Some(meter) = &self.0 else {
                return call.await;
            };
            use crate::distributed::{Failure, RedisCheckError, RedisDecision};

            let started = std::time::Instant::now();
            let answer = call.await;
            // No round trip: Redis recently down, or a request refused before one.
            let made_none = matches!(
                &answer,
                Ok(RedisDecision {
                    failure: Some(Failure::RecentlyDown(_)),
                    ..
                }) | Err(RedisCheckError::CostTooLarge(_) | RedisCheckError::TimeOutOfRange { .. })
            );
            if !made_none {
                meter.round_trip_took(started);
            }
            if let Ok(answer) = &answer {
                meter.redis_decided(answer, false);
            }
            answer
        }

        /// Counts a failed round trip by its cause (see `Meter::redis_failed`).
        #[cfg(feature = "redis")]
        pub(crate) fn redis_failed(&self, failure: crate::distributed::Failure) {
            if let Some(meter) = &self.0 {
                meter.redis_failed(failure);
            }
        }

        /// Records a lease of `units` beyond the request that asked for it.
        #[cfg(feature = "redis")]
        pub(crate) fn lease_granted(&self, units: u64) {
            if let Some(meter) = &self.0 {
                meter.lease_granted(units);
            }
        }

        /// Counts `units` given back to Redis unused.
        #[cfg(feature = "redis")]
        pub(crate) fn lease_returned(&self, units: u64) {
            if let Some(meter) = &self.0 {
                meter.lease_returned(units);
            }
        }
    }

    /// A keyed table's slow path gave a key a slot: `decision` is its request's.
    #[inline]
    pub(crate) fn inserted(decision: Decision) -> Decision {
        crate::metrics::note_table_events(1, 0);
        decision
    }

    /// A keyed table's slow path forgot an idle key for a new one, if `forgot`.
    #[inline]
    pub(crate) fn reclaimed(forgot: bool) {
        if forgot {
            crate::metrics::note_table_events(0, 1);
        }
    }

    /// A locked table's slow path gave a key a slot, reclaiming an idle key's if `reused`.
    #[inline]
    pub(crate) fn slot_taken(reused: bool) {
        crate::metrics::note_table_events(1, u64::from(reused));
    }

    /// The tower layer answered a request without a key itself, in front of `limiter`.
    #[cfg(feature = "tower")]
    pub(crate) fn no_key<K, L: crate::middleware::RateLimiter<K>>(limiter: &L) {
        if let Some(meter) = limiter.meter() {
            meter.count(Count::NoKey as usize);
        }
    }

    /// The tower layer's `limiter` could not decide.
    #[cfg(feature = "tower")]
    pub(crate) fn unavailable<K, L: crate::middleware::RateLimiter<K>>(limiter: &L) {
        if let Some(meter) = limiter.meter() {
            meter.count(Count::Unavailable as usize);
        }
    }
}

#[cfg(not(all(feature = "metrics", not(tollgate_loom))))]
mod off {
    use crate::Decision;

    /// Without the `metrics` feature: nothing.
    #[derive(Clone, Copy, Debug, Default)]
    pub(crate) struct Metering;

    /// What a slow path holds without the `metrics` feature: nothing.
    pub(crate) struct NoEvents;

    impl Metering {
        pub(crate) const NONE: Metering = Metering;

        #[inline(always)]
        pub(crate) fn counted(&self, decision: Decision) -> Decision {
            decision
        }

        #[inline(always)]
        pub(crate) fn counted_at<T>(&self, decided: (Decision, T)) -> (Decision, T) {
            decided
        }

        #[inline(always)]
        pub(crate) fn table_events(&self) -> NoEvents {
            NoEvents
        }

        #[cfg(feature = "redis")]
        #[inline(always)]
        pub(crate) fn timed<F>(&self, call: F) -> F {
            call
        }

        #[cfg(feature = "redis")]
        #[inline(always)]
        pub(crate) fn redis_decided(&self, _: &crate::distributed::RedisDecision, _: bool) {}

        #[cfg(feature = "redis")]
        #[inline(always)]
        pub(crate) fn lease_timed<F>(&self, call: F) -> F {
            call
        }

        #[cfg(feature = "redis")]
        #[inline(always)]
        pub(crate) fn peeked<F>(&self, call: F) -> F {
            call
        }

        #[cfg(feature = "redis")]
        #[inline(always)]
        pub(crate) fn redis_failed(&self, _: crate::distributed::Failure) {}

        #[cfg(feature = "redis")]
        #[inline(always)]
        pub(crate) fn lease_granted(&self, _: u64) {}

        #[cfg(feature = "redis")]
        #[inline(always)]
        pub(crate) fn lease_returned(&self, _: u64) {}
    }

    #[inline(always)]
    pub(crate) fn inserted(decision: Decision) -> Decision {
        decision
    }

    #[inline(always)]
    pub(crate) fn reclaimed(_: bool) {}

    #[inline(always)]
    pub(crate) fn slot_taken(_: bool) {}

    #[cfg(feature = "tower")]
    #[inline(always)]
    pub(crate) fn no_key<K, L>(_: &L) {}

    #[cfg(feature = "tower")]
    #[inline(always)]
    pub(crate) fn unavailable<K, L>(_: &L) {}
}
