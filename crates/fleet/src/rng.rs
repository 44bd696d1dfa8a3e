//! The seeded generator of the fleet simulation: the project's one PRNG
//! ([`topoalign_tm::rng::Rng`], PCG-64), so that a seed gives the same numbers on every
//! platform and every run. Each consumer of a seed (the workload, each policy, the demo's
//! draws) takes its own named sub-stream with [`Rng::derive`].

pub(crate) use topoalign_tm::rng::Rng;
