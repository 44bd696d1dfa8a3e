//! A node's topology rebuilt from its foreign GPUs' and NICs' attributes: NUMA nodes from
//! [`ForeignDevice::numa`], host bridges from `pcieRoot`, devices at their addresses
//! directly below their host bridge (the drivers publish no switches, so PIX/PXB cannot
//! be told apart from PHB).
//!
//! A device that publishes no NUMA node takes the one of the devices that share its
//! `pcieRoot` (one host bridge hangs under one NUMA node), when they publish one and
//! agree: NVIDIA's driver before v0.5 publishes none, but dranet writes it on the EFA
//! that shares each GPU's root on an AWS p4d. A device whose NUMA node stays unknown is
//! left out and named (a frontend Ethernet function of a VM, `rdma: false`), never
//! guessed; only when no GPU or no NIC is left is the node refused
//! ([`DraError::Blind`]).

use std::collections::{BTreeMap, BTreeSet};

use topoalign_topology::parse_root_name;
use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{CpuSet, Gpu, GpuVendor, Nic, PciParent, Topology, TopologyBuilder};

use crate::attr::NUMA_NODE_COMPAT;
use crate::foreign::devices::{ForeignDevice, OWN_NUMA};
use crate::{DraError, attr};

/// The topology sources that tell the planner what the slices leave out, as flags.
pub(crate) const TOPOLOGY_FLAGS: &str =
    "--profile NAME, --sysfs-root DIR, --from-nvidia-smi FILE or --from-nccl-xml FILE";

/// The topology the slices describe, and what it had to leave out or infer.
#[derive(Debug, Clone)]
pub struct SliceTopology {
    /// GPUs and NICs with an address and a NUMA node.
    pub topology: Topology,
    /// Devices whose NUMA node came from a device on the same `pcieRoot`:
    /// (device, NUMA node, the device it came from).
    pub inferred: Vec<(String, u32, String)>,
    /// Devices left out, with why.
    pub left_out: Vec<(String, String)>,
}

impl SliceTopology {
    /// One line per inference and per device left out.
    pub fn notes(&self) -> Vec<String> {
        let inferred = self.inferred.iter().map(|(d, n, from)| {
            format!("{d}: NUMA node {n} from {from}, which shares its pcieRoot")
        });
        let left = (self.left_out.iter()).map(|(d, why)| format!("{d} left out: {why}"));
        inferred.chain(left).collect()
    }
}

/// The keys a NUMA node is read from, for messages.
fn numa_keys(driver: &str) -> String {
    let mut keys: Vec<String> = std::iter::once(attr::NUMA_NODE_STD.to_string())
        .chain(OWN_NUMA.iter().map(|a| format!("{driver}/{a}")))
        .chain(std::iter::once(NUMA_NODE_COMPAT.to_string()))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    keys.join(", ")
}

/// Up to three names, then how many more.
fn sample(names: &[&str]) -> String {
    let head = names.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    match names.len() {
        n if n > 3 => format!("{head} and {} more", n - 3),
        _ => head,
    }
}

/// The NUMA node of every device with an address: its own, else the one every other
/// device on its `pcieRoot` publishes. (device index in `all` → (node, source)).
fn numa_of(all: &[&ForeignDevice]) -> BTreeMap<usize, (u32, Option<String>)> {
    let mut by_root: BTreeMap<String, BTreeSet<(u32, String)>> = BTreeMap::new();
    for d in all {
        if let (Some(root), Some(n)) = (d.pcie_root(), d.numa()) {
            by_root
                .entry(root)
                .or_default()
                .insert((n, d.device.name.clone()));
        }
    }
    let mut out = BTreeMap::new();
    for (i, d) in all.iter().enumerate() {
        if let Some(n) = d.numa() {
            out.insert(i, (n, None));
            continue;
        }
        let Some(peers) = d.pcie_root().and_then(|r| by_root.get(&r)) else {
            continue;
        };
        let nodes: BTreeSet<u32> = peers.iter().map(|(n, _)| *n).collect();
        if let (1, Some((n, from))) = (nodes.len(), peers.first()) {
            out.insert(i, (*n, Some(from.clone())));
        }
    }
    out
}

