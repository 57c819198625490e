//! The routing table, read once per request: the first route whose path and method match a
//! request limits it; a request matching none is forwarded unlimited.
//!
//! A reload builds a whole new table and swaps it in with one atomic store ([`ArcSwap`]):
//! each request reads the table once, so it sees the old table or the new one, never a mix,
//! and a kept-alive connection's next request sees the new one. `ArcSwap` rather than an
//! `RwLock<Arc<Table>>`: its `load` takes no lock and writes no shared reference count (a
//! per-thread slot), so the readers on every core never contend on one cache line, and a
//! reload never waits for requests nor requests for a reload.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use http::{Request, Response};
use http_body_util::Either;
use hyper::body::Incoming;
use tollgate::middleware::{LimitedBody, PeerAddr, RouteFilter};
use tower::Service;

use crate::counters::{Counters, Outcome};
use crate::held::{Continuity, HeldLimiter, QuotaChange};
use crate::limiter;
use crate::metrics::RouteSeries;
use crate::settings::{RouteSettings, Settings};
use crate::upstream::{Upstream, UpstreamBody};

/// The body of every answer: the upstream's, or the rate-limit layer's own.
pub(crate) type GatewayBody = LimitedBody<UpstreamBody>;

/// A response on its way.
pub(crate) type Answer = Pin<Box<dyn Future<Output = Response<GatewayBody>> + Send>>;

/// A route's service, its types erased: routes differ in key and limiter types.
pub(crate) trait RouteService: Send + Sync {
    /// Answers one request.
    fn serve(&self, request: Request<Incoming>) -> Answer;
}

impl<S> RouteService for S
where
    S: Service<Request<Incoming>, Response = Response<GatewayBody>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    fn serve(&self, request: Request<Incoming>) -> Answer {
        let mut service = self.clone();
        Box::pin(async move {
            let Ok(()) = poll_fn(|cx| service.poll_ready(cx)).await;
            let Ok(response) = service.call(request).await;
            response
        })
    }
}

/// One route of the table.
pub(crate) struct Route {
    pub(crate) settings: RouteSettings,
    filter: RouteFilter,
    service: Box<dyn RouteService>,
    pub(crate) limiter: HeldLimiter,
    /// What became of each of its limiters in this table (the route's one, or each policy's by
    /// name): new, kept, its quota changed live, or rebuilt and why.
    pub(crate) continuity: Vec<(Option<String>, Continuity)>,
    series: Arc<RouteSeries>,
}

impl Route {
    /// Whether a limiter of the route is new in this table (its keys started afresh).
    pub(crate) fn fresh(&self) -> bool {
        self.continuity
            .iter()
            .any(|(_, continuity)| continuity.is_fresh())
    }
}

/// The routes in order, the upstream, and the settings they were built from.
pub(crate) struct Table {
    pub(crate) settings: Settings,
    pub(crate) routes: Vec<Route>,
    upstream: Upstream,
    unrouted: Arc<RouteSeries>,
    /// The quota changes its kept limiters take when it is swapped in
    /// ([`apply_quota_changes`](Self::apply_quota_changes)).
    changes: Vec<QuotaChange>,
}

impl Table {
    /// Builds the table `settings` describe, keeping from `previous` the limiter of every route
    /// whose policy is unchanged.
    pub(crate) async fn build(settings: Settings, previous: Option<&Table>) -> Result<Table, String> {
        let upstream = match &settings.upstream {
            Some(base) => Upstream::proxy(base.clone()),
            None => Upstream::Hello,
        };
        let mut routes = Vec::new();
        let mut changes = Vec::new();
        if let Some(limits) = &settings.limits {
            for route in &limits.routes {
                let held = previous
                    .and_then(|table| table.route(&route.name))
                    .map(|old| &old.limiter);
                let built = limiter::build(route, &limits.store, limits.fields, &upstream, held)
                    .await
                    .map_err(|e| format!("route `{}`: {e}", route.name))?;
                let series = RouteSeries::limited(&route.name, built.limiter.counts_keys());
                routes.push(Route {
                    settings: route.clone(),
                    filter: route.filter(),
                    service: built.service,
                    limiter: built.limiter,
                    continuity: built.continuity,
                    series: Arc::new(series),
                });
                changes.extend(built.changes);
            }
        }
        Ok(Table {
            settings,
            routes,
            upstream,
            unrouted: Arc::new(RouteSeries::unrouted()),
            changes,
        })
    }

