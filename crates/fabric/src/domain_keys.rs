//! Domain label keys: the node labels that say which NVLink domain, leaf, spine or core
//! a node is in, as the tools that write them spell them, and the lookup that picks one
//! for a domain level from a node's labels.
//!
//! | level | keys, in order of precedence | written by |
//! |---|---|---|
//! | `nvlink` | `accelerator.topograph.run/domain`, `nvidia.com/gpu.clique`, `network.topology.nvidia.com/accelerator` | Topograph v1, GPU Feature Discovery, Topograph up to v0.5 |
//! | `nvlink-sub` | `accelerator.topograph.run/sub-domain` | Topograph v1 |
//! | `leaf` | `fabric.topograph.run/tier-0`, `network.topology.nvidia.com/leaf`, `network.topology.nvidia.com/block` | Topograph v1, older Topograph |
//! | `spine` | `fabric.topograph.run/tier-1`, `network.topology.nvidia.com/spine` | |
//! | `core` | `fabric.topograph.run/tier-2`, `network.topology.nvidia.com/core` | |
//! | `tier-N` (N ≥ 3) | `fabric.topograph.run/tier-N` | Topograph v1 (tier 0 is nearest the node) |
//! | `node` | `kubernetes.io/hostname` | the kubelet |

use std::fmt;

use thiserror::Error;

/// Topograph v1: the accelerator (NVLink) domain.
pub(crate) const TOPOGRAPH_DOMAIN: &str = "accelerator.topograph.run/domain";
/// Topograph v1: a sub-domain inside the accelerator domain.
pub(crate) const TOPOGRAPH_SUB_DOMAIN: &str = "accelerator.topograph.run/sub-domain";
/// Topograph v1: fabric tiers, `tier-0` nearest the node; append the tier number.
pub(crate) const TOPOGRAPH_TIER_PREFIX: &str = "fabric.topograph.run/tier-";
/// Topograph up to v0.5: the accelerator (NVLink) domain.
pub(crate) const OLD_ACCELERATOR: &str = "network.topology.nvidia.com/accelerator";
/// Topograph up to v0.5: the leaf switch.
pub(crate) const OLD_LEAF: &str = "network.topology.nvidia.com/leaf";
/// Older Topograph documentation's name for the leaf: the block of racks under one switch.
pub(crate) const OLD_BLOCK: &str = "network.topology.nvidia.com/block";
/// Topograph up to v0.5: the spine switch.
pub(crate) const OLD_SPINE: &str = "network.topology.nvidia.com/spine";
/// Topograph up to v0.5: the core switch.
pub(crate) const OLD_CORE: &str = "network.topology.nvidia.com/core";
/// GPU Feature Discovery: `<ClusterUUID>.<CliqueID>`, only where every fabric GPU of the
/// node agrees (GB200/GB300 NVL72).
pub(crate) const GFD_CLIQUE: &str = "nvidia.com/gpu.clique";
/// The node's own name, the lowest level Kueue accepts.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// A domain level a gang can be kept inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// One node.
    Node,
    /// A sub-domain of an NVLink domain.
    NvlinkSub,
    /// An NVLink domain (multi-node NVLink: an NVL72 rack).
    Nvlink,
    /// Fabric tier N, 0 the leaf nearest the node.
    Tier(u32),
}

impl Level {
    /// The leaf: fabric tier 0.
    pub const LEAF: Level = Level::Tier(0);
    /// The spine: fabric tier 1.
    pub const SPINE: Level = Level::Tier(1);
    /// The core: fabric tier 2.
    pub const CORE: Level = Level::Tier(2);
    /// Every level a known key names, in the order error messages list their keys; the
    /// fabric tiers above the core have only `fabric.topograph.run/tier-N`.
    pub const NAMED: [Level; 6] = [
        Level::Nvlink,
        Level::NvlinkSub,
        Level::LEAF,
        Level::SPINE,
        Level::CORE,
        Level::Node,
    ];

