//! In-process timing of the planner, for comparing it with another allocator timed the same
//! way (the e2e `speed` scenario puts it beside the upstream structured allocator, which is
//! timed from `NewAllocator` to the end of `Allocate`). The proper benchmark of the planner
//! is the criterion bench `plan`; this is the cheap figure a script can take from a binary.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;
use topoalign_topology::Topology;

use crate::{Planner, Request, Usage};

/// Wall-clock times of one kind of call over the repetitions, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallTimes {
    /// The median (the upper one of an even count, as the scenario's allocator reports it).
    pub median_ms: f64,
    /// The fastest call.
    pub min_ms: f64,
    /// The slowest call.
    pub max_ms: f64,
}

impl CallTimes {
    /// The statistics of `times` (none gives zeros).
    fn of(mut times: Vec<Duration>) -> Self {
        times.sort_unstable();
        // Whole nanoseconds over 1e6, so JSON shows 0.650356 rather than 0.65035600000000001.
        let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_nanos() as f64 / 1e6);
        CallTimes {
            median_ms: ms(times.get(times.len() / 2)),
            min_ms: ms(times.first()),
            max_ms: ms(times.last()),
        }
    }
}

/// How long the planner takes in-process on one request and usage, topology already loaded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanTiming {
    /// Repetitions of each kind of call.
    pub reps: usize,
    /// [`Planner::new`] then [`Planner::plan`]: the node's tables built on every call, as an
    /// allocator built from the node's inventory for each claim does.
    pub new_and_plan: CallTimes,
    /// [`Planner::plan`] alone, on one planner built beforehand (what a caller that keeps
    /// the planner per node pays).
    pub plan_only: CallTimes,
}

/// Times `reps` calls (at least one) of [`Planner::new`] + [`Planner::plan`] and `reps` of
/// [`Planner::plan`] alone on `topo`, `req` and `usage`. The plans are discarded: the
/// caller plans once more for the answer it prints.
pub fn time_plan(topo: &Topology, req: &Request, usage: &Usage, reps: usize) -> PlanTiming {
    let reps = reps.max(1);
    let new_and_plan = (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            let planner = Planner::new(black_box(topo));
            let _ = black_box(planner.plan(black_box(req), black_box(usage)));
            t0.elapsed()
        })
        .collect();
    let planner = Planner::new(topo);
    let plan_only = (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            let _ = black_box(planner.plan(black_box(req), black_box(usage)));
            t0.elapsed()
        })
        .collect();
    PlanTiming {
        reps,
        new_and_plan: CallTimes::of(new_and_plan),
        plan_only: CallTimes::of(plan_only),
    }
}

impl PlanTiming {
    /// One line for a table: both medians with their ranges.
    pub fn text(&self) -> String {
        let t = |c: &CallTimes| {
            format!(
                "{:.3} ms median ({:.3}–{:.3})",
                c.median_ms, c.min_ms, c.max_ms
            )
        };
        format!(
            "In-process over {} calls: planner built and run {}; run alone {}",
            self.reps,
            t(&self.new_and_plan),
            t(&self.plan_only)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NicCount;

    #[test]
    fn statistics_are_the_sorted_middle_and_ends() {
        let ms = |v: &[u64]| v.iter().map(|&m| Duration::from_millis(m)).collect();
        let c = CallTimes::of(ms(&[5, 1, 9, 3]));
        assert_eq!((c.median_ms, c.min_ms, c.max_ms), (5.0, 1.0, 9.0));
        let c = CallTimes::of(ms(&[7, 2, 4]));
        assert_eq!((c.median_ms, c.min_ms, c.max_ms), (4.0, 2.0, 7.0));
        let c = CallTimes::of(Vec::new());
        assert_eq!((c.median_ms, c.min_ms, c.max_ms), (0.0, 0.0, 0.0));
    }

    #[test]
    fn timing_counts_its_calls_and_orders_its_figures() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let req = Request::new(1, NicCount::PerGpu(1));
        let t = time_plan(&topo, &req, &Usage::empty(), 3);
        assert_eq!(t.reps, 3);
        for c in [t.new_and_plan, t.plan_only] {
            assert!(c.min_ms <= c.median_ms && c.median_ms <= c.max_ms, "{c:?}");
            assert!(c.max_ms > 0.0, "{c:?}");
        }
        assert_eq!(time_plan(&topo, &req, &Usage::empty(), 0).reps, 1);
        assert!(
            t.text().starts_with("In-process over 3 calls"),
            "{}",
            t.text()
        );
    }
}
