//! NIC details: RDMA devices (`/sys/class/infiniband`), their verbs and MAD nodes
//! (`infiniband_verbs`, `infiniband_mad`), network interfaces (`/sys/class/net`) and the
//! SR-IOV role of each function (`physfn`, `virtfnN`, `sriov_totalvfs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use topoalign_topology::{Bdf, LinkLayer, Nic, RdmaPort, Sriov};

use super::fsread::{device_bdf, list_dir, numbered, read_trimmed, resolve};
use crate::error::DiscoverError;

/// `/sys/class/infiniband`.
pub const IB_CLASS: &str = "sys/class/infiniband";
/// `/sys/class/infiniband_verbs`.
pub const VERBS_CLASS: &str = "sys/class/infiniband_verbs";
/// `/sys/class/infiniband_mad`.
pub const MAD_CLASS: &str = "sys/class/infiniband_mad";
/// `/sys/class/net`.
pub const NET_CLASS: &str = "sys/class/net";

/// What the class directories say about one PCI function.
#[derive(Debug, Default, Clone)]
pub struct NicInfo {
    /// RDMA device name.
    pub rdma: Option<String>,
    /// `uverbsN`.
    pub uverbs: Option<String>,
    /// RDMA ports.
    pub ports: Vec<RdmaPort>,
    /// Network interface.
    pub netdev: Option<String>,
    /// Its speed in Mb/s.
    pub speed_mbps: Option<u64>,
}

