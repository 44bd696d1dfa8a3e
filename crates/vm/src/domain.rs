//! Reading a libvirt domain XML (as virt-launcher or `virsh dumpxml` renders it) into the
//! facts the rewrite needs: guest NUMA cells, vCPU pinning, PCI controllers, the PCI
//! addresses in use and the passed-through devices with their byte positions.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use roxmltree::Node;
use serde::Serialize;
use topoalign_topology::{Bdf, CpuSet};

use crate::error::VmError;
use crate::xml::{
    attr_number, child, children, indent_before, parse, parse_cpuset, path_of, required_number,
};

/// A guest PCI address (`<address type='pci' domain bus slot function>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PciAddress {
    /// PCI domain.
    pub domain: u16,
    /// The bus: the `index` of the controller the device plugs into.
    pub bus: u8,
    /// Slot 0..=31.
    pub slot: u8,
    /// Function 0..=7.
    pub function: u8,
}

impl PciAddress {
    /// Reads a `<address>` element; `None` when it is not of type `pci` (or untyped in a
    /// `<source>`, which is always PCI for a PCI hostdev).
    pub fn read(node: Node<'_, '_>, untyped_is_pci: bool) -> Result<Option<PciAddress>, VmError> {
        match node.attribute("type") {
            Some("pci") => {}
            None if untyped_is_pci => {}
            _ => return Ok(None),
        }
        Ok(Some(PciAddress {
            domain: attr_number(node, "domain", 0xffff)?.unwrap_or(0) as u16,
            bus: required_number(node, "bus", 0xff)? as u8,
            slot: required_number(node, "slot", 0x1f)? as u8,
            function: attr_number(node, "function", 7)?.unwrap_or(0) as u8,
        }))
    }

    /// The element libvirt reads back.
    pub fn to_xml(self) -> String {
        format!(
            "<address type='pci' domain='0x{:04x}' bus='0x{:02x}' slot='0x{:02x}' function='0x{:x}'/>",
            self.domain, self.bus, self.slot, self.function
        )
    }
}

/// One guest NUMA cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestCell {
    /// The cell id.
    pub id: u32,
    /// The vCPUs in it.
    pub vcpus: CpuSet,
}

/// One `<controller type='pci'>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    /// Its location, for messages.
    pub path: String,
    /// `index`.
    pub index: u32,
    /// `model` (`pcie-root`, `pcie-root-port`, `pcie-expander-bus`, …).
    pub model: String,
    /// `<target busNr>` of an expander.
    pub bus_nr: Option<u32>,
    /// `<target><node>` of an expander.
    pub node: Option<u32>,
    /// `<target chassis>`.
    pub chassis: Option<u32>,
    /// `<target port>`.
    pub port: Option<u32>,
    /// Where it plugs in.
    pub address: Option<PciAddress>,
}

impl Controller {
    /// Whether this model opens a new bus number below it (everything but the roots).
    pub fn makes_bus(&self) -> bool {
        !matches!(self.model.as_str(), "pcie-root" | "pci-root")
    }

    /// Whether this is an expander (its own root bus with a `busNr`).
    pub fn is_expander(&self) -> bool {
        matches!(
            self.model.as_str(),
            "pcie-expander-bus" | "pci-expander-bus"
        )
    }

    /// Whether its `<target>` carries chassis/port (a slot a device plugs into).
    pub fn has_chassis(&self) -> bool {
        matches!(
            self.model.as_str(),
            "pcie-root-port" | "pcie-switch-downstream-port" | "pci-bridge"
        )
    }
}

/// Which element passes the device through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PassthroughKind {
    /// `<hostdev mode='subsystem' type='pci'>`.
    Hostdev,
    /// `<interface type='hostdev'>` (an SR-IOV VF given as a network interface).
    Interface,
}

