//! The rail rules that read what each NIC is cabled to: `switch` (a map or a pattern
//! over the neighbour switch's name) and `ib-subnet` (a map of subnet prefixes, or their
//! order). The file format is documented in `rails`.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_topology::{LinkLayer, Neighbours, NicNeighbours, SubnetPrefix, Topology};

use crate::GangError;
use crate::input::child;
use crate::rails::{RailKind, RailSource};

/// Rails by the switch a NIC is cabled to.
pub(crate) const RULE_SWITCH: &str = "switch";
/// Rails by the InfiniBand subnet of a NIC's port.
pub(crate) const RULE_IB_SUBNET: &str = "ib-subnet";
/// The rules read here.
pub(crate) const RULES: [&str; 2] = [RULE_SWITCH, RULE_IB_SUBNET];
/// The rules, for error messages.
pub(crate) const RULES_TEXT: &str = "switch (the switch each NIC is cabled to: switches or switchPattern), ib-subnet (the InfiniBand subnet of each NIC: subnets, or their order)";
/// The placeholder of the rail number in a switch pattern.
const RAIL: &str = "{rail}";

/// The fields of a rail file that only these rules read; each is taken by the rule
/// that reads it, and what is left over is an error.
#[derive(Debug, Default)]
pub(crate) struct NeighbourFields {
    pub(crate) switches: Option<BTreeMap<String, u32>>,
    pub(crate) switch_pattern: Option<String>,
    pub(crate) subnets: Option<BTreeMap<String, u32>>,
}

impl NeighbourFields {
    /// An error for a field given with a rule that does not read it.
    pub(crate) fn check_unused(&self, file: &str) -> Result<(), GangError> {
        let (name, rule) = if self.switches.is_some() {
            ("switches", RULE_SWITCH)
        } else if self.switch_pattern.is_some() {
            ("switchPattern", RULE_SWITCH)
        } else if self.subnets.is_some() {
            ("subnets", RULE_IB_SUBNET)
        } else {
            return Ok(());
        };
        Err(GangError::Field {
            file: file.to_string(),
            field: name.to_string(),
            why: format!("read only with rule: {rule}"),
        })
    }
}

/// The kind a neighbour rule names, from its fields.
pub(crate) fn parse_kind(
    rule: &str,
    fields: &mut NeighbourFields,
    rails: Option<u32>,
    file: &str,
) -> Result<RailKind, GangError> {
    let field = |f: &str, why: String| GangError::Field {
        file: file.to_string(),
        field: f.to_string(),
        why,
    };
    let in_range = |f: &str, r: u32| match rails {
        Some(n) if r >= n => Err(field(
            f,
            format!(
                "rail {r} is out of range: rails is {n}, so rails are 0 to {}",
                n - 1
            ),
        )),
        _ => Ok(()),
    };
    let need_rails = |what: &str| {
        if rails.is_none() {
            Err(field(
                "rails",
                format!("missing: {what} needs the number of rails"),
            ))
        } else {
            Ok(())
        }
    };
    if rule == RULE_SWITCH {
        match (fields.switches.take(), fields.switch_pattern.take()) {
            (Some(_), Some(_)) => Err(field(
                "switchPattern",
                "give either switches (a map) or switchPattern, not both".into(),
            )),
            (None, None) => Err(field(
                "switches",
                "missing: rule switch needs switches ({switch: rail}) or switchPattern (\"leaf-r{rail}\")".into(),
            )),
            (Some(map), None) => {
                need_rails("a switch map")?;
                if map.is_empty() {
                    return Err(field("switches", "the map names no switch".into()));
                }
                for (k, r) in &map {
                    in_range(&child("switches", k), *r)?;
                }
                Ok(RailKind::SwitchMap(map.into_iter().collect()))
            }
            (None, Some(p)) => {
                need_rails("a switch pattern")?;
                if p.matches(RAIL).count() != 1 {
                    return Err(field(
                        "switchPattern",
                        format!(
                            "{p:?}: a pattern has {RAIL} exactly once (where the rail number is), and `*` for any text"
                        ),
                    ));
                }
                Ok(RailKind::SwitchPattern(p))
            }
        }
    } else {
        let Some(map) = fields.subnets.take() else {
            return Ok(RailKind::SubnetOrder);
        };
        need_rails("a subnet map")?;
        if map.is_empty() {
            return Err(field("subnets", "the map names no subnet".into()));
        }
        let mut seen: BTreeMap<SubnetPrefix, (String, u32)> = BTreeMap::new();
        let mut out = Vec::new();
        for (key, rail) in map {
            let path = child("subnets", &key);
            in_range(&path, rail)?;
            let prefix: SubnetPrefix = key.parse().map_err(|e: String| field(&path, e))?;
            if let Some((other, r)) = seen.get(&prefix)
                && *r != rail
            {
                return Err(field(
                    &path,
                    format!(
                        "the subnet of {other:?} ({prefix}) again, with rail {rail} instead of {r}"
                    ),
                ));
            }
            seen.insert(prefix, (key.clone(), rail));
            out.push((key, prefix, rail));
        }
        Ok(RailKind::SubnetMap(out))
    }
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

/// The switch a NIC is cabled to: its name (what patterns and labels use) and the other
/// names a map may use for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Switch {
    pub(crate) name: String,
    pub(crate) aliases: Vec<String>,
}

/// The name of the switch a NIC is cabled to, as the rail rules and the leaf read it:
/// the InfiniBand switch of its port when a fabric scan named one, else its LLDP
/// neighbour (system name, else chassis id); `Err` when LLDP shows two different
/// neighbours on its interface.
pub fn neighbour_switch(f: &NicNeighbours) -> Result<Option<String>, String> {
    switch_of(f).map(|s| s.map(|s| s.name))
}

/// The switch of a NIC's facts: the InfiniBand switch of its port when a scan named one,
/// else its LLDP neighbour (system name, else chassis id). `Err` when LLDP shows two
/// different neighbours on its interface.
pub(crate) fn switch_of(f: &NicNeighbours) -> Result<Option<Switch>, String> {
    if let Some(sw) = f.ib.as_ref().and_then(|p| p.switch.as_ref()) {
        return Ok(Some(Switch {
            name: sw.name().to_string(),
            aliases: vec![sw.description.clone(), sw.guid.clone()],
        }));
    }
    let mut seen: Vec<Switch> = Vec::new();
    for l in &f.lldp {
        let Some(name) = l.chassis_name.clone().or_else(|| l.chassis_id.clone()) else {
            continue;
        };
        if !seen.iter().any(|s| s.name == name) {
            // The chassis id as lldpctl prints it (`mac b8:59:9f:00:00:12`) and its value.
            let mut aliases: Vec<String> = l.chassis_id.iter().cloned().collect();
            if let Some((_, value)) = l.chassis_id.as_deref().and_then(|id| id.split_once(' ')) {
                aliases.push(value.to_string());
            }
            seen.push(Switch { name, aliases });
        }
    }
    match seen.len() {
        0 => Ok(None),
        1 => Ok(seen.pop()),
        _ => Err(format!(
            "LLDP shows {} neighbours on its interface ({}), so its switch is not known",
            seen.len(),
            seen.iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

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
) -> Result<Assigned, GangError> {
    let err = |field: &str, why: String| GangError::Rails {
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
