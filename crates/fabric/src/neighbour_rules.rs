//! The rail rules that read what each NIC is cabled to: `switch` (a map or a pattern
//! over the neighbour switch's name) and `ib-subnet` (a map of subnet prefixes, or their
//! order), applied to a node's NICs. The file's forms are `crate::rail_file`'s.

use std::collections::BTreeSet;

use topoalign_topology::{LinkLayer, Neighbours, SubnetPrefix, Topology};

use crate::error::FabricError;
use crate::neighbour_switch::switch_of;
use crate::rail_file::{RAIL, RULE_IB_SUBNET, RULE_SWITCH, RailKind, RailSource};

/// What a neighbour rule put on rails.
pub(crate) struct Assigned {
    /// (NIC index, rail, the switch or subnet that put it there).
    pub(crate) assigned: Vec<(usize, u32, String)>,
    pub(crate) rails: u32,
    pub(crate) source: String,
    pub(crate) notes: Vec<String>,
}

/// Puts each considered NIC of `topo` on the rail its neighbour gives under `kind`.
pub(crate) fn assign(
    topo: &Topology,
    src: &RailSource,
    kind: &RailKind,
    neighbours: &Neighbours,
    name_of: &dyn Fn(usize) -> String,
) -> Result<Assigned, FabricError> {
    let err = |field: &str, why: String| FabricError::Rails {
        file: src.file.clone(),
        field: field.to_string(),
        why,
    };
    let subnet_rule = matches!(kind, RailKind::SubnetMap(_) | RailKind::SubnetOrder);
    let rule = if subnet_rule {
        RULE_IB_SUBNET
    } else {
        RULE_SWITCH
    };
    let nics: Vec<usize> = (0..topo.nics.len())
        .filter(|&n| {
            let nic = &topo.nics[n];
            !nic.is_vf()
                && nic.is_rdma()
                && (!subnet_rule || nic.link_layer() == Some(LinkLayer::InfiniBand))
        })
        .collect();
    if nics.is_empty() {
        let what = if subnet_rule { "InfiniBand" } else { "RDMA" };
        return Err(err(
            "rule",
            format!("node {} has no {what} NIC to put on a rail", topo.name),
        ));
    }
    let facts = |n: usize| neighbours.of(topo.nic_bdf(n)).cloned().unwrap_or_default();
    let mut out = Assigned {
        assigned: Vec::new(),
        rails: src.rails.unwrap_or(0),
        source: format!("rule {rule} ({})", src.file),
        notes: Vec::new(),
    };
    if subnet_rule {
        let mut subnets: Vec<(usize, SubnetPrefix)> = Vec::new();
        for &n in &nics {
            let f = facts(n);
            let port = f.ib.as_ref().ok_or_else(|| {
                err(
                    "rule",
                    format!(
                        "NIC {} has no InfiniBand port in the neighbours read, so rule {rule} cannot place it",
                        name_of(n)
                    ),
                )
            })?;
            match port.subnet {
                Some(p) if port.active() => subnets.push((n, p)),
                _ => {
                    return Err(err(
                        "rule",
                        format!(
                            "NIC {} ({} port {}) is {}: no subnet manager has set its subnet prefix, so rule {rule} cannot place it",
                            name_of(n),
                            port.device,
                            port.port,
                            port.state.as_deref().unwrap_or("in an unknown state")
                        ),
                    ));
                }
            }
        }
        match kind {
            RailKind::SubnetMap(map) => {
                for (n, p) in subnets {
                    match map.iter().find(|(_, q, _)| *q == p) {
                        Some((key, _, rail)) => {
                            out.assigned
                                .push((n, *rail, format!("subnet {p} ({:?})", key)))
                        }
                        None => out.notes.push(format!(
                            "NIC {}: subnet {p} is not in subnets; on no rail",
                            name_of(n)
                        )),
                    }
                }
            }
            _ => {
                let order: BTreeSet<SubnetPrefix> = subnets.iter().map(|(_, p)| *p).collect();
                let count = order.len() as u32;
                if let Some(r) = src.rails
                    && r != count
                {
                    let list: Vec<String> = order.iter().map(ToString::to_string).collect();
                    return Err(err(
                        "rails",
                        format!(
                            "node {} shows {count} InfiniBand subnets ({}), not {r}: numbering them in order would shift rails; give subnets (a map)",
                            topo.name,
                            list.join(", ")
                        ),
                    ));
                }
                out.rails = count;
                for (n, p) in subnets {
                    let rail = order.iter().position(|q| *q == p).unwrap_or(0) as u32;
                    out.assigned.push((n, rail, format!("subnet {p}")));
                }
            }
        }
        return Ok(out);
    }
    for &n in &nics {
        let sw = switch_of(&facts(n))
            .map_err(|why| err("rule", format!("NIC {}: {why}", name_of(n))))?
            .ok_or_else(|| {
                err(
                    "rule",
                    format!(
                        "NIC {} has no neighbour switch (no LLDP neighbour on its interface, no InfiniBand switch from a fabric scan), so rule {rule} cannot place it; check lldpd or the scan, or give an operator map (nics)",
                        name_of(n)
                    ),
                )
            })?;
        let rail = match kind {
            RailKind::SwitchMap(map) => map
                .iter()
                .find(|(k, _)| *k == sw.name || sw.aliases.contains(k))
                .map(|(_, r)| *r),
            RailKind::SwitchPattern(p) => match pattern_rail(p, &sw.name) {
                Some(r) if r >= out.rails => {
                    return Err(err(
                        "switchPattern",
                        format!(
                            "switch {} of NIC {} gives rail {r}, out of range: rails is {}",
                            sw.name,
                            name_of(n),
                            out.rails
                        ),
                    ));
                }
                r => r,
            },
            _ => None,
        };
        match rail {
            Some(r) => out.assigned.push((n, r, format!("switch {}", sw.name))),
            None => out.notes.push(format!(
                "NIC {}: switch {} is not named by the rule; on no rail",
                name_of(n),
                sw.name
            )),
        }
    }
    Ok(out)
}

/// The rail a switch name gives under `pattern` (`*` any text, `{rail}` decimal digits;
/// the whole name must match), if it matches.
pub(crate) fn pattern_rail(pattern: &str, name: &str) -> Option<u32> {
    let (before, after) = pattern.split_once(RAIL)?;
    // Every split of the name into (head, digits, tail) with head ~ before, tail ~ after.
    let b = name.as_bytes();
    for start in 0..=b.len() {
        if !glob(before.as_bytes(), &b[..start]) {
            continue;
        }
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
            if glob(after.as_bytes(), &b[end..]) {
                return name[start..end].parse().ok();
            }
        }
    }
    None
}

/// `*`-only glob over bytes, the whole text.
fn glob(p: &[u8], t: &[u8]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some((b'*', rest)) => (0..=t.len()).any(|i| glob(rest, &t[i..])),
        Some((c, rest)) => t.first() == Some(c) && glob(rest, &t[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_capture_the_rail() {
        assert_eq!(pattern_rail("leaf-r{rail}", "leaf-r3"), Some(3));
        assert_eq!(pattern_rail("su*-leaf-r{rail}", "su12-leaf-r10"), Some(10));
        assert_eq!(pattern_rail("*-r{rail}-*", "pod1-r07-su2"), Some(7));
        assert_eq!(pattern_rail("leaf-r{rail}", "leaf-r3a"), None);
        assert_eq!(pattern_rail("leaf-r{rail}", "leaf-r"), None);
        assert_eq!(pattern_rail("leaf{rail}x", "spine1x"), None);
    }
}
