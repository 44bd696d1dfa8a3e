//! The webhook crate's integration tests: the HTTPS server under load and abuse, and
//! the decision's properties.
