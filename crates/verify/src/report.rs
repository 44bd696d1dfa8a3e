//! The verification report: each visible GPU, its NUMA node and its best visible NIC
//! with nvidia-smi's class, NCCL's path type and whether GPUDirect RDMA would be used.

use serde::Serialize;
use topoalign_topology::{GpuVendor, NcclPath, PcieClass, Topology};

use crate::visible::Visible;

/// A visible NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NicEntry {
    /// PCI address.
    pub bdf: String,
    /// RDMA device or netdev name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// NUMA node (inherited through the tree when the device says -1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa: Option<u32>,
    /// True for an SR-IOV virtual function.
    pub vf: bool,
}

/// The best NIC of one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BestNic {
    /// The NIC.
    #[serde(flatten)]
    pub nic: NicEntry,
    /// nvidia-smi's class of the GPU→NIC pair.
    pub class: PcieClass,
    /// NCCL's path type.
    pub nccl: NcclPath,
    /// Whether NCCL uses GPUDirect RDMA on it by default.
    pub gdr: bool,
}

/// One visible GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuEntry {
    /// PCI address.
    pub bdf: String,
    /// Vendor.
    pub vendor: GpuVendor,
    /// Model, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// NUMA node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa: Option<u32>,
    /// Its best visible NIC (`None` when no NIC is visible).
    pub best_nic: Option<BestNic>,
}

/// Everything `topoalign verify` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Host name from sysfs.
    pub host: String,
    /// Visible GPUs.
    pub gpus: Vec<GpuEntry>,
    /// Visible NICs.
    pub nics: Vec<NicEntry>,
    /// What could not be mapped.
    pub warnings: Vec<String>,
}

/// Builds the report for the visible devices.
pub(crate) fn build(topo: &Topology, vis: Visible) -> Report {
    let c = topo.classifier();
    let nic_entry = |n: usize| NicEntry {
        bdf: topo.nic_bdf(n).to_string(),
        name: topo.nics[n].label().map(str::to_string),
        numa: c.numa_of(topo.nics[n].pci),
        vf: topo.nics[n].is_vf(),
    };
    let gpus = vis
        .gpus
        .iter()
        .map(|&g| {
            let best_nic = c
                .best_nic(g, vis.nics.iter().copied())
                .map(|(n, p)| BestNic {
                    nic: nic_entry(n),
                    class: p.class,
                    nccl: p.nccl,
                    gdr: p.gdr,
                });
            GpuEntry {
                bdf: topo.gpu_bdf(g).to_string(),
                vendor: topo.gpus[g].vendor,
                model: topo.gpus[g].model.clone(),
                numa: c.numa_of(topo.gpus[g].pci),
                best_nic,
            }
        })
        .collect();
    Report {
        host: topo.name.clone(),
        gpus,
        nics: vis.nics.iter().map(|&n| nic_entry(n)).collect(),
        warnings: vis.warnings,
    }
}

impl Report {
    /// Why nothing can be verified (no GPU is visible), if so: verify then fails even
    /// without `--require`.
    pub fn unverifiable(&self) -> Option<String> {
        self.gpus.is_empty().then(|| {
            format!(
                "no GPU is visible on {} ({} NIC(s)): no /dev/dri/renderD*, /dev/nvidiaN or NVIDIA_VISIBLE_DEVICES match; run inside a pod that was given GPUs, or point --dev-root at its device nodes",
                self.host,
                self.nics.len()
            )
        })
    }

    /// Checks that every GPU's best NIC is `require` or better. Returns the reasons it
    /// is not (empty = pass); seeing no GPU or no NIC is a failure.
    pub fn failures(&self, require: PcieClass) -> Vec<String> {
        let mut out = Vec::new();
        if self.gpus.is_empty() {
            out.push("no GPU is visible (no /dev/dri/renderD*, /dev/nvidiaN or NVIDIA_VISIBLE_DEVICES match)".to_string());
        }
        if self.nics.is_empty() {
            out.push(
                "no NIC is visible (no PCIDEVICE_* address or /dev/infiniband/uverbs* match)"
                    .to_string(),
            );
        }
        for g in &self.gpus {
            if let Some(b) = &g.best_nic
                && b.class > require
            {
                out.push(format!(
                    "GPU {}: best NIC {} is {} (required {require} or better)",
                    g.bdf, b.nic.bdf, b.class
                ));
            }
        }
        out
    }

    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{} visible GPU(s), {} visible NIC(s) on {}\n",
            self.gpus.len(),
            self.nics.len(),
            self.host
        );
        s.push_str(
            "GPU           VENDOR  NUMA  BEST NIC      NAME         NIC NUMA  CLASS  NCCL  GDR\n",
        );
        let opt = |v: Option<u32>| v.map_or("-".to_string(), |n| n.to_string());
        for g in &self.gpus {
            match &g.best_nic {
                Some(b) => s.push_str(&format!(
                    "{:<12}  {:<6}  {:>4}  {:<12}  {:<11}  {:>8}  {:<5}  {:<4}  {}\n",
                    g.bdf,
                    g.vendor.to_string(),
                    opt(g.numa),
                    b.nic.bdf,
                    b.nic.name.as_deref().unwrap_or("-"),
                    opt(b.nic.numa),
                    b.class.to_string(),
                    b.nccl.to_string(),
                    if b.gdr { "yes" } else { "no" }
                )),
                None => s.push_str(&format!(
                    "{:<12}  {:<6}  {:>4}  (no NIC visible)\n",
                    g.bdf,
                    g.vendor.to_string(),
                    opt(g.numa)
                )),
            }
        }
        s
    }
}
