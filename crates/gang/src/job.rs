//! The job description `topoalign gang` reads, and its checks.
//!
//! ```yaml
//! name: train              # DNS label; pods are <name>-0 …
//! namespace: ml            # optional
//! pods: 4                  # the gang: all or none
//! pairsPerPod: 8           # GPUs per pod, each with its own NIC
//! class: PXB               # worst pair class accepted: PIX, PXB, PHB or NODE (default PXB)
//! sameRails: true          # every pod on the same rails (default true)
//! rails: [0, 1, 2, 3, 4, 5, 6, 7]   # optional; default 0 … pairsPerPod-1
//! podsPerNode: 1           # default 1
//! domain:
//!   level: nvlink          # node, nvlink-sub, nvlink, leaf, spine, core, tier-N
//!   key: nvidia.com/gpu.clique     # optional: one of the level's known keys
//!   mode: required         # or preferred
//!   sizes: {rack-a: 18, rack-b: 18} # optional: nodes per domain
//!   volcanoTier: 1         # optional: Volcano HyperNode tier of the level
//! queue: team-a            # Kueue LocalQueue (default `default`)
//! image: nvcr.io/nvidia/pytorch:25.01-py3   # default registry.k8s.io/pause:3.10
//! command: [torchrun, train.py]             # optional
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use topoalign_dra::publish::dns_label_problem;
use topoalign_kube_types::KubeVersion;
use topoalign_topology::PcieClass;

use topoalign_fabric::{Level, parse_document};

use crate::error::GangError;
use crate::fleet::FleetNode;

/// The image a job gets when it names none: it starts and waits, which is enough to see
/// where the gang lands.
pub const DEFAULT_IMAGE: &str = "registry.k8s.io/pause:3.10";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawJob {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    pods: u32,
    pairs_per_pod: u32,
    #[serde(default)]
    class: Option<String>,
    #[serde(default = "yes")]
    same_rails: bool,
    #[serde(default)]
    rails: Option<Vec<u32>>,
    #[serde(default)]
    pods_per_node: Option<u32>,
    domain: RawDomain,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    command: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawDomain {
    #[serde(default)]
    level: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    mode: Option<Mode>,
    #[serde(default)]
    sizes: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    volcano_tier: Option<u32>,
}

/// Whether the gang must stay inside one domain or only should.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Inside one domain or not at all.
    #[default]
    Required,
    /// Inside one domain where possible.
    Preferred,
}

/// A checked job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Name (a DNS label short enough for `<name>-<pod>`).
    pub name: String,
    /// Namespace, when given.
    pub namespace: Option<String>,
    /// Pods of the gang.
    pub pods: u32,
    /// GPU+NIC pairs per pod.
    pub pairs_per_pod: u32,
    /// Worst pair class accepted.
    pub class: PcieClass,
    /// The rails every pod uses (one pair per rail); `None` when rails are not pinned.
    pub rails: Option<BTreeSet<u32>>,
    /// Pods per node.
    pub pods_per_node: u32,
    /// The domain level.
    pub level: Level,
    /// The label key of the level (given, or the level's first known key).
    pub key: String,
    /// Whether the key was given by the user (else a fleet may choose another).
    pub key_given: bool,
    /// Required or preferred.
    pub mode: Mode,
    /// Nodes per domain, when given.
    pub sizes: Option<BTreeMap<String, u32>>,
    /// Volcano HyperNode tier for the level.
    pub volcano_tier: u32,
    /// Kueue LocalQueue.
    pub queue: String,
    /// Container image.
    pub image: String,
    /// Container command, when given.
    pub command: Option<Vec<String>>,
    /// The Kubernetes release the manifests are for; `None`: 1.36 or newer.
    pub kubernetes: Option<KubeVersion>,
}

impl Job {
    /// Whether the claims may use `distinctAttribute`: the cluster's API server keeps it
    /// (Kubernetes 1.36 or newer, where `DRAConsumableCapacity` is on by default). On
    /// older releases rails are pinned with one request per rail instead.
    pub fn distinct_attribute(&self) -> bool {
        self.kubernetes
            .is_none_or(KubeVersion::keeps_distinct_attribute)
    }

    /// Nodes the gang needs: pods over pods per node, rounded up.
    pub fn nodes_needed(&self) -> u32 {
        self.pods.div_ceil(self.pods_per_node)
    }
}

