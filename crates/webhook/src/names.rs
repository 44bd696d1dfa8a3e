//! Which device-plugin resource names the webhook rewrites, and into which of
//! topoalign's extended resources: the built-in table (the plugins' default names, read
//! from their sources: `topoalign_kube_types::device_plugins`), replaced per kind by flags
//! or a file.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use topoalign_kube_types::device_plugins as dp;
use topoalign_kube_types::extended;

use crate::error::NamesError;
use crate::resource_name::check_resource_name;

/// topoalign's extended resources a rewritten pod asks for: the names the chart's
/// DeviceClasses carry in `spec.extendedResourceName`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Targets {
    /// A GPU with its own NIC (class `gpu-nic-pair.topoalign.dev`).
    pub pair: String,
    /// A GPU alone (class `gpu.topoalign.dev`).
    pub gpu: String,
    /// A NIC alone (class `nic.topoalign.dev`).
    pub nic: String,
    /// A MIG instance: this prefix and the device plugin's profile suffix
    /// (`topoalign.dev/mig-` + `1g.10gb`, `1g.10gb.me`: both spell `+` as `.`).
    pub mig_prefix: String,
}

impl Default for Targets {
    /// The names the driver's DeviceClasses back (`topoalign_kube_types::extended`).
    fn default() -> Self {
        Targets {
            pair: extended::PAIR.into(),
            gpu: extended::GPU.into(),
            nic: extended::NIC.into(),
            mig_prefix: extended::MIG_PREFIX.into(),
        }
    }
}

/// The resource names the webhook reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Names {
    /// Whole GPUs (`nvidia.com/gpu`, `amd.com/gpu`).
    pub gpus: Vec<String>,
    /// NIC functions a pod holds alone: SR-IOV VFs, host devices.
    pub nics: Vec<String>,
    /// Pools of the RDMA shared device plugin: any count gives the pod the pool's HCAs,
    /// shared; rewritten as one NIC per GPU of the container (one NIC without GPUs).
    pub shared_rdma: Vec<String>,
    /// MIG instances: a prefix followed by the profile (`nvidia.com/mig-`).
    pub mig_prefixes: Vec<String>,
    /// What they become.
    pub targets: Targets,
    /// Multus networks (`[namespace/]name`) whose NetworkAttachmentDefinition is fed a
    /// device by one of the `nics` (SR-IOV CNI): removed from a rewritten pod's
    /// `k8s.v1.cni.cncf.io/networks`, since their CNI would find no device.
    pub sriov_networks: Vec<String>,
}

impl Default for Names {
    /// The device plugins' default names (`topoalign_kube_types::device_plugins`) into
    /// topoalign's `topoalign.dev/gpu-nic-pair`, `gpu`, `nic` and `mig-<profile>`; no
    /// SR-IOV networks.
    fn default() -> Self {
        let v = |names: &[&str]| names.iter().map(|s| (*s).to_string()).collect();
        Names {
            gpus: v(&[dp::NVIDIA_GPU, dp::AMD_GPU]),
            nics: v(&[
                dp::NVIDIA_SRIOV_RDMA_VF,
                dp::NVIDIA_HOSTDEV,
                dp::NVIDIA_SRIOV_LEGACY,
                dp::NVIDIA_MLNXNICS,
                dp::SRIOV_DP_MLNX_RDMA,
            ]),
            shared_rdma: v(&[dp::RDMA_SHARED_DEVICE_A, dp::RDMA_HCA_SHARED_DEVICES_A]),
            mig_prefixes: v(&[dp::NVIDIA_MIG_PREFIX]),
            targets: Targets::default(),
            sriov_networks: Vec::new(),
        }
    }
}

/// What a device-plugin resource name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Whole GPUs.
    Gpu,
    /// NIC functions held alone.
    Nic,
    /// A shared RDMA pool.
    SharedRdma,
    /// MIG instances of a profile; `suffix` is the name after the prefix (`1g.10gb`).
    Mig {
        /// The profile part of the name.
        suffix: String,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Gpu => f.write_str("GPUs"),
            Source::Nic => f.write_str("NICs"),
            Source::SharedRdma => f.write_str("shared RDMA"),
            Source::Mig { suffix } => write!(f, "MIG {suffix}"),
        }
    }
}

/// How the webhook reads one resource name of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Class {
    /// A device-plugin name it rewrites.
    Known(Source),
    /// Under a device-plugin domain the table names (`nvidia.com/…`), but not in the
    /// table: the webhook cannot tell what it is.
    Unknown,
    /// Anything else (cpu, memory, other vendors' resources, topoalign's own).
    Other,
}

