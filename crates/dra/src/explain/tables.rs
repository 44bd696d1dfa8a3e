//! What `topoalign explain pod` and `explain --all` print as tables: a pod's claims, its
//! pairs beside the best free choice and why they differ ([`PodExplanation::table`]); one
//! line per pod of the cluster and the summary ([`ClusterAlignment::table`]).

use k8s_openapi::api::core::v1::Node;
use topoalign_kube_types::labels as keys;
use topoalign_render::Table;

use crate::explain::all::ClusterAlignment;
use crate::explain::pod::{ClaimReport, Kind, PairReport, Pairs, PodExplanation};

/// `v`, else `-`.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl ClusterAlignment {
    /// One line per pod (its pairs, classes, GDR and the better free choice), the pods
    /// that could not be explained, the summary line.
    pub fn table(&self) -> String {
        let header = [
            "POD",
            "NODE",
            "PAIRS",
            "CLASSES",
            "GDR",
            "BETTER FREE CHOICE",
        ];
        let mut t = Table::new(&header);
        for p in &self.pods {
            let gdr = match p.gdr {
                Some(true) => "yes",
                Some(false) => "no",
                None => "?",
            };
            let classes: Vec<String> = p.by_class.iter().map(|(c, n)| format!("{c}×{n}")).collect();
            let better = p.better.as_ref().map_or_else(
                || "-".to_string(),
                |b| {
                    let pairs: Vec<String> = (b.pairs.iter())
                        .map(|x| format!("{}→{} {}", x.gpu, x.nic_name, opt(x.class)))
                        .collect();
                    format!("worst {}: {}", opt(b.worst), pairs.join(", "))
                },
            );
            t.row(vec![
                p.pod.clone(),
                p.node.clone(),
                p.pairs.pairs.len().to_string(),
                classes.join(" "),
                gdr.to_string(),
                better,
            ]);
        }
        let mut out = if t.is_empty() {
            String::new()
        } else {
            t.render(2)
        };
        for (pod, why) in &self.unexplained {
            out += &format!("not explained: {pod}: {why}\n");
        }
        out + &format!("summary: {}\n", self.summary.text())
    }
}

