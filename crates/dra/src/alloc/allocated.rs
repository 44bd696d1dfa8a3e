//! What an allocation hands out: one entry of a claim's `status.allocation.devices.results`,
//! the allocator model's answer and the kubelet plugin's input at prepare.

use k8s_openapi::api::resource::v1::DeviceRequestAllocationResult;
use serde::{Deserialize, Serialize};

/// One entry of `status.allocation.devices.results`, reduced to what prepare needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDevice {
    /// The request (or `request/subrequest`) it satisfies.
    pub request: String,
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device name.
    pub device: String,
}

impl From<&DeviceRequestAllocationResult> for AllocatedDevice {
    fn from(r: &DeviceRequestAllocationResult) -> Self {
        AllocatedDevice {
            request: r.request.clone(),
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
        }
    }
}
