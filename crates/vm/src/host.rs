//! The host facts the rewrite needs: each host NUMA node's CPUs, and for each host PCI
//! function its NUMA node and the PCIe switch it sits behind. Built from a topoalign
//! [`Topology`] (sysfs, a profile) and optionally libvirt's `virsh capabilities` XML.

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_topology::{Bdf, CpuSet, PciKind, PciParent, Topology};

use crate::error::VmError;
use crate::xml::{child, children, parse, path_of, required_number};

/// One host NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostNode {
    /// Node id.
    pub id: u32,
    /// Its CPUs.
    pub cpus: CpuSet,
}

/// What kind of device a host function is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A GPU or accelerator.
    Gpu,
    /// A NIC function (PF or VF).
    Nic,
    /// Anything else.
    Other,
}

/// One host PCI function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostDevice {
    /// Its NUMA node, when known.
    pub numa: Option<u32>,
    /// The upstream port of the PCIe switch it sits behind, when it is behind one.
    pub switch: Option<Bdf>,
    /// Its host bridge (`pciDDDD:BB`), when known.
    pub host_bridge: Option<String>,
    /// GPU, NIC or other.
    pub role: Role,
    /// A short human label (`GPU AMD Instinct MI300X`, `NIC rdma0`).
    pub label: String,
}

/// The host as the rewrite sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostView {
    /// Host or profile name.
    pub name: String,
    /// NUMA nodes with their CPUs.
    pub nodes: Vec<HostNode>,
    /// Known PCI functions.
    pub devices: BTreeMap<Bdf, HostDevice>,
    /// The topology the view was built from (for pair classes), if any.
    pub topology: Option<Topology>,
}

impl HostView {
    /// Builds the view from a topoalign topology.
    pub fn from_topology(t: &Topology) -> HostView {
        let c = t.classifier();
        let mut devices = BTreeMap::new();
        for (i, d) in t.pci.iter().enumerate() {
            if d.kind != PciKind::Endpoint {
                continue;
            }
            let (role, label) = if let Some(g) = t.gpus.iter().find(|g| g.pci == i) {
                (
                    Role::Gpu,
                    format!("GPU {}", g.model.as_deref().unwrap_or(""))
                        .trim()
                        .to_string(),
                )
            } else if let Some(n) = t.nics.iter().find(|n| n.pci == i) {
                let name = n.netdev.as_deref().or(n.rdma.as_deref()).unwrap_or("");
                let vf = if n.is_vf() { " (VF)" } else { "" };
                (Role::Nic, format!("NIC {name}{vf}").trim().to_string())
            } else {
                (Role::Other, format!("PCI class {:06x}", d.class))
            };
            devices.insert(
                d.bdf,
                HostDevice {
                    numa: c.numa_of(i),
                    switch: switch_above(t, i),
                    host_bridge: t.pcie_root(i),
                    role,
                    label,
                },
            );
        }
        HostView {
            name: t.name.clone(),
            nodes: t
                .numa
                .iter()
                .map(|n| HostNode {
                    id: n.id,
                    cpus: n.cpus.clone(),
                })
                .collect(),
            devices,
            topology: Some(t.clone()),
        }
    }

    /// Replaces the NUMA node → CPU map with the cells of a `virsh capabilities` XML
    /// (KubeVirt's node-labeller keeps it at `/var/lib/kubevirt-node-labeller/capabilities.xml`).
    pub fn with_capabilities(mut self, xml: &str) -> Result<HostView, VmError> {
        self.nodes = capabilities_nodes(xml)?;
        Ok(self)
    }

    /// The host node whose CPUs include all of `cpus`, if exactly one does.
    pub fn node_of_cpus(&self, cpus: &CpuSet) -> Option<u32> {
        if cpus.is_empty() {
            return None;
        }
        self.nodes
            .iter()
            .find(|n| cpus.difference(&n.cpus).is_empty())
            .map(|n| n.id)
    }

    /// The host nodes that hold any of `cpus`.
    pub fn nodes_touching(&self, cpus: &CpuSet) -> Vec<u32> {
        self.nodes
            .iter()
            .filter(|n| !n.cpus.intersection(cpus).is_empty())
            .map(|n| n.id)
            .collect()
    }
}

/// The nearest switch upstream port above PCI function `i`.
fn switch_above(t: &Topology, i: usize) -> Option<Bdf> {
    let mut cur = t.pci.get(i)?.parent;
    for _ in 0..=t.pci.len() {
        match cur {
            PciParent::Host(_) => return None,
            PciParent::Bridge(p) => {
                let d = t.pci.get(p)?;
                if d.kind == PciKind::SwitchUpstream {
                    return Some(d.bdf);
                }
                cur = d.parent;
            }
        }
    }
    None
}

/// Reads `<capabilities><host><topology><cells><cell id><cpus><cpu id>`.
pub(crate) fn capabilities_nodes(xml: &str) -> Result<Vec<HostNode>, VmError> {
    let doc = parse("the capabilities XML", xml)?;
    let root = doc.root_element();
    if root.tag_name().name() != "capabilities" {
        return Err(VmError::WrongRoot {
            what: "the capabilities XML",
            found: root.tag_name().name().to_string(),
            expected: "capabilities",
        });
    }
    let cells = child(root, "host")
        .and_then(|h| child(h, "topology"))
        .and_then(|t| child(t, "cells"))
        .ok_or_else(|| VmError::Missing {
            element: "/capabilities/host/topology".into(),
            missing: "<cells> (the host NUMA cells)",
        })?;
    let mut nodes = Vec::new();
    for c in children(cells, "cell") {
        let id = required_number(c, "id", u64::from(u32::MAX))? as u32;
        let mut ids = Vec::new();
        if let Some(cpus) = child(c, "cpus") {
            for cpu in children(cpus, "cpu") {
                ids.push(
                    required_number(cpu, "id", u64::from(topoalign_topology::MAX_CPU_ID))? as u32,
                );
            }
        }
        if nodes.iter().any(|n: &HostNode| n.id == id) {
            return Err(VmError::Input {
                what: "the capabilities XML",
                detail: format!("{}: cell id {id} appears twice", path_of(c)),
            });
        }
        nodes.push(HostNode {
            id,
            cpus: CpuSet::from_ids(ids),
        });
    }
    if nodes.is_empty() {
        return Err(VmError::Missing {
            element: path_of(cells),
            missing: "<cell> entries",
        });
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_cells() {
        let xml = "<capabilities><host><topology><cells num='2'>\
            <cell id='0'><cpus num='2'><cpu id='0'/><cpu id='2'/></cpus></cell>\
            <cell id='1'><cpus num='2'><cpu id='1'/><cpu id='3'/></cpus></cell>\
            </cells></topology></host></capabilities>";
        let n = capabilities_nodes(xml).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[1].cpus.to_string(), "1,3");
        let e = capabilities_nodes("<capabilities><host/></capabilities>")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/capabilities/host/topology: missing <cells>"),
            "{e}"
        );
        let e = capabilities_nodes("<capabilities><host><topology><cells><cell id='0'><cpus><cpu id='x'/></cpus></cell></cells></topology></host></capabilities>")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cpu: id=`x`"), "{e}");
    }
}
