//! The PCI tree walk: `/sys/bus/pci/devices/*` resolved into `/sys/devices/pciDDDD:BB/…`
//! chains, keeping the GPUs, the NICs and the bridges above them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use topoalign_topology::parse_root_name;
use topoalign_topology::pci::class;
use topoalign_topology::{Bdf, HostBridge, PciDevice, PciKind, PciParent, PcieLink};

use super::config::port_kind_from_config;
use super::fsread::{ResolveError, list_dir, parse_hex, read_trimmed, resolve};
use crate::error::DiscoverError;

/// Where the kernel lists every PCI function.
pub const BUS_DEVICES: &str = "sys/bus/pci/devices";

/// The PCI part of a discovery.
#[derive(Debug, Default)]
pub struct PciScan {
    /// Host bridges that hold a kept function, in (domain, bus) order.
    pub host_bridges: Vec<HostBridge>,
    /// Kept functions, in address order.
    pub pci: Vec<PciDevice>,
    /// The resolved sysfs directory (relative to the root) of each entry of `pci`.
    pub dirs: Vec<PathBuf>,
    /// Indices into `pci` of the GPUs.
    pub gpus: Vec<usize>,
    /// Indices into `pci` of the NICs.
    pub nics: Vec<usize>,
}

/// Vendors whose display controllers are BMC/server-management video, never GPUs.
const BMC_VENDORS: [u16; 2] = [0x1a03 /* ASPEED */, 0x102b /* Matrox */];

/// What a function is to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Gpu,
    Nic,
    Ancestor,
}

/// One function found under a device's path.
#[derive(Debug)]
struct Found {
    dir: PathBuf,
    host: (u16, u8),
    parent: Option<Bdf>,
    depth: usize,
    role: Role,
}

/// The role of a function from its class and vendor, or `None` when it is not kept.
fn role_of(class_code: u32, vendor_id: u16) -> Option<Role> {
    if class::is_network(class_code) {
        Some(Role::Nic)
    } else if (class::is_display(class_code) || class::is_accelerator(class_code))
        && !BMC_VENDORS.contains(&vendor_id)
    {
        Some(Role::Gpu)
    } else {
        None
    }
}

/// Splits a resolved device path into its host bridge and the chain of addresses below
/// it (the device itself last). Components before the host bridge that are not PCI
/// addresses (`LNXSYSTM:00`, `VMBUS:00`, a Hyper-V GUID) are skipped.
fn split_chain(path: &Path) -> Result<((u16, u8), Vec<Bdf>), String> {
    let mut host = None;
    let mut chain = Vec::new();
    for comp in path.iter() {
        let Some(name) = comp.to_str() else {
            return Err("path is not UTF-8".to_string());
        };
        match host {
            None => {
                if let Ok(h) = parse_root_name(name) {
                    host = Some(h);
                }
            }
            Some(_) => match name.parse::<Bdf>() {
                Ok(b) => chain.push(b),
                Err(_) => {
                    return Err(format!(
                        "`{name}` below the host bridge is not a PCI address"
                    ));
                }
            },
        }
    }
    match host {
        Some(h) if !chain.is_empty() => Ok((h, chain)),
        Some(_) => Err("no PCI address below the host bridge".to_string()),
        None => Err("no host bridge component `pciDDDD:BB` in the path".to_string()),
    }
}

