//! Kubernetes API value types shared by the topoalign crates.
//!
//! - [`quantity`] mirrors `k8s.io/apimachinery/pkg/api/resource` (`ParseQuantity`,
//!   `Value`, `MilliValue`): an exact [`Quantity`] held in nano-units.
//! - [`qos`] mirrors `pkg/apis/core/v1/helper/qos` (`GetPodQOS`): the [`QosClass`] of a pod
//!   from its containers' requests and limits, with the [`NotGuaranteed`] reason when it
//!   is not Guaranteed.

pub mod qos;
pub mod quantity;

pub use qos::{
    CPU, MEMORY, NotGuaranteed, PodQos, QosClass, ResourceList, container_guaranteed, pod_qos,
};
pub use quantity::{Quantity, QuantityError};
