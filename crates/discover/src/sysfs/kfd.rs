//! AMD KFD topology (`/sys/class/kfd/kfd/topology/nodes/N`): which node is which GPU
//! (`location_id` = bus<<8 | device<<3 | function, plus `domain`), and the xGMI links
//! between GPUs (`io_links/M/properties` with `type 11`).

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_topology::Bdf;

use super::fsread::{list_dir, read_trimmed};

/// The KFD topology node directory.
pub const KFD_NODES: &str = "sys/class/kfd/kfd/topology/nodes";

/// KFD io_link type of xGMI.
pub const IOLINK_TYPE_XGMI: u64 = 11;
/// KFD io_link type of PCIe.
pub const IOLINK_TYPE_PCIE: u64 = 2;

/// One xGMI link between two KFD nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XgmiLink {
    /// `node_from`.
    pub from: u32,
    /// `node_to`.
    pub to: u32,
    /// `weight`.
    pub weight: Option<u32>,
}

/// GPU nodes keyed by PCI address, and every xGMI link.
#[derive(Debug, Default)]
pub struct KfdScan {
    /// KFD node id of each GPU.
    pub node_of: BTreeMap<Bdf, u32>,
    /// xGMI links, each pair once (lower node first).
    pub xgmi: Vec<XgmiLink>,
}

/// Parses a KFD `properties` file (`key value` lines) into a map.
pub fn parse_properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (k, v) = (it.next()?, it.next()?);
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// The PCI address KFD encodes in `domain` + `location_id`.
pub fn bdf_of(props: &BTreeMap<String, u64>) -> Option<Bdf> {
    let loc = *props.get("location_id")?;
    let domain = u16::try_from(*props.get("domain").unwrap_or(&0)).ok()?;
    let bus = u8::try_from((loc >> 8) & 0xff).ok()?;
    let dev = u8::try_from((loc >> 3) & 0x1f).ok()?;
    let func = u8::try_from(loc & 0x7).ok()?;
    Some(Bdf::new(domain, bus, dev, func))
}

/// Reads the KFD topology; absent on non-AMD hosts (empty result, no warning).
pub fn scan(root: &Path, warnings: &mut Vec<String>) -> KfdScan {
    let mut out = KfdScan::default();
    let dir = root.join(KFD_NODES);
    let mut gpu_nodes = Vec::new();
    for name in list_dir(&dir) {
        let Ok(id) = name.parse::<u32>() else {
            continue;
        };
        let path = dir.join(&name).join("properties");
        let Some(text) = read_trimmed(&path) else {
            warnings.push(format!("{}: missing or unreadable", path.display()));
            continue;
        };
        let props = parse_properties(&text);
        let is_gpu = props.get("simd_count").copied().unwrap_or(0) > 0;
        if !is_gpu {
            continue;
        }
        match bdf_of(&props) {
            Some(b) => {
                out.node_of.insert(b, id);
                gpu_nodes.push(id);
            }
            None => warnings.push(format!(
                "{}: GPU node without a usable location_id",
                path.display()
            )),
        }
        for link in list_dir(&dir.join(&name).join("io_links")) {
            let lp = dir
                .join(&name)
                .join("io_links")
                .join(&link)
                .join("properties");
            let Some(text) = read_trimmed(&lp) else {
                continue;
            };
            let p = parse_properties(&text);
            if p.get("type") != Some(&IOLINK_TYPE_XGMI) {
                continue;
            }
            let (Some(from), Some(to)) = (
                p.get("node_from").and_then(|v| u32::try_from(*v).ok()),
                p.get("node_to").and_then(|v| u32::try_from(*v).ok()),
            ) else {
                warnings.push(format!(
                    "{}: xGMI link without node_from/node_to",
                    lp.display()
                ));
                continue;
            };
            let weight = p.get("weight").and_then(|v| u32::try_from(*v).ok());
            let (from, to) = (from.min(to), from.max(to));
            if from != to && !out.xgmi.iter().any(|l| l.from == from && l.to == to) {
                out.xgmi.push(XgmiLink { from, to, weight });
            }
        }
    }
    out.xgmi
        .retain(|l| gpu_nodes.contains(&l.from) && gpu_nodes.contains(&l.to));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_id_encodes_bus_device_function() {
        let props = parse_properties("simd_count 1216\nlocation_id 4352\ndomain 0\ngarbage\n");
        // 4352 = 0x1100: bus 0x11, device 0, function 0.
        assert_eq!(bdf_of(&props).unwrap().to_string(), "0000:11:00.0");
        assert_eq!(props.get("simd_count"), Some(&1216));
    }
}
