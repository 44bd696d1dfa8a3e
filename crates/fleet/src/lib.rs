//! Fleet simulation: a seeded stream of pods placed under blind, Topology Manager, DRA first-fit and topoalign policies.
