//! End-to-end rewrites on the built-in profiles with 1-, 2- and 8-cell guests, golden
//! snapshots of the rewritten XML, and refusals.

use crate::common::{domain_xml, gpus_and_pix_nics, profile, read_back};
use topoalign_topology::{Bdf, Topology};
use topoalign_vm::{HostView, Options, VmError, rewrite};

/// The guest cell a device on host node `node` must land in: among the cells
/// `domain_xml` put on that node (cell c on node c * nodes / cells), the lowest id (all
/// have two vCPUs).
fn expected_cell(t: &Topology, cells: u32, node: u32) -> Option<u32> {
    let nodes = t.numa.len() as u32;
    (0..cells).find(|c| t.numa[(c * nodes / cells) as usize].id == node)
}

fn run_case(name: &str, cells: u32, mirror: bool) {
    let t = profile(name);
    let host = HostView::from_topology(&t);
    let devs = gpus_and_pix_nics(&t);
    let xml = domain_xml(&t, cells, &devs);
    let out = rewrite(
        &xml,
        &host,
        Options {
            mirror_switches: mirror,
            ..Options::default()
        },
    )
    .unwrap();
    let r = read_back(&out.xml);
    r.assert_valid();
    let c = t.classifier();
    for (i, d) in devs.iter().enumerate() {
        let pci = t.pci_index(*d).unwrap();
        let node = c.numa_of(pci).unwrap();
        let rep = &out.report.devices[i];
        assert_eq!(rep.host_address, *d);
        match expected_cell(&t, cells, node) {
            Some(cell) => {
                let bus = r.hostdev_bus[d]
                    .unwrap_or_else(|| panic!("{name}/{cells}: {d} has no address"));
                assert_eq!(r.cell_of(bus), Some(cell), "{name}/{cells}: {d}");
                assert_eq!(rep.guest_cell, Some(cell));
                assert!(rep.left.is_none());
                let port = &r.controllers[&bus].model;
                assert!(
                    port == "pcie-root-port" || (mirror && port == "pcie-switch-downstream-port"),
                    "{d} on {port}"
                );
            }
            None => {
                assert_eq!(r.hostdev_bus[d], None, "{name}/{cells}: {d} should stay");
                let why = rep.left.as_deref().unwrap();
                assert!(why.contains(&format!("host NUMA node {node}")), "{why}");
            }
        }
    }
    // Mirrored: each GPU shares an upstream port with its PIX NIC; unmirrored: never.
    let mut pairs = 0;
    for w in devs.windows(2) {
        let (g, n) = (w[0], w[1]);
        let (Some(gi), Some(ni)) = (t.gpu_index(g), t.nic_index(n)) else {
            continue;
        };
        if c.gpu_nic(gi, ni).class != topoalign_topology::PcieClass::Pix {
            continue;
        }
        let (Some(gb), Some(nb)) = (r.hostdev_bus[&g], r.hostdev_bus[&n]) else {
            continue;
        };
        pairs += 1;
        let up = |bus: u32| {
            r.chain(bus)
                .get(1)
                .copied()
                .filter(|i| r.controllers[i].model == "pcie-switch-upstream-port")
        };
        if mirror {
            assert!(
                up(gb).is_some() && up(gb) == up(nb),
                "{name}/{cells}: {g} and {n} not under one switch"
            );
            assert_ne!(gb, nb);
        } else {
            assert!(up(gb).is_none() && up(nb).is_none());
        }
    }
    if mirror && out.report.devices.iter().any(|d| d.guest_cell.is_some()) && name != "gb300-4" {
        assert!(pairs > 0, "{name}/{cells}: no mirrored pair checked");
        let pix = out.guest.pairs.iter().filter(|p| p.guest == "PIX").count();
        assert_eq!(pix, pairs, "{name}/{cells}: predicted guest PIX pairs");
    }
    // Nothing but controllers and hostdev addresses changed: every input line is still
    // there, in order.
    let mut rest = out.xml.lines();
    for line in xml.lines() {
        assert!(
            rest.any(|l| l == line),
            "{name}/{cells}: lost line {line:?}"
        );
    }
}

