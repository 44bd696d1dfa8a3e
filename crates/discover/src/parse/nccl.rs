//! NCCL topology XML (`NCCL_TOPO_FILE`, `NCCL_TOPO_DUMP_FILE`).
//!
//! Shape (NVIDIA/nccl src/graph/xml.cc, topo.cc): `<system version=…>` holding one
//! `<cpu numaid=… affinity=… arch=… vendor=…>` per NUMA node; under it nested
//! `<pci busid=… class=… vendor=… device=… link_speed=… link_width=…>` elements, where a
//! bridge (`0x0604xx`) is a PCIe switch (NCCL walks sysfs two levels at a time, so it
//! records switch upstream ports and skips downstream ports and root ports) and the
//! leaves are GPUs (`0x03xxxx`, child `<gpu dev=… sm=… rank=… gdr=…>` with
//! `<nvlink target=… count=… tclass=…/>` and, on Grace, `<c2c …/>`), NICs (`0x02xxxx`,
//! child `<nic>` with `<net name=… dev=… speed=… port=… gdr=…/>`) or NVSwitches
//! (`0x068000`). A `<nic>` directly under `<cpu>` has no PCI location.
//!
//! Mapping to the model:
//! - each `<cpu>` is a NUMA node (cpus from the `affinity` hex mask; same `numaid` twice
//!   merges);
//! - each top-level `<pci>` under a `<cpu>` hangs on its own synthetic host bridge and root
//!   port (NCCL's CPU root): on current servers every x16 slot or switch has its own root
//!   complex, which is why nvidia-smi shows `NODE` between them; NCCL itself has no NODE
//!   level;
//! - a bridge `<pci>` is a switch upstream port at its real address, and a synthetic
//!   downstream port is inserted above each of its children, so devices below one switch
//!   are `PIX` and devices below two nested switches are `PXB`;
//! - NVLink: a target that is a GPU gives a direct link (the larger of the two directions'
//!   counts); targets that are NVSwitches (`tclass`/class `0x068000`) mean "through
//!   NVSwitch": every pair of GPUs that both reach NVSwitches gets the smaller of their
//!   NVSwitch link totals, as nvidia-smi shows NV18 on a DGX H100. NCCL writes an NVSwitch
//!   it cannot see (VM guests, GB200/GB300 NVL72 trays) as the placeholder target
//!   `fffffff:ff:ff.0` (newer NCCL: `fffffff:ffff:ff`): that too is "an NVSwitch";
//! - xGMI: RCCL's `<xgmi target=… count=…>` between AMD GPUs (MI300X, and the two GCDs of
//!   an MI250X, joined by 4 links) gives an xGMI link, counted like a direct NVLink;
//! - a GPU given as a bare `<pci class="0x03…">` with no `<gpu>` child (static vendor
//!   files, which NCCL merges with what it detects) says nothing about NVLink/xGMI: the
//!   fabric is then unknown, not "none";
//! - a `<net>` names the NIC: RDMA device names (`mlx5_0`, with an underscore, or
//!   `rdma*`/`efa*`/`cxi*`), and any `<net gdr="1">` (HPE Slingshot's `cxi0` through
//!   RCCL's libfabric plugin), become the RDMA device, others the netdev; a second `<net>` on the
//!   same `<pci>` (NCCL merges a card's functions) becomes function 1, and so on;
//! - a network `<pci>` with no `<nic>`/`<net>` child (Azure, AWS and OCI static files list
//!   their InfiniBand, RoCE and EFA NICs this way, for NCCL's network transport to match
//!   by address) is an RDMA NIC whose device is not named ([`Nic::rdma_unnamed`]), except
//!   Amazon's ENA (vendor `0x1d0f`, not an EFA), which is plain Ethernet;
//! - the class gives the link layer: `0x0207xx` InfiniBand, `0x0200xx` Ethernet (RoCE
//!   when the NIC does RDMA); an EFA (vendor `0x1d0f`, device `0xefaX`) has neither;
//! - placeholder switches (`busid="ffff:ff:01.0"`, vendor/device `0xffff` or `0x0000`)
//!   stand for a real switch and are read as one; `numaid="-1"` leaves the devices below
//!   it on an unknown NUMA node; NUMA ids need not be `0..n-1`.
//!
//! Synthetic addresses follow [`super::synth`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use roxmltree::{Document, Node};
use topoalign_topology::pci::class;
use topoalign_topology::pci::{rdma_by_identity, vendor};
use topoalign_topology::{
    Bdf, CpuSet, FabricKind, Gpu, GpuVendor, LinkLayer, Nic, PciDevice, PciKind, PciParent,
    PcieLink, RdmaPort,
};