/// One passed-through host PCI function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passthrough {
    /// Its location, for messages.
    pub path: String,
    /// Which element.
    pub kind: PassthroughKind,
    /// The host address (`<source><address>`).
    pub source: Bdf,
    /// `<alias name>` (KubeVirt names them `ua-gpu-…`, `ua-hostdevice-…`, `ua-sriov-…`).
    pub alias: Option<String>,
    /// The guest address it has now, if any.
    pub guest_address: Option<PciAddress>,
    /// Byte range of the whole element.
    pub range: Range<usize>,
    /// Byte range of its direct `<address>` child, if any.
    pub address_range: Option<Range<usize>>,
    /// Byte offset of its closing tag (where a new `<address>` goes).
    pub close_tag: usize,
    /// Indentation of its children.
    pub child_indent: String,
}

/// What the rewrite needs to know about a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    /// `<domain type>` (`kvm`, `qemu`).
    pub domain_type: String,
    /// `<cpu><numa>` present.
    pub has_numa: bool,
    /// Guest cells in document order.
    pub cells: Vec<GuestCell>,
    /// Number of vCPUs (`<vcpu>` text).
    pub vcpus: u32,
    /// `<cputune><vcpupin>`: vCPU → host CPUs.
    pub vcpupin: BTreeMap<u32, CpuSet>,
    /// `<vcpu cpuset>`: host CPUs for vCPUs without a `vcpupin`.
    pub default_cpuset: Option<CpuSet>,
    /// `<numatune><memnode cellid nodeset>`: guest cell → host nodes.
    pub memnodes: BTreeMap<u32, CpuSet>,
    /// PCI controllers in document order.
    pub controllers: Vec<Controller>,
    /// Passed-through PCI functions in document order.
    pub passthrough: Vec<Passthrough>,
    /// Every guest PCI address in use by a device or controller.
    pub used_addresses: BTreeSet<PciAddress>,
    /// Devices that libvirt will give a PCI address (and on q35 a root port) at define
    /// time: they may take bus numbers in pcie.0's hierarchy.
    pub unaddressed_pci_devices: Vec<String>,
    /// Byte offset after the last `<controller>` (or of `</devices>` when there is none).
    pub controller_insert_at: usize,
    /// Indentation for new controllers.
    pub controller_indent: String,
    /// Whether the insertion point needs a leading newline.
    pub insert_after_element: bool,
}

/// Device elements that become PCI functions when they have no address (q35 guests).
fn pci_when_unaddressed(n: Node<'_, '_>) -> bool {
    let name = n.tag_name().name();
    let t = n.attribute("type").unwrap_or("");
    let model = child(n, "model").and_then(|m| m.attribute("type").or(m.attribute("model")));
    match name {
        "interface" => t != "hostdev",
        "disk" => child(n, "target").and_then(|t| t.attribute("bus")) == Some("virtio"),
        "controller" => {
            matches!(t, "usb" | "scsi" | "virtio-serial") && n.attribute("model") != Some("none")
        }
        "video" => model != Some("none"),
        "memballoon" => n.attribute("model").is_some_and(|m| m != "none"),
        "rng" | "filesystem" | "vsock" | "watchdog" => true,
        "input" => n.attribute("bus") == Some("virtio"),
        "hostdev" => t == "pci",
        _ => false,
    }
}