/// Walks `sys/bus/pci/devices` under `root`.
pub fn scan(root: &Path, warnings: &mut Vec<String>) -> Result<PciScan, DiscoverError> {
    let bus_dir = root.join(BUS_DEVICES);
    if !bus_dir.is_dir() {
        warnings.push(format!(
            "{} does not exist: no PCI devices discovered",
            bus_dir.display()
        ));
        return Ok(PciScan::default());
    }
    let mut found: BTreeMap<Bdf, Found> = BTreeMap::new();
    for name in list_dir(&bus_dir) {
        let Ok(bdf) = name.parse::<Bdf>() else {
            warnings.push(format!(
                "{}/{name}: not a PCI address, skipped",
                bus_dir.display()
            ));
            continue;
        };
        let link = Path::new(BUS_DEVICES).join(&name);
        let dir = match resolve(root, &link) {
            Ok(d) => d,
            Err(e @ ResolveError::Loop(_)) => return Err(e.into_discover_error(root)),
            Err(ResolveError::Missing(p)) => {
                warnings.push(format!(
                    "{}: dangling symlink ({} does not exist), skipped",
                    root.join(&link).display(),
                    root.join(p).display()
                ));
                continue;
            }
            Err(ResolveError::Io(p, e)) => {
                warnings.push(format!("{}: {e}, skipped", root.join(p).display()));
                continue;
            }
        };
        let class_file = root.join(&dir).join("class");
        let Some(class_code) = read_trimmed(&class_file).as_deref().and_then(parse_hex) else {
            warnings.push(format!(
                "{}: missing or not a hex class code, device skipped",
                class_file.display()
            ));
            continue;
        };
        let vendor_id = read_u16_hex(&root.join(&dir).join("vendor")).unwrap_or(0);
        let Some(role) = role_of(class_code, vendor_id) else {
            continue;
        };
        let (host, chain) = match split_chain(&dir) {
            Ok(v) => v,
            Err(why) => {
                warnings.push(format!(
                    "{}: cannot place it in the PCI tree ({why}), skipped",
                    root.join(&dir).display()
                ));
                continue;
            }
        };
        if chain.last() != Some(&bdf) {
            warnings.push(format!(
                "{}: links to {}, which is a different address, skipped",
                root.join(&link).display(),
                dir.display()
            ));
            continue;
        }
        record_chain(&mut found, &dir, host, &chain, role, warnings);
    }
    Ok(build(root, found, warnings))
}

/// Records a kept device and every bridge above it.
fn record_chain(
    found: &mut BTreeMap<Bdf, Found>,
    dir: &Path,
    host: (u16, u8),
    chain: &[Bdf],
    role: Role,
    warnings: &mut Vec<String>,
) {
    // The directory of chain[k] is `dir` with (len - 1 - k) trailing components removed.
    let mut dirs: Vec<PathBuf> = Vec::with_capacity(chain.len());
    let mut d = dir.to_path_buf();
    for _ in 0..chain.len() {
        dirs.push(d.clone());
        d.pop();
    }
    dirs.reverse();
    for (k, (&bdf, d)) in chain.iter().zip(dirs).enumerate() {
        let parent = if k == 0 { None } else { Some(chain[k - 1]) };
        let this_role = if k + 1 == chain.len() {
            role
        } else {
            Role::Ancestor
        };
        match found.get_mut(&bdf) {
            Some(prev) => {
                if prev.parent != parent || prev.host != host {
                    warnings.push(format!(
                        "{bdf} appears at two places in the PCI tree ({} and {}); keeping the first",
                        prev.dir.display(),
                        d.display()
                    ));
                } else if this_role != Role::Ancestor {
                    prev.role = this_role;
                }
            }
            None => {
                found.insert(
                    bdf,
                    Found {
                        dir: d,
                        host,
                        parent,
                        depth: k,
                        role: this_role,
                    },
                );
            }
        }
    }
}

