//! MIG instances laid over a topology ([`MigOverlay`]) and the views of them the
//! commands print: the summary's instance table, the instance rows of the pair matrix,
//! and the structured rows of `discover`/`matrix` JSON and YAML.
//!
//! A MIG instance has no PCI function of its own: its PCIe path (switch, host bridge,
//! NUMA node) and so its pair classes to every NIC and GPU are its parent's (REFERENCE
//! §11). Every view here therefore takes the parent GPU's facts from the topology.

use serde::Serialize;
use topoalign_topology::{PairClass, PairMatrix, Topology};

use crate::scene::best_nics;
use crate::table::Table;
use crate::text::nic_name;

/// The MIG instances of a node, by parent GPU (topology GPU index).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigOverlay {
    /// The GPUs that hold instances, in topology order.
    pub gpus: Vec<MigGpuView>,
}

/// One MIG-enabled GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigGpuView {
    /// Index into the topology's `gpus`.
    pub gpu: usize,
    /// The model's name in the MIG profile table (`a100-40gb`).
    pub model: String,
    /// Its GPU instances, by start.
    pub instances: Vec<MigInstanceView>,
}

/// One GPU instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigInstanceView {
    /// Profile name (`3g.20gb`).
    pub profile: String,
    /// First memory slice.
    pub start: u8,
    /// Memory slices taken.
    pub size: u8,
    /// GPU-instance ID, when known.
    pub gi: Option<u32>,
    /// Compute-instance ID, when the instance has exactly one.
    pub ci: Option<u32>,
    /// `MIG-…`, when known.
    pub uuid: Option<String>,
}

/// One instance with its parent's facts: an entry of the `mig` list of `discover` and
/// `matrix` JSON/YAML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigRow {
    /// `MIG0`, `MIG1`, … in parent then start order (the matrix's row label).
    pub label: String,
    /// Parent GPU index in the topology.
    pub parent: usize,
    /// Parent GPU PCI address.
    pub parent_bus_id: String,
    /// Parent GPU UUID, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_uuid: Option<String>,
    /// The MIG table's model name.
    pub model: String,
    /// Profile name.
    pub profile: String,
    /// First memory slice.
    pub start: u8,
    /// Memory slices taken.
    pub size: u8,
    /// GPU-instance ID.
    pub gi: Option<u32>,
    /// Compute-instance ID.
    pub ci: Option<u32>,
    /// MIG UUID.
    pub uuid: Option<String>,
    /// The parent's host bridge (`pci0000:0c`).
    pub pcie_root: Option<String>,
    /// The parent's NUMA node.
    pub numa_node: Option<u32>,
    /// The parent's closest NIC and its class, shared by every instance of the GPU.
    pub closest_nic: Option<ClosestNic>,
    /// With the matrix: the parent's row, parallel to the matrix's `devices`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cells: Option<Vec<PairClass>>,
}

/// A NIC and the parent GPU's class to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClosestNic {
    /// RDMA device, netdev, or address.
    pub nic: String,
    /// `PIX`, `PXB`, …
    pub class: String,
}

impl MigGpuView {
    /// The instances by start (then GI).
    pub fn by_start(&self) -> Vec<&MigInstanceView> {
        let mut v: Vec<&MigInstanceView> = self.instances.iter().collect();
        v.sort_by_key(|i| (i.start, i.gi));
        v
    }
}

impl MigOverlay {
    /// True when no GPU holds an instance.
    pub fn is_empty(&self) -> bool {
        self.gpus.iter().all(|g| g.instances.is_empty())
    }

    /// The instances of topology GPU `gpu`, if it holds any.
    pub fn of_gpu(&self, gpu: usize) -> Option<&MigGpuView> {
        self.gpus
            .iter()
            .find(|g| g.gpu == gpu && !g.instances.is_empty())
    }

    /// Every instance with its parent's facts, labelled `MIG0…` in parent then start
    /// order. GPUs the topology lacks are skipped.
    pub fn rows(&self, topo: &Topology) -> Vec<MigRow> {
        let c = topo.classifier();
        let best = best_nics(topo, &c);
        let mut gpus: Vec<&MigGpuView> = self.gpus.iter().collect();
        gpus.sort_by_key(|g| g.gpu);
        let mut out = Vec::new();
        for g in gpus {
            let Some(parent) = topo.gpus.get(g.gpu) else {
                continue;
            };
            let closest = best.get(g.gpu).copied().flatten().map(|b| ClosestNic {
                nic: nic_name(topo, b.nic),
                class: b.path.class.to_string(),
            });
            for i in g.by_start() {
                out.push(MigRow {
                    label: format!("MIG{}", out.len()),
                    parent: g.gpu,
                    parent_bus_id: topo.gpu_bdf(g.gpu).to_string(),
                    parent_uuid: parent.uuid.clone(),
                    model: g.model.clone(),
                    profile: i.profile.clone(),
                    start: i.start,
                    size: i.size,
                    gi: i.gi,
                    ci: i.ci,
                    uuid: i.uuid.clone(),
                    pcie_root: topo.pcie_root(parent.pci),
                    numa_node: c.numa_of(parent.pci),
                    closest_nic: closest.clone(),
                    cells: None,
                });
            }
        }
        out
    }

    /// [`MigOverlay::rows`] with each row's `cells`: its parent's row of `m`.
    pub fn matrix_rows(&self, topo: &Topology, m: &PairMatrix) -> Vec<MigRow> {
        let mut rows = self.rows(topo);
        for r in &mut rows {
            r.cells = parent_row(m, r.parent).map(<[PairClass]>::to_vec);
        }
        rows
    }
}

