//! A known node as the decisions judge it: its report with the allocations assumed for
//! bound pods applied (as the kubelet would place them), its fragmentation and the state
//! key equal nodes share verdicts by.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use topoalign_kube_types::kubelet_settings::{CpuPolicy, MemoryPolicy, Settings};
use topoalign_plan::Planner;
use topoalign_plan::device_score;
use topoalign_tm::{Brief, Prepared, ResourceMap};
use topoalign_topology::{Classifier, NodeUsage, Topology};

use crate::plugin::node::{Assumed, NodeInfo};

/// A known node with its assumed allocations applied.
#[derive(Debug, Clone)]
pub struct Effective {
    /// The data.
    pub info: NodeInfo,
    /// Reported plus assumed usage.
    pub used: NodeUsage,
    /// Partially used switches, NUMA nodes and islands before any new allocation.
    pub fragmentation: u32,
    /// Hash of topology and settings: equal keys share one prepared Topology Manager.
    pub machine_key: u64,
    /// Hash of topology, settings and usage: equal keys get equal verdicts.
    pub state_key: u64,
    /// Assumed pods that hold nothing: the kubelet would reject them, or their devices
    /// could not be chosen.
    pub unplaced: Vec<String>,
}

/// Applies the node's assumed allocations (in binding order) on top of its report.
pub(crate) fn effective(
    name: &str,
    info: NodeInfo,
    assumed: &BTreeMap<String, Assumed>,
    resources: &ResourceMap,
) -> Effective {
    let topo = &info.topology.topology;
    let mut used = info.used.clone();
    let mut unplaced = Vec::new();
    let mut pods: Vec<(&String, &Assumed)> = assumed
        .iter()
        .filter(|(k, a)| a.node == name && !info.reported_pods.contains(*k))
        .collect();
    if !pods.is_empty() {
        pods.sort_by(|a, b| a.1.bound_at.cmp(&b.1.bound_at).then(a.0.cmp(b.0)));
        let mut planner = None;
        let tm = Prepared::new(topo, &info.settings, resources);
        for (key, a) in pods {
            if let Some(pod) = &a.pod {
                match tm.simulate(pod, &used, 0) {
                    Ok(o) if o.admitted => {
                        take_allocated(&mut used, topo, &Brief::of(&o));
                        continue;
                    }
                    Ok(_) => {
                        unplaced.push(key.clone());
                        continue;
                    }
                    Err(err) => {
                        tracing::debug!(pod = %key, node = %name, error = %err,
                            "kubelet simulation failed; assuming the planner's choice");
                    }
                }
            }
            let planner = planner.get_or_insert_with(|| Planner::new(topo));
            let mut req = a.request.clone();
            // The kubelet ignores topoalign's bounds; take what it can.
            req.max_pair = None;
            req.gpu_link = topoalign_plan::GpuLinkBound::Any;
            match planner.plan(&req, &used) {
                Ok(p) => {
                    used.gpus.extend(p.gpus);
                    used.nics.extend(p.nics);
                }
                Err(_) => unplaced.push(key.clone()),
            }
        }
        used.gpus.sort();
        used.gpus.dedup();
        used.nics.sort();
        used.nics.dedup();
    }
    let fragmentation = fragmentation_of(topo, &used);
    let mut h = DefaultHasher::new();
    info.topology.id.hash(&mut h);
    hash_settings(&info.settings, &mut h);
    let machine_key = h.finish();
    used.gpus.hash(&mut h);
    used.nics.hash(&mut h);
    used.cpus.hash(&mut h);
    Effective {
        state_key: h.finish(),
        machine_key,
        info,
        used,
        fragmentation,
        unplaced,
    }
}

/// Adds what the kubelet allocated in `o` to `used`.
pub(crate) fn take_allocated(used: &mut NodeUsage, topo: &Topology, o: &Brief) {
    for b in &o.devices {
        if topo.gpu_index(*b).is_some() {
            used.gpus.push(*b);
        } else {
            used.nics.push(*b);
        }
    }
    used.cpus = used.cpus.union(&o.cpus);
    for (numa, bytes) in &o.memory {
        *used.memory.entry(*numa).or_default() += bytes;
    }
}

fn hash_settings(s: &Settings, h: &mut DefaultHasher) {
    s.topology_manager_policy.hash(h);
    s.topology_manager_scope.hash(h);
    s.topology_manager_policy_options.hash(h);
    (s.cpu_manager_policy == CpuPolicy::Static).hash(h);
    s.reserved_system_cpus.hash(h);
    s.reserved_cpu_millis.hash(h);
    // The simulation reads the memory manager too: two nodes that differ only there
    // must not share a verdict.
    (s.memory_manager_policy == MemoryPolicy::Static).hash(h);
    s.reserved_memory.hash(h);
}

/// Partially used switches + NUMA nodes + fabric islands under `used` (the planner's
/// fragmentation measure, before any new allocation). Unknown addresses are ignored.
pub(crate) fn fragmentation_of(topo: &Topology, used: &NodeUsage) -> u32 {
    fragmentation_with(topo, &topo.classifier(), &topo.fabric_islands(), used)
}

/// [`fragmentation_of`] with the node's classifier and fabric islands made once for many
/// usages.
pub(crate) fn fragmentation_with(
    topo: &Topology,
    cls: &Classifier<'_>,
    islands: &[Vec<usize>],
    used: &NodeUsage,
) -> u32 {
    UsedDevices::of(topo, used).fragmentation(topo, cls, islands)
}

/// Which GPUs and NICs (by topology index) are in use: a usage as the fragmentation
/// reads it.
#[derive(Debug, Clone)]
pub(crate) struct UsedDevices {
    gpus: Vec<bool>,
    nics: Vec<bool>,
}

impl UsedDevices {
    /// The devices of `used`.
    pub(crate) fn of(topo: &Topology, used: &NodeUsage) -> Self {
        let mut out = UsedDevices {
            gpus: vec![false; topo.gpus.len()],
            nics: vec![false; topo.nics.len()],
        };
        for b in &used.gpus {
            if let Some(i) = topo.gpu_index(*b) {
                out.gpus[i] = true;
            }
        }
        for b in &used.nics {
            if let Some(i) = topo.nic_index(*b) {
                out.nics[i] = true;
            }
        }
        out
    }

    /// The fragmentation these leave (`cls` and `islands`: the node's classifier and
    /// fabric islands).
    pub(crate) fn fragmentation(
        &self,
        topo: &Topology,
        cls: &Classifier<'_>,
        islands: &[Vec<usize>],
    ) -> u32 {
        device_score(topo, cls, &self.gpus, &self.nics, islands, &[], &[]).fragmentation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &Settings) -> u64 {
        let mut h = DefaultHasher::new();
        hash_settings(s, &mut h);
        h.finish()
    }

    #[test]
    fn the_state_key_tells_memory_manager_settings_apart() {
        let base = Settings::default();
        let mut stat = base.clone();
        stat.memory_manager_policy = MemoryPolicy::Static;
        assert_ne!(key(&base), key(&stat));
        let mut reserved = stat.clone();
        reserved.reserved_memory.insert(0, 1 << 30);
        assert_ne!(key(&stat), key(&reserved));
        assert_eq!(key(&base), key(&base.clone()));
    }
}