#[test]
fn mi300x_guests_of_1_2_and_8_cells() {
    for cells in [1, 2, 8] {
        for mirror in [false, true] {
            run_case("mi300x-8", cells, mirror);
        }
    }
}

#[test]
fn dgx_h100_guests_of_1_2_and_8_cells() {
    for cells in [1, 2, 8] {
        for mirror in [false, true] {
            run_case("dgx-h100", cells, mirror);
        }
    }
}

#[test]
fn gb300_guests_of_1_2_and_8_cells() {
    for cells in [1, 2, 8] {
        for mirror in [false, true] {
            run_case("gb300-4", cells, mirror);
        }
    }
}

#[test]
fn eight_cells_share_host_nodes_and_only_lowest_cell_gets_devices() {
    let t = profile("mi300x-8");
    let host = HostView::from_topology(&t);
    let devs = gpus_and_pix_nics(&t);
    let out = rewrite(&domain_xml(&t, 8, &devs), &host, Options::default()).unwrap();
    let cells: Vec<Option<u32>> = out.report.devices.iter().map(|d| d.guest_cell).collect();
    assert!(
        cells.iter().all(|c| matches!(c, Some(0) | Some(4))),
        "{cells:?}"
    );
    assert_eq!(out.report.expanders.len(), 2);
    assert_eq!(
        out.report
            .cells
            .iter()
            .filter(|c| c.host_node == Some(1))
            .count(),
        4
    );
}

#[test]
fn one_cell_guest_leaves_the_other_nodes_devices_with_the_reason() {
    let t = profile("mi300x-8");
    let host = HostView::from_topology(&t);
    let devs = gpus_and_pix_nics(&t);
    let out = rewrite(&domain_xml(&t, 1, &devs), &host, Options::default()).unwrap();
    let left: Vec<&str> = out
        .report
        .devices
        .iter()
        .filter_map(|d| d.left.as_deref())
        .collect();
    assert_eq!(left.len(), 8);
    assert!(
        left[0].contains("no guest cell lives on host NUMA node 1 (cell 0 → host node 0)"),
        "{}",
        left[0]
    );
}

#[test]
fn bus_numbers_count_down_from_254_with_room_for_the_switches() {
    let t = profile("mi300x-8");
    let host = HostView::from_topology(&t);
    let devs = gpus_and_pix_nics(&t);
    let out = rewrite(
        &domain_xml(&t, 2, &devs),
        &host,
        Options {
            mirror_switches: true,
            ..Options::default()
        },
    )
    .unwrap();
    // Per cell: 4 GPU+NIC switch units = 4 × (root port + upstream link + 2 downstream) + the expander's own bus = 17.
    let e = &out.report.expanders;
    assert_eq!((e[0].cell, e[0].bus_nr, e[0].last_bus), (0, 238, 254));
    assert_eq!((e[1].cell, e[1].bus_nr, e[1].last_bus), (1, 221, 237));
    let plain = rewrite(&domain_xml(&t, 2, &devs), &host, Options::default()).unwrap();
    let e = &plain.report.expanders;
    assert_eq!((e[0].bus_nr, e[0].last_bus, e[1].bus_nr), (246, 254, 237));
}

#[test]
fn kubevirt_domain_golden_mirrored() {
    let t = profile("mi300x-8");
    let host = HostView::from_topology(&t);
    let xml = include_str!("../fixtures/virt-launcher-mi300x.xml");
    let out = rewrite(
        xml,
        &host,
        Options {
            mirror_switches: true,
            ..Options::default()
        },
    )
    .unwrap();
    read_back(&out.xml).assert_valid();
    assert!(
        out.xml
            .contains("<qemu:env name=\"NCCL_DEBUG\" value=\"INFO\"/>")
    );
    assert!(
        out.xml
            .contains("<!-- Shaped like virt-launcher's rendering")
    );
    insta::assert_snapshot!("virt_launcher_mi300x_mirrored", out.xml);
    let classes: Vec<(String, Option<String>, String)> = out
        .guest
        .pairs
        .iter()
        .map(|p| {
            (
                format!("{} ↔ {}", p.gpu, p.nic),
                p.host.clone(),
                p.guest.clone(),
            )
        })
        .collect();
    insta::assert_debug_snapshot!("virt_launcher_mi300x_pairs", classes);
}