    /// The level names accepted, for error messages.
    pub const NAMES_TEXT: &'static str = "node, nvlink-sub, nvlink, leaf, spine, core, tier-N";

    /// The level's key of highest precedence (`kubernetes.io/hostname` for a node): the
    /// key a job names the level by when it gives none.
    pub fn key(self) -> String {
        self.keys().remove(0)
    }

    /// The level's keys in order of precedence (highest first).
    pub fn keys(self) -> Vec<String> {
        let tier = |n: u32| format!("{TOPOGRAPH_TIER_PREFIX}{n}");
        match self {
            Level::Node => vec![HOSTNAME.into()],
            Level::NvlinkSub => vec![TOPOGRAPH_SUB_DOMAIN.into()],
            Level::Nvlink => vec![
                TOPOGRAPH_DOMAIN.into(),
                GFD_CLIQUE.into(),
                OLD_ACCELERATOR.into(),
            ],
            Level::Tier(0) => vec![tier(0), OLD_LEAF.into(), OLD_BLOCK.into()],
            Level::Tier(1) => vec![tier(1), OLD_SPINE.into()],
            Level::Tier(2) => vec![tier(2), OLD_CORE.into()],
            Level::Tier(n) => vec![tier(n)],
        }
    }

    /// The default HyperNode tier for Volcano's `highestTierAllowed` (tier 1 is the
    /// lowest HyperNode level): 1 for NVLink domains and leaves, fabric tier N is N + 1.
    /// Tiers are the cluster's own: the job description can say otherwise.
    pub fn volcano_tier(self) -> u32 {
        match self {
            Level::Node | Level::NvlinkSub | Level::Nvlink => 1,
            Level::Tier(n) => n + 1,
        }
    }

    /// Checks a key the user gave: known, and of `level` when a level is given; the
    /// key's level. The error text lists the known keys (of the level, or all).
    pub fn check_key(key: &str, level: Option<Level>) -> Result<Level, KeyError> {
        let known = |l: Option<Level>| match l {
            Some(l) => l.keys().join(", "),
            None => known_keys().join(", ") + ", fabric.topograph.run/tier-N",
        };
        match (Level::of_key(key), level) {
            (None, l) => Err(KeyError::Unknown { known: known(l) }),
            (Some(found), Some(l)) if found != l => Err(KeyError::OtherLevel {
                known: known(Some(l)),
                found,
                wanted: l,
            }),
            (Some(found), _) => Ok(found),
        }
    }

    /// The level whose key this is, if the key is known.
    pub fn of_key(key: &str) -> Option<Level> {
        if let Some(n) = key.strip_prefix(TOPOGRAPH_TIER_PREFIX) {
            return tier_number(n).map(Level::Tier);
        }
        Level::NAMED
            .into_iter()
            .find(|l| l.keys().iter().any(|k| k == key))
    }
}

fn tier_number(s: &str) -> Option<u32> {
    // `tier-01` is not what Topograph writes.
    (!s.is_empty() && (s == "0" || !s.starts_with('0')))
        .then(|| s.parse().ok())
        .flatten()
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Node => f.write_str("node"),
            Level::NvlinkSub => f.write_str("nvlink-sub"),
            Level::Nvlink => f.write_str("nvlink"),
            Level::Tier(0) => f.write_str("leaf"),
            Level::Tier(1) => f.write_str("spine"),
            Level::Tier(2) => f.write_str("core"),
            Level::Tier(n) => write!(f, "tier-{n}"),
        }
    }
}

/// A domain level name that is not one ([`Level`] from text).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown domain level {given:?}; known levels: {}", Level::NAMES_TEXT)]
pub struct LevelError {
    /// The name given.
    pub given: String,
}

