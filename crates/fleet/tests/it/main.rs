#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The fleet simulator's integration tests.

mod acceptance;
mod gangs;
