//! Integration tests of the gang model: job descriptions and their errors, every
//! dialect's manifests checked field by field against the upstream APIs, and the
//! rail-pinned claim run through the DRA allocator model on published slices.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod allocation;
mod dialects;
mod jobs;

/// A job description with every field at a usual value; tests replace lines.
pub const JOB: &str = "name: train
namespace: ml
pods: 4
pairsPerPod: 4
class: PXB
rails: [4, 5, 6, 7]
domain:
  level: nvlink
image: nvcr.io/nvidia/pytorch:25.01-py3
command: [torchrun, train.py]
";

/// The job with `from` replaced by `to` (which must occur).
pub fn job_with(from: &str, to: &str) -> String {
    assert!(JOB.contains(from), "{from}");
    JOB.replace(from, to)
}
