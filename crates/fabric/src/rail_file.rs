//! The rail file: which leaf (rail) each NIC of a node reaches its peers through, as the
//! operator states it.
//!
//! On a rail-optimized fabric, NIC `r` of every node is cabled to leaf `r`, so traffic
//! between GPU `i` of two nodes stays on one leaf. Nothing on the node says which NIC is
//! on which rail, so the rail comes from a source the operator states, one YAML file per
//! node (or one per node model):
//!
//! ```yaml
//! # an operator map: NIC (PCI address of the PF, or RDMA device) -> rail
//! rails: 8            # rail numbers are 0..rails-1
//! nics:
//!   "0000:0c:00.0": 0
//!   mlx5_1: 1
//! shared: [7]         # rails that may carry more than one NIC of the node
//! ```
//!
//! ```yaml
//! # a stated rule: the NIC nearest GPU i (GPUs in PCI address order) is rail i
//! rule: nearest-gpu
//! rails: 8            # optional: at least the number of GPUs
//! ```
//!
//! Or the rail comes from what each NIC is cabled to (its neighbour: the LLDP neighbour
//! of its interface, or the InfiniBand switch of its port in a saved `ibnetdiscover`;
//! the InfiniBand one when both are known). These rules read the neighbours the node
//! agent or the driver discovered (`topoalign_discover::neighbours`) and consider every
//! physical RDMA NIC (for `ib-subnet`, every physical InfiniBand NIC):
//!
//! ```yaml
//! # the switch a NIC is cabled to names its rail: by name (LLDP system name or chassis
//! # id; an InfiniBand switch's name, node description or GUID) ...
//! rule: switch
//! rails: 8
//! switches: {leaf-r0-su1: 0, leaf-r1-su1: 1, leaf-r0-su2: 0, leaf-r1-su2: 1}
//! ---
//! # ... or by a pattern over the switch's name: `{rail}` is the rail number (decimal
//! # digits), `*` any text; the whole name must match
//! rule: switch
//! rails: 8
//! switchPattern: "su*-leaf-r{rail}"
//! ```
//!
//! ```yaml
//! # InfiniBand subnets (one subnet manager per rail): the subnet prefix of each NIC's
//! # active port, by a map ...
//! rule: ib-subnet
//! rails: 2
//! subnets: {"fe80:0000:0000:0001": 0, "fe80:0000:0000:0002": 1}
//! ---
//! # ... or, without one, the node's distinct subnet prefixes in ascending order are
//! # rails 0, 1, ...; with `rails` stated the node must show exactly that many
//! rule: ib-subnet
//! rails: 8
//! ```
//!
//! A considered NIC with no neighbour (no LLDP neighbour, no switch in the scan, for
//! `ib-subnet` no active port) is an error: the rail would be a guess. A NIC whose
//! switch or subnet the map or pattern does not name (a front-end or storage NIC) is on
//! no rail, and [`crate::NicRails::notes`] says so. The switch port is not used.
//!
//! [`parse_rail_source`] checks what the file alone can say (fields, rail numbers in
//! range); [`crate::nic_rails`] resolves it against a node's topology (every NIC named
//! exists and is a physical NIC, no NIC on two rails, no two NICs on one rail unless
//! declared `shared`); [`crate::nic_rails_with`] also takes the neighbours, which the
//! rules `switch` and `ib-subnet` need (`crate::neighbour_rules`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use topoalign_topology::{Bdf, SubnetPrefix};

use crate::document::{child, parse_document};
use crate::error::FabricError;

/// The rule name of "the NIC nearest GPU i is rail i".
pub(crate) const RULE_NEAREST_GPU: &str = "nearest-gpu";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RailFile {
    #[serde(default)]
    rails: Option<u32>,
    #[serde(default)]
    nics: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    shared: Vec<u32>,
    #[serde(default)]
    switches: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    switch_pattern: Option<String>,
    #[serde(default)]
    subnets: Option<BTreeMap<String, u32>>,
}

/// How a NIC is named in an operator map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NicKey {
    /// By the PCI address of its PF.
    Pci(Bdf),
    /// By its RDMA device (`mlx5_0`), or its network interface.
    Name(String),
}

/// Where the rails come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RailKind {
    /// An operator map: each entry's key as written, the NIC it names, its rail.
    Map(Vec<(String, NicKey, u32)>),
    /// The NIC nearest GPU i (GPUs in PCI address order) is rail i.
    NearestGpu,
    /// The switch a NIC is cabled to, by name: each entry's switch name and its rail.
    SwitchMap(Vec<(String, u32)>),
    /// The switch a NIC is cabled to, by a pattern over its name (`su*-leaf-r{rail}`).
    SwitchPattern(String),
    /// The InfiniBand subnet of a NIC's port: each entry's key as written, the prefix,
    /// its rail.
    SubnetMap(Vec<(String, SubnetPrefix, u32)>),
    /// The node's distinct InfiniBand subnet prefixes, in ascending order, are rails 0, 1, ...
    SubnetOrder,
}

impl RailKind {
    /// True for the kinds that read each NIC's neighbour ([`crate::nic_rails_with`]).
    pub fn needs_neighbours(&self) -> bool {
        !matches!(self, RailKind::Map(_) | RailKind::NearestGpu)
    }
}

/// A node's rail source, checked as far as the file alone allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailSource {
    /// The file it was read from (for errors).
    pub file: String,
    /// Number of rails, when stated (rail numbers are below it).
    pub rails: Option<u32>,
    /// The map or the rule.
    pub kind: RailKind,
    /// Rails that may carry more than one NIC of the node.
    pub shared: BTreeSet<u32>,
}

