//! Integration tests of the fabric model on the built-in profiles: rail files resolved
//! against their NICs, and rails and leaves from what each NIC is cabled to.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod neighbour_rails;
mod rail_files;
