//! Which topology devices an extended resource name stands for, and how each device
//! plugin answers `GetPreferredAllocation`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use topoalign_topology::GpuVendor;

use crate::error::InputError;

/// The devices behind a resource name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeviceKind {
    /// GPUs, optionally of one vendor only.
    Gpus(Option<GpuVendor>),
    /// SR-IOV virtual functions; `per_pf` keeps the VFs with index below N on each PF (a
    /// device-plugin selector such as `rdma0#0-0` for N = 1).
    Vfs {
        /// At most this many VFs per PF (lowest indexes), all when `None`.
        per_pf: Option<u32>,
    },
    /// RDMA-capable physical functions (non-VF NICs with an RDMA device).
    Pfs,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceKind::Gpus(None) => f.write_str("gpus"),
            DeviceKind::Gpus(Some(v)) => write!(f, "gpus:{v}"),
            DeviceKind::Vfs { per_pf: None } => f.write_str("vfs"),
            DeviceKind::Vfs { per_pf: Some(n) } => write!(f, "vfs:{n}"),
            DeviceKind::Pfs => f.write_str("pfs"),
        }
    }
}

impl FromStr for DeviceKind {
    type Err = String;
    /// `gpus`, `gpus:<nvidia|amd|intel|other>`, `vfs`, `vfs:<N>`, `pfs`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected = "expected gpus, gpus:<vendor>, vfs, vfs:<N> or pfs";
        match s.split_once(':') {
            None => match s {
                "gpus" => Ok(DeviceKind::Gpus(None)),
                "vfs" => Ok(DeviceKind::Vfs { per_pf: None }),
                "pfs" => Ok(DeviceKind::Pfs),
                _ => Err(format!("`{s}`: {expected}")),
            },
            Some(("gpus", v)) => match v {
                "nvidia" => Ok(DeviceKind::Gpus(Some(GpuVendor::Nvidia))),
                "amd" => Ok(DeviceKind::Gpus(Some(GpuVendor::Amd))),
                "intel" => Ok(DeviceKind::Gpus(Some(GpuVendor::Intel))),
                "other" => Ok(DeviceKind::Gpus(Some(GpuVendor::Other))),
                _ => Err(format!(
                    "`{s}`: unknown vendor `{v}` (nvidia, amd, intel, other)"
                )),
            },
            Some(("vfs", n)) => n
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .map(|n| DeviceKind::Vfs { per_pf: Some(n) })
                .ok_or_else(|| format!("`{s}`: VFs per PF must be a positive integer")),
            _ => Err(format!("`{s}`: {expected}")),
        }
    }
}

/// How a device plugin answers `GetPreferredAllocation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PluginAllocator {
    /// No preferred allocation: the kubelet takes devices in Go set iteration order, which
    /// is random; simulated by a shuffle seeded with this value. The default for GPU
    /// resources, so that the simulation claims nothing a given plugin version may not do.
    Unsorted(u64),
    /// The lowest PCI addresses first: the SR-IOV network device plugin's packed
    /// allocator. The default for VF and PF resources.
    LowestAddress,
}

impl FromStr for PluginAllocator {
    type Err = String;
    /// `unsorted`, `unsorted:<seed>`, `lowest-address`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            None if s == "unsorted" => Ok(PluginAllocator::Unsorted(0)),
            None if s == "lowest-address" => Ok(PluginAllocator::LowestAddress),
            Some(("unsorted", seed)) => seed
                .parse()
                .map(PluginAllocator::Unsorted)
                .map_err(|_| format!("`{s}`: the seed must be an unsigned integer")),
            _ => Err(format!(
                "`{s}`: expected unsorted, unsorted:<seed> or lowest-address"
            )),
        }
    }
}

/// One mapping rule: an exact name, or a prefix when the pattern ends in `*`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceRule {
    /// `nvidia.com/gpu` or `openshift.io/*`.
    pub pattern: String,
    /// The devices.
    pub kind: DeviceKind,
}

impl ResourceRule {
    fn matches(&self, name: &str) -> bool {
        match self.pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => self.pattern == name,
        }
    }
}

/// Resource name → devices, user rules first, then the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceMap {
    /// Rules, tried in order.
    pub rules: Vec<ResourceRule>,
    /// Per-resource allocator overrides.
    pub allocators: BTreeMap<String, PluginAllocator>,
}