#[test]
fn kubevirt_domain_golden_plain() {
    let t = profile("mi300x-8");
    let host = HostView::from_topology(&t);
    let xml = include_str!("../fixtures/virt-launcher-mi300x.xml");
    let out = rewrite(xml, &host, Options::default()).unwrap();
    insta::assert_snapshot!("virt_launcher_mi300x_plain", out.xml);
}

#[test]
fn dgx_h100_eight_cells_golden() {
    let t = profile("dgx-h100");
    let host = HostView::from_topology(&t);
    let devs = gpus_and_pix_nics(&t);
    let out = rewrite(
        &domain_xml(&t, 8, &devs[..4]),
        &host,
        Options {
            mirror_switches: true,
            ..Options::default()
        },
    )
    .unwrap();
    insta::assert_snapshot!("dgx_h100_8_cells_mirrored", out.xml);
}

#[test]
fn existing_expanders_and_root_ports_are_respected() {
    let t = profile("mi300x-8");
    let host = HostView::from_topology(&t);
    let devs = gpus_and_pix_nics(&t);
    let base = domain_xml(&t, 2, &devs);
    let mut extra = String::new();
    for i in 1..=6 {
        extra.push_str(&format!(
            "    <controller type='pci' index='{i}' model='pcie-root-port'><target chassis='{}' port='0x{:x}'/><address type='pci' domain='0x0000' bus='0x00' slot='0x{:02x}' function='0x0'/></controller>\n",
            i + 10,
            i,
            i + 1
        ));
    }
    extra.push_str("    <controller type='pci' index='7' model='pcie-expander-bus'><target busNr='200'><node>0</node></target><address type='pci' domain='0x0000' bus='0x00' slot='0x10' function='0x0'/></controller>\n");
    let xml = base.replace(
        "model='pcie-root'/>\n",
        &format!("model='pcie-root'/>\n{extra}"),
    );
    let out = rewrite(
        &xml,
        &host,
        Options {
            mirror_switches: true,
            ..Options::default()
        },
    )
    .unwrap();
    let r = read_back(&out.xml);
    r.assert_valid();
    assert!(out.report.expanders.iter().all(|e| e.last_bus < 200));
    assert!(out.report.controllers.iter().all(|c| c.index > 7));
    // New expanders take free pcie.0 slots (2..7 and 0x10 are used).
    let slots: Vec<u8> = out
        .report
        .expanders
        .iter()
        .map(|e| r.controllers[&e.index].slot.unwrap() as u8)
        .collect();
    assert_eq!(slots, vec![8, 9]);
}

fn err(xml: &str, name: &str, mirror: bool) -> String {
    let host = HostView::from_topology(&profile(name));
    rewrite(
        xml,
        &host,
        Options {
            mirror_switches: mirror,
            ..Options::default()
        },
    )
    .unwrap_err()
    .to_string()
}

#[test]
fn refuses_devices_without_numa() {
    let t = profile("mi300x-8");
    let xml = domain_xml(&t, 2, &gpus_and_pix_nics(&t));
    let start = xml.find("  <cpu").unwrap();
    let end = xml.find("</cpu>\n").unwrap() + 7;
    let no_numa = format!("{}{}", &xml[..start], &xml[end..]);
    let e = err(&no_numa, "mi300x-8", false);
    assert!(
        e.starts_with("/domain/cpu/numa is missing: 16 passed-through device(s)"),
        "{e}"
    );
}