/// Rebuilds the node's topology from `gpus` and `nics` (see the module documentation).
pub fn slice_topology(
    node: &str,
    gpus: &[ForeignDevice],
    nics: &[ForeignDevice],
) -> Result<SliceTopology, DraError> {
    let all: Vec<&ForeignDevice> = gpus.iter().chain(nics).collect();
    let numa = numa_of(&all);
    let mut inferred = Vec::new();
    let mut left_out = Vec::new();
    let mut missing: [Vec<&str>; 2] = [Vec::new(), Vec::new()];
    let mut placed = [0usize; 2];
    for (i, d) in all.iter().enumerate() {
        let side = usize::from(i >= gpus.len());
        if d.bdf().is_none() {
            continue;
        }
        placed[side] += 1;
        match numa.get(&i) {
            Some((n, Some(from))) => inferred.push((d.device.name.clone(), *n, from.clone())),
            Some(_) => {}
            None => {
                missing[side].push(d.device.name.as_str());
                left_out.push((
                    d.device.name.clone(),
                    format!(
                        "publishes no NUMA node (read: {}) and no device on its pcieRoot does",
                        numa_keys(&d.driver)
                    ),
                ));
            }
        }
    }
    let usable = |side: usize| placed[side] > missing[side].len();
    if !usable(0) || !usable(1) {
        let parts: Vec<String> = [(gpus, "GPUs", 0), (nics, "NICs", 1)]
            .into_iter()
            .filter(|(_, _, side)| !missing[*side].is_empty())
            .map(|(devs, what, side)| {
                let driver = devs.first().map_or("?", |d| d.driver.as_str());
                format!(
                    "{} of {} {what} of {driver} ({}) publish no NUMA node (read: {})",
                    missing[side].len(),
                    placed[side],
                    sample(&missing[side]),
                    numa_keys(driver)
                )
            })
            .collect();
        let why = if parts.is_empty() {
            "no GPU or no NIC publishes a PCI address".to_string()
        } else {
            parts.join("; ")
        };
        return Err(DraError::Blind {
            node: node.to_string(),
            why,
        });
    }
    let topology = build(&all, gpus.len(), &numa)?;
    Ok(SliceTopology {
        topology,
        inferred,
        left_out,
    })
}

/// [`slice_topology`]'s topology alone.
pub fn topology_of(
    node: &str,
    gpus: &[ForeignDevice],
    nics: &[ForeignDevice],
) -> Result<Topology, DraError> {
    slice_topology(node, gpus, nics).map(|t| t.topology)
}

