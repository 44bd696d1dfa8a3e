//! A human-readable summary of a whole topology (for `topoalign discover -o table` and
//! `topoalign profile show`): NUMA nodes, host bridges, GPUs, NICs and the GPU fabric,
//! each as a small table that fits in 100 columns.

use topoalign_topology::pci::vendor;
use topoalign_topology::{
    Classifier, FabricStatus, Gpu, GpuVendor, LinkLayer, Nic, Sriov, Topology,
};

use crate::mig::{MigOverlay, instance_table};
use crate::scene::{best_nics, fabric_groups, host_bridge_numa};
use crate::table::Table;
use crate::text::{kib, mib, nic_name, truncate};

/// Device nodes every GPU of a vendor shares; listed once under the GPU table.
const SHARED_NODES: [&str; 4] = [
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/kfd",
];

/// Renders the summary.
pub fn render(topo: &Topology) -> String {
    render_with_mig(topo, &MigOverlay::default())
}

/// Renders the summary with a `MIG instances` section under the GPUs (none when `mig` is
/// empty: then the text is [`render`]'s).
pub fn render_with_mig(topo: &Topology, mig: &MigOverlay) -> String {
    let c = topo.classifier();
    let mut out = String::new();
    let vfs = topo.nics.iter().filter(|n| n.is_vf()).count();
    out.push_str(&format!(
        "Topology {}: {} NUMA node(s), {} host bridge(s), {} GPU(s), {} NIC function(s) ({} VF)\n",
        topo.name,
        topo.numa.len(),
        topo.host_bridges.len(),
        topo.gpus.len(),
        topo.nics.len(),
        vfs
    ));
    section(&mut out, "NUMA nodes", &numa_table(topo));
    section(&mut out, "Host bridges", &host_bridge_table(topo, &c));
    section(&mut out, "GPUs", &gpu_table(topo, &c));
    let shared = shared_nodes(topo);
    if !shared.is_empty() {
        out.push_str(&format!("  shared by all GPUs: {}\n", shared.join(" ")));
    }
    if !mig.is_empty() {
        section(&mut out, "MIG instances", &instance_table(topo, mig));
        out.push_str("  an instance has its parent GPU's PCIe path, NUMA node and NIC classes (closest NIC: the parent's)\n");
    }
    section(&mut out, "NICs", &nic_table(topo, &c));
    if let Some(help) = unknown_fabric_help(topo) {
        out.push_str(&format!("\nGPU fabric: unknown\n  {help}\n"));
    } else {
        out.push_str("\nGPU fabric\n");
    }
    let groups = fabric_groups(topo);
    if groups.is_empty() && topo.fabric_status() != FabricStatus::Unknown {
        out.push_str("  none (GPUs talk over PCIe)\n");
    }
    for g in groups {
        out.push_str(&format!("  {}: {}\n", g.kind_name(), g.describe()));
    }
    out.push_str("\nClosest NIC per GPU\n");
    out.push_str(&closest_table(topo, &c).render(2));
    out
}

fn section(out: &mut String, title: &str, table: &Table) {
    out.push('\n');
    out.push_str(title);
    out.push('\n');
    if table.is_empty() {
        out.push_str("  none\n");
    } else {
        out.push_str(&table.render(2));
    }
}