/// The matrix row of topology GPU `gpu`.
pub(crate) fn parent_row(m: &PairMatrix, gpu: usize) -> Option<&[PairClass]> {
    let n = m.devices.len();
    let r = m
        .devices
        .iter()
        .position(|d| d.device == topoalign_topology::MatrixDeviceKind::Gpu(gpu))?;
    m.cells.get(r * n..(r + 1) * n)
}

/// `-` for an unknown value.
fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// The summary's `MIG instances` table: one row per instance with its parent GPU and the
/// parent's closest NIC (the GPU table above gives the parent's address, NUMA node and
/// PCIe root). Fits 100 columns with a full MIG UUID.
pub(crate) fn instance_table(topo: &Topology, mig: &MigOverlay) -> Table {
    let mut t = Table::new(&[
        "MIG",
        "GPU",
        "PROFILE",
        "SLICES",
        "GI",
        "CI",
        "CLOSEST NIC",
        "UUID",
    ]);
    for r in mig.rows(topo) {
        let slices = match r.size {
            0 | 1 => r.start.to_string(),
            n => format!("{}-{}", r.start, r.start.saturating_add(n - 1)),
        };
        t.row(vec![
            r.label,
            format!("GPU{}", r.parent),
            r.profile,
            slices,
            or_dash(r.gi),
            or_dash(r.ci),
            r.closest_nic
                .map_or_else(|| "none".to_string(), |c| format!("{} {}", c.nic, c.class)),
            or_dash(r.uuid),
        ]);
    }
    t
}

/// The short text of an instance inside a drawing: `3g.20gb @4`.
pub(crate) fn short_label(i: &MigInstanceView) -> String {
    format!("{} @{}", i.profile, i.start)
}

/// The tooltip of an instance: profile, placement, IDs, UUID.
pub(crate) fn tooltip(gpu: usize, i: &MigInstanceView) -> String {
    let mut s = format!(
        "GPU{gpu} MIG {} at memory slice {} (size {})",
        i.profile, i.start, i.size
    );
    if let Some(gi) = i.gi {
        s.push_str(&format!(", GI {gi}"));
    }
    if let Some(ci) = i.ci {
        s.push_str(&format!(", CI {ci}"));
    }
    if let Some(u) = &i.uuid {
        s.push_str(&format!("\n{u}"));
    }
    s.push_str("\nPCIe path and NIC classes: the parent GPU's");
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use topoalign_topology::MatrixOptions;

    /// GPU 1 of dgx-a100-mig as `4g.20gb@0` + `3g.20gb@4`, GPU 0 as two `1g.5gb`.
    pub(crate) fn a100_overlay() -> MigOverlay {
        let i = |profile: &str, start, size, gi| MigInstanceView {
            profile: profile.into(),
            start,
            size,
            gi: Some(gi),
            ci: Some(0),
            uuid: None,
        };
        MigOverlay {
            gpus: vec![
                MigGpuView {
                    gpu: 1,
                    model: "a100-40gb".into(),
                    instances: vec![i("3g.20gb", 4, 4, 2), i("4g.20gb", 0, 4, 1)],
                },
                MigGpuView {
                    gpu: 0,
                    model: "a100-40gb".into(),
                    instances: vec![i("1g.5gb", 0, 1, 1), i("1g.5gb", 1, 1, 2)],
                },
            ],
        }
    }

    #[test]
    fn rows_carry_the_parents_path_and_closest_nic_in_parent_then_start_order() {
        let topo = topoalign_profiles::get("dgx-a100-mig").unwrap();
        let rows = a100_overlay().rows(&topo);
        let got: Vec<(String, usize, &str, u8)> = rows
            .iter()
            .map(|r| (r.label.clone(), r.parent, r.profile.as_str(), r.start))
            .collect();
        assert_eq!(
            got,
            vec![
                ("MIG0".into(), 0, "1g.5gb", 0),
                ("MIG1".into(), 0, "1g.5gb", 1),
                ("MIG2".into(), 1, "4g.20gb", 0),
                ("MIG3".into(), 1, "3g.20gb", 4),
            ]
        );
        let c = topo.classifier();
        for r in &rows {
            let parent = &topo.gpus[r.parent];
            assert_eq!(r.parent_bus_id, topo.gpu_bdf(r.parent).to_string());
            assert_eq!(r.pcie_root, topo.pcie_root(parent.pci));
            assert_eq!(r.numa_node, Some(3));
            assert_eq!(r.closest_nic.as_ref().unwrap().class, "PIX");
            assert_eq!(c.numa_of(parent.pci), r.numa_node);
        }
        assert_ne!(
            rows[0].closest_nic, rows[2].closest_nic,
            "two GPUs of a switch draw different NICs"
        );
    }

    #[test]
    fn matrix_rows_copy_the_parents_row() {
        let topo = topoalign_profiles::get("dgx-a100-mig").unwrap();
        let m = PairMatrix::build(&topo, MatrixOptions::default());
        let rows = a100_overlay().matrix_rows(&topo, &m);
        let n = m.devices.len();
        assert_eq!(rows[2].cells.as_deref(), Some(&m.cells[n..2 * n]));
        assert!(a100_overlay().of_gpu(1).is_some());
        assert!(a100_overlay().of_gpu(2).is_none());
        assert!(MigOverlay::default().is_empty());
    }

    #[test]
    fn the_instance_table_names_slices_ids_and_the_parents_nic() {
        let topo = topoalign_profiles::get("dgx-a100-mig").unwrap();
        let text = instance_table(&topo, &a100_overlay()).render_within(0, None);
        let line = text.lines().find(|l| l.starts_with("MIG3")).unwrap();
        assert!(line.starts_with("MIG3  GPU1"), "{line}");
        assert!(line.contains("3g.20gb") && line.contains("4-7"), "{line}");
        assert!(line.contains("mlx5_1 PIX"), "{line}");
    }
}
