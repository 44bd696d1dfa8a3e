//! `explain pod`'s comparison: the planner's best on the free devices, the verdict and
//! the reasons; and what can be said of a device-plugin pod.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_plan::{NicCount, Planner, Request, Usage};
use topoalign_topology::{Bdf, PcieClass};

use super::node::NodeView;
use super::{DevicePluginReport, Pairs, PodExplanation, PodInput};

/// The planner's best on the free devices, the verdict and the reasons.
pub(super) fn compare(
    out: &mut PodExplanation,
    view: &NodeView,
    usage: &Usage,
    holders: &BTreeMap<Bdf, String>,
) {
    let gpus: BTreeSet<Bdf> = out.pairs.pairs.iter().map(|p| p.gpu).collect();
    if gpus.is_empty() {
        out.reasons
            .push("the pod holds no GPU with a NIC: there is no pair to compare".into());
        return;
    }
    let Some(topo) = &view.topo else {
        out.reasons.push(
            "the node's topology is unknown (see the notes): the best free choice cannot be computed".into(),
        );
        return;
    };
    let per_gpu = out.pairs.pairs.len().div_ceil(gpus.len());
    let mut req = Request::new(gpus.len(), NicCount::PerGpu(per_gpu));
    req.require_rdma = out.pairs.pairs.iter().all(|p| {
        topo.nic_index(p.nic)
            .is_some_and(|i| topo.nics[i].is_rdma())
    });
    let plan = |u: &Usage| {
        Planner::new(topo)
            .plan(&req, u)
            .map(|plan| Pairs::of(plan.pairs.iter().map(|p| view.pair(p.gpu, p.nic)).collect()))
    };
    let best = match plan(usage) {
        Ok(b) => b,
        Err(e) => {
            out.best_error = Some(e.to_string());
            out.reasons.push(format!(
                "the planner finds no {} GPU(s) with {per_gpu} NIC(s) each on the free devices: {e}",
                gpus.len()
            ));
            return;
        }
    };
    let held = plan(&Usage::empty())
        .ok()
        .filter(|whole| whole.key() < best.key())
        .and_then(|whole| {
            let by: BTreeSet<&str> = whole
                .pairs
                .iter()
                .flat_map(|p| [holders.get(&p.gpu), holders.get(&p.nic)])
                .flatten()
                .map(String::as_str)
                .collect();
            let by: Vec<&str> = by.into_iter().collect();
            (!by.is_empty()).then(|| {
                format!(
                    "the node's best pairs (worst {}) were held by claim {}",
                    whole.worst.map_or("-", PcieClass::as_str),
                    by.join(", ")
                )
            })
        });
    out.as_good = out.pairs.key() <= best.key();
    if out.as_good {
        out.reasons.push(
            "no better pair exists: the pod's pairs are as good as the best free choice".into(),
        );
    } else {
        let replayed: Vec<Option<bool>> = out.claims.iter().map(|c| c.first_fit).collect();
        out.reasons.push(if replayed.iter().all(|r| *r == Some(true)) {
            "the stock allocator takes the first fit and does not score pairs (replayed on the free devices: the same devices)".into()
        } else if replayed.contains(&Some(false)) {
            "the allocation is not the stock allocator's first fit on today's free devices (another allocator wrote it, or devices were freed since)".into()
        } else {
            "the stock allocator takes the first fit and does not score pairs".into()
        });
        for c in out.claims.iter().filter(|c| !c.selectors.is_empty()) {
            out.reasons.push(format!(
                "claim {}'s requests narrow the choice with their own selectors: {}",
                c.claim,
                c.selectors.join("; ")
            ));
        }
        let mine: BTreeSet<Bdf> = out.pairs.pairs.iter().map(|p| p.nic).collect();
        for p in &out.pairs.pairs {
            let better = view
                .nics()
                .into_iter()
                .filter(|n| !usage.nics.contains(n) && (*n == p.nic || !mine.contains(n)))
                .filter_map(|n| Some((view.class(p.gpu, n)?, n)))
                .min();
            if let (Some((c, n)), Some(have)) = (better, p.class)
                && c < have
            {
                out.reasons.push(format!(
                    "GPU {} got NIC {} ({have}) although {} ({c}) was free",
                    p.gpu,
                    p.nic_name,
                    view.nic_name(n)
                ));
            }
        }
        for p in &out.pairs.pairs {
            let closest = view
                .nics()
                .into_iter()
                .filter_map(|n| Some((view.class(p.gpu, n)?, n)))
                .min();
            if let (Some((c, n)), Some(have)) = (closest, p.class)
                && c < have
                && let Some(holder) = holders.get(&n)
            {
                out.reasons.push(format!(
                    "GPU {}'s closest NIC {} ({c}) was held by claim {holder}",
                    p.gpu,
                    view.nic_name(n)
                ));
            }
        }
        if best.pairs.iter().any(|b| !gpus.contains(&b.gpu)) {
            let list: Vec<String> = best.pairs.iter().map(|p| p.gpu.to_string()).collect();
            let list: Vec<String> = list
                .into_iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            out.reasons.push(format!(
                "the best free choice takes other GPUs ({}), whose NICs are closer",
                list.join(", ")
            ));
        }
    }
    out.reasons.extend(held);
    out.best = Some(best);
}

/// A pod without claims: its devices come from device plugins.
pub(super) fn device_plugin(input: &PodInput<'_>, pod: String, node: String) -> PodExplanation {
    let mut resources = BTreeMap::new();
    for c in input.pod.spec.iter().flat_map(|s| &s.containers) {
        let asks: BTreeMap<String, String> = c
            .resources
            .iter()
            .flat_map(|r| r.limits.iter().chain(r.requests.iter()).flatten())
            .filter(|(k, _)| k.contains('/') && !k.starts_with("kubernetes.io/"))
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect();
        if !asks.is_empty() {
            resources.insert(c.name.clone(), asks);
        }
    }
    let mut notes = vec![format!(
        "the pod has no ResourceClaims: its devices come from device plugins, and which ones the kubelet gave it is known only to the kubelet's pod-resources API on node {node} (topoalign's agent there reads it: `topoalign agent --node {node} --once`)"
    )];
    if resources.is_empty() {
        notes.push("the pod asks for no extended resources: it holds no devices".into());
    }
    if input.node_facts.is_empty() {
        notes.push(format!(
            "node {node} carries none of the agent's annotations or labels: is topoalign's agent running there?"
        ));
    }
    PodExplanation {
        pod,
        node,
        source: "device-plugin",
        claims: Vec::new(),
        pairs: Pairs::of(Vec::new()),
        best: None,
        best_error: None,
        as_good: true,
        reasons: Vec::new(),
        notes,
        device_plugin: Some(DevicePluginReport {
            resources,
            node: input.node_facts.iter().cloned().collect(),
        }),
    }
}
