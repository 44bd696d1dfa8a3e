//! CPU and memory placement for a chosen device set.

use topoalign_topology::CpuSet;

use crate::problem::Found;
use crate::request::Request;
use crate::types::NodeMemory;

use super::{Planner, Taken};

impl Planner<'_> {
    /// CPUs and memory: from the GPUs' nodes first, then the NICs', then the extra nodes.
    pub(super) fn place_host(
        &self,
        req: &Request,
        taken: &Taken,
        f: &Found,
    ) -> (CpuSet, Vec<NodeMemory>) {
        let m = &self.model;
        let mut order: Vec<usize> = Vec::new();
        let push = |i: usize, order: &mut Vec<usize>| {
            if !order.contains(&i) {
                order.push(i);
            }
        };
        let mut gn: Vec<usize> = f.gpu_set.iter().filter_map(|&g| m.gpu_numa[g]).collect();
        gn.sort_unstable();
        for i in gn {
            push(i, &mut order);
        }
        let mut nn: Vec<usize> = f.nic_set.iter().filter_map(|&n| m.nic_numa[n]).collect();
        nn.sort_unstable();
        for i in nn {
            push(i, &mut order);
        }
        for i in 0..m.numa_ids.len() {
            if f.span >> i & 1 == 1 {
                push(i, &mut order);
            }
        }
        let mut ids = Vec::new();
        let mut left = req.cpus;
        for &i in &order {
            if left == 0 {
                break;
            }
            for &c in m.numa_cpus[i]
                .difference(&taken.cpus)
                .ids()
                .iter()
                .take(left)
            {
                ids.push(c);
            }
            left = req.cpus - ids.len();
        }
        let mut memory = Vec::new();
        if let (Some(mut need), Some(free)) =
            (req.memory.filter(|&b| b > 0), self.free_memory(taken))
        {
            for &i in &order {
                if need == 0 {
                    break;
                }
                let take = need.min(free[i]);
                if take > 0 {
                    memory.push(NodeMemory {
                        node: m.numa_ids[i],
                        bytes: take,
                    });
                    need -= take;
                }
            }
        }
        (CpuSet::from_ids(ids), memory)
    }
}
