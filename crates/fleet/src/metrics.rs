//! What a run measures per policy.

use serde::Serialize;
use topoalign_topology::GpuNicPath;

use crate::node::PairCounts;
use crate::policy::Policy;
use crate::workload::PodArrival;

/// Fleet GPU utilisation at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UtilSample {
    /// Time (minutes).
    pub at: f64,
    /// GPUs in use / fleet GPUs.
    pub util: f64,
}

/// Outcomes for pods of one size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SizeStats {
    /// GPUs per pod.
    pub gpus: u32,
    /// Pods of this size placed.
    pub placed: u64,
    /// Their GPU↔NIC pairs with GDR on.
    pub gdr_pairs: u64,
    /// Their pairs.
    pub pairs: u64,
}

/// One policy's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    /// The policy.
    pub policy: Policy,
    /// Pods placed.
    pub placed: u64,
    /// Pods refused by the kubelet (TopologyAffinityError).
    pub rejected: u64,
    /// Pods that waited longer than the patience limit.
    pub timed_out: u64,
    /// Pods still waiting when the simulation ended.
    pub left_pending: u64,
    /// Pods still running when the simulation ended.
    pub running_at_end: u64,
    /// GPU↔NIC pairs of placed pods, by class, each GPU with its best NIC of the pod.
    pub pairs: PairCounts,
    /// Per pod size.
    pub by_size: Vec<SizeStats>,
    /// Mean wait of placed pods (minutes).
    pub mean_wait: f64,
    /// Mean fleet GPU utilisation over the samples.
    pub mean_utilisation: f64,
    /// Node attempts where the DRA allocator ran out of search budget.
    pub dra_budget_exceeded: u64,
    /// Fleet GPU utilisation over time.
    pub utilisation: Vec<UtilSample>,
    #[serde(skip)]
    wait_sum: f64,
}

impl PolicyReport {
    /// An empty report.
    pub fn new(policy: Policy) -> Self {
        PolicyReport {
            policy,
            placed: 0,
            rejected: 0,
            timed_out: 0,
            left_pending: 0,
            running_at_end: 0,
            pairs: PairCounts::default(),
            by_size: Vec::new(),
            mean_wait: 0.0,
            mean_utilisation: 0.0,
            dra_budget_exceeded: 0,
            utilisation: Vec::new(),
            wait_sum: 0.0,
        }
    }

    /// Records a placed pod.
    pub fn record_placement(&mut self, pod: &PodArrival, pairs: &[GpuNicPath], waited: f64) {
        self.placed += 1;
        self.wait_sum += waited.max(0.0);
        self.pairs.add(pairs);
        let idx = match self.by_size.iter().position(|s| s.gpus == pod.gpus) {
            Some(i) => i,
            None => {
                self.by_size.push(SizeStats {
                    gpus: pod.gpus,
                    ..SizeStats::default()
                });
                self.by_size.len() - 1
            }
        };
        let s = &mut self.by_size[idx];
        s.placed += 1;
        s.pairs += pairs.len() as u64;
        s.gdr_pairs += pairs.iter().filter(|p| p.gdr).count() as u64;
    }

    /// Computes the averages once the run is over.
    pub fn finish(&mut self) {
        self.by_size.sort_by_key(|s| s.gpus);
        self.mean_wait = if self.placed == 0 {
            0.0
        } else {
            self.wait_sum / self.placed as f64
        };
        self.mean_utilisation = if self.utilisation.is_empty() {
            0.0
        } else {
            self.utilisation.iter().map(|s| s.util).sum::<f64>() / self.utilisation.len() as f64
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_topology::PcieClass;

    #[test]
    fn placements_accumulate() {
        let mut r = PolicyReport::new(Policy::Blind);
        let pod = |g| PodArrival {
            id: 0,
            at: 0.0,
            lifetime: 1.0,
            gpus: g,
            nics: g,
            cpus: 0,
        };
        let pix = GpuNicPath::new(PcieClass::Pix, false);
        let sys = GpuNicPath::new(PcieClass::Sys, false);
        r.record_placement(&pod(2), &[pix, sys], 3.0);
        r.record_placement(&pod(1), &[pix], 1.0);
        r.utilisation = vec![
            UtilSample { at: 0.0, util: 0.0 },
            UtilSample { at: 1.0, util: 0.5 },
        ];
        r.finish();
        assert_eq!(r.placed, 2);
        assert_eq!((r.pairs.pix, r.pairs.sys, r.pairs.gdr), (2, 1, 2));
        assert_eq!(r.by_size[0].gpus, 1);
        assert_eq!(r.by_size[1].gdr_pairs, 1);
        assert!((r.mean_wait - 2.0).abs() < 1e-9);
        assert!((r.mean_utilisation - 0.25).abs() < 1e-9);
    }
}
