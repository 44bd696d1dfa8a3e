//! Each NIC's rail on one node: a rail file ([`crate::RailSource`]) resolved against the
//! node's topology and, for the rules that read them, its NICs' neighbours.

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_topology::{Bdf, Neighbours, Topology};

use crate::document::child;
use crate::error::FabricError;
use crate::neighbour_rules;
use crate::rail_file::{NicKey, RULE_NEAREST_GPU, RailKind, RailSource};

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
pub fn nic_rails(topo: &Topology, src: &RailSource) -> Result<NicRails, FabricError> {
    resolve(topo, src, None)
}

/// Resolves a rail source against a node's topology and its NICs' neighbours; for the
/// operator map and `nearest-gpu` the neighbours are not read, and the answer is
/// [`nic_rails`]'s.
pub fn nic_rails_with(
    topo: &Topology,
    src: &RailSource,
    neighbours: &Neighbours,
) -> Result<NicRails, FabricError> {
    resolve(topo, src, Some(neighbours))
}

fn resolve(
    topo: &Topology,
    src: &RailSource,
    neighbours: Option<&Neighbours>,
) -> Result<NicRails, FabricError> {
    let err = |field: &str, why: String| FabricError::Rails {
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
            let got = neighbour_rules::assign(topo, src, kind, neighbours, &name_of)?;
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
