//! What each policy does on one node: [`place`] returns the devices a pod gets there,
//! or why it gets none.

use crate::dra::{self, MatchOn, ResourceSlice};
use crate::node::{Assignment, NodeModel, NodeState};
use crate::numa_hints::{self, Hint};
use crate::planner::NodePlanner;
use crate::policy::Policy;
use crate::rng::SplitMix64;
use crate::workload::PodArrival;

/// A plan's cost, compared lexicographically (lower is better).
pub type Cost = [i64; 7];

/// The outcome of trying a pod on one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The pod fits: its devices and, for topoalign, the plan's cost (lower is better).
    Fit {
        /// Devices and CPUs.
        assignment: Assignment,
        /// Plan cost (zero for policies that do not score).
        cost: Cost,
    },
    /// Not enough free devices here: the scheduler tries the next node.
    NoFit,
    /// The kubelet refused the pod at admission (TopologyAffinityError).
    Rejected,
    /// The DRA allocator ran out of search budget on this node.
    BudgetExceeded,
}

/// Per-policy settings for the node-level placement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlaceOptions {
    /// The DRA constraint attribute.
    pub dra_match: MatchOn,
    /// The DRA search budget per node (candidate devices examined).
    pub dra_budget: u64,
}

/// Tries `pod` on a node. The caller has checked the counts fit.
#[allow(clippy::too_many_arguments)]
pub fn place(
    policy: Policy,
    model: &NodeModel,
    slices: &[ResourceSlice],
    planner: &NodePlanner<'_>,
    state: &NodeState,
    pod: &PodArrival,
    opts: PlaceOptions,
    rng: &mut SplitMix64,
) -> Attempt {
    match policy {
        Policy::Blind => blind(model, state, pod, rng),
        Policy::TmRestricted => restricted(model, state, pod),
        Policy::DraFirstFit => {
            match dra::allocate_pairs(slices, state, pod.gpus, opts.dra_match, opts.dra_budget) {
                Err(_) => Attempt::BudgetExceeded,
                Ok(None) => Attempt::NoFit,
                Ok(Some((gpus, nics))) => match state.shared_cpus(model, pod.cpus) {
                    Some(cpus) => Attempt::Fit {
                        assignment: Assignment { gpus, nics, cpus },
                        cost: [0; 7],
                    },
                    None => Attempt::NoFit,
                },
            }
        }
        Policy::Topoalign => match planner.plan(model, state, pod) {
            Some((assignment, cost)) => Attempt::Fit { assignment, cost },
            None => Attempt::NoFit,
        },
    }
}

/// Topology Manager `none`: the GPU plugin's choice among all free GPUs (no preferred
/// allocation: the device manager's set order, modeled as a seeded shuffle), the SR-IOV
/// plugin's packed choice (lowest free addresses), CPUs from the shared pool.
fn blind(model: &NodeModel, state: &NodeState, pod: &PodArrival, rng: &mut SplitMix64) -> Attempt {
    let mut gpus: Vec<usize> = state.free_gpus().collect();
    rng.shuffle(&mut gpus);
    gpus.truncate(pod.gpus as usize);
    gpus.sort_unstable();
    let nics: Vec<usize> = state.free_nics().take(pod.nics as usize).collect();
    let cpus = state.shared_cpus(model, pod.cpus);
    match cpus {
        Some(cpus) if gpus.len() == pod.gpus as usize && nics.len() == pod.nics as usize => {
            Attempt::Fit {
                assignment: Assignment { gpus, nics, cpus },
                cost: [0; 7],
            }
        }
        _ => Attempt::NoFit,
    }
}

