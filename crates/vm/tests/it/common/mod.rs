//! Shared test helpers: guest domains generated for a host profile, and the invariants
//! every rewritten domain must satisfy, read back with roxmltree independently of the
//! crate's own parser.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use topoalign_topology::{Bdf, Topology};

/// A profile by name.
pub(crate) fn profile(name: &str) -> Topology {
    topoalign_profiles::get(name).unwrap()
}

/// A virt-launcher-like domain with `cells` guest cells spread evenly over the host's
/// NUMA nodes (cell c on node `c * nodes / cells`), two vCPUs per cell pinned to distinct
/// host CPUs of that node, and one hostdev per address in `devices`.
pub(crate) fn domain_xml(t: &Topology, cells: u32, devices: &[Bdf]) -> String {
    let nodes = t.numa.len() as u32;
    let mut cell_xml = String::new();
    let mut pins = String::new();
    let mut used_per_node: BTreeMap<u32, usize> = BTreeMap::new();
    for c in 0..cells {
        let node = &t.numa[(c * nodes / cells) as usize];
        cell_xml.push_str(&format!(
            "      <cell id='{c}' cpus='{}-{}' memory='1' unit='GiB'/>\n",
            2 * c,
            2 * c + 1
        ));
        for k in 0..2 {
            let used = used_per_node.entry(node.id).or_default();
            let cpu = node.cpus.ids()[*used];
            *used += 1;
            pins.push_str(&format!(
                "    <vcpupin vcpu='{}' cpuset='{cpu}'/>\n",
                2 * c + k
            ));
        }
    }
    let mut hostdevs = String::new();
    for (i, b) in devices.iter().enumerate() {
        hostdevs.push_str(&format!(
            "    <hostdev mode='subsystem' type='pci' managed='no'>\n      <source>\n        <address domain='0x{:04x}' bus='0x{:02x}' slot='0x{:02x}' function='0x{:x}'/>\n      </source>\n      <alias name='ua-hostdevice-dev{i}'/>\n    </hostdev>\n",
            b.domain, b.bus, b.device, b.function
        ));
    }
    format!(
        "<domain type='kvm'>\n  <name>t</name>\n  <memory unit='GiB'>{cells}</memory>\n  <vcpu placement='static'>{}</vcpu>\n  <cputune>\n{pins}  </cputune>\n  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n  </os>\n  <cpu mode='host-passthrough'>\n    <numa>\n{cell_xml}    </numa>\n  </cpu>\n  <devices>\n    <controller type='pci' index='0' model='pcie-root'/>\n{hostdevs}  </devices>\n</domain>\n",
        2 * cells
    )
}

/// Every GPU and, for each, the NIC PF it is PIX with (if any).
pub(crate) fn gpus_and_pix_nics(t: &Topology) -> Vec<Bdf> {
    let c = t.classifier();
    let mut out = Vec::new();
    for g in 0..t.gpus.len() {
        out.push(t.gpu_bdf(g));
        if let Some(n) = (0..t.nics.len()).find(|&n| {
            !t.nics[n].is_vf() && c.gpu_nic(g, n).class == topoalign_topology::PcieClass::Pix
        }) {
            out.push(t.nic_bdf(n));
        }
    }
    out
}

