//! The Topology Manager's policies at work, mirroring `policy_none.go`,
//! `policy_best_effort.go`, `policy_restricted.go`, `policy_single_numa_node.go` and
//! `NewManager` in `topology_manager.go`. The settings' values themselves (policy, scope,
//! options) are the kubelet's vocabulary, in [`topoalign_kube_types::kubelet_settings`].

use std::collections::BTreeMap;

use crate::hint::{ProviderHints, TopologyHint};
use crate::merge::{HintMerger, MaskComparison, filter_providers_hints};
use crate::numa_info::NumaInfo;
use topoalign_kube_types::kubelet_settings::{
    ConfigError, PREFER_CLOSEST_NUMA_NODES, Policy, PolicyOptions, Scope,
};

/// A configured Topology Manager: policy, scope and options, checked against the machine
/// as `NewManager` does.
#[derive(Debug, Clone)]
pub struct TopologyManager {
    /// The policy.
    pub policy: Policy,
    /// The scope (ignored under `none`, which uses the kubelet's `noneScope`).
    pub scope: Scope,
    /// The options.
    pub options: PolicyOptions,
    /// The machine's NUMA nodes.
    pub numa: NumaInfo,
    /// Options given but not read (policy `none`).
    ignored: Vec<String>,
}

impl TopologyManager {
    /// Mirrors `NewManager`: with policy `none` it returns before reading the options
    /// (invalid ones included) or counting NUMA nodes; otherwise it parses the options and
    /// fails when the machine has more NUMA nodes than `max-allowable-numa-nodes` (the
    /// kubelet then refuses to start). Options the kubelet accepts but ignores under this
    /// policy are accepted too; [`TopologyManager::ignored_options`] names them.
    pub fn new(
        policy: Policy,
        scope: Scope,
        options: &BTreeMap<String, String>,
        numa: NumaInfo,
    ) -> Result<Self, ConfigError> {
        if policy == Policy::None {
            return Ok(TopologyManager {
                policy,
                scope,
                options: PolicyOptions::default(),
                numa,
                ignored: options.keys().cloned().collect(),
            });
        }
        let opts = PolicyOptions::parse(options)?;
        if policy != Policy::None && numa.nodes.len() > opts.max_allowable_numa_nodes {
            return Err(ConfigError::TooManyNumaNodes {
                nodes: numa.nodes.len(),
                max: opts.max_allowable_numa_nodes,
            });
        }
        Ok(TopologyManager {
            policy,
            scope,
            options: opts,
            numa,
            ignored: Vec::new(),
        })
    }

    /// Options set in the configuration that this policy ignores (the kubelet accepts them
    /// silently; the simulator says so).
    pub fn ignored_options(&self) -> Vec<String> {
        if !self.ignored.is_empty() {
            return vec![format!(
                "topologyManagerPolicyOptions ({}) are not read with policy `none`: the kubelet ignores them, valid or not",
                self.ignored.join(", ")
            )];
        }
        if self.options.prefer_closest_numa
            && matches!(self.policy, Policy::None | Policy::SingleNumaNode)
        {
            vec![format!(
                "topologyManagerPolicyOptions.{PREFER_CLOSEST_NUMA_NODES} has no effect with policy `{}`: the kubelet accepts and ignores it",
                self.policy
            )]
        } else {
            Vec::new()
        }
    }

    /// Mirrors each policy's `Merge`: the best hint and whether the pod is admitted.
    /// Under `none` it returns `({nil, false}, true)` without looking at the hints, as
    /// `policy_none.go` returns an empty `TopologyHint{}`.
    pub fn merge(&self, providers: &[ProviderHints]) -> (TopologyHint, bool) {
        merge_with_policy(self.policy, self.options, &self.numa, providers)
    }
}

/// The policy merge as a free function (used by property tests).
pub fn merge_with_policy(
    policy: Policy,
    options: PolicyOptions,
    numa: &NumaInfo,
    providers: &[ProviderHints],
) -> (TopologyHint, bool) {
    let comparison = if policy != Policy::SingleNumaNode && options.prefer_closest_numa {
        MaskComparison::Closest
    } else {
        MaskComparison::Narrowest
    };
    match policy {
        Policy::None => (TopologyHint::any(false), true),
        Policy::BestEffort => {
            let lists = filter_providers_hints(providers);
            (HintMerger::new(numa, lists, comparison).merge(), true)
        }
        Policy::Restricted => {
            let lists = filter_providers_hints(providers);
            let best = HintMerger::new(numa, lists, comparison).merge();
            (best, best.preferred)
        }
        Policy::SingleNumaNode => {
            let lists = filter_single_numa_hints(filter_providers_hints(providers));
            let mut best = HintMerger::new(numa, lists, comparison).merge();
            if best.affinity == Some(numa.default_affinity()) {
                best = TopologyHint::any(best.preferred);
            }
            (best, best.preferred)
        }
    }
}

/// Mirrors `filterSingleNumaHints`: keeps `{nil, true}` and preferred one-node hints.
pub(crate) fn filter_single_numa_hints(lists: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    lists
        .into_iter()
        .map(|l| {
            l.into_iter()
                .filter(|h| h.preferred && h.affinity.is_none_or(|m| m.count() == 1))
                .collect()
        })
        .collect()
}