mod links;

use links::LinkRef;

use super::synth::{SynthTree, nic_bdf};
use super::{excerpt, malformed};
use crate::discovery::Discovery;
use crate::error::{CpuMaskError, DiscoverError};

/// Parsing state.
struct Ctx<'p> {
    path: &'p Path,
    tree: SynthTree,
    /// Every real address seen, with its line, to report duplicates.
    seen: HashMap<Bdf, usize>,
    /// PCI class by address.
    classes: HashMap<Bdf, u32>,
    /// Provisional GPU index by address, and its NVLink/xGMI links.
    gpus: Vec<(Bdf, Vec<LinkRef>)>,
    /// GPUs without a `<gpu>` child: the file says nothing about their links, so the
    /// fabric is unknown.
    bare_gpus: usize,
    warnings: Vec<String>,
    unplaced_nics: usize,
}

/// Parses an NCCL topology XML document into a topology.
pub fn parse_nccl_xml(text: &str, path: &Path, name: &str) -> Result<Discovery, DiscoverError> {
    let text = super::paste::xml_region(text);
    let doc = Document::parse(&text).map_err(|e| {
        malformed(
            path,
            e.pos().row as usize,
            format!("not well-formed XML: {e}"),
        )
    })?;
    let root = doc.root_element();
    let line = |n: Node| doc.text_pos_at(n.range().start).row as usize;
    if root.tag_name().name() != "system" {
        return Err(malformed(
            path,
            line(root),
            format!(
                "root element is <{}>, expected <system>",
                root.tag_name().name()
            ),
        ));
    }
    let mut ctx = Ctx {
        path,
        tree: SynthTree::new(name),
        seen: HashMap::new(),
        classes: HashMap::new(),
        gpus: Vec::new(),
        bare_gpus: 0,
        warnings: Vec::new(),
        unplaced_nics: 0,
    };
    let mut numa: BTreeMap<u32, CpuSet> = BTreeMap::new();
    for cpu in root.children().filter(|c| c.has_tag_name("cpu")) {
        let ln = line(cpu);
        let id =
            match cpu.attribute("numaid") {
                None => {
                    return Err(malformed(path, ln, "<cpu> without a numaid attribute"));
                }
                Some(v) => match v.trim().parse::<i64>() {
                    Ok(x) if x < 0 => None,
                    Ok(x) => Some(u32::try_from(x).map_err(|_| {
                        malformed(path, ln, format!("numaid `{v}` is out of range"))
                    })?),
                    Err(_) => {
                        return Err(malformed(
                            path,
                            ln,
                            format!("numaid `{}` is not a number", excerpt(v)),
                        ));
                    }
                },
            };
        if let Some(id) = id {
            let cpus = match cpu.attribute("affinity") {
                Some(mask) => parse_cpu_mask(mask).map_err(|why| {
                    malformed(path, ln, format!("affinity `{}`: {why}", excerpt(mask)))
                })?,
                None => CpuSet::new(),
            };
            let entry = numa.entry(id).or_default();
            *entry = entry.union(&cpus);
        }
        for child in cpu.children().filter(Node::is_element) {
            match child.tag_name().name() {
                "pci" => {
                    let hb = ctx
                        .tree
                        .host_bridge()
                        .map_err(|m| malformed(path, line(child), m))?;
                    let rp = ctx
                        .tree
                        .bridge(hb, PciKind::RootPort, id)
                        .map_err(|m| malformed(path, line(child), m))?;
                    walk_pci(&mut ctx, &doc, child, rp, id)?;
                }
                "nic" => {
                    for net in child.children().filter(|n| n.has_tag_name("net")) {
                        add_unplaced_nic(&mut ctx, net, line(net), id)?;
                    }
                }
                _ => {}
            }
        }
    }
    for (id, cpus) in numa {
        ctx.tree.builder.numa_node(id, cpus, None, Vec::new(), None);
    }
    links::add_fabric_links(
        &ctx.gpus,
        &ctx.classes,
        &mut ctx.tree.builder,
        &mut ctx.warnings,
    );
    if ctx.bare_gpus > 0 {
        ctx.tree.builder.fabric_unknown();
        ctx.warnings.push(format!(
            "{} of {} GPU(s) are bare <pci> entries with no <gpu> child (a static file NCCL \
             merges with its own detection): the file says nothing about their NVLink/xGMI \
             links, so the GPU fabric is unknown; a dump NCCL writes on the machine \
             (NCCL_TOPO_DUMP_FILE) has them",
            ctx.bare_gpus,
            ctx.gpus.len()
        ));
    }
    let topology = ctx.tree.builder.build()?;
    Ok(Discovery {
        topology,
        warnings: ctx.warnings,
    })
}