impl Domain {
    /// Reads a domain XML.
    pub fn parse(text: &str) -> Result<Domain, VmError> {
        let doc = parse("the domain XML", text)?;
        let root = doc.root_element();
        if root.tag_name().name() != "domain" {
            return Err(VmError::WrongRoot {
                what: "the domain XML",
                found: root.tag_name().name().to_string(),
                expected: "domain",
            });
        }
        let domain_type = root.attribute("type").unwrap_or("").to_string();
        let vcpus = match child(root, "vcpu") {
            Some(v) => {
                let t = v.text().unwrap_or("").trim();
                t.parse::<u32>().map_err(|_| VmError::BadValue {
                    element: path_of(v),
                    attribute: "text",
                    value: t.to_string(),
                    expected: "a vCPU count".into(),
                })?
            }
            None => 1,
        };
        let default_cpuset =
            match child(root, "vcpu").and_then(|v| v.attribute("cpuset").map(|c| (v, c))) {
                Some((v, c)) => Some(parse_cpuset(v, "cpuset", c)?),
                None => None,
            };

        let (has_numa, cells) = read_cells(root)?;
        let mut vcpupin = BTreeMap::new();
        if let Some(ct) = child(root, "cputune") {
            for p in children(ct, "vcpupin") {
                let v = required_number(p, "vcpu", u64::from(u32::MAX))? as u32;
                let set = p.attribute("cpuset").ok_or_else(|| VmError::Missing {
                    element: path_of(p),
                    missing: "cpuset",
                })?;
                vcpupin.insert(v, parse_cpuset(p, "cpuset", set)?);
            }
        }
        let mut memnodes = BTreeMap::new();
        if let Some(nt) = child(root, "numatune") {
            for m in children(nt, "memnode") {
                let cell = required_number(m, "cellid", u64::from(u32::MAX))? as u32;
                if let Some(ns) = m.attribute("nodeset") {
                    memnodes.insert(cell, parse_cpuset(m, "nodeset", ns)?);
                }
            }
        }

        let devices = child(root, "devices").ok_or_else(|| VmError::Missing {
            element: "/domain".into(),
            missing: "<devices>",
        })?;
        let mut controllers = Vec::new();
        let mut passthrough = Vec::new();
        let mut used_addresses = BTreeSet::new();
        let mut unaddressed = Vec::new();
        let mut last_controller: Option<Node<'_, '_>> = None;
        for dev in devices.children().filter(|c| c.is_element()) {
            let addr_node = child(dev, "address");
            let addr = match addr_node {
                Some(a) => PciAddress::read(a, false)?,
                None => None,
            };
            if let Some(a) = addr {
                used_addresses.insert(a);
            } else if addr_node.is_none() && pci_when_unaddressed(dev) {
                unaddressed.push(path_of(dev));
            }
            let name = dev.tag_name().name();
            if name == "controller" {
                last_controller = Some(dev);
                if dev.attribute("type") == Some("pci") {
                    controllers.push(read_controller(dev, addr)?);
                }
            }
            let is_pci_hostdev = name == "hostdev"
                && dev.attribute("type") == Some("pci")
                && dev.attribute("mode").unwrap_or("subsystem") == "subsystem";
            let is_hostdev_iface = name == "interface" && dev.attribute("type") == Some("hostdev");
            if (is_pci_hostdev || is_hostdev_iface)
                && let Some(p) = read_passthrough(text, dev, is_hostdev_iface, addr, addr_node)?
            {
                passthrough.push(p);
            }
        }
        // Without any <controller type='usb'>, libvirt adds a qemu-xhci one on q35, which
        // takes a root port of its own.
        if !devices
            .children()
            .any(|c| c.has_tag_name("controller") && c.attribute("type") == Some("usb"))
        {
            unaddressed.push("/domain/devices/controller[@type='usb'] (implicit)".into());
        }
        let (controller_insert_at, controller_indent, insert_after_element) = match last_controller
        {
            Some(c) => (c.range().end, indent_before(text, c.range().start), true),
            None => {
                let close = devices_close_tag(text, devices);
                let first_child_indent = devices
                    .children()
                    .find(|c| c.is_element())
                    .map(|c| indent_before(text, c.range().start))
                    .unwrap_or_else(|| format!("{}  ", indent_before(text, devices.range().start)));
                (close, first_child_indent, false)
            }
        };
        Ok(Domain {
            domain_type,
            has_numa,
            cells,
            vcpus,
            vcpupin,
            default_cpuset,
            memnodes,
            controllers,
            passthrough,
            used_addresses,
            unaddressed_pci_devices: unaddressed,
            controller_insert_at,
            controller_indent,
            insert_after_element,
        })
    }

