//! The topoalign policy on one node: the joint GPU+NIC+CPU choice with the planner's
//! lexicographic objective (GDR pairs, worst class, class ranks, NUMA span, then
//! fragmentation of what is left).

use topoalign_topology::Topology;

use crate::node::{Assignment, NodeModel, NodeState};
use crate::placers::Cost;
use crate::workload::PodArrival;

/// The planner for one node type.
#[derive(Debug, Clone)]
pub struct NodePlanner<'t> {
    #[allow(dead_code)]
    topology: &'t Topology,
}

impl<'t> NodePlanner<'t> {
    /// Prepares the planner for a node type.
    pub fn new(topology: &'t Topology, _model: &NodeModel) -> Self {
        NodePlanner { topology }
    }

    /// The best assignment for `pod` on a node in `state`, with its cost; `None` when
    /// the pod does not fit.
    pub fn plan(
        &self,
        model: &NodeModel,
        state: &NodeState,
        pod: &PodArrival,
    ) -> Option<(Assignment, Cost)> {
        search(model, state, pod)
    }
}

/// Exhaustive over GPU subsets of the free GPUs; each GPU then takes its best free NIC.
fn search(model: &NodeModel, state: &NodeState, pod: &PodArrival) -> Option<(Assignment, Cost)> {
    let free: Vec<usize> = state.free_gpus().collect();
    let want = pod.gpus as usize;
    if free.len() < want || pod.nics != pod.gpus {
        return None;
    }
    let mut best: Option<(Assignment, Cost)> = None;
    let mut subset: Vec<usize> = (0..want).collect();
    loop {
        let gpus: Vec<usize> = subset.iter().map(|&i| free[i]).collect();
        if let Some(cand) = evaluate(model, state, pod, gpus)
            && best.as_ref().is_none_or(|(_, c)| cand.1 < *c)
        {
            best = Some(cand);
        }
        // Next combination in lexicographic order.
        let mut i = want;
        loop {
            if i == 0 {
                return best;
            }
            i -= 1;
            if subset[i] < free.len() - want + i {
                subset[i] += 1;
                for j in i + 1..want {
                    subset[j] = subset[j - 1] + 1;
                }
                break;
            }
        }
    }
}

fn evaluate(
    model: &NodeModel,
    state: &NodeState,
    pod: &PodArrival,
    gpus: Vec<usize>,
) -> Option<(Assignment, Cost)> {
    let mut nic_taken = state.nic_used.clone();
    let mut nics = Vec::with_capacity(gpus.len());
    for &g in &gpus {
        let n = (0..model.nics.len())
            .filter(|&n| !nic_taken[n])
            .min_by_key(|&n| {
                let p = model.path(g, n);
                (!p.gdr, p.class)
            })?;
        nic_taken[n] = true;
        nics.push(n);
    }
    let pairs = model.pairs(&gpus, &nics);
    let no_gdr = pairs.iter().filter(|p| !p.gdr).count() as i64;
    let worst = pairs.iter().map(|p| p.class.rank()).max().unwrap_or(0);
    let rank_sum: u32 = pairs.iter().map(|p| p.class.rank()).sum();
    // CPUs: the GPUs' NUMA nodes first, then the others.
    let ids: Vec<u32> = model.numa_cpus.iter().map(|&(id, _)| id).collect();
    let mut order: Vec<usize> = (0..ids.len()).collect();
    let gpu_nodes: Vec<usize> = gpus
        .iter()
        .filter_map(|&g| model.gpu_numa[g].and_then(|id| ids.iter().position(|&x| x == id)))
        .collect();
    order.sort_by_key(|p| (!gpu_nodes.contains(p), *p));
    let mut cpus = Vec::new();
    let mut want = pod.cpus;
    let mut span_mask = 0u64;
    for &p in &gpu_nodes {
        span_mask |= 1 << p;
    }
    for &n in &nics {
        if let Some(p) = model.nic_numa[n].and_then(|id| ids.iter().position(|&x| x == id)) {
            span_mask |= 1 << p;
        }
    }
    for p in order {
        if want == 0 {
            break;
        }
        let take = state.cpu_free[p].min(want);
        if take > 0 {
            cpus.push((ids[p], take));
            span_mask |= 1 << p;
            want -= take;
        }
    }
    if want > 0 {
        return None;
    }
    // Fragmentation after the allocation: NUMA nodes left partially used, plus free
    // GPUs left on the node (fuller nodes first keeps whole nodes for big pods).
    let mut used = state.gpu_used.clone();
    for &g in &gpus {
        used[g] = true;
    }
    let partial_numa = (0..ids.len())
        .filter(|&p| {
            let on: Vec<bool> = (0..used.len())
                .filter(|&g| model.gpu_numa[g] == Some(ids[p]))
                .map(|g| used[g])
                .collect();
            on.iter().any(|u| *u) && on.iter().any(|u| !*u)
        })
        .count() as i64;
    let free_after = used.iter().filter(|u| !**u).count() as i64;
    let cost = [
        no_gdr,
        i64::from(worst),
        i64::from(rank_sum),
        i64::from(span_mask.count_ones()),
        partial_numa,
        free_after,
        gpus.iter().map(|&g| g as i64).sum(),
    ];
    Some((Assignment { gpus, nics, cpus }, cost))
}