impl Names {
    /// Checks every name (an extended resource name: `domain/name`), that no name is in
    /// two lists, that no source is a target, and the networks' form.
    pub fn validate(&self) -> Result<(), NamesError> {
        let mut seen = BTreeSet::new();
        let lists: [(&str, &Vec<String>); 3] = [
            ("gpus", &self.gpus),
            ("nics", &self.nics),
            ("sharedRdma", &self.shared_rdma),
        ];
        for (field, names) in lists {
            for n in names {
                check_resource_name(n).map_err(|why| NamesError::bad(field, n, why))?;
                if !seen.insert(n.as_str()) {
                    return Err(NamesError::bad(field, n, "named twice".into()));
                }
            }
        }
        for p in &self.mig_prefixes {
            check_prefix(p).map_err(|why| NamesError::bad("migPrefixes", p, why))?;
        }
        let t = &self.targets;
        for (field, n) in [
            ("targets.pair", &t.pair),
            ("targets.gpu", &t.gpu),
            ("targets.nic", &t.nic),
        ] {
            check_resource_name(n).map_err(|why| NamesError::bad(field, n, why))?;
            if self.classify(n) != Class::Other {
                return Err(NamesError::bad(
                    field,
                    n,
                    "is also a device-plugin name the webhook rewrites".into(),
                ));
            }
        }
        check_prefix(&t.mig_prefix)
            .map_err(|why| NamesError::bad("targets.migPrefix", &t.mig_prefix, why))?;
        if t.pair == t.gpu || t.pair == t.nic || t.gpu == t.nic {
            return Err(NamesError::bad(
                "targets",
                &t.pair,
                "pair, gpu and nic must be three different names".into(),
            ));
        }
        for n in &self.sriov_networks {
            crate::networks::check_network_ref(n)
                .map_err(|why| NamesError::bad("sriovNetworks", n, why))?;
        }
        Ok(())
    }

    /// How a resource name is read.
    pub(crate) fn classify(&self, name: &str) -> Class {
        let has = |list: &[String]| list.iter().any(|n| n == name);
        if has(&self.gpus) {
            return Class::Known(Source::Gpu);
        }
        if has(&self.nics) {
            return Class::Known(Source::Nic);
        }
        if has(&self.shared_rdma) {
            return Class::Known(Source::SharedRdma);
        }
        for p in &self.mig_prefixes {
            if let Some(suffix) = name.strip_prefix(p.as_str()).filter(|s| !s.is_empty()) {
                return Class::Known(Source::Mig {
                    suffix: suffix.to_string(),
                });
            }
        }
        let t = &self.targets;
        if name == t.pair || name == t.gpu || name == t.nic || name.starts_with(&t.mig_prefix) {
            return Class::Other;
        }
        match name.split_once('/') {
            Some((domain, _)) if self.domains().any(|d| d == domain) => Class::Unknown,
            _ => Class::Other,
        }
    }

    /// The domains of the names the webhook rewrites (`nvidia.com`, `amd.com`, …).
    fn domains(&self) -> impl Iterator<Item = &str> {
        self.gpus
            .iter()
            .chain(&self.nics)
            .chain(&self.shared_rdma)
            .chain(&self.mig_prefixes)
            .filter_map(|n| n.split_once('/').map(|(d, _)| d))
    }

    /// The target of a MIG suffix.
    pub(crate) fn mig_target(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.targets.mig_prefix)
    }
}

/// A MIG prefix: `domain/` and the start of a name (`nvidia.com/mig-`).
fn check_prefix(p: &str) -> Result<(), String> {
    // A prefix followed by a profile is a resource name: check it with one.
    check_resource_name(&format!("{p}1g.10gb"))
        .map_err(|why| format!("followed by a profile it is not a resource name: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_classify_as_documented() {
        let n = Names::default();
        n.validate().unwrap();
        assert_eq!(n.classify("amd.com/gpu"), Class::Known(Source::Gpu));
        assert_eq!(
            n.classify("nvidia.com/sriov-rdma-vf"),
            Class::Known(Source::Nic)
        );
        assert_eq!(
            n.classify("rdma/rdma_shared_device_a"),
            Class::Known(Source::SharedRdma)
        );
        assert_eq!(
            n.classify("nvidia.com/mig-1g.10gb"),
            Class::Known(Source::Mig {
                suffix: "1g.10gb".into()
            })
        );
        // The bare prefix is no MIG name; a name of a watched domain is unknown.
        assert_eq!(n.classify("nvidia.com/mig-"), Class::Unknown);
        assert_eq!(n.classify("nvidia.com/gpu.shared"), Class::Unknown);
        assert_eq!(n.classify("intel.com/qat"), Class::Unknown);
        assert_eq!(n.classify("example.com/foo"), Class::Other);
        assert_eq!(n.classify("cpu"), Class::Other);
        assert_eq!(n.classify("topoalign.dev/gpu-nic-pair"), Class::Other);
        assert_eq!(n.classify("topoalign.dev/mig-1g.10gb"), Class::Other);
    }

    #[test]
    fn bad_tables_are_refused_with_the_field_and_name() {
        let mut n = Names::default();
        n.nics.push("amd.com/gpu".into());
        let e = n.validate().unwrap_err().to_string();
        assert!(e.contains("nics") && e.contains("amd.com/gpu"), "{e}");
        let n = Names {
            gpus: vec!["gpu".into()],
            ..Names::default()
        };
        let e = n.validate().unwrap_err().to_string();
        assert!(e.starts_with("gpus: `gpu`"), "{e}");
        let mut n = Names::default();
        n.targets.nic = "nvidia.com/gpu".into();
        assert!(n.validate().is_err());
        let mut n = Names::default();
        n.targets.gpu = n.targets.pair.clone();
        assert!(n.validate().is_err());
        let n = Names {
            mig_prefixes: vec!["nvidia.com/Mig space-".into()],
            ..Names::default()
        };
        assert!(n.validate().is_err());
        let n = Names {
            sriov_networks: vec!["a/b/c".into()],
            ..Names::default()
        };
        assert!(n.validate().is_err());
    }
}
