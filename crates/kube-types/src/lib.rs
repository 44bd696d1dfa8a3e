//! Kubernetes vocabulary shared by the topoalign crates: API value types and the names
//! and settings that pass between processes (the cross-process contract).
//!
//! - `quantity` mirrors `k8s.io/apimachinery/pkg/api/resource` (`ParseQuantity`,
//!   `Value`, `MilliValue`): an exact [`Quantity`] held in nano-units.
//! - `qos` mirrors `pkg/apis/core/v1/helper/qos` (`GetPodQOS`): the [`QosClass`] of a pod
//!   from its containers' requests and limits, with the [`NotGuaranteed`] reason when it
//!   is not Guaranteed.
//! - [`labels`]: the node labels and annotations the agent writes and the extender reads.
//! - [`nrt`]: the NodeResourceTopology API's names (and, with the `kube` feature, its
//!   kube-rs `ApiResource`).
//! - `dra_attr`: the standard DRA device attribute names (`resource.kubernetes.io/…`).
//! - [`kueue`]: Kueue's API names and the `controllerName` of topoalign's gang admission
//!   check (and, with the `kube` feature, the kube-rs `ApiResource`s).
//! - [`kubelet_settings`]: the KubeletConfiguration's topology settings, decoded as the
//!   kubelet decodes them.
//! - `admission`: the kubelet's admission verdict on a pod.
//! - `documents`: the JSON/YAML document reader.
//! - [`extended`]: the extended resource names topoalign's DeviceClasses back
//!   (`topoalign.dev/gpu-nic-pair`, ...).
//! - `version`: a Kubernetes release ([`KubeVersion`]) and the defaults of its API server
//!   that manifests lean on (`distinctAttribute` from 1.36).
//! - [`webhook`]: the admission webhook's namespace label and pod annotation, and the
//!   Multus names it reads.
//! - [`device_plugins`]: the resource names device plugins register by default.

mod admission;
/// Public as a namespace: the default resource names of the NVIDIA and AMD GPU, SR-IOV
/// network and RDMA shared device plugins (callers write `device_plugins::AMD_GPU`).
pub mod device_plugins;
mod documents;
mod dra_attr;
/// Public as a namespace: the extended resource names topoalign's DeviceClasses back
/// (`extended::PAIR`, `extended::mig_resource`), named as a group by the driver, the
/// webhook, the lint and the extender.
pub mod extended;
/// Public as a namespace: the kubelet's topology settings (`Policy`, `Scope`, `Settings`,
/// ...) and their KubeletConfiguration keys (`kubelet_settings::keys`), named as a group
/// by every crate that reads or writes kubelet settings.
pub mod kubelet_settings;
/// Public as a namespace: Kueue's API names and topoalign's admission check controller
/// name (`kueue::GANG_ADMISSION_CONTROLLER`), named as a group.
pub mod kueue;
/// Public as a namespace: the node label and annotation keys topoalign writes, a
/// namespace of constants (callers write `labels::FABRIC_LABEL`).
pub mod labels;
/// Public as a namespace: the NodeResourceTopology API's names and object fields (the
/// agent writes them, the extender reads them), named as a group (`nrt::...`).
pub mod nrt;
mod qos;
mod quantity;
mod version;
/// Public as a namespace: the admission webhook's namespace label, its pod annotation and
/// the Multus names it reads (callers write `webhook::NAMESPACE_LABEL`).
pub mod webhook;

pub use admission::{Admission, MergedHint, TOPOLOGY_AFFINITY_ERROR, UNEXPECTED_ADMISSION_ERROR};
pub use documents::{DocumentError, read_document, yaml_error};
pub use dra_attr::{NUMA_NODE_COMPAT, NUMA_NODE_STD, PCI_BUS_ID, PCIE_ROOT};
pub use qos::{
    CPU, MEMORY, NotGuaranteed, PodQos, QosClass, ResourceList, container_guaranteed, pod_qos,
};
pub use quantity::{Quantity, QuantityError};
pub use version::{
    DISTINCT_ATTRIBUTE_ON, EXTENDED_RESOURCE_ON, KubeVersion, OLDEST_SUPPORTED, VersionError,
};
