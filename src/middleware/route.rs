//! Which requests a layer limits: per-route quotas.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::Method;

/// A predicate over the request's head choosing the requests a layer limits; the others pass
/// through untouched (no decision, no fields).
///
/// Stack one layer per route for different quotas on different paths or methods:
///
/// ```
/// use std::net::IpAddr;
/// use http::Method;
/// use tollgate::middleware::{PeerIp, RateLimitLayer, RouteFilter};
/// use tollgate::{KeyedLimiter, TokenBucket};
///
/// let logins = KeyedLimiter::<IpAddr, _>::new(TokenBucket::new("5/min".parse()?)?, 10_000)?;
/// let everything = KeyedLimiter::<IpAddr, _>::new(TokenBucket::new("100/s".parse()?)?, 10_000)?;
/// let login_layer = RateLimitLayer::builder(logins, PeerIp)
///     .only_for(RouteFilter::method(Method::POST).and(RouteFilter::path_prefix("/login")))
///     .policy_name("login")?
///     .build();
/// let global_layer = RateLimitLayer::new(everything, PeerIp);
/// // tower::ServiceBuilder::new().layer(global_layer).layer(login_layer).service(app)
/// # let _ = (login_layer, global_layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RouteFilter {
    matches: Arc<dyn Fn(&Parts) -> bool + Send + Sync>,
}

impl RouteFilter {
    /// The requests for which `matches` is true.
    pub fn new(matches: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> RouteFilter {
        RouteFilter {
            matches: Arc::new(matches),
        }
    }

    /// Requests whose path starts with `prefix` (on whole segments: `/api` matches `/api` and
    /// `/api/users`, not `/apiary`).
    ///
    /// Paths start with one `/`, so a prefix is read with exactly one: `"login"` and
    /// `"//login"` are `"/login"` (without it the prefix would never match, and the route would
    /// go unlimited without a word). A trailing `/` is ignored: `"/api/"` is `"/api"`; `""` and
    /// `"/"` match every path.
    ///
    /// The path is compared as the client sent it, not normalised: if the service behind
    /// decodes percent-escapes, merges `//`, resolves `..`, ignores case or `;` parameters,
    /// `/%6Cogin` or `//login` reach `/login` without matching. Normalise (or refuse) such
    /// paths before this layer, or limit them all with a layer without a route filter.
    pub fn path_prefix(prefix: impl Into<String>) -> RouteFilter {
        let prefix = prefix.into();
        let prefix = format!("/{}", prefix.trim_start_matches('/'))
            .trim_end_matches('/')
            .to_owned();
        RouteFilter::new(move |request| {
            let path = request.uri.path();
            path.strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || prefix.is_empty())
        })
    }

    /// Requests with this method.
    pub fn method(method: Method) -> RouteFilter {
        RouteFilter::new(move |request| request.method == method)
    }

    /// Requests both filters match.
    pub fn and(self, other: RouteFilter) -> RouteFilter {
        RouteFilter::new(move |request| self.matches(request) && other.matches(request))
    }

    /// Whether the layer limits this request.
    pub fn matches(&self, request: &Parts) -> bool {
        (self.matches)(request)
    }
}

impl fmt::Debug for RouteFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteFilter").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: Method, path: &str) -> Parts {
        let request = http::Request::builder().method(method).uri(path).body(());
        request.expect("a valid request").into_parts().0
    }

    #[test]
    fn prefixes_match_whole_segments() {
        let api = RouteFilter::path_prefix("/api/");
        assert!(api.matches(&head(Method::GET, "/api")));
        assert!(api.matches(&head(Method::GET, "/api/users?page=2")));
        assert!(!api.matches(&head(Method::GET, "/apiary")));
        assert!(!api.matches(&head(Method::GET, "/")));
        assert!(RouteFilter::path_prefix("/").matches(&head(Method::GET, "/anything")));
        // Without its leading slash, the same prefix: a request path always starts with one.
        let login = RouteFilter::path_prefix("login");
        assert!(login.matches(&head(Method::POST, "/login")));
        assert!(login.matches(&head(Method::POST, "/login/2fa")));
        assert!(!login.matches(&head(Method::POST, "/login-help")));
        assert!(!login.matches(&head(Method::POST, "/x/login")));
        assert!(RouteFilter::path_prefix("").matches(&head(Method::GET, "/anything")));
        assert!(RouteFilter::path_prefix("api/").matches(&head(Method::GET, "/api/users")));
        let post_login = RouteFilter::method(Method::POST).and(RouteFilter::path_prefix("/login"));
        assert!(post_login.matches(&head(Method::POST, "/login")));
        assert!(!post_login.matches(&head(Method::GET, "/login")));
    }
}
