//! The NIC builder: one [`PhysicalNic`] per physical NIC (a PF with its VFs, or a NIC
//! without SR-IOV), in address order, at its PF's [`Locality`], with its counter set.

use std::collections::BTreeMap;

use topoalign_topology::{Bdf, Sriov, Topology};

use super::{Locality, SET_SIZE};
use crate::publish::entries::{NicFunction, PhysicalNic};
use crate::publish::names;

/// The physical NICs of `topo`, in address order: every function that is not a VF of a
/// PF we know heads one, with its VFs in `virtfn` order. Alignment group and counter
/// set are filled in later.
pub(super) fn nics(topo: &Topology) -> Vec<PhysicalNic> {
    let mut heads: Vec<usize> = Vec::new();
    let mut members: BTreeMap<Bdf, Vec<usize>> = BTreeMap::new();
    for (i, n) in topo.nics.iter().enumerate() {
        match &n.sriov {
            Sriov::Vf { pf, .. } if topo.nic_index(*pf).is_some() => {
                members.entry(*pf).or_default().push(i);
            }
            _ => heads.push(i),
        }
    }
    let mut nics: Vec<PhysicalNic> = heads
        .into_iter()
        .map(|h| {
            let head = &topo.nics[h];
            let bdf = topo.nic_bdf(h);
            let mut vfs = members.remove(&bdf).unwrap_or_default();
            vfs.sort_by_key(|&v| match topo.nics[v].sriov {
                Sriov::Vf { index, .. } => (index, topo.nic_bdf(v)),
                _ => (u32::MAX, topo.nic_bdf(v)),
            });
            let functions = std::iter::once(h)
                .chain(vfs)
                .map(|f| {
                    let n = &topo.nics[f];
                    NicFunction {
                        bdf: topo.nic_bdf(f),
                        index: f,
                        vf: match n.sriov {
                            Sriov::Vf { index, .. } => Some(index),
                            _ => None,
                        },
                        netdev: n.netdev.clone(),
                        rdma: n.rdma.clone(),
                        port: n.ports.first().map(|p| p.number),
                        device_nodes: n.device_nodes(),
                    }
                })
                .collect();
            let pci = &topo.pci[head.pci];
            let Locality {
                numa_node,
                socket,
                pcie_root,
                pcie_switch,
            } = Locality::of(topo, head.pci);
            let bandwidth_bps = head
                .speed_mbps
                .filter(|s| *s > 0)
                .map(|m| m.saturating_mul(1_000_000))
                .or_else(|| {
                    head.ports
                        .first()
                        .and_then(|p| p.rate_gbps)
                        .map(|g| u64::from(g) * 1_000_000_000)
                });
            PhysicalNic {
                name: names::nic_device(bdf),
                bdf,
                index: h,
                vendor: pci_vendor_name(pci.vendor),
                functions,
                numa_node,
                socket,
                pcie_root,
                pcie_switch,
                alignment_group: None,
                rdma_device: head.rdma.clone(),
                netdev: head.netdev.clone(),
                ib_only: head.ib_only(),
                link_layer: head.link_layer().map(|l| l.as_sysfs().to_string()),
                bandwidth_bps,
                counter_set: String::new(),
                rail: None,
            }
        })
        .collect();
    nics.sort_by_key(|n| n.bdf);
    nics
}

/// NIC counters, 32 per set (`nics-0`, `nics-1`, ...) in address order.
pub(super) fn counter_sets(nics: &mut [PhysicalNic]) {
    for (i, n) in nics.iter_mut().enumerate() {
        n.counter_set = format!("nics-{}", i / SET_SIZE);
    }
}

/// A short vendor name for a PCI vendor id.
fn pci_vendor_name(id: u16) -> String {
    use topoalign_topology::pci::vendor;
    match id {
        vendor::MELLANOX => "mellanox".into(),
        vendor::BROADCOM => "broadcom".into(),
        vendor::INTEL => "intel".into(),
        vendor::NVIDIA => "nvidia".into(),
        vendor::AMD => "amd".into(),
        other => format!("{other:04x}"),
    }
}
