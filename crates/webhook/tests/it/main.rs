//! The webhook crate's integration tests: the HTTPS server with a real TLS client (reviews,
//! probes, bad bodies), under abuse (half-sent requests, large bodies, more connections
//! than its cap, shutdown with requests open), the certificate re-read, and the
//! decision's properties over random pods.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod abuse;
mod common;
mod properties;
mod reload;
mod server;