    /// The host CPUs vCPU `v` is pinned to, if it is pinned.
    pub fn pin_of(&self, v: u32) -> Option<&CpuSet> {
        self.vcpupin.get(&v).or(self.default_cpuset.as_ref())
    }

    /// The controller with this index.
    pub fn controller(&self, index: u32) -> Option<&Controller> {
        self.controllers.iter().find(|c| c.index == index)
    }
}

/// The byte offset of an element's closing tag (`</name>`), or of its end when it is
/// self-closing.
fn devices_close_tag(text: &str, node: Node<'_, '_>) -> usize {
    let r = node.range();
    let slice = &text[r.clone()];
    if slice.ends_with("/>") {
        return r.end;
    }
    slice.rfind("</").map_or(r.end, |i| r.start + i)
}

fn read_cells(root: Node<'_, '_>) -> Result<(bool, Vec<GuestCell>), VmError> {
    let Some(numa) = child(root, "cpu").and_then(|c| child(c, "numa")) else {
        return Ok((false, Vec::new()));
    };
    let mut cells: Vec<GuestCell> = Vec::new();
    for (pos, c) in children(numa, "cell").enumerate() {
        let id = attr_number(c, "id", u64::from(u32::MAX))?.map_or(pos as u32, |v| v as u32);
        let vcpus = match c.attribute("cpus") {
            Some(s) => parse_cpuset(c, "cpus", s)?,
            None => CpuSet::new(),
        };
        if cells.iter().any(|o| o.id == id) {
            return Err(VmError::BadCell {
                cell: id,
                detail: "the cell id is declared twice".into(),
            });
        }
        for o in &cells {
            let both = o.vcpus.intersection(&vcpus);
            if !both.is_empty() {
                return Err(VmError::BadCell {
                    cell: id,
                    detail: format!("vCPUs {both} are also in cell {}", o.id),
                });
            }
        }
        cells.push(GuestCell { id, vcpus });
    }
    Ok((true, cells))
}

fn read_controller(dev: Node<'_, '_>, address: Option<PciAddress>) -> Result<Controller, VmError> {
    let path = path_of(dev);
    let index = required_number(dev, "index", u64::from(u32::MAX))? as u32;
    let model = dev.attribute("model").unwrap_or("").to_string();
    let mut c = Controller {
        path,
        index,
        model,
        bus_nr: None,
        node: None,
        chassis: None,
        port: None,
        address,
    };
    if let Some(t) = child(dev, "target") {
        c.bus_nr = attr_number(t, "busNr", u64::from(u32::MAX))?.map(|v| v as u32);
        c.chassis = attr_number(t, "chassis", u64::from(u32::MAX))?.map(|v| v as u32);
        c.port = attr_number(t, "port", u64::from(u32::MAX))?.map(|v| v as u32);
        if let Some(n) = child(t, "node") {
            let txt = n.text().unwrap_or("").trim();
            c.node = Some(txt.parse().map_err(|_| VmError::BadValue {
                element: path_of(n),
                attribute: "text",
                value: txt.to_string(),
                expected: "a guest NUMA cell id".into(),
            })?);
        }
    }
    Ok(c)
}

