//! PCI functions: `sys/devices/pciDDDD:BB/…/<BDF>` with their attribute files and config
//! space, the `sys/bus/pci/devices/<BDF>` links, and SR-IOV `physfn`/`virtfnN` links.

use std::path::{Path, PathBuf};

use topoalign_topology::{PciParent, Sriov, Topology};

use super::tree::Tree;
use crate::error::DiscoverError;
use crate::sysfs::config::build_config;
use crate::sysfs::pci::BUS_DEVICES;

/// The sysfs directory of every PCI function, relative to the root, indexed like
/// `topo.pci`. The topology is validated, so parent chains end at a host bridge.
pub(super) fn device_dirs(topo: &Topology) -> Vec<PathBuf> {
    (0..topo.pci.len())
        .map(|i| {
            let mut chain = vec![topo.pci[i].bdf.to_string()];
            let mut cur = topo.pci[i].parent;
            let mut host = String::from("pci0000:00");
            for _ in 0..=topo.pci.len() {
                match cur {
                    PciParent::Bridge(p) => {
                        chain.push(topo.pci[p].bdf.to_string());
                        cur = topo.pci[p].parent;
                    }
                    PciParent::Host(h) => {
                        if let Some(hb) = topo.host_bridges.get(h) {
                            host = hb.name();
                        }
                        break;
                    }
                }
            }
            let mut path = PathBuf::from("sys/devices").join(host);
            for c in chain.iter().rev() {
                path.push(c);
            }
            path
        })
        .collect()
}

/// Writes every PCI function.
pub(super) fn write_functions(
    tree: &Tree,
    topo: &Topology,
    dirs: &[PathBuf],
) -> Result<(), DiscoverError> {
    for (i, dev) in topo.pci.iter().enumerate() {
        let d = &dirs[i];
        let f = |name: &str| d.join(name);
        tree.file(&f("class"), &format!("0x{:06x}", dev.class))?;
        tree.file(&f("vendor"), &format!("0x{:04x}", dev.vendor))?;
        tree.file(&f("device"), &format!("0x{:04x}", dev.device))?;
        let numa = dev.numa_node.map_or("-1".to_string(), |n| n.to_string());
        tree.file(&f("numa_node"), &numa)?;
        match dev.link {
            Some(l) => {
                tree.file(&f("current_link_speed"), &l.speed_text())?;
                tree.file(&f("current_link_width"), &l.width.to_string())?;
            }
            None => {
                tree.file(&f("current_link_speed"), "Unknown")?;
                tree.file(&f("current_link_width"), "0")?;
            }
        }
        if let Some((sec, sub)) = dev.bus_range {
            tree.file(&f("secondary_bus_number"), &sec.to_string())?;
            tree.file(&f("subordinate_bus_number"), &sub.to_string())?;
        }
        let config = build_config(
            dev.vendor,
            dev.device,
            dev.class,
            dev.kind,
            dev.bdf.bus,
            dev.bus_range,
        );
        tree.bytes(&f("config"), &config)?;
        tree.link(&Path::new(BUS_DEVICES).join(dev.bdf.to_string()), d)?;
    }
    for nic in &topo.nics {
        let d = &dirs[nic.pci];
        match &nic.sriov {
            Sriov::None => {}
            Sriov::Pf { total_vfs, vfs } => {
                tree.file(&d.join("sriov_totalvfs"), &total_vfs.to_string())?;
                tree.file(&d.join("sriov_numvfs"), &vfs.len().to_string())?;
                for (k, vf) in vfs.iter().enumerate() {
                    if let Some(vi) = topo.pci_index(*vf) {
                        tree.link(&d.join(format!("virtfn{k}")), &dirs[vi])?;
                    }
                }
            }
            Sriov::Vf { pf, .. } => {
                if let Some(pi) = topo.pci_index(*pf) {
                    tree.link(&d.join("physfn"), &dirs[pi])?;
                }
            }
        }
    }
    Ok(())
}