#[test]
fn refuses_bad_existing_controllers_naming_them() {
    let t = profile("mi300x-8");
    let xml = domain_xml(&t, 2, &[t.gpu_bdf(0)]);
    let with = |ctl: &str| {
        xml.replace(
            "model='pcie-root'/>\n",
            &format!("model='pcie-root'/>\n    {ctl}\n"),
        )
    };
    let e = err(
        &with(
            "<controller type='pci' index='1' model='pcie-expander-bus'><target busNr='255'><node>0</node></target><address type='pci' bus='0x00' slot='0x05'/></controller>",
        ),
        "mi300x-8",
        false,
    );
    assert!(
        e.contains("/domain/devices/controller[2]: busNr 255") && e.contains("outside 1–254"),
        "{e}"
    );
    let e = err(
        &with(
            "<controller type='pci' index='1' model='pcie-root-port'><target chassis='300' port='0x0'/><address type='pci' bus='0x00' slot='0x05'/></controller>",
        ),
        "mi300x-8",
        false,
    );
    assert!(
        e.contains("chassis=300 is out of range: libvirt accepts 0–255"),
        "{e}"
    );
    let e = err(
        &with(
            "<controller type='pci' index='1' model='pcie-root-port'><target chassis='1' port='0x100'/><address type='pci' bus='0x00' slot='0x05'/></controller>",
        ),
        "mi300x-8",
        false,
    );
    assert!(e.contains("port=256 is out of range"), "{e}");
    let e = err(
        &with(
            "<controller type='pci' index='1' model='pcie-expander-bus'><target busNr='100'><node>0</node></target><address type='pci' bus='0x00' slot='0x05'/></controller>\n    <controller type='pci' index='2' model='pcie-expander-bus'><target busNr='100'><node>1</node></target><address type='pci' bus='0x00' slot='0x06'/></controller>",
        ),
        "mi300x-8",
        false,
    );
    assert!(
        e.contains("busNr 100") && e.contains("is also the busNr of"),
        "{e}"
    );
    let e = err(
        &with(
            "<controller type='pci' index='1' model='pcie-expander-bus'><target busNr='100'><node>5</node></target><address type='pci' bus='0x00' slot='0x05'/></controller>",
        ),
        "mi300x-8",
        false,
    );
    assert!(e.contains("<node>5</node> names no guest cell"), "{e}");
    // An expander squeezed into the buses pcie.0's hierarchy needs.
    let mut many = String::new();
    for i in 1..=4 {
        many.push_str(&format!("<controller type='pci' index='{i}' model='pcie-root-port'><address type='pci' bus='0x00' slot='0x{:02x}'/></controller>\n    ", i + 1));
    }
    many.push_str("<controller type='pci' index='5' model='pcie-expander-bus'><target busNr='3'><node>0</node></target><address type='pci' bus='0x00' slot='0x09'/></controller>");
    let e = err(&with(&many), "mi300x-8", false);
    assert!(
        e.contains("overlaps pcie.0's hierarchy, which may use buses up to 6"),
        "{e}"
    );
}

#[test]
fn refuses_more_devices_than_bus_numbers() {
    // 240 unaddressed virtio disks (each gets a root port on pcie.0 at define time) plus
    // libvirt's implicit USB controller push pcie.0's buses up to 241.
    let t = profile("mi300x-8");
    let xml = domain_xml(&t, 2, &gpus_and_pix_nics(&t));
    let mut disks = String::new();
    for i in 0..240 {
        disks.push_str(&format!("    <disk type='file' device='disk'><source file='/d{i}'/><target dev='vd{i}' bus='virtio'/></disk>\n"));
    }
    let xml = xml.replace("  </devices>", &format!("{disks}  </devices>"));
    let e = err(&xml, "mi300x-8", true);
    assert!(e.starts_with("not enough PCI bus numbers: the expanders need 34 buses below 255 but pcie.0's hierarchy may use buses up to 241"), "{e}");
}

#[test]
fn refuses_more_than_32_root_ports_on_one_expander() {
    let t = profile("mi300x-8");
    // 33 distinct functions on node 0: the GPU and NIC PFs and VFs.
    let c = t.classifier();
    let node0: Vec<Bdf> = t
        .pci
        .iter()
        .enumerate()
        .filter(|(i, d)| {
            d.kind == topoalign_topology::PciKind::Endpoint && c.numa_of(*i) == Some(0)
        })
        .map(|(_, d)| d.bdf)
        .collect();
    assert!(node0.len() >= 24, "{}", node0.len());
    let mut devs = node0.clone();
    // Duplicate hostdevs of the same function are still separate devices for layout.
    while devs.len() < 33 {
        devs.push(node0[devs.len() % node0.len()]);
    }
    let e = err(&domain_xml(&t, 2, &devs), "mi300x-8", false);
    assert!(
        e.contains(
            "pcie-expander-bus for guest cell 0: 33 root ports do not fit; a PCIe bus has 32 slots"
        ),
        "{e}"
    );
}

