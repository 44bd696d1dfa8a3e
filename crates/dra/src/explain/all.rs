//! `explain --all`: how aligned the cluster is now, whatever driver published the
//! devices: every scheduled pod with GPU–NIC pairs from its ResourceClaims
//! ([`explain_pod`] for each), its pairs by class, whether NCCL uses GPUDirect RDMA on
//! every GPU, the better free choice on its node now if any, and one summary.
//!
//! [`alignment_of_claims`] is the same count from the allocated claims alone (their
//! `status.reservedFor` pods), for a process that watches claims and slices but not
//! pods (the extender's gauges).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde::Serialize;
use topoalign_topology::{PcieClass, Topology};

use crate::alloc::AllocatedDevice;
use crate::explain::pod::{NodePairs, Pairs, PodInput, explain_pod, pod_key};

/// What the cluster holds.
#[derive(Debug, Clone, Copy)]
pub struct ClusterInput<'a> {
    /// Every pod.
    pub pods: &'a [Pod],
    /// Every ResourceClaim.
    pub claims: &'a [ResourceClaim],
    /// Every ResourceSlice.
    pub slices: &'a [ResourceSlice],
    /// Every DeviceClass.
    pub classes: &'a [DeviceClass],
    /// A machine's topology, used on nodes that have all its GPUs and NICs' addresses.
    pub topology: Option<&'a Topology>,
}

/// One pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAlignment {
    /// `namespace/name`.
    pub pod: String,
    /// Its node.
    pub node: String,
    /// Its GPU–NIC pairs.
    pub pairs: Pairs,
    /// Pairs by class (`?` where unknown).
    pub by_class: BTreeMap<String, usize>,
    /// GPUDirect RDMA on every GPU with the NIC NCCL picks for it (`None`: unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gdr: Option<bool>,
    /// The better free choice on its node now, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub better: Option<Pairs>,
    /// What could not be known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The counts over every pod with pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlignmentSummary {
    /// Pods with GPU–NIC pairs.
    pub pods: usize,
    /// … with GPUDirect RDMA on every GPU.
    pub gdr_every_gpu: usize,
    /// … with some GPU without it.
    pub gdr_not_every_gpu: usize,
    /// … where it is unknown.
    pub gdr_unknown: usize,
    /// Pairs by class (`?` where unknown).
    pub pairs_by_class: BTreeMap<String, usize>,
    /// Pods whose node has a better free choice now.
    pub better_free_choice: usize,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAlignment {
    /// Pods with pairs, by name.
    pub pods: Vec<PodAlignment>,
    /// Scheduled pods with claims that could not be explained, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unexplained: Vec<(String, String)>,
    /// The counts.
    pub summary: AlignmentSummary,
}

/// Per GPU: GDR when some of the pod's NICs give it (NCCL picks the best NIC per GPU);
/// `None` when a GPU's paths are all unknown and none is known to give it.
fn gdr_per_gpu(pairs: &Pairs) -> Option<bool> {
    let mut per_gpu: BTreeMap<_, Option<bool>> = BTreeMap::new();
    for p in &pairs.pairs {
        let e = per_gpu.entry(p.gpu).or_insert(Some(false));
        *e = match (*e, p.gdr) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        };
    }
    let all: Vec<Option<bool>> = per_gpu.into_values().collect();
    if all.contains(&Some(false)) {
        Some(false)
    } else if all.iter().all(|g| *g == Some(true)) {
        Some(true)
    } else {
        None
    }
}

fn by_class(pairs: &Pairs) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in &pairs.pairs {
        *out.entry(p.class.map_or_else(|| "?".to_string(), |c| c.to_string()))
            .or_default() += 1;
    }
    out
}

impl AlignmentSummary {
    fn add(&mut self, gdr: Option<bool>, by_class: &BTreeMap<String, usize>, better: bool) {
        self.pods += 1;
        match gdr {
            Some(true) => self.gdr_every_gpu += 1,
            Some(false) => self.gdr_not_every_gpu += 1,
            None => self.gdr_unknown += 1,
        }
        for (c, n) in by_class {
            *self.pairs_by_class.entry(c.clone()).or_default() += n;
        }
        self.better_free_choice += usize::from(better);
    }

    /// One line: pods, GDR, pairs by class (best first), better choices.
    pub fn text(&self) -> String {
        let order = |c: &str| PcieClass::ALL.iter().position(|x| x.as_str() == c);
        let mut classes: Vec<(&String, &usize)> = self.pairs_by_class.iter().collect();
        classes.sort_by_key(|(c, _)| order(c).unwrap_or(usize::MAX));
        let classes: Vec<String> = classes.iter().map(|(c, n)| format!("{c}×{n}")).collect();
        format!(
            "{} pods with GPU–NIC pairs: {} with GPUDirect RDMA on every GPU, {} without, {} unknown; pairs {}; {} with a better free choice now",
            self.pods,
            self.gdr_every_gpu,
            self.gdr_not_every_gpu,
            self.gdr_unknown,
            if classes.is_empty() {
                "-".to_string()
            } else {
                classes.join(" ")
            },
            self.better_free_choice
        )
    }
}