/// Reads and checks a job description (YAML or JSON); `file` names it in errors.
pub fn parse_job(text: &str, file: &str) -> Result<Job, GangError> {
    let raw: RawJob = parse_document(text, file)?;
    let field = |field: &str, why: String| GangError::Field {
        file: file.to_string(),
        field: field.to_string(),
        why,
    };
    // Pods are `<name>-<index>`: leave room for the index.
    let longest = format!("{}-{}", raw.name, raw.pods.saturating_sub(1));
    if let Some(why) = dns_label_problem(&raw.name).or_else(|| dns_label_problem(&longest)) {
        return Err(field(
            "name",
            format!("{:?} cannot name the job's objects: {why}", raw.name),
        ));
    }
    if let Some(ns) = &raw.namespace
        && let Some(why) = dns_label_problem(ns)
    {
        return Err(field(
            "namespace",
            format!("{ns:?} is not a namespace name: {why}"),
        ));
    }
    if raw.pods == 0 {
        return Err(field("pods", "a gang has at least 1 pod".into()));
    }
    if raw.pairs_per_pod == 0 {
        return Err(field(
            "pairsPerPod",
            "at least 1 GPU+NIC pair per pod".into(),
        ));
    }
    let class = match raw.class.as_deref() {
        None => PcieClass::Pxb,
        Some(c) => c.parse::<PcieClass>().map_err(|source| GangError::Class {
            file: file.to_string(),
            source,
        })?,
    };
    if class == PcieClass::Sys {
        return Err(field(
            "class",
            "SYS pairs are not published; use PIX, PXB, PHB or NODE".into(),
        ));
    }
    let rails = match (raw.same_rails, raw.rails) {
        (false, Some(_)) => {
            return Err(field(
                "rails",
                "a rail set needs sameRails: true (or leave rails out)".into(),
            ));
        }
        (false, None) => None,
        (true, None) => Some((0..raw.pairs_per_pod).collect()),
        (true, Some(list)) => {
            let set: BTreeSet<u32> = list.iter().copied().collect();
            if set.len() != list.len() {
                return Err(field("rails", format!("{list:?} names a rail twice")));
            }
            if set.len() != raw.pairs_per_pod as usize {
                return Err(field(
                    "rails",
                    format!(
                        "{} rails for {} pairs per pod: each pair of a pod takes its own rail, so give exactly {} rails",
                        set.len(),
                        raw.pairs_per_pod,
                        raw.pairs_per_pod
                    ),
                ));
            }
            Some(set)
        }
    };
    let pods_per_node = raw.pods_per_node.unwrap_or(1);
    if pods_per_node == 0 {
        return Err(field("podsPerNode", "at least 1".into()));
    }
    let level = match raw.domain.level.as_deref() {
        Some(l) => Some(l.parse::<Level>().map_err(|source| GangError::Level {
            file: file.to_string(),
            source,
        })?),
        None => None,
    };
    let (level, key, key_given) = match (level, raw.domain.key) {
        (None, None) => {
            return Err(field(
                "domain",
                format!("give a level ({}) or a key", Level::NAMES_TEXT),
            ));
        }
        (Some(l), None) => (l, l.key(), false),
        (l, Some(key)) => {
            let level = Level::check_key(&key, l).map_err(|source| GangError::UnknownKey {
                file: file.to_string(),
                field: "domain.key".into(),
                key: key.clone(),
                source,
            })?;
            (level, key, true)
        }
    };
    let job = Job {
        name: raw.name,
        namespace: raw.namespace,
        pods: raw.pods,
        pairs_per_pod: raw.pairs_per_pod,
        class,
        rails,
        pods_per_node,
        level,
        key,
        key_given,
        mode: raw.domain.mode.unwrap_or_default(),
        sizes: raw.domain.sizes,
        volcano_tier: raw.domain.volcano_tier.unwrap_or(level.volcano_tier()),
        queue: raw.queue.unwrap_or_else(|| "default".into()),
        image: raw.image.unwrap_or_else(|| DEFAULT_IMAGE.into()),
        command: raw.command,
        kubernetes: None,
    };
    if let Some(sizes) = &job.sizes {
        check_fits(&job, sizes)?;
    }
    Ok(job)
}

/// A gang that needs more nodes than the largest domain has is an error saying both
/// numbers. Only `required` gangs are refused: a preferred one may spread.
pub fn check_fits(job: &Job, sizes: &BTreeMap<String, u32>) -> Result<(), GangError> {
    let needed = job.nodes_needed();
    let largest = sizes
        .iter()
        .max_by_key(|(name, n)| (**n, std::cmp::Reverse(*name)));
    match largest {
        Some((name, n)) if *n < needed && job.mode == Mode::Required => Err(GangError::TooLarge {
            job: job.name.clone(),
            needed,
            pods: job.pods,
            per_node: job.pods_per_node,
            level: job.level.to_string(),
            largest: name.clone(),
            largest_size: *n,
        }),
        _ => Ok(()),
    }
}

/// Fits the job to a fleet: the key becomes the job's own when given, else the first of
/// the level's keys (in precedence order) that some node carries; the domain sizes become
/// the number of nodes per value of that key (nodes without it are left out), and a
/// required gang larger than every domain is refused.
pub fn fit_fleet(job: &mut Job, nodes: &[FleetNode], file: &str) -> Result<(), GangError> {
    let candidates = if job.key_given {
        vec![job.key.clone()]
    } else {
        job.level.keys()
    };
    let Some(key) = candidates
        .iter()
        .find(|k| nodes.iter().any(|n| n.labels.contains_key(*k)))
    else {
        return Err(GangError::NoDomainLabel {
            file: file.to_string(),
            level: job.level.to_string(),
            keys: candidates.join(", "),
        });
    };
    let mut sizes: BTreeMap<String, u32> = BTreeMap::new();
    for n in nodes {
        if let Some(v) = n.labels.get(key) {
            *sizes.entry(v.clone()).or_default() += 1;
        }
    }
    job.key = key.clone();
    check_fits(job, &sizes)?;
    job.sizes = Some(sizes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_needed_rounds_up() {
        let text = "name: j\npods: 5\npairsPerPod: 2\npodsPerNode: 2\ndomain: {level: leaf}\n";
        let j = parse_job(text, "j.yaml").unwrap();
        assert_eq!(j.nodes_needed(), 3);
        let sizes = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 3)]);
        assert!(check_fits(&j, &sizes).is_ok());
        let e = check_fits(&j, &BTreeMap::from([("a".to_string(), 2)])).unwrap_err();
        assert!(e.to_string().contains("needs 3 nodes"), "{e}");
    }
}
