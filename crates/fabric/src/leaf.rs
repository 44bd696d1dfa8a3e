//! A node's leaf (fabric tier 0) from what its NICs are cabled to, for the node agent and
//! the driver to write as `fabric.topograph.run/tier-0` where nobody else labelled the
//! level ([`crate::domain_labels_with`]).
//!
//! The NICs counted are the railed ones when rails are known, else every physical RDMA
//! NIC; each one's switch is its InfiniBand switch from a fabric scan, else its LLDP
//! neighbour (system name, else chassis id).
//!
//! - All counted NICs on one switch: the leaf is that switch's name, made a label value
//!   (characters other than alphanumerics, `-`, `_` and `.` become `-`, the ends trimmed
//!   to alphanumerics; a name over 63 characters keeps its first 54 and a digest).
//! - On several switches (a rail-optimized node: one leaf per rail), the set of leaves
//!   is the scalable unit every node of the unit shares. Its value is a readable part,
//!   the text all switch names start with followed by the text they all end with
//!   (`leaf-r0-su1` … `leaf-r7-su1` give `leaf-r-su1`; `leaves` when they share
//!   nothing), then `-` and 8 hex digits of a digest (FNV-1a, 64 bits, low 32 printed)
//!   of the sorted names joined by newlines: `leaf-r-su1-1c0ffee5`. Nodes with the same
//!   set get the same value, on every version.
//! - Nothing when no counted NIC has a readable switch, or when only some have one (a
//!   link down would otherwise move the node to another unit), or when LLDP shows two
//!   neighbours on one interface.

use std::collections::BTreeSet;

use serde::Serialize;
use topoalign_topology::{Neighbours, Topology};

use crate::domain_keys::TOPOGRAPH_TIER_PREFIX;
use crate::domain_labels::DerivedLabel;
use crate::neighbour_switch::switch_of;
use crate::nic_rails::NicRails;

/// The most characters of a label value.
const MAX_VALUE: usize = 63;
/// The digest's hex digits.
const DIGEST_LEN: usize = 8;

/// The leaf derived from a node's neighbours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeafDecision {
    /// The label value, when one can be derived.
    pub value: Option<String>,
    /// The switches of the counted NICs, sorted.
    pub switches: Vec<String>,
    /// How the value was found, or why there is none.
    pub why: String,
}

impl LeafDecision {
    /// The derived leaf as the Topograph v1 tier-0 label, when there is one.
    pub fn label(&self) -> Option<DerivedLabel> {
        self.value.as_ref().map(|v| DerivedLabel {
            key: format!("{TOPOGRAPH_TIER_PREFIX}0"),
            value: v.clone(),
            source: format!("NIC neighbours ({})", self.why),
        })
    }
}

/// The node's leaf from its NICs' neighbours (see the module doc for the rules).
pub fn derive_leaf(
    topo: &Topology,
    neighbours: &Neighbours,
    rails: Option<&NicRails>,
) -> LeafDecision {
    let none = |switches: Vec<String>, why: String| LeafDecision {
        value: None,
        switches,
        why,
    };
    let railed = rails.filter(|r| !r.by_nic.is_empty());
    let nics: Vec<usize> = (0..topo.nics.len())
        .filter(|&n| match railed {
            Some(r) => r.rail_of(topo.nic_bdf(n)).is_some(),
            None => !topo.nics[n].is_vf() && topo.nics[n].is_rdma(),
        })
        .collect();
    let counted = if railed.is_some() {
        "railed NICs"
    } else {
        "RDMA NICs"
    };
    let mut switches = BTreeSet::new();
    let mut missing = Vec::new();
    for &n in &nics {
        let bdf = topo.nic_bdf(n);
        let name = topo.nics[n].label().unwrap_or("");
        match neighbours.of(bdf).map(switch_of).transpose() {
            Err(why) => return none(Vec::new(), format!("NIC {bdf} {name}: {why}")),
            Ok(Some(Some(sw))) => {
                switches.insert(sw.name);
            }
            Ok(_) => missing.push(format!("{bdf} {name}").trim_end().to_string()),
        }
    }
    let switches: Vec<String> = switches.into_iter().collect();
    if switches.is_empty() {
        return none(
            switches,
            format!(
                "none of the {} {counted} has a readable neighbour switch",
                nics.len()
            ),
        );
    }
    if !missing.is_empty() {
        return none(
            switches,
            format!(
                "{} of the {} {counted} have no readable neighbour switch ({}); the leaf would be a guess",
                missing.len(),
                nics.len(),
                missing.join(", ")
            ),
        );
    }
    if let [one] = switches.as_slice() {
        let value = label_value(one);
        let why = format!("all {} {counted} on switch {one}", nics.len());
        return match value {
            Some(v) => LeafDecision {
                value: Some(v),
                switches,
                why,
            },
            None => none(switches, format!("{why}, whose name makes no label value")),
        };
    }
    let value = unit_value(&switches);
    let why = format!(
        "{} {counted} on {} switches: the scalable unit of that set",
        nics.len(),
        switches.len()
    );
    LeafDecision {
        value: Some(value),
        switches,
        why,
    }
}

