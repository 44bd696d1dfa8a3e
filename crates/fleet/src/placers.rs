//! What each policy does on one node: [`NodeKind::place`] returns the devices a pod gets
//! there, or why it gets none. `blind` and `tm-restricted` ask the kubelet model
//! ([`crate::kubelet`]), `dra-first-fit` the DRA allocator
//! ([`topoalign_dra::alloc::first_fit`], through [`crate::dra`]), `topoalign`
//! the planner ([`topoalign_plan`]).

use std::sync::Arc;

use topoalign_plan::{CostKey, NicCount, NicRole, PlanError, Planner, Request, Usage};
use topoalign_rng::Rng;
use topoalign_topology::{GpuNicPath, Topology};

use crate::dra::{Allocation, DraNode, MatchOn};
use crate::error::FleetError;
use crate::kubelet::{Admission, KubeletNode, KubeletPolicy};
use crate::node::{Assignment, NodeModel, NodeState};
use crate::policy::Policy;
use crate::workload::PodArrival;

/// The outcome of trying a pod on one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The pod fits.
    Fit {
        /// Devices and CPUs.
        assignment: Assignment,
        /// The GPU↔NIC pairs the metrics count: the planner's pairing for topoalign,
        /// each GPU with its best NIC of the pod otherwise.
        pairs: Vec<GpuNicPath>,
        /// The planner's cost (topoalign only; lower is better).
        cost: Option<CostKey>,
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

/// A node type with what every policy needs, built once per type: the model, the DRA
/// devices and claims, the kubelet model and the planner.
#[derive(Debug)]
pub struct NodeKind<'t> {
    /// The node model.
    pub model: NodeModel,
    /// The devices as the stock DRA drivers publish them, with the claims prepared.
    pub dra: DraNode,
    /// The kubelet (Topology Manager, device and CPU managers).
    pub kubelet: KubeletNode,
    /// The joint planner.
    pub planner: Planner<'t>,
}

impl<'t> NodeKind<'t> {
    /// Prepares a node type.
    pub fn new(topology: &'t Arc<Topology>) -> Result<Self, FleetError> {
        let model = NodeModel::new(Arc::clone(topology))?;
        Ok(NodeKind {
            dra: DraNode::new(&model, &topology.name)?,
            kubelet: KubeletNode::new(&model),
            planner: Planner::new(topology),
            model,
        })
    }

    /// Tries `pod` on a node of this type in `state`. The caller has checked the counts
    /// fit. `rng` seeds the kubelet's unsorted GPU order.
    pub fn place(
        &self,
        policy: Policy,
        state: &NodeState,
        pod: &PodArrival,
        opts: PlaceOptions,
        rng: &mut Rng,
    ) -> Result<Attempt, FleetError> {
        let model = &self.model;
        let kubelet = |p: KubeletPolicy, rng: &mut Rng| {
            Ok(
                match self.kubelet.admit(p, model, state, pod, rng.next_u64())? {
                    Admission::Admitted { assignment, pairs } => Attempt::Fit {
                        assignment,
                        pairs,
                        cost: None,
                    },
                    Admission::Rejected(_) => Attempt::Rejected,
                },
            )
        };
        match policy {
            Policy::Blind => kubelet(KubeletPolicy::Blind, rng),
            Policy::TmRestricted => kubelet(KubeletPolicy::Restricted, rng),
            Policy::DraFirstFit => self.dra(state, pod, opts),
            Policy::Topoalign => self.plan(state, pod),
        }
    }

    /// DRA first fit: the claim's pairs, CPUs from the shared pool.
    fn dra(
        &self,
        state: &NodeState,
        pod: &PodArrival,
        opts: PlaceOptions,
    ) -> Result<Attempt, FleetError> {
        let found = self
            .dra
            .allocate(state, pod.gpus, opts.dra_match, opts.dra_budget)?;
        Ok(match found {
            Allocation::BudgetExceeded => Attempt::BudgetExceeded,
            Allocation::NoFit => Attempt::NoFit,
            Allocation::Pairs { gpus, nics } => Attempt::Fit {
                pairs: self.model.pairs(&gpus, &nics),
                assignment: Assignment {
                    gpus,
                    nics,
                    shared_cpus: pod.cpus,
                    ..Assignment::default()
                },
                cost: None,
            },
        })
    }

