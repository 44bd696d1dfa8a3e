//! Property: for random device sets, guest cell counts, pinnings, pre-existing root
//! ports and switch mirroring, a rewrite either succeeds with a layout libvirt and QEMU
//! accept (disjoint bus ranges in 1–254 holding their bridges, unique chassis, ports in
//! range, unique slots, every moved device under an expander whose node is its host
//! node's cell) or refuses with a capacity error — never an invalid domain, never a panic.

use crate::common::{domain_xml, profile, read_back};
use proptest::prelude::*;
use topoalign_topology::{Bdf, PciKind, Topology};
use topoalign_vm::{HostView, Options, VmError, rewrite};

fn endpoints(t: &Topology) -> Vec<Bdf> {
    t.pci
        .iter()
        .filter(|d| d.kind == PciKind::Endpoint)
        .map(|d| d.bdf)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn layouts_are_always_valid(
        which in 0usize..3,
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
        cells in 1u32..=8,
        existing_ports in 0u32..12,
        drop_pins in proptest::collection::vec(0u32..16, 0..3),
        mirror in any::<bool>(),
        bridges in any::<bool>(),
    ) {
        let name = ["mi300x-8", "dgx-h100", "gb300-4"][which];
        let t = profile(name);
        let all = endpoints(&t);
        let mut devs: Vec<Bdf> = picks.iter().map(|i| all[i.index(all.len())]).collect();
        devs.sort();
        devs.dedup();
        let mut xml = domain_xml(&t, cells, &devs);
        let mut extra = String::new();
        for i in 1..=existing_ports {
            extra.push_str(&format!(
                "    <controller type='pci' index='{i}' model='pcie-root-port'><address type='pci' domain='0x0000' bus='0x00' slot='0x{:02x}' function='0x0'/></controller>\n",
                i + 1
            ));
        }
        xml = xml.replace("model='pcie-root'/>\n", &format!("model='pcie-root'/>\n{extra}"));
        for v in drop_pins {
            xml = xml.replace(&format!("<vcpupin vcpu='{v}' "), "<vcpupin vcpu='999' ");
        }
        let host = HostView::from_topology(&t);
        match rewrite(&xml, &host, Options { mirror_switches: mirror, mirror_host_bridges: bridges }) {
            Ok(out) => {
                let r = read_back(&out.xml);
                r.assert_valid();
                let c = t.classifier();
                for d in &out.report.devices {
                    if let Some(cell) = d.guest_cell {
                        let bus = r.hostdev_bus[&d.host_address].unwrap();
                        prop_assert_eq!(r.cell_of(bus), Some(cell));
                        let node = c.numa_of(t.pci_index(d.host_address).unwrap());
                        let m = out.report.cells.iter().find(|m| m.cell == cell).unwrap();
                        prop_assert_eq!(m.host_node, node);
                    } else {
                        prop_assert!(d.left.is_some());
                    }
                }
                // Ranges never overlap pcie.0's buses.
                for e in &out.report.expanders {
                    prop_assert!(e.bus_nr > out.report.pcie0_floor);
                }
            }
            Err(VmError::TooManyDevices { .. } | VmError::OutOfBuses { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected refusal: {e}"),
        }
    }
}