/// Reads a rail source (YAML or JSON) from `text`; `file` names it in errors.
pub fn parse_rail_source(text: &str, file: &str) -> Result<RailSource, FabricError> {
    let raw: RailFile = parse_document(text, file)?;
    let field = |field: &str, why: String| FabricError::Field {
        file: file.to_string(),
        field: field.to_string(),
        why,
    };
    if raw.rails == Some(0) {
        return Err(field(
            "rails",
            "the number of rails must be at least 1".into(),
        ));
    }
    let in_range = |f: String, r: u32| match raw.rails {
        Some(n) if r >= n => Err(field(
            &f,
            format!(
                "rail {r} is out of range: rails is {n}, so rails are 0 to {}",
                n - 1
            ),
        )),
        _ => Ok(()),
    };
    for (i, r) in raw.shared.iter().enumerate() {
        in_range(format!("shared[{i}]"), *r)?;
    }
    let mut by_neighbour = NeighbourFields {
        switches: raw.switches,
        switch_pattern: raw.switch_pattern,
        subnets: raw.subnets,
    };
    let kind = match (raw.nics, raw.rule) {
        (Some(_), Some(_)) => {
            return Err(field(
                "rule",
                "give either an operator map (nics) or a rule, not both".into(),
            ));
        }
        (None, None) => {
            by_neighbour.check_unused(file)?;
            return Err(field(
                "nics",
                format!(
                    "missing: give an operator map (nics: {{NIC: rail}}) or rule: {RULE_NEAREST_GPU}"
                ),
            ));
        }
        (None, Some(rule)) if rule == RULE_NEAREST_GPU => RailKind::NearestGpu,
        (None, Some(rule)) if RULES.contains(&rule.as_str()) => {
            parse_kind(&rule, &mut by_neighbour, raw.rails, file)?
        }
        (None, Some(rule)) => {
            return Err(field(
                "rule",
                format!(
                    "unknown rule {rule:?}; the known rules are {RULE_NEAREST_GPU} (the NIC nearest GPU i is rail i), {}",
                    RULES_TEXT
                ),
            ));
        }
        (Some(map), None) => {
            if raw.rails.is_none() {
                return Err(field(
                    "rails",
                    "missing: an operator map needs the number of rails".into(),
                ));
            }
            if map.is_empty() {
                return Err(field("nics", "the map names no NIC".into()));
            }
            let mut out = Vec::new();
            for (key, rail) in map {
                let path = child("nics", &key);
                in_range(path.clone(), rail)?;
                let nic = if key.contains(':') {
                    NicKey::Pci(key.parse().map_err(|e| {
                        field(
                            &path,
                            format!(
                                "{e} (a NIC is named by its PF's PCI address or its RDMA device)"
                            ),
                        )
                    })?)
                } else {
                    NicKey::Name(key.clone())
                };
                out.push((key, nic, rail));
            }
            RailKind::Map(out)
        }
    };
    by_neighbour.check_unused(file)?;
    Ok(RailSource {
        file: file.to_string(),
        rails: raw.rails,
        kind,
        shared: raw.shared.into_iter().collect(),
    })
}

/// Rails by the switch a NIC is cabled to.
pub(crate) const RULE_SWITCH: &str = "switch";
/// Rails by the InfiniBand subnet of a NIC's port.
pub(crate) const RULE_IB_SUBNET: &str = "ib-subnet";
/// The rules read here.
const RULES: [&str; 2] = [RULE_SWITCH, RULE_IB_SUBNET];
/// The rules, for error messages.
const RULES_TEXT: &str = "switch (the switch each NIC is cabled to: switches or switchPattern), ib-subnet (the InfiniBand subnet of each NIC: subnets, or their order)";
/// The placeholder of the rail number in a switch pattern.
pub(crate) const RAIL: &str = "{rail}";

/// The fields of a rail file that only the neighbour rules read; each is taken by the rule
/// that reads it, and what is left over is an error.
#[derive(Debug, Default)]
struct NeighbourFields {
    switches: Option<BTreeMap<String, u32>>,
    switch_pattern: Option<String>,
    subnets: Option<BTreeMap<String, u32>>,
}

impl NeighbourFields {
    /// An error for a field given with a rule that does not read it.
    fn check_unused(&self, file: &str) -> Result<(), FabricError> {
        let (name, rule) = if self.switches.is_some() {
            ("switches", RULE_SWITCH)
        } else if self.switch_pattern.is_some() {
            ("switchPattern", RULE_SWITCH)
        } else if self.subnets.is_some() {
            ("subnets", RULE_IB_SUBNET)
        } else {
            return Ok(());
        };
        Err(FabricError::Field {
            file: file.to_string(),
            field: name.to_string(),
            why: format!("read only with rule: {rule}"),
        })
    }
}

/// The kind a neighbour rule names, from its fields.
fn parse_kind(
    rule: &str,
    fields: &mut NeighbourFields,
    rails: Option<u32>,
    file: &str,
) -> Result<RailKind, FabricError> {
    let field = |f: &str, why: String| FabricError::Field {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_reads_keys_as_addresses_or_names() {
        let src = parse_rail_source(
            "rails: 4\nnics: {\"0c:00.0\": 0, mlx5_1: 1}\nshared: [1]\n",
            "r.yaml",
        )
        .unwrap();
        let RailKind::Map(entries) = &src.kind else {
            panic!("{src:?}")
        };
        assert_eq!(entries[0].1, NicKey::Pci(Bdf::new(0, 0x0c, 0, 0)));
        assert_eq!(entries[1].1, NicKey::Name("mlx5_1".into()));
        assert_eq!(src.shared, BTreeSet::from([1]));
        let rule = parse_rail_source("{\"rule\": \"nearest-gpu\"}", "r.json").unwrap();
        assert_eq!((rule.kind, rule.rails), (RailKind::NearestGpu, None));
    }
}
