//! NVLink and xGMI links of an NCCL/RCCL topology XML: `<nvlink>`/`<xgmi>` elements of
//! a `<gpu>`, NCCL's NVSwitch placeholder, and the GPU pairs they link (see the parent
//! module's docs for the rules).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use roxmltree::Node;
use topoalign_topology::pci::class;
use topoalign_topology::{Bdf, FabricKind, TopologyBuilder};

use super::attr_hex;
use crate::error::DiscoverError;
use crate::parse::{excerpt, malformed};

/// What an `<nvlink>`/`<xgmi>` points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LinkTarget {
    /// A PCI address (a GPU, or an NVSwitch that may not be in the file).
    Bdf(Bdf),
    /// NCCL's placeholder for an NVSwitch it cannot see (`fffffff:ff:ff.0`).
    SwitchPlaceholder,
}

/// One `<nvlink>` or `<xgmi>` of a GPU.
pub(super) struct LinkRef {
    kind: FabricKind,
    target: LinkTarget,
    count: u32,
    tclass: Option<u32>,
}

/// Reads one `<nvlink>`/`<xgmi>` element.
pub(super) fn parse_link_ref(
    nl: Node,
    kind: FabricKind,
    nln: usize,
    path: &Path,
) -> Result<LinkRef, DiscoverError> {
    let tag = nl.tag_name().name();
    let raw = nl
        .attribute("target")
        .ok_or_else(|| malformed(path, nln, format!("<{tag}> without a target attribute")))?;
    let target = if is_switch_placeholder(raw) {
        LinkTarget::SwitchPlaceholder
    } else {
        LinkTarget::Bdf(raw.trim().parse().map_err(|e| {
            malformed(
                path,
                nln,
                format!(
                    "{tag} target: {e} (expected a PCI address, or NCCL's NVSwitch placeholder fffffff:ff:ff.0)"
                ),
            )
        })?)
    };
    let count = match nl.attribute("count") {
        None => 1,
        Some(v) => v.trim().parse::<u32>().map_err(|_| {
            malformed(
                path,
                nln,
                format!("{tag} count `{}` is not a number", excerpt(v)),
            )
        })?,
    };
    let tclass = attr_hex(nl, "tclass", nln, path)?;
    Ok(LinkRef {
        kind,
        target,
        count,
        tclass,
    })
}

/// NCCL's placeholder for an NVSwitch it cannot see: a domain of more than four hex digits,
/// all `f` (`fffffff:ff:ff.0`, newer NCCL `fffffff:ffff:ff`), which no PCI address has.
fn is_switch_placeholder(target: &str) -> bool {
    let t = target.trim();
    t.split(':').next().is_some_and(|d| d.len() > 4)
        && t.chars().all(|c| matches!(c, 'f' | 'F' | ':' | '.' | '0'))
}

