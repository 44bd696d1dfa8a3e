//! A node's domain labels where no tool has written them: the NVLink clique derived from
//! the GPUs (`nvidia-smi -q`, `topoalign_mig::node_clique`), the leaf derived from the
//! NICs' neighbours (`crate::derive_leaf`) and, where nothing is readable, the labels of an
//! operator's domain file, minus every level the node already carries a label for from
//! someone else (Topograph, GPU feature discovery, the cloud). Pure: the node agent and
//! the DRA driver read the inputs and apply the answer.
//!
//! The domain file, for one node or for many (the form a ConfigMap mounted on every node
//! takes):
//!
//! ```yaml
//! labels:                                # this node
//!   fabric.topograph.run/tier-0: leaf-07
//!   accelerator.topograph.run/domain: rack-12
//! ---
//! nodes:                                 # or per node name
//!   gpu-node-1: {fabric.topograph.run/tier-0: leaf-07}
//!   gpu-node-2: {fabric.topograph.run/tier-0: leaf-08}
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::document::{child, parse_document};
use crate::domain_keys::{GFD_CLIQUE, Level};
use crate::error::FabricError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDomainFile {
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    nodes: Option<BTreeMap<String, BTreeMap<String, String>>>,
}

/// An operator's domain file, checked: every key a known domain label key (not
/// `kubernetes.io/hostname`, which the kubelet owns), every value a label value, and no
/// two keys of one level with different values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainFile {
    file: String,
    /// The labels of every node (`labels:`), when given.
    all: Option<BTreeMap<String, String>>,
    /// The labels per node name (`nodes:`).
    nodes: BTreeMap<String, BTreeMap<String, String>>,
}

/// Why a label value is refused (Kubernetes: at most 63 characters, alphanumerics at
/// both ends, `-`, `_` and `.` inside).
pub(crate) fn label_value_problem(v: &str) -> Option<String> {
    if v.len() > 63 {
        return Some(format!(
            "{} characters; a label value has at most 63",
            v.len()
        ));
    }
    let inner_ok = v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends_ok = v.is_empty()
        || (v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric());
    (!inner_ok || !ends_ok).then(|| {
        "a label value is alphanumerics with '-', '_' or '.' inside, starting and ending alphanumeric".into()
    })
}

fn check_labels(
    labels: &BTreeMap<String, String>,
    file: &str,
    at: &str,
) -> Result<(), FabricError> {
    let mut by_level: BTreeMap<Level, (&str, &str)> = BTreeMap::new();
    for (key, value) in labels {
        let field = child(at, key);
        let level = Level::check_key(key, None).map_err(|source| FabricError::UnknownKey {
            file: file.to_string(),
            field: field.clone(),
            key: key.clone(),
            source,
        })?;
        let bad = |why: String| FabricError::Field {
            file: file.to_string(),
            field: field.clone(),
            why,
        };
        if level == Level::Node {
            return Err(bad(
                "the kubelet writes kubernetes.io/hostname; give an NVLink or fabric level".into(),
            ));
        }
        if value.is_empty() {
            return Err(bad("an empty value names no domain".into()));
        }
        if let Some(why) = label_value_problem(value) {
            return Err(bad(format!("{value:?}: {why}")));
        }
        if let Some((k, v)) = by_level.insert(level, (key, value))
            && v != value
        {
            return Err(bad(format!(
                "{value:?} conflicts with {k}: {v:?}, a key of the same level ({level}); give one value per level"
            )));
        }
    }
    Ok(())
}

/// Reads and checks a domain file (YAML or JSON); `file` names it in errors.
pub fn parse_domain_file(text: &str, file: &str) -> Result<DomainFile, FabricError> {
    let raw: RawDomainFile = parse_document(text, file)?;
    if raw.labels.is_none() && raw.nodes.is_none() {
        return Err(FabricError::Field {
            file: file.to_string(),
            field: ".".into(),
            why: "expected labels (this node's domain labels) or nodes (labels per node name)"
                .into(),
        });
    }
    if let Some(l) = &raw.labels {
        check_labels(l, file, "labels")?;
    }
    let nodes = raw.nodes.unwrap_or_default();
    for (name, l) in &nodes {
        check_labels(l, file, &child("nodes", name))?;
    }
    Ok(DomainFile {
        file: file.to_string(),
        all: raw.labels,
        nodes,
    })
}

