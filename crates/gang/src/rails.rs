//! Rails: which leaf (rail) each NIC of a node reaches its peers through.
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
//! no rail, and [`NicRails::notes`] says so. The switch port is not used.
//!
//! [`parse_rail_source`] checks what the file alone can say (fields, rail numbers in
//! range); [`nic_rails`] resolves it against a node's [`Topology`] (every NIC named
//! exists and is a physical NIC, no NIC on two rails, no two NICs on one rail unless
//! declared `shared`); [`nic_rails_with`] also takes the neighbours, which the rules
//! `switch` and `ib-subnet` need.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use topoalign_topology::{Bdf, Neighbours, SubnetPrefix, Topology};

use crate::GangError;
use crate::input::{child, parse};
use crate::rail_rules;

/// The rule name of "the NIC nearest GPU i is rail i".
pub(crate) const RULE_NEAREST_GPU: &str = "nearest-gpu";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RailFile {
    #[serde(default)]
    rails: Option<u32>,
    #[serde(default)]
    nics: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    shared: Vec<u32>,
    #[serde(default)]
    pub(crate) switches: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    pub(crate) switch_pattern: Option<String>,
    #[serde(default)]
    pub(crate) subnets: Option<BTreeMap<String, u32>>,
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
    /// True for the kinds that read each NIC's neighbour ([`nic_rails_with`]).
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
pub fn parse_rail_source(text: &str, file: &str) -> Result<RailSource, GangError> {
    let raw: RailFile = parse(text, file)?;
    let field = |field: &str, why: String| GangError::Field {
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
    let mut by_neighbour = rail_rules::NeighbourFields {
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
        (None, Some(rule)) if rail_rules::RULES.contains(&rule.as_str()) => {
            rail_rules::parse_kind(&rule, &mut by_neighbour, raw.rails, file)?
        }
        (None, Some(rule)) => {
            return Err(field(
                "rule",
                format!(
                    "unknown rule {rule:?}; the known rules are {RULE_NEAREST_GPU} (the NIC nearest GPU i is rail i), {}",
                    rail_rules::RULES_TEXT
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

/// Each physical NIC's rail on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NicRails {
    /// Rail per physical NIC (PF address); NICs on no rail are absent.
    pub by_nic: BTreeMap<Bdf, u32>,
    /// The number of rails (stated, or for the rule the number of GPUs).
    pub rails: u32,
    /// How the rails were found, in words (`operator map rails.yaml`).
    pub source: String,
    /// What a rule left off the rails and why (a NIC whose switch the map does not name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl NicRails {
    /// The rail of the NIC whose PF is at `bdf`.
    pub fn rail_of(&self, bdf: Bdf) -> Option<u32> {
        self.by_nic.get(&bdf).copied()
    }
}

/// Resolves a rail source against a node's topology. The rules that read neighbours
/// (`switch`, `ib-subnet`) need [`nic_rails_with`].
pub fn nic_rails(topo: &Topology, src: &RailSource) -> Result<NicRails, GangError> {
    resolve(topo, src, None)
}

/// Resolves a rail source against a node's topology and its NICs' neighbours; for the
/// operator map and `nearest-gpu` the neighbours are not read, and the answer is
/// [`nic_rails`]'s.
pub fn nic_rails_with(
    topo: &Topology,
    src: &RailSource,
    neighbours: &Neighbours,
) -> Result<NicRails, GangError> {
    resolve(topo, src, Some(neighbours))
}

fn resolve(
    topo: &Topology,
    src: &RailSource,
    neighbours: Option<&Neighbours>,
) -> Result<NicRails, GangError> {
    let err = |field: &str, why: String| GangError::Rails {
        file: src.file.clone(),
        field: field.to_string(),
        why,
    };
    let name_of = |n: usize| {
        let bdf = topo.nic_bdf(n);
        match topo.nics[n].label() {
            Some(l) => format!("{bdf} ({l})"),
            None => bdf.to_string(),
        }
    };
    // rail -> (NIC, the key or rule that put it there)
    let mut on_rail: BTreeMap<u32, Vec<(usize, String)>> = BTreeMap::new();
    let mut by_nic: BTreeMap<usize, (u32, String)> = BTreeMap::new();
    let mut notes = Vec::new();
    let (rails, source) = match &src.kind {
        RailKind::Map(entries) => {
            for (key, nic, rail) in entries {
                let path = child("nics", key);
                let n = find_nic(topo, nic).ok_or_else(|| {
                    let known: Vec<String> = (0..topo.nics.len())
                        .filter(|&n| !topo.nics[n].is_vf())
                        .map(name_of)
                        .collect();
                    err(
                        &path,
                        format!(
                            "no such NIC on node {}; its NICs: {}",
                            topo.name,
                            known.join(", ")
                        ),
                    )
                })?;
                if topo.nics[n].is_vf() {
                    return Err(err(
                        &path,
                        format!(
                            "{} is a virtual function; a rail belongs to the physical NIC: name its PF",
                            name_of(n)
                        ),
                    ));
                }
                if let Some((other, by)) = by_nic.get(&n)
                    && other != rail
                {
                    return Err(err(
                        &path,
                        format!(
                            "NIC {} is on two rails: {other} (by {by}) and {rail} (by {key:?})",
                            name_of(n)
                        ),
                    ));
                }
                if by_nic.insert(n, (*rail, format!("{key:?}"))).is_none() {
                    on_rail
                        .entry(*rail)
                        .or_default()
                        .push((n, format!("{key:?}")));
                }
            }
            // The map's rails count is required by the parser.
            (src.rails.unwrap_or(0), format!("operator map {}", src.file))
        }
        RailKind::NearestGpu => {
            let cls = topo.classifier();
            let nics: Vec<usize> = (0..topo.nics.len())
                .filter(|&n| !topo.nics[n].is_vf() && topo.nics[n].is_rdma())
                .collect();
            if nics.is_empty() {
                return Err(err(
                    "rule",
                    format!("node {} has no RDMA NIC to put on a rail", topo.name),
                ));
            }
            let gpus = topo.gpus.len() as u32;
            if let Some(n) = src.rails
                && gpus > n
            {
                return Err(err(
                    "rails",
                    format!(
                        "rule {RULE_NEAREST_GPU} puts the NICs of {gpus} GPUs on rails 0 to {}, but rails is {n}",
                        gpus - 1
                    ),
                ));
            }
            for g in 0..topo.gpus.len() {
                let Some((n, _)) = cls.best_nic(g, nics.iter().copied()) else {
                    continue;
                };
                let rail = g as u32;
                if let Some((other, _)) = by_nic.get(&n) {
                    return Err(err(
                        "rule",
                        format!(
                            "NIC {} is nearest GPU {other} and GPU {rail} ({}), so {RULE_NEAREST_GPU} would put it on two rails; give an operator map (nics) for this node",
                            name_of(n),
                            topo.gpu_bdf(g)
                        ),
                    ));
                }
                let by = format!("rule {RULE_NEAREST_GPU}, GPU {rail} ({})", topo.gpu_bdf(g));
                by_nic.insert(n, (rail, by.clone()));
                on_rail.entry(rail).or_default().push((n, by));
            }
            (
                src.rails.unwrap_or(gpus),
                format!("rule {RULE_NEAREST_GPU} ({})", src.file),
            )
        }
        kind => {
            let Some(neighbours) = neighbours else {
                return Err(err(
                    "rule",
                    format!(
                        "this rule reads what each NIC is cabled to, and no neighbours were read for node {} (give LLDP or InfiniBand neighbours)",
                        topo.name
                    ),
                ));
            };
            let got = rail_rules::assign(topo, src, kind, neighbours, &name_of)?;
            for (n, rail, by) in got.assigned {
                by_nic.insert(n, (rail, by.clone()));
                on_rail.entry(rail).or_default().push((n, by));
            }
            notes = got.notes;
            (got.rails, got.source)
        }
    };
    for (rail, nics) in &on_rail {
        if nics.len() > 1 && !src.shared.contains(rail) {
            let list: Vec<String> = nics
                .iter()
                .map(|(n, by)| format!("{} (by {by})", name_of(*n)))
                .collect();
            return Err(err(
                "shared",
                format!(
                    "rail {rail} has {} NICs of node {}: {}; if that is intended, declare it with shared: [{rail}]",
                    nics.len(),
                    topo.name,
                    list.join(", ")
                ),
            ));
        }
    }
    Ok(NicRails {
        by_nic: by_nic
            .into_iter()
            .map(|(n, (r, _))| (topo.nic_bdf(n), r))
            .collect(),
        rails,
        source,
        notes,
    })
}

fn find_nic(topo: &Topology, key: &NicKey) -> Option<usize> {
    match key {
        NicKey::Pci(bdf) => topo.nic_index(*bdf),
        NicKey::Name(name) => {
            let by = |f: fn(&topoalign_topology::Nic) -> Option<&str>| {
                (0..topo.nics.len()).find(|&n| f(&topo.nics[n]) == Some(name.as_str()))
            };
            by(|n| n.rdma.as_deref()).or_else(|| by(|n| n.netdev.as_deref()))
        }
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