fn attr_hex(
    node: Node,
    name: &str,
    line: usize,
    path: &Path,
) -> Result<Option<u32>, DiscoverError> {
    match node.attribute(name) {
        None => Ok(None),
        Some(v) => {
            let t = v.trim();
            let digits = t
                .strip_prefix("0x")
                .or_else(|| t.strip_prefix("0X"))
                .unwrap_or(t);
            u32::from_str_radix(digits, 16).map(Some).map_err(|_| {
                malformed(
                    path,
                    line,
                    format!("{name}=`{}` is not a hexadecimal number", excerpt(v)),
                )
            })
        }
    }
}

fn walk_pci(
    ctx: &mut Ctx,
    doc: &Document,
    node: Node,
    parent: PciParent,
    numa: Option<u32>,
) -> Result<(), DiscoverError> {
    let path = ctx.path;
    let ln = doc.text_pos_at(node.range().start).row as usize;
    let busid = node
        .attribute("busid")
        .ok_or_else(|| malformed(path, ln, "<pci> without a busid attribute"))?;
    let bdf: Bdf = busid
        .trim()
        .parse()
        .map_err(|e| malformed(path, ln, format!("busid: {e}")))?;
    if let Some(prev) = ctx.seen.insert(bdf, ln) {
        return Err(malformed(
            path,
            ln,
            format!("busid {bdf} already appears on line {prev}"),
        ));
    }
    let has = |tag: &str| node.children().any(|c| c.has_tag_name(tag));
    let cls = match attr_hex(node, "class", ln, path)? {
        Some(c) => c,
        None if has("gpu") => class::DISPLAY_3D,
        None if has("nic") => class::ETHERNET,
        None if has("pci") => class::PCI_BRIDGE,
        None => {
            return Err(malformed(
                path,
                ln,
                format!(
                    "<pci busid=\"{bdf}\"> has no class attribute and no <gpu>, <nic> or <pci> child to infer it from: \
                     this is a partial topology file (like AWS's g5/p5 NCCL_TOPO_FILE) that only places bus ids under \
                     NUMA nodes for NCCL to merge with its own detection, and it does not say which devices are GPUs \
                     or NICs. Read the machine itself instead (--sysfs-root / on it), or pass the full topology NCCL \
                     writes there with NCCL_TOPO_FILE=<this file> NCCL_TOPO_DUMP_FILE=<out.xml> (--from-nccl-xml <out.xml>)"
                ),
            ));
        }
    };
    ctx.classes.insert(bdf, cls);
    let vendor_id = attr_hex(node, "vendor", ln, path)?.unwrap_or(0) as u16;
    let device_id = attr_hex(node, "device", ln, path)?.unwrap_or(0) as u16;
    let link = parse_link(node);
    let make = |kind: PciKind, bdf: Bdf| PciDevice {
        bdf,
        parent,
        kind,
        vendor: vendor_id,
        device: device_id,
        class: cls,
        numa_node: numa,
        link,
        bus_range: None,
    };
    if class::is_pci_bridge(cls) {
        let usp = PciParent::Bridge(ctx.tree.builder.pci(make(PciKind::SwitchUpstream, bdf)));
        for child in node.children().filter(|c| c.has_tag_name("pci")) {
            let dsp = ctx
                .tree
                .bridge(usp, PciKind::SwitchDownstream, numa)
                .map_err(|m| malformed(path, ln, m))?;
            walk_pci(ctx, doc, child, dsp, numa)?;
        }
        return Ok(());
    }
    if has("pci") {
        ctx.warnings.push(format!(
            "line {ln}: <pci busid=\"{bdf}\"> of class {cls:#08x} is not a bridge; its <pci> children are ignored"
        ));
    }
    let idx = ctx.tree.builder.pci(make(PciKind::Endpoint, bdf));
    if class::is_display(cls) || class::is_accelerator(cls) {
        let mut gpu = Gpu::on(
            idx,
            if vendor_id == 0 {
                GpuVendor::Nvidia
            } else {
                GpuVendor::from_pci(vendor_id)
            },
        );
        let mut fabric = Vec::new();
        match node.children().find(|c| c.has_tag_name("gpu")) {
            Some(g) => {
                gpu.c2c = g.children().any(|c| c.has_tag_name("c2c"));
                for nl in g.children().filter(Node::is_element) {
                    let kind = match nl.tag_name().name() {
                        "nvlink" => FabricKind::Nvlink,
                        "xgmi" => FabricKind::Xgmi,
                        _ => continue,
                    };
                    let nln = doc.text_pos_at(nl.range().start).row as usize;
                    fabric.push(links::parse_link_ref(nl, kind, nln, path)?);
                }
            }
            None => ctx.bare_gpus += 1,
        }
        ctx.tree.builder.gpu(gpu);
        ctx.gpus.push((bdf, fabric));
    } else if class::is_network(cls) {
        let nets: Vec<Node> = node
            .children()
            .filter(|c| c.has_tag_name("nic"))
            .flat_map(|n| n.children().filter(|c| c.has_tag_name("net")))
            .collect();
        if nets.is_empty() {
            // Listed for NCCL's network transport, matched by address: an RDMA NIC whose
            // device the file does not name, unless its identity says plain Ethernet
            // (Amazon's ENA: vendor 0x1d0f, not an EFA).
            let mut nic = Nic::on(idx);
            if rdma_by_identity(cls, vendor_id, device_id) || vendor_id != vendor::AMAZON {
                nic.rdma_unnamed = true;
                nic.ports = class_ports(cls, vendor_id, device_id, None, None);
            }
            ctx.tree.builder.nic(nic);
        }
        for (k, net) in nets.iter().enumerate() {
            let pci = if k == 0 {
                idx
            } else {
                let nln = doc.text_pos_at(net.range().start).row as usize;
                let f = u8::try_from(k).ok().filter(|f| *f < 8).ok_or_else(|| {
                    malformed(
                        path,
                        nln,
                        format!("more than 8 <net> under <pci busid=\"{bdf}\">"),
                    )
                })?;
                let fb = Bdf::new(bdf.domain, bdf.bus, bdf.device, f);
                if let Some(prev) = ctx.seen.insert(fb, nln) {
                    return Err(malformed(
                        path,
                        nln,
                        format!(
                            "<net> #{k} would be function {fb}, which already appears on line {prev}"
                        ),
                    ));
                }
                ctx.tree.builder.pci(make(PciKind::Endpoint, fb))
            };
            let mut nic = nic_from_net(pci, *net);
            if nic.rdma.is_some() || rdma_by_identity(cls, vendor_id, device_id) {
                let port = net
                    .attribute("port")
                    .and_then(|p| p.trim().parse::<u32>().ok())
                    .filter(|p| *p > 0);
                nic.rdma_unnamed = nic.rdma.is_none();
                nic.ports = class_ports(cls, vendor_id, device_id, port, nic.speed_mbps);
            }
            ctx.tree.builder.nic(nic);
        }
    }
    Ok(())
}