impl ClaimReport {
    /// The claim's line (does the stock allocator's first fit agree?) and its devices.
    pub fn table(&self) -> String {
        let replay = match self.first_fit {
            Some(true) => "the stock allocator's first fit gives the same devices",
            Some(false) => "the stock allocator's first fit gives other devices",
            None => "the stock allocator could not be replayed",
        };
        let header = [
            "REQUEST", "DRIVER", "POOL", "DEVICE", "KIND", "GPU", "NIC", "CLASS",
        ];
        let mut t = Table::new(&header);
        for d in &self.devices {
            let kind = serde_json::to_value(d.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{:?}", d.kind));
            let kind = if d.kind == Kind::Unknown {
                "?".into()
            } else {
                kind
            };
            t.row(vec![
                d.request.clone(),
                d.driver.clone(),
                d.pool.clone(),
                d.device.clone(),
                kind,
                opt(d.gpu),
                opt(d.nic),
                opt(d.class),
            ]);
        }
        let (entry, claim) = (&self.entry, &self.claim);
        format!("claim {entry} ({claim}): {replay}\n{}", t.render(2))
    }
}

impl Pairs {
    /// `title (worst CLASS, rank sum N):` and one row per pair.
    pub fn table(&self, title: &str) -> String {
        let mut t = Table::new(&["GPU", "NIC", "CLASS", "GDR"]);
        for PairReport {
            gpu,
            nic,
            nic_name,
            class,
            gdr,
        } in &self.pairs
        {
            let gdr = gdr.map_or("?", |g| if g { "yes" } else { "no" });
            t.row(vec![
                gpu.to_string(),
                format!("{nic_name} ({nic})"),
                opt(*class),
                gdr.to_string(),
            ]);
        }
        let (worst, sum) = (opt(self.worst), self.rank_sum);
        format!("{title} (worst {worst}, rank sum {sum}):\n{}", t.render(2))
    }
}

impl PodExplanation {
    /// The pod's claims and devices (or extended resources), its pairs, the best free
    /// choice with the verdict, the reasons and notes.
    pub fn table(&self) -> String {
        let source = match self.source {
            "claims" => "devices from ResourceClaims",
            _ => "devices from device plugins",
        };
        let mut out = format!("pod {} on node {}: {source}\n", self.pod, self.node);
        for c in &self.claims {
            out += &format!("\n{}", c.table());
        }
        if let Some(dp) = &self.device_plugin {
            let mut t = Table::new(&["CONTAINER", "RESOURCE", "QUANTITY"]);
            for (c, asks) in &dp.resources {
                for (r, q) in asks {
                    t.row(vec![c.clone(), r.clone(), q.clone()]);
                }
            }
            if !t.is_empty() {
                out += &format!("\nextended resources:\n{}", t.render(2));
            }
            for (k, v) in &dp.node {
                out += &format!("node {k}: {v}\n");
            }
        }
        if !self.pairs.pairs.is_empty() {
            out += &format!("\n{}", self.pairs.table("pairs the pod got"));
        }
        if let Some(b) = &self.best {
            out += &b.table("best free choice (topoalign plan)");
            out += if self.as_good {
                "verdict: as good as the best free choice\n"
            } else {
                "verdict: WORSE than the best free choice\n"
            };
        }
        if !self.reasons.is_empty() {
            out += "why:\n";
            for r in &self.reasons {
                out += &format!("  - {r}\n");
            }
        }
        for n in &self.notes {
            out += &format!("note: {n}\n");
        }
        out
    }
}

/// What topoalign's agent says on a node (the annotations and labels it writes), for a
/// device-plugin pod's [`PodInput::node_facts`](crate::explain::PodInput::node_facts).
pub fn agent_node_facts(node: Option<&Node>) -> Vec<(String, String)> {
    let Some(n) = node else { return Vec::new() };
    let annotations = n.metadata.annotations.iter().flatten();
    let labels = n.metadata.labels.iter().flatten();
    let wanted = [
        keys::USED_ANNOTATION,
        keys::PAIRS_ANNOTATION,
        keys::BEST_PAIR_LABEL,
        keys::FABRIC_LABEL,
    ];
    annotations
        .chain(labels)
        .filter(|(k, _)| wanted.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `NS/NAME` → (NS, NAME): `explain pod`'s target, `None` unless both are there and the
/// name has no `/`.
pub fn parse_pod_key(target: &str) -> Option<(&str, &str)> {
    match target.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Some((ns, name))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_topology::PcieClass;

    use super::*;
    use crate::explain::all::{AlignmentSummary, PodAlignment};

    fn pairs(class: Option<PcieClass>) -> Pairs {
        Pairs {
            pairs: vec![PairReport {
                gpu: "0000:11:00.0".parse().unwrap(),
                nic: "0000:0c:00.0".parse().unwrap(),
                nic_name: "mlx5_0".into(),
                class,
                gdr: class.map(|c| c <= PcieClass::Pxb),
            }],
            worst: class,
            rank_sum: class.map_or(0, PcieClass::rank),
        }
    }

    #[test]
    fn the_pod_key_is_namespace_slash_name() {
        assert_eq!(parse_pod_key("ml/train-0"), Some(("ml", "train-0")));
        for bad in ["train-0", "/x", "ml/", "a/b/c"] {
            assert_eq!(parse_pod_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_pairs_table_says_worst_class_and_gdr() {
        let text = pairs(Some(PcieClass::Node)).table("got");
        assert!(
            text.starts_with("got (worst NODE, rank sum 3):\n"),
            "{text}"
        );
        assert!(text.contains("mlx5_0 (0000:0c:00.0)  NODE   no"), "{text}");
        let unknown = pairs(None).table("got");
        assert!(unknown.contains("(worst -, rank sum 0)") && unknown.contains("?"));
    }

    #[test]
    fn the_cluster_table_names_the_better_choice_and_ends_with_the_summary() {
        let a = ClusterAlignment {
            pods: vec![PodAlignment {
                pod: "ml/a".into(),
                node: "n1".into(),
                pairs: pairs(Some(PcieClass::Sys)),
                by_class: BTreeMap::from([("SYS".to_string(), 1)]),
                gdr: Some(false),
                better: Some(pairs(Some(PcieClass::Pix))),
                notes: vec![],
            }],
            unexplained: vec![("ml/b".into(), "no slices".into())],
            summary: AlignmentSummary::default(),
        };
        let text = a.table();
        assert!(text.contains("SYS×1") && text.contains("worst PIX: 0000:11:00.0→mlx5_0 PIX"));
        assert!(text.contains("not explained: ml/b: no slices\n"), "{text}");
        assert!(
            text.lines().last().unwrap().starts_with("summary: "),
            "{text}"
        );
    }
}