    /// The planner's optimal plan against the node's usage (reserved CPUs count as used).
    fn plan(&self, state: &NodeState, pod: &PodArrival) -> Result<Attempt, FleetError> {
        let model = &self.model;
        let mut request = Request::new(pod.gpus as usize, NicCount::Total(pod.nics as usize));
        request.cpus = pod.cpus as usize;
        if model.nics_are_vfs {
            request.nic_role = NicRole::Vf;
        } else {
            request.nic_role = NicRole::Pf;
            request.require_rdma = true;
        }
        let usage = Usage {
            gpus: state.used_gpu_bdfs(model),
            nics: state.used_nic_bdfs(model),
            cpus: state.pinned_cpus.union(&model.reserved_cpus),
            memory: Default::default(),
        };
        let plan = match self.planner.plan(&request, &usage) {
            Ok(plan) => plan,
            Err(PlanError::Unsatisfiable { .. }) => return Ok(Attempt::NoFit),
            Err(e) => return Err(FleetError::Planner(e.to_string())),
        };
        let position = |found: Option<usize>, bdf| {
            found.ok_or_else(|| {
                FleetError::Planner(format!(
                    "the plan names {bdf}, which the node does not offer"
                ))
            })
        };
        let gpus = plan
            .gpus
            .iter()
            .map(|&b| position(model.gpu_position(b), b))
            .collect::<Result<Vec<_>, _>>()?;
        let nics = plan
            .nics
            .iter()
            .map(|&b| position(model.nic_position(b), b))
            .collect::<Result<Vec<_>, _>>()?;
        let pairs = plan
            .pairs
            .iter()
            .map(|p| GpuNicPath {
                class: p.class,
                nccl: p.nccl,
                gdr: p.gdr,
            })
            .collect();
        Ok(Attempt::Fit {
            assignment: Assignment {
                gpus,
                nics,
                pinned_cpus: plan.cpus.clone(),
                shared_cpus: 0,
            },
            pairs,
            cost: Some(plan.score.key()),
        })
    }
}

#[cfg(test)]
mod tests {
    use topoalign_topology::PcieClass;

    use super::*;
    use crate::testing::{pod, topology as topo};

    /// A mi300x-8 node type, an empty node and a seeded generator.
    fn mi300x(topo: &Arc<Topology>) -> (NodeKind<'_>, NodeState, Rng) {
        let k = NodeKind::new(topo).unwrap();
        let s = NodeState::new(&k.model);
        (k, s, Rng::new(1))
    }

    const OPTS: PlaceOptions = PlaceOptions {
        dra_match: MatchOn::PcieRoot,
        dra_budget: 100_000,
    };

    fn fit(a: Attempt) -> (Assignment, Vec<GpuNicPath>) {
        match a {
            Attempt::Fit {
                assignment, pairs, ..
            } => (assignment, pairs),
            other => panic!("expected a fit, got {other:?}"),
        }
    }

    #[test]
    fn dra_and_topoalign_get_pix_pairs_where_restricted_does_not() {
        let t = topo("mi300x-8");
        let (k, s, mut rng) = mi300x(&t);
        for p in [Policy::DraFirstFit, Policy::Topoalign] {
            let (a, pairs) = fit(k.place(p, &s, &pod(4), OPTS, &mut rng).unwrap());
            assert_eq!(pairs.len(), 4, "{p}");
            assert!(
                pairs.iter().all(|x| x.class == PcieClass::Pix && x.gdr),
                "{p}"
            );
            assert_eq!(a.pinned_cpus.len() + a.shared_cpus as usize, 32, "{p}");
        }
        let (_, pairs) = fit(k
            .place(Policy::TmRestricted, &s, &pod(4), OPTS, &mut rng)
            .unwrap());
        assert_eq!(pairs.iter().filter(|x| x.gdr).count(), 1);
    }

    #[test]
    fn topoalign_plans_around_what_is_in_use() {
        let t = topo("mi300x-8");
        let (k, mut s, mut rng) = mi300x(&t);
        let first = fit(k
            .place(Policy::Topoalign, &s, &pod(4), OPTS, &mut rng)
            .unwrap())
        .0;
        assert!(
            first
                .pinned_cpus
                .intersection(&k.model.reserved_cpus)
                .is_empty()
        );
        s.take(&first);
        let (second, pairs) = fit(k
            .place(Policy::Topoalign, &s, &pod(4), OPTS, &mut rng)
            .unwrap());
        assert!(second.gpus.iter().all(|g| !first.gpus.contains(g)));
        assert!(second.nics.iter().all(|n| !first.nics.contains(n)));
        assert!(
            second
                .pinned_cpus
                .intersection(&first.pinned_cpus)
                .is_empty()
        );
        assert!(pairs.iter().all(|x| x.class == PcieClass::Pix));
        s.take(&second);
        assert_eq!(
            k.place(Policy::Topoalign, &s, &pod(1), OPTS, &mut rng)
                .unwrap(),
            Attempt::NoFit
        );
    }

    #[test]
    fn a_kubelet_rejection_is_a_rejection() {
        let t = topo("mi300x-8");
        let (k, s, mut rng) = mi300x(&t);
        assert_eq!(
            k.place(Policy::TmRestricted, &s, &pod(8), OPTS, &mut rng)
                .unwrap(),
            Attempt::Rejected
        );
        let (a, _) = fit(k.place(Policy::Blind, &s, &pod(8), OPTS, &mut rng).unwrap());
        assert_eq!(a.gpus.len(), 8);
    }
}