impl DomainFile {
    /// The labels the file gives `node`: its own entry over the file's `labels:`.
    pub fn for_node(&self, node: &str) -> BTreeMap<String, String> {
        let mut out = self.all.clone().unwrap_or_default();
        if let Some(own) = self.nodes.get(node) {
            // One value per level: the node's own entry replaces the level's keys.
            let levels: BTreeSet<Level> = own.keys().filter_map(|k| Level::of_key(k)).collect();
            out.retain(|k, _| Level::of_key(k).is_none_or(|l| !levels.contains(&l)));
            out.extend(own.clone());
        }
        out
    }

    /// The file's name.
    pub fn file(&self) -> &str {
        &self.file
    }
}

/// What a node's domain labels should be, from what is already there and what was
/// derived or given.
#[derive(Debug, Clone, Copy)]
pub struct DomainInputs<'a> {
    /// The node's labels now.
    pub existing: &'a BTreeMap<String, String>,
    /// The keys among them that this writer wrote earlier (its own, free to change).
    pub owned: &'a BTreeSet<String>,
    /// The NVLink clique derived from the GPUs, when there is one.
    pub clique: Option<&'a str>,
    /// The operator's labels for this node ([`DomainFile::for_node`]).
    pub operator: &'a BTreeMap<String, String>,
}

/// The domain labels to write, and what was left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DomainLabels {
    /// Labels to write (this writer owns them).
    pub write: BTreeMap<String, String>,
    /// Where each written label comes from (`nvidia-smi -q`, the file's name).
    pub sources: BTreeMap<String, String>,
    /// What was not written and why.
    pub notes: Vec<String>,
}

/// A domain label derived from the node's own facts (the leaf from its NICs' neighbours,
/// [`crate::derive_leaf`]): below every other source in precedence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DerivedLabel {
    /// The label key (`fabric.topograph.run/tier-0`).
    pub key: String,
    /// Its value (a valid label value).
    pub value: String,
    /// Where it comes from, in words (`LLDP neighbours`).
    pub source: String,
}

/// The labels to write: the derived clique as `nvidia.com/gpu.clique` and the operator's
/// labels (the derived value wins where both name one key), each dropped when the node
/// already has a label of its level that this writer does not own.
pub fn domain_labels(input: DomainInputs<'_>, operator_file: &str) -> DomainLabels {
    domain_labels_with(input, operator_file, &[])
}

