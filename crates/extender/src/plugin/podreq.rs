//! What a pod asks of a node, read from the `v1.Pod` the scheduler sends: its devices as
//! the kubelet's device manager sees them (for the Topology Manager simulation) and as the
//! planner's [`Request`] (for the achievable alignment), plus topoalign's annotations.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::Value;
use topoalign_mig::MigRequest;
use topoalign_plan::{GpuLinkBound, NicCount, NicRole, Request};
use topoalign_tm::{DeviceKind, Pod, ResourceMap};
use topoalign_topology::PcieClass;

/// Annotation: every GPU↔NIC pair of the pod must be this class or better
/// (`PIX`, `PXB`, `PHB`, `NODE`, `SYS`).
pub(crate) const MIN_PAIR_CLASS_ANNOTATION: &str = "topoalign.dev/min-pair-class";
/// Annotation: `nvlink` requires every pair of the pod's GPUs to be NVLink/xGMI-linked.
pub(crate) const GPU_LINK_ANNOTATION: &str = "topoalign.dev/gpu-link";

/// Why a pod could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PodError {
    /// The pod's containers or resources are malformed.
    #[error("Pod: {0}")]
    Manifest(String),
    /// An annotation has a value topoalign does not understand.
    #[error("Pod annotation `{name}`: `{value}`: {expected}")]
    Annotation {
        /// The annotation.
        name: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
}

/// A pod, read once per scheduler call.
#[derive(Debug, Clone)]
pub struct PodRequest {
    /// `namespace/name`.
    pub key: String,
    /// `metadata.uid` (may be empty in hand-written requests).
    pub uid: String,
    /// The pod as the kubelet's resource managers see it.
    pub pod: Pod,
    /// GPUs asked (pod level).
    pub gpus: usize,
    /// NIC functions asked (pod level).
    pub nics: usize,
    /// The planner's request; `None` when the pod asks for no GPU (not topoalign's pod).
    pub plan: Option<Request>,
    /// Its MIG set (`nvidia.com/mig-<profile>`, pod level), judged against nodes whose
    /// labels or allocatable resources show MIG devices.
    pub mig: MigRequest,
    /// A hash of everything a node verdict depends on (cache key part).
    pub hash: u64,
}

impl PodRequest {
    /// Whether topoalign has anything to decide for this pod.
    pub fn is_managed(&self) -> bool {
        self.plan.is_some()
    }
}

/// Reads a pod (a decoded `v1.Pod`) with `resources` mapping resource names to devices.
pub fn pod_request(pod: &Value, resources: &ResourceMap) -> Result<PodRequest, PodError> {
    let tm_pod = Pod::from_manifest(pod).map_err(|e| PodError::Manifest(e.to_string()))?;
    let meta = |k: &str| {
        pod.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let key = format!("{}/{}", meta("namespace"), meta("name"));
    let uid = meta("uid");
    let annotation = |name: &str| {
        pod.pointer("/metadata/annotations")
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
    };
    let (mut gpus, mut nics) = (0usize, 0usize);
    let mut vendor = None;
    let (mut vfs, mut pfs) = (false, false);
    let mut mig = Vec::new();
    for name in tm_pod.extended_resources() {
        // Every resource goes to the MIG set, which keeps `nvidia.com/mig-<profile>` and
        // `nvidia.com/gpu` (MIG instances where the device plugin uses the single strategy).
        mig.push((name.clone(), tm_pod.pod_level(|c| c.limit_value(&name))));
        let Some(kind) = resources.resolve(&name) else {
            continue;
        };
        let count = tm_pod.pod_level(|c| c.limit_value(&name));
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        match kind {
            DeviceKind::Gpus(v) => {
                gpus = gpus.saturating_add(count);
                vendor = vendor.or(v);
            }
            DeviceKind::Vfs { .. } => {
                nics = nics.saturating_add(count);
                vfs = true;
            }
            DeviceKind::Pfs => {
                nics = nics.saturating_add(count);
                pfs = true;
            }
        }
    }
    let max_pair = match annotation(MIN_PAIR_CLASS_ANNOTATION) {
        None => None,
        Some(v) => Some(v.parse::<PcieClass>().map_err(|_| PodError::Annotation {
            name: MIN_PAIR_CLASS_ANNOTATION,
            value: v.to_string(),
            expected: "expected one of PIX, PXB, PHB, NODE, SYS",
        })?),
    };
    let gpu_link = match annotation(GPU_LINK_ANNOTATION) {
        None | Some("any") => GpuLinkBound::Any,
        Some("nvlink") => GpuLinkBound::Nvlink,
        Some(v) => {
            return Err(PodError::Annotation {
                name: GPU_LINK_ANNOTATION,
                value: v.to_string(),
                expected: "expected nvlink or any",
            });
        }
    };
    let plan = (gpus > 0).then(|| {
        let mut r = Request::new(gpus, NicCount::Total(nics));
        r.max_pair = max_pair;
        r.gpu_link = gpu_link;
        r.gpu_vendor = vendor.map(|v| v.to_string());
        match (vfs, pfs) {
            (true, false) => r.nic_role = NicRole::Vf,
            (false, true) => {
                r.nic_role = NicRole::Pf;
                r.require_rdma = true;
            }
            _ => {}
        }
        r
    });
    let mut anonymous = tm_pod.clone();
    anonymous.name = String::new();
    let mut h = DefaultHasher::new();
    serde_json::to_string(&anonymous)
        .unwrap_or_default()
        .hash(&mut h);
    if let Some(r) = &plan {
        serde_json::to_string(r).unwrap_or_default().hash(&mut h);
    }
    Ok(PodRequest {
        key,
        uid,
        pod: tm_pod,
        gpus,
        nics,
        plan,
        mig: MigRequest::from_resources(mig.iter().map(|(n, c)| (n.as_str(), *c))),
        hash: h.finish(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(limits: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations},
               "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})
    }

    #[test]
    fn reads_devices_and_annotations() {
        let p = pod(
            json!({"amd.com/gpu": "4", "nvidia.com/sriov-rdma-vf": 4}),
            json!({MIN_PAIR_CLASS_ANNOTATION: "pxb"}),
        );
        let r = pod_request(&p, &ResourceMap::default()).unwrap();
        assert_eq!((r.key.as_str(), r.gpus, r.nics), ("ns/p", 4, 4));
        let plan = r.plan.unwrap();
        assert_eq!(plan.max_pair, Some(PcieClass::Pxb));
        assert_eq!(plan.nic_role, NicRole::Vf);
        assert_eq!(plan.gpu_vendor.as_deref(), Some("amd"));
    }

    #[test]
    fn a_pod_without_gpus_is_not_managed_and_bad_annotations_are_named() {
        let p = pod(json!({"cpu": "1"}), json!({}));
        assert!(
            !pod_request(&p, &ResourceMap::default())
                .unwrap()
                .is_managed()
        );
        let p = pod(
            json!({"nvidia.com/gpu": 1}),
            json!({MIN_PAIR_CLASS_ANNOTATION: "FAST"}),
        );
        let e = pod_request(&p, &ResourceMap::default()).unwrap_err();
        assert!(
            e.to_string().contains("topoalign.dev/min-pair-class"),
            "{e}"
        );
        let e = pod_request(&json!({"metadata": {}}), &ResourceMap::default()).unwrap_err();
        assert!(e.to_string().contains("spec"), "{e}");
    }
}
