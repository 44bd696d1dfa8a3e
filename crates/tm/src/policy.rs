//! Topology Manager policies, options and scope, mirroring `policy_none.go`,
//! `policy_best_effort.go`, `policy_restricted.go`, `policy_single_numa_node.go`,
//! `policy_options.go` and `NewManager` in `topology_manager.go`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::hint::{ProviderHints, TopologyHint};
use crate::merge::{HintMerger, MaskComparison, filter_providers_hints};
use crate::numa_info::NumaInfo;

/// `topologyManagerPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// `none` (the default): no hints, no alignment.
    #[default]
    None,
    /// `best-effort`: merge, always admit.
    BestEffort,
    /// `restricted`: merge, admit iff the best hint is preferred.
    Restricted,
    /// `single-numa-node`: keep single-node hints, merge, admit iff preferred.
    SingleNumaNode,
}

impl Policy {
    /// Every policy, in the order of the kubelet documentation.
    pub const ALL: [Policy; 4] = [
        Policy::None,
        Policy::BestEffort,
        Policy::Restricted,
        Policy::SingleNumaNode,
    ];

    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::BestEffort => "best-effort",
            Policy::Restricted => "restricted",
            Policy::SingleNumaNode => "single-numa-node",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Policy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ConfigError::UnknownPolicy(s.to_string()))
    }
}

/// `topologyManagerScope`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// `container` (the default): one merge per container, init containers first.
    #[default]
    Container,
    /// `pod`: one merge for the whole pod.
    Pod,
}

impl Scope {
    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Container => "container",
            Scope::Pod => "pod",
        }
    }
}

impl FromStr for Scope {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "container" => Ok(Scope::Container),
            "pod" => Ok(Scope::Pod),
            _ => Err(ConfigError::UnknownScope(s.to_string())),
        }
    }
}

/// `prefer-closest-numa-nodes`.
pub const PREFER_CLOSEST_NUMA_NODES: &str = "prefer-closest-numa-nodes";
/// `max-allowable-numa-nodes`.
pub const MAX_ALLOWABLE_NUMA_NODES: &str = "max-allowable-numa-nodes";
/// `defaultMaxAllowableNUMANodes`.
pub const DEFAULT_MAX_ALLOWABLE_NUMA_NODES: usize = 8;

/// Mirrors `PolicyOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyOptions {
    /// `PreferClosestNUMA`.
    pub prefer_closest_numa: bool,
    /// `MaxAllowableNUMANodes`.
    pub max_allowable_numa_nodes: usize,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            prefer_closest_numa: false,
            max_allowable_numa_nodes: DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
        }
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl PolicyOptions {
    /// Mirrors `NewPolicyOptions`: unknown names and bad values are errors, and
    /// `max-allowable-numa-nodes` below 8 is refused.
    pub fn parse(options: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut opts = PolicyOptions::default();
        for (name, value) in options {
            match name.as_str() {
                PREFER_CLOSEST_NUMA_NODES => {
                    opts.prefer_closest_numa =
                        parse_go_bool(value).ok_or_else(|| ConfigError::BadOptionValue {
                            option: name.clone(),
                            value: value.clone(),
                            expected: "a boolean (true/false)",
                        })?;
                }
                MAX_ALLOWABLE_NUMA_NODES => {
                    let n: usize =
                        value
                            .trim()
                            .parse()
                            .map_err(|_| ConfigError::BadOptionValue {
                                option: name.clone(),
                                value: value.clone(),
                                expected: "an integer",
                            })?;
                    if n < DEFAULT_MAX_ALLOWABLE_NUMA_NODES {
                        return Err(ConfigError::MaxAllowableTooLow(n));
                    }
                    opts.max_allowable_numa_nodes = n;
                }
                _ => return Err(ConfigError::UnknownOption(name.clone())),
            }
        }
        Ok(opts)
    }
}

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
}

impl TopologyManager {
    /// Mirrors `NewManager`: fails when the machine has more NUMA nodes than
    /// `max-allowable-numa-nodes` under any policy but `none` (the kubelet then refuses
    /// to start). Options that the kubelet accepts but ignores under this policy
    /// (`prefer-closest-numa-nodes` with `none` or `single-numa-node`) are accepted, as the
    /// kubelet does; [`TopologyManager::ignored_options`] names them for the report.
    pub fn new(
        policy: Policy,
        scope: Scope,
        options: &BTreeMap<String, String>,
        numa: NumaInfo,
    ) -> Result<Self, ConfigError> {
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
        })
    }

    /// Options set in the configuration that this policy ignores (the kubelet accepts them
    /// silently; the simulator says so).
    pub fn ignored_options(&self) -> Vec<String> {
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
    /// Under `none` it returns `({nil, true}, true)` without looking at the hints.
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
        Policy::None => (TopologyHint::any(true), true),
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
pub fn filter_single_numa_hints(lists: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    lists
        .into_iter()
        .map(|l| {
            l.into_iter()
                .filter(|h| h.preferred && h.affinity.is_none_or(|m| m.count() == 1))
                .collect()
        })
        .collect()
}