fn read_passthrough(
    text: &str,
    dev: Node<'_, '_>,
    interface: bool,
    guest_address: Option<PciAddress>,
    addr_node: Option<Node<'_, '_>>,
) -> Result<Option<Passthrough>, VmError> {
    let path = path_of(dev);
    let src = child(dev, "source").ok_or_else(|| VmError::Missing {
        element: path.clone(),
        missing: "<source>",
    })?;
    let Some(a) = child(src, "address") else {
        return Err(VmError::Missing {
            element: path_of(src),
            missing: "<address> (the host PCI address)",
        });
    };
    let Some(pa) = PciAddress::read(a, true)? else {
        return Ok(None);
    };
    let close_tag = devices_close_tag(text, dev);
    let child_indent = dev
        .children()
        .find(|c| c.is_element())
        .map(|c| indent_before(text, c.range().start))
        .unwrap_or_default();
    Ok(Some(Passthrough {
        path,
        kind: if interface {
            PassthroughKind::Interface
        } else {
            PassthroughKind::Hostdev
        },
        source: Bdf::new(pa.domain, pa.bus, pa.slot, pa.function),
        alias: child(dev, "alias")
            .and_then(|a| a.attribute("name"))
            .map(str::to_string),
        guest_address,
        range: dev.range(),
        address_range: addr_node.map(|n| n.range()),
        close_tag,
        child_indent,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <vcpu placement='static'>4</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='1'/>
    <vcpupin vcpu='1' cpuset='2'/>
  </cputune>
  <cpu><numa>
    <cell id='0' cpus='0-1' memory='1' unit='GiB'/>
    <cell id='1' cpus='2-3' memory='1' unit='GiB'/>
  </numa></cpu>
  <devices>
    <controller type='pci' index='0' model='pcie-root'/>
    <interface type='bridge'><source bridge='br0'/></interface>
    <hostdev mode='subsystem' type='pci' managed='no'>
      <source><address domain='0x0000' bus='0x27' slot='0x00' function='0x0'/></source>
      <alias name='ua-gpu-gpu1'/>
    </hostdev>
  </devices>
</domain>"#;

    #[test]
    fn reads_cells_pins_controllers_and_hostdevs() {
        let d = Domain::parse(SMALL).unwrap();
        assert_eq!(d.vcpus, 4);
        assert_eq!(d.cells.len(), 2);
        assert_eq!(d.cells[1].vcpus.to_string(), "2-3");
        assert_eq!(d.pin_of(1).unwrap().to_string(), "2");
        assert!(d.pin_of(2).is_none());
        assert_eq!(d.controllers.len(), 1);
        assert_eq!(d.passthrough.len(), 1);
        let p = &d.passthrough[0];
        assert_eq!(p.source.to_string(), "0000:27:00.0");
        assert_eq!(p.alias.as_deref(), Some("ua-gpu-gpu1"));
        assert_eq!(&SMALL[p.close_tag..p.close_tag + 10], "</hostdev>");
        assert_eq!(p.child_indent, "      ");
        assert_eq!(
            d.unaddressed_pci_devices,
            vec![
                "/domain/devices/interface".to_string(),
                "/domain/devices/hostdev".to_string(),
                "/domain/devices/controller[@type='usb'] (implicit)".to_string()
            ]
        );
        assert_eq!(d.controller_indent, "    ");
    }

    #[test]
    fn bad_inputs_name_the_element() {
        let e = Domain::parse("<domain><devices><hostdev mode='subsystem' type='pci'><source/></hostdev></devices></domain>")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/domain/devices/hostdev/source: missing <address>"),
            "{e}"
        );
        let e =
            Domain::parse("<domain><devices><controller type='pci' index='x'/></devices></domain>")
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("/domain/devices/controller: index=`x` is invalid"),
            "{e}"
        );
        let e = Domain::parse("<domain><cpu><numa><cell id='0' cpus='0-1'/><cell id='1' cpus='1'/></numa></cpu><devices/></domain>")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cell[@id='1']: vCPUs 1 are also in cell 0"),
            "{e}"
        );
        let e = Domain::parse("<vm/>").unwrap_err().to_string();
        assert!(e.contains("root element is <vm>"), "{e}");
        let e = Domain::parse("<domain><devices>").unwrap_err().to_string();
        assert!(e.contains("not well-formed"), "{e}");
        let e = Domain::parse("<domain><devices><hostdev type='pci'><source><address bus='0x100' slot='0'/></source></hostdev></devices></domain>")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bus=`0x100` is invalid: expected a number from 0 to 255"),
            "{e}"
        );
    }
}
