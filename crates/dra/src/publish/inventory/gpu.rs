//! The GPU builder: one [`GpuEntry`] per GPU of the topology, in address order, at its
//! [`Locality`], with its NVLink/xGMI island and its counter set.

use topoalign_topology::Topology;

use super::{Locality, SET_SIZE};
use crate::publish::entries::GpuEntry;
use crate::publish::mig::NodeMig;
use crate::publish::names;

/// The GPUs of `topo`, in address order; alignment group and counter set are filled in
/// later ([`super::locality::alignment_groups`], [`counter_sets`]). A GPU `mig` gives
/// instances is MIG-enabled.
pub(super) fn gpus(topo: &Topology, mig: &NodeMig) -> Vec<GpuEntry> {
    // Fabric islands of more than one GPU, numbered in order.
    let mut fabric = vec![None; topo.gpus.len()];
    let mut island_no = 0;
    for island in topo.fabric_islands() {
        if island.len() > 1 {
            for g in island {
                if let Some(slot) = fabric.get_mut(g) {
                    *slot = Some(island_no);
                }
            }
            island_no += 1;
        }
    }

    let mut gpus: Vec<GpuEntry> = topo
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let bdf = topo.gpu_bdf(i);
            let Locality {
                numa_node,
                socket,
                pcie_root,
                pcie_switch,
            } = Locality::of(topo, g.pci);
            GpuEntry {
                name: names::gpu_device(bdf),
                bdf,
                index: i,
                vendor: g.vendor,
                model: g.model.clone(),
                memory_mib: g.memory_mib,
                uuid: g.uuid.clone(),
                numa_node,
                socket,
                pcie_root,
                pcie_switch,
                alignment_group: None,
                fabric_domain: fabric[i],
                device_nodes: g.device_nodes(),
                counter_set: String::new(),
                mig_enabled: mig.gpu(bdf).is_some_and(|l| !l.instances.is_empty()),
            }
        })
        .collect();
    gpus.sort_by_key(|g| g.bdf);
    gpus
}

/// GPU counters, 32 per set (`gpus-0`, `gpus-1`, ...) in address order; a MIG-enabled
/// GPU has a set of its own instead.
pub(super) fn counter_sets(gpus: &mut [GpuEntry]) {
    let mut plain = 0;
    for g in gpus {
        if g.mig_enabled {
            g.counter_set = names::mig_counter_set(g.bdf);
        } else {
            g.counter_set = format!("gpus-{}", plain / SET_SIZE);
            plain += 1;
        }
    }
}