/// Reads the attributes of every kept function and links the tree.
fn build(root: &Path, found: BTreeMap<Bdf, Found>, warnings: &mut Vec<String>) -> PciScan {
    let mut scan = PciScan::default();
    let mut hosts: Vec<(u16, u8)> = found.values().map(|f| f.host).collect();
    hosts.sort_unstable();
    hosts.dedup();
    scan.host_bridges = hosts
        .iter()
        .map(|&(domain, bus)| HostBridge { domain, bus })
        .collect();
    let index_of: BTreeMap<Bdf, usize> = found.keys().enumerate().map(|(i, b)| (*b, i)).collect();

    let mut known: Vec<bool> = Vec::with_capacity(found.len());
    for (&bdf, f) in &found {
        let parent = match f.parent.and_then(|p| index_of.get(&p)) {
            Some(&i) => PciParent::Bridge(i),
            None => PciParent::Host(hosts.binary_search(&f.host).unwrap_or(0)),
        };
        let (dev, kind_known) = read_function(root, bdf, f, parent, warnings);
        known.push(kind_known);
        match f.role {
            Role::Gpu => scan.gpus.push(scan.pci.len()),
            Role::Nic => scan.nics.push(scan.pci.len()),
            Role::Ancestor => {}
        }
        scan.pci.push(dev);
        scan.dirs.push(f.dir.clone());
    }

    // Port types by position, top-down, for bridges whose config space was unreadable.
    let mut order: Vec<usize> = (0..scan.pci.len()).collect();
    let depth: Vec<usize> = found.values().map(|f| f.depth).collect();
    order.sort_by_key(|&i| depth[i]);
    let mut inferred = 0usize;
    for i in order {
        if known[i] {
            continue;
        }
        let kind = match scan.pci[i].parent {
            PciParent::Host(_) => PciKind::RootPort,
            PciParent::Bridge(p) => match scan.pci[p].kind {
                PciKind::RootPort | PciKind::SwitchDownstream => PciKind::SwitchUpstream,
                PciKind::SwitchUpstream => PciKind::SwitchDownstream,
                _ => PciKind::Bridge,
            },
        };
        scan.pci[i].kind = kind;
        inferred += 1;
    }
    if inferred > 0 {
        warnings.push(format!(
            "PCIe port type of {inferred} bridge(s) inferred from their position (config space not readable; run as root for the exact type)"
        ));
    }
    scan
}

/// Reads one function's files; the flag says whether its kind is final (an endpoint, or
/// a bridge whose config space was readable) or must be inferred from its position.
fn read_function(
    root: &Path,
    bdf: Bdf,
    f: &Found,
    parent: PciParent,
    warnings: &mut Vec<String>,
) -> (PciDevice, bool) {
    let dir = root.join(&f.dir);
    let class_code = match read_trimmed(&dir.join("class"))
        .as_deref()
        .and_then(parse_hex)
    {
        Some(c) => c,
        None => {
            warnings.push(format!(
                "{}: missing or not a hex class code; assuming a PCI bridge",
                dir.join("class").display()
            ));
            class::PCI_BRIDGE
        }
    };
    let is_bridge = f.role == Role::Ancestor || class::is_pci_bridge(class_code);
    let vendor_id = read_u16_hex(&dir.join("vendor")).unwrap_or_else(|| {
        warnings.push(format!(
            "{}: missing or not hex",
            dir.join("vendor").display()
        ));
        0
    });
    let device_id = read_u16_hex(&dir.join("device")).unwrap_or_else(|| {
        warnings.push(format!(
            "{}: missing or not hex",
            dir.join("device").display()
        ));
        0
    });
    let numa_node = read_numa(&dir, f.role != Role::Ancestor, bdf, warnings);
    let link = read_link_state(&dir);
    let bus_range = if is_bridge {
        match (
            read_trimmed(&dir.join("secondary_bus_number")).and_then(|s| s.parse::<u8>().ok()),
            read_trimmed(&dir.join("subordinate_bus_number")).and_then(|s| s.parse::<u8>().ok()),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        }
    } else {
        None
    };
    let (kind, kind_known) = if is_bridge {
        match std::fs::read(dir.join("config"))
            .ok()
            .and_then(|bytes| port_kind_from_config(&bytes))
        {
            Some(k) => (k, true),
            None => (PciKind::Bridge, false),
        }
    } else {
        (PciKind::Endpoint, true)
    };
    let dev = PciDevice {
        bdf,
        parent,
        kind,
        vendor: vendor_id,
        device: device_id,
        class: class_code,
        numa_node,
        link,
        bus_range,
    };
    (dev, kind_known)
}

