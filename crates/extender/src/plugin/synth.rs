//! Synthetic nodes from the built-in profiles with random occupancy, in the declared form
//! the extender reads from Node objects (see [`topoalign_kube_types::labels`]): for benchmarks, tests and
//! the end-to-end harness (`topoalign extender nodes` prints them as Node manifests).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use topoalign_kube_types::kubelet_settings::{Policy, Scope, Settings};
use topoalign_kube_types::labels::*;
use topoalign_rng::Rng;
use topoalign_tm::gpu_resource;
use topoalign_topology::{NodeUsage, Topology};

use crate::plugin::node::{NodeEntry, NodeInfo, Source};
use crate::plugin::nodeinfo::Interner;

/// The NIC resource a profile's pods ask for: SR-IOV VFs when the node has them, else
/// RDMA physical functions.
pub(crate) fn nic_resource(topo: &Topology) -> &'static str {
    if topo.nics.iter().any(|n| n.is_vf()) {
        "nvidia.com/sriov-rdma-vf"
    } else {
        "rdma/ib"
    }
}

/// One synthetic node.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthNode {
    /// Its name.
    pub name: String,
    /// Its profile.
    pub profile: String,
    /// Its kubelet's policy.
    pub policy: Policy,
    /// Its kubelet's scope.
    pub scope: Scope,
    /// What is in use.
    pub used: NodeUsage,
    /// GPUs in all.
    pub gpus: usize,
    /// NIC functions of the node's NIC resource in all.
    pub nics: usize,
}

/// `count` nodes cycling through `profiles` and `policies`, each with a uniformly random
/// number of GPUs taken (each with one random NIC function of the node's NIC resource),
/// reproducibly from `seed`. Unknown profile names are an error naming them.
pub fn synth_nodes(
    count: usize,
    seed: u64,
    profiles: &[&str],
    policies: &[Policy],
) -> Result<Vec<SynthNode>, String> {
    let topos: Vec<(String, Topology)> = profiles
        .iter()
        .map(|p| {
            topoalign_profiles::get(p)
                .map(|t| (p.to_string(), t))
                .ok_or_else(|| {
                    format!(
                        "unknown profile `{p}` (expected one of {})",
                        topoalign_profiles::NAMES.join(", ")
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    if topos.is_empty() || policies.is_empty() {
        return Err("at least one profile and one policy are needed".to_string());
    }
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(count);
    for k in 0..count {
        let (profile, topo) = &topos[k % topos.len()];
        let vfs = nic_resource(topo) == "nvidia.com/sriov-rdma-vf";
        let mut nic_pool: Vec<usize> = (0..topo.nics.len())
            .filter(|&n| {
                let nic = &topo.nics[n];
                if vfs {
                    nic.is_vf()
                } else {
                    !nic.is_vf() && nic.rdma.is_some()
                }
            })
            .collect();
        let mut gpus: Vec<usize> = (0..topo.gpus.len()).collect();
        rng.shuffle(&mut gpus);
        rng.shuffle(&mut nic_pool);
        let taken = rng.below(topo.gpus.len() + 1);
        let mut used = NodeUsage::empty();
        used.gpus = gpus[..taken].iter().map(|&g| topo.gpu_bdf(g)).collect();
        used.nics = nic_pool[..taken.min(nic_pool.len())]
            .iter()
            .map(|&n| topo.nic_bdf(n))
            .collect();
        used.gpus.sort();
        used.nics.sort();
        out.push(SynthNode {
            name: format!("{profile}-{k:05}"),
            profile: profile.clone(),
            policy: policies[(k / topos.len()) % policies.len()],
            scope: Scope::Container,
            used,
            gpus: topo.gpus.len(),
            nics: nic_pool.len(),
        });
    }
    Ok(out)
}

impl SynthNode {
    /// The node as cluster state.
    pub fn entry(&self, interner: &mut Interner) -> NodeEntry {
        let topology = match interner.profile(&self.profile) {
            Ok(t) => t,
            Err(why) => return NodeEntry::Broken(why.to_string()),
        };
        let settings = Settings {
            topology_manager_policy: self.policy,
            topology_manager_scope: self.scope,
            ..Settings::default()
        };
        NodeEntry::Known(NodeInfo {
            topology,
            settings: Arc::new(settings),
            used: self.used.clone(),
            source: Source::Labels,
            reported_at: None,
            reported_pods: BTreeSet::new(),
        })
    }

    /// A `v1.Node` manifest the extender reads as this node: the profile, policy and scope
    /// labels and the used-devices annotation; `status.capacity` holds every device and
    /// `status.allocatable` only the free ones, so that the scheduler's own resource fit
    /// agrees with the extender on counts.
    pub fn manifest(&self) -> Value {
        let topo = topoalign_profiles::get(&self.profile);
        let (gres, nres) = topo.as_ref().map_or(("nvidia.com/gpu", "rdma/ib"), |t| {
            (gpu_resource(t), nic_resource(t))
        });
        let cpus = topo
            .as_ref()
            .map_or(0, |t| t.numa.iter().map(|n| n.cpus.len()).sum::<usize>());
        let used = serde_json::to_string(&json!({"gpus": self.used.gpus, "nics": self.used.nics}))
            .unwrap_or_default();
        let free_g = self.gpus - self.used.gpus.len().min(self.gpus);
        let free_n = self.nics - self.used.nics.len().min(self.nics);
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    PROFILE_LABEL: self.profile,
                    POLICY_LABEL: self.policy.as_str(),
                    SCOPE_LABEL: self.scope.as_str(),
                },
                "annotations": {USED_ANNOTATION: used},
            },
            "status": {
                "capacity": {
                    "cpu": cpus.to_string(), "memory": "2Ti", "pods": "110",
                    gres: self.gpus.to_string(), nres: self.nics.to_string(),
                },
                "allocatable": {
                    "cpu": cpus.to_string(), "memory": "2Ti", "pods": "110",
                    gres: free_g.to_string(), nres: free_n.to_string(),
                },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::nodeinfo::from_node_labels;

    #[test]
    fn synthetic_nodes_are_reproducible_and_read_back_from_their_manifest() {
        let a = synth_nodes(
            30,
            7,
            &["mi300x-8", "gb300-4", "dgx-h100"],
            &[Policy::Restricted, Policy::None],
        )
        .unwrap();
        let b = synth_nodes(
            30,
            7,
            &["mi300x-8", "gb300-4", "dgx-h100"],
            &[Policy::Restricted, Policy::None],
        )
        .unwrap();
        assert_eq!(a, b);
        assert!(
            a.iter().any(|n| n.used.gpus.is_empty()) && a.iter().any(|n| !n.used.gpus.is_empty())
        );
        let mut i = Interner::default();
        for n in &a {
            let Some(NodeEntry::Known(info)) = from_node_labels(&n.manifest(), &mut i) else {
                panic!("{} did not read back", n.name);
            };
            assert_eq!(info.used.gpus, n.used.gpus);
            assert_eq!(info.used.nics, n.used.nics);
            assert_eq!(info.settings.topology_manager_policy, n.policy);
        }
        assert_eq!(i.len(), 3, "one shared topology per profile");
        assert!(
            synth_nodes(1, 1, &["nope"], &[Policy::None])
                .unwrap_err()
                .contains("nope")
        );
    }
}