/// [`domain_labels`] with labels derived from the node's wiring (the leaf from its NICs'
/// neighbours): like the GPUs' clique, a derived label is read off the machine, so it wins
/// over the operator's file for its level (the file is the fallback where nothing is
/// readable; a disagreement is noted), and it is written only where the node carries no
/// label of its level from someone else.
pub fn domain_labels_with(
    input: DomainInputs<'_>,
    operator_file: &str,
    derived: &[DerivedLabel],
) -> DomainLabels {
    let mut out = DomainLabels::default();
    let mut wanted: BTreeMap<String, (String, String)> = input
        .operator
        .iter()
        .map(|(k, v)| (k.clone(), (v.clone(), operator_file.to_string())))
        .collect();
    if let Some(c) = input.clique {
        if let Some((v, _)) = wanted.get(GFD_CLIQUE)
            && v != c
        {
            out.notes.push(format!(
                "{GFD_CLIQUE}: {operator_file} says {v:?}, the GPUs say {c:?}: the GPUs' value is written"
            ));
        }
        wanted.insert(GFD_CLIQUE.into(), (c.to_string(), "nvidia-smi -q".into()));
    }
    for d in derived {
        let Some(level) = Level::of_key(&d.key) else {
            continue;
        };
        let given: Vec<String> = wanted
            .keys()
            .filter(|k| Level::of_key(k) == Some(level))
            .cloned()
            .collect();
        for k in given {
            if let Some((v, source)) = wanted.remove(&k)
                && (k != d.key || v != d.value)
            {
                out.notes.push(format!(
                    "{k}={v} ({source}) not written: the {} give {}={}",
                    d.source, d.key, d.value
                ));
            }
        }
        wanted.insert(d.key.clone(), (d.value.clone(), d.source.clone()));
    }
    // Levels someone else has labelled already, each by its key of highest precedence.
    let mut foreign: BTreeMap<Level, (&String, &String)> = BTreeMap::new();
    for (k, v) in input.existing {
        let Some(level) = Level::of_key(k).filter(|_| !input.owned.contains(k)) else {
            continue;
        };
        let rank = |key: &str| level.keys().iter().position(|x| x == key);
        match foreign.get(&level) {
            Some((held, _)) if rank(held) <= rank(k) => {}
            _ => {
                foreign.insert(level, (k, v));
            }
        }
    }
    for (key, (value, source)) in wanted {
        let Some(level) = Level::of_key(&key) else {
            continue;
        };
        if let Some((k, v)) = foreign.get(&level) {
            if *k != &key || *v != &value {
                out.notes.push(format!(
                    "{key}={value} ({source}) not written: the node already has {k}={v} for its {level} domain"
                ));
            }
            continue;
        }
        out.sources.insert(key.clone(), source);
        out.write.insert(key, value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_file_for_one_node_or_many() {
        let f = parse_domain_file(
            "labels: {fabric.topograph.run/tier-1: spine-2}\nnodes:\n  n1: {fabric.topograph.run/tier-0: leaf-7, network.topology.nvidia.com/spine: spine-3}\n",
            "d.yaml",
        )
        .unwrap();
        assert_eq!(
            f.for_node("n1"),
            map(&[
                ("fabric.topograph.run/tier-0", "leaf-7"),
                ("network.topology.nvidia.com/spine", "spine-3"),
            ]),
            "the node's own spine replaces the file-wide one"
        );
        assert_eq!(
            f.for_node("n2"),
            map(&[("fabric.topograph.run/tier-1", "spine-2")])
        );
    }

    #[test]
    fn bad_files_name_the_field() {
        let err = |text: &str| parse_domain_file(text, "d.yaml").unwrap_err().to_string();
        let e = err("labels: {example.com/rack: r1}\n");
        assert!(
            e.contains("d.yaml: labels.\"example.com/rack\": unknown domain label key"),
            "{e}"
        );
        let e = err("labels: {kubernetes.io/hostname: n1}\n");
        assert!(e.contains("kubelet writes"), "{e}");
        let e = err("labels: {fabric.topograph.run/tier-0: 'leaf 7'}\n");
        assert!(e.contains("label value"), "{e}");
        let e = err(
            "labels: {fabric.topograph.run/tier-0: leaf-7, network.topology.nvidia.com/leaf: leaf-8}\n",
        );
        assert!(e.contains("conflicts with") && e.contains("(leaf)"), "{e}");
        let e = err("{}\n");
        assert!(e.contains("expected labels"), "{e}");
        let e = err("labels: [a]\n");
        assert!(e.contains("d.yaml: labels"), "{e}");
    }

    #[test]
    fn only_levels_nobody_else_labelled_are_written() {
        let existing = map(&[
            ("accelerator.topograph.run/domain", "rack-a"),
            ("fabric.topograph.run/tier-0", "leaf-1"),
            ("nvidia.com/gpu.clique", "old.1"),
        ]);
        let owned = BTreeSet::from(["fabric.topograph.run/tier-0".to_string()]);
        let operator = map(&[
            ("fabric.topograph.run/tier-0", "leaf-2"),
            ("fabric.topograph.run/tier-1", "spine-1"),
        ]);
        let out = domain_labels(
            DomainInputs {
                existing: &existing,
                owned: &owned,
                clique: Some("uuid.7"),
                operator: &operator,
            },
            "d.yaml",
        );
        // The NVLink level is Topograph's (rack-a); the leaf was ours and changes.
        assert_eq!(
            out.write,
            map(&[
                ("fabric.topograph.run/tier-0", "leaf-2"),
                ("fabric.topograph.run/tier-1", "spine-1"),
            ])
        );
        assert_eq!(out.sources["fabric.topograph.run/tier-1"], "d.yaml");
        assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
        assert!(out.notes[0].contains("accelerator.topograph.run/domain=rack-a"));
    }

    #[test]
    fn the_derived_clique_is_written_where_the_level_is_free() {
        let none = BTreeMap::new();
        let operator = map(&[("nvidia.com/gpu.clique", "typo.7")]);
        let out = domain_labels(
            DomainInputs {
                existing: &map(&[("kubernetes.io/hostname", "n1")]),
                owned: &BTreeSet::new(),
                clique: Some("uuid.7"),
                operator: &operator,
            },
            "d.yaml",
        );
        assert_eq!(out.write, map(&[("nvidia.com/gpu.clique", "uuid.7")]));
        assert_eq!(out.sources["nvidia.com/gpu.clique"], "nvidia-smi -q");
        assert!(out.notes[0].contains("the GPUs' value is written"));
        let out = domain_labels(
            DomainInputs {
                existing: &none,
                owned: &BTreeSet::new(),
                clique: None,
                operator: &none,
            },
            "d.yaml",
        );
        assert_eq!(out, DomainLabels::default());
    }
}