/// `numa_node`: -1 (or missing/garbage) is `None`; warns for GPUs and NICs.
fn read_numa(dir: &Path, warn: bool, bdf: Bdf, warnings: &mut Vec<String>) -> Option<u32> {
    let path = dir.join("numa_node");
    match read_trimmed(&path) {
        Some(t) if t == "-1" => {
            if warn {
                warnings.push(format!(
                    "{bdf}: numa_node is -1 (unknown); pair classes use the NUMA node of other devices under its host bridge, or node 0 on a single-node machine"
                ));
            }
            None
        }
        Some(t) => match t.parse::<u32>() {
            Ok(n) => Some(n),
            Err(_) => {
                warnings.push(format!(
                    "{}: `{t}` is not a NUMA node number (expected an integer or -1)",
                    path.display()
                ));
                None
            }
        },
        None => {
            if warn {
                warnings.push(format!("{}: missing; NUMA node unknown", path.display()));
            }
            None
        }
    }
}

/// `current_link_speed` + `current_link_width`; `None` when unknown.
fn read_link_state(dir: &Path) -> Option<PcieLink> {
    let speed = parse_link_speed(&read_trimmed(&dir.join("current_link_speed"))?)?;
    let width: u32 = read_trimmed(&dir.join("current_link_width"))?
        .parse()
        .ok()?;
    (width > 0).then_some(PcieLink {
        speed_dgts: speed,
        width,
    })
}

/// Parses `32.0 GT/s PCIe` or the older `16 GT/s` into tenths of GT/s; `Unknown` → `None`.
pub fn parse_link_speed(text: &str) -> Option<u32> {
    let number = text.split_whitespace().next()?;
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, "0"),
    };
    let whole: u32 = whole.parse().ok()?;
    let tenth: u32 = frac.chars().next()?.to_digit(10)?;
    let v = whole.checked_mul(10)?.checked_add(tenth)?;
    (v > 0).then_some(v)
}

/// Reads a `0x%04x` file.
fn read_u16_hex(path: &Path) -> Option<u16> {
    read_trimmed(path)
        .as_deref()
        .and_then(parse_hex)
        .and_then(|v| u16::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_speeds_old_and_new() {
        assert_eq!(parse_link_speed("32.0 GT/s PCIe"), Some(320));
        assert_eq!(parse_link_speed("16 GT/s"), Some(160));
        assert_eq!(parse_link_speed("2.5 GT/s PCIe"), Some(25));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed(""), None);
    }

    #[test]
    fn chains_skip_hyper_v_prefixes() {
        let p = Path::new(
            "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/7a1b0e4c-0101-4c41-a8f3-5b0d1c2d3e4f/pci0101:00/0101:00:00.0",
        );
        let (host, chain) = split_chain(p).unwrap();
        assert_eq!(host, (0x0101, 0));
        assert_eq!(chain, vec!["0101:00:00.0".parse::<Bdf>().unwrap()]);
        assert!(split_chain(Path::new("sys/devices/virtual/net/lo")).is_err());
        assert!(split_chain(Path::new("sys/devices/pci0000:00/0000:00:01.0/usb1")).is_err());
    }

    #[test]
    fn roles() {
        assert_eq!(role_of(0x030000, 0x1a03), None, "ASPEED BMC");
        assert_eq!(role_of(0x030000, 0x102b), None, "Matrox BMC");
        assert_eq!(role_of(0x030200, 0x10de), Some(Role::Gpu));
        assert_eq!(role_of(0x120000, 0x1002), Some(Role::Gpu));
        assert_eq!(role_of(0x020700, 0x15b3), Some(Role::Nic));
        assert_eq!(role_of(0x010802, 0x144d), None, "NVMe");
    }
}
