//! The extended resource names topoalign's DeviceClasses back (KEP-5004,
//! `DRAExtendedResource`: beta and on in 1.36, GA in 1.37): a pod asking
//! `limits: {topoalign.dev/gpu-nic-pair: 4}` gets four pair devices without writing a
//! claim; the scheduler makes the claim (one request `container-<c>-request-<r>` per
//! container and resource, the class named, `count` the quantity) and the kubelet has
//! the driver prepare it. One place, since the driver's classes, the webhook that
//! rewrites device-plugin requests, the lint and the extender all speak these names.

/// GPU+NIC pairs (class `gpu-nic-pair.topoalign.dev`).
pub const PAIR: &str = "topoalign.dev/gpu-nic-pair";
/// Plain GPUs (class `gpu.topoalign.dev`).
pub const GPU: &str = "topoalign.dev/gpu";
/// Plain NICs, one function each (class `nic.topoalign.dev`).
pub const NIC: &str = "topoalign.dev/nic";
/// The prefix of a MIG profile's resource: `topoalign.dev/mig-1g.10gb`, as the NVIDIA
/// device plugin's `nvidia.com/mig-1g.10gb`.
pub const MIG_PREFIX: &str = "topoalign.dev/mig-";
/// Every DeviceClass also backs its implicit name, this prefix plus the class name
/// (`deviceclass.resource.kubernetes.io/gpu-nic-pair.topoalign.dev`).
pub const IMPLICIT_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// A MIG profile as a resource name's last part: a name cannot hold `+`, so the media
/// variant `1g.10gb+me` is `1g.10gb.me`, as the NVIDIA device plugin spells it.
pub fn mig_resource_part(profile: &str) -> String {
    profile.replace('+', ".")
}

/// The extended resource of a MIG profile (`topoalign.dev/mig-1g.10gb.me`).
pub fn mig_resource(profile: &str) -> String {
    format!("{MIG_PREFIX}{}", mig_resource_part(profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_names_follow_the_device_plugin_spelling() {
        assert_eq!(mig_resource("1g.10gb"), "topoalign.dev/mig-1g.10gb");
        assert_eq!(mig_resource("1g.10gb+me"), "topoalign.dev/mig-1g.10gb.me");
    }
}