impl std::str::FromStr for Level {
    type Err = LevelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "node" => Level::Node,
            "nvlink-sub" => Level::NvlinkSub,
            "nvlink" => Level::Nvlink,
            "leaf" => Level::LEAF,
            "spine" => Level::SPINE,
            "core" => Level::CORE,
            other => match other.strip_prefix("tier-").and_then(tier_number) {
                Some(n) => Level::Tier(n),
                None => {
                    return Err(LevelError {
                        given: other.to_string(),
                    });
                }
            },
        })
    }
}

/// Why a domain label key the user gave is refused. The text is the known keys
/// (comma-separated), of the level when one is given, and why the level does not match.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// No known source writes the key.
    #[error("{known}")]
    Unknown {
        /// The known keys (of the level, or all), comma-separated.
        known: String,
    },
    /// A known key, but of another level than the one given.
    #[error("{known} (the key is for level {found}, not {wanted})")]
    OtherLevel {
        /// The keys of `wanted`, comma-separated.
        known: String,
        /// The level the key belongs to.
        found: Level,
        /// The level given.
        wanted: Level,
    },
}

/// Every known key (fabric tiers 0–2 for the open-ended family), for error messages.
pub(crate) fn known_keys() -> Vec<String> {
    Level::NAMED.into_iter().flat_map(Level::keys).collect()
}

/// The key for `level` among a node's labels, by precedence: the first of
/// [`Level::keys`] the node carries, with its value.
#[cfg(test)]
pub(crate) fn lookup(
    level: Level,
    labels: &std::collections::BTreeMap<String, String>,
) -> Option<(String, &str)> {
    level
        .keys()
        .into_iter()
        .find_map(|k| labels.get(&k).map(|v| (k, v.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn precedence_picks_topograph_v1_first() {
        let both = labels(&[(GFD_CLIQUE, "uuid.1"), (TOPOGRAPH_DOMAIN, "nvl-a")]);
        assert_eq!(
            lookup(Level::Nvlink, &both),
            Some((TOPOGRAPH_DOMAIN.to_string(), "nvl-a"))
        );
        let gfd = labels(&[(GFD_CLIQUE, "uuid.1")]);
        assert_eq!(lookup(Level::Nvlink, &gfd).unwrap().0, GFD_CLIQUE);
        let old = labels(&[(OLD_LEAF, "s1"), ("fabric.topograph.run/tier-1", "s9")]);
        assert_eq!(lookup(Level::LEAF, &old).unwrap().1, "s1");
        assert_eq!(lookup(Level::SPINE, &old).unwrap().1, "s9");
        assert_eq!(lookup(Level::CORE, &old), None);
    }

    #[test]
    fn levels_and_keys_round_trip() {
        for name in [
            "node",
            "nvlink",
            "nvlink-sub",
            "leaf",
            "spine",
            "core",
            "tier-5",
        ] {
            let l: Level = name.parse().unwrap();
            assert_eq!(l.to_string(), name);
            for k in l.keys() {
                assert_eq!(Level::of_key(&k), Some(l), "{k}");
            }
        }
        assert_eq!("tier-1".parse::<Level>(), Ok(Level::SPINE));
        assert!(
            "rack"
                .parse::<Level>()
                .unwrap_err()
                .to_string()
                .contains("known levels")
        );
        assert_eq!(Level::of_key("fabric.topograph.run/tier-01"), None);
        assert_eq!(Level::LEAF.volcano_tier(), 1);
        assert_eq!(Level::CORE.volcano_tier(), 3);
    }

    #[test]
    fn unknown_and_mismatched_keys_are_refused_with_the_known_ones() {
        let e = Level::check_key("topology.kubernetes.io/rack", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(TOPOGRAPH_DOMAIN) && e.contains(GFD_CLIQUE),
            "{e}"
        );
        let e = Level::check_key(OLD_SPINE, Some(Level::LEAF))
            .unwrap_err()
            .to_string();
        assert!(e.contains("for level spine, not leaf"), "{e}");
        assert_eq!(
            Level::check_key(GFD_CLIQUE, Some(Level::Nvlink)),
            Ok(Level::Nvlink)
        );
    }
}