/// Topology Manager `restricted` + `prefer-closest-numa-nodes`, CPU manager `static`:
/// merge GPU, NIC and CPU hints; admit iff the best hint is preferred; then each
/// resource is allocated on its own inside the chosen NUMA nodes (lowest addresses
/// first, as the device manager and the SR-IOV packed allocator do).
fn restricted(model: &NodeModel, state: &NodeState, pod: &PodArrival) -> Attempt {
    let ids: Vec<u32> = model.numa_cpus.iter().map(|&(id, _)| id).collect();
    let n = ids.len();
    let per_numa = |numa: &[Option<u32>], used: &[bool]| {
        let mut free = vec![0u32; n];
        let mut total = vec![0u32; n];
        for (d, nn) in numa.iter().enumerate() {
            if let Some(p) = nn.and_then(|id| ids.iter().position(|&x| x == id)) {
                total[p] += 1;
                if !used[d] {
                    free[p] += 1;
                }
            }
        }
        (free, total)
    };
    let (gfree, gtotal) = per_numa(&model.gpu_numa, &state.gpu_used);
    let (nfree, ntotal) = per_numa(&model.nic_numa, &state.nic_used);
    let ctotal: Vec<u32> = model.numa_cpus.iter().map(|&(_, c)| c).collect();
    let hints = [
        numa_hints::device_hints(&gfree, &gtotal, pod.gpus),
        numa_hints::device_hints(&nfree, &ntotal, pod.nics),
        numa_hints::device_hints(&state.cpu_free, &ctotal, pod.cpus),
    ];
    let topo = &*model.topology;
    let distances: Vec<u32> = ids
        .iter()
        .flat_map(|&a| {
            ids.iter()
                .map(move |&b| topo.numa_distance(a, b).unwrap_or(10))
        })
        .collect();
    let best: Hint = numa_hints::merge(&hints, n, Some(&distances));
    if !best.preferred {
        return Attempt::Rejected;
    }
    let in_mask = |nn: Option<u32>| {
        nn.and_then(|id| ids.iter().position(|&x| x == id))
            .is_some_and(|p| best.mask & (1 << p) != 0)
    };
    let pick = |numa: &[Option<u32>], free: Vec<usize>, want: usize| {
        let (mut inside, outside): (Vec<usize>, Vec<usize>) =
            free.into_iter().partition(|&d| in_mask(numa[d]));
        inside.extend(outside);
        inside.truncate(want);
        inside
    };
    let gpus = pick(
        &model.gpu_numa,
        state.free_gpus().collect(),
        pod.gpus as usize,
    );
    let nics = pick(
        &model.nic_numa,
        state.free_nics().collect(),
        pod.nics as usize,
    );
    let mut cpus = Vec::new();
    let mut want = pod.cpus;
    for (p, &id) in ids.iter().enumerate() {
        if best.mask & (1 << p) != 0 && want > 0 {
            let take = state.cpu_free[p].min(want);
            if take > 0 {
                cpus.push((id, take));
            }
            want -= take;
        }
    }
    if want > 0 || gpus.len() < pod.gpus as usize || nics.len() < pod.nics as usize {
        return Attempt::NoFit;
    }
    Attempt::Fit {
        assignment: Assignment { gpus, nics, cpus },
        cost: [0; 7],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use topoalign_topology::PcieClass;

    fn model(name: &str) -> NodeModel {
        NodeModel::new(Arc::new(topoalign_discover::profiles::get(name).unwrap())).unwrap()
    }

    fn pod(g: u32) -> PodArrival {
        PodArrival {
            id: 0,
            at: 0.0,
            lifetime: 1.0,
            gpus: g,
            nics: g,
            cpus: 8 * g,
        }
    }

    const OPTS: PlaceOptions = PlaceOptions {
        dra_match: MatchOn::PcieRoot,
        dra_budget: 100_000,
    };

    fn fit(a: Attempt) -> Assignment {
        match a {
            Attempt::Fit { assignment, .. } => assignment,
            other => panic!("expected a fit, got {other:?}"),
        }
    }

    #[test]
    fn restricted_aligns_numa_but_packs_the_vfs() {
        let m = model("mi300x-8");
        let s = NodeState::new(&m);
        let mut rng = SplitMix64::new(1);
        let a = fit(place(
            Policy::TmRestricted,
            &m,
            &[],
            &NodePlanner::new(&m.topology, &m),
            &s,
            &pod(4),
            OPTS,
            &mut rng,
        ));
        assert_eq!(a.gpus, vec![0, 1, 2, 3]);
        assert_eq!(a.nics, vec![0, 1, 2, 3]);
        assert_eq!(a.cpus, vec![(0, 32)]);
        let pairs = m.pairs(&a.gpus, &a.nics);
        assert_eq!(
            pairs.iter().filter(|p| p.class == PcieClass::Pix).count(),
            1
        );
        assert_eq!(
            pairs.iter().filter(|p| p.class == PcieClass::Node).count(),
            3
        );
    }

    #[test]
    fn restricted_rejects_a_split_request() {
        let m = model("mi300x-8");
        let mut s = NodeState::new(&m);
        // Two GPUs busy on each NUMA node: 4 GPUs fit only across both.
        for g in [0, 1, 4, 5] {
            s.gpu_used[g] = true;
        }
        let mut rng = SplitMix64::new(1);
        assert_eq!(
            place(
                Policy::TmRestricted,
                &m,
                &[],
                &NodePlanner::new(&m.topology, &m),
                &s,
                &pod(4),
                OPTS,
                &mut rng
            ),
            Attempt::Rejected
        );
        // An 8+8 pod on an empty node: the GPUs need both NUMA nodes ({0,1} preferred),
        // but 8 VFs and 64 CPUs fit on one ({0} and {1} preferred, {0,1} not), so no
        // merged hint is preferred (masks differ) and `restricted` refuses the pod.
        let s = NodeState::new(&m);
        assert_eq!(
            place(
                Policy::TmRestricted,
                &m,
                &[],
                &NodePlanner::new(&m.topology, &m),
                &s,
                &pod(8),
                OPTS,
                &mut rng
            ),
            Attempt::Rejected
        );
        // pcie-2socket has one NIC per socket: 4 GPUs + 2 NICs (no pinned CPUs) need
        // both sockets for every resource, so {0,1} is preferred everywhere: admitted.
        let d = model("pcie-2socket");
        let s = NodeState::new(&d);
        let planner = NodePlanner::new(&d.topology, &d);
        let wide = PodArrival {
            nics: 2,
            cpus: 0,
            ..pod(4)
        };
        let a = fit(place(
            Policy::TmRestricted,
            &d,
            &[],
            &planner,
            &s,
            &wide,
            OPTS,
            &mut rng,
        ));
        assert_eq!((a.gpus.len(), a.nics.len()), (4, 2));
        // 2 GPUs + 2 NICs: the GPUs fit one socket, the NICs do not: refused.
        let split = PodArrival {
            nics: 2,
            cpus: 0,
            ..pod(2)
        };
        assert_eq!(
            place(
                Policy::TmRestricted,
                &d,
                &[],
                &planner,
                &s,
                &split,
                OPTS,
                &mut rng
            ),
            Attempt::Rejected
        );
    }

    #[test]
    fn blind_is_seeded() {
        let m = model("mi300x-8");
        let s = NodeState::new(&m);
        let draw = |seed| {
            let mut rng = SplitMix64::new(seed);
            fit(place(
                Policy::Blind,
                &m,
                &[],
                &NodePlanner::new(&m.topology, &m),
                &s,
                &pod(4),
                OPTS,
                &mut rng,
            ))
        };
        assert_eq!(draw(5), draw(5));
        let distinct: std::collections::HashSet<Vec<usize>> =
            (0..20).map(|s| draw(s).gpus).collect();
        assert!(distinct.len() > 5);
        assert_eq!(draw(5).nics, vec![0, 1, 2, 3]);
    }

    #[test]
    fn dra_and_topoalign_get_pix_pairs() {
        let m = model("mi300x-8");
        let slices = dra::publish(&m, "n");
        let s = NodeState::new(&m);
        let mut rng = SplitMix64::new(1);
        for p in [Policy::DraFirstFit, Policy::Topoalign] {
            let a = fit(place(
                p,
                &m,
                &slices,
                &NodePlanner::new(&m.topology, &m),
                &s,
                &pod(4),
                OPTS,
                &mut rng,
            ));
            let pairs = m.pairs(&a.gpus, &a.nics);
            assert!(pairs.iter().all(|x| x.class == PcieClass::Pix), "{p}");
        }
    }
}