/// Reads the RDMA and net class directories, keyed by the PCI function they belong to.
pub fn scan(
    root: &Path,
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<Bdf, NicInfo>, DiscoverError> {
    let mut by_bdf: BTreeMap<Bdf, NicInfo> = BTreeMap::new();
    let verbs = names_by_ibdev(root, VERBS_CLASS, "uverbs", warnings);
    let mads = umad_by_port(root, warnings);

    for dev in list_dir(&root.join(IB_CLASS)) {
        let rel = Path::new(IB_CLASS).join(&dev);
        let Some(bdf) = device_bdf(root, &rel.join("device"))? else {
            warnings.push(format!(
                "{}: no `device` link to a PCI function; RDMA device ignored",
                root.join(&rel).display()
            ));
            continue;
        };
        let info = by_bdf.entry(bdf).or_default();
        info.rdma = Some(dev.clone());
        info.uverbs = verbs.get(&dev).cloned();
        info.ports = read_ports(root, &rel, &dev, &mads, warnings);
    }

    for ifname in list_dir(&root.join(NET_CLASS)) {
        let rel = Path::new(NET_CLASS).join(&ifname);
        let Some(bdf) = device_bdf(root, &rel.join("device"))? else {
            if !is_virtual(root, &rel) {
                warnings.push(format!(
                    "{}: network interface without a `device` link to a PCI function; ignored",
                    root.join(&rel).display()
                ));
            }
            continue;
        };
        if is_representor(root, &rel) {
            continue;
        }
        let info = by_bdf.entry(bdf).or_default();
        // Several interfaces on one function (IPoIB children): keep the first by name.
        if info.netdev.is_none() {
            info.netdev = Some(ifname.clone());
            info.speed_mbps = read_trimmed(&root.join(&rel).join("speed"))
                .and_then(|s| s.parse::<i64>().ok())
                .and_then(|v| u64::try_from(v).ok());
        }
    }
    Ok(by_bdf)
}

/// Whether a class entry lives under `/sys/devices/virtual` (lo, bridges, veth...).
fn is_virtual(root: &Path, rel: &Path) -> bool {
    resolve(root, rel)
        .map(|p| p.starts_with("sys/devices/virtual"))
        .unwrap_or(false)
}

/// A switchdev VF representor (`phys_port_name` `pf0vf3`) is not the function's own
/// interface.
fn is_representor(root: &Path, rel: &Path) -> bool {
    read_trimmed(&root.join(rel).join("phys_port_name"))
        .map(|n| n.contains("vf"))
        .unwrap_or(false)
}

/// `<class>/<prefix>N/ibdev` → the node name, keyed by RDMA device.
fn names_by_ibdev(
    root: &Path,
    class: &str,
    prefix: &str,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in list_dir(&root.join(class)) {
        if numbered(&name, prefix).is_none() {
            continue;
        }
        let path = root.join(class).join(&name).join("ibdev");
        match read_trimmed(&path).filter(|s| !s.is_empty()) {
            Some(dev) => {
                out.entry(dev).or_insert(name);
            }
            None => warnings.push(format!("{}: missing or empty", path.display())),
        }
    }
    out
}

/// `infiniband_mad/umadN/{ibdev,port}` → `umadN`, keyed by (RDMA device, port).
fn umad_by_port(root: &Path, warnings: &mut Vec<String>) -> BTreeMap<(String, u32), String> {
    let mut out = BTreeMap::new();
    for name in list_dir(&root.join(MAD_CLASS)) {
        if numbered(&name, "umad").is_none() {
            continue;
        }
        let dir = root.join(MAD_CLASS).join(&name);
        let dev = read_trimmed(&dir.join("ibdev"));
        let port = read_trimmed(&dir.join("port")).and_then(|p| p.parse::<u32>().ok());
        match (dev, port) {
            (Some(d), Some(p)) => {
                out.entry((d, p)).or_insert(name);
            }
            _ => warnings.push(format!(
                "{}: missing or unreadable ibdev/port",
                dir.display()
            )),
        }
    }
    out
}

/// `ports/N/{link_layer,rate}` of an RDMA device.
fn read_ports(
    root: &Path,
    rel: &Path,
    dev: &str,
    mads: &BTreeMap<(String, u32), String>,
    warnings: &mut Vec<String>,
) -> Vec<RdmaPort> {
    let ports_dir = root.join(rel).join("ports");
    let mut numbers: Vec<u32> = list_dir(&ports_dir)
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    numbers.sort_unstable();
    let mut out = Vec::new();
    for number in numbers {
        let pd = ports_dir.join(number.to_string());
        let layer = match read_trimmed(&pd.join("link_layer")).as_deref() {
            Some("InfiniBand") => LinkLayer::InfiniBand,
            Some("Ethernet") => LinkLayer::Ethernet,
            other => {
                warnings.push(format!(
                    "{}: `{}` (expected InfiniBand or Ethernet); port ignored",
                    pd.join("link_layer").display(),
                    other.unwrap_or("<missing>")
                ));
                continue;
            }
        };
        out.push(RdmaPort {
            number,
            link_layer: layer,
            umad: mads.get(&(dev.to_string(), number)).cloned(),
            rate_gbps: read_trimmed(&pd.join("rate")).and_then(|r| parse_rate(&r)),
        });
    }
    out
}

/// `400 Gb/sec (4X NDR)` → 400 (whole Gb/s).
pub fn parse_rate(text: &str) -> Option<u32> {
    let n = text.split_whitespace().next()?;
    let whole = n.split('.').next()?;
    whole.parse().ok().filter(|&v| v > 0)
}

/// The SR-IOV role of a NIC function at `dir` (relative to `root`).
pub fn sriov_of(
    root: &Path,
    dir: &Path,
    bdf: Bdf,
    warnings: &mut Vec<String>,
) -> Result<Sriov, DiscoverError> {
    let abs = root.join(dir);
    if std::fs::symlink_metadata(abs.join("physfn")).is_ok() {
        let Some(pf) = device_bdf(root, &dir.join("physfn"))? else {
            warnings.push(format!(
                "{}: dangling or not a PCI function; SR-IOV role unknown",
                abs.join("physfn").display()
            ));
            return Ok(Sriov::None);
        };
        let pf_dir: PathBuf = match resolve(root, &dir.join("physfn")) {
            Ok(p) => p,
            Err(_) => return Ok(Sriov::None),
        };
        let index = virtfns(root, &pf_dir)?
            .into_iter()
            .find(|(_, vf)| *vf == bdf)
            .map(|(n, _)| n);
        let Some(index) = index else {
            warnings.push(format!(
                "{bdf}: its PF {pf} has no virtfnN link back to it; VF index taken as 0"
            ));
            return Ok(Sriov::Vf { pf, index: 0 });
        };
        return Ok(Sriov::Vf { pf, index });
    }
    let Some(text) = read_trimmed(&abs.join("sriov_totalvfs")) else {
        return Ok(Sriov::None);
    };
    let total_vfs: u32 = match text.parse() {
        Ok(v) => v,
        Err(_) => {
            warnings.push(format!(
                "{}: `{text}` is not a number",
                abs.join("sriov_totalvfs").display()
            ));
            return Ok(Sriov::None);
        }
    };
    if total_vfs == 0 {
        return Ok(Sriov::None);
    }
    let vfs = virtfns(root, dir)?.into_iter().map(|(_, b)| b).collect();
    Ok(Sriov::Pf { total_vfs, vfs })
}

/// The `virtfnN` links of a PF, in N order.
fn virtfns(root: &Path, pf_dir: &Path) -> Result<Vec<(u32, Bdf)>, DiscoverError> {
    let mut out = Vec::new();
    for name in list_dir(&root.join(pf_dir)) {
        let Some(n) = numbered(&name, "virtfn") else {
            continue;
        };
        // The kernel's virtfnN links are siblings (`../0000:0c:00.1`): the target's last
        // component is the VF's address, so one readlink suffices; anything else is
        // resolved in full.
        let link = pf_dir.join(&name);
        let direct = std::fs::read_link(root.join(&link)).ok().and_then(|t| {
            t.file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.parse::<Bdf>().ok())
        });
        let bdf = match direct {
            Some(b) => Some(b),
            None => device_bdf(root, &link)?,
        };
        if let Some(b) = bdf {
            out.push((n, b));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Fills a NIC record from what the class directories said.
pub fn apply(nic: &mut Nic, info: NicInfo) {
    nic.rdma = info.rdma;
    nic.uverbs = info.uverbs;
    nic.ports = info.ports;
    nic.netdev = info.netdev;
    nic.speed_mbps = info.speed_mbps;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("400 Gb/sec (4X NDR)"), Some(400));
        assert_eq!(parse_rate("2.5 Gb/sec (1X SDR)"), Some(2));
        assert_eq!(parse_rate("garbage"), None);
    }
}