/// Adds NVLink and xGMI links: direct GPU targets, and "through NVSwitch" pairs.
pub(super) fn add_fabric_links(
    gpus: &[(Bdf, Vec<LinkRef>)],
    classes: &HashMap<Bdf, u32>,
    builder: &mut TopologyBuilder,
    warnings: &mut Vec<String>,
) {
    let index: HashMap<Bdf, usize> = gpus.iter().enumerate().map(|(i, (b, _))| (*b, i)).collect();
    let g = gpus.len();
    // Direct links by (lower GPU, higher GPU, kind as u8).
    let mut direct: BTreeMap<(usize, usize, u8), u32> = BTreeMap::new();
    let mut via_switch = vec![0u32; g];
    for (a, (bdf, links)) in gpus.iter().enumerate() {
        let mut per_target: BTreeMap<(usize, u8), u32> = BTreeMap::new();
        for l in links {
            let target = match l.target {
                LinkTarget::SwitchPlaceholder
                    if l.kind == FabricKind::Nvlink
                        && l.tclass.is_none_or(|c| c == class::OTHER_BRIDGE) =>
                {
                    via_switch[a] = via_switch[a].saturating_add(l.count);
                    continue;
                }
                LinkTarget::SwitchPlaceholder => {
                    warnings.push(format!(
                        "GPU {bdf}: {} to NCCL's placeholder address with class {} is not an NVSwitch link; ignored",
                        kind_word(l.kind),
                        l.tclass.map_or("unknown".to_string(), |c| format!("{c:#08x}"))
                    ));
                    continue;
                }
                LinkTarget::Bdf(t) => t,
            };
            let target_class = l.tclass.or_else(|| classes.get(&target).copied());
            if let Some(&b) = index.get(&target) {
                // A GPU naming itself (Azure NC A100 v4 lists one) is no link.
                if b != a {
                    let e = per_target.entry((b, l.kind as u8)).or_default();
                    *e = e.saturating_add(l.count);
                }
            } else if l.kind == FabricKind::Nvlink && target_class == Some(class::OTHER_BRIDGE) {
                via_switch[a] = via_switch[a].saturating_add(l.count);
            } else {
                warnings.push(format!(
                    "GPU {bdf}: {} to {target} (class {}) is neither a GPU of this file nor an NVSwitch; ignored",
                    kind_word(l.kind),
                    target_class.map_or("unknown".to_string(), |c| format!("{c:#08x}"))
                ));
            }
        }
        for ((b, k), count) in per_target {
            let e = direct.entry((a.min(b), a.max(b), k)).or_default();
            *e = (*e).max(count);
        }
    }
    for a in 0..g {
        for b in a + 1..g {
            let switched = if via_switch[a] > 0 && via_switch[b] > 0 {
                via_switch[a].min(via_switch[b])
            } else {
                0
            };
            let of = |k: FabricKind| direct.get(&(a, b, k as u8)).copied().unwrap_or(0);
            let nv = of(FabricKind::Nvlink).max(switched);
            let xgmi = of(FabricKind::Xgmi);
            if nv > 0 {
                builder.link(a, b, FabricKind::Nvlink, nv);
            } else if xgmi > 0 {
                builder.link(a, b, FabricKind::Xgmi, xgmi);
            }
        }
    }
}

/// The element name of a link kind, for warnings.
fn kind_word(kind: FabricKind) -> &'static str {
    match kind {
        FabricKind::Nvlink => "NVLink",
        FabricKind::Xgmi => "xGMI",
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::discovery::Discovery;
    use crate::parse::parse_nccl_xml;

    fn parse(xml: &str) -> Result<Discovery, DiscoverError> {
        parse_nccl_xml(xml, Path::new("t.xml"), "t")
    }

    #[test]
    fn switch_placeholder_spellings() {
        for t in ["fffffff:ff:ff.0", "fffffff:ffff:ff", " FFFFFFF:FFFF:FF "] {
            assert!(is_switch_placeholder(t), "{t}");
        }
        for t in ["ffff:ff:01.0", "0000:c4:00.0", "fffffff:zz:00.0", "ffff"] {
            assert!(!is_switch_placeholder(t), "{t}");
        }
    }

    #[test]
    fn placeholder_links_that_are_not_nvswitch_are_warned_and_ignored() {
        let xml = r#"<system><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200"><gpu>
  <nvlink target="fffffff:ff:ff.0" count="4" tclass="0x030200"/>
  <xgmi target="fffffff:ffff:ff" count="2"/>
  <xgmi target="0000:09:00.0" count="2"/>
</gpu></pci>
<pci busid="0000:02:00.0" class="0x030200"><gpu><nvlink target="fffffff:ff:ff.0" count="4"/></gpu></pci>
</cpu></system>"#;
        let d = parse(xml).unwrap();
        assert!(
            d.topology.gpu_links.is_empty(),
            "{:?}",
            d.topology.gpu_links
        );
        assert_eq!(
            d.warnings
                .iter()
                .filter(|w| w.contains("placeholder"))
                .count(),
            2,
            "{:?}",
            d.warnings
        );
        assert!(
            d.warnings
                .iter()
                .any(|w| w.contains("xGMI to 0000:09:00.0") && w.contains("neither a GPU")),
            "{:?}",
            d.warnings
        );
        // A bad target still names the line and what was expected.
        let bad = r#"<system><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200"><gpu>
<xgmi target="fffff:zz" count="1"/></gpu></pci></cpu></system>"#;
        let err = parse(bad).unwrap_err().to_string();
        assert!(
            err.contains("t.xml:3") && err.contains("xgmi target") && err.contains("placeholder"),
            "{err}"
        );
        let bad = r#"<system><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200"><gpu><xgmi target="0000:02:00.0" count="x"/></gpu></pci>
</cpu></system>"#;
        let err = parse(bad).unwrap_err().to_string();
        assert!(err.contains("xgmi count `x` is not a number"), "{err}");
    }
}
