//! The pair matrix behind `nvidia-smi topo -m`: GPUs then NICs, every cell classified,
//! plus the per-GPU CPU affinity, NUMA affinity and GPU NUMA ID columns.

use serde::{Deserialize, Serialize};

use crate::Topology;
use crate::class::PairClass;
use crate::numa::CpuSet;

/// Which NICs appear as columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatrixOptions {
    /// Also list SR-IOV virtual functions (nvidia-smi lists every RDMA device the host
    /// sees; with dozens of VFs that drowns the table, so they are opt-in).
    pub include_vfs: bool,
    /// Also list NICs without an RDMA device (plain Ethernet), which nvidia-smi omits.
    pub include_non_rdma: bool,
}

/// Whether a matrix row is a GPU or a NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "index")]
pub enum MatrixDeviceKind {
    /// Index into `Topology::gpus`.
    Gpu(usize),
    /// Index into `Topology::nics`.
    Nic(usize),
}

/// One row/column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatrixDevice {
    /// `GPU0`, `NIC3`, ...
    pub label: String,
    /// What it is.
    pub device: MatrixDeviceKind,
    /// PCI address.
    pub bdf: String,
    /// For NICs, the name in the NIC legend (`mlx5_0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For GPUs, the CPUs local to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_affinity: Option<CpuSet>,
    /// For GPUs, its NUMA node; `null` when unknown (nvidia-smi prints `N/A`), never a
    /// guessed 0.
    #[serde(default)]
    pub numa_affinity: Option<u32>,
    /// For GPUs, the NUMA node of its own memory (Grace systems), `N/A` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_numa_id: Option<u32>,
}

/// The classified matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairMatrix {
    /// Rows (and columns), GPUs first.
    pub devices: Vec<MatrixDevice>,
    /// Row-major cells, `devices.len()`².
    pub cells: Vec<PairClass>,
    /// Row-major, parallel to `cells`, present only when some cell is uncertain: true where
    /// the cell is `SYS` only because a NUMA node is unknown (it may be `NODE`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numa_unknown: Vec<bool>,
}

impl PairMatrix {
    /// Classifies every pair of GPUs and selected NICs.
    pub fn build(topo: &Topology, opts: MatrixOptions) -> PairMatrix {
        let c = topo.classifier();
        let mut devices = Vec::new();
        for (i, g) in topo.gpus.iter().enumerate() {
            let numa = c.numa_of(g.pci);
            devices.push(MatrixDevice {
                label: format!("GPU{i}"),
                device: MatrixDeviceKind::Gpu(i),
                bdf: topo.pci[g.pci].bdf.to_string(),
                name: None,
                cpu_affinity: numa.and_then(|n| topo.numa_node(n)).map(|n| n.cpus.clone()),
                numa_affinity: numa,
                gpu_numa_id: g.memory_numa_node,
            });
        }
        let mut k = 0;
        for (i, n) in topo.nics.iter().enumerate() {
            if (n.is_vf() && !opts.include_vfs) || (!n.is_rdma() && !opts.include_non_rdma) {
                continue;
            }
            devices.push(MatrixDevice {
                label: format!("NIC{k}"),
                device: MatrixDeviceKind::Nic(i),
                bdf: topo.pci[n.pci].bdf.to_string(),
                name: n.label().map(str::to_string),
                cpu_affinity: None,
                numa_affinity: None,
                gpu_numa_id: None,
            });
            k += 1;
        }
        let d = devices.len();
        let mut cells = Vec::with_capacity(d * d);
        let mut numa_unknown = Vec::with_capacity(d * d);
        let pci_of = |k: MatrixDeviceKind| match k {
            MatrixDeviceKind::Gpu(i) => topo.gpus[i].pci,
            MatrixDeviceKind::Nic(i) => topo.nics[i].pci,
        };
        for r in &devices {
            for col in &devices {
                let cell = match (r.device, col.device) {
                    (MatrixDeviceKind::Gpu(a), MatrixDeviceKind::Gpu(b)) => c.gpu_gpu(a, b),
                    (MatrixDeviceKind::Gpu(a), MatrixDeviceKind::Nic(b))
                    | (MatrixDeviceKind::Nic(b), MatrixDeviceKind::Gpu(a)) => {
                        PairClass::Pcie(c.gpu_nic(a, b).class)
                    }
                    (MatrixDeviceKind::Nic(a), MatrixDeviceKind::Nic(b)) => c.nic_nic(a, b),
                };
                numa_unknown.push(
                    cell.pcie().is_some() && !c.numa_certain(pci_of(r.device), pci_of(col.device)),
                );
                cells.push(cell);
            }
        }
        if !numa_unknown.contains(&true) {
            numa_unknown.clear();
        }
        PairMatrix {
            devices,
            cells,
            numa_unknown,
        }
    }

    /// Whether the cell at (row, column) is `SYS` only because a NUMA node is unknown.
    pub fn cell_numa_unknown(&self, row: usize, col: usize) -> bool {
        self.numa_unknown
            .get(row * self.devices.len() + col)
            .copied()
            .unwrap_or(false)
    }

    /// The cell at (row, column).
    pub fn cell(&self, row: usize, col: usize) -> PairClass {
        self.cells[row * self.devices.len() + col]
    }
}