/// Whether a pod is placed and not finished.
fn scheduled(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
    node.is_some_and(|n| !n.is_empty()) && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Explains every scheduled pod with claims (see the module documentation).
pub fn explain_all(input: &ClusterInput<'_>) -> ClusterAlignment {
    let mut by_node: BTreeMap<&str, Vec<ResourceSlice>> = BTreeMap::new();
    for s in input.slices {
        if let Some(n) = s.spec.node_name.as_deref() {
            by_node.entry(n).or_default().push(s.clone());
        }
    }
    let mut pods = Vec::new();
    let mut unexplained = Vec::new();
    let mut summary = AlignmentSummary::default();
    for p in input.pods.iter().filter(|p| scheduled(p)) {
        if !has_claims(p) {
            continue;
        }
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let slices = by_node.get(node.as_str()).map_or(&[][..], |v| &v[..]);
        let e = match explain_pod(&PodInput {
            pod: p,
            claims: input.claims,
            slices,
            others: input.claims,
            classes: input.classes,
            node_facts: &[],
            topology: input.topology,
        }) {
            Ok(e) => e,
            Err(err) => {
                unexplained.push((pod_key(p), err.to_string()));
                continue;
            }
        };
        if e.pairs.pairs.is_empty() {
            continue;
        }
        let gdr = gdr_per_gpu(&e.pairs);
        let classes = by_class(&e.pairs);
        let better = (!e.as_good).then(|| e.best.clone()).flatten();
        summary.add(gdr, &classes, better.is_some());
        pods.push(PodAlignment {
            pod: e.pod,
            node: e.node,
            pairs: e.pairs,
            by_class: classes,
            gdr,
            better,
            notes: e.notes,
        });
    }
    pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    ClusterAlignment {
        pods,
        unexplained,
        summary,
    }
}

fn has_claims(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// The pods the allocated claims are reserved for, each with its claims (by uid, in
/// name order).
fn consumers(claims: &[ResourceClaim]) -> BTreeMap<String, Vec<&ResourceClaim>> {
    let mut out: BTreeMap<String, Vec<&ResourceClaim>> = BTreeMap::new();
    for c in claims {
        let Some(status) = &c.status else { continue };
        if status.allocation.is_none() {
            continue;
        }
        let pods = status.reserved_for.iter().flatten();
        let pods = pods
            .filter(|r| r.resource == "pods" && r.api_group.as_deref().unwrap_or("").is_empty());
        for r in pods {
            out.entry(r.uid.clone()).or_default().push(c);
        }
    }
    out
}

/// [`explain_all`]'s summary from the allocated claims alone: each pod a claim is
/// reserved for (`status.reservedFor`), on the node of its devices' pools (`slices` of
/// that node, read once per node). No better free choice is looked for (it needs the
/// pods and a planner run per pod).
pub fn alignment_of_claims(claims: &[ResourceClaim], slices: &[ResourceSlice]) -> AlignmentSummary {
    let pool_node: BTreeMap<(&str, &str), &str> = slices
        .iter()
        .filter_map(|s| {
            let node = s.spec.node_name.as_deref()?;
            Some(((s.spec.driver.as_str(), s.spec.pool.name.as_str()), node))
        })
        .collect();
    // Per node, its pods' allocations.
    let mut by_node: BTreeMap<&str, Vec<Vec<Vec<AllocatedDevice>>>> = BTreeMap::new();
    for mine in consumers(claims).into_values() {
        let allocs: Vec<Vec<AllocatedDevice>> = mine
            .iter()
            .filter_map(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref())
            .map(|d| {
                d.results
                    .iter()
                    .flatten()
                    .map(AllocatedDevice::from)
                    .collect()
            })
            .collect();
        let node = (allocs.iter().flatten()).find_map(|r| {
            pool_node
                .get(&(r.driver.as_str(), r.pool.as_str()))
                .copied()
        });
        if let Some(node) = node {
            by_node.entry(node).or_default().push(allocs);
        }
    }
    let mut summary = AlignmentSummary::default();
    for (node, pods) in by_node {
        let node_slices: Vec<ResourceSlice> = (slices.iter())
            .filter(|s| s.spec.node_name.as_deref() == Some(node))
            .cloned()
            .collect();
        let view = NodePairs::new(&node_slices, node, None);
        for allocs in pods {
            let pairs = view.pairs(allocs.iter().map(Vec::as_slice));
            if !pairs.pairs.is_empty() {
                summary.add(gdr_per_gpu(&pairs), &by_class(&pairs), false);
            }
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::foreign::parse_slice_file;

    const H100: &str = include_str!("../../tests/fixtures/vendor/nvidia-v05-dranet-h100.yaml");

    fn pod(name: &str, node: Option<&str>, phase: &str, claim: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": [],
                     "resourceClaims": [{"name": "pairs", "resourceClaimName": claim}]},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn claim(name: &str, pod: &str, devices: &[(&str, &str, &str)]) -> ResourceClaim {
        let results: Vec<Value> = devices
            .iter()
            .map(|(req, driver, dev)| json!({"request": req, "driver": driver, "pool": "h100-a", "device": dev}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [
                {"name": "gpu-0", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                {"name": "nic-0", "exactly": {"deviceClassName": "dranet.net"}}]}},
            "status": {"allocation": {"devices": {"results": results}},
                       "reservedFor": [{"resource": "pods", "name": pod, "uid": format!("uid-{pod}")}]},
        }))
        .unwrap()
    }

    #[test]
    fn every_scheduled_pod_with_pairs_and_the_summary() {
        let file = parse_slice_file(H100, "h100.yaml").unwrap();
        let claims = [
            claim(
                "a",
                "a",
                &[
                    ("gpu-0/root", "gpu.nvidia.com", "gpu-1"),
                    ("nic-0/root", "dra.net", "pci-0000-2d-00-0"),
                ],
            ),
            claim(
                "b",
                "b",
                &[
                    ("gpu-0/any", "gpu.nvidia.com", "gpu-0"),
                    ("nic-0/any", "dra.net", "pci-0000-ae-00-0"),
                ],
            ),
            claim("c", "c", &[]),
        ];
        let pods = [
            pod("a", Some("h100-a"), "Running", "a"),
            pod("b", Some("h100-a"), "Pending", "b"),
            pod("c", None, "Pending", "c"),
            pod("d", Some("h100-a"), "Succeeded", "a"),
        ];
        let out = explain_all(&ClusterInput {
            pods: &pods,
            claims: &claims,
            slices: &file.slices,
            classes: &file.classes,
            topology: None,
        });
        let names: Vec<&str> = out.pods.iter().map(|p| p.pod.as_str()).collect();
        assert_eq!(names, ["ml/a", "ml/b"]);
        assert_eq!(
            out.pods[0].by_class,
            BTreeMap::from([("PHB".to_string(), 1)])
        );
        assert_eq!(
            out.pods[0].gdr,
            Some(false),
            "PHB: no GPUDirect RDMA by default"
        );
        assert!(out.pods[0].better.is_none());
        let b = &out.pods[1];
        assert_eq!(b.by_class, BTreeMap::from([("SYS".to_string(), 1)]));
        let better = b.better.as_ref().unwrap();
        assert_eq!(better.worst, Some(PcieClass::Phb), "{better:?}");
        let s = &out.summary;
        assert_eq!(
            (s.pods, s.gdr_not_every_gpu, s.better_free_choice),
            (2, 2, 1)
        );
        assert_eq!(
            s.text(),
            "2 pods with GPU–NIC pairs: 0 with GPUDirect RDMA on every GPU, 2 without, 0 unknown; pairs PHB×1 SYS×1; 1 with a better free choice now"
        );
        // From the claims alone: the same pods and pairs.
        let c = alignment_of_claims(&claims, &file.slices);
        assert_eq!((c.pods, c.gdr_not_every_gpu), (2, 2));
        assert_eq!(c.pairs_by_class, s.pairs_by_class);
    }

    #[test]
    fn gdr_needs_every_gpu() {
        let pair = |gpu: &str, gdr: Option<bool>| crate::explain::pod::PairReport {
            gpu: gpu.parse().unwrap(),
            nic: "0000:02:00.0".parse().unwrap(),
            nic_name: "mlx5_0".into(),
            class: None,
            gdr,
        };
        let pairs = |v: Vec<crate::explain::pod::PairReport>| Pairs {
            pairs: v,
            worst: None,
            rank_sum: 0,
        };
        // A GPU with two NICs: one with GDR is enough (NCCL picks it).
        let p = pairs(vec![
            pair("0000:01:00.0", Some(false)),
            pair("0000:01:00.0", Some(true)),
        ]);
        assert_eq!(gdr_per_gpu(&p), Some(true));
        let p = pairs(vec![
            pair("0000:01:00.0", Some(true)),
            pair("0000:03:00.0", Some(false)),
        ]);
        assert_eq!(gdr_per_gpu(&p), Some(false));
        let p = pairs(vec![
            pair("0000:01:00.0", Some(true)),
            pair("0000:03:00.0", None),
        ]);
        assert_eq!(gdr_per_gpu(&p), None);
    }
}
