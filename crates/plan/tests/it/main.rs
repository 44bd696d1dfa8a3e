//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod exact;
mod score;
