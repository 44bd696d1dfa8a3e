//! The DeviceClasses the driver ships: one per kind of device it publishes.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::inventory::DeviceKind;
use crate::slices::MANAGED_BY_LABEL;
use crate::{DRIVER_NAME, attr};

/// DeviceClass of plain GPUs.
pub const CLASS_GPU: &str = "gpu.topoalign.dev";
/// DeviceClass of plain NICs (one function of a physical NIC).
pub const CLASS_NIC: &str = "nic.topoalign.dev";
/// DeviceClass of GPU+NIC pairs.
pub const CLASS_PAIR: &str = "gpu-nic-pair.topoalign.dev";

/// DeviceClass of MIG instances.
pub const CLASS_MIG: &str = "mig.topoalign.dev";
/// DeviceClass of MIG instances with a NIC.
pub const CLASS_MIG_PAIR: &str = "mig-nic-pair.topoalign.dev";

/// The class name for a kind of device.
pub(crate) fn class_name(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Gpu => CLASS_GPU,
        DeviceKind::Nic => CLASS_NIC,
        DeviceKind::Pair => CLASS_PAIR,
        DeviceKind::Mig => CLASS_MIG,
        DeviceKind::MigPair => CLASS_MIG_PAIR,
    }
}

/// The CEL selector of a class: the driver and the device's `type` attribute.
pub(crate) fn class_selector(kind: DeviceKind) -> String {
    format!(
        "device.driver == \"{DRIVER_NAME}\" && {} == \"{}\"",
        attr::cel(attr::TYPE),
        kind.as_str()
    )
}

/// The three DeviceClasses (gpu, nic, gpu-nic-pair), ready to apply.
pub fn device_classes() -> Vec<DeviceClass> {
    [DeviceKind::Gpu, DeviceKind::Nic, DeviceKind::Pair]
        .into_iter()
        .map(device_class)
        .collect()
}

/// The two DeviceClasses of MIG devices (mig, mig-nic-pair), for clusters with
/// MIG-enabled GPUs.
pub fn mig_device_classes() -> Vec<DeviceClass> {
    [DeviceKind::Mig, DeviceKind::MigPair]
        .into_iter()
        .map(device_class)
        .collect()
}

/// The DeviceClass of one kind of device.
pub(crate) fn device_class(kind: DeviceKind) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(class_name(kind).to_string()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.0.to_string(),
                MANAGED_BY_LABEL.1.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: class_selector(kind),
                }),
            }]),
            ..Default::default()
        }),
    }
}
