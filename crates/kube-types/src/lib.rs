//! Kubernetes vocabulary shared by the topoalign crates: API value types and the names
//! and settings that pass between processes (the cross-process contract).
//!
//! - [`quantity`] mirrors `k8s.io/apimachinery/pkg/api/resource` (`ParseQuantity`,
//!   `Value`, `MilliValue`): an exact [`Quantity`] held in nano-units.
//! - [`qos`] mirrors `pkg/apis/core/v1/helper/qos` (`GetPodQOS`): the [`QosClass`] of a pod
//!   from its containers' requests and limits, with the [`NotGuaranteed`] reason when it
//!   is not Guaranteed.
//! - [`labels`]: the node labels and annotations the agent writes and the extender reads.
//! - [`nrt`]: the NodeResourceTopology API's names (and, with the `kube` feature, its
//!   kube-rs `ApiResource`).
//! - [`dra_attr`]: the standard DRA device attribute names (`resource.kubernetes.io/…`).
//! - [`kubelet_settings`]: the KubeletConfiguration's topology settings, decoded as the
//!   kubelet decodes them.
//! - [`admission`]: the kubelet's admission verdict on a pod.
//! - [`documents`]: the JSON/YAML document reader.

pub mod admission;
pub mod documents;
pub mod dra_attr;
pub mod kubelet_settings;
pub mod labels;
pub mod nrt;
pub mod qos;
pub mod quantity;

pub use qos::{
    CPU, MEMORY, NotGuaranteed, PodQos, QosClass, ResourceList, container_guaranteed, pod_qos,
};
pub use quantity::{Quantity, QuantityError};
