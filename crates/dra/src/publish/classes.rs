//! The DeviceClasses the driver ships: one per kind of device it publishes, and one per
//! MIG profile. Each backs an extended resource (`topoalign.dev/gpu-nic-pair`, ...; the
//! names live in `topoalign_kube_types::extended`) from the release whose scheduler
//! serves them by default ([`topoalign_kube_types::EXTENDED_RESOURCE_ON`], 1.36): a pod
//! then asks `limits: {topoalign.dev/gpu-nic-pair: 4}` and gets four pairs without a
//! claim of its own.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use topoalign_kube_types::{KubeVersion, extended};

use crate::publish::inventory::DeviceKind;
use crate::publish::slices::MANAGED_BY_LABEL;
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

/// The extended resource a kind's class backs: pairs, GPUs and NICs; MIG devices are
/// asked per profile ([`mig_profile_class`]), MIG×NIC pairs only through claims.
fn extended_name(kind: DeviceKind) -> Option<&'static str> {
    match kind {
        DeviceKind::Gpu => Some(extended::GPU),
        DeviceKind::Nic => Some(extended::NIC),
        DeviceKind::Pair => Some(extended::PAIR),
        DeviceKind::Mig | DeviceKind::MigPair => None,
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

/// Which extended resources the classes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendedResources {
    /// Every class backs its name (1.36 and newer).
    Named,
    /// No class names one: the cluster's release drops the field.
    Left,
}

impl ExtendedResources {
    /// What `version` serves with its default feature gates.
    pub fn for_version(version: KubeVersion) -> ExtendedResources {
        match version.backs_extended_resources() {
            true => ExtendedResources::Named,
            false => ExtendedResources::Left,
        }
    }
}

/// The three DeviceClasses (gpu, nic, gpu-nic-pair), ready to apply, each backing its
/// extended resource.
pub fn device_classes() -> Vec<DeviceClass> {
    device_classes_with(ExtendedResources::Named)
}

/// [`device_classes`], backing extended resources or not.
pub fn device_classes_with(ext: ExtendedResources) -> Vec<DeviceClass> {
    [DeviceKind::Gpu, DeviceKind::Nic, DeviceKind::Pair]
        .into_iter()
        .map(|k| device_class(k, ext))
        .collect()
}

/// The two DeviceClasses of MIG devices (mig, mig-nic-pair), for clusters with
/// MIG-enabled GPUs, then one class per MIG profile of every known GPU model
/// ([`mig_profile_class`]).
pub fn mig_device_classes() -> Vec<DeviceClass> {
    mig_device_classes_with(ExtendedResources::Named)
}

/// [`mig_device_classes`], backing extended resources or not (the per-profile classes
/// are left out when not: they exist for the extended resources).
pub fn mig_device_classes_with(ext: ExtendedResources) -> Vec<DeviceClass> {
    let kinds = [DeviceKind::Mig, DeviceKind::MigPair].map(|k| device_class(k, ext));
    let profiles: BTreeSet<&str> = (topoalign_mig::MODELS.iter())
        .flat_map(|m| m.profile_names())
        .collect();
    let per_profile = match ext {
        ExtendedResources::Named => profiles.into_iter().map(mig_profile_class).collect(),
        ExtendedResources::Left => Vec::new(),
    };
    kinds.into_iter().chain(per_profile).collect()
}

/// The name of a MIG profile's class: `mig-1g.10gb.topoalign.dev` (`+` written `.`).
pub fn mig_profile_class_name(profile: &str) -> String {
    format!("mig-{}.{DRIVER_NAME}", extended::mig_resource_part(profile))
}

/// The class of one MIG profile's instances, backing `topoalign.dev/mig-<profile>`.
pub fn mig_profile_class(profile: &str) -> DeviceClass {
    let selector = format!(
        "{} && {} == \"{profile}\"",
        class_selector(DeviceKind::Mig),
        attr::cel(attr::PROFILE)
    );
    class_object(
        mig_profile_class_name(profile),
        selector,
        Some(extended::mig_resource(profile)),
    )
}

