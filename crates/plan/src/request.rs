//! What a pod asks for ([`Request`]) and what the node has already handed out ([`Usage`]).

use serde::{Deserialize, Serialize};
use topoalign_topology::{LinkLayer, Nic, PcieClass};

/// How many NICs the pod wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NicCount {
    /// Exactly this many NICs in total, spread over the GPUs as evenly as possible
    /// (each GPU gets ⌊M/N⌋ or ⌈M/N⌉; with M < N some GPUs get none).
    Total(usize),
    /// Exactly this many NICs for every GPU.
    PerGpu(usize),
}

impl NicCount {
    /// The total number of NICs for `gpus` GPUs.
    pub fn total(self, gpus: usize) -> usize {
        match self {
            NicCount::Total(m) => m,
            NicCount::PerGpu(k) => k.saturating_mul(gpus),
        }
    }
}

/// The bound on the GPU↔GPU interconnect of the chosen GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GpuLinkBound {
    /// Any GPUs will do.
    #[default]
    Any,
    /// Every pair of chosen GPUs must be joined by NVLink or xGMI.
    Nvlink,
}

/// Which SR-IOV functions may be chosen as NICs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NicRole {
    /// Physical functions, virtual functions and plain NICs alike.
    #[default]
    Any,
    /// Only functions that are not SR-IOV virtual functions.
    Pf,
    /// Only SR-IOV virtual functions.
    Vf,
}

/// A pod's request for one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Number of GPUs (at least 1).
    pub gpus: usize,
    /// Number of NICs, in total or per GPU.
    pub nics: NicCount,
    /// Exclusive CPUs (0 = none).
    pub cpus: usize,
    /// Memory in bytes, taken from the NUMA nodes of the plan (`None` = not asked).
    pub memory: Option<u64>,
    /// Every GPU↔NIC pair must be at most this class.
    pub max_pair: Option<PcieClass>,
    /// Bound on the links between the chosen GPUs.
    pub gpu_link: GpuLinkBound,
    /// Only GPUs whose vendor name (`nvidia`, `amd`, …) contains this, ignoring case.
    pub gpu_vendor: Option<String>,
    /// Only GPUs whose model contains this, ignoring case.
    pub gpu_model: Option<String>,
    /// Only NICs whose first RDMA port has this link layer.
    pub nic_link_layer: Option<LinkLayer>,
    /// Which SR-IOV functions are acceptable.
    pub nic_role: NicRole,
    /// Only RDMA NICs ([`Nic::is_rdma`]: a named RDMA device, or one a topology file
    /// knows by PCI identity only).
    pub require_rdma: bool,
}

impl Request {
    /// `gpus` GPUs and `nics` NICs, every other field at its default (no CPUs, no
    /// memory, no bounds, no filters).
    pub fn new(gpus: usize, nics: NicCount) -> Self {
        Request {
            gpus,
            nics,
            cpus: 0,
            memory: None,
            max_pair: None,
            gpu_link: GpuLinkBound::Any,
            gpu_vendor: None,
            gpu_model: None,
            nic_link_layer: None,
            nic_role: NicRole::Any,
            require_rdma: false,
        }
    }

    /// The total number of NICs asked for.
    pub fn total_nics(&self) -> usize {
        self.nics.total(self.gpus)
    }

    /// Whether a NIC passes the request's NIC filters (link layer, role, RDMA).
    pub fn nic_passes(&self, nic: &Nic) -> bool {
        if self.require_rdma && !nic.is_rdma() {
            return false;
        }
        if let Some(layer) = self.nic_link_layer
            && nic.link_layer() != Some(layer)
        {
            return false;
        }
        match self.nic_role {
            NicRole::Any => true,
            NicRole::Pf => !nic.is_vf(),
            NicRole::Vf => nic.is_vf(),
        }
    }

    /// Whether a GPU with this vendor name and model passes the GPU filters.
    pub fn gpu_passes(&self, vendor: &str, model: Option<&str>) -> bool {
        // ASCII case folded, without allocating (judging a node asks this per GPU).
        let contains = |hay: &str, needle: &str| {
            let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
            needle.is_empty()
                || hay
                    .windows(needle.len())
                    .any(|w| w.eq_ignore_ascii_case(needle))
        };
        if let Some(v) = &self.gpu_vendor
            && !contains(vendor, v)
        {
            return false;
        }
        if let Some(m) = &self.gpu_model
            && !model.is_some_and(|model| contains(model, m))
        {
            return false;
        }
        true
    }
}

/// What is already taken on the node (the shared model type).
pub use topoalign_topology::NodeUsage as Usage;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_filters_match_parts_of_vendor_and_model_ignoring_ascii_case() {
        let mut req = Request::new(1, NicCount::Total(0));
        assert!(req.gpu_passes("AMD", None), "no filter");
        req.gpu_vendor = Some("amd".to_string());
        assert!(req.gpu_passes("AMD", None));
        assert!(req.gpu_passes("Advanced Micro Devices [AMD]", None));
        assert!(!req.gpu_passes("nvidia", None));
        assert!(!req.gpu_passes("am", None), "shorter than the filter");
        req.gpu_model = Some("Mi300".to_string());
        assert!(req.gpu_passes("amd", Some("Instinct MI300X")));
        assert!(!req.gpu_passes("amd", Some("Instinct MI250X")));
        assert!(!req.gpu_passes("amd", None), "a model filter needs a model");
        req.gpu_model = Some(String::new());
        assert!(
            req.gpu_passes("amd", Some("x")),
            "an empty filter passes all"
        );
    }
}