/// The RDMA port a NIC's class implies: InfiniBand for `0x0207xx`, Ethernet (RoCE) for
/// other network classes, none for an EFA (neither). `port` and `speed_mbps` come from
/// the `<net>`, when there is one.
fn class_ports(
    cls: u32,
    vendor_id: u16,
    device_id: u16,
    port: Option<u32>,
    speed_mbps: Option<u64>,
) -> Vec<RdmaPort> {
    let efa = vendor_id == vendor::AMAZON && rdma_by_identity(cls, vendor_id, device_id);
    if efa {
        return Vec::new();
    }
    let link_layer = if class::is_infiniband(cls) {
        LinkLayer::InfiniBand
    } else {
        LinkLayer::Ethernet
    };
    vec![RdmaPort {
        number: port.unwrap_or(1),
        link_layer,
        umad: None,
        rate_gbps: speed_mbps
            .and_then(|s| u32::try_from(s / 1000).ok())
            .filter(|r| *r > 0),
    }]
}

/// A `<nic><net …/></nic>` directly under `<cpu>`: no PCI location, so it gets a synthetic
/// one on its own host bridge.
fn add_unplaced_nic(
    ctx: &mut Ctx,
    net: Node,
    ln: usize,
    numa: Option<u32>,
) -> Result<(), DiscoverError> {
    let path = ctx.path;
    let bdf = nic_bdf(ctx.unplaced_nics)
        .ok_or_else(|| malformed(path, ln, "more than 256 NICs without a PCI location"))?;
    ctx.unplaced_nics += 1;
    let hb = ctx.tree.host_bridge().map_err(|m| malformed(path, ln, m))?;
    let rp = ctx
        .tree
        .bridge(hb, PciKind::RootPort, numa)
        .map_err(|m| malformed(path, ln, m))?;
    let idx = ctx
        .tree
        .builder
        .endpoint(rp, bdf, 0, 0, class::ETHERNET, numa, None);
    let nic = nic_from_net(idx, net);
    ctx.warnings.push(format!(
        "line {ln}: NIC {} has no PCI location; placed at synthetic {bdf}",
        nic.label().unwrap_or("?")
    ));
    ctx.tree.builder.nic(nic);
    Ok(())
}