/// The DeviceClass of one kind of device.
pub(crate) fn device_class(kind: DeviceKind, ext: ExtendedResources) -> DeviceClass {
    let name = match ext {
        ExtendedResources::Named => extended_name(kind).map(str::to_string),
        ExtendedResources::Left => None,
    };
    class_object(class_name(kind).to_string(), class_selector(kind), name)
}

fn class_object(name: String, selector: String, extended: Option<String>) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.0.to_string(),
                MANAGED_BY_LABEL.1.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: selector,
                }),
            }]),
            extended_resource_name: extended,
            ..Default::default()
        }),
    }
}

/// The class among `classes` that backs the extended resource `resource`: the one
/// naming it in `extendedResourceName`, or the class the implicit
/// `deviceclass.resource.kubernetes.io/<class>` names (whether or not it is among
/// `classes`). `None` for a resource no class backs (a device plugin's).
pub fn class_for_resource(resource: &str, classes: &[DeviceClass]) -> Option<String> {
    if let Some(class) = resource.strip_prefix(extended::IMPLICIT_PREFIX) {
        return (!class.is_empty()).then(|| class.to_string());
    }
    classes
        .iter()
        .find(|c| {
            c.spec
                .as_ref()
                .and_then(|s| s.extended_resource_name.as_deref())
                == Some(resource)
        })
        .and_then(|c| c.metadata.name.clone())
}

/// A DeviceClass named `name` that selects every device of `driver`.
pub(crate) fn driver_class(name: &str, driver: &str) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: format!("device.driver == \"{driver}\""),
                }),
            }]),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_back_their_resources_from_1_36_only() {
        let named = device_classes();
        let pair = named
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(CLASS_PAIR));
        assert_eq!(
            pair.and_then(|c| c.spec.as_ref()?.extended_resource_name.as_deref()),
            Some("topoalign.dev/gpu-nic-pair")
        );
        assert_eq!(
            class_for_resource("topoalign.dev/nic", &named).as_deref(),
            Some(CLASS_NIC)
        );
        assert_eq!(
            class_for_resource("deviceclass.resource.kubernetes.io/x.example.com", &[]).as_deref(),
            Some("x.example.com")
        );
        assert_eq!(class_for_resource("nvidia.com/gpu", &named), None);
        let old = ExtendedResources::for_version("1.35".parse().unwrap());
        assert_eq!(old, ExtendedResources::Left);
        assert!(
            device_classes_with(old)
                .iter()
                .all(|c| { c.spec.as_ref().unwrap().extended_resource_name.is_none() })
        );
        assert_eq!(mig_device_classes_with(old).len(), 2);
        assert_eq!(
            ExtendedResources::for_version("1.36".parse().unwrap()),
            ExtendedResources::Named
        );
    }

    #[test]
    fn one_class_per_mig_profile_with_the_device_plugin_spelling() {
        let classes = mig_device_classes();
        let media = classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some("mig-1g.10gb.me.topoalign.dev"))
            .unwrap();
        let spec = media.spec.as_ref().unwrap();
        assert_eq!(
            spec.extended_resource_name.as_deref(),
            Some("topoalign.dev/mig-1g.10gb.me")
        );
        let expr = &spec.selectors.as_ref().unwrap()[0]
            .cel
            .as_ref()
            .unwrap()
            .expression;
        assert!(expr.ends_with(r#"["profile"] == "1g.10gb+me""#), "{expr}");
        // Every class name is a DNS subdomain and every resource name unique.
        let mut seen = BTreeSet::new();
        for c in &classes {
            let name = c.metadata.name.as_deref().unwrap();
            assert_eq!(
                crate::publish::names::dns_subdomain_problem(name),
                None,
                "{name}"
            );
            if let Some(r) = c.spec.as_ref().unwrap().extended_resource_name.as_deref() {
                assert!(seen.insert(r.to_string()), "{r} twice");
            }
        }
        assert!(classes.len() > 10, "{}", classes.len());
    }
}
