//! RoCE functions' network interfaces as CDI `netDevices` edits: opt-in, never by default.
//!
//! A RoCE (Ethernet link layer) VF needs its netdev in the pod's network namespace for
//! its GIDs; the verbs device nodes alone do not make RDMA work. CDI spec 1.1.0 added
//! `containerEdits.netDevices` (`hostInterfaceName` → `name`); the CDI library (v1.1.0)
//! turns it into the OCI runtime spec's `linux.netDevices`, which runc ≥ 1.4.0 applies
//! by moving the interface into the container's network namespace.
//!
//! Why it is not on by default (measured with the CDI Go library, read from runc v1.4.0):
//! - A spec that uses `netDevices` must say `cdiVersion: 1.1.0`, and CDI libraries before
//!   v1.1.0 refuse such a file whole (`unknown field "netDevices"`, or `invalid version
//!   "1.1.0"`): containerd before 2.2.1 (1.7.x vendors CDI 0.8.1, 2.0.x/2.1.x/2.2.0 vendor
//!   1.0.x) could then resolve none of the claim's devices and the container fails.
//! - runc refuses to create a container with `netDevices` and no network namespace of its
//!   own: a `hostNetwork: true` pod (the usual RoCE workaround) would fail to start.
//! - runc moves the interface out of the host namespace when the container is created and
//!   never back; the pod sandbox keeps it, so a restarted container (or a second container
//!   of the pod given the same claim) finds no interface to move and fails.
//!
//! So these edits belong behind an operator's opt-in (nodes on containerd ≥ 2.2.1 with
//! runc ≥ 1.4.0, RoCE pods without `hostNetwork` whose containers do not restart); the
//! kubelet plugin does not call [`add_roce_net_devices`] by default. Otherwise a RoCE pod
//! needs `hostNetwork: true` or a CNI attachment (Multus), which `topoalign lint` checks.

use crate::prepare::allocation::PreparedDevice;
use crate::prepare::cdi::{
    CDI_KIND, CdiDevice, CdiSpec, ComposedCdi, ContainerEdits, NetDevice, cdi_device_id,
    cdi_device_name,
};
use crate::publish::Inventory;

/// The CDI spec version that has `netDevices`.
pub(crate) const CDI_VERSION_NET_DEVICES: &str = "1.1.0";
/// The kernel's `link_layer` word of RoCE ports.
pub const LINK_LAYER_ETHERNET: &str = "Ethernet";

/// The netdev of a prepared device's NIC function when that NIC is RoCE (Ethernet link
/// layer); `None` for GPUs, InfiniBand functions (an IPoIB interface is not moved) and
/// functions without a netdev.
pub(crate) fn roce_netdev<'d>(inv: &Inventory, d: &'d PreparedDevice) -> Option<&'d str> {
    let f = d.nic_function.as_ref()?;
    let nic = inv.nics.iter().find(|n| Some(&n.name) == d.nic.as_ref())?;
    (nic.link_layer.as_deref() == Some(LINK_LAYER_ETHERNET))
        .then_some(f.netdev.as_deref())
        .flatten()
}

