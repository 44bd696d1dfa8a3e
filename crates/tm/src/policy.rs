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

/// Go's `strconv.ParseBool`, which the kubelet uses for boolean policy options.
pub fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign and decimal digits, nothing
/// else (no surrounding space, no underscores), within `i64`.
pub fn parse_go_int(v: &str) -> Option<i64> {
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

impl PolicyOptions {
    /// Mirrors `NewPolicyOptions`: unknown names and bad values are errors, and
    /// `max-allowable-numa-nodes` below 8 is refused.
    pub fn parse(options: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut opts = PolicyOptions::default();
        for (name, value) in options {
            opts.set(name, value)?;
        }
        Ok(opts)
    }

    /// Mirrors one iteration of `NewPolicyOptions`: checks and applies one option.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let bad = |expected| ConfigError::BadOptionValue {
            option: name.to_string(),
            value: value.to_string(),
            expected,
        };
        match name {
            PREFER_CLOSEST_NUMA_NODES => {
                self.prefer_closest_numa =
                    parse_go_bool(value).ok_or_else(|| bad("true or false"))?;
            }
            MAX_ALLOWABLE_NUMA_NODES => {
                let n = parse_go_int(value).ok_or_else(|| bad("an integer (no spaces)"))?;
                if n < DEFAULT_MAX_ALLOWABLE_NUMA_NODES as i64 {
                    return Err(ConfigError::MaxAllowableTooLow(n));
                }
                self.max_allowable_numa_nodes = usize::try_from(n).unwrap_or(usize::MAX);
            }
            _ => return Err(ConfigError::UnknownOption(name.to_string())),
        }
        Ok(())
    }
}

/// Parses one `NAME=VALUE` option argument (`--topology-manager-option`); the value is kept
/// exactly as given, as the kubelet reads it.
pub fn parse_option_arg(arg: &str) -> Result<(String, String), ConfigError> {
    match arg.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(ConfigError::BadOptionArg(arg.to_string())),
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