fn build(
    all: &[&ForeignDevice],
    gpu_count: usize,
    numa: &BTreeMap<usize, (u32, Option<String>)>,
) -> Result<Topology, DraError> {
    let mut b = TopologyBuilder::new("from-slices");
    let numas: BTreeSet<u32> = numa.values().map(|(n, _)| *n).collect();
    for n in &numas {
        let d = numas.iter().map(|m| if m == n { 10 } else { 20 }).collect();
        b.numa_node(*n, CpuSet::new(), None, d, None);
    }
    let mut hosts: BTreeMap<(u16, u8), PciParent> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (i, d) in all.iter().enumerate() {
        let (Some(bdf), Some((n, _))) = (d.bdf(), numa.get(&i)) else {
            continue;
        };
        // One physical device once: a MIG instance, a partition or a passthrough twin
        // has its GPU's address.
        if !seen.insert(bdf) {
            continue;
        }
        let (dom, bus) = d
            .pcie_root()
            .and_then(|r| parse_root_name(&r).ok())
            .unwrap_or((bdf.domain, bdf.bus));
        let parent = *hosts
            .entry((dom, bus))
            .or_insert_with(|| b.host_bridge(dom, bus));
        if i < gpu_count {
            let pci = b.endpoint(
                parent,
                bdf,
                vendor::NVIDIA,
                0,
                class::DISPLAY_3D,
                Some(*n),
                None,
            );
            b.gpu(Gpu::on(pci, GpuVendor::Other));
        } else {
            let pci = b.endpoint(
                parent,
                bdf,
                vendor::MELLANOX,
                0,
                class::INFINIBAND,
                Some(*n),
                None,
            );
            let mut nic = Nic::on(pci);
            nic.rdma = d.rdma_device();
            nic.rdma_unnamed = nic.rdma.is_none() && d.rdma() == Some(true);
            b.nic(nic);
        }
    }
    b.build()
        .map_err(|e| DraError::Plan(format!("the devices do not form a valid topology: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dev(driver: &str, name: &str, attrs: serde_json::Value) -> ForeignDevice {
        ForeignDevice {
            driver: driver.into(),
            device: serde_json::from_value(json!({"name": name, "attributes": attrs})).unwrap(),
        }
    }

    fn gpu(name: &str, bdf: &str, root: &str) -> ForeignDevice {
        dev(
            "gpu.nvidia.com",
            name,
            json!({"type": {"string": "gpu"},
                   "resource.kubernetes.io/pciBusID": {"string": bdf},
                   "resource.kubernetes.io/pcieRoot": {"string": root}}),
        )
    }

    fn nic(name: &str, bdf: &str, root: Option<&str>, numa: Option<i64>) -> ForeignDevice {
        let mut a = json!({"dra.net/pciAddress": {"string": bdf}, "dra.net/rdma": {"bool": true}});
        if let Some(r) = root {
            a["resource.kubernetes.io/pcieRoot"] = json!({"string": r});
        }
        if let Some(n) = numa {
            a["dra.net/numaNode"] = json!({"int": n});
        }
        dev("dra.net", name, a)
    }

    #[test]
    fn a_gpu_takes_the_numa_node_of_the_nic_on_its_root() {
        // AWS p4d as dranet and NVIDIA's older driver publish it: GPUs without NUMA,
        // each root with one EFA that has one.
        let gpus = [
            gpu("gpu-0", "0000:10:1c.0", "pci0000:10"),
            gpu("gpu-4", "0000:90:1c.0", "pci0000:90"),
        ];
        let nics = [
            nic("efa-10", "0000:10:1b.0", Some("pci0000:10"), Some(0)),
            nic("efa-90", "0000:90:1b.0", Some("pci0000:90"), Some(1)),
        ];
        let t = slice_topology("n", &gpus, &nics).unwrap();
        assert_eq!(t.topology.gpus.len(), 2);
        assert_eq!(
            t.inferred,
            [
                ("gpu-0".to_string(), 0, "efa-10".to_string()),
                ("gpu-4".to_string(), 1, "efa-90".to_string())
            ]
        );
        let c = t.topology.classifier();
        assert_eq!(c.gpu_nic(0, 0).class.as_str(), "PHB");
        assert_eq!(c.gpu_nic(0, 1).class.as_str(), "SYS");
        assert!(t.notes()[0].contains("shares its pcieRoot"));
    }

    #[test]
    fn a_nic_without_numa_is_left_out_not_the_node() {
        let gpus = [dev(
            "gpu.nvidia.com",
            "gpu-0",
            json!({"type": {"string": "gpu"}, "resource.kubernetes.io/pciBusID": {"string": "0008:06:00.0"},
                   "resource.kubernetes.io/numaNode": {"int": 0}}),
        )];
        let nics = [
            nic("ib0", "0101:00:00.0", None, Some(0)),
            nic("eth0", "7870:00:00.0", None, None),
        ];
        let t = slice_topology("n", &gpus, &nics).unwrap();
        assert_eq!(t.topology.nics.len(), 1);
        assert_eq!(t.left_out.len(), 1);
        assert_eq!(t.left_out[0].0, "eth0");
        assert!(
            t.left_out[0].1.contains("dra.net/numaNode"),
            "{:?}",
            t.left_out
        );
    }

    #[test]
    fn no_gpu_with_a_numa_node_is_blind() {
        // OCI GB200: NICs with NUMA, GPUs without, no root shared.
        let gpus = [gpu("gpu-0", "0008:06:00.0", "pci0008:00")];
        let nics = [nic("rdma0", "0000:03:00.0", Some("pci0000:00"), Some(0))];
        let e = slice_topology("gb200", &gpus, &nics).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("node gb200") && text.contains("1 of 1 GPUs of gpu.nvidia.com (gpu-0)"),
            "{text}"
        );
        assert!(text.contains("dra.net/numaNode"), "{text}");
        // Disagreeing neighbours give nothing either.
        let nics = [
            nic("a", "0008:01:00.0", Some("pci0008:00"), Some(0)),
            nic("b", "0008:02:00.0", Some("pci0008:00"), Some(1)),
        ];
        assert!(slice_topology("x", &gpus, &nics).is_err());
    }
}