/// Adds a `netDevices` edit to the CDI device of each prepared RoCE function of a claim
/// (same interface name in the container), and raises the spec to
/// `CDI_VERSION_NET_DEVICES`; a device that had no CDI device of its own gets one (and
/// its id). Returns the interfaces added; nothing changes when there are none.
/// `devices` must be the list `composed` was made from, in the same order.
pub fn add_roce_net_devices(
    composed: &mut ComposedCdi,
    claim_uid: &str,
    devices: &[PreparedDevice],
    inv: &Inventory,
) -> Vec<String> {
    let mut moved = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        let Some(netdev) = roce_netdev(inv, d) else {
            continue;
        };
        let spec = composed.spec.get_or_insert_with(|| CdiSpec {
            cdi_version: CDI_VERSION_NET_DEVICES.to_string(),
            kind: CDI_KIND.to_string(),
            devices: Vec::new(),
            container_edits: ContainerEdits::default(),
        });
        let name = cdi_device_name(claim_uid, &d.device);
        let pos = match spec.devices.iter().position(|c| c.name == name) {
            Some(pos) => pos,
            None => {
                spec.devices.push(CdiDevice {
                    name,
                    container_edits: ContainerEdits::default(),
                });
                if let Some(ids) = composed.ids.get_mut(i) {
                    ids.push(cdi_device_id(claim_uid, &d.device));
                }
                spec.devices.len() - 1
            }
        };
        let edits = &mut spec.devices[pos].container_edits;
        if edits
            .net_devices
            .iter()
            .all(|n| n.host_interface_name != netdev)
        {
            edits.net_devices.push(NetDevice {
                host_interface_name: netdev.to_string(),
                name: netdev.to_string(),
            });
            moved.push(netdev.to_string());
        }
        spec.cdi_version = CDI_VERSION_NET_DEVICES.to_string();
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::AllocatedDevice;
    use crate::prepare::allocation::{Holdings, prepare_allocation};
    use crate::prepare::cdi::{CdiPlan, compose_cdi};
    use crate::{DRIVER_NAME, DeviceKind};
    use std::collections::BTreeMap;
    use topoalign_topology::{LinkLayer, Topology};

    fn alloc(device: &str) -> AllocatedDevice {
        AllocatedDevice {
            request: "r".into(),
            driver: DRIVER_NAME.into(),
            pool: "n1".into(),
            device: device.into(),
        }
    }

    fn compose(inv: &Inventory, names: &[&str]) -> (Vec<PreparedDevice>, ComposedCdi) {
        let results: Vec<AllocatedDevice> = names.iter().map(|n| alloc(n)).collect();
        let prepared = prepare_allocation(inv, "n1", &results, &Holdings::default()).unwrap();
        let none = BTreeMap::new();
        let plan = CdiPlan {
            vendor_ids: &none,
            vendor_mig_ids: &Default::default(),
            nvidia_node: false,
        };
        let composed = compose_cdi("u1", &prepared, &plan);
        (prepared, composed)
    }

    /// mi300x-8's NICs are RoCE: Ethernet link layer, PF + 4 VFs each, every function
    /// with a netdev.
    fn mi300x() -> Topology {
        topoalign_profiles::get("mi300x-8").unwrap()
    }

    fn roce() -> Inventory {
        Inventory::from_topology(&mi300x())
    }

    #[test]
    fn a_roce_pair_moves_its_vf_and_raises_the_spec_version() {
        let inv = roce();
        assert!(
            inv.nics
                .iter()
                .all(|n| n.link_layer.as_deref() == Some("Ethernet"))
        );
        let pair = inv.pairs[0].name.clone();
        let (prepared, mut composed) = compose(&inv, &[&pair]);
        let before = composed.clone();
        assert_eq!(
            before.spec.as_ref().unwrap().cdi_version,
            crate::prepare::cdi::CDI_VERSION
        );
        let moved = add_roce_net_devices(&mut composed, "u1", &prepared, &inv);
        let f = prepared[0].nic_function.as_ref().unwrap();
        assert_eq!(moved, vec![f.netdev.clone().unwrap()]);
        let spec = composed.spec.unwrap();
        assert_eq!(spec.cdi_version, "1.1.0");
        let dev = spec
            .devices
            .iter()
            .find(|d| d.name == format!("u1-{pair}"))
            .unwrap();
        assert_eq!(
            dev.container_edits.net_devices,
            vec![NetDevice {
                host_interface_name: moved[0].clone(),
                name: moved[0].clone()
            }]
        );
        // The ids do not change: the edit rides on the function's own CDI device.
        assert_eq!(composed.ids, before.ids);
        let json = serde_json::to_value(&dev.container_edits).unwrap();
        assert_eq!(
            json["netDevices"][0]["hostInterfaceName"],
            moved[0].as_str()
        );
        assert_eq!(json["netDevices"][0]["name"], moved[0].as_str());
    }

    #[test]
    fn two_functions_of_one_nic_move_two_interfaces() {
        let inv = roce();
        let nic = inv.nics[0].name.clone();
        let (prepared, mut composed) = compose(&inv, &[&nic, &nic]);
        let moved = add_roce_net_devices(&mut composed, "u1", &prepared, &inv);
        assert_eq!(moved.len(), 2);
        assert_ne!(moved[0], moved[1]);
    }

    #[test]
    fn gpus_and_infiniband_functions_are_left_alone() {
        let mut topo = mi300x();
        for n in &mut topo.nics {
            for p in &mut n.ports {
                p.link_layer = LinkLayer::InfiniBand;
            }
        }
        let inv = Inventory::from_topology(&topo);
        let pair = inv.pairs[0].name.clone();
        let gpu = inv.gpus[inv.gpus.len() - 1].name.clone();
        let (prepared, mut composed) = compose(&inv, &[&pair, &gpu]);
        assert!(prepared.iter().any(|d| d.kind == DeviceKind::Gpu));
        let before = composed.clone();
        assert!(add_roce_net_devices(&mut composed, "u1", &prepared, &inv).is_empty());
        assert_eq!(composed, before, "nothing changes, version included");
    }
}