fn nic_from_net(pci: usize, net: Node) -> Nic {
    let mut nic = Nic::on(pci);
    if let Some(name) = net
        .attribute("name")
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        // `gdr="1"`: NCCL (or RCCL's libfabric plugin) does GPUDirect RDMA through it,
        // whatever it is called (HPE Slingshot's `cxi0`).
        let gdr = net.attribute("gdr").map(str::trim) == Some("1");
        let rdma_like = name.contains('_')
            || name.starts_with("rdma")
            || name.starts_with("efa")
            || name.starts_with("cxi")
            || gdr;
        if rdma_like {
            nic.rdma = Some(name.to_string());
        } else {
            nic.netdev = Some(name.to_string());
        }
    }
    nic.speed_mbps = net
        .attribute("speed")
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|s| *s > 0);
    nic
}

/// `link_speed="16.0 GT/s PCIe"`, `link_width="16"`; absent or unreadable → None.
fn parse_link(node: Node) -> Option<PcieLink> {
    let speed = node.attribute("link_speed")?;
    let number = speed.split_whitespace().next()?;
    let gts: f64 = number.parse().ok()?;
    if !(0.0..=1000.0).contains(&gts) {
        return None;
    }
    let width: u32 = node.attribute("link_width")?.trim().parse().ok()?;
    Some(PcieLink {
        speed_dgts: (gts * 10.0).round() as u32,
        width,
    })
}

/// Parses a Linux cpumask (`0000ffff,00000000,…`: comma-separated 32-bit hex words, most
/// significant first).
pub(crate) fn parse_cpu_mask(mask: &str) -> Result<CpuSet, CpuMaskError> {
    let words: Vec<&str> = mask.trim().split(',').collect();
    if words.len() > (topoalign_topology::MAX_CPU_ID as usize / 32) {
        return Err(CpuMaskError::TooLong);
    }
    let mut ids = Vec::new();
    for (k, word) in words.iter().rev().enumerate() {
        let w = word.trim();
        if w.is_empty() || w.len() > 8 {
            return Err(CpuMaskError::NotWord(excerpt(w)));
        }
        let v = u32::from_str_radix(w, 16).map_err(|_| CpuMaskError::NotHex(excerpt(w)))?;
        for bit in 0..32 {
            if v & (1 << bit) != 0 {
                ids.push(k as u32 * 32 + bit);
            }
        }
    }
    Ok(CpuSet::from_ids(ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(xml: &str) -> Result<Discovery, DiscoverError> {
        parse_nccl_xml(xml, Path::new("t.xml"), "t")
    }

    #[test]
    fn a_gpu_without_gpu_element_leaves_the_fabric_unknown() {
        let bare = r#"<system><cpu numaid="0"><pci busid="0001:00:00.0" class="0x030200"/></cpu></system>"#;
        let d = parse(bare).unwrap();
        assert_eq!(
            d.topology.fabric_status(),
            topoalign_topology::FabricStatus::Unknown
        );
        assert!(
            d.warnings
                .iter()
                .any(|w| w.contains("1 of 1 GPU(s) are bare <pci>") && w.contains("unknown")),
            "{:?}",
            d.warnings
        );
        let with = r#"<system><cpu numaid="0"><pci busid="0001:00:00.0" class="0x030200"><gpu/></pci></cpu></system>"#;
        let t = parse(with).unwrap().topology;
        assert_eq!(t.fabric_status(), topoalign_topology::FabricStatus::None);
    }

    #[test]
    fn cpu_masks() {
        assert_eq!(parse_cpu_mask("0000ffff").unwrap().to_string(), "0-15");
        assert_eq!(
            parse_cpu_mask("ffff0000,00000000,00000001")
                .unwrap()
                .to_string(),
            "0,80-95"
        );
        assert!(parse_cpu_mask("xyz").is_err());
        assert!(parse_cpu_mask("123456789").is_err());
        assert!(parse_cpu_mask("").is_err());
    }
}