impl Default for ResourceMap {
    /// `nvidia.com/gpu` → NVIDIA GPUs, `amd.com/gpu` → AMD GPUs, `nvidia.com/sriov*`,
    /// `openshift.io/*`, `intel.com/*` → VFs, `rdma/*` → RDMA PFs.
    fn default() -> Self {
        let rule = |p: &str, k: DeviceKind| ResourceRule {
            pattern: p.to_string(),
            kind: k,
        };
        ResourceMap {
            rules: vec![
                rule("nvidia.com/gpu", DeviceKind::Gpus(Some(GpuVendor::Nvidia))),
                rule("amd.com/gpu", DeviceKind::Gpus(Some(GpuVendor::Amd))),
                rule("nvidia.com/sriov*", DeviceKind::Vfs { per_pf: None }),
                rule("openshift.io/*", DeviceKind::Vfs { per_pf: None }),
                rule("intel.com/*", DeviceKind::Vfs { per_pf: None }),
                rule("rdma/*", DeviceKind::Pfs),
            ],
            allocators: BTreeMap::new(),
        }
    }
}

impl ResourceMap {
    /// Adds a rule ahead of the others (`--resource NAME=KIND`).
    pub fn add(&mut self, pattern: &str, kind: DeviceKind) {
        self.rules.insert(
            0,
            ResourceRule {
                pattern: pattern.to_string(),
                kind,
            },
        );
    }

    /// Parses and adds `NAME=KIND`.
    pub fn add_spec(&mut self, spec: &str, field: &str) -> Result<(), InputError> {
        let (name, kind) = spec
            .split_once('=')
            .ok_or_else(|| InputError::field(field, format!("`{spec}`: expected NAME=KIND")))?;
        let kind: DeviceKind = kind
            .parse()
            .map_err(|e: String| InputError::field(field, e))?;
        self.add(name.trim(), kind);
        Ok(())
    }

    /// Parses and sets `NAME=ALLOCATOR`.
    pub fn set_allocator_spec(&mut self, spec: &str, field: &str) -> Result<(), InputError> {
        let (name, a) = spec.split_once('=').ok_or_else(|| {
            InputError::field(field, format!("`{spec}`: expected NAME=ALLOCATOR"))
        })?;
        let a: PluginAllocator = a.parse().map_err(|e: String| InputError::field(field, e))?;
        self.allocators.insert(name.trim().to_string(), a);
        Ok(())
    }

    /// The devices a resource name stands for.
    pub fn resolve(&self, name: &str) -> Option<DeviceKind> {
        self.rules.iter().find(|r| r.matches(name)).map(|r| r.kind)
    }

    /// The allocator of a resource: the override, else unsorted (seeded with `seed`) for
    /// GPUs and lowest-address for NICs.
    pub fn allocator(&self, name: &str, kind: DeviceKind, seed: u64) -> PluginAllocator {
        if let Some(a) = self.allocators.get(name) {
            return *a;
        }
        match kind {
            DeviceKind::Gpus(_) => PluginAllocator::Unsorted(seed),
            DeviceKind::Vfs { .. } | DeviceKind::Pfs => PluginAllocator::LowestAddress,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut m = ResourceMap::default();
        assert_eq!(
            m.resolve("amd.com/gpu"),
            Some(DeviceKind::Gpus(Some(GpuVendor::Amd)))
        );
        assert_eq!(
            m.resolve("nvidia.com/sriov-rdma-vf"),
            Some(DeviceKind::Vfs { per_pf: None })
        );
        assert_eq!(
            m.resolve("openshift.io/mlxnics"),
            Some(DeviceKind::Vfs { per_pf: None })
        );
        assert_eq!(m.resolve("rdma/hca_shared"), Some(DeviceKind::Pfs));
        assert_eq!(m.resolve("example.com/foo"), None);
        m.add_spec("example.com/foo=vfs:1", "--resource").unwrap();
        assert_eq!(
            m.resolve("example.com/foo"),
            Some(DeviceKind::Vfs { per_pf: Some(1) })
        );
        assert!(m.add_spec("x=disks", "--resource").is_err());
        assert!(m.add_spec("x", "--resource").is_err());
        assert!("vfs:0".parse::<DeviceKind>().is_err());
    }

    #[test]
    fn allocator_specs() {
        assert_eq!("unsorted:7".parse(), Ok(PluginAllocator::Unsorted(7)));
        assert_eq!("lowest-address".parse(), Ok(PluginAllocator::LowestAddress));
        assert!("best".parse::<PluginAllocator>().is_err());
    }
}