    /// Changes the quota of each limiter kept from the running table with a new quota, live
    /// (its keys keep their state): called once the table is built and checked, just before it
    /// is swapped in, so that a reload that fails changes no running limiter. Returns what could
    /// not change (the limiter then keeps its quota), in words.
    pub(crate) fn apply_quota_changes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.changes)
            .into_iter()
            .filter_map(|change| {
                let error = change.apply().err()?;
                let policy = change
                    .policy
                    .as_ref()
                    .map_or(String::new(), |name| format!(" policy {name}"));
                Some(format!(
                    "route {}{policy}: quota {} not applied, the running one stays: {error}",
                    change.route, change.quota
                ))
            })
            .collect()
    }

    /// The route named `name`.
    pub(crate) fn route(&self, name: &str) -> Option<&Route> {
        self.routes.iter().find(|route| route.settings.name == name)
    }

    /// Sets each route's keys series to what its limiter holds now; a route no longer in the
    /// table (`gone`) to 0.
    pub(crate) fn sample_keys(&self) {
        for route in &self.routes {
            if let Some(keys) = route.limiter.keys() {
                route.series.set_keys(keys);
            }
        }
    }

    /// Sets to 0 the keys series of `self`'s routes that `next` does not have.
    pub(crate) fn clear_gone_keys(&self, next: &Table) {
        for route in &self.routes {
            if next.route(&route.settings.name).is_none() {
                route.series.set_keys(0);
            }
        }
    }
}

/// The service of one connection: each request is routed with the table current when it
/// arrives, answered, and counted.
#[derive(Clone)]
pub(crate) struct Gateway {
    pub(crate) table: Arc<ArcSwap<Table>>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) peer: SocketAddr,
}

impl hyper::service::Service<Request<Incoming>> for Gateway {
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = Counted;

    fn call(&self, mut request: Request<Incoming>) -> Counted {
        request.extensions_mut().insert(PeerAddr(self.peer));
        let table = self.table.load();
        let (head, body) = request.into_parts();
        let route = table.routes.iter().find(|route| route.filter.matches(&head));
        let request = Request::from_parts(head, body);
        let (answer, series, routed) = match route {
            Some(route) => (route.service.serve(request), Arc::clone(&route.series), true),
            None => {
                let mut upstream = table.upstream.clone();
                let answer: Answer = Box::pin(async move {
                    let Ok(()) = poll_fn(|cx| upstream.poll_ready(cx)).await;
                    let Ok(response) = upstream.call(request).await;
                    response.map(Either::Left)
                });
                (answer, Arc::clone(&table.unrouted), false)
            }
        };
        Counted {
            answer,
            series,
            counters: Arc::clone(&self.counters),
            routed,
        }
    }
}

/// An answer, counted when it is ready.
pub(crate) struct Counted {
    answer: Answer,
    series: Arc<RouteSeries>,
    counters: Arc<Counters>,
    routed: bool,
}

impl Future for Counted {
    type Output = Result<Response<GatewayBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let response = match self.answer.as_mut().poll(cx) {
            Poll::Ready(response) => response,
            Poll::Pending => return Poll::Pending,
        };
        let outcome = if self.routed {
            Outcome::of(&response)
        } else {
            Outcome::Unlimited
        };
        self.series.count(outcome);
        self.counters.count(outcome, &response);
        Poll::Ready(Ok(response))
    }
}
