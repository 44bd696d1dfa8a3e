//! Claims for topoalign's own DeviceClasses that no node of the linted kind can satisfy,
//! found by running the one model of the stock DRA allocator
//! ([`topoalign_dra::alloc::first_fit`]) on the node's simulated ResourceSlices, empty.

use k8s_openapi::api::resource::v1::ResourceClaimSpec;
use topoalign_dra::{
    alloc::{DEFAULT_BUDGET, NodeDevices, first_fit},
    publish::{
        CLASS_GPU, CLASS_NIC, CLASS_PAIR, Inventory, PublishOptions, device_classes, slices_for,
    },
};
use topoalign_topology::{PcieClass, Topology};

use crate::finding::{RawFinding, Severity};

/// The node name the simulated slices are published for.
const NODE: &str = "lint-node";

/// Every device class a claim's requests name (`exactly` and each `firstAvailable`
/// sub-request), with the count asked of it.
fn classes(spec: &ResourceClaimSpec) -> Vec<(&str, i64)> {
    let reqs = spec
        .devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten());
    let mut out = Vec::new();
    for r in reqs {
        if let Some(e) = &r.exactly {
            out.push((e.device_class_name.as_str(), e.count.unwrap_or(1)));
        }
        for sub in r.first_available.iter().flatten() {
            out.push((sub.device_class_name.as_str(), sub.count.unwrap_or(1)));
        }
    }
    out
}

/// Lints the satisfiability of `spec` (at `path`) on an empty `topo` node, when every
/// request names one of topoalign's classes (other drivers' devices cannot be simulated).
pub(crate) fn lint_fit(
    path: &str,
    spec: &ResourceClaimSpec,
    topo: &Topology,
) -> Option<RawFinding> {
    let asked = classes(spec);
    let own = [CLASS_GPU, CLASS_NIC, CLASS_PAIR];
    if asked.is_empty() || !asked.iter().all(|(c, _)| own.contains(c)) {
        return None;
    }
    let gpus: i64 = asked
        .iter()
        .filter(|(c, _)| *c != CLASS_NIC)
        .map(|(_, n)| n)
        .sum();
    // Every pair device uses up one GPU, as a GPU device does: more than the node has is
    // refused without a search (which would try every combination first).
    let feasible = gpus <= topo.gpus.len() as i64;
    let out = feasible.then(|| search(spec, topo)).flatten();
    let path = format!("{path}.devices.requests");
    if feasible && out.as_ref().is_none_or(|o| o.allocation.is_some()) {
        return None;
    }
    if out.as_ref().is_some_and(|o| o.gave_up) {
        return Some(RawFinding {
            path,
            severity: Severity::Warning,
            rule: "dra-search-budget",
            message: format!(
                "the stock DRA allocator's search for this claim did not finish within {DEFAULT_BUDGET} devices tried on an empty `{}`: the scheduler may spend its whole 10 s Filter timeout on it",
                topo.name
            ),
        });
    }
    let best = best_pair(topo).map_or_else(
        || "it has no GPU–NIC pair".to_string(),
        |c| format!("its best GPU–NIC pair is {}", c.as_str()),
    );
    Some(RawFinding {
        path,
        severity: Severity::Error,
        rule: "dra-unsatisfiable",
        message: format!(
            "no `{}` node can satisfy this claim, even empty: the stock DRA allocator finds no devices for it (the claim asks for {gpus} GPU(s) or pair(s); the node has {} GPU(s) and {best}); the pod stays Pending",
            topo.name,
            topo.gpus.len()
        ),
    })
}

/// The allocator's search on the empty node; `None` when the node cannot be published.
fn search(spec: &ResourceClaimSpec, topo: &Topology) -> Option<topoalign_dra::alloc::Outcome> {
    let inventory = Inventory::new(topo, &PublishOptions::default());
    let slices = slices_for(&inventory, NODE, 1).ok()?;
    let devices = NodeDevices::gather(&slices, NODE).ok()?;
    first_fit(spec, &device_classes(), &devices, DEFAULT_BUDGET).ok()
}

/// The best class of any GPU–NIC pair of the node.
fn best_pair(topo: &Topology) -> Option<PcieClass> {
    let c = topo.classifier();
    c.gpu_nic_table().into_iter().map(|p| p.class).min()
}

#[cfg(test)]
mod tests {
    use topoalign_dra::claim::{ClaimSpec, claim_spec};

    use super::*;

    fn fit(spec: &ClaimSpec, profile: &str) -> Option<RawFinding> {
        let topo = topoalign_profiles::get(profile).unwrap();
        lint_fit("spec.spec", &claim_spec(spec).unwrap(), &topo)
    }

    #[test]
    fn nine_pairs_on_eight_gpus_are_unsatisfiable() {
        let f = fit(&ClaimSpec::pairs(9), "mi300x-8").unwrap();
        assert_eq!((f.rule, f.severity), ("dra-unsatisfiable", Severity::Error));
        assert!(f.message.contains("asks for 9 GPU(s)"), "{}", f.message);
        assert!(f.message.contains("has 8 GPU(s)"), "{}", f.message);
        assert!(fit(&ClaimSpec::pairs(8), "mi300x-8").is_none());
    }

    #[test]
    fn a_class_bound_no_pair_meets_is_unsatisfiable() {
        let pix = ClaimSpec {
            max_rank: Some(PcieClass::Pix.rank()),
            ..ClaimSpec::pairs(2)
        };
        let f = fit(&pix, "gb300-4").unwrap();
        assert!(
            f.message.contains("best GPU–NIC pair is NODE"),
            "{}",
            f.message
        );
        assert!(fit(&pix, "mi300x-8").is_none(), "mi300x-8 has PIX pairs");
    }
}