/// A switch name as a label value, or `None` when nothing of it is left.
pub(crate) fn label_value(name: &str) -> Option<String> {
    let clean = clean(name);
    if clean.is_empty() {
        return None;
    }
    if clean.len() <= MAX_VALUE {
        return Some(clean);
    }
    Some(with_digest(&clean, &digest(name)))
}

/// The value of a set of switches (sorted, at least two).
fn unit_value(sorted: &[String]) -> String {
    let first = sorted.first().map(String::as_str).unwrap_or("");
    let shortest = sorted.iter().map(|s| s.len()).min().unwrap_or(0);
    let prefix = common(sorted, |s, i| s.as_bytes().get(i).copied());
    let room = shortest.saturating_sub(prefix);
    let suffix = common(sorted, |s, i| {
        s.len().checked_sub(i + 1).map(|j| s.as_bytes()[j])
    })
    .min(room);
    let readable = format!("{}{}", &first[..prefix], &first[first.len() - suffix..]);
    let mut readable = clean(&readable);
    while readable.contains("--") {
        readable = readable.replace("--", "-");
    }
    if readable.is_empty() {
        readable = "leaves".into();
    }
    with_digest(&readable, &digest(&sorted.join("\n")))
}

/// How many leading bytes (by `at`) all names share, kept to a character boundary.
fn common(names: &[String], at: impl Fn(&str, usize) -> Option<u8>) -> usize {
    let Some(first) = names.first() else { return 0 };
    let mut i = 0;
    while let Some(c) = at(first, i) {
        if !c.is_ascii() || names.iter().any(|n| at(n, i) != Some(c)) {
            break;
        }
        i += 1;
    }
    i
}

/// `readable` cut to fit, then `-` and the digest.
fn with_digest(readable: &str, digest: &str) -> String {
    let keep = MAX_VALUE - DIGEST_LEN - 1;
    let mut head: String = readable.chars().take(keep).collect();
    while head.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        head.pop();
    }
    if head.is_empty() {
        digest.to_string()
    } else {
        format!("{head}-{digest}")
    }
}

/// Characters a label value may not hold become `-`; the ends are trimmed to
/// alphanumerics.
fn clean(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// FNV-1a (64 bits) of `s`, its low 32 bits as 8 hex digits: fixed by definition, so the
/// value is the same on every platform and version.
fn digest(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:08x}", h & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_switch_is_its_name_made_a_label_value() {
        assert_eq!(label_value("leaf-07").as_deref(), Some("leaf-07"));
        assert_eq!(
            label_value("MF0;leaf 7:x/").as_deref(),
            Some("MF0-leaf-7-x")
        );
        assert_eq!(label_value("--").as_deref(), None);
        let long = "a".repeat(80);
        let v = label_value(&long).unwrap();
        assert_eq!(v.len(), 63);
        assert!(v.starts_with(&"a".repeat(54)), "{v}");
    }

    #[test]
    fn every_value_is_a_valid_label_value() {
        let odd = [
            "MF0;Quantum-2 Mellanox Technologies:MQM9790/U1",
            "ñodo-é-7",
            "é",
            "_leaf_",
            "a.b.c",
            &"x-".repeat(40),
            &"é".repeat(70),
            "leaf~01~~",
        ];
        for s in odd {
            if let Some(v) = label_value(s) {
                assert_eq!(
                    crate::domain_labels::label_value_problem(&v),
                    None,
                    "{s:?} -> {v:?}"
                );
            }
        }
        for set in [&odd[..2], &odd[2..4], &odd[4..], &odd[..]] {
            let mut set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
            set.sort();
            let v = unit_value(&set);
            assert_eq!(
                crate::domain_labels::label_value_problem(&v),
                None,
                "{set:?} -> {v:?}"
            );
        }
    }

    #[test]
    fn a_set_of_leaves_is_a_readable_part_and_a_digest() {
        let su1: Vec<String> = (0..8).map(|r| format!("leaf-r{r}-su1")).collect();
        let v = unit_value(&su1);
        assert!(
            v.starts_with("leaf-r-su1-") && v.len() == "leaf-r-su1-".len() + 8,
            "{v}"
        );
        let su2: Vec<String> = (0..8).map(|r| format!("leaf-r{r}-su2")).collect();
        assert_ne!(unit_value(&su2), v);
        assert_eq!(unit_value(&su1), v, "stable");
        // The digest is FNV-1a: pinned, so a release never renames a unit.
        assert_eq!(digest(""), "84222325");
        assert_eq!(digest("a"), "8601ec8c");
        let v = unit_value(&names(&["alpha", "zulu"]));
        assert!(v.starts_with("leaves-"), "{v}");
        let v = unit_value(&names(&["ab", "abab"]));
        assert!(v.starts_with("ab-"), "{v}");
    }
}
