//! `topologyManagerPolicy`, `topologyManagerScope` and `topologyManagerPolicyOptions`:
//! their values as the kubelet reads them (`policy_options.go`'s `NewPolicyOptions`,
//! Go's `strconv` rules for option values).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::error::ConfigError;

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