#[test]
fn unknown_devices_and_unpinned_cells_are_reported_not_moved() {
    let t = profile("mi300x-8");
    let host = HostView::from_topology(&t);
    let nvme = Bdf::new(0, 0x99, 0, 0);
    let xml = domain_xml(&t, 2, &[t.gpu_bdf(0), nvme]);
    let out = rewrite(&xml, &host, Options::default()).unwrap();
    let why = out.report.devices[1].left.as_deref().unwrap();
    assert!(why.contains("not in the host topology `mi300x-8`"), "{why}");
    let unpinned = xml.replace("<vcpupin vcpu='0' cpuset='0'/>", "");
    let out = rewrite(&unpinned, &host, Options::default()).unwrap();
    assert!(
        out.report.cells[0]
            .evidence
            .contains("vCPU(s) 0 are not pinned"),
        "{}",
        out.report.cells[0].evidence
    );
    assert!(out.report.devices[0].left.is_some());
    // A cell pinned across both host nodes maps to neither.
    let mixed = xml.replace(
        "<vcpupin vcpu='0' cpuset='0'/>",
        "<vcpupin vcpu='0' cpuset='0,56'/>",
    );
    let out = rewrite(&mixed, &host, Options::default()).unwrap();
    assert!(
        out.report.cells[0]
            .evidence
            .contains("across host nodes 0,1"),
        "{}",
        out.report.cells[0].evidence
    );
}

#[test]
fn capabilities_replace_the_cpu_map() {
    let t = profile("mi300x-8");
    let caps = "<capabilities><host><topology><cells num='2'>\
        <cell id='0'><cpus num='2'><cpu id='0'/><cpu id='1'/></cpus></cell>\
        <cell id='1'><cpus num='2'><cpu id='2'/><cpu id='3'/></cpus></cell></cells></topology></host></capabilities>";
    let host = HostView::from_topology(&t).with_capabilities(caps).unwrap();
    let xml = domain_xml(&t, 2, &[t.gpu_bdf(0)]);
    // domain_xml pins cell 1 to mi300x node-1 CPUs 56,57, which these capabilities do not have.
    let out = rewrite(&xml, &host, Options::default()).unwrap();
    assert_eq!(out.report.cells[0].host_node, Some(0));
    assert!(
        out.report.cells[1]
            .evidence
            .contains("which no host node has"),
        "{}",
        out.report.cells[1].evidence
    );
}

#[test]
fn a_domain_without_passthrough_is_returned_unchanged() {
    let t = profile("mi300x-8");
    let xml = domain_xml(&t, 2, &[]);
    let out = rewrite(&xml, &HostView::from_topology(&t), Options::default()).unwrap();
    assert_eq!(out.xml, xml);
    assert!(matches!(
        rewrite(
            "<domain><devices>",
            &HostView::default(),
            Options::default()
        ),
        Err(VmError::Xml { .. })
    ));
}

