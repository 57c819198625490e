//! The tower layer (feature `tower`) over real TCP on loopback, with real HTTP/1, HTTP/2, gRPC,
//! axum and tonic clients and servers; (feature `metrics`) the layer's outcomes in the series.
//!
//! One test binary (`cargo test -p tollgate --features tower --test middleware`).

#[cfg(feature = "metrics")]
#[path = "../metrics_common/mod.rs"]
mod metrics_common;
#[path = "../middleware_common/mod.rs"]
mod middleware_common;

mod axum_router;
mod grpc;
mod http_over_tcp;
mod live_quota;
#[cfg(feature = "metrics")]
mod metrics;
mod policy_sets;
mod readiness;
mod shaping;
mod tonic_server;
mod wide_shaper;
