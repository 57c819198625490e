//! The tower layer (feature `tower`) over real TCP on loopback, with real HTTP/1, HTTP/2, gRPC,
//! axum and tonic clients and servers.
//!
//! One test binary (`cargo test -p tollgate --features tower --test middleware`).

#[path = "../middleware_common/mod.rs"]
mod middleware_common;

mod axum_router;
mod grpc;
mod http_over_tcp;
mod live_quota;
mod policy_sets;
mod readiness;
mod shaping;
mod tonic_server;