/// An 8-node host (as an MI300X in NPS4 across two sockets shows itself): per node one
/// host bridge, one switch, one GPU and one NIC behind it.
fn eight_node_host() -> Topology {
    use topoalign_topology::pci::{class, vendor};
    use topoalign_topology::{CpuSet, Gpu, GpuVendor, Nic, PciKind, TopologyBuilder};
    let mut b = TopologyBuilder::new("eight-node");
    for n in 0..8u32 {
        let dist = (0..8).map(|m| if m == n { 10 } else { 12 }).collect();
        b.numa_node(
            n,
            CpuSet::range(n * 16, n * 16 + 15),
            None,
            dist,
            Some(n / 4),
        );
    }
    for n in 0..8u8 {
        let base = 0x10 + n * 0x10;
        let hb = b.host_bridge(0, base);
        let rp = b.bridge(
            hb,
            Bdf::new(0, base, 1, 0),
            PciKind::RootPort,
            Some(u32::from(n)),
            (base + 1, base + 4),
            None,
        );
        let up = b.bridge(
            rp,
            Bdf::new(0, base + 1, 0, 0),
            PciKind::SwitchUpstream,
            Some(u32::from(n)),
            (base + 2, base + 4),
            None,
        );
        let d0 = b.bridge(
            up,
            Bdf::new(0, base + 2, 0, 0),
            PciKind::SwitchDownstream,
            Some(u32::from(n)),
            (base + 3, base + 3),
            None,
        );
        let d1 = b.bridge(
            up,
            Bdf::new(0, base + 2, 1, 0),
            PciKind::SwitchDownstream,
            Some(u32::from(n)),
            (base + 4, base + 4),
            None,
        );
        let g = b.endpoint(
            d0,
            Bdf::new(0, base + 3, 0, 0),
            vendor::AMD,
            0x74a1,
            class::PROCESSING_ACCEL,
            Some(u32::from(n)),
            None,
        );
        b.gpu(Gpu::on(g, GpuVendor::Amd));
        let nic = b.endpoint(
            d1,
            Bdf::new(0, base + 4, 0, 0),
            vendor::MELLANOX,
            0x1021,
            class::ETHERNET,
            Some(u32::from(n)),
            None,
        );
        b.nic(Nic::on(nic));
    }
    b.build().unwrap()
}

#[test]
fn eight_cell_guest_on_an_eight_node_host_gets_eight_expanders() {
    let t = eight_node_host();
    let host = HostView::from_topology(&t);
    let devs = gpus_and_pix_nics(&t);
    assert_eq!(devs.len(), 16);
    let out = rewrite(
        &domain_xml(&t, 8, &devs),
        &host,
        Options {
            mirror_switches: true,
            ..Options::default()
        },
    )
    .unwrap();
    let r = read_back(&out.xml);
    r.assert_valid();
    assert_eq!(out.report.expanders.len(), 8);
    for (i, d) in devs.iter().enumerate() {
        let cell = (i / 2) as u32;
        assert_eq!(r.cell_of(r.hostdev_bus[d].unwrap()), Some(cell), "{d}");
    }
    let pix = out.guest.pairs.iter().filter(|p| p.guest == "PIX").count();
    let node = out.guest.pairs.iter().filter(|p| p.guest == "NODE").count();
    assert_eq!((pix, node, out.guest.pairs.len()), (8, 0, 64));
    // Guest classes equal host classes pair by pair.
    assert!(
        out.guest
            .pairs
            .iter()
            .all(|p| p.host.as_deref() == Some(p.guest.as_str()))
    );
    // Eight ranges of 5 buses each (expander, root port, upstream link, 2 downstream), down from 254.
    let ranges: Vec<(u32, u32)> = out
        .report
        .expanders
        .iter()
        .map(|e| (e.bus_nr, e.last_bus))
        .collect();
    assert_eq!(ranges[0], (250, 254));
    assert_eq!(ranges[7], (215, 219));
}

#[test]
fn mirroring_switches_and_host_bridges_keeps_every_pair_class() {
    for name in ["mi300x-8", "dgx-h100", "gb300-4"] {
        let t = profile(name);
        let host = HostView::from_topology(&t);
        let mut devs: Vec<Bdf> = (0..t.gpus.len()).map(|g| t.gpu_bdf(g)).collect();
        devs.extend(
            (0..t.nics.len())
                .filter(|&n| !t.nics[n].is_vf())
                .map(|n| t.nic_bdf(n)),
        );
        let opts = Options {
            mirror_switches: true,
            mirror_host_bridges: true,
        };
        let out = rewrite(&domain_xml(&t, 2, &devs), &host, opts).unwrap();
        read_back(&out.xml).assert_valid();
        assert!(!out.guest.pairs.is_empty(), "{name}");
        for p in &out.guest.pairs {
            assert_eq!(
                p.host.as_deref(),
                Some(p.guest.as_str()),
                "{name}: {} ↔ {}",
                p.gpu,
                p.nic
            );
        }
        let roots: std::collections::BTreeSet<String> = devs
            .iter()
            .filter_map(|d| t.pcie_root(t.pci_index(*d).unwrap()))
            .collect();
        assert_eq!(out.report.expanders.len(), roots.len(), "{name}");
    }
}