/// What a rewritten domain looks like, read back independently.
#[derive(Debug, Default)]
pub(crate) struct Readback {
    /// index → (model, parent bus index, busNr, node, chassis, port).
    pub controllers: BTreeMap<u32, Ctl>,
    /// host address → guest address bus (the controller index).
    pub hostdev_bus: BTreeMap<Bdf, Option<u32>>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Ctl {
    pub model: String,
    pub parent: Option<u32>,
    pub slot: Option<u32>,
    pub bus_nr: Option<u32>,
    pub node: Option<u32>,
    pub chassis: Option<u32>,
    pub port: Option<u32>,
}

fn num(s: Option<&str>) -> Option<u32> {
    let s = s?;
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Reads controllers and hostdev placements.
pub(crate) fn read_back(xml: &str) -> Readback {
    let doc = roxmltree::Document::parse(xml).unwrap();
    let mut r = Readback::default();
    let devices = doc
        .descendants()
        .find(|n| n.has_tag_name("devices"))
        .unwrap();
    for d in devices.children().filter(|n| n.is_element()) {
        let addr = d.children().find(|c| c.has_tag_name("address"));
        if d.has_tag_name("controller") && d.attribute("type") == Some("pci") {
            let target = d.children().find(|c| c.has_tag_name("target"));
            let index = num(d.attribute("index")).unwrap();
            let ctl = Ctl {
                model: d.attribute("model").unwrap_or("").to_string(),
                parent: addr.and_then(|a| num(a.attribute("bus"))),
                slot: addr.and_then(|a| num(a.attribute("slot"))),
                bus_nr: target.and_then(|t| num(t.attribute("busNr"))),
                node: target
                    .and_then(|t| t.children().find(|c| c.has_tag_name("node")))
                    .and_then(|n| n.text())
                    .and_then(|t| t.parse().ok()),
                chassis: target.and_then(|t| num(t.attribute("chassis"))),
                port: target.and_then(|t| num(t.attribute("port"))),
            };
            assert!(
                r.controllers.insert(index, ctl).is_none(),
                "duplicate controller index {index}"
            );
        }
        if d.has_tag_name("hostdev") {
            let src = d
                .children()
                .find(|c| c.has_tag_name("source"))
                .and_then(|s| s.children().find(|c| c.has_tag_name("address")))
                .unwrap();
            let b = Bdf::new(
                num(src.attribute("domain")).unwrap_or(0) as u16,
                num(src.attribute("bus")).unwrap() as u8,
                num(src.attribute("slot")).unwrap() as u8,
                num(src.attribute("function")).unwrap_or(0) as u8,
            );
            r.hostdev_bus
                .insert(b, addr.and_then(|a| num(a.attribute("bus"))));
        }
    }
    r
}

impl Readback {
    /// The chain of controller indexes above a device on bus `bus`, nearest first.
    pub(crate) fn chain(&self, bus: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cur = Some(bus);
        while let Some(c) = cur {
            if c == 0 || out.contains(&c) {
                break;
            }
            out.push(c);
            cur = self.controllers.get(&c).and_then(|x| x.parent);
        }
        out
    }

    /// The guest cell of the expander above a device on bus `bus`.
    pub(crate) fn cell_of(&self, bus: u32) -> Option<u32> {
        self.chain(bus)
            .iter()
            .filter_map(|i| self.controllers.get(i))
            .find(|c| c.model == "pcie-expander-bus")
            .and_then(|c| c.node)
    }

    /// Asserts the rules libvirt and QEMU enforce: bus ranges within 1–254 and disjoint
    /// (each range from its busNr up to the next one's, holding the bridges below it),
    /// unique chassis, chassis/port ≤ 255, unique (bus, slot), parents below children.
    pub(crate) fn assert_valid(&self) {
        let mut starts: Vec<(u32, u32)> = self
            .controllers
            .iter()
            .filter(|(_, c)| c.model == "pcie-expander-bus")
            .map(|(i, c)| (c.bus_nr.unwrap(), *i))
            .collect();
        starts.sort();
        for (k, (b, idx)) in starts.iter().enumerate() {
            assert!((1..=254).contains(b), "busNr {b}");
            let end = starts.get(k + 1).map_or(255, |(n, _)| n - 1);
            let below = self
                .controllers
                .keys()
                .filter(|i| **i != *idx && self.chain(**i).contains(idx))
                .count() as u32;
            assert!(
                b + below <= end,
                "expander {idx} busNr {b} + {below} bridges overruns {end}"
            );
        }
        let mut chassis = BTreeSet::new();
        let mut slots = BTreeSet::new();
        for (i, c) in &self.controllers {
            if let Some(p) = c.parent {
                assert!(p < *i, "controller {i} plugs into {p}");
                assert!(
                    p == 0 || self.controllers.contains_key(&p),
                    "controller {i} parent {p} missing"
                );
                assert!(
                    slots.insert((p, c.slot)),
                    "two controllers at bus {p} slot {:?}",
                    c.slot
                );
            }
            if matches!(
                c.model.as_str(),
                "pcie-root-port" | "pcie-switch-downstream-port"
            ) {
                let ch = c.chassis.unwrap_or(*i);
                assert!(ch <= 255 && c.port.unwrap_or(0) <= 255);
                assert!(chassis.insert(ch), "duplicate chassis {ch}");
            }
        }
    }
}