fn numa_table(topo: &Topology) -> Table {
    let mut t = Table::new(&["NODE", "SOCKET", "CPUS", "MEMORY", "DISTANCES"]);
    for n in &topo.numa {
        let cpus = if n.cpus.is_empty() {
            "none (memory only)".to_string()
        } else {
            format!("{} ({})", truncate(&n.cpus.to_string(), 40), n.cpus.len())
        };
        t.row(vec![
            n.id.to_string(),
            opt(n.socket),
            cpus,
            n.memory_kib.map_or_else(|| "-".to_string(), kib),
            n.distances
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    t
}

fn host_bridge_table(topo: &Topology, c: &Classifier<'_>) -> Table {
    let numa = host_bridge_numa(topo, c);
    let mut t = Table::new(&["PCIE ROOT", "NUMA", "BRIDGES", "GPUS", "NICS"]);
    for (h, hb) in topo.host_bridges.iter().enumerate() {
        let under = |pci: usize| c.host_of(pci) == h;
        let bridges = topo
            .pci
            .iter()
            .enumerate()
            .filter(|(i, d)| under(*i) && d.kind.is_bridge())
            .count();
        let gpus: Vec<String> = (0..topo.gpus.len())
            .filter(|&g| under(topo.gpus[g].pci))
            .map(|g| format!("GPU{g}"))
            .collect();
        let nics: Vec<String> = (0..topo.nics.len())
            .filter(|&n| under(topo.nics[n].pci) && !topo.nics[n].is_vf())
            .map(|n| nic_name(topo, n))
            .collect();
        t.row(vec![
            hb.name(),
            opt(numa.get(h).copied().flatten()),
            bridges.to_string(),
            list_or_dash(&gpus),
            list_or_dash(&nics),
        ]);
    }
    t
}

fn gpu_table(topo: &Topology, c: &Classifier<'_>) -> Table {
    let mut t = Table::new(&[
        "GPU",
        "BDF",
        "MODEL",
        "MEMORY",
        "NUMA",
        "PCIE ROOT",
        "DEVICES (/dev)",
    ]);
    for (i, g) in topo.gpus.iter().enumerate() {
        let model = g.model.clone().unwrap_or_else(|| g.vendor.to_string());
        t.row(vec![
            i.to_string(),
            topo.gpu_bdf(i).to_string(),
            truncate(&model, 22),
            g.memory_mib.map_or_else(|| "-".to_string(), mib),
            opt(c.numa_of(g.pci)),
            topo.pcie_root(g.pci).unwrap_or_else(|| "-".to_string()),
            own_nodes(g),
        ]);
    }
    t
}

fn own_nodes(g: &Gpu) -> String {
    let nodes: Vec<String> = g
        .device_nodes()
        .into_iter()
        .filter(|n| !SHARED_NODES.contains(&n.as_str()))
        .map(|n| n.strip_prefix("/dev/").unwrap_or(&n).to_string())
        .collect();
    list_or_dash(&nodes)
}

fn shared_nodes(topo: &Topology) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for g in &topo.gpus {
        for n in g.device_nodes() {
            if SHARED_NODES.contains(&n.as_str()) && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

fn nic_table(topo: &Topology, c: &Classifier<'_>) -> Table {
    let mut t = Table::new(&[
        "#",
        "BDF",
        "RDMA",
        "NETDEV",
        "LINK",
        "ROLE",
        "NUMA",
        "PCIE ROOT",
    ]);
    for (i, n) in topo.nics.iter().enumerate() {
        t.row(vec![
            i.to_string(),
            topo.nic_bdf(i).to_string(),
            match (&n.rdma, n.rdma_unnamed) {
                (Some(r), _) => r.clone(),
                (None, true) => "(unnamed)".to_string(),
                (None, false) => "-".to_string(),
            },
            // A NIC known by PCI class only, or a RoCE NIC a file names by RDMA device
            // alone, has no netdev *known*; that is not IB-only.
            match (&n.netdev, n.rdma.is_some()) {
                (Some(s), _) => truncate(s, 16),
                (None, true) if n.link_layer() != Some(LinkLayer::Ethernet) => {
                    "- (IB only)".to_string()
                }
                (None, _) => "-".to_string(),
            },
            link_text(n, topo.pci[n.pci].vendor == vendor::AMAZON),
            role_text(n),
            opt(c.numa_of(n.pci)),
            topo.pcie_root(n.pci).unwrap_or_else(|| "-".to_string()),
        ]);
    }
    t
}

fn closest_table(topo: &Topology, c: &Classifier<'_>) -> Table {
    let mut t = Table::new(&["GPU", "NIC", "CLASS", "NCCL PATH", "GDR"]);
    for (g, best) in best_nics(topo, c).iter().enumerate() {
        match best {
            Some(b) => t.row(vec![
                format!("GPU{g}"),
                nic_name(topo, b.nic),
                b.path.class.to_string(),
                b.path.nccl.to_string(),
                if b.path.gdr { "yes" } else { "no" }.to_string(),
            ]),
            None => t.row(vec![format!("GPU{g}"), "none".to_string()]),
        }
    }
    t
}

/// The NIC's link: IB, RoCE, EFA (an Amazon RDMA NIC: neither), or plain Ethernet.
fn link_text(n: &Nic, amazon: bool) -> String {
    let layer = match n.link_layer() {
        Some(LinkLayer::InfiniBand) => "IB",
        Some(LinkLayer::Ethernet) if n.is_rdma() => "RoCE",
        None if amazon && n.is_rdma() => "EFA",
        Some(LinkLayer::Ethernet) | None => "Ethernet",
    };
    match n.ports.first().and_then(|p| p.rate_gbps) {
        Some(r) => format!("{layer} {r}G"),
        None => layer.to_string(),
    }
}

fn role_text(n: &Nic) -> String {
    match &n.sriov {
        Sriov::None => "PF".to_string(),
        Sriov::Pf { total_vfs, vfs } => format!("PF {}/{} VFs", vfs.len(), total_vfs),
        Sriov::Vf { pf, index } => format!("VF{index} of {pf}"),
    }
}

fn opt(v: Option<u32>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

fn list_or_dash(items: &[String]) -> String {
    if items.is_empty() {
        "-".to_string()
    } else {
        items.join(" ")
    }
}

/// How to supply an unknown GPU fabric, for the topology's vendors; `None` when the
/// fabric is known (links or none).
pub(crate) fn unknown_fabric_help(topo: &Topology) -> Option<String> {
    if topo.fabric_status() != FabricStatus::Unknown {
        return None;
    }
    let mut ways = Vec::new();
    if topo.gpus.iter().any(|g| g.vendor == GpuVendor::Nvidia) {
        ways.push(
            "NVLink is not in sysfs: pass --nvlink-from FILE (saved `nvidia-smi topo -m`), or run on the host where nvidia-smi/NVML answers (--sysfs-root /)",
        );
    }
    if topo.gpus.iter().any(|g| g.vendor == GpuVendor::Amd) {
        ways.push(
            "xGMI links were not in the input: add `rocm-smi --showtopotype` or `amd-smi topology` output, or discover on the host (--sysfs-root /)",
        );
    }
    if ways.is_empty() {
        ways.push("the source does not show GPU-to-GPU links");
    }
    Some(ways.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_profiles as profiles;

    #[test]
    fn every_profile_summary_fits_100_columns_and_names_every_device() {
        for name in profiles::NAMES {
            let t = profiles::get(name).unwrap();
            let text = render(&t);
            for line in text.lines() {
                assert!(line.chars().count() <= 100, "{name}: {line:?} is too wide");
            }
            for i in 0..t.gpus.len() {
                assert!(text.contains(&t.gpu_bdf(i).to_string()), "{name} GPU{i}");
            }
            for i in 0..t.nics.len() {
                assert!(text.contains(&t.nic_bdf(i).to_string()), "{name} NIC{i}");
            }
            for hb in &t.host_bridges {
                assert!(text.contains(&hb.name()));
            }
        }
    }

    #[test]
    fn gb300_summary_reports_fabric_ib_only_nics_and_closest_pairs() {
        let text = render(&profiles::get("gb300-4").unwrap());
        assert!(
            text.contains("NVLink: NV18 all-to-all among GPU0-3"),
            "{text}"
        );
        assert!(text.contains("- (IB only)"));
        let closest = text.split("Closest NIC per GPU").nth(1).unwrap();
        let gpu2 = closest.lines().find(|l| l.contains("GPU2")).unwrap();
        assert!(gpu2.contains("mlx5_2") && gpu2.contains("NODE") && gpu2.contains("P2C"));
        assert!(gpu2.trim_end().ends_with("yes"));
    }

    #[test]
    fn mi300x_summary_lists_vfs_with_their_pf() {
        let text = render(&profiles::get("mi300x-8").unwrap());
        assert!(text.contains("PF 4/16 VFs"));
        assert!(text.contains("VF0 of 0000:0c:00.0") || text.contains("VF1 of 0000:0c:00.0"));
        assert!(text.contains("xGMI: XGMI all-to-all among GPU0-7"));
        assert!(text.contains("shared by all GPUs: /dev/kfd"));
    }
}
